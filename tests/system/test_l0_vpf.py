# SPDX-License-Identifier: GPL-2.0-or-later
"""Level 0: the virtual PF.  A guest on our QEMU gets a virtio-net PF whose
VFs come from a vsriov-pool of tap backends on a bridge in a network
namespace this test creates.  `echo 4 > sriov_numvfs` gives 4 VFs with
link; two of them, each in its own netns in the guest, ping each other
through the host bridge; `echo 0` disables them again, and QMP shows each
step."""
import pytest

from system.guest_net import FIND_PF, enable_vfs, vf_into_netns

pytestmark = pytest.mark.slow

NUM_VFS = 4


def vpf_tap_args(n, pf_opts="", taps="t"):
    """A PF on tap pfnet (<taps>pf) with a pool of n taps <taps>vf0...;
    a second QEMU on the same host switch (a migration's destination)
    takes taps of its own."""
    args = ["-device", "pcie-root-port,id=rp0,chassis=1",
            "-netdev", f"tap,id=pfnet,ifname={taps}pf,script=no,downscript=no"]
    for i in range(n):
        args += ["-netdev", f"tap,id=b{i},ifname={taps}vf{i},script=no,downscript=no"]
    args += ["-object", "vsriov-pool,id=p0," + ",".join(f"netdevs=b{i}" for i in range(n)),
             "-device", "virtio-net-pci,bus=rp0,id=pf0,netdev=pfnet,sriov-pool=p0" + pf_opts]
    return args


def host_switch(ns, n, taps="t"):
    """Bridge br0 (made by the first call) with the taps of vpf_tap_args."""
    ns.run("ip link show br0 >/dev/null 2>&1 || "
           "{ ip link add br0 type bridge && ip link set br0 up; }")
    for t in [f"{taps}pf"] + [f"{taps}vf{i}" for i in range(n)]:
        ns.run(f"ip tuntap add dev {t} mode tap && ip link set {t} master br0 && "
               f"ip link set {t} up")


def vf_states(g):
    (pf,) = g.qmp.execute("query-vsriov")
    return pf, [vf["state"] for vf in pf["vfs"]]


def test_vpf_tap_pool(netns, guest_factory):
    host = netns("vsr-vpf")
    host_switch(host, NUM_VFS)
    g = guest_factory("vpf", netns=host.name, qemu_args=vpf_tap_args(NUM_VFS))

    pf_info, states = vf_states(g)
    assert pf_info["total-vfs"] == NUM_VFS and states == ["disabled"] * NUM_VFS
    assert [vf["netdev"] for vf in pf_info["vfs"]] == [f"b{i}" for i in range(NUM_VFS)]
    assert {vf["backend"] for vf in pf_info["vfs"]} == {"tap"}

    pf = g.check(FIND_PF).strip()
    assert g.check(f"cat /sys/bus/pci/devices/{pf}/sriov_totalvfs").strip() == str(NUM_VFS)
    enable_vfs(g, pf, NUM_VFS)
    ev = g.qmp.wait_event("VSRIOV_VFS_CHANGED", timeout=30)
    assert ev["data"] == {"id": "pf0", "qom-path": "/machine/peripheral/pf0",
                          "num-vfs": NUM_VFS}
    pf_info, states = vf_states(g)
    assert states == ["enabled"] * NUM_VFS
    assert pf_info["num-vfs"] == NUM_VFS and pf_info["vf-enable"]

    # Every VF is a virtio-net function with its own netdev, and has link.
    for i in range(NUM_VFS):
        mac = g.check(f"cat /sys/bus/pci/devices/{pf}/virtfn{i}/virtio*/net/*/address").strip()
        assert mac == pf_info["vfs"][i]["mac"]
        g.check(f"ip link set $(ls /sys/bus/pci/devices/{pf}/virtfn{i}/virtio*/net/) up")
    g.wait_until(" && ".join(
        f"grep -qx 1 /sys/bus/pci/devices/{pf}/virtfn{i}/virtio*/net/*/carrier"
        for i in range(NUM_VFS)), timeout=30)

    vf_into_netns(g, pf, 0, "a", "10.20.0.1/24")
    vf_into_netns(g, pf, 1, "b", "10.20.0.2/24")
    g.wait_until("ip -n a link show pod0 | grep -q LOWER_UP && "
                 "ip -n b link show pod0 | grep -q LOWER_UP", timeout=30)
    assert " 0% packet loss" in g.check("ip netns exec a ping -c 3 -W 5 10.20.0.2",
                                        timeout=60)
    for t in ("tvf0", "tvf1"):
        tx = int(host.run(f"cat /sys/class/net/{t}/statistics/tx_packets").stdout)
        assert tx >= 3, f"{t} carried {tx} packets"

    g.check("ip netns del a && ip netns del b")
    enable_vfs(g, pf, 0)
    ev = g.qmp.wait_event("VSRIOV_VFS_CHANGED", timeout=30)
    assert ev["data"]["num-vfs"] == 0
    _, states = vf_states(g)
    assert states == ["disabled"] * NUM_VFS
    g.wait_until(f"! ls -d /sys/bus/pci/devices/{pf}/virtfn0 2>/dev/null", timeout=30)

    # Enable again: the same backends serve the VFs again.
    enable_vfs(g, pf, 2)
    _, states = vf_states(g)
    assert states == ["enabled", "enabled", "disabled", "disabled"]


def test_vpf_reset_and_reboot_disable_vfs(netns, guest_factory):
    host = netns("vsr-rst")
    host_switch(host, 2)
    g = guest_factory("vpfrst", netns=host.name, qemu_args=vpf_tap_args(2), no_reboot=False)
    pf = g.check(FIND_PF).strip()
    enable_vfs(g, pf, 2)
    assert vf_states(g)[1] == ["enabled", "enabled"]

    # A machine reset (as a guest reboot does) clears VF Enable.
    g.reset()
    assert vf_states(g)[1] == ["disabled", "disabled"]
    assert g.check(f"cat /sys/bus/pci/devices/{pf}/sriov_numvfs").strip() == "0"
    enable_vfs(g, pf, 1)
    assert vf_states(g)[1] == ["enabled", "disabled"]



def test_vpf_hot_unplug_returns_backends_and_replug(netns, guest_factory):
    host = netns("vsr-hp")
    host_switch(host, 2)
    g = guest_factory("vpfhp", netns=host.name, qemu_args=vpf_tap_args(2))
    pf = g.check(FIND_PF).strip()
    enable_vfs(g, pf, 2)

    # The guest ejects the PF (with its enabled VFs) when asked.
    g.qmp.execute("device_del", {"id": "pf0"})
    g.qmp.wait_event("DEVICE_DELETED", timeout=60,
                     match=lambda ev: ev["data"].get("device") == "pf0")
    assert g.qmp.execute("query-vsriov") == []
    (pool,) = g.qmp.execute("query-vsriov-pools")
    assert pool["free"] == 2 and all("claimed-by" not in e for e in pool["entries"])
    g.wait_until(f"! test -e /sys/bus/pci/devices/{pf}", timeout=30)

    # Plugged again, the PF takes the backends back and its VFs work.
    g.qmp.execute("device_add", {"driver": "virtio-net-pci", "bus": "rp0", "id": "pf0",
                                 "netdev": "pfnet", "sriov-pool": "p0"})
    g.wait_until(f"test -f /sys/bus/pci/devices/{pf}/sriov_totalvfs", timeout=60)
    enable_vfs(g, pf, 2)
    _, states = vf_states(g)
    assert states == ["enabled", "enabled"]
