# SPDX-License-Identifier: GPL-2.0-or-later
"""Level 0: upstream composable SR-IOV (sriov-pf) with our QEMU build.

A guest gets a virtio-net PF and two declared VFs, each backed by a tap on a
bridge in a network namespace this test creates.  The guest enables the VFs
with sriov_numvfs, puts each VF netdev in its own netns, and the two ping
each other through the host bridge."""
import pytest

from system.guest_net import FIND_PF, enable_vfs, vf_into_netns

pytestmark = pytest.mark.slow


def tap_args(taps, macs):
    args = ["-device", "pcie-root-port,id=rp0,chassis=1"]
    # VFs are declared before their PF (upstream's rule).
    for i, (tap, mac) in enumerate(zip(taps, macs)):
        args += ["-netdev", f"tap,id=n{i},ifname={tap},script=no,downscript=no"]
    for i in range(1, len(taps)):
        args += ["-device", f"virtio-net-pci,bus=rp0,addr=0x0.{i:#x},netdev=n{i},"
                            f"mac={macs[i]},sriov-pf=pf0"]
    args += ["-device", f"virtio-net-pci,bus=rp0,addr=0x0.0x0,netdev=n0,mac={macs[0]},id=pf0"]
    return args


def test_vfs_ping_through_host_bridge(netns, guest_factory):
    host = netns("vsr-l0")
    taps = ["tpf", "tvf0", "tvf1"]
    host.run("ip link add br0 type bridge && ip link set br0 up")
    for t in taps:
        host.run(f"ip tuntap add dev {t} mode tap && ip link set {t} master br0 && "
                 f"ip link set {t} up")
    macs = ["52:54:00:10:00:00", "52:54:00:10:00:01", "52:54:00:10:00:02"]
    g = guest_factory("l0sriov", netns=host.name, qemu_args=tap_args(taps, macs))

    pf = g.check(FIND_PF).strip()
    assert pf, "no PF with an SR-IOV capability in the guest"
    assert g.check(f"cat /sys/bus/pci/devices/{pf}/sriov_totalvfs").strip() == "2"
    enable_vfs(g, pf, 2)
    for i in range(2):
        vendor = g.check(f"cat /sys/bus/pci/devices/{pf}/virtfn{i}/vendor").strip()
        assert vendor == "0x1af4"

    vf_into_netns(g, pf, 0, "a", "10.10.0.1/24")
    vf_into_netns(g, pf, 1, "b", "10.10.0.2/24")
    g.wait_until("ip -n a link show pod0 | grep -q LOWER_UP && "
                 "ip -n b link show pod0 | grep -q LOWER_UP", timeout=30)
    out = g.check("ip netns exec a ping -c 3 -W 5 10.10.0.2", timeout=60)
    assert " 0% packet loss" in out

    # The packets crossed the host bridge: both VF taps carried traffic.
    for t in ("tvf0", "tvf1"):
        rx = int(host.run(f"cat /sys/class/net/{t}/statistics/rx_packets").stdout)
        tx = int(host.run(f"cat /sys/class/net/{t}/statistics/tx_packets").stdout)
        assert rx >= 3 and tx >= 3, f"{t}: rx={rx} tx={tx}"

    enable_vfs(g, pf, 0)
    g.wait_until(f"! ls -d /sys/bus/pci/devices/{pf}/virtfn0 2>/dev/null", timeout=30)
