# SPDX-License-Identifier: GPL-2.0-or-later
"""Level 0: the guest configures its VFs through the PF (issue 5).

A guest boots the test kernel (guest-kernel-patches/ built in,
vmlinuz-test).  After `echo 2 > sriov_numvfs`, `ip link set <pf>
vf 0 ...` sets every attribute at once; `ip -d link show <pf>` lists both
VFs with exactly those values (VF 1 with the defaults), the VF's bound
driver adopts the new MAC at once (VIRTIO_NET_F_ADMIN_MAC), QMP reports the
same, and the VF still carries traffic with its new MAC through the host
switch.  Invalid values are
refused with the kernel's usual errors and change nothing.  An unpatched
guest (Debian's kernel and module) still uses the PF and its VFs as plain
virtio-net, and `ip link set ... vf` is refused there."""
import json
import os
import time

import pytest

from harness import paths
from system.guest_net import FIND_PF, enable_vfs, vf_into_netns
from system.test_l0_vpf import host_switch, vpf_tap_args

pytestmark = pytest.mark.slow

VF_MAC = "02:00:00:00:00:10"


def vpf_args(n, taps="t"):
    """The tap pool of test_l0_vpf, with a link speed for the rate checks."""
    return vpf_tap_args(n, ",speed=10000,duplex=full", taps)


def pf_netdev(g, pf):
    return g.check(f"ls /sys/bus/pci/devices/{pf}/virtio*/net/").strip()


def guest_vfs(g, dev):
    """The PF's VF list as the guest's rtnetlink reports it."""
    (link,) = json.loads(g.check(f"ip -j -d -s link show {dev}"))
    return link.get("vfinfo_list", [])


def qmp_vfs(g):
    (pf,) = g.qmp.execute("query-vsriov")
    return pf["vfs"]


def vf_summary(vf):
    """The attributes `ip -j link` gives for one VF, in one comparable dict."""
    vlan = (vf.get("vlan_list") or [{}])[0]
    return {
        "mac": vf["address"],
        "vlan": vlan.get("vlan", 0),
        "qos": vlan.get("qos", 0),
        "max_tx_rate": vf["rate"]["max_tx"],
        "min_tx_rate": vf["rate"]["min_tx"],
        "spoofchk": vf["spoofchk"],
        # (not reported: the PF's driver has no trust to report)
        "trust": vf.get("trust"),
        "link_state": vf["link_state"],
    }


def vf_guest(netns, guest_factory, name, n, **kw):
    """A patched guest with n VFs enabled: (guest, PF address, PF netdev,
    the VFs' netdevs)."""
    host = netns(f"vsr-{name[:5]}")
    host_switch(host, n)
    g = guest_factory(name, netns=host.name, qemu_args=vpf_args(n), **kw)
    pf = g.check(FIND_PF).strip()
    dev = pf_netdev(g, pf)
    enable_vfs(g, pf, n)
    return g, pf, dev, [g.check(f"ls /sys/bus/pci/devices/{pf}/virtfn{i}/virtio*/net/").strip()
                        for i in range(n)]


def one_vf_guest(netns, guest_factory, name, **kw):
    """vf_guest() with one VF: (guest, PF address, PF netdev, VF netdev)."""
    g, pf, dev, (vf_dev,) = vf_guest(netns, guest_factory, name, 1, **kw)
    return g, pf, dev, vf_dev


def vf0_virtio(g, pf):
    """The sysfs folder of VF 0's virtio device."""
    return g.check(f"ls -d /sys/bus/pci/devices/{pf}/virtfn0/virtio*").strip()


def vf0_adopts(g, pf, mac):
    """VF 0's bound driver negotiated VIRTIO_NET_F_ADMIN_MAC (bit 71) and
    adopts @mac, acknowledging it without error.  (virtio_net hears of
    config changes while its interface is up, so a VF that is down adopts
    the MAC when it goes up: this brings it up.)"""
    vdev = vf0_virtio(g, pf)
    assert g.check(f"cut -c72 {vdev}/features").strip() == "1"
    g.check(f"ip link set $(ls {vdev}/net) up")
    g.wait_until(f"grep -qx {mac} {vdev}/net/*/address", timeout=30)
    dmesg = g.check("dmesg")
    assert "set by the PF" not in dmesg, dmesg


def lockdep_saw_nothing(g):
    """No lock-order inversion, sleep in atomic context or hung task in the
    guest's log, and lockdep still on (it turns itself off at its first
    report)."""
    dmesg = g.check("dmesg")
    for report in ("possible circular locking", "possible recursive locking",
                   "lock inversion", "BUG: sleeping function", "INFO: task", "WARNING:"):
        assert report not in dmesg, dmesg
    assert g.check("grep -E '^ *debug_locks: *1$' /proc/lockdep_stats").strip()


