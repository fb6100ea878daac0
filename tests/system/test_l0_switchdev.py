# SPDX-License-Identifier: GPL-2.0-or-later
"""Level 0: switchdev mode in the guest's virtio_net (issue 34, the guest's
part).

A guest boots the test kernel (guest-kernel-patches/ built in) on a PF
with sriov-eswitch=on whose static pool has a tap per VF (on a host bridge)
and a representor tap per VF (rep-netdevs, alone: the host side of each
representor's channel).  The PF has a devlink instance, in legacy mode,
with one port, the uplink (flavour physical, the PF's netdev, "p0").
`devlink dev eswitch set ... mode switchdev` gives each of the 4 VFs a
pcivf port and a representor netdev ("pf0vf<n>"), and QMP shows the mode
and the representors; frames cross each representor's channel both ways
(counted on both sides); port functions set the VF's MAC (what the VF's
driver and QMP show), and a representor's admin state is its VF's carrier;
devlink-rate's tx_max is the VF's rate that `ip link show` reports.  Back
to legacy, it all goes.  A representor the device refuses (its backend
taken) fails the mode change, naming the VF, and undoes the representors
made before it.  A guest in switchdev mode migrates with its
representors, whose channels then reach the destination's taps.  Hostile:
bad port indexes and values are refused
and change nothing; mode flips in a loop while two VFs ping each other
leave QEMU, the guest and the VFs working, and the PF ejected in
switchdev mode takes its representors and devlink instance with it (on the
lockdep kernel, which reports nothing).  Debian's stock kernel sees no
devlink instance at all, and its VFs work."""
import json

import pytest

from harness import paths, stock
from harness.vm import Guest
from system.guest_net import FIND_PF, enable_vfs, vf_into_netns, vf_netdev
from system.test_l0_vpf import host_switch

pytestmark = pytest.mark.slow

NUM_VFS = 4
VF_MAC = "02:00:00:00:00:21"


def esw_args(n, taps="t", eswitch=True):
    """The tap pool of test_l0_vpf, plus a representor tap <taps>rep<i> per
    VF, and the PF with sriov-eswitch=on (one queue pair: stage 1)."""
    args = ["-device", "pcie-root-port,id=rp0,chassis=1",
            "-netdev", f"tap,id=pfnet,ifname={taps}pf,script=no,downscript=no"]
    for i in range(n):
        args += ["-netdev", f"tap,id=b{i},ifname={taps}vf{i},script=no,downscript=no",
                 "-netdev", f"tap,id=r{i},ifname={taps}rep{i},script=no,downscript=no"]
    pool = ",".join(f"netdevs=b{i}" for i in range(n))
    if eswitch:
        pool += "," + ",".join(f"rep-netdevs=r{i}" for i in range(n))
    args += ["-object", f"vsriov-pool,id=p0,{pool}",
             "-device", "virtio-net-pci,bus=rp0,id=pf0,netdev=pfnet,sriov-pool=p0,mq=off,"
                        "speed=10000,duplex=full" + (",sriov-eswitch=on" if eswitch else "")]
    return args


def host_reps(ns, n, taps="t"):
    """The representor taps, up, on no bridge."""
    for i in range(n):
        ns.run(f"ip tuntap add dev {taps}rep{i} mode tap && ip link set {taps}rep{i} up")


def start(netns, guest_factory, name, extra=(), **kw):
    host = netns(f"vsr-{name}")
    host_switch(host, NUM_VFS)
    host_reps(host, NUM_VFS)
    g = guest_factory(name, netns=host.name, qemu_args=esw_args(NUM_VFS) + list(extra), **kw)
    pf = g.check(FIND_PF).strip()
    return host, g, pf


def pf_netdev(g, pf):
    return g.check(f"ls /sys/bus/pci/devices/{pf}/virtio*/net/").strip()


def mode(g, pf):
    out = json.loads(g.check(f"devlink -j dev eswitch show pci/{pf}"))
    return out["dev"][f"pci/{pf}"]["mode"]


def ports(g, pf):
    """{port index: devlink's attributes of that port} of the PF."""
    out = json.loads(g.check("devlink -j port show"))
    return {int(k.rsplit("/", 1)[1]): v for k, v in out["port"].items()
            if k.startswith(f"pci/{pf}/")}


