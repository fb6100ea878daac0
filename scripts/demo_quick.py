#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""scripts/demo --quick: the Level 0 demo; prints each step and what it showed.

A TCG guest on our QEMU gets a virtual SR-IOV PF (virtio-net-pci with
sriov-pool) whose VF backends are taps on a bridge in a network namespace
of this machine (the embedded default: no SR-IOV NIC, no vDPA device).
The guest creates VFs with sriov_numvfs and two "pods" (network
namespaces in the guest) ping each other over their VFs."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from harness import paths  # noqa: E402
from harness.netns import NetNS  # noqa: E402
from harness.vm import Guest  # noqa: E402
from system.guest_net import FIND_PF, enable_vfs, vf_into_netns  # noqa: E402
from system.test_l0_vpf import host_switch, vpf_tap_args  # noqa: E402

NUM_VFS = 4


def say(msg):
    print(f"demo: {msg}", flush=True)


def main():
    t0 = time.monotonic()
    out = paths.ARTIFACTS
    os.makedirs(out, exist_ok=True)
    with NetNS("vsr-demo") as host:
        host_switch(host, NUM_VFS)
        say(f"host switch: bridge br0 in netns {host.name}, taps tpf (PF) and "
            f"tvf0..tvf{NUM_VFS - 1} (the pool's VF backends)")
        args = vpf_tap_args(NUM_VFS)
        say("QEMU: -object vsriov-pool,id=p0,netdevs=b0,...,netdevs=b3 "
            "-device virtio-net-pci,bus=rp0,id=pf0,netdev=pfnet,sriov-pool=p0")
        # The guest runs the kernel with guest-kernel-patches/: it lists and
        # configures its VFs through the PF like on a physical NIC.
        with Guest("demo", out, netns=host.name, qemu_args=args) as g:
            say(f"guest booted under TCG ({time.monotonic() - t0:.1f} s since start)")
            pf = g.check(FIND_PF).strip()
            total = g.check(f"cat /sys/bus/pci/devices/{pf}/sriov_totalvfs").strip()
            say(f"guest sees PF {pf} (virtio-net) with sriov_totalvfs={total}")
            t1 = time.monotonic()
            enable_vfs(g, pf, NUM_VFS)
            say(f"guest: echo {NUM_VFS} > sriov_numvfs: {NUM_VFS} VFs bound to virtio_net "
                f"in {time.monotonic() - t1:.1f} s")
            for vf in g.qmp.execute("query-vsriov")[0]["vfs"]:
                say(f"  QMP query-vsriov: VF {vf['index']} at {vf['bus']:02x}:"
                    f"{vf['devfn'] >> 3:02x}.{vf['devfn'] & 7} mac {vf['mac']} "
                    f"backend {vf['netdev']} ({vf['backend']}) {vf['state']}")
            dev = g.check(f"ls /sys/bus/pci/devices/{pf}/virtio*/net/").strip()
            g.check(f"ip link set {dev} vf 0 mac 02:00:00:00:0a:01 vlan 100")
            say(f"guest: ip link set {dev} vf 0 mac 02:00:00:00:0a:01 vlan 100; "
                f"ip link show {dev}:")
            for line in g.check(f"ip link show {dev}").splitlines():
                if line.strip().startswith("vf "):
                    print(f"    {line.strip()}")
            cfg = g.qmp.execute("query-vsriov")[0]["vfs"][0]["config"]
            say(f"  QMP query-vsriov: VF 0 config mac {cfg['mac']} vlan {cfg['vlan']} "
                f"qos {cfg['qos']} ({cfg['applied']}: a static pool has no provider; "
                f"with vdpa-pool-daemon it is checked against the pool's policy)")
            vf_into_netns(g, pf, 0, "pod-a", "10.10.0.1/24")
            vf_into_netns(g, pf, 1, "pod-b", "10.10.0.2/24")
            g.wait_until("ip -n pod-a link show pod0 | grep -q LOWER_UP && "
                         "ip -n pod-b link show pod0 | grep -q LOWER_UP", timeout=30)
            ping = g.check("ip netns exec pod-a ping -c 5 -W 5 10.10.0.2", timeout=90)
            say("guest: pod-a (VF 0, 10.10.0.1) pinged pod-b (VF 1, 10.10.0.2) "
                "through the host bridge:")
            for line in ping.splitlines():
                if "packet loss" in line or "min/avg" in line:
                    print(f"    {line}")
            delivered = host.run("cat /sys/class/net/tvf1/statistics/tx_packets").stdout.strip()
            say(f"host: tap tvf1 (VF 1's backend) delivered {delivered} packets to the guest")
            g.check("ip netns del pod-a && ip netns del pod-b")
            enable_vfs(g, pf, 0)
            states = {vf["state"] for vf in g.qmp.execute("query-vsriov")[0]["vfs"]}
            say(f"guest: echo 0 > sriov_numvfs: QMP shows every VF {'/'.join(states)}")
    say(f"done in {time.monotonic() - t0:.1f} s; logs in {out}")
    say("shown: a guest created VFs on a virtual PF whose backends come from a pool, "
        "configured one through its PF, and two pods passed traffic over them through "
        "a host switch")


if __name__ == "__main__":
    main()
