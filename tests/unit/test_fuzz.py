# SPDX-License-Identifier: GPL-2.0-or-later
"""libFuzzer on the daemon's parsers of untrusted input (the API codec, the
JSON of OVSDB's replies, the configuration file, the state file and
/proc/PID/stat), built with clang, ASan and UBSan by scripts/fuzz-daemon.

A short run (VSRIOV_FUZZ_SECONDS, default 2 s a target): each target
builds, replays its corpus (the seeds in vdpa-pool-daemon/fuzz/corpus and
what earlier runs kept in $VSRIOV_CACHE/fuzz-daemon) without a crash, then
fuzzes for those seconds and must find nothing.  The long run is
scripts/fuzz-daemon with its default (5 minutes a target), not part of the
suites.  A crash leaves its reproducer in $VSRIOV_ARTIFACTS/fuzz-TARGET/."""
import os
import re
import subprocess

from harness import paths

SECONDS = int(os.environ.get("VSRIOV_FUZZ_SECONDS", "2"))


def test_fuzz_daemon_parsers():
    script = os.path.join(paths.SRC, "scripts", "fuzz-daemon")
    p = subprocess.run([script, str(SECONDS)], capture_output=True, text=True,
                       timeout=SECONDS * 3 + 300)
    assert p.returncode == 0, p.stdout + p.stderr
    for target in ("protocol", "json", "config", "state", "rules"):
        m = re.search(rf"^fuzz-{target}: (\d+) inputs in \d+s, cov: \d+, no crash$", p.stdout,
                      re.M)
        assert m and int(m.group(1)) > 1000, p.stdout + p.stderr