def port_of_vf(g, pf, vf):
    (idx,) = [i for i, p in ports(g, pf).items() if p.get("vfnum") == vf]
    return idx


def phys_port_name(g, dev):
    return g.check(f"cat /sys/class/net/{dev}/phys_port_name").strip()


def reps(g, pf):
    """{vf: netdev} of the representors (pcivf ports with a netdev)."""
    return {p["vfnum"]: p["netdev"] for p in ports(g, pf).values()
            if p["flavour"] == "pcivf" and "netdev" in p}


def counters(run, dev):
    out = run(f"cat /sys/class/net/{dev}/statistics/rx_packets "
              f"/sys/class/net/{dev}/statistics/tx_packets")
    rx, tx = (int(x) for x in out.split())
    return rx, tx


def assert_no_kernel_warning(g):
    """Nothing in the guest's kernel log says a driver misbehaved (the
    lockdep kernel adds its lock-order and sleep-in-atomic reports)."""
    res = g.run("dmesg | grep -E 'WARNING:|BUG:|possible circular|possible recursive|"
                "inconsistent lock|INFO: task|Call Trace'")
    assert not res.ok, f"the guest's kernel complained:\n{g.check('dmesg | tail -60')}"
    # (lockdep turns itself off at its first report)
    assert g.check("! test -e /proc/lockdep_stats || "
                   "grep -E '^ *debug_locks: *1$' /proc/lockdep_stats && echo on").strip()


def qmp_pf(g):
    (pf,) = g.qmp.execute("query-vsriov")
    return pf


