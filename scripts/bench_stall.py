#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""How long QEMU holds a vCPU (and the BQL) for the daemon: before and after.

In the emulated host (Level 1), vdpa-pool-daemon provisions 64 VFs, each
with a vdpa_sim_net device bound to vhost_vdpa.  Our QEMU runs with
`-accel qtest`: tests/harness/qtest_pci.py plays the guest's PCI core, and
a config write's qtest round trip is the time the "vCPU" was held in QEMU
(QEMU runs a write with the BQL held, and answers when it is done).  For
each QEMU binary (VSRIOV_BENCH_BEFORE names an older build, e.g. the one
before the asynchronous provider interface, as a path under
$VSRIOV_CACHE; "after" is $VSRIOV_CACHE/qemu-build):

- premapped pool of 64 VFs: VF Enable of 64, then COMMANDS VF-configuration
  commands (RESOURCE_OBJ_MODIFY of the VLAN on the administration
  virtqueue, round robin over the VFs, each a new VLAN, as
  `ip link set <pf> vf N vlan V` sends), each timed from its kick (the
  queue notification) to the kick's return (the stall) and to the
  device's answer (the command's latency); then STUCK commands with the
  daemon SIGSTOPped;
- lazy pool of 64 VFs: ROUNDS VF Enables of 64 and their disables (before:
  the claims and releases happen inside these writes), each disable also
  timed until the daemon has all 64 back, with qtest reads meanwhile whose
  worst round trip is the longest the main loop held the BQL (so too while
  the enabled VFs come, and in the 3 s after they came); then one VF
  Enable of 4 with the daemon SIGSTOPped.

Results in $VSRIOV_CACHE/bench/stall.{json,md}."""
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from harness import paths  # noqa: E402
from harness.vm import L1Host  # noqa: E402
from bench_vf_enable_host import l1_daemon, provision  # noqa: E402

ROUNDS = int(os.environ.get("VSRIOV_BENCH_ROUNDS", "3"))
COMMANDS = int(os.environ.get("VSRIOV_BENCH_COMMANDS", "1000"))
STUCK = 2
NUM_VFS = 64

# Runs in Level 1: one QEMU binary, one pool mode; JSON on stdout.
RUNNER = r"""
import json, os, signal, subprocess, sys, time
sys.path.insert(0, "/src/tests")
from harness.qtest_pci import QtestPci
from harness import vpd

qemu, mode, n, rounds, commands, stuck = (sys.argv[1], sys.argv[2], int(sys.argv[3]),
                                          int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
SETTLE_S = 3
daemon_pid = int(open("/tmp/vpdb.pid").read())
# what the last QEMU held (and late answers to a stopped daemon) are free again
deadline = time.monotonic() + 120
while sum(1 for v in vpd.Client("/run/vpdb/api.sock").status() if v["COUNT"] == 0) < n:
    assert time.monotonic() < deadline, "the daemon's VFs did not come back"
    time.sleep(0.2)
sock = f"/tmp/bs-{os.getpid()}.sock"
lazy = "on" if mode == "lazy" else "off"
args = [qemu, "-M", "q35", "-nodefaults", "-display", "none", "-accel", "qtest",
        "-qtest", f"unix:{sock},server=on,wait=off", "-qtest-log", "/dev/null",
        "-object", "memory-backend-memfd,id=mem0,size=1G,share=on",
        "-machine", "memory-backend=mem0", "-m", "1G",
        "-device", "pcie-root-port,id=rp0,chassis=1,addr=0x2", "-netdev", "user,id=n0",
        "-object", f"vsriov-daemon-pool,id=p0,socket=/run/vpdb/api.sock,pool=p,"
                   f"count={n},lazy={lazy}",
        "-device", "virtio-net-pci,bus=rp0,id=pf0,netdev=n0,sriov-pool=p0,romfile="]
p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open("/scratch/bench-stall-qemu.log", "a"))
q = QtestPci(sock, timeout=600)
cap = q.sriov_cap()
res = dict(mode=mode, n=n)
ms = lambda s: round(s * 1000, 3)
if mode == "premapped":
    took, ok = q.set_vfs(n, cap)
    assert ok, "VF Enable did not take"
    res["enable_ms"], res["enable_ready_ms"] = [ms(q.write_s)], [ms(took)]
    admin = q.admin()
    wrote, done, statuses = [], [], {}
    for k in range(commands):
        w, d, st = admin.set_vlan(k % n, 1 + k % 4000)
        wrote.append(ms(w)); done.append(ms(d)); statuses[st] = statuses.get(st, 0) + 1
    res.update(cmd_write_ms=wrote, cmd_done_ms=done, cmd_status=statuses)
    os.kill(daemon_pid, signal.SIGSTOP)
    try:
        sw, sd, ss = [], [], []
        for k in range(stuck):
            w, d, st = admin.set_vlan(k, 7)
            sw.append(ms(w)); sd.append(ms(d)); ss.append(st)
    finally:
        os.kill(daemon_pid, signal.SIGCONT)
    res.update(stuck_write_ms=sw, stuck_done_ms=sd, stuck_status=ss)
