#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Pod networking in the paper's shape, side by side in one run.

The system of tests/harness/e2e.py (emulated host: OVS-DPDK, the daemon's
VDUSE VFs; a VM whose PF is a VDUSE port of the same bridge).  A peer
"host" is a network namespace of the emulated host on an OVS internal port
of the bridge.  The paths from a pod to the peer:

- before: a pod in the VM on a veth pair and a Linux bridge over the VM's
  PF (the software networking pods in VMs get today);
- before-kube: the same with what kube-proxy (iptables mode) and a
  NetworkPolicy implementation install for 100 services
  (scripts/kube-iptables-rules); only when the VM's kernel has netfilter
  and iptables-restore (the test kernel has neither: recorded as skipped,
  with the reason);
- after: a pod in the VM on a VF the guest created (VDUSE device, OVS);
- ideal: a namespace of the emulated host itself on a second internal
  port (no VM; the VM idles, which measures its idle instructions).

Traffic kinds: UDP bulk from the pod (udp-tx, as fast as it can, by
udp-blast: a loop of sendmmsg with no time-driven work) and to it (udp-rx,
the peer paced to VSRIOV_BENCH_RX_MBPS, received by udp-blast -l), TCP bulk
from the pod (tcp-tx) and request/response at a fixed rate (rr, p50/p99/max
from tests/traffic); VSRIOV_BENCH_KINDS picks some.  The VM's QEMU runs
with -icount VSRIOV_BENCH_ICOUNT (default shift=0,sleep=on; empty: none):
the guest's clock then advances per instruction, so the work its timers
drive costs the same instructions however fast or loaded this machine is
(without it the counts per packet moved up to 2.4x between runs).  Before
the paths, ROUNDS windows of the VM idle give its idle rate, which the
"net of idle" figures subtract.  Each run is measured over a window of SECS seconds inside
the stream (from a second after the stream reached the pod's switch port):
the VM's instructions, user and kernel, counted by QEMU with the insn-count
plugin (tests/insn-count/), and the frames and bytes on the pod's switch
port (the VM's PF port, the VF's port, the host namespace's port) in the
same window, read together by tests/insn-count/insn_read.py in Level 1.
Instructions per packet divide by the frames of the stream's direction
(udp-tx and tcp-tx: frames from the pod; udp-rx: frames to it; rr: the
requests).  ROUNDS times each; results in $VSRIOV_BENCH_OUT (default
$VSRIOV_CACHE/bench): pods.{json,md}, pods.png (wall clock) and
pods-insn-KIND.png (instructions per packet).  The Mbit/s under nested TCG
mean little, and under -icount the rr client's round trips are in the
guest's clock, not the wall clock (docs/benchmarks.md)."""
import json
import os
import re
import shlex
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from harness import paths  # noqa: E402
from harness.e2e import BRIDGE, System, l1_path, port_no, vf_port  # noqa: E402
from harness.vm import L1Host  # noqa: E402

ROUNDS = int(os.environ.get("VSRIOV_BENCH_ROUNDS", "3"))
SECS = int(os.environ.get("VSRIOV_BENCH_SECS", "8"))
RR_RATE = int(os.environ.get("VSRIOV_BENCH_RR_RATE", "20"))
RX_MBPS = float(os.environ.get("VSRIOV_BENCH_RX_MBPS", "1"))
PATHS = os.environ.get("VSRIOV_BENCH_PATHS", "before,before-kube,after,ideal").split(",")
ALL_KINDS = ("udp-tx", "udp-rx", "tcp-tx", "rr")
# The VM's QEMU's -icount (empty: none): the guest's clock advances by
# 2^shift ns per instruction it executes, so its timers fire after the same
# instructions however fast TCG runs.
ICOUNT = os.environ.get("VSRIOV_BENCH_ICOUNT", "shift=0,sleep=on")
# rr's client paces and ends its run by the guest's clock, which -icount
# slows while the guest works: a round may never end.  Not by default
# under -icount (docs/benchmarks.md).
DEFAULT_KINDS = tuple(k for k in ALL_KINDS if not (ICOUNT and k == "rr"))
KINDS = tuple(os.environ.get("VSRIOV_BENCH_KINDS", ",".join(DEFAULT_KINDS)).split(","))
assert set(KINDS) <= set(ALL_KINDS), KINDS
PEER_IP = "10.50.0.100"
VLAN = 100
VM = "vm1"
PLUGIN_SOCK = f"/run/vsriov-{VM}/insn.sock"
# How long the stream may take to start (a program started in the nested
# VM took up to a minute on a loaded machine) and, for rr, the client's run
# beyond the window (it prints its percentiles when it ends by itself).
LEAD = 60
RR_LEAD = 12


def tool(where, prog="traffic"):
    """A tool (traffic, udp-blast): at Level 2 from the VM's memory (System
    copies it there), at Level 1 from its 9p share."""
    return f"/mnt/tools/{prog}" if where == "l2" else f"/scratch/tools/{prog}"


def plugin():
    """Build the insn-count plugin (incremental); its path in Level 1."""
    so = subprocess.run([os.path.join(paths.SRC, "tests", "insn-count", "build")], check=True,
                        capture_output=True, text=True).stdout.strip()
    return l1_path(so)


class CountedSystem(System):
    """The VM's QEMU loads the insn-count plugin, its socket in the VM's
    run folder in Level 1."""

    def __init__(self, l1, so):
        super().__init__(l1)
        self.so = so

    def start_host(self):
        # udp-blast (built next to the plugin) goes to the VM with the tools
        tools = os.path.join(self.l1.scratch, "tools")
        os.makedirs(tools, exist_ok=True)
        src = os.path.join(paths.CACHE, "insn-count", "udp-blast")
        subprocess.run(["cp", src, os.path.join(tools, "udp-blast")], check=True)
        super().start_host()

    def start_vm(self, name="vm1", mac="52:54:00:00:01:00"):
        # Under -icount shift=0 the guest's boot delays are spun at 1 ns an
        # instruction: it boots in 6 min or more on a loaded machine.
        start_l2 = self.l1.start_l2
        self.l1.start_l2 = lambda *a, **kw: start_l2(*a, **{**kw, "boot_timeout": 1800})
        try:
            return super().start_vm(name, mac)
        finally:
            del self.l1.start_l2

    def vm_args(self, name, pf_vhost, mac):
        return super().vm_args(name, pf_vhost, mac) + [
            "-plugin", f"{self.so},sock=/run/vsriov-{name}/insn.sock"] + (
            ["-icount", ICOUNT] if ICOUNT else [])


class Path:
    def __init__(self, name, where, ns, port, ip):
        self.name, self.where, self.ns, self.port, self.ip = name, where, ns, port, ip


class Bench:
    def __init__(self, s):
        self.s, self.l1, self.l2 = s, s.l1, s.l2

    def guest(self, where):
        return self.l2 if where == "l2" else self.l1

    def bg(self, where, ns, args, tag, prog="traffic"):
        """Start a tool in the background in @ns, its output in
        /tmp/TAG.log, its pid in /tmp/TAG.pid."""
        self.guest(where).check(f"ip netns exec {ns} {tool(where, prog)} {args} > /tmp/{tag}.log "
                                f"2>&1 & echo $! > /tmp/{tag}.pid")

    def listening(self, where, ns, proto, port):
        """Until @ns has a socket on @port (Go's are IPv6 where it can)."""
        hexport = f":{port:04X} "
        self.guest(where).wait_until(f"ip netns exec {ns} cat /proc/net/{proto} "
                                     f"/proc/net/{proto}6 2>/dev/null | grep -q '{hexport}'",
                                     timeout=120)

    def stop(self, where, tag):
        self.guest(where).run(f"kill $(cat /tmp/{tag}.pid) 2>/dev/null; "
                              f"while kill -0 $(cat /tmp/{tag}.pid) 2>/dev/null; do sleep 0.2; "
                              "done", timeout=120)

    def counters(self, p):
        """A Level 1 command printing the path's port counters as OVS's
        dump-ports does, "rx" being what the pod sent into the switch: the
        switch's port, or for the host's own namespace (an internal port,
        whose OVS counters are "?" once moved there) its interface's."""
        if p.where == "l1":
            st = f"/sys/class/net/{p.port}/statistics"
            return (f"ip netns exec {p.ns} sh -c 'echo rx pkts=$(cat {st}/tx_packets), "
                    f"bytes=$(cat {st}/tx_bytes); echo tx pkts=$(cat {st}/rx_packets), "
                    f"bytes=$(cat {st}/rx_bytes)'")
        return f"ovs-ofctl dump-ports {BRIDGE} {port_no(self.l1, p.port)}"

    def idle(self):
        """The VM's instructions per second in a window where nothing
        runs in it."""
        a, b = json.loads(self.l1.check(f"python3 /src/tests/insn-count/insn_read.py "
                                        f"{PLUGIN_SOCK} --window {SECS}", timeout=SECS + 120))
        r = {"secs": b["time"] - a["time"], "user": b["user"] - a["user"],
             "kernel": b["kernel"] - a["kernel"]}
        print(f"bench-pods: idle: {(r['user'] + r['kernel']) / r['secs']:.0f} instructions/s",
              flush=True)
        return r

    def frames(self, cmd, direction):
        out = self.l1.check(cmd)
        return int(re.search(rf"{direction} pkts=(\d+)", out).group(1))

    def run(self, p, kind):
        """One stream of @kind on path @p; its window's figures."""
        cmd = self.counters(p)
        long_ = SECS + LEAD
        if kind == "udp-tx":
            self.bg("l1", "peer", f"udp-sink -listen :9000 -duration {long_}s", "sink")
            self.listening("l1", "peer", "udp", 9000)
            send = (p.where, p.ns, f"{PEER_IP} 9000 1400 0", "udp-blast")
            direction = "rx"        # (OVS's rx: from the pod into the switch)
        elif kind == "udp-rx":
            self.bg(p.where, p.ns, "-l 9000", "sink", "udp-blast")
            self.listening(p.where, p.ns, "udp", 9000)
            send = ("l1", "peer", f"udp-send -to {p.ip}:9000 -size 1400 -mbps {RX_MBPS} "
                                  f"-duration {long_}s")
            direction = "tx"
        elif kind == "tcp-tx":
            self.bg("l1", "peer", f"tcp-sink -listen :9000 -duration {long_}s", "sink")
            self.listening("l1", "peer", "tcp", 9000)
            send = (p.where, p.ns, f"tcp-send -to {PEER_IP}:9000 -duration {long_}s")
            direction = "rx"
        else:
            send = (p.where, p.ns, f"rr-client -to {PEER_IP}:9001 -rate {RR_RATE} "
                                   f"-duration {SECS + RR_LEAD}s")
            direction = "rx"
        base = self.frames(cmd, direction)
        self.bg(*send[:3], "send", *send[3:])
        # The window opens a second after the stream reached the port.
        self.l1.wait_until(f"test $({cmd} | sed -n 's/.*{direction} pkts=\\([0-9]*\\).*/\\1/p') "
                           f"-ge {base + 5}", timeout=LEAD, interval=0.5)
        out = self.l1.check(f"sleep 1; python3 /src/tests/insn-count/insn_read.py {PLUGIN_SOCK} "
                            f"--window {SECS} --with {shlex.quote(cmd)}", timeout=SECS + 120)
        a, b = json.loads(out)
        # The stream ran through the window (the sender still runs).
        sender = send[0]
        alive = self.guest(sender).run("kill -0 $(cat /tmp/send.pid)").status == 0
        r = {"secs": b["time"] - a["time"], "user": b["user"] - a["user"],
             "kernel": b["kernel"] - a["kernel"], "through_window": alive}
        for d in ("rx", "tx"):
            ca = re.search(rf"{d} pkts=(\d+), bytes=(\d+)", a["with"])
            cb = re.search(rf"{d} pkts=(\d+), bytes=(\d+)", b["with"])
            r[f"{d}_pkts"] = int(cb.group(1)) - int(ca.group(1))
            r[f"{d}_bytes"] = int(cb.group(2)) - int(ca.group(2))
        r["packets"] = r[f"{direction}_pkts"]
        r["mbps"] = r[f"{direction}_bytes"] * 8 / r["secs"] / 1e6
        if kind == "rr":
            g = self.guest(sender)
            g.wait_until("! kill -0 $(cat /tmp/send.pid) 2>/dev/null", timeout=RR_LEAD + 180)
            m = re.search(r"rr sent (\d+) lost (\d+) p50 (-?\d+) p99 (-?\d+) max (-?\d+)",
                          g.check("cat /tmp/send.log"))
            r.update({"sent": int(m.group(1)), "lost": int(m.group(2)),
                      "p50_us": int(m.group(3)), "p99_us": int(m.group(4)),
                      "max_us": int(m.group(5))})
        else:
            self.stop(sender, "send")
            self.stop("l1" if kind != "udp-rx" else p.where, "sink")
        per = r["packets"] or 1
        print(f"bench-pods: {p.name} {kind}: {r['packets']} packets in {r['secs']:.1f} s, "
              f"{r['user'] / per:.0f} user + {r['kernel'] / per:.0f} kernel instructions "
              f"per packet{'' if alive else ' (the stream ended inside the window)'}",
              flush=True)
        return r


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


def kube_missing(l2):
    """Why the VM cannot run the before-kube path, or None: its kernel's
    netfilter (iptables' tables, the bridge's calls into them) and an
    iptables-restore."""
    r = l2.run("test -e /proc/net/ip_tables_names && "
               "test -e /proc/sys/net/bridge/bridge-nf-call-iptables && "
               "command -v iptables-restore")
    if r.status != 0:
        return ("the VM's kernel has no netfilter (no /proc/net/ip_tables_names or "
                "bridge-nf-call-iptables) or no iptables-restore: the test kernel "
                "(scripts/guest/test-kernel.config) is built without them")
    return None


def setup_kube(l2):
    """kube-proxy's and the policy's rules (scripts/kube-iptables-rules)
    for the before path's pod, bridged frames through iptables."""
    rules = subprocess.run([os.path.join(paths.SRC, "scripts", "kube-iptables-rules"),
                            "--pod-ip", "10.50.0.2", "--pod-if", "vbr"], check=True,
                           capture_output=True, text=True).stdout
    l2.check(f"cat > /tmp/kube.rules <<'EOF'\n{rules}EOF\n"
             "iptables-restore < /tmp/kube.rules && "
             "echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables", timeout=300)


def main():
    out_dir = os.environ.get("VSRIOV_BENCH_OUT", os.path.join(paths.CACHE, "bench"))
    os.makedirs(out_dir, exist_ok=True)
    art = paths.ARTIFACTS
    so = plugin()
    l1 = L1Host("l1", art)
    l1.start(boot_timeout=300)
    results = {"paths": {}, "skipped": {}, "rounds": ROUNDS, "secs": SECS,
               "rr_rate": RR_RATE, "rx_mbps": RX_MBPS, "kinds": list(KINDS), "icount": ICOUNT}
    try:
        s = CountedSystem(l1, so)
        s.start_host()
        s.start_vm(VM)
        setup_peer(l1)
        setup_vm_paths(s)
        b = Bench(s)
        # The VM idle (its agent, timers), ROUNDS windows
        results["idle"] = [b.idle() for _ in range(ROUNDS)]
        all_paths = {"before": Path("before", "l2", "br", f"{VM}-pf", "10.50.0.2"),
                     "before-kube": Path("before-kube", "l2", "br", f"{VM}-pf", "10.50.0.2"),
                     "after": Path("after", "l2", "vf", vf_port(0), "10.50.0.1"),
                     "ideal": Path("ideal", "l1", "l1pod", "l1pod0", "10.50.0.50")}
        for name in PATHS:
            p = all_paths[name]
            if name == "before-kube":
                why = kube_missing(s.l2)
                if why:
                    results["skipped"][name] = why
                    print(f"bench-pods: {name} skipped: {why}", flush=True)
                    continue
                setup_kube(s.l2)
            # The PF (untagged) reaches the peer only when the peer is untagged.
            if name.startswith("before"):
                l1.check("ovs-vsctl clear Port peer0 tag")
            else:
                l1.check(f"ovs-vsctl set Port peer0 tag={VLAN}")
            l1.check(f"ovs-vsctl set Port l1pod0 tag={VLAN}")
            ok = b.guest(p.where).check(f"ip netns exec {p.ns} ping -c 3 -W 5 {PEER_IP}",
                                        timeout=120)
            assert " 0% packet loss" in ok, ok
            results["paths"][name] = {k: [b.run(p, k) for _ in range(ROUNDS)] for k in KINDS}
            # (what was measured so far, should a later path fail)
            with open(os.path.join(out_dir, "pods.json"), "w") as f:
                json.dump(results, f, indent=1)
        s.stop()
    finally:
        l1.stop()
    write(out_dir, results)


def med(xs):
    return statistics.median(list(xs))


def per_packet(runs, what):
    """Instructions (@what: user, kernel, total) per packet of each run."""
    return [(r["user"] + r["kernel"] if what == "total" else r[what]) / max(r["packets"], 1)
            for r in runs]


def net_per_packet(runs, idle_rate):
    """Total instructions per packet of each run less the VM's idle rate
    over the window."""
    return [(r["user"] + r["kernel"] - idle_rate * r["secs"]) / max(r["packets"], 1)
            for r in runs]


def idle_rate(results):
    """The VM's idle instructions per second (median of its idle windows),
    or 0 when not measured."""
    idle = [(r["user"] + r["kernel"]) / r["secs"] for r in results.get("idle") or []]
    return med(idle) if idle else 0.0


def spread(xs):
    """(max - min) / median, as a fraction."""
    m = med(xs)
    return (max(xs) - min(xs)) / m if m else 0.0


def write(out_dir, results):
    with open(os.path.join(out_dir, "pods.json"), "w") as f:
        json.dump(results, f, indent=1)
    P = results["paths"]
    names = list(P)
    kinds = results.get("kinds", ALL_KINDS)
    lines = [f"Pod networking, {results['rounds']} rounds, windows of {results['secs']} s; "
             f"udp-rx paced at {results['rx_mbps']} Mbit/s, rr at {results['rr_rate']}/s", "",
             "Guest instructions per packet (rr: per transaction), counted by QEMU "
             "(median of the rounds; spread = (max - min) / median)", "",
             "| path | kind | packets | user | kernel | total | spread | net of idle | spread |",
             "|---|---|---|---|---|---|---|---|---|"]
    rate = idle_rate(results)
    for name in names:
        if name == "ideal":     # (no VM on the path)
            continue
        for kind in kinds:
            if kind not in P[name]:     # (a run that failed in it)
                continue
            runs = P[name][kind]
            tot = per_packet(runs, "total")
            net = net_per_packet(runs, rate)
            lines.append(f"| {name} | {kind} | {med(r['packets'] for r in runs):.0f} | "
                         f"{med(per_packet(runs, 'user')):.0f} | "
                         f"{med(per_packet(runs, 'kernel')):.0f} | {med(tot):.0f} | "
                         f"{100 * spread(tot):.1f}% | {med(net):.0f} | "
                         f"{100 * spread(net):.1f}% |")
    if results.get("idle"):
        idle = [(r["user"] + r["kernel"]) / r["secs"] for r in results["idle"]]
        lines += ["", f"The VM idle (nothing running in it): {med(idle):.0f} "
                      f"instructions/s (min {min(idle):.0f}, max {max(idle):.0f})"]
    if "ideal" in P:
        idle = [(r["user"] + r["kernel"]) / r["secs"] for k in kinds for r in P["ideal"][k]]
        lines += ["", f"The VM idle (while the ideal path ran): {med(idle):.0f} "
                      f"instructions/s (min {min(idle):.0f}, max {max(idle):.0f})"]
    for base in ("before-kube", "before"):
        if base in P and "after" in P:
            lines += ["", f"{base}/after, instructions per packet: " + ", ".join(
                f"{k} {med(per_packet(P[base][k], 'total')) / med(per_packet(P['after'][k], 'total')):.2f}x"
                for k in kinds if k in P[base] and k in P["after"])]
            lines += ["", f"{base}/after, net of idle: " + ", ".join(
                f"{k} {med(net_per_packet(P[base][k], rate)) / med(net_per_packet(P['after'][k], rate)):.2f}x"
                for k in kinds if k in P[base] and k in P["after"])]
    for name, why in results["skipped"].items():
        lines += ["", f"{name}: skipped: {why}"]
    lines += ["", "Wall clock (nested TCG: not the paper's comparison), medians; "
                  "Mbit/s of frames on the pod's switch port in the window", "",
              "| path | UDP tx Mbit/s | UDP rx Mbit/s | TCP tx Mbit/s | RR p50 us | RR p99 us | "
              "RR max us | lost |", "|---|---|---|---|---|---|---|---|"]
    rows = []
    nan = float("nan")
    for name in names:
        r = P[name]

        def m(kind, key, f=med):
            return f(x[key] for x in r[kind]) if kind in r else nan
        rows.append((name, m("udp-tx", "mbps"), m("udp-rx", "mbps"), m("tcp-tx", "mbps"),
                     m("rr", "p50_us"), m("rr", "p99_us"), m("rr", "max_us", max),
                     m("rr", "lost", sum)))
        lines.append("| {} | {:.2f} | {:.2f} | {:.2f} | {:.0f} | {:.0f} | {:.0f} | {:.0f} |"
                     .format(*rows[-1]))
    short = [name for name in names for k in kinds for r in P[name].get(k, [])
             if not r["through_window"]]
    if short:
        lines += ["", f"Windows the stream did not fill (the sender had ended): {short}"]
    with open(os.path.join(out_dir, "pods.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    plot(out_dir, rows)
    plot_insns(out_dir, results)


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
    """pods.png: the wall-clock figures"""
    plt = pyplot()
    names = [r[0] for r in rows]
    colors = [COLORS.get(n, "#777") for n in names]
    fig, ax = plt.subplots(1, 3, figsize=(12, 3.8))
    x = range(len(names))
    ax[0].bar([i - 0.2 for i in x], [r[1] for r in rows], 0.4, color=colors, label="UDP tx")
    ax[0].bar([i + 0.2 for i in x], [r[2] for r in rows], 0.4, color=colors, alpha=0.5,
              label="UDP rx (paced)")
    ax[0].set_xticks(list(x), names)
    ax[0].set_title("UDP (Mbit/s)")
    ax[0].legend(fontsize=7)
    ax[1].bar(names, [r[3] for r in rows], color=colors)
    ax[1].set_title("TCP tx (Mbit/s)")
    ax[2].bar([i - 0.2 for i in x], [r[4] / 1000 for r in rows], 0.4, label="p50")
    ax[2].bar([i + 0.2 for i in x], [r[5] / 1000 for r in rows], 0.4, label="p99")
    ax[2].set_xticks(list(x), names)
    ax[2].set_title("request/response RTT (ms)")
    ax[2].legend()
    fig.suptitle("pods in a VM, wall clock under nested TCG (not the paper's comparison: "
                 "see the instruction counts)", fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "pods.png"), dpi=100)
    plt.close(fig)


COLORS = {"before-kube": "#666", "before": "#999", "after": "#2a7", "ideal": "#36c"}
TITLES = {"udp-tx": "UDP bulk from the pod, per datagram",
          "udp-rx": "UDP bulk to the pod, per datagram",
          "tcp-tx": "TCP bulk from the pod, per data segment",
          "rr": "request/response, per transaction"}


def plot_insns(out_dir, results):
    """pods-insn-KIND.png: the VM's instructions per packet, user and
    kernel stacked, per path (the ideal path has no VM in it), with the
    rounds' range."""
    plt = pyplot()
    P = results["paths"]
    for kind in results.get("kinds", ALL_KINDS):
        names = [n for n in P if n != "ideal" and kind in P[n]]
        fig, ax = plt.subplots(figsize=(5.5, 3.8))
        user = [med(per_packet(P[n][kind], "user")) for n in names]
        kern = [med(per_packet(P[n][kind], "kernel")) for n in names]
        tot = [per_packet(P[n][kind], "total") for n in names]
        ax.bar(names, kern, color=[COLORS.get(n, "#777") for n in names], label="kernel")
        ax.bar(names, user, bottom=kern, color="#fc6", label="user")
        mid = [med(t) for t in tot]
        ax.errorbar(names, mid, yerr=[[m - min(t) for m, t in zip(mid, tot)],
                                      [max(t) - m for m, t in zip(mid, tot)]],
                    fmt="none", ecolor="black", capsize=4)
        for i, m in enumerate(mid):
            ax.annotate(f"{m / 1000:.1f}k", (i, m), ha="center", va="bottom", fontsize=8,
                        xytext=(0, 6), textcoords="offset points")
        ax.set_ylabel("guest instructions")
        ax.set_title(TITLES[kind], fontsize=9)
        ax.legend(fontsize=7)
        ic = results.get("icount")
        fig.suptitle(f"{results['rounds']} rounds of {results['secs']} s windows, "
                     "counted by QEMU (insn-count)" + (f", -icount {ic}" if ic else ""),
                     fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, f"pods-insn-{kind}.png"), dpi=100)
        plt.close(fig)


if __name__ == "__main__":
    main()