def test_switchdev_representors_and_port_functions(netns, guest_factory):
    host, g, pf = start(netns, guest_factory, "esw")
    dev = pf_netdev(g, pf)

    # Legacy mode: a devlink instance on the PF with the uplink port only.
    assert mode(g, pf) == "legacy"
    p = ports(g, pf)
    assert list(p.values()) == [p[0]] and p[0]["flavour"] == "physical", p
    assert p[0]["netdev"] == dev and p[0]["port"] == 0
    assert phys_port_name(g, dev) == "p0"
    assert qmp_pf(g)["eswitch-mode"] == "legacy"

    enable_vfs(g, pf, NUM_VFS)
    vfdevs = [g.check(f"echo {vf_netdev(pf, i)}").strip() for i in range(NUM_VFS)]
    for d in vfdevs:
        g.check(f"ip link set {d} up")

    # Switchdev: a pcivf port and a representor per VF.
    g.check(f"devlink dev eswitch set pci/{pf} mode switchdev")
    assert mode(g, pf) == "switchdev"
    p = ports(g, pf)
    vfports = sorted((v for v in p.values() if v["flavour"] == "pcivf"),
                     key=lambda v: v["vfnum"])
    assert [(v["pfnum"], v["vfnum"], v.get("external", False)) for v in vfports] == \
        [(0, i, False) for i in range(NUM_VFS)], p
    assert [v["flavour"] for v in p.values()].count("physical") == 1
    r = reps(g, pf)
    assert sorted(r) == list(range(NUM_VFS)), p
    for i, rep in r.items():
        assert phys_port_name(g, rep) == f"pf0vf{i}"
    switch_ids = {g.check(f"cat /sys/class/net/{d}/phys_switch_id").strip()
                  for d in [dev, *r.values()]}
    assert len(switch_ids) == 1, f"the uplink and representors are not on one switch: {switch_ids}"
    info = qmp_pf(g)
    assert info["eswitch-mode"] == "switchdev"
    assert [vf.get("representor", {}).get("netdev") for vf in info["vfs"]] == \
        [f"r{i}" for i in range(NUM_VFS)], info

    # The channel: representor 0 <-> tap trep0 on the host, both ways.
    rep0 = r[0]
    g.check(f"ip addr add 10.30.0.2/24 dev {rep0} && ip link set {rep0} up")
    host.run("ip addr add 10.30.0.1/24 dev trep0")
    g_before = counters(g.check, rep0)
    h_before = counters(lambda c: host.run(c).stdout, "trep0")
    res = host.run("ping -c 3 -W 5 10.30.0.2", check=False, timeout=60)
    assert res.returncode == 0 and " 0% packet loss" in res.stdout, \
        f"the host did not reach representor 0 through its channel:\n{res.stdout}{res.stderr}"
    g_after = counters(g.check, rep0)
    h_after = counters(lambda c: host.run(c).stdout, "trep0")
    # what the host sent (tap tx) arrived on the representor (rx), and back
    assert g_after[0] - g_before[0] >= 3 and h_after[1] - h_before[1] >= 3
    assert g_after[1] - g_before[1] >= 3 and h_after[0] - h_before[0] >= 3

    # hw_addr: the VF's MAC, which its driver adopts and QMP shows.
    port1 = port_of_vf(g, pf, 1)
    g.check(f"devlink port function set pci/{pf}/{port1} hw_addr {VF_MAC}")
    g.wait_until(f"grep -qx {VF_MAC} /sys/class/net/{vfdevs[1]}/address", timeout=30)
    assert qmp_pf(g)["vfs"][1]["mac"] == VF_MAC
    (pinfo,) = json.loads(g.check(f"devlink -j port show pci/{pf}/{port1}"))["port"].values()
    assert pinfo["function"]["hw_addr"] == VF_MAC
    link = json.loads(g.check(f"ip -j -d link show {dev}"))[0]
    assert link["vfinfo_list"][1]["address"] == VF_MAC
    # A refused one changes nothing.
    res = g.run(f"devlink port function set pci/{pf}/{port1} hw_addr 01:00:5e:00:00:01")
    assert not res.ok and ("Invalid argument" in res.stderr or
                           "Operation not permitted" in res.stderr or
                           "not available" in res.stderr), res
    assert g.check(f"cat /sys/class/net/{vfdevs[1]}/address").strip() == VF_MAC
    assert qmp_pf(g)["vfs"][1]["mac"] == VF_MAC

    # devlink-rate: tx_max is the VF's max_tx_rate (whole Mbit/s only).
    g.check(f"devlink port function rate set pci/{pf}/{port1} tx_max 100mbit")
    link = json.loads(g.check(f"ip -j -d link show {dev}"))[0]
    assert link["vfinfo_list"][1]["rate"]["max_tx"] == 100
    for bad in ("tx_max 1001kbit", "tx_max 1000gbit", "tx_share 200mbit"):
        res = g.run(f"devlink port function rate set pci/{pf}/{port1} {bad}")
        assert not res.ok, f"{bad} was taken: {res}"
    link = json.loads(g.check(f"ip -j -d link show {dev}"))[0]
    assert link["vfinfo_list"][1]["rate"] == {"max_tx": 100, "min_tx": 0}

    # A representor's admin state is its VF's carrier.
    rep1 = r[1]
    carrier = f"/sys/class/net/{vfdevs[1]}/carrier"
    g.check(f"ip link set {rep1} up")
    g.wait_until(f"grep -qx 1 {carrier}", timeout=30)
    g.check(f"ip link set {rep1} down")
    g.wait_until(f"grep -qx 0 {carrier}", timeout=30)
    g.check(f"ip link set {rep1} up")
    g.wait_until(f"grep -qx 1 {carrier}", timeout=30)

    # Back to legacy: the representors and their ports go, QMP says so,
    # and the VF keeps its MAC and its link.
    g.check(f"devlink dev eswitch set pci/{pf} mode legacy")
    assert mode(g, pf) == "legacy"
    assert [v["flavour"] for v in ports(g, pf).values()] == ["physical"]
    assert not g.run(f"ip link show {rep0}").ok
    info = qmp_pf(g)
    assert info["eswitch-mode"] == "legacy"
    assert not any("representor" in vf for vf in info["vfs"]), info
    g.wait_until(f"grep -qx 1 {carrier}", timeout=30)
    assert g.check(f"cat /sys/class/net/{vfdevs[1]}/address").strip() == VF_MAC
    assert_no_kernel_warning(g)


