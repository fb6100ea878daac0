#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Pod networking in the paper's shape, side by side in one run.

The system of tests/harness/e2e.py (emulated host: OVS-DPDK, the daemon's
VDUSE VFs; a VM whose PF is a VDUSE port of the same bridge).  A peer
"host" is a network namespace of the emulated host on an OVS internal port
of the bridge.  Three paths from a sender to the peer:

- before: a pod in the VM on a veth pair and a Linux bridge over the VM's
  PF (the software networking pods in VMs get today);
- after: a pod in the VM on a VF the guest created (VDUSE device, OVS);
- ideal: a namespace of the emulated host itself on a second internal
  port (no VM).

For each: UDP and TCP throughput (tests/traffic, received as the peer
counted it) and request/response latency at a fixed rate (p50, p99, max),
ROUNDS times.  Results in $VSRIOV_CACHE/bench/pods.{json,md} and pods.png.
Under (nested) TCG the absolute figures mean little; the ratios and the
method are what count (docs/benchmarks.md says how to run it on a host)."""
import json
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from harness import paths  # noqa: E402
from harness.e2e import BRIDGE, System  # noqa: E402
from harness.vm import L1Host  # noqa: E402

ROUNDS = int(os.environ.get("VSRIOV_BENCH_ROUNDS", "3"))
SECS = int(os.environ.get("VSRIOV_BENCH_SECS", "8"))
RR_RATE = int(os.environ.get("VSRIOV_BENCH_RR_RATE", "20"))
PEER_IP = "10.50.0.100"
VLAN = 100


def tool(where):
    """The traffic tool: at Level 2 from the VM's memory (System copies it
    there), at Level 1 from its 9p share."""
    return "/mnt/tools/traffic" if where == "l2" else "/scratch/tools/traffic"


class Bench:
    def __init__(self, s):
        self.s, self.l1, self.l2 = s, s.l1, s.l2

    def run_in(self, where, ns, cmd, timeout=300):
        g = self.l2 if where == "l2" else self.l1
        return g.check(f"ip netns exec {ns} {cmd}", timeout=timeout)

    def sink(self, kind, secs):
        self.l1.check(f"ip netns exec peer {tool('l1')} {kind}-sink -listen :9000 "
                      f"-duration {secs}s > /tmp/sink.log 2>&1 & echo $! > /tmp/sink.pid")
        # Until it listens (a sender of the host itself would be first).
        self.l1.wait_until("ip netns exec peer ss -Hlnut | grep -q ':9000 '", timeout=60)

    def received(self):
        self.l1.wait_until("! kill -0 $(cat /tmp/sink.pid) 2>/dev/null", timeout=SECS + 180)
        m = re.search(r"received (\d+) bytes in ([\d.]+) s", self.l1.check("cat /tmp/sink.log"))
        return int(m.group(1)) * 8 / max(float(m.group(2)), 0.001) / 1e6

    def throughput(self, where, ns, kind):
        self.sink(kind, SECS)
        extra = "-size 1400 " if kind == "udp" else ""
        self.run_in(where, ns, f"{tool(where)} {kind}-send -to {PEER_IP}:9000 {extra}"
                               f"-duration {SECS}s", timeout=SECS + 180)
        return self.received()

    def latency(self, where, ns):
        out = self.run_in(where, ns, f"{tool(where)} rr-client -to {PEER_IP}:9001 "
                                     f"-rate {RR_RATE} -duration {SECS}s", timeout=SECS + 120)
        m = re.search(r"rr sent (\d+) lost (\d+) p50 (-?\d+) p99 (-?\d+) max (-?\d+)", out)
        return {"sent": int(m.group(1)), "lost": int(m.group(2)), "p50_us": int(m.group(3)),
                "p99_us": int(m.group(4)), "max_us": int(m.group(5))}


def setup_peer(l1):
    """The peer and the ideal sender: namespaces on internal ports."""
    for ns, port, ip in (("peer", "peer0", PEER_IP), ("l1pod", "l1pod0", "10.50.0.50")):
        l1.check(f"ovs-vsctl add-port {BRIDGE} {port} tag={VLAN} -- "
                 f"set Interface {port} type=internal")
        l1.wait_until(f"ip link show {port}", timeout=60)
        l1.check(f"ip netns add {ns} && ip link set {port} netns {ns} && "
                 f"ip -n {ns} addr add {ip}/24 dev {port} && ip -n {ns} link set {port} up && "
                 f"ip -n {ns} link set lo up")
    l1.check(f"ip netns exec peer {tool('l1')} rr-server -listen :9001 > /dev/null 2>&1 &")


def setup_vm_paths(s):
    l2 = s.l2
    # after: VF 0 in pod "vf" with VLAN 100 (the peer's), through the PF.
    s.enable_vfs(1)
    s.add_pod("vf", 0, "02:00:00:00:0b:01", VLAN, "10.50.0.1/24")
    # before: pod "br" on a veth into a Linux bridge over the PF.  The PF's
    # port is untagged on the bridge: the peer's port gets the VLAN as a
    # trunk for it (set when the path is measured).
    l2.check(f"ip link add br0 type bridge && ip link set {s.pf_dev} master br0 && "
             f"ip link set {s.pf_dev} up && ip link set br0 up && "
             "ip netns add br && ip link add vbr type veth peer name eth0 netns br && "
             "ip link set vbr master br0 && ip link set vbr up && "
             "ip -n br addr add 10.50.0.2/24 dev eth0 && ip -n br link set eth0 up && "
             "ip -n br link set lo up")
    l2.wait_until("ip -n vf link show net1 | grep -q LOWER_UP", timeout=60)


def main():
    out_dir = os.path.join(paths.CACHE, "bench")
    os.makedirs(out_dir, exist_ok=True)
    art = paths.ARTIFACTS
    l1 = L1Host("l1", art)
    l1.start(boot_timeout=300)
    results = {"paths": {}, "rounds": ROUNDS, "secs": SECS, "rr_rate": RR_RATE}
    try:
        s = System(l1)
        s.start_host()
        s.start_vm()
        setup_peer(l1)
        setup_vm_paths(s)
        b = Bench(s)
        paths_ = [("before", "l2", "br"), ("after", "l2", "vf"), ("ideal", "l1", "l1pod")]
        for name, where, ns in paths_:
            # The PF (untagged) reaches the peer only when the peer is untagged.
            tag = "[]" if name == "before" else str(VLAN)
            l1.check(f"ovs-vsctl set Port peer0 tag={tag}" if tag != "[]" else
                     "ovs-vsctl clear Port peer0 tag")
            l1.check(f"ovs-vsctl set Port l1pod0 tag={VLAN}")
            ok = b.run_in(where, ns, f"ping -c 3 -W 5 {PEER_IP}", timeout=120)
            assert " 0% packet loss" in ok, ok
            r = {"udp_mbps": [], "tcp_mbps": [], "rr": []}
            for _ in range(ROUNDS):
                r["udp_mbps"].append(b.throughput(where, ns, "udp"))
                r["tcp_mbps"].append(b.throughput(where, ns, "tcp"))
                r["rr"].append(b.latency(where, ns))
            results["paths"][name] = r
            print(f"bench-pods: {name}: UDP {statistics.median(r['udp_mbps']):.2f} Mbit/s, "
                  f"TCP {statistics.median(r['tcp_mbps']):.2f} Mbit/s, p50 "
                  f"{statistics.median(x['p50_us'] for x in r['rr'])} us", flush=True)
        s.stop()
    finally:
        l1.stop()
    write(out_dir, results)


def med(xs):
    return statistics.median(xs)


def write(out_dir, results):
    with open(os.path.join(out_dir, "pods.json"), "w") as f:
        json.dump(results, f, indent=1)
    P = results["paths"]
    rows = []
    for name in ("before", "after", "ideal"):
        r = P[name]
        rows.append((name, med(r["udp_mbps"]), med(r["tcp_mbps"]),
                     med(x["p50_us"] for x in r["rr"]), med(x["p99_us"] for x in r["rr"]),
                     max(x["max_us"] for x in r["rr"]),
                     sum(x["lost"] for x in r["rr"])))
    lines = [f"Pod networking, {results['rounds']} rounds of {results['secs']} s, "
             f"request/response at {results['rr_rate']}/s (medians; max over rounds)", "",
             "| path | UDP Mbit/s | TCP Mbit/s | RR p50 us | RR p99 us | RR max us | lost |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        lines.append("| {} | {:.2f} | {:.2f} | {:.0f} | {:.0f} | {} | {} |".format(*row))
    b, a = rows[0], rows[1]
    lines += ["", f"after/before: UDP {a[1] / b[1]:.2f}x, TCP {a[2] / b[2]:.2f}x, "
              f"p99 {a[4] / b[4]:.2f}x, max {a[5] / max(b[5], 1):.2f}x"]
    with open(os.path.join(out_dir, "pods.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    plot(out_dir, rows)


def two_panels(path, titles, series, suptitle, xlabel="enabled VFs"):
    """Save to @path a figure of two panels side by side, titled @titles:
    each of @series, (label, style, xs, (left ys, right ys)), is drawn in
    both."""
    plt = pyplot()
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.8))
    for label, style, xs, ys in series:
        for a, y in zip(ax, ys):
            a.plot(xs, y, style, label=label)
    for a, title in zip(ax, titles):
        a.set_title(title)
        a.set_xlabel(xlabel)
        a.legend(fontsize=7)
    fig.suptitle(suptitle, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def pyplot():
    """matplotlib.pyplot for files (Agg), installed in the venv on demand;
    the benchmarks' plots use it."""
    try:
        import matplotlib
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                        "--disable-pip-version-check", "matplotlib>=3.7,<4"], check=True)
        import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot(out_dir, rows):
    """pods.png"""
    plt = pyplot()
    names = [r[0] for r in rows]
    fig, ax = plt.subplots(1, 3, figsize=(12, 3.8))
    ax[0].bar(names, [r[1] for r in rows], color=["#999", "#2a7", "#36c"])
    ax[0].set_title("UDP throughput (Mbit/s)")
    ax[1].bar(names, [r[2] for r in rows], color=["#999", "#2a7", "#36c"])
    ax[1].set_title("TCP throughput (Mbit/s)")
    x = range(len(names))
    ax[2].bar([i - 0.2 for i in x], [r[3] / 1000 for r in rows], 0.4, label="p50")
    ax[2].bar([i + 0.2 for i in x], [r[4] / 1000 for r in rows], 0.4, label="p99")
    ax[2].set_xticks(list(x), names)
    ax[2].set_title("request/response RTT (ms)")
    ax[2].legend()
    fig.suptitle("pods in a VM: before (bridge+veth over the PF), after (VF), ideal (host); "
                 "nested TCG", fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "pods.png"), dpi=100)


if __name__ == "__main__":
    main()
