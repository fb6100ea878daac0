# SPDX-License-Identifier: GPL-2.0-or-later
"""hw-virtio-sriov/ calls in one direction only (docs/architecture.md,
"Layers"): each file may use the public functions of files in a lower
layer, never those of a file in its own layer or a higher one.  What a
lower layer has to say goes back up through a callback the caller passed
(VsriovStageDone, VsriovVFConfigDone, VsriovPoolDone...), which this
check does not see as a use since those functions are static.

A use is any mention of the function's name (a call, or its address taken
as a callback) outside comments and strings."""
import os
import re

import pytest

from harness import paths

SRC = os.path.join(paths.SRC, "hw-virtio-sriov")

# Top to bottom.
LAYERS = [
    ("hooks (virtio-net-pci's entry points)", ["hooks.c"]),
    ("channels", ["admin.c", "qmp.c"]),
    ("migration", ["migration.c"]),
    ("flow offload", ["flow.c"]),
    ("switchdev mode", ["eswitch.c"]),
    ("PF core", ["vpf.c"]),
    ("VF configuration core", ["vf-config.c"]),
    ("VF counters", ["vf-stats.c"]),
    ("pool providers", ["daemon-pool.c", "vdpa-mem.c"]),
    ("the daemon pool's connection", ["daemon-client.c"]),
    ("pool interface", ["pool.c"]),
]

COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
STRING = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'')
# A function definition: at the start of a line, not static, its
# parameter list followed by a body.
DEFINITION = re.compile(r"^(?!static\b)[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\s*\(([^;{]*?)\)\s*\{",
                        re.M)
NAME = re.compile(r"\b[A-Za-z_]\w*\b")


def code(text):
    """@text without comments and string or character literals."""
    text = COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return STRING.sub('""', text)


def public_functions(text):
    return {m.group(1) for m in DEFINITION.finditer(code(text))
            if m.group(1) not in ("if", "for", "while", "switch", "return")}


def layer_uses(files):
    """For {file name: text}, the uses that go against LAYERS: a list of
    (user, used function, its file)."""
    layer = {f: i for i, (_, fs) in enumerate(LAYERS) for f in fs}
    defined = {}
    for f, text in files.items():
        for fn in public_functions(text):
            defined[fn] = f
    wrong = []
    for f, text in files.items():
        for name in sorted(set(NAME.findall(code(text)))):
            g = defined.get(name)
            if g and g != f and layer[g] <= layer[f]:
                wrong.append((f, name, g))
    return wrong


def tree():
    return {f: open(os.path.join(SRC, f)).read()
            for f in sorted(os.listdir(SRC)) if f.endswith(".c")}


def test_every_file_has_a_layer():
    listed = {f for _, fs in LAYERS for f in fs}
    assert set(tree()) == listed, "hw-virtio-sriov/*.c and LAYERS differ"


def test_calls_go_down_only():
    wrong = layer_uses(tree())
    assert not wrong, "\n".join(
        f"{user} uses {fn}() of {owner}, which is not in a lower layer"
        for user, fn, owner in wrong)


@pytest.mark.parametrize("user,owner", [("vf-config.c", "vpf.c"), ("pool.c", "vpf.c"),
                                        ("admin.c", "qmp.c")])
def test_the_check_sees_an_upward_use(user, owner):
    """The check itself: a use of a higher layer's (or the same layer's)
    function, as a call or as a callback, is reported."""
    files = tree()
    fn = sorted(public_functions(files[owner]))[0]
    files[user] += f"\nstatic void *up(void)\n{{\n    return (void *){fn};\n}}\n"
    assert (user, fn, owner) in layer_uses(files)
    files[user] = tree()[user] + f"\n/* {fn}() in a comment is no use */\n"
    assert layer_uses(files) == []
