#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""A pod's round trip on four paths of issue 35, side by side in one run.

The system of tests/nested/test_l2_switchdev.py (emulated host: OVS-DPDK,
the daemon's VDUSE VFs in a pool with `switchdev = yes`; a VM whose PF has
sriov-eswitch=on).  Pods a and b are on VFs 0 and 1, pods c and d on veth
pairs into a Linux bridge of the guest's.  A policy as a NetworkPolicy
would have it: the client pod may reach the server pod with ICMP echo and
on TCP 8080, nothing else (the guest's initramfs has no iptables: the
policy is tc flower, in software on the first paths, in the host's switch
on the last).  Four paths from client to server, measured alternately,
ROUNDS times:

- before: c -> d over veth and the guest's bridge, the policy in software
  on c's bridge port (what the paper's pods had: the guest's stack);
- legacy: a -> b, the host's switch forwards VF 0's frames to VF 1, no
  policy (what the first design offloads: L2 only);
- switchdev: a -> b over the representors and a bridge of the guest's, the
  policy in software on representor 0 (the slow path);
- offloaded: a -> b, the policy as skip_sw rules, in the host's switch.

For each: the round trip of PINGS pings (min, median, p99, max; `ping -i
0.2`) and the guest's CPU time per round trip (the busy jiffies of
/proc/stat over a run of PINGS pings at 20/s, less an idle run of the same
length, per ping).  Under nested TCG the absolute figures are those of a
guest emulated twice over; the ratios of the paths in the same run are
what the benchmark reports."""
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
D_IP = "10.42.0.4"
PATHS = ("before", "legacy", "switchdev", "offloaded")
# the policy: ICMP and TCP 8080 to the server pass, other IPv4 is dropped
# (ARP is not IP: NetworkPolicy leaves it alone)
POLICY = [("1 protocol ip", "ip_proto icmp dst_ip {ip}"),
          ("2 protocol ip", "ip_proto tcp dst_ip {ip} dst_port 8080"),
          ("9 protocol ip", "")]


def busy_jiffies(l2):
    """The guest's CPU time so far (user, nice, system, irq, softirq), in
    jiffies."""
    f = l2.check("head -1 /proc/stat").split()
    return sum(int(x) for x in (f[1], f[2], f[3], f[6], f[7]))


def client(path):
    return ("c", D_IP) if path == "before" else ("a", B_IP)


def rtts(s, path, interval="0.2"):
    pod, ip = client(path)
    out = s.l2.check(f"ip netns exec {pod} ping -c {PINGS} -i {interval} -W 5 {ip}",
                     timeout=PINGS * 4 + 120)
    assert f"{PINGS} packets received" in out, out
    return [float(x) for x in re.findall(r"time=([\d.]+) ms", out)]


def cpu_per_ping(s, path):
    """Guest CPU ms per round trip: pings at 20/s against idle of as long."""
    l2, hz = s.l2, 100     # (the test kernel's CONFIG_HZ)
    pod, ip = client(path)
    secs = PINGS / 20
    b0 = busy_jiffies(l2)
    l2.check(f"sleep {secs}", timeout=secs + 60)
    idle = busy_jiffies(l2) - b0
    b0 = busy_jiffies(l2)
    out = l2.check(f"ip netns exec {pod} ping -q -c {PINGS} -i 0.05 -W 5 {ip}",
                   timeout=PINGS + 120)
    busy = busy_jiffies(l2) - b0
    assert f"{PINGS} packets received" in out, out
    return max(busy - idle, 0) * 1000 / hz / PINGS


def policy(l2, dev, ip, hw, peer=None):
    """The policy on dev's ingress: in software (pass to the bridge), or in
    the host's switch (skip_sw, redirect to peer)."""
    l2.check(f"tc qdisc replace dev {dev} ingress")
    for prio, match in POLICY:
        act = ("drop" if not match else
               f"mirred egress redirect dev {peer}" if hw else "pass")
        l2.check(f"tc filter add dev {dev} ingress prio {prio} flower "
                 f"{'skip_sw' if hw else 'skip_hw'} {match.format(ip=ip)} action {act}",
                 timeout=120)


def setup_before(s):
    """Pods c and d on veth pairs into bridge brv, the policy on c's port."""
    l2 = s.l2
    l2.check("ip link add brv type bridge && ip link set brv up")
    for pod, ip in (("c", "10.42.0.3"), ("d", D_IP)):
        l2.check(f"ip netns add {pod} && ip link add v{pod} type veth peer name eth0 "
                 f"netns {pod} && ip link set v{pod} master brv up && "
                 f"ip -n {pod} addr add {ip}/24 dev eth0 && ip -n {pod} link set eth0 up && "
                 f"ip -n {pod} link set lo up")
    policy(l2, "vc", D_IP, hw=False)
    l2.wait_until(f"ip netns exec c ping -c 1 -W 2 {D_IP}", timeout=60)


