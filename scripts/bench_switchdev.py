#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""A pod's round trip on a VF, legacy mode against the switchdev slow path,
side by side in one run.

The system of tests/nested/test_l2_switchdev.py (emulated host: OVS-DPDK,
the daemon's VDUSE VFs in a pool with `switchdev = yes`; a VM whose PF has
sriov-eswitch=on).  Pods a and b are on VFs 0 and 1.  Two paths from a to
b, measured alternately, ROUNDS times:

- legacy: the host's switch forwards VF 0's frames to VF 1;
- switchdev: the switch sends them to VF 0's representor in the guest, a
  Linux bridge of the guest's forwards them to VF 1's representor, and the
  switch takes them on to VF 1 (the slow path before any offload).

For each: the round trip of PINGS pings (min, median, max; `ping -i 0.2`)
and the guest's CPU time per round trip (the busy jiffies of /proc/stat
over a run of PINGS pings at 20/s, less an idle run of the same length,
per ping).  Under nested TCG the absolute figures are those of a guest
emulated twice over; the ratio of the two paths in the same run is what
the benchmark reports."""
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from harness import paths  # noqa: E402
from harness.e2e import System  # noqa: E402
from harness.vm import L1Host  # noqa: E402
from nested.test_l2_switchdev import PODS, SWITCHDEV_CONF, representors  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from bench_pods import pyplot  # noqa: E402

ROUNDS = int(os.environ.get("VSRIOV_BENCH_ROUNDS", "3"))
PINGS = int(os.environ.get("VSRIOV_BENCH_PINGS", "50"))
B_IP = PODS["b"][3].split("/")[0]


def busy_jiffies(l2):
    """The guest's CPU time so far (user, nice, system, irq, softirq), in
    jiffies."""
    f = l2.check("head -1 /proc/stat").split()
    return sum(int(x) for x in (f[1], f[2], f[3], f[6], f[7]))


def rtts(s, interval="0.2"):
    out = s.l2.check(f"ip netns exec a ping -c {PINGS} -i {interval} -W 5 {B_IP}",
                     timeout=PINGS * 4 + 120)
    assert f"{PINGS} packets received" in out, out
    return [float(x) for x in re.findall(r"time=([\d.]+) ms", out)]


def cpu_per_ping(s):
    """Guest CPU ms per round trip: pings at 20/s against idle of as long."""
    l2, hz = s.l2, 100     # (the test kernel's CONFIG_HZ)
    secs = PINGS / 20
    b0 = busy_jiffies(l2)
    l2.check(f"sleep {secs}", timeout=secs + 60)
    idle = busy_jiffies(l2) - b0
    b0 = busy_jiffies(l2)
    out = l2.check(f"ip netns exec a ping -q -c {PINGS} -i 0.05 -W 5 {B_IP}",
                   timeout=PINGS + 120)
    busy = busy_jiffies(l2) - b0
    assert f"{PINGS} packets received" in out, out
    return max(busy - idle, 0) * 1000 / hz / PINGS


def to_switchdev(s):
    l2, pf = s.l2, s.pf
    l2.check(f"devlink dev eswitch set pci/{pf} mode switchdev", timeout=120)
    vfs = int(l2.check(f"cat /sys/bus/pci/devices/{pf}/sriov_numvfs"))
    l2.wait_until(f"test $(devlink port show pci/{pf} | grep -c 'flavour pcivf') = {vfs}",
                  timeout=60)
    reps = representors(l2, pf)
    l2.check(f"ip link add brrep type bridge && ip link set brrep up && "
             f"ip link set {reps[0]} master brrep up && ip link set {reps[1]} master brrep up")
    l2.wait_until(f"ip netns exec a ping -c 1 -W 2 {B_IP}", timeout=60)


def to_legacy(s):
    l2 = s.l2
    l2.check("ip link del brrep 2>/dev/null; true")
    l2.check(f"devlink dev eswitch set pci/{s.pf} mode legacy", timeout=120)
    l2.wait_until(f"ip netns exec a ping -c 1 -W 2 {B_IP}", timeout=60)


def main():
    out_dir = os.path.join(paths.CACHE, "bench")
    os.makedirs(out_dir, exist_ok=True)
    l1 = L1Host("l1", paths.ARTIFACTS)
    l1.start(boot_timeout=300)
    results = {"rounds": ROUNDS, "pings": PINGS,
               "paths": {"legacy": {"rtt_ms": [], "cpu_ms": []},
                         "switchdev": {"rtt_ms": [], "cpu_ms": []}}}
    try:
        s = System(l1, conf=SWITCHDEV_CONF, eswitch=True)
        s.start_host()
        s.start_vm()
        s.ensure_pods(PODS)
        s.pin_neighbours({p: (PODS[p][1], PODS[p][3]) for p in PODS})
        for r in range(ROUNDS):
            for mode in ("legacy", "switchdev"):
                if mode == "switchdev":
                    to_switchdev(s)
                p = results["paths"][mode]
                p["rtt_ms"].append(rtts(s))
                p["cpu_ms"].append(cpu_per_ping(s))
                print(f"bench-switchdev: round {r + 1} {mode}: RTT median "
                      f"{statistics.median(p['rtt_ms'][-1]):.2f} ms, guest CPU "
                      f"{p['cpu_ms'][-1]:.2f} ms per round trip", flush=True)
                if mode == "switchdev":
                    to_legacy(s)
        s.stop()
    finally:
        l1.stop()
    write(out_dir, results)


def write(out_dir, results):
    with open(os.path.join(out_dir, "switchdev.json"), "w") as f:
        json.dump(results, f, indent=1)
    rows = []
    for name in ("legacy", "switchdev"):
        p = results["paths"][name]
        every = [x for r in p["rtt_ms"] for x in r]
        rows.append((name, min(every), statistics.median(every), max(every),
                     statistics.median(p["cpu_ms"]), min(p["cpu_ms"]), max(p["cpu_ms"])))
    lines = [f"A pod's round trip to a pod on another VF, {results['rounds']} rounds of "
             f"{results['pings']} pings per path, alternating (nested TCG)", "",
             "| path | RTT min ms | RTT median ms | RTT max ms | guest CPU ms per round trip "
             "(median, min-max of rounds) |", "|---|---|---|---|---|"]
    for n, mn, md, mx, c, cmin, cmax in rows:
        lines.append(f"| {n} | {mn:.2f} | {md:.2f} | {mx:.2f} | {c:.2f} ({cmin:.2f}-{cmax:.2f}) |")
    lg, sw = rows
    lines += ["", f"switchdev/legacy: RTT median {sw[2] / lg[2]:.2f}x, guest CPU per round "
              f"trip {sw[4] / max(lg[4], 0.01):.2f}x"]
    with open(os.path.join(out_dir, "switchdev.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    plt = pyplot()
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.6))
    ax[0].boxplot([[x for r in results["paths"][n]["rtt_ms"] for x in r]
                   for n in ("legacy", "switchdev")])
    ax[0].set_xticks([1, 2], ["legacy", "switchdev"])
    ax[0].set_title("round trip (ms)")
    ax[1].bar(["legacy", "switchdev"], [lg[4], sw[4]], color=["#2a7", "#c63"])
    ax[1].set_title("guest CPU per round trip (ms)")
    fig.suptitle("pod to pod on VFs: host switch (legacy) against the guest's bridge over "
                 "representors (switchdev slow path); nested TCG", fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "switchdev.png"), dpi=100)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--write"]:    # the tables and plot again, from the JSON
        d = os.path.join(paths.CACHE, "bench")
        with open(os.path.join(d, "switchdev.json")) as f:
            write(d, json.load(f))
    else:
        main()