def test_switchdev_hostile(netns, guest_factory):
    """On the lockdep kernel: the mode and representors change under the
    devlink instance lock with RTNL inside it, beside VF enables, traffic
    and the PF's removal."""
    host, g, pf = start(netns, guest_factory, "eswh", kernel=paths.guest("vmlinuz-lockdep"))
    dev = pf_netdev(g, pf)
    enable_vfs(g, pf, NUM_VFS)
    vf_into_netns(g, pf, 0, "a", "10.31.0.1/24")
    vf_into_netns(g, pf, 1, "b", "10.31.0.2/24")
    g.wait_until("ip -n a link show pod0 | grep -q LOWER_UP && "
                 "ip -n b link show pod0 | grep -q LOWER_UP", timeout=30)
    assert " 0% packet loss" in g.check("ip netns exec a ping -c 2 -W 5 10.31.0.2", timeout=60)

    # Bad modes, ports and values: refused, nothing changes.
    for cmd in (f"devlink dev eswitch set pci/{pf} mode switchdev_inactive",
                f"devlink port function set pci/{pf}/99 hw_addr {VF_MAC}",
                f"devlink port function set pci/{pf}/0 hw_addr {VF_MAC}",
                f"devlink port function rate set pci/{pf}/99 tx_max 10mbit"):
        res = g.run(cmd)
        assert not res.ok, f"{cmd} was taken: {res}"
    assert mode(g, pf) == "legacy"

    # Mode flips in a loop while VF 0 pings VF 1 (in legacy mode the host
    # bridge joins them; in switchdev mode nothing steers them: frames may
    # be lost then, but nothing breaks).
    g.check("ip netns exec a ping -i 0.2 -W 1 10.31.0.2 >/tmp/ping.log 2>&1 & "
            "echo $! >/tmp/ping.pid")
    for i in range(5):
        g.check(f"devlink dev eswitch set pci/{pf} mode switchdev")
        assert len(reps(g, pf)) == NUM_VFS
        g.check(f"devlink dev eswitch set pci/{pf} mode legacy")
        assert reps(g, pf) == {}
    g.check("kill $(cat /tmp/ping.pid)")
    assert qmp_pf(g)["eswitch-mode"] == "legacy"

    # VFs disabled and enabled in switchdev mode lose and get representors.
    g.check("ip netns del a && ip netns del b")
    g.check(f"devlink dev eswitch set pci/{pf} mode switchdev")
    enable_vfs(g, pf, 0)
    assert reps(g, pf) == {}
    enable_vfs(g, pf, 2)
    assert sorted(reps(g, pf)) == [0, 1]
    assert [bool(vf.get("representor")) for vf in qmp_pf(g)["vfs"]] == \
        [True, True, False, False]
    g.check(f"devlink dev eswitch set pci/{pf} mode legacy")

    # QEMU and the guest still work: the VFs reach each other again.
    vf_into_netns(g, pf, 0, "a", "10.31.0.1/24")
    vf_into_netns(g, pf, 1, "b", "10.31.0.2/24")
    g.wait_until("ip -n a link show pod0 | grep -q LOWER_UP && "
                 "ip -n b link show pod0 | grep -q LOWER_UP", timeout=30)
    assert " 0% packet loss" in g.check("ip netns exec a ping -c 2 -W 5 10.31.0.2", timeout=60)
    assert g.check(f"cat /sys/class/net/{dev}/operstate").strip()
    assert g.qmp.execute("query-status")["status"] == "running"

    # The PF ejected in switchdev mode, with its VFs and representors.
    g.check("ip netns del a && ip netns del b")
    g.check(f"devlink dev eswitch set pci/{pf} mode switchdev")
    assert sorted(reps(g, pf)) == [0, 1]
    g.qmp.execute("device_del", {"id": "pf0"})
    g.qmp.wait_event("DEVICE_DELETED", timeout=60,
                     match=lambda ev: ev["data"].get("device") == "pf0")
    assert g.qmp.execute("query-vsriov") == []
    g.wait_until(f"! test -e /sys/bus/pci/devices/{pf}", timeout=30)
    assert f"pci/{pf}" not in g.check("devlink dev show")
    assert_no_kernel_warning(g)


def test_switchdev_refused_rolls_back(netns, guest_factory):
    """VF 3's representor backend is taken (another NIC holds it): the
    device refuses VF 3's representor, after the driver made those of VFs
    0-2.  The mode set fails naming VF 3, and everything made is undone:
    legacy mode, no representor, no pcivf port, on both sides."""
    host, g, pf = start(netns, guest_factory, "eswrb",
                        extra=["-device", "e1000,netdev=r3,addr=0x9"])
    enable_vfs(g, pf, NUM_VFS)
    res = g.run(f"devlink dev eswitch set pci/{pf} mode switchdev")
    assert not res.ok and "VF 3" in res.stderr, res
    assert mode(g, pf) == "legacy"
    assert [v["flavour"] for v in ports(g, pf).values()] == ["physical"]
    assert not g.run("ip -d link show | grep -q 'portname pf0vf'").ok
    info = qmp_pf(g)
    assert info["eswitch-mode"] == "legacy"
    assert not any("representor" in vf for vf in info["vfs"]), info

    # Without VF 3 the same PF goes to switchdev mode and back.
    enable_vfs(g, pf, 0)
    enable_vfs(g, pf, 3)
    g.check(f"devlink dev eswitch set pci/{pf} mode switchdev")
    assert sorted(reps(g, pf)) == [0, 1, 2]
    g.check(f"devlink dev eswitch set pci/{pf} mode legacy")
    assert reps(g, pf) == {}
    assert_no_kernel_warning(g)


