# SPDX-License-Identifier: GPL-2.0-or-later
"""Go code of this repository: `go vet` and `go test` (the sysfs helpers
that sriov-cni-patch/ adds to SR-IOV CNI), and gofmt; the
CNI flow program of tests/cni-flow, the kubelet stub of tests/kubelet-stub
and the traffic tool of tests/traffic are gofmt/vet clean and build."""
import os
import re
import subprocess

import pytest

from harness import paths

MODULE = os.path.join(paths.SRC, "sriov-cni-patch")
MODULES = [MODULE, os.path.join(paths.SRC, "tests", "cni-flow"),
           os.path.join(paths.SRC, "tests", "kubelet-stub"),
           os.path.join(paths.SRC, "tests", "traffic")]
ENV = dict(os.environ, GOFLAGS="-mod=mod", CGO_ENABLED="0",
           GOCACHE=os.path.join(paths.CACHE, "go-build"))


def go(*args, cwd=MODULE):
    return subprocess.run(["go", *args], cwd=cwd, env=ENV, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.parametrize("module", MODULES, ids=os.path.basename)
def test_gofmt_clean(module):
    p = subprocess.run(["gofmt", "-l", "."], cwd=module, capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout == "", f"not gofmt-clean:\n{p.stdout}{p.stderr}"


@pytest.mark.parametrize("module", MODULES, ids=os.path.basename)
def test_go_vet(module):
    p = go("vet", "./...", cwd=module)
    assert p.returncode == 0, p.stdout + p.stderr


def test_go_test():
    p = go("test", "-count=1", "-v", "./...")
    assert p.returncode == 0, p.stdout + p.stderr
    # The series' Ginkgo specs (netdev_sysfs_test.go), all of them.
    assert "--- PASS: TestNetdevSysfs" in p.stdout, p.stdout
    assert re.search(r"Ran (\d+) of \1 Specs", p.stdout), p.stdout
