#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The demo behind scripts/demo: the whole system, as a user runs it, on
the embedded default (no SR-IOV NIC, no KVM); prints each step and what it
showed, then a summary.

An emulated host (Level 1, a TCG guest of this machine) runs OVS-DPDK,
vdpa-pool-daemon with a VDUSE PF (each VF a VDUSE device that OVS-DPDK
serves) and our QEMU; a VM inside it (Level 2) has a virtual PF, creates VFs
with sriov_numvfs, configures them through the PF, and gives them to pods
(tests/cni-flow, sriov-cni's ADD); the pods' packets cross OVS, where the
daemon enforces what the guest asked.  Set-up: tests/harness/e2e.py, the
same as the end-to-end test's."""
import contextlib
import os
import re
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from harness import paths  # noqa: E402
from harness.e2e import BRIDGE, DAEMON_LOG, System, drop_count, port_stats, vf_port  # noqa: E402
from harness.vm import L1Host  # noqa: E402

PODS = {  # pod: VF, MAC, VLAN, address
    "pod-a": (0, "02:00:00:00:0a:01", 100, "10.40.0.1/24"),
    "pod-b": (1, "02:00:00:00:0a:02", 100, "10.40.0.2/24"),
    "pod-c": (2, "02:00:00:00:0a:03", 150, "10.40.0.3/24"),
}
T0 = time.monotonic()


def say(msg):
    print(f"demo [{time.monotonic() - T0:6.1f} s]: {msg}", flush=True)


def show(text, prefix="    "):
    for line in text.rstrip().splitlines():
        print(prefix + line, flush=True)


@contextlib.contextmanager
def progress(what, every=15):
    """A line every `every` seconds while a long step runs."""
    done = threading.Event()
    start = time.monotonic()

    def tick():
        while not done.wait(every):
            say(f"... {what} ({time.monotonic() - start:.0f} s so far)")
    t = threading.Thread(target=tick, daemon=True)
    t.start()
    try:
        yield
    finally:
        done.set()
        t.join()


def daemon_log(l1, pattern):
    return [ln.split(": ", 1)[-1] for ln in l1.check(f"cat {DAEMON_LOG}").splitlines()
            if re.search(pattern, ln)]


def main():
    out = paths.ARTIFACTS
    os.makedirs(out, exist_ok=True)
    shown = []
    say("booting the emulated host (Level 1: Debian's kernel, OVS, vduse, our QEMU; TCG)")
    l1 = L1Host("l1", out)
    with progress("booting the emulated host"):
        l1.start(boot_timeout=300)
    try:
        s = System(l1)
        with progress("starting OVS-DPDK and vdpa-pool-daemon"):
            s.start_host()
        say("OVS-DPDK runs; vdpa-pool-daemon started with [pf sw0] vdpa-mgmtdev = vduse:")
        show("\n".join(daemon_log(l1, r"VDUSE|bridge|ready")))
        say(f"OVS bridge {BRIDGE}: one port per pooled VF (its VDUSE device's), "
            "default-deny until claimed:")
        show(l1.check(f"ovs-vsctl list-ports {BRIDGE}"))

        say("starting the VM (Level 2, nested TCG: about a minute): its PF is a VDUSE "
            "port too, its VFs come from the daemon's pool 'tenant-a' (lazy)")
        with progress("booting the VM"):
            s.start_vm()
        say(f"VM up: PF {s.pf} ({s.pf_dev}), sriov_totalvfs="
            f"{s.l2.check(f'cat /sys/bus/pci/devices/{s.pf}/sriov_totalvfs').strip()}")

        t = time.monotonic()
        with progress("enabling VFs"):
            s.enable_vfs(3)
        say(f"guest: echo 3 > sriov_numvfs: 3 VFs bound to virtio_net in "
            f"{time.monotonic() - t:.1f} s; the daemon handed out their backends:")
        show("\n".join(daemon_log(l1, r"claimed by")))
        shown.append("the guest created 3 VFs; QEMU claimed their vhost-vdpa backends "
                     "from vdpa-pool-daemon")

        for pod, (vf, mac, vlan, ip) in PODS.items():
            s.add_pod(pod, vf, mac, vlan, ip)
        say("CNI ADD (tests/cni-flow, sriov-cni's steps) for 3 pods: VF MAC and VLAN set "
            f"through the PF; guest's ip link show {s.pf_dev}:")
        show("\n".join(ln.strip() for ln in s.l2.check(f"ip link show {s.pf_dev}").splitlines()
                       if ln.strip().startswith("vf ")))
        say("the daemon turned them into OVS state (port tag = VLAN, flows from the "
            "VF's MAC only):")
        for pod, (vf, mac, vlan, _) in PODS.items():
            port = vf_port(vf)
            tag = l1.check(f"ovs-vsctl get Port {port} tag").strip()
            flows = l1.check(f"ovs-ofctl -O OpenFlow14 --no-stats dump-flows {BRIDGE} "
                             f"in_port={port}")
            show(f"{pod}: port {port} tag {tag}", "    ")
            show(flows, "      ")
        shown.append("the guest's VF settings (MAC, VLAN, spoof check) became the switch's "
                     "port tags and flows")
        s.l2.wait_until("for p in pod-a pod-b pod-c; do ip -n $p link show net1 | "
                        "grep -q LOWER_UP || exit 1; done", timeout=60)

        before = port_stats(l1, vf_port(0))
        got = s.ping("pod-a", "10.40.0.2", count=5)
        after = port_stats(l1, vf_port(0))
        say(f"pod-a -> pod-b (VLAN 100): {got}/5 ping replies; OVS counted "
            f"{after['rx_pkts'] - before['rx_pkts']} packets in and "
            f"{after['tx_pkts'] - before['tx_pkts']} out on pod-a's port")
        if got:
            shown.append("pods on the same VLAN passed traffic across the switch")

        got = s.ping("pod-c", "10.40.0.1", count=3, wait=2)
        say(f"pod-c (VLAN 150) -> pod-a (VLAN 100): {got}/3 replies: other VLANs are "
            "isolated")
        if not got:
            shown.append("a pod on another VLAN could not reach them")

        sent, received, _ = s.udp_stream("pod-a", "pod-b", "10.40.0.2", secs=5)
        rr = s.l2.run("ip netns exec pod-b /mnt/tools/traffic rr-server -listen :9001 "
                      "> /dev/null 2>&1 & echo $! > /tmp/rr.pid; "
                      "ip netns exec pod-a /mnt/tools/traffic rr-client -to 10.40.0.2:9001 "
                      "-rate 20 -duration 5s; kill $(cat /tmp/rr.pid)", timeout=120).stdout
        say(f"throughput pod-a -> pod-b: {received:.2f} Mbit/s of UDP arrived "
            f"({sent:.2f} sent); request/response: {rr.strip()} (microseconds; nested "
            "TCG: the figures mean little, the path is the product's)")
        shown.append(f"a stream of {received:.2f} Mbit/s went pod to pod (under nested TCG)")

        drops = drop_count(l1, vf_port(0))
        s.l2.check("ip -n pod-a link set net1 address 02:00:00:00:0a:99")
        got = s.ping("pod-a", "10.40.0.2", count=3, wait=2)
        s.l2.check(f"ip -n pod-a link set net1 address {PODS['pod-a'][1]}")
        say(f"pod-a with a forged source MAC: {got}/3 replies; OVS's spoof-check flow "
            f"dropped {drop_count(l1, vf_port(0)) - drops} packets")
        if not got:
            shown.append("a forged source MAC was dropped at the switch")

        for pod in PODS:
            s.del_pod(pod)
        s.enable_vfs(0)
        l1.wait_until("python3 /tmp/vpd_client.py free tenant-a | grep -qx 4", timeout=60)
        say("CNI DEL, echo 0 > sriov_numvfs: the VFs went back to the daemon's pool "
            "(4 free, their ports default-deny again)")
        shown.append("disabled VFs went back to the pool")
        s.stop()
    finally:
        l1.stop()
    say("summary:")
    for line in shown:
        print(f"  - {line}")
    say(f"done in {time.monotonic() - T0:.0f} s; logs in {out}")


if __name__ == "__main__":
    main()