def rebind_vf0(g, pf, mac):
    """Bind VF 0's driver again; it takes the MAC its device has: @mac."""
    vdev = os.path.basename(vf0_virtio(g, pf))
    g.check(f"echo {vdev} > /sys/bus/virtio/drivers/virtio_net/unbind && "
            f"echo {vdev} > /sys/bus/virtio/drivers/virtio_net/bind")
    g.wait_until(f"grep -qx {mac} /sys/bus/pci/devices/{pf}/virtfn0/virtio*/net/*/address",
                 timeout=30)


def test_vf_control_through_pf(netns, guest_factory):
    host = netns("vsr-vfc")
    host_switch(host, 2)
    g = guest_factory("vfctl", netns=host.name, qemu_args=vpf_args(2))
    pf = g.check(FIND_PF).strip()
    dev = pf_netdev(g, pf)
    enable_vfs(g, pf, 2)
    vf1_mac = qmp_vfs(g)[1]["mac"]

    # ip link show lists the PF's VFs (the virtio bus reports them).
    vfs = guest_vfs(g, dev)
    assert [vf["vf"] for vf in vfs] == [0, 1], vfs

    g.check(f"ip link set {dev} vf 0 mac {VF_MAC} vlan 100 spoofchk on "
            f"state enable max_tx_rate 1000")
    expected0 = {"mac": VF_MAC, "vlan": 100, "qos": 0, "max_tx_rate": 1000, "min_tx_rate": 0,
                 "spoofchk": True, "trust": None, "link_state": "enable"}
    defaults1 = {"mac": vf1_mac, "vlan": 0, "qos": 0, "max_tx_rate": 0, "min_tx_rate": 0,
                 "spoofchk": False, "trust": None, "link_state": "auto"}
    vfs = guest_vfs(g, dev)
    assert vf_summary(vfs[0]) == expected0
    assert vf_summary(vfs[1]) == defaults1
    text = g.check(f"ip -d link show {dev}")
    assert f"vf 0     link/ether {VF_MAC}" in text and "vlan 100," in text, text

    # The VF's bound driver adopts the MAC its PF gave it at once
    # (VIRTIO_NET_F_ADMIN_MAC: status bit, then acknowledgment); one that
    # binds later reads it from the config space.
    vf0_adopts(g, pf, VF_MAC)
    rebind_vf0(g, pf, VF_MAC)

    # QMP says the same.
    q0, q1 = qmp_vfs(g)
    assert q0["mac"] == VF_MAC
    assert q0["config"] == {"mac": VF_MAC, "vlan": 100, "qos": 0, "vlan-proto": "dot1q",
                            "spoof-check": True, "trust": False, "link-state": "enable",
                            "min-tx-rate": 0, "max-tx-rate": 1000, "applied": "recorded"}
    assert "mac" not in q1["config"] and q1["config"]["vlan"] == 0
    assert q1["config"]["link-state"] == "auto" and q1["mac"] == vf1_mac

    # Invalid values: the kernel's usual error, nothing changes.
    bad = {
        f"ip link set {dev} vf 2 mac 02:00:00:00:00:11": "Invalid argument",
        f"ip link set {dev} vf 1 vlan 4095": "Invalid argument",
        f"ip link set {dev} vf 1 mac 01:00:5e:00:00:01": "Invalid argument",
        f"ip link set {dev} vf 1 max_tx_rate 20000": "Invalid argument",
        # What the member configuration leaves out (docs/virtio-spec/):
        # a VLAN priority, trust, a minimum rate.
        f"ip link set {dev} vf 1 vlan 7 qos 3": "Operation not supported",
        f"ip link set {dev} vf 1 trust on": "Operation not supported",
        f"ip link set {dev} vf 1 min_tx_rate 10 max_tx_rate 100": "Operation not supported",
    }
    for cmd, err in bad.items():
        res = g.run(cmd)
        assert res.status != 0, f"{cmd} was accepted"
        assert err in res.stderr, f"{cmd}: {res.stderr}"
    vfs = guest_vfs(g, dev)
    assert vf_summary(vfs[0]) == expected0
    assert vf_summary(vfs[1]) == defaults1
    assert [vf["config"] for vf in qmp_vfs(g)] == [q0["config"], q1["config"]]

    # 802.1ad reaches QMP too.
    g.check(f"ip link set {dev} vf 1 vlan 10 proto 802.1ad")
    assert qmp_vfs(g)[1]["config"]["vlan-proto"] == "dot1ad"
    g.check(f"ip link set {dev} vf 1 vlan 0")
    assert qmp_vfs(g)[1]["config"]["vlan"] == 0

    # The VFs carry traffic; the host switch learns VF 0's new MAC.
    vf_into_netns(g, pf, 0, "a", "10.21.0.1/24")
    vf_into_netns(g, pf, 1, "b", "10.21.0.2/24")
    g.wait_until("ip -n a link show pod0 | grep -q LOWER_UP && "
                 "ip -n b link show pod0 | grep -q LOWER_UP", timeout=30)
    assert " 0% packet loss" in g.check("ip netns exec a ping -c 3 -W 5 10.21.0.2", timeout=60)
    assert VF_MAC in host.run("bridge fdb show br br0").stdout
    # Per-VF counters come from the tap backend (as seen from the VF), in
    # a snapshot the driver refreshes at most once a second when read.
    deadline = time.monotonic() + 10
    while True:
        stats = guest_vfs(g, dev)[0]["stats"]
        if stats["tx"]["tx_packets"] >= 3 and stats["rx"]["packets"] >= 3:
            break
        assert time.monotonic() < deadline, stats
        time.sleep(0.2)

    # A VF that leaves starts over with its defaults.
    g.check("ip netns del a && ip netns del b")
    enable_vfs(g, pf, 0)
    enable_vfs(g, pf, 2)
    assert vf_summary(guest_vfs(g, dev)[0])["vlan"] == 0
    q0 = qmp_vfs(g)[0]
    assert "mac" not in q0["config"] and q0["config"]["vlan"] == 0


