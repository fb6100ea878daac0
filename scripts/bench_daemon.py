# SPDX-License-Identifier: GPL-2.0-or-later
"""Claim and release round trips of vdpa-pool-daemon (see scripts/bench-daemon),
quiet and with hostile clients connected (--hostile)."""
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


# Run as uid nobody: 10 connections that pipeline QUERYs and never read a
# reply, then 1000 connections that send nothing (the daemon refuses those
# beyond its limits; the rest stay open, idle).  Prints "ready" once all
# are made, then holds them until stdin closes.
HOSTILE = """
import resource, socket, struct, sys
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
query = struct.pack("<IHHII", 0x31445056, 1, 4, 1, 0) * 256
socks = []
for i in range(10):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1])
    s.setblocking(False)
    try:
        while True:
            s.send(query)
    except OSError:
        pass
    socks.append(s)
for i in range(1000):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect(sys.argv[1])
    except OSError:
        pass
    socks.append(s)
print("ready", flush=True)
sys.stdin.read()
"""
NOBODY = 65534


def run(calls, where, daemon=None, hostile=False):
    """(claim ms list, release ms list) with the state file in folder where;
    with hostile, while HOSTILE's connections are open."""
    d = tempfile.mkdtemp(prefix="vsriov-bench-vpd-", dir=where)
    os.makedirs(os.path.join(d, "dev"))
    for vf in range(ENTRIES):
        open(os.path.join(d, "dev", f"bench-{vf}"), "w").close()
    with open(os.path.join(d, "vpd.conf"), "w") as f:
        f.write(f"[daemon]\nsocket = {d}/api.sock\nstate = {d}/state\nsocket-mode = 0666\n"
                f"[pf eni0np1]\nnum-vfs = {ENTRIES}\nvdpa-mgmtdev = vdpasim_net\n"
                f"[pool bench]\npf = eni0np1\nvfs = 0-{ENTRIES - 1}\n")
    os.chmod(d, 0o755)
    daemon = daemon or os.path.join(os.environ["VSRIOV_BUILD_OURS"], "vdpa-pool-daemon",
                                    "vdpa-pool-daemon")
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
        if hostile:
            h = subprocess.Popen([sys.executable, "-c", HOSTILE, os.path.join(d, "api.sock")],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                 user=NOBODY, group=NOBODY, extra_groups=[])
            assert h.stdout.readline() == "ready\n"
        bench = os.path.join(os.environ["VSRIOV_BUILD_OURS"], "vdpa-pool-daemon", "bench-claim")
        out_lines = subprocess.run([bench, os.path.join(d, "api.sock"), "bench", str(calls)],
                                   capture_output=True, text=True, check=True).stdout.split("\n")
        for line in filter(None, out_lines):
            cl, rel = line.split()
            claim.append(float(cl) / 1e3)
            release.append(float(rel) / 1e3)
        c.close()
    finally:
        if hostile:
            h.stdin.close()
            h.wait(timeout=60)
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)
        shutil.rmtree(d)
    return claim, release


def stats(v):
    return {"p50": round(statistics.median(v), 4), "p99": round(pct(v, 99), 4),
            "max": round(max(v), 4)}


def hostile(a, out):
    """This build's daemon (and --compare's, when given), state file on
    tmpfs, quiet and with the hostile clients connected."""
    daemons = {"this build": None}
    if a.compare:
        daemons[a.compare_label] = a.compare
    res = {"entries": ENTRIES, "hostile": "10 never-reading clients pipelining QUERY, "
           "1000 idle connections (uid nobody)", "goal": "claim p99 under 1 ms", "runs": {}}
    md = ("| daemon | clients | calls | claim p50 (ms) | claim p99 (ms) | claim max (ms) |\n"
          "|---|---|---|---|---|---|\n")
    for name, binary in daemons.items():
        for scenario in ("quiet", "hostile"):
            # A daemon that stalls on them gets few calls: each may take seconds.
            calls = a.calls if binary is None else a.compare_calls
            claim, _ = run(calls, "/dev/shm", binary, scenario == "hostile")
            m = stats(claim)
            res["runs"][f"{name}, {scenario}"] = {"calls": calls, "claim_ms": m}
            md += f"| {name} | {scenario} | {calls} | {m['p50']} | {m['p99']} | {m['max']} |\n"
    with open(os.path.join(out, "daemon-hostile.json"), "w") as f:
        json.dump(res, f, indent=2)
    with open(os.path.join(out, "daemon-hostile.md"), "w") as f:
        f.write(md)
    print(md)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--calls", type=int, default=10000)
    ap.add_argument("--hostile", action="store_true",
                    help="claim round trips with hostile clients connected "
                         "(daemon-hostile.{json,md})")
    ap.add_argument("--compare", metavar="DAEMON",
                    help="with --hostile: also measure this daemon binary (e.g. an older build)")
    ap.add_argument("--compare-label", default="before")
    ap.add_argument("--compare-calls", type=int, default=20)
    a = ap.parse_args()
    out = os.environ["VSRIOV_ARTIFACTS"]
    os.makedirs(out, exist_ok=True)
    if a.hostile:
        hostile(a, out)
        return
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
