# SPDX-License-Identifier: GPL-2.0-or-later
"""Claim and release round trips of vdpa-pool-daemon (see scripts/bench-daemon)."""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from harness import vpd  # noqa: E402

ENTRIES = 256


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def run(calls, where):
    """(claim ms list, release ms list) with the state file in folder where."""
    d = tempfile.mkdtemp(prefix="vsriov-bench-vpd-", dir=where)
    os.makedirs(os.path.join(d, "dev"))
    for vf in range(ENTRIES):
        open(os.path.join(d, "dev", f"bench-{vf}"), "w").close()
    with open(os.path.join(d, "vpd.conf"), "w") as f:
        f.write(f"[daemon]\nsocket = {d}/api.sock\nstate = {d}/state\n"
                f"[pf eni0np1]\nnum-vfs = {ENTRIES}\nvdpa-mgmtdev = vdpasim_net\n"
                f"[pool bench]\npf = eni0np1\nvfs = 0-{ENTRIES - 1}\n")
    daemon = os.path.join(os.environ["VSRIOV_BUILD_OURS"], "vdpa-pool-daemon", "vdpa-pool-daemon")
    p = subprocess.Popen([daemon, "-c", os.path.join(d, "vpd.conf"), "--fake-vhost-dir",
                          os.path.join(d, "dev")], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    assert p.stdout.readline() == "READY\n"
    claim, release = [], []
    try:
        c = vpd.Client(os.path.join(d, "api.sock"))
        # Hold 255 so every claim searches the whole pool for the last one
        # and every state file written holds 256 claims.
        for n in (128, ENTRIES - 1 - 128):   # at most 253 fds per message
            vpd.close_fds(fd for _, fd in c.claim("bench", n))
        bench = os.path.join(os.environ["VSRIOV_BUILD_OURS"], "vdpa-pool-daemon", "bench-claim")
        out_lines = subprocess.run([bench, os.path.join(d, "api.sock"), "bench", str(calls)],
                                   capture_output=True, text=True, check=True).stdout.split("\n")
        for line in filter(None, out_lines):
            cl, rel = line.split()
            claim.append(float(cl) / 1e3)
            release.append(float(rel) / 1e3)
        c.close()
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)
        shutil.rmtree(d)
    return claim, release


def stats(v):
    return {"p50": round(statistics.median(v), 4), "p99": round(pct(v, 99), 4),
            "max": round(max(v), 4)}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--calls", type=int, default=10000)
    a = ap.parse_args()
    out = os.environ["VSRIOV_ARTIFACTS"]
    os.makedirs(out, exist_ok=True)
    # The state file on tmpfs (/run, the shipped default: claims need to
    # outlive the daemon, not the host) and on the root file system.
    places = {"tmpfs (/dev/shm, as /run)": "/dev/shm", "disk (ext4, as /var/lib)": "/var/tmp"}
    res = {"entries": ENTRIES, "claimed_while_measuring": ENTRIES - 1, "calls": a.calls,
           "client": "C (vdpa-pool-daemon/tests/bench-claim.c)", "goal": "p99 under 1 ms",
           "state_file": {}}
    for name, where in places.items():
        claim, release = run(a.calls, where)
        res["state_file"][name] = {"claim_ms": stats(claim), "release_ms": stats(release)}
    with open(os.path.join(out, "daemon-claim.json"), "w") as f:
        json.dump(res, f, indent=2)
    md = "| state file | call | p50 (ms) | p99 (ms) | max (ms) |\n|---|---|---|---|---|\n"
    for name, r in res["state_file"].items():
        for k in ("claim", "release"):
            m = r[k + "_ms"]
            md += f"| {name} | {k} | {m['p50']} | {m['p99']} | {m['max']} |\n"
    with open(os.path.join(out, "daemon-claim.md"), "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    main()
