#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Live migration with a static pool and with vdpa-pool-daemon's pools, side
by side in the emulated host (Level 1): downtime and total migration time
against the number of enabled VFs and guest RAM (issue 18).

Each point: a QEMU of Level 1 with `-accel qtest` (no guest code runs:
tests/harness/qtest_pci.py plays the guest's PCI core) and one virtual PF
whose VFs come from
- a static pool of hubports ("static"),
- the daemon's pool, premapped ("daemon"): vhost-vdpa VFs (netdevsim VFs
  with a vdpa_sim_net device each), claimed when QEMU starts,
- the daemon's pool, lazy ("daemon-lazy"): claimed by the destination when
  the migration starts,
or no pool and no VF at all (0: a plain virtio-net PF).  The "guest"
enables every VF and puts VF 0 into VLAN 100 through the PF (so that the
destination has a VF configuration to re-apply through its provider);
then the VM migrates to a second QEMU of the same shape in the same
Level 1, over a Unix socket, without a bandwidth cap.  The figures are
QEMU's own (query-migrate on the source).  The destination's VF 0 must
have VLAN 100 (query-vsriov) for a point to count.

The daemon runs without OVS (the daemon's own time to apply a change to
OVS is in "Attribute change to flow"); it has twice the largest VF count,
as both QEMUs hold their VFs during the migration.

Writes $VSRIOV_ARTIFACTS/migration-pools.json, .md and .png.
    scripts/bench-migration-pools [VFS ...] [--memory 1G,4G]"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
sys.path.insert(0, os.path.dirname(__file__))

from bench_pods import two_panels  # noqa: E402
from bench_vf_enable_host import l1_daemon, provision  # noqa: E402
from harness import paths  # noqa: E402
from harness.vm import L1Host  # noqa: E402

VFS = [4, 16, 64]
KINDS = ["static", "daemon", "daemon-lazy"]

# Runs in Level 1, one point per call; JSON on stdout.
RUNNER = r"""
import json, os, socket, subprocess, sys, time
sys.path.insert(0, "/src/tests")
from harness.qmp import QMP
from harness.qtest_pci import QtestPci
from harness import vpd

kind, n, mem = sys.argv[1], int(sys.argv[2]), sys.argv[3]
QEMU = "/vsriov/qemu-build/qemu-system-x86_64"
API = "/run/vpdb/api.sock"


def free():
    return sum(1 for v in vpd.Client(API).status() if v["COUNT"] == 0)


def until(what, cond, timeout):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"not within {timeout} s: {what}")
        time.sleep(0.05)


def argv(name):
    # (a PA-mode vDPA device would pin guest RAM against the memlock limit)
    a = ["prlimit", "--memlock=unlimited", QEMU, "-M", "q35", "-nodefaults", "-display", "none", "-accel", "qtest",
         "-name", "vm1", "-uuid", "6c0b64e2-5f3a-4d8e-9b1f-2f1c8f1e7a02",
         "-qtest", f"unix:/tmp/{name}-qt.sock,server=on,wait=off", "-qtest-log", "/dev/null",
         "-qmp", f"unix:/tmp/{name}-q.sock,server=on,wait=off",
         "-object", f"memory-backend-memfd,id=mem0,size={mem},share=on",
         "-machine", "memory-backend=mem0", "-m", mem,
         "-device", "pcie-root-port,id=rp0,chassis=1,addr=0x2,"
                    "pref64-reserve=32M,mem-reserve=16M",
         "-netdev", "hubport,id=pfnet,hubid=0"]
    pool = ""
    if kind == "static" and n:
        for v in range(n):
            a += ["-netdev", f"hubport,id=b{v},hubid={v + 1}"]
        a += ["-object", "vsriov-pool,id=p0," + ",".join(f"netdevs=b{v}" for v in range(n))]
        pool = ",sriov-pool=p0"
    elif kind.startswith("daemon") and n:
        lazy = "on" if kind == "daemon-lazy" else "off"
        a += ["-object", f"vsriov-daemon-pool,id=p0,socket={API},pool=p,count={n},lazy={lazy},"
                        "handover=on"]
        pool = ",sriov-pool=p0"
    a += ["-device", f"virtio-net-pci,bus=rp0,id=pf0,netdev=pfnet{pool},romfile="]
    if name == "dst":
        a += ["-incoming", "defer"]
    return a


def start(name):
    for s in ("qt", "q"):
        if os.path.exists(f"/tmp/{name}-{s}.sock"):
            os.unlink(f"/tmp/{name}-{s}.sock")
    p = subprocess.Popen(argv(name), stdout=subprocess.DEVNULL,
                         stderr=open(f"/scratch/bench-migpools-{name}.log", "w"))
    until(f"{name}'s QMP socket", lambda: os.path.exists(f"/tmp/{name}-q.sock") or
          p.poll() is not None, 120)
    if p.poll() is not None:
        raise SystemExit(f"{name} QEMU exited: " +
                         open(f"/scratch/bench-migpools-{name}.log").read())
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(f"/tmp/{name}-q.sock")
    q = QMP(c, name)
    q.handshake(timeout=120)
    return p, q


free_before = free()
src, sq = start("src")
dst = None
try:
    if n:
        qt = QtestPci("/tmp/src-qt.sock", timeout=600)
        took, ok = qt.set_vfs(n, timeout=600)
        assert ok, "VF Enable did not take"
        _, _, st = qt.admin().set_vlan(0, 100)
        assert st == 0, f"member configuration MODIFY status {st}"
    dst, dq = start("dst")
    sq.execute("migrate-set-parameters", {"max-bandwidth": 64 << 30})
    dq.execute("migrate-incoming", {"uri": "unix:/tmp/migpools.sock"})
    t = time.monotonic()
    sq.execute("migrate", {"uri": "unix:/tmp/migpools.sock"})
    st = {}

    def done():
        global st
        st = sq.execute("query-migrate")
        if st.get("status") in ("failed", "cancelled"):
            raise SystemExit(f"migration {st.get('status')}: {st.get('error-desc')}\n" +
                             open("/scratch/bench-migpools-dst.log").read())
        return st.get("status") == "completed"
    until("the migration", done, 1800)
    until("the destination running",
          lambda: dq.execute("query-status")["status"] == "running", 120)
    wall = time.monotonic() - t
    if n:
        vfs = dq.execute("query-vsriov")[0]["vfs"]
        assert sum(v["state"] == "enabled" for v in vfs) == n, vfs
        assert vfs[0]["config"]["vlan"] == 100, vfs[0]
    ram = st.get("ram", {})
    print(json.dumps({"kind": kind, "vfs": n, "memory": mem,
                      "total_ms": st.get("total-time"), "downtime_ms": st.get("downtime"),
                      "setup_ms": st.get("setup-time"),
                      "transferred_mib": round(ram.get("transferred", 0) / 2**20, 1),
                      "wall_s": round(wall, 2)}))
finally:
    for p in (src, dst):
        if p:
            p.kill()
            p.wait(timeout=120)
    # the daemon has every VF back before the next point
    until("the daemon's VFs back", lambda: free() == free_before, 120)
"""


