# SPDX-License-Identifier: GPL-2.0-or-later
"""Our patches and QEMU code pass the style checkers their upstreams use:
the guest kernel series passes the kernel's scripts/checkpatch.pl --strict
(from the pinned linux-source) and is signed off; the QEMU series and our
QEMU code (hw-virtio-sriov/, tests/qtest/) pass QEMU's checkpatch.pl."""
import glob
import os
import subprocess

import pytest

from harness import paths

KERNEL_CHECKPATCH = paths.guest("linux-source/scripts/checkpatch.pl")
QEMU_CHECKPATCH = os.path.join(paths.CACHE, "qemu-src", "scripts", "checkpatch.pl")
KERNEL_PATCHES = sorted(glob.glob(os.path.join(paths.SRC, "guest-kernel-patches", "*.patch")))
QEMU_PATCHES = sorted(glob.glob(os.path.join(paths.SRC, "qemu-patches", "*.patch")))
# Relative to the source tree: checkpatch's rules for tests/ go by the path.
QEMU_FILES = sorted(os.path.relpath(f, paths.SRC) for f in
                    glob.glob(os.path.join(paths.SRC, "hw-virtio-sriov", "*.[ch]")) +
                    glob.glob(os.path.join(paths.SRC, "tests", "qtest", "*.[ch]")))


def checkpatch(script, args):
    assert os.path.exists(script), f"{script} missing (scripts/build builds it)"
    p = subprocess.run(["perl", script, "--no-tree", *args], capture_output=True, text=True,
                       cwd=paths.SRC)
    return p.returncode, p.stdout + p.stderr


@pytest.mark.parametrize("patch", KERNEL_PATCHES, ids=os.path.basename)
def test_kernel_patch_checkpatch_strict(patch):
    # (a Fixes: tag names a mainline commit, which no tree here has)
    rc, out = checkpatch(KERNEL_CHECKPATCH, ["--strict", "--ignore", "UNKNOWN_COMMIT_ID",
                                             patch])
    assert rc == 0 and "0 errors, 0 warnings, 0 checks" in out, out
    with open(patch) as f:
        text = f.read()
    author = next(line[len("From: "):] for line in text.splitlines() if line.startswith("From: "))
    assert f"Signed-off-by: {author}" in text, f"{patch}: no Signed-off-by of its author"


@pytest.mark.parametrize("patch", QEMU_PATCHES, ids=os.path.basename)
def test_qemu_patch_checkpatch(patch):
    rc, out = checkpatch(QEMU_CHECKPATCH, [patch])
    assert rc == 0, out


def test_qemu_code_checkpatch():
    rc, out = checkpatch(QEMU_CHECKPATCH, ["-f", *QEMU_FILES])
    assert rc == 0, out
