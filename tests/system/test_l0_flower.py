# SPDX-License-Identifier: GPL-2.0-or-later
"""Level 0: tc flower on the representors of the guest's virtio_net in
switchdev mode (issue 35, the guest's part: guest-kernel-patches/0017-0019).

A guest boots the test kernel on a PF with sriov-eswitch=on whose static
pool has a tap per VF and a representor tap per VF; on the host, a bridge
per VF joins the VF's tap to its representor's tap, so what a VF sends
reaches its representor in the guest (the slow path) and back, and
nothing joins the VFs to each other.  A static pool cannot offload: the
device refuses the flow filter objects (or, before QEMU's flow filters,
offers none), so

- a flower rule on pf0vf0 without skip_sw is taken, in software
  (not_in_hw), with the driver's reason in tc's extack warning, and a
  skip_sw rule fails with that reason;
- the rules still work in software: without rules the VFs do not reach
  each other, with a mirred rule pair between the two representors (no
  bridge) they ping each other, and a drop rule before it stops them,
  counted by tc -s;
- leaving switchdev mode with the rules installed works (the driver
  destroys the device's flow objects first), and nothing in the guest's
  kernel log complains (the lockdep kernel).

The Level 2 end-to-end test (rules in_hw through the daemon's OVS) is
separate."""
import json
import re

import pytest

from harness import paths
from system.guest_net import enable_vfs, vf_into_netns
from system.test_l0_switchdev import (NUM_VFS, assert_no_kernel_warning, esw_args, mode,
                                      ports, qmp_pf, reps)

pytestmark = pytest.mark.slow

# What the driver says when the device does not offload a rule.
REFUSED = re.compile(r"device offers no flow offload|Rule not offloaded, ")


def host_pairs(ns, n, taps="t"):
    """The PF's tap, and per VF a bridge joining its tap and its
    representor's tap: VF i's frames reach representor i only."""
    ns.run(f"ip tuntap add dev {taps}pf mode tap && ip link set {taps}pf up")
    for i in range(n):
        ns.run(f"ip link add fbr{i} type bridge && ip link set fbr{i} up")
        for t in (f"{taps}vf{i}", f"{taps}rep{i}"):
            ns.run(f"ip tuntap add dev {t} mode tap && ip link set {t} master fbr{i} && "
                   f"ip link set {t} up")


def filters(g, dev):
    """The flower filters on dev's ingress: {prio: tc's JSON of the filter
    (the entry with options)}, with statistics."""
    out = json.loads(g.check(f"tc -s -j filter show dev {dev} ingress") or "[]")
    return {f["pref"]: f for f in out if "options" in f}


def packets(f):
    return sum(a["stats"]["packets"] for a in f["options"]["actions"])


def ping(g, src_ns, dst_ip, count):
    return g.run(f"ip netns exec {src_ns} ping -c {count} -W 2 {dst_ip}", timeout=60)


