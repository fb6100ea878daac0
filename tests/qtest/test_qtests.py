# SPDX-License-Identifier: GPL-2.0-or-later
"""Runs vsriov's C qtests (built inside QEMU's tree by scripts/build-qemu)
against our QEMU, in TAP mode, and fails on any failed test case.  Each runs
twice: with the normal build, and with the ASan/UBSan build (whose QEMU
aborts, failing the test, on any memory error, leak or undefined
behaviour)."""
import os
import subprocess

import pytest

from harness import paths

HERE = os.path.dirname(__file__)
with open(os.path.join(HERE, "targets")) as f:
    TARGETS = [line.strip() for line in f if line.strip()]


BUILDS = {"normal": paths.QEMU_BUILD, "asan": paths.QEMU_BUILD_ASAN}
SANITIZER_ENV = {
    "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=1:print_stacktrace=1",
    "UBSAN_OPTIONS": "halt_on_error=1:abort_on_error=1:print_stacktrace=1",
    "LSAN_OPTIONS": f"suppressions={os.path.join(HERE, 'lsan.supp')}",
}


@pytest.mark.parametrize("build", BUILDS)
@pytest.mark.parametrize("name", TARGETS)
def test_qtest(name, build, artifacts):
    tree = BUILDS[build]
    binary = os.path.join(tree, "tests", "qtest", "vsriov", name)
    assert os.access(binary, os.X_OK), f"{binary} not built (scripts/build-qemu --asan builds it)"
    env = dict(os.environ, QTEST_QEMU_BINARY=os.path.join(tree, "qemu-system-x86_64"))
    if build == "asan":
        env.update(SANITIZER_ENV)
    p = subprocess.run([binary, "--tap", "-k"], env=env, capture_output=True, text=True,
                       timeout=600)
    with open(os.path.join(artifacts, f"{name}-{build}.tap"), "w") as f:
        f.write(p.stdout + p.stderr)
    failed = [line for line in p.stdout.splitlines() if line.startswith("not ok")]
    passed = [line for line in p.stdout.splitlines() if line.startswith("ok")]
    assert p.returncode == 0 and not failed, f"{name}:\n{p.stdout}\n{p.stderr}"
    assert passed, f"{name} ran no test case:\n{p.stdout}\n{p.stderr}"
