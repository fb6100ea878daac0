# SPDX-License-Identifier: GPL-2.0-or-later
"""Runs vsriov's C qtests (built inside QEMU's tree by scripts/build-qemu)
against our QEMU, in TAP mode, and fails on any failed test case."""
import os
import subprocess

import pytest

from harness import paths

HERE = os.path.dirname(__file__)
with open(os.path.join(HERE, "targets")) as f:
    TARGETS = [line.strip() for line in f if line.strip()]


@pytest.mark.parametrize("name", TARGETS)
def test_qtest(name, artifacts):
    binary = paths.qtest(name)
    assert os.access(binary, os.X_OK), f"{binary} not built (scripts/build-qemu builds it)"
    env = dict(os.environ, QTEST_QEMU_BINARY=paths.QEMU_BIN,
               QTEST_QEMU_IMG=os.path.join(paths.QEMU_BUILD, "qemu-img"))
    p = subprocess.run([binary, "--tap", "-k"], env=env, capture_output=True, text=True,
                       timeout=600)
    with open(os.path.join(artifacts, f"{name}.tap"), "w") as f:
        f.write(p.stdout + p.stderr)
    failed = [line for line in p.stdout.splitlines() if line.startswith("not ok")]
    passed = [line for line in p.stdout.splitlines() if line.startswith("ok")]
    assert p.returncode == 0 and not failed, f"{name}:\n{p.stdout}\n{p.stderr}"
    assert passed, f"{name} ran no test case:\n{p.stdout}\n{p.stderr}"