def test_flower_on_representors(netns, guest_factory):
    host = netns("vsr-flower")
    host_pairs(host, NUM_VFS)
    # (the lockdep kernel: tc calls in under RTNL, the mode under devlink's
    # lock, and the flow objects have a lock inside both)
    g = guest_factory("flower", netns=host.name, qemu_args=esw_args(NUM_VFS),
                      kernel=paths.guest("vmlinuz-lockdep"))
    pf = g.check("for d in /sys/bus/pci/devices/*; do "
                 "[ -f $d/sriov_totalvfs ] && basename $d && break; done").strip()
    enable_vfs(g, pf, 2)
    g.check(f"devlink dev eswitch set pci/{pf} mode switchdev")
    r = reps(g, pf)
    rep0, rep1 = r[0], r[1]
    for rep in (rep0, rep1):
        g.check(f"ip link set {rep} up && tc qdisc add dev {rep} clsact")
    vf_into_netns(g, pf, 0, "a", "10.33.0.1/24")
    vf_into_netns(g, pf, 1, "b", "10.33.0.2/24")
    g.wait_until("ip -n a link show pod0 | grep -q LOWER_UP && "
                 "ip -n b link show pod0 | grep -q LOWER_UP", timeout=30)

    # Without rules nothing joins the VFs: frames end on the representors.
    rx0 = int(g.check(f"cat /sys/class/net/{rep0}/statistics/rx_packets"))
    res = ping(g, "a", "10.33.0.2", 1)
    assert not res.ok, f"the VFs reached each other without rules: {res}"
    assert int(g.check(f"cat /sys/class/net/{rep0}/statistics/rx_packets")) > rx0, \
        "VF 0's frames did not reach its representor"

    # skip_sw: the device must take it; it does not, and tc says why.
    res = g.run(f"tc filter add dev {rep0} ingress prio 5 protocol ip flower skip_sw "
                f"dst_ip 10.33.0.2 action mirred egress redirect dev {rep1}")
    assert not res.ok and REFUSED.search(res.stderr), res
    assert filters(g, rep0) == {}

    # The driver's objects in every shape the contract has pass the
    # device's checks: the group and the classifier are taken, the rule
    # checked, and only then refused by the pool (its log says so, once
    # per rule), not as a malformed object (qualifier INVALID_FIELD).
    shapes = [
        f"protocol ip flower skip_sw src_ip 10.33.0.0/24 dst_ip 10.33.0.2 ip_proto tcp "
        f"dst_port 80 action mirred egress redirect dev {rep1}",
        "protocol ipv6 flower skip_sw dst_ip 2001:db8::1 ip_proto udp src_port 53 action drop",
        f"protocol 802.1Q flower skip_sw vlan_id 10 vlan_ethtype ip dst_mac 02:00:00:00:00:02 "
        f"action vlan pop action vlan push id 20 action mirred egress redirect dev {rep0}",
    ]
    for i, shape in enumerate(shapes):
        res = g.run(f"tc filter add dev {rep0} ingress prio {20 + i} {shape}")
        assert not res.ok and "(rule: -22)" in res.stderr, res
    with open(g.qemu_log, errors="replace") as f:
        assert f.read().count("cannot offload rules") == 1 + len(shapes)
    assert not g.run("dmesg | grep -q 'qualifier(0x3)'").ok, g.check("dmesg | tail")

    # What the driver itself cannot offload, it says so before asking.
    res = g.run(f"tc filter add dev {rep0} ingress prio 5 flower skip_sw action pass")
    assert not res.ok and "does not offload this action" in res.stderr, res
    res = g.run(f"tc filter add dev {rep0} ingress prio 5 protocol 802.1Q flower skip_sw "
                f"action drop")
    assert not res.ok and "matches a VLAN by its id" in res.stderr, res
    # The uplink takes no rule in this stage.
    pfdev = ports(g, pf)[0]["netdev"]
    g.check(f"tc qdisc add dev {pfdev} clsact")
    res = g.run(f"tc filter add dev {pfdev} ingress flower skip_sw action drop")
    assert not res.ok, res

    # Without skip_sw: taken, in software only, with the reason (verbose).
    for dev, to, prio in ((rep0, rep1, 10), (rep1, rep0, 10)):
        res = g.run(f"tc filter add dev {dev} ingress prio {prio} flower verbose "
                    f"action mirred egress redirect dev {to}")
        assert res.ok and REFUSED.search(res.stdout + res.stderr), res
    fwd = filters(g, rep0)[10]
    assert fwd["options"].get("not_in_hw") is True and "in_hw" not in fwd["options"], fwd

    # The pair forwards in software: the VFs reach each other through it
    # (once ARP, which failed above, got its answer).
    g.wait_until("ip netns exec a ping -c 1 -W 2 10.33.0.2", timeout=30)
    res = ping(g, "a", "10.33.0.2", 3)
    assert res.ok and " 0% packet loss" in res.stdout, res
    assert packets(filters(g, rep0)[10]) >= 3

    # A drop rule before it (a lower prio) stops ICMP, and counts it.
    res = g.run(f"tc filter add dev {rep0} ingress prio 1 protocol ip flower verbose "
                f"ip_proto icmp action drop")
    assert res.ok and REFUSED.search(res.stdout + res.stderr), res
    assert filters(g, rep0)[1]["options"].get("not_in_hw") is True
    res = ping(g, "a", "10.33.0.2", 2)
    assert not res.ok, f"ICMP passed the drop rule: {res}"
    assert packets(filters(g, rep0)[1]) >= 2
    # (and the device holds none of the rules: its pool offloads nothing)
    assert qmp_pf(g).get("offloaded-rules", 0) == 0

    # Leaving switchdev mode with the rules installed: they go first.
    g.check(f"devlink dev eswitch set pci/{pf} mode legacy")
    assert mode(g, pf) == "legacy" and reps(g, pf) == {}
    assert qmp_pf(g)["eswitch-mode"] == "legacy"
    # ... and the mode comes back, with representors without rules that
    # ask the device again (the capabilities were set again).
    g.check(f"devlink dev eswitch set pci/{pf} mode switchdev")
    r = reps(g, pf)
    assert sorted(r) == [0, 1]
    g.check(f"tc qdisc add dev {r[0]} clsact")
    assert filters(g, r[0]) == {}
    res = g.run(f"tc filter add dev {r[0]} ingress flower skip_sw action drop")
    assert not res.ok and "(rule: -22)" in res.stderr, res
    g.check(f"devlink dev eswitch set pci/{pf} mode legacy")
    assert_no_kernel_warning(g)