else:
    enable, ready, disable, returned, loop_held, settle_held, arrive_held = ([] for _ in range(7))
    free = lambda: sum(1 for v in vpd.Client("/run/vpdb/api.sock").status() if v["COUNT"] == 0)

    def probe(seconds):
        # the worst qtest read round trip for @seconds: how long QEMU's
        # main loop (and the BQL) was held at most meanwhile
        worst, end = 0.0, time.monotonic() + seconds
        while time.monotonic() < end:
            t = time.perf_counter()
            q.read(1, 0, 0, 4)
            worst = max(worst, time.perf_counter() - t)
        return worst
    for _ in range(rounds):
        took, ok = q.set_vfs(n, cap)
        assert ok, "VF Enable did not take"
        enable.append(ms(q.write_s))
        ready.append(ms(took))
        arrive_held.append(ms(q.wait_worst_s))
        # what follows the VFs' arrival (their configuration reset at the
        # daemon, the replaced VFs' RCU reclamation) before the disable
        settle_held.append(ms(probe(SETTLE_S)))
        t0 = time.perf_counter()
        disable.append(ms(q.disable_timed(cap)))
        # until the daemon has them all back; meanwhile, a qtest read's
        # round trip is how long QEMU's main loop (and the BQL) was held
        worst, k, deadline = 0.0, 0, time.monotonic() + 120
        while True:
            t = time.perf_counter()
            q.read(1, 0, 0, 4)
            worst = max(worst, time.perf_counter() - t)
            k += 1
            if k % 20 == 0 and free() >= n:
                break
            assert time.monotonic() < deadline, "the VFs did not come back"
        returned.append(ms(time.perf_counter() - t0))
        loop_held.append(ms(worst))
    res.update(enable_ms=enable, enable_ready_ms=ready, disable_ms=disable,
               disable_done_ms=returned, disable_loop_held_ms=loop_held,
               enable_settle_held_ms=settle_held, enable_arrive_held_ms=arrive_held)
    os.kill(daemon_pid, signal.SIGSTOP)
    try:
        took, ok = q.set_vfs(4, cap)
    finally:
        os.kill(daemon_pid, signal.SIGCONT)
    res.update(stuck_enable_ms=[ms(q.write_s)], stuck_enable_ready_ms=[ms(took)],
               stuck_enable_took=ok)