def tap_counters(ns, tap):
    """The host's counters of @tap in netns @ns, as VF 0 sees them:
    (rx packets, tx packets)."""
    (link,) = json.loads(ns.run(f"ip -j -s link show {tap}").stdout)
    return link["stats64"]["tx"]["packets"], link["stats64"]["rx"]["packets"]


def vf0_counters(g, dev):
    """VF 0's counters as the guest's PF reports them: (rx, tx) packets."""
    stats = guest_vfs(g, dev)[0]["stats"]
    return stats["rx"]["packets"], stats["tx"]["tx_packets"]


def test_vf_counters_are_its_taps_wherever_it_goes(netns, guest_factory):
    """A VF's counters are its own tap's, found through the tap's fd, not
    whatever device has the tap's name in QEMU's network namespace (issue
    36).  They match the host's view of the tap; when the tap moves to
    another namespace and another device takes its name in QEMU's, the
    guest is not given that device's counters: they read 0 (as the spec
    has it for counters a device does not keep) and QEMU's log says why.
    Back in QEMU's namespace, they are the tap's again, still counting."""
    host = netns("vsr-vfs")
    host_switch(host, 1)
    host.run("ip addr add 10.24.0.254/24 dev br0")
    g = guest_factory("vfstats", netns=host.name, qemu_args=vpf_args(1))
    pf = g.check(FIND_PF).strip()
    dev = pf_netdev(g, pf)
    enable_vfs(g, pf, 1)
    vf_into_netns(g, pf, 0, "a", "10.24.0.1/24")
    g.wait_until("ip -n a link show pod0 | grep -q LOWER_UP", timeout=30)

    def counters_become(want, not_seen=None, timeout=30):
        """Poll (the driver refreshes its snapshot at most once a second)
        until VF 0's counters are want(); never those of @not_seen."""
        deadline = time.monotonic() + timeout
        while True:
            got, expected = vf0_counters(g, dev), want()
            assert not_seen is None or got[0] < not_seen, (got, not_seen)
            if got == expected:
                return got
            assert time.monotonic() < deadline, (got, expected)
            time.sleep(0.3)

    # The path works: the VF's counters are its tap's, both ways.
    host.run("ping -c 5 -i 0.2 -W 5 10.24.0.1")
    first = counters_become(lambda: tap_counters(host, "tvf0"))
    assert min(first) >= 5, first

    # The tap moves to another namespace; a veth that has sent 300
    # packets takes its name in QEMU's.
    other = netns("vsr-vfo")
    host.run(f"ip link set tvf0 netns {other.name}")
    host.run("ip link add tvf0 type veth peer name tvf0peer && ip link set tvf0peer up && "
             "ip addr add 10.25.0.1/24 dev tvf0 && ip link set tvf0 up && "
             "ip neigh add 10.25.0.2 lladdr 02:00:00:00:00:99 dev tvf0")
    host.run("ping -q -c 300 -i 0.002 -W 0.01 10.25.0.2", check=False)
    impostor = tap_counters(host, "tvf0")[0]
    assert impostor >= 300, impostor
    counters_become(lambda: (0, 0), not_seen=impostor)
    with open(g.qemu_log) as f:
        assert ("VF 0's counters read 0: link tvf0 in QEMU's network namespace "
                "is not its tap") in f.read()

    # Home again: the tap's own counters, with what it counted away.
    host.run("ip link del tvf0")
    other.run(f"ip link set tvf0 netns {host.name}")
    host.run("ip link set tvf0 master br0 && ip link set tvf0 up")
    host.run("ping -c 5 -i 0.2 -W 5 10.24.0.1")
    again = counters_become(lambda: tap_counters(host, "tvf0"), not_seen=impostor)
    assert again[0] >= first[0] + 5 and again[1] >= first[1] + 5, (first, again)
    with open(g.qemu_log) as f:
        assert "VF 0's counters are read again" in f.read()


