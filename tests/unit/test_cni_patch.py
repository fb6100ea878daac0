# SPDX-License-Identifier: GPL-2.0-or-later
"""The SR-IOV CNI series (sriov-cni-patch/*.patch) adds the Go files of
sriov-cni-patch/pkg/utils verbatim, so what this repository tests is what
the series ships (the other files there are ours: a Ginkgo runner, a test
on a live sysfs, what tests/cni-flow uses); the device plugin series
(sriov-cni-patch/device-plugin/*.patch) changes upstream's files only.
Every patch is signed off by its author and speaks of virtio-net, not of
this project, in what it adds; each series has a cover letter.
tests/unit/test_upstream_plugins.py applies, builds, lints and tests them."""
import glob
import os
import re

from harness import paths

import pytest

DIR = os.path.join(paths.SRC, "sriov-cni-patch")
SERIES = {"sriov-cni": DIR, "device-plugin": os.path.join(DIR, "device-plugin")}
COVER = "0000-cover-letter.patch"
# Files of sriov-cni-patch/pkg/utils that the series does not add.
OURS = {"suite_test.go", "live_test.go", "cniflow.go"}


def patches(series):
    found = sorted(glob.glob(os.path.join(SERIES[series], "*.patch")))
    assert found, f"no patch in {SERIES[series]}"
    return [p for p in found if os.path.basename(p) != COVER]


def read(path):
    with open(path) as f:
        return f.read()


def added_files(patch_text):
    """{path: content} of files a git patch creates."""
    files = {}
    for m in re.finditer(r"^diff --git a/(\S+) b/\S+\nnew file mode \d+\n.*?\n@@ [^\n]*\n(.*?)(?=^diff --git |^-- \n)",
                         patch_text, re.S | re.M):
        lines = [line[1:] for line in m.group(2).splitlines() if line.startswith("+")]
        files[m.group(1)] = "\n".join(lines) + "\n"
    return files


def test_cni_series_adds_our_go_files_verbatim():
    added = {}
    for p in patches("sriov-cni"):
        added.update(added_files(read(p)))
    ours = {os.path.basename(f) for f in glob.glob(os.path.join(DIR, "pkg", "utils", "*.go"))}
    added_utils = {os.path.basename(f) for f in added if f.startswith("pkg/utils/")}
    assert added_utils, "the series adds no file to pkg/utils"
    assert ours - OURS == added_utils, \
        f"sriov-cni-patch/pkg/utils has {sorted(ours - OURS)}, the series adds {sorted(added_utils)}"
    for name in added_utils:
        assert added[f"pkg/utils/{name}"] == read(os.path.join(DIR, "pkg", "utils", name)), \
            f"{name} differs from the one the patch adds"


def test_device_plugin_series_adds_no_file():
    """Its fix is a few lines in upstream's pkg/utils/utils.go."""
    for p in patches("device-plugin"):
        assert not added_files(read(p)), f"{p} adds files"


@pytest.mark.parametrize("series", SERIES)
def test_series_is_signed_off(series):
    for p in patches(series) + [os.path.join(SERIES[series], COVER)]:
        text = read(p)
        author = re.search(r"^From: (.+ <.+@.+>)$", text, re.M)
        assert author, f"{p} has no author"
        assert re.search(r"^Subject: \[PATCH \d+/\d+\] \S", text, re.M), p
        if not p.endswith(COVER):
            assert f"Signed-off-by: {author.group(1)}" in text, f"{p}: no Signed-off-by of its author"


@pytest.mark.parametrize("series", SERIES)
def test_series_speaks_of_virtio_net_not_of_us(series):
    """Neither the lines a patch adds nor its commit message name this
    project (the author's address aside)."""
    for p in patches(series):
        text = read(p)
        message = text[text.index("\nSubject: "):text.index("\n---\n")]
        added = [line for line in text.splitlines() if line.startswith("+") and not line.startswith("+++")]
        for line in message.splitlines() + added:
            if not line.startswith(("Signed-off-by: ", "From: ")):
                assert "vsriov" not in line.lower(), f"{os.path.basename(p)}: {line}"