def to_switchdev(s, offloaded):
    l2, pf = s.l2, s.pf
    l2.check(f"devlink dev eswitch set pci/{pf} mode switchdev", timeout=120)
    vfs = int(l2.check(f"cat /sys/bus/pci/devices/{pf}/sriov_numvfs"))
    l2.wait_until(f"test $(devlink port show pci/{pf} | grep -c 'flavour pcivf') = {vfs}",
                  timeout=60)
    reps = representors(l2, pf)
    r0, r1 = reps[0], reps[1]
    l2.check(f"ip link set {r0} up && ip link set {r1} up")
    if offloaded:
        policy(l2, r0, B_IP, hw=True, peer=r1)
        l2.check(f"tc qdisc replace dev {r1} ingress && tc filter add dev {r1} ingress "
                 f"prio 1 protocol all flower skip_sw action mirred egress redirect "
                 f"dev {r0}", timeout=120)
        out = l2.check(f"tc -j filter show dev {r0} ingress")
        assert out.count('"in_hw":true') == len(POLICY), out
    else:
        l2.check(f"ip link add brrep type bridge && ip link set brrep up && "
                 f"ip link set {r0} master brrep && ip link set {r1} master brrep")
        policy(l2, r0, B_IP, hw=False)
    l2.wait_until(f"ip netns exec a ping -c 1 -W 2 {B_IP}", timeout=60)


def to_legacy(s):
    l2 = s.l2
    for dev in representors(l2, s.pf).values():
        l2.run(f"tc qdisc del dev {dev} ingress", timeout=120)
    l2.check("ip link del brrep 2>/dev/null; true")
    l2.check(f"devlink dev eswitch set pci/{s.pf} mode legacy", timeout=120)
    l2.wait_until(f"ip netns exec a ping -c 1 -W 2 {B_IP}", timeout=60)


def main():
    out_dir = os.path.join(paths.CACHE, "bench")
    os.makedirs(out_dir, exist_ok=True)
    l1 = L1Host("l1", paths.ARTIFACTS)
    l1.start(boot_timeout=300)
    results = {"rounds": ROUNDS, "pings": PINGS,
               "paths": {p: {"rtt_ms": [], "cpu_ms": []} for p in PATHS}}
    try:
        s = System(l1, conf=SWITCHDEV_CONF, eswitch=True)
        s.start_host()
        s.start_vm()
        s.ensure_pods(PODS)
        s.pin_neighbours({p: (PODS[p][1], PODS[p][3]) for p in PODS})
        setup_before(s)
        for r in range(ROUNDS):
            for path in PATHS:
                if path in ("switchdev", "offloaded"):
                    to_switchdev(s, path == "offloaded")
                p = results["paths"][path]
                p["rtt_ms"].append(rtts(s, path))
                p["cpu_ms"].append(cpu_per_ping(s, path))
                print(f"bench-switchdev: round {r + 1} {path}: RTT median "
                      f"{statistics.median(p['rtt_ms'][-1]):.2f} ms, guest CPU "
                      f"{p['cpu_ms'][-1]:.2f} ms per round trip", flush=True)
                if path in ("switchdev", "offloaded"):
                    to_legacy(s)
        s.stop()
    finally:
        l1.stop()
    write(out_dir, results)


def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * 0.99))]


def write(out_dir, results):
    with open(os.path.join(out_dir, "switchdev.json"), "w") as f:
        json.dump(results, f, indent=1)
    paths = [p for p in PATHS if p in results["paths"]]
    rows = {}
    for name in paths:
        p = results["paths"][name]
        every = [x for r in p["rtt_ms"] for x in r]
        rows[name] = (min(every), statistics.median(every), p99(every), max(every),
                      statistics.median(p["cpu_ms"]), min(p["cpu_ms"]), max(p["cpu_ms"]))
    lines = [f"A pod's round trip to another pod of the VM, {results['rounds']} rounds of "
             f"{results['pings']} pings per path, alternating (nested TCG)", "",
             "| path | RTT min ms | RTT median ms | RTT p99 ms | RTT max ms | guest CPU ms "
             "per round trip (median, min-max of rounds) |", "|---|---|---|---|---|---|"]
    for n in paths:
        mn, md, pp, mx, c, cmin, cmax = rows[n]
        lines.append(f"| {n} | {mn:.2f} | {md:.2f} | {pp:.2f} | {mx:.2f} | "
                     f"{c:.2f} ({cmin:.2f}-{cmax:.2f}) |")
    lines.append("")
    base = rows["legacy"]
    for n in paths:
        if n != "legacy":
            lines.append(f"{n}/legacy: RTT median {rows[n][1] / base[1]:.2f}x, "
                         f"p99 {rows[n][2] / base[2]:.2f}x, guest CPU per round trip "
                         f"{rows[n][4] / max(base[4], 0.01):.2f}x")
    with open(os.path.join(out_dir, "switchdev.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    plt = pyplot()
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.8))
    ax[0].boxplot([[x for r in results["paths"][n]["rtt_ms"] for x in r] for n in paths])
    ax[0].set_xticks(range(1, len(paths) + 1), paths)
    ax[0].set_title("round trip (ms)")
    ax[1].bar(paths, [rows[n][4] for n in paths],
              color=["#888", "#2a7", "#c63", "#27c"][:len(paths)])
    ax[1].set_title("guest CPU per round trip (ms)")
    fig.suptitle("pod to pod in a VM with a policy: veth+bridge (before), VF without policy "
                 "(legacy), representors+bridge (switchdev), rules in the host's switch "
                 "(offloaded); nested TCG", fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "switchdev.png"), dpi=100)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--write"]:    # the tables and plot again, from the JSON
        d = os.path.join(paths.CACHE, "bench")
        with open(os.path.join(d, "switchdev.json")) as f:
            write(d, json.load(f))
    else:
        main()