def test_unpatched_guest_is_unaffected(netns, guest_factory):
    host = netns("vsr-vfu")
    host_switch(host, 2)
    g = guest_factory("vfplain", netns=host.name, qemu_args=vpf_args(2),
                      kernel=paths.guest("vmlinuz"), initrd=paths.guest("initramfs.gz"))
    pf = g.check(FIND_PF).strip()
    dev = pf_netdev(g, pf)
    enable_vfs(g, pf, 2)
    res = g.run(f"ip link set {dev} vf 0 mac {VF_MAC}")
    assert res.status != 0 and "Operation not supported" in res.stderr, res
    assert "mac" not in qmp_vfs(g)[0]["config"]
    # The VFs work as plain virtio-net.
    vf_into_netns(g, pf, 0, "a", "10.22.0.1/24")
    vf_into_netns(g, pf, 1, "b", "10.22.0.2/24")
    g.wait_until("ip -n a link show pod0 | grep -q LOWER_UP && "
                 "ip -n b link show pod0 | grep -q LOWER_UP", timeout=30)
    assert " 0% packet loss" in g.check("ip netns exec a ping -c 3 -W 5 10.22.0.2", timeout=60)


def test_vf_mac_changes_while_the_vf_goes_down_and_up(netns, guest_factory):
    """The first series' VF driver took the MAC its PF set under
    rtnl_lock() in its config work, which virtnet_close() cancels holding
    rtnl: a PF changing a bound VF's MAC while the VF went down could hang
    both (issue 20).  Now, on the lockdep kernel (vmlinuz-lockdep: the same
    series, lock debugging on): 200 MAC changes through the PF while the
    VF's interface goes down and up all along; every command completes, the
    guest answers, the VF's bound driver adopts the last MAC without being
    bound again, neither the PF's administration virtqueue nor the VF's
    acknowledgments reported an error, and lockdep saw no lock-order
    inversion, no sleep in atomic context and no hung task (it turns itself
    off at its first report: debug_locks stays 1 only without one)."""
    g, pf, dev, vf_dev = one_vf_guest(netns, guest_factory, "vfdown",
                                      kernel=paths.guest("vmlinuz-lockdep"))
    lockdep_saw_nothing(g)
    g.check(f"(for i in $(seq 200); do ip link set {vf_dev} down; ip link set {vf_dev} up; "
            f"done; echo done) > /tmp/flap.out 2>&1 &")
    macs = g.check(f"for i in $(seq 200); do m=$(printf '02:00:00:00:%02x:%02x' "
                   f"$((i / 256)) $((i % 256))); ip link set {dev} vf 0 mac $m || exit 1; "
                   f"done; echo $m", timeout=300).split()
    g.wait_until("grep -qx done /tmp/flap.out", timeout=300)
    assert g.check("echo alive").strip() == "alive"
    last = macs[-1]
    assert f"link/ether {last}" in g.check(f"ip link show {dev} | grep 'vf 0 '")
    assert qmp_vfs(g)[0]["mac"] == last
    vf0_adopts(g, pf, last)
    assert "admin command error" not in g.check("dmesg")
    lockdep_saw_nothing(g)