def test_switchdev_guest_migrates(netns, guest_factory):
    """The guest's switchdev state lives in the device: after a live
    migration to a QEMU with representor taps of its own (drep<n>), the
    guest is still in switchdev mode with its representors, representor
    0's channel now reaches the destination's tap, and the mode goes back
    to legacy there."""
    host, g, pf = start(netns, guest_factory, "eswmig")
    host_switch(host, NUM_VFS, taps="d")
    host_reps(host, NUM_VFS, taps="d")
    enable_vfs(g, pf, 2)
    g.check(f"devlink dev eswitch set pci/{pf} mode switchdev")
    rep0 = reps(g, pf)[0]
    g.check(f"ip addr add 10.30.0.2/24 dev {rep0} && ip link set {rep0} up")
    host.run("ip addr add 10.30.0.1/24 dev trep0")
    assert " 0% packet loss" in host.run("ping -c 2 -W 5 10.30.0.2", timeout=30).stdout

    with Guest(g.name + "-dst", g.artifacts, netns=host.name, incoming=True,
               qemu_args=esw_args(NUM_VFS, taps="d")) as dst:
        g.migrate_to(dst)
        assert mode(dst, pf) == "switchdev"
        assert sorted(reps(dst, pf)) == [0, 1]
        info = qmp_pf(dst)
        assert info["eswitch-mode"] == "switchdev"
        assert [vf.get("representor", {}).get("netdev") for vf in info["vfs"]] == \
            ["r0", "r1", None, None], info
        # representor 0's channel: the destination's tap drep0 now
        host.run("ip addr del 10.30.0.1/24 dev trep0 && ip addr add 10.30.0.1/24 dev drep0 "
                 "&& ip neigh flush all")
        before = counters(lambda c: host.run(c).stdout, "drep0")
        res = host.run("ping -c 3 -W 5 10.30.0.2", check=False, timeout=60)
        assert res.returncode == 0, f"representor 0 not reached after the migration:\n{res.stdout}"
        after = counters(lambda c: host.run(c).stdout, "drep0")
        assert after[0] - before[0] >= 3 and after[1] - before[1] >= 3
        dst.check(f"devlink dev eswitch set pci/{pf} mode legacy")
        assert reps(dst, pf) == {} and qmp_pf(dst)["eswitch-mode"] == "legacy"
        assert_no_kernel_warning(dst)


def test_stock_kernel_sees_no_devlink(netns, guest_factory):
    missing = stock.why_missing("debian13")
    if missing:
        pytest.fail(missing, pytrace=False)
    k = stock.kernel("debian13")
    host, g, pf = start(netns, guest_factory, "eswstk", kernel=k.kernel, initrd=k.initrd)
    assert g.check("uname -r").strip() == k.kver
    assert g.check("devlink -j dev show").strip() in ('{"dev":{}}', ""), \
        g.check("devlink dev show")
    assert qmp_pf(g)["eswitch-mode"] == "legacy"
    g.check(f"echo 2 > /sys/bus/pci/devices/{pf}/sriov_numvfs")
    g.wait_until(f"ls /sys/bus/pci/devices/{pf}/virtfn1/virtio*/net/ 2>/dev/null | grep -q .",
                 timeout=120)
    vf_into_netns(g, pf, 0, "a", "10.32.0.1/24")
    vf_into_netns(g, pf, 1, "b", "10.32.0.2/24")
    g.wait_until("ip -n a link show pod0 | grep -q LOWER_UP && "
                 "ip -n b link show pod0 | grep -q LOWER_UP", timeout=30)
    assert " 0% packet loss" in g.check("ip netns exec a ping -c 2 -W 5 10.32.0.2", timeout=60)
