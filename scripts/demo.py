#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The demo behind scripts/demo; prints each step and what it showed."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from harness import paths  # noqa: E402
from harness.netns import NetNS  # noqa: E402
from harness.vm import Guest  # noqa: E402
from system.guest_net import FIND_PF, enable_vfs, vf_into_netns  # noqa: E402
from system.test_l0_upstream_sriov import tap_args  # noqa: E402


def say(msg):
    print(f"demo: {msg}", flush=True)


def main():
    t0 = time.monotonic()
    out = paths.ARTIFACTS
    os.makedirs(out, exist_ok=True)
    with NetNS("vsr-demo") as host:
        taps = ["tpf", "tvf0", "tvf1"]
        host.run("ip link add br0 type bridge && ip link set br0 up")
        for t in taps:
            host.run(f"ip tuntap add dev {t} mode tap && ip link set {t} master br0 && "
                     f"ip link set {t} up")
        say(f"host switch: bridge br0 with taps {', '.join(taps)} in netns {host.name}")
        macs = ["52:54:00:20:00:00", "52:54:00:20:00:01", "52:54:00:20:00:02"]
        with Guest("demo", out, netns=host.name, qemu_args=tap_args(taps, macs)) as g:
            say(f"guest booted under TCG on {paths.QEMU_BIN} "
                f"({time.monotonic() - t0:.1f} s since start)")
            pf = g.check(FIND_PF).strip()
            total = g.check(f"cat /sys/bus/pci/devices/{pf}/sriov_totalvfs").strip()
            say(f"guest sees PF {pf} (virtio-net) with sriov_totalvfs={total}")
            enable_vfs(g, pf, 2)
            for i in range(2):
                vf = os.path.basename(g.check(f"readlink /sys/bus/pci/devices/{pf}/virtfn{i}").strip())
                say(f"guest: echo 2 > sriov_numvfs created VF {i} at {vf}")
            vf_into_netns(g, pf, 0, "a", "10.10.0.1/24")
            vf_into_netns(g, pf, 1, "b", "10.10.0.2/24")
            g.wait_until("ip -n a link show pod0 | grep -q LOWER_UP && "
                         "ip -n b link show pod0 | grep -q LOWER_UP", timeout=30)
            ping = g.check("ip netns exec a ping -c 5 -W 5 10.10.0.2", timeout=90)
            summary = [line for line in ping.splitlines() if "packet loss" in line or "min/avg" in line]
            say("guest: netns a (VF 0, 10.10.0.1) pinged netns b (VF 1, 10.10.0.2) "
                "through the host bridge:")
            for line in summary:
                print(f"    {line}")
            rx = host.run("cat /sys/class/net/tvf1/statistics/tx_packets").stdout.strip()
            say(f"host: tap tvf1 (VF 1's backend) delivered {rx} packets into the guest")
            enable_vfs(g, pf, 0)
            say("guest: echo 0 > sriov_numvfs removed the VFs")
    say(f"done in {time.monotonic() - t0:.1f} s; logs in {out}")
    say("shown: VFs created by the guest on upstream composable SR-IOV with tap backends; "
        "the pool-backed virtual PF (issue 3) replaces the per-VF command line next")


if __name__ == "__main__":
    main()