def test_announce_while_the_vf_goes_down_and_up(netns, guest_factory):
    """Debian's 6.12 virtio_net announced (VIRTIO_NET_S_ANNOUNCE, which QEMU
    sets after every migration and on QMP announce-self) under rtnl_lock()
    in its config work, which virtnet_close() cancels holding rtnl: a VF
    going down while its host announced hung both (without the series'
    patch 3 this test's loop never ended).  On the lockdep kernel: the host
    announces round after round while the VF goes down and up 100 times;
    the loop ends, the VF's gratuitous ARPs went out, and lockdep saw
    nothing."""
    g, pf, dev, vf_dev = one_vf_guest(netns, guest_factory, "vfannc",
                                      kernel=paths.guest("vmlinuz-lockdep"))
    lockdep_saw_nothing(g)
    vdev = vf0_virtio(g, pf)
    assert g.check(f"cut -c22 {vdev}/features").strip() == "1"  # GUEST_ANNOUNCE
    g.check(f"ip addr add 10.23.0.1/24 dev {vf_dev} && ip link set {vf_dev} up")
    tx = f"cat /sys/class/net/{vf_dev}/statistics/tx_packets"
    before = int(g.check(tx))
    g.check(f"(for i in $(seq 100); do ip link set {vf_dev} down; ip link set {vf_dev} up; "
            f"done; echo done) > /tmp/flap.out 2>&1 &")
    deadline = time.monotonic() + 300
    while g.check("cat /tmp/flap.out").strip() != "done":
        assert time.monotonic() < deadline, "the VF's down/up loop hung"
        g.qmp.execute("announce-self", {"initial": 50, "max": 100, "rounds": 2, "step": 50})
    g.wait_until(f"ip link show {vf_dev} | grep -q LOWER_UP", timeout=30)
    g.qmp.execute("announce-self", {"initial": 50, "max": 100, "rounds": 1, "step": 50})
    g.wait_until(f"[ $({tx}) -gt {before} ]", timeout=30)
    lockdep_saw_nothing(g)


def test_guest_cannot_lift_the_hosts_link_down(netns, guest_factory):
    """The host holds a VF's backend link down (QMP set_link): the guest's
    `vf 0 state enable` (or auto) does not bring the VF's link up; when the
    host lets it up again, the guest's setting applies, and a VF the guest
    disabled stays down (issue 20)."""
    g, pf, dev, vf_dev = one_vf_guest(netns, guest_factory, "vflink")
    g.check(f"ip link set {vf_dev} up")
    carrier = f"cat /sys/class/net/{vf_dev}/carrier"
    g.wait_until(f"{carrier} | grep -qx 1", timeout=30)
    g.qmp.execute("set_link", {"name": "b0", "up": False})
    g.wait_until(f"{carrier} | grep -qx 0", timeout=30)
    for state in ("enable", "auto"):
        g.check(f"ip link set {dev} vf 0 state {state}")
        assert g.check(carrier).strip() == "0", state
    g.check(f"ip link set {dev} vf 0 state disable")
    # Nor does the host's set_link of the backend lift the guest's disable
    # (set_link on a backend sets its NIC's link too; the VF's link policy
    # sets it back before the VF reports it).
    g.qmp.execute("set_link", {"name": "b0", "up": True})
    assert not qmp_vfs(g)[0]["link-up"]
    g.check(f"ip link set {dev} vf 0 state enable")
    assert qmp_vfs(g)[0]["link-up"]
    g.wait_until(f"{carrier} | grep -qx 1", timeout=30)
    g.check(f"ip link set {dev} vf 0 state disable")
    g.wait_until(f"{carrier} | grep -qx 0", timeout=30)


def test_auto_vfs_follow_the_pfs_link(netns, guest_factory):
    """A VF whose link state is auto follows the PF's link whenever the
    host changes it (set_link of the PF's netdev), not only when the guest
    sets the state; one whose state is enable keeps its link (issue 20)."""
    g, pf, dev, vfs = vf_guest(netns, guest_factory, "vfpflink", 2)
    g.check(f"ip link set {dev} vf 1 state enable")
    for v in vfs:
        g.check(f"ip link set {v} up")

    def carrier(v, up):
        g.wait_until(f"grep -qx {int(up)} /sys/class/net/{v}/carrier", timeout=30)

    for v in vfs:
        carrier(v, True)
    g.qmp.execute("set_link", {"name": "pfnet", "up": False})
    carrier(vfs[0], False)
    assert [vf["link-up"] for vf in qmp_vfs(g)] == [False, True]
    assert g.check(f"cat /sys/class/net/{vfs[1]}/carrier").strip() == "1"
    g.qmp.execute("set_link", {"name": "pfnet", "up": True})
    carrier(vfs[0], True)
    assert [vf["link-up"] for vf in qmp_vfs(g)] == [True, True]
    # A VF set to auto while the PF's link is down goes down with it, and
    # comes up with the PF.
    g.qmp.execute("set_link", {"name": "pfnet", "up": False})
    carrier(vfs[0], False)
    g.check(f"ip link set {dev} vf 1 state auto")
    carrier(vfs[1], False)
    g.qmp.execute("set_link", {"name": "pfnet", "up": True})
    for v in vfs:
        carrier(v, True)