p.send_signal(signal.SIGTERM)
p.wait(timeout=120)
print(json.dumps(res))
"""


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def markdown(rows):
    md = ["| QEMU | pool | operation | count | vCPU held: median (ms) | p99 (ms) | max (ms) | "
          "until done: median (ms) | max (ms) |", "|---|---|---|---|---|---|---|---|---|"]

    def line(r, what, held, done=None):
        d = (f"{statistics.median(done):.2f} | {max(done):.2f}" if done else "- | -")
        md.append(f"| {r['qemu']} | {r['mode']} | {what} | {len(held)} | "
                  f"{statistics.median(held):.2f} | {pct(held, 99):.2f} | {max(held):.2f} | {d} |")
    for r in rows:
        if r["mode"] == "premapped":
            line(r, f"VF Enable of {r['n']}", r["enable_ms"], r["enable_ready_ms"])
            line(r, "CFG_SET (VLAN)", r["cmd_write_ms"], r["cmd_done_ms"])
            line(r, "CFG_SET (VLAN), daemon stopped", r["stuck_write_ms"], r["stuck_done_ms"])
        else:
            line(r, f"VF Enable of {r['n']}", r["enable_ms"], r["enable_ready_ms"])
            if r.get("enable_arrive_held_ms"):
                line(r, f"VF Enable of {r['n']}: main loop held while the VFs came, worst",
                     r["enable_arrive_held_ms"])
            if r.get("enable_settle_held_ms"):
                line(r, f"VF Enable of {r['n']}: main loop held, worst in the 3 s after",
                     r["enable_settle_held_ms"])
            line(r, f"VF disable of {r['n']}", r["disable_ms"], r.get("disable_done_ms"))
            if r.get("disable_loop_held_ms"):
                line(r, f"VF disable of {r['n']}: main loop held, worst per disable",
                     r["disable_loop_held_ms"])
            line(r, "VF Enable of 4, daemon stopped", r["stuck_enable_ms"],
                 r["stuck_enable_ready_ms"])
    # ratios, after / before, of the worst stall
    by = {(r["qemu"], r["mode"]): r for r in rows}
    if ("before", "premapped") in by and ("after", "premapped") in by:
        b, a = by[("before", "premapped")], by[("after", "premapped")]
        md += ["", f"Worst vCPU stall of {len(a['cmd_write_ms'])} CFG_SET (VLAN) commands: "
               f"before {max(b['cmd_write_ms']):.2f} ms, after {max(a['cmd_write_ms']):.2f} ms "
               f"({max(a['cmd_write_ms']) / max(b['cmd_write_ms']):.3f}x); with the daemon "
               f"stopped: before {max(b['stuck_write_ms']):.0f} ms, after "
               f"{max(a['stuck_write_ms']):.2f} ms."]
    if ("before", "lazy") in by and ("after", "lazy") in by:
        b, a = by[("before", "lazy")], by[("after", "lazy")]
        md += ["", f"Worst vCPU stall of a lazy VF Enable of {a['n']}: before "
               f"{max(b['enable_ms']):.1f} ms, after {max(a['enable_ms']):.2f} ms; its VFs "
               f"ready after {statistics.median(b['enable_ready_ms']):.1f} ms before, "
               f"{statistics.median(a['enable_ready_ms']):.1f} ms after (medians); with the "
               f"daemon stopped: stall before {max(b['stuck_enable_ms']):.0f} ms, after "
               f"{max(a['stuck_enable_ms']):.2f} ms."]
    return "\n".join(md) + "\n"


def main():
    out = paths.ARTIFACTS
    os.makedirs(out, exist_ok=True)
    daemon = l1_daemon()
    qemus = []
    before = os.environ.get("VSRIOV_BENCH_BEFORE")
    if before:
        if not before.startswith(paths.CACHE + "/"):
            sys.exit(f"VSRIOV_BENCH_BEFORE must be under {paths.CACHE} (Level 1 sees only that)")
        qemus.append(("before", "/vsriov" + before[len(paths.CACHE):]))
    qemus.append(("after", "/vsriov/qemu-build/qemu-system-x86_64"))
    l1 = L1Host("bench-stall", os.path.join(out, "stall"), memory="4G")
    l1.start(boot_timeout=300)
    rows = []
    try:
        l1.check("modprobe -a vhost_vdpa vdpa_sim_net netdevsim")
        l1.check(f"cat > /tmp/bench-runner.py <<'EOF'\n{RUNNER}EOF")
        provision(l1, daemon, NUM_VFS, pool_extra="vlans = 1-4094\n")
        for name, qemu in qemus:
            for mode in ("premapped", "lazy"):
                res = l1.check(f"python3 /tmp/bench-runner.py {qemu} {mode} {NUM_VFS} "
                               f"{ROUNDS} {COMMANDS} {STUCK}", timeout=3600)
                r = json.loads(res.strip().splitlines()[-1])
                r["qemu"] = name
                rows.append(r)
                print(f"{name} {mode}: " + ", ".join(
                    f"{k} max {max(v):.2f}" for k, v in r.items() if k.endswith("_ms")),
                    flush=True)
    finally:
        l1.stop()
    with open(os.path.join(out, "stall.json"), "w") as f:
        json.dump({"rows": rows, "commands": COMMANDS, "rounds": ROUNDS}, f, indent=2)
    md = markdown(rows)
    with open(os.path.join(out, "stall.md"), "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    main()
