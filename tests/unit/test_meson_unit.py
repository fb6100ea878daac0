# SPDX-License-Identifier: GPL-2.0-or-later
"""The C unit tests of our own meson project (vdpa-pool-daemon's, under
ASan and UBSan): `meson test --suite unit` must run every test of the
suite and every one of their TAP subtests, with none failed or skipped."""
import json
import os
import re
import subprocess

from harness import paths

SKIPPED_SUBTEST = re.compile(r"^ok \d+\b.*#\s*skip", re.I | re.M)


def test_meson_unit_suite():
    build = os.environ.get("VSRIOV_BUILD_OURS")
    assert build and os.path.isdir(build), "VSRIOV_BUILD_OURS not set (run through scripts/test)"
    meson = os.path.join(paths.CACHE, "venv", "bin", "meson")
    listed = subprocess.run([meson, "test", "-C", build, "--suite", "unit", "--list"],
                            capture_output=True, text=True, check=True, timeout=600
                            ).stdout.split("\n")
    listed = sorted(name for name in listed if name)
    # A log of this run's own: another run in the same build folder cannot
    # write into it.
    logbase = f"unit-suite-{os.getpid()}"
    p = subprocess.run([meson, "test", "-C", build, "--suite", "unit", "--print-errorlogs",
                        "--logbase", logbase], capture_output=True, text=True, timeout=600)
    logs = os.path.join(build, "meson-logs", logbase)
    results = []
    if os.path.exists(logs + ".json"):
        with open(logs + ".json") as f:
            results = [json.loads(line) for line in f]
    for ext in (".json", ".txt", ".junit.xml"):
        if os.path.exists(logs + ext):
            os.remove(logs + ext)
    assert p.returncode == 0, p.stdout + p.stderr
    # meson's summary names only the counts that are not 0 (Ok and Fail
    # always).
    summary = {k: int(v) for k, v in re.findall(r"^([A-Za-z ]+):\s+(\d+)\s*$", p.stdout, re.M)}
    assert summary.get("Ok", 0) > 0 and summary.get("Fail") == 0, p.stdout
    assert summary.get("Skipped", 0) == 0, p.stdout
    assert sorted(r["name"] for r in results) == listed, p.stdout
    assert {r["name"]: r["result"] for r in results} == {n: "OK" for n in listed}, p.stdout
    subtests = 0
    for r in results:
        plan = re.search(r"^1\.\.(\d+)", r["stdout"], re.M)
        assert plan and int(plan.group(1)) > 0, (r["name"], r["stdout"])
        assert not SKIPPED_SUBTEST.findall(r["stdout"]), (r["name"], r["stdout"])
        subtests += int(plan.group(1))
    print(f"meson unit suite: {len(results)} tests, {subtests} TAP subtests, all passed")
