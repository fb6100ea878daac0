# SPDX-License-Identifier: GPL-2.0-or-later
"""The SR-IOV CNI patch series (sriov-cni-patch/*.patch) and the SR-IOV
network device plugin series (sriov-cni-patch/device-plugin/*.patch) add the
Go files of sriov-cni-patch/pkg/utils verbatim, so what this repository
tests is what the patches ship; and every patch carries a Signed-off-by."""
import glob
import os
import re

from harness import paths

import pytest

DIR = os.path.join(paths.SRC, "sriov-cni-patch")
SERIES = {"sriov-cni": DIR, "device-plugin": os.path.join(DIR, "device-plugin")}


def added_files(patch_text):
    """{path: content} of files a git patch creates."""
    files = {}
    for m in re.finditer(r"^diff --git a/(\S+) b/\S+\nnew file mode \d+\n.*?\n@@ [^\n]*\n(.*?)(?=^diff --git |^-- \n)",
                         patch_text, re.S | re.M):
        lines = [line[1:] for line in m.group(2).splitlines() if line.startswith("+")]
        files[m.group(1)] = "\n".join(lines) + "\n"
    return files


@pytest.mark.parametrize("series", SERIES)
def test_series_adds_our_go_files_verbatim(series):
    patches = sorted(glob.glob(os.path.join(SERIES[series], "*.patch")))
    assert patches, "no patch in sriov-cni-patch/"
    added = {}
    for p in patches:
        with open(p) as f:
            added.update(added_files(f.read()))
    for name in ("pkg/utils/netdev_sysfs.go", "pkg/utils/netdev_sysfs_test.go"):
        assert name in added, f"{name} is not added by the series"
        with open(os.path.join(DIR, name)) as f:
            assert added[name] == f.read(), f"{name} differs from the one the patch adds"


@pytest.mark.parametrize("series", SERIES)
def test_series_is_signed_off(series):
    for p in sorted(glob.glob(os.path.join(SERIES[series], "*.patch"))):
        with open(p) as f:
            text = f.read()
        assert re.search(r"^Signed-off-by: .+ <.+@.+>$", text, re.M), f"{p} lacks Signed-off-by"
        assert re.search(r"^Subject: \[PATCH \d+/\d+\] utils: ", text, re.M), p