def markdown(results):
    lines = ["| VFs | pool | guest RAM | downtime (ms) | total (ms) | setup (ms) | "
             "transferred (MiB) | downtime / static | total / static |",
             "|---|---|---|---|---|---|---|---|---|"]
    static = {(r["vfs"], r["memory"]): r for r in results
              if r["kind"] == "static" and "error" not in r}
    for r in results:
        what = r["kind"] if r["vfs"] else "none (plain PF)"
        if "error" in r:
            lines.append(f"| {r['vfs']} | {what} | {r['memory']} | failed: {r['error']} "
                         "| | | | | |")
            continue
        s = static.get((r["vfs"], r["memory"]))
        ratio = (lambda k: f"{r[k] / s[k]:.2f}" if s and s[k] else "-")
        lines.append(f"| {r['vfs']} | {what} | {r['memory']} | {r['downtime_ms']} | "
                     f"{r['total_ms']} | {r['setup_ms']} | {r['transferred_mib']} | "
                     f"{ratio('downtime_ms')} | {ratio('total_ms')} |")
    return "\n".join(lines) + "\n"


def plot(out, results):
    series = []
    for mem in sorted({r["memory"] for r in results}):
        for kind in KINDS:
            rs = sorted((r for r in results if r["memory"] == mem and r["kind"] == kind
                         and "error" not in r), key=lambda r: r["vfs"])
            if rs:
                series.append((f"{kind}, {mem}", "o-", [r["vfs"] for r in rs],
                               ([r["downtime_ms"] for r in rs], [r["total_ms"] for r in rs])))
    two_panels(os.path.join(out, "migration-pools.png"),
               ("downtime (ms)", "total migration time (ms)"), series,
               "live migration in the emulated host (Level 1, qtest guest): "
               "static hubport pool and vdpa-pool-daemon pools")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("vfs", nargs="*", type=int, default=VFS)
    ap.add_argument("--memory", default="1G,4G")
    a = ap.parse_args()
    out = paths.ARTIFACTS
    os.makedirs(out, exist_ok=True)
    mems = a.memory.split(",")
    gib = max(int(m.rstrip("G")) for m in mems)
    # Both QEMUs' RAM is memfd that migration reads (source) and checks
    # (destination) page by page, so Level 1 holds both whole.
    l1 = L1Host("bench-migpools", os.path.join(out, "migration-pools"),
                memory=f"{2 * gib + 3}G")
    l1.start(boot_timeout=300)
    results = []
    try:
        l1.check("modprobe -a vhost_vdpa vdpa_sim_net netdevsim")
        l1.check(f"cat > /tmp/bench-runner.py <<'EOF'\n{RUNNER}EOF")
        provision(l1, l1_daemon(), 2 * max(a.vfs + [1]),
                  pool_extra="vlans = 1-4094\nmac-handover = token\n")
        points = [("static", 0, m) for m in mems]
        points += [(k, n, m) for m in mems for n in a.vfs for k in KINDS]
        for kind, n, mem in points:
            res = l1.run(f"python3 /tmp/bench-runner.py {kind} {n} {mem}", timeout=2400)
            if res.ok:
                results.append(json.loads(res.stdout.strip().splitlines()[-1]))
            else:   # a point that fails is reported, not fatal
                err = (res.stderr.strip() or res.stdout.strip() or "?").splitlines()[-1]
                results.append({"kind": kind, "vfs": n, "memory": mem, "error": err})
            print(results[-1], flush=True)
            with open(os.path.join(out, "migration-pools.json"), "w") as f:
                json.dump({"what": "live migration figures from query-migrate in Level 1 "
                                   "(TCG), a qtest guest, static and daemon pools, Unix "
                                   "socket, no bandwidth cap", "results": results}, f, indent=2)
    finally:
        l1.stop()
    md = markdown(results)
    with open(os.path.join(out, "migration-pools.md"), "w") as f:
        f.write(md)
    print(md)
    plot(out, results)
    print(f"figures in {out}/migration-pools.json, .md and .png")
    sys.exit(1 if any("error" in r for r in results) else 0)


if __name__ == "__main__":
    main()
