# SPDX-License-Identifier: GPL-2.0-or-later
"""The C unit tests of our own meson project (vdpa-pool-daemon's, under
ASan and UBSan): `meson test --suite unit` must pass and run something."""
import os
import subprocess

from harness import paths


def test_meson_unit_suite():
    build = os.environ.get("VSRIOV_BUILD_OURS")
    assert build and os.path.isdir(build), "VSRIOV_BUILD_OURS not set (run through scripts/test)"
    meson = os.path.join(paths.CACHE, "venv", "bin", "meson")
    p = subprocess.run([meson, "test", "-C", build, "--suite", "unit", "--print-errorlogs"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Fail:              0" in p.stdout and "Ok:                0" not in p.stdout, p.stdout
