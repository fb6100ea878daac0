# SPDX-License-Identifier: GPL-2.0-or-later
"""The guest's own switch in its VFs' path (issue 34), end to end: pods on
VFs reach each other through a Linux bridge in the guest, over the VFs'
representors, with the host's switch carrying each frame from a VF's port
to its representor port and back.

The system of test_l2_e2e.py (OVS-DPDK, vdpa-pool-daemon with a VDUSE PF,
a VM whose VFs come from the daemon), with the pool allowing switchdev
(`switchdev = yes`) and the VM's PF offering it (`sriov-eswitch=on`); the
VM runs the test kernel (guest-kernel-patches/, devlink on the PF).

- Legacy mode first: pods a and b (VFs 0 and 1, one VLAN) ping each other
  through the host's switch.
- `devlink dev eswitch set pci/<PF> mode switchdev`: a representor per
  enabled VF (devlink ports of flavour pcivf with their VF numbers,
  phys_port_name pf0vf0...), and on the host a representor port per VF.
- VF 2's MAC set through its devlink port function reaches its switch
  port on the host (and devlink shows it); another VF's MAC is refused by
  the daemon's pool (EPERM) and changes nothing.  Its devlink-rate
  tx_max becomes its port's policer, and 0 removes it.
- With both representors in a bridge of the guest's, a's pings reach b:
  OVS's flows count each frame going VF 0's port -> representor 0's port,
  and representor 1's port -> VF 1's port.
- The bridge removed, the pings fail, and the switch shows where they
  stopped: VF 0's frames still reach representor 0's port (its flow
  counts them), nothing goes from representor 1's port to VF 1.
- Back to legacy mode: the representors and their ports are gone and a
  reaches b again, directly."""
import json
import re
import time

import pytest

from harness.e2e import CONF, System, port_no, vf_port

pytestmark = [pytest.mark.slow, pytest.mark.nested]

SWITCHDEV_CONF = CONF.replace("\n[pool tenant-b]", "\nswitchdev = yes\n[pool tenant-b]")
PODS = {"a": (0, "02:00:00:00:0b:01", 100, "10.41.0.1/24"),
        "b": (1, "02:00:00:00:0b:02", 100, "10.41.0.2/24")}


@pytest.fixture(scope="module")
def system(l1host):
    assert "switchdev = yes" in SWITCHDEV_CONF
    s = System(l1host, conf=SWITCHDEV_CONF, eswitch=True)
    s.start_host()
    try:
        s.start_vm()
        yield s
    finally:
        s.stop()


def flow_packets(l1, port, action):
    """n_packets of the flow of frames entering at port with action."""
    out = l1.check(f"ovs-ofctl -O OpenFlow14 --no-names dump-flows br-vsriov "
                   f"in_port={port_no(l1, port)}")
    got = [int(re.search(r"n_packets=(\d+)", f).group(1))
           for f in out.splitlines() if f.rstrip().endswith(f"actions={action}")]
    assert len(got) == 1, f"no single flow in_port={port} actions={action}:\n{out}"
    return got[0]


def packets_reach(l1, port, action, at_least, timeout=30):
    """flow_packets once OVS's counters show at least at_least: the
    userspace datapath updates a flow's counters when its revalidators
    next run, up to a second after the frames passed."""
    deadline = time.monotonic() + timeout
    while True:
        n = flow_packets(l1, port, action)
        if n >= at_least or time.monotonic() > deadline:
            return n
        time.sleep(0.2)


def devlink_ports(l2, pf):
    return json.loads(l2.check(f"devlink -j port show pci/{pf}") or "{}").get("port", {})


def representors(l2, pf):
    """{VF number: representor netdev} of the PF's pcivf devlink ports."""
    return {p["vfnum"]: p["netdev"] for p in devlink_ports(l2, pf).values()
            if p.get("flavour") == "pcivf" and "netdev" in p}


@pytest.mark.long
def test_guest_bridge_over_representors_switches_the_vfs(system):
    s = system
    l1, l2, pf = s.l1, s.l2, s.pf
    s.ensure_pods(PODS)
    s.pin_neighbours({p: (PODS[p][1], PODS[p][3]) for p in PODS})
    assert l2.check(f"devlink -j dev eswitch show pci/{pf}").count('"legacy"') == 1
    assert s.ping("a", "10.41.0.2") == 3

    l2.check(f"devlink dev eswitch set pci/{pf} mode switchdev", timeout=120)
    # (ensure_pods enables all the PF's VFs: a representor each)
    vfs = int(l2.check(f"cat /sys/bus/pci/devices/{pf}/sriov_numvfs"))
    l2.wait_until(f"test $(devlink port show pci/{pf} | grep -c 'flavour pcivf') = {vfs}",
                  timeout=60)
    reps = representors(l2, pf)
    assert sorted(reps) == list(range(vfs)), devlink_ports(l2, pf)
    names = {n: l2.check(f"cat /sys/class/net/{reps[n]}/phys_port_name").strip()
             for n in reps}
    assert names == {n: f"pf0vf{n}" for n in range(vfs)}, names
    rep0, rep1 = (f"vr{vf_port(0)}", f"vr{vf_port(1)}")
    l1.wait_until(f"ovs-vsctl list-ports br-vsriov | grep -qx {rep0} && "
                  f"ovs-vsctl list-ports br-vsriov | grep -qx {rep1}", timeout=60)

    # VF 2's MAC through its port function (port index = VF number + 1):
    # the guest's VF driver and the VF's switch port take it; another VF's
    # MAC is refused by the daemon's pool (Operation not permitted) and
    # changes nothing
    def hw_addr():
        return json.loads(l2.check(f"devlink -j port show pci/{pf}/3")
                          )["port"][f"pci/{pf}/3"]["function"]["hw_addr"]

    l2.check(f"devlink port function set pci/{pf}/3 hw_addr 02:00:00:00:0b:21", timeout=60)
    assert hw_addr() == "02:00:00:00:0b:21"
    mac_on_port = f"ovs-vsctl get Interface {vf_port(2)} external_ids:attached-mac"
    assert l1.check(mac_on_port).strip().strip('"') == "02:00:00:00:0b:21"
    r = l2.run(f"devlink port function set pci/{pf}/3 hw_addr {PODS['a'][1]}", timeout=60)
    assert r.status != 0 and "Operation not permitted" in r.stdout + r.stderr, r
    assert hw_addr() == "02:00:00:00:0b:21"
    assert l1.check(mac_on_port).strip().strip('"') == "02:00:00:00:0b:21"

    # devlink-rate's tx_max is VF 2's policer on its switch port (the
    # policer's effect on a stream: test_l2_e2e's max_tx_rate test), and
    # 0 takes it away
    def policer():
        return [l1.check(f"ovs-vsctl get Interface {vf_port(2)} ingress_policing_{k}"
                         ).strip() for k in ("rate", "burst")]

    assert policer() == ["0", "0"]
    l2.check(f"devlink port function rate set pci/{pf}/3 tx_max 3mbit", timeout=60)
    assert policer() == ["3000", "300"]
    l2.check(f"devlink port function rate set pci/{pf}/3 tx_max 0", timeout=60)
    assert policer() == ["0", "0"]

    # the guest's bridge switches the VFs
    l2.check(f"ip link add brrep type bridge && ip link set brrep up && "
             f"ip link set {reps[0]} master brrep up && "
             f"ip link set {reps[1]} master brrep up")
    to_rep0 = flow_packets(l1, vf_port(0), f"output:{port_no(l1, rep0)}")
    to_vf1 = flow_packets(l1, rep1, f"output:{port_no(l1, vf_port(1))}")
    assert s.ping("a", "10.41.0.2") == 3
    assert packets_reach(l1, vf_port(0), f"output:{port_no(l1, rep0)}", to_rep0 + 3) \
        - to_rep0 >= 3
    assert packets_reach(l1, rep1, f"output:{port_no(l1, vf_port(1))}", to_vf1 + 3) \
        - to_vf1 >= 3

    # no bridge: the frames stop in the guest, at representor 0
    l2.check("ip link del brrep")
    to_rep0 = flow_packets(l1, vf_port(0), f"output:{port_no(l1, rep0)}")
    to_vf1 = flow_packets(l1, rep1, f"output:{port_no(l1, vf_port(1))}")
    assert s.ping("a", "10.41.0.2", wait=2) == 0
    assert packets_reach(l1, vf_port(0), f"output:{port_no(l1, rep0)}", to_rep0 + 3) \
        - to_rep0 >= 3
    # (counted by the same revalidation as representor 0's: nothing)
    assert flow_packets(l1, rep1, f"output:{port_no(l1, vf_port(1))}") == to_vf1

    # legacy again: no representors, no representor ports, a reaches b
    l2.check(f"devlink dev eswitch set pci/{pf} mode legacy", timeout=120)
    assert representors(l2, pf) == {}
    l1.wait_until(f"! ovs-vsctl list-ports br-vsriov | grep -q '^vr'", timeout=60)
    l2.wait_until("ip -n a link show net1 | grep -q LOWER_UP", timeout=60)
    assert s.ping("a", "10.41.0.2") == 3


# ---- the guest's rules offloaded to the host's switch (issue 35) ----------

def switch_flows(l1, port):
    """The flows of the guest's table(s) (not table 0, the pool's policy)
    for frames entering at port: [(table, priority, actions, n_packets)];
    priority 0 is the table's miss flow (to the representor port)."""
    out = l1.check(f"ovs-ofctl -O OpenFlow14 --no-names dump-flows br-vsriov "
                   f"in_port={port_no(l1, port)}")
    flows = []
    for f in out.splitlines():
        m = re.search(r"table=(\d+), n_packets=(\d+).* actions=(\S+)", f)
        if m and m.group(1) != "0":
            prio = re.search(r"[ ,]priority=(\d+)", f)
            # (ovs-ofctl leaves out the default priority, 32768)
            flows.append((int(m.group(1)), int(prio.group(1)) if prio else 32768,
                          m.group(3), int(m.group(2))))
    return flows


def rule_packets(l1, port, actions, timeout=30, at_least=0):
    """n_packets of the one guest rule for frames entering at port with
    actions, once it shows at least at_least (OVS's revalidators update
    counters up to a second after the frames passed)."""
    deadline = time.monotonic() + timeout
    while True:
        got = [n for (_, prio, a, n) in switch_flows(l1, port)
               if a == actions and prio != 0]
        assert len(got) == 1, f"no single rule in_port={port} actions={actions}: " \
                              f"{switch_flows(l1, port)}"
        if got[0] >= at_least or time.monotonic() > deadline:
            return got[0]
        time.sleep(0.2)


def tc_filters(l2, dev):
    """The flower filters on dev's ingress: [(pref, in_hw, packets)]."""
    out = json.loads(l2.check(f"tc -s -j filter show dev {dev} ingress") or "[]")
    got = []
    for f in out:
        o = f.get("options")
        if f.get("kind") != "flower" or not o:
            continue
        pkts = sum(a.get("stats", {}).get("packets", 0) for a in o.get("actions", []))
        got.append((f["pref"], bool(o.get("in_hw")), pkts))
    return got


def switchdev(s):
    """The PF in switchdev mode with a representor per VF and their ports
    on the host: {VF number: representor netdev}."""
    l1, l2, pf = s.l1, s.l2, s.pf
    l2.check(f"devlink dev eswitch set pci/{pf} mode switchdev", timeout=120)
    vfs = int(l2.check(f"cat /sys/bus/pci/devices/{pf}/sriov_numvfs"))
    l2.wait_until(f"test $(devlink port show pci/{pf} | grep -c 'flavour pcivf') = {vfs}",
                  timeout=60)
    l1.wait_until(" && ".join(f"ovs-vsctl list-ports br-vsriov | grep -qx vr{vf_port(n)}"
                              for n in range(2)), timeout=60)
    return representors(l2, pf)


def hw_tc(l2, dev):
    """A netdev's hw-tc-offload feature: "on" or "off"."""
    out = l2.check(f"ethtool -k {dev}")
    return re.search(r"^hw-tc-offload: (\w+)", out, re.M).group(1)


def test_guest_rules_run_in_the_host_switch(system):
    """tc flower rules on the representors, skip_sw: the host's switch
    forwards pod a's frames to pod b and back; tc says in_hw and counts
    what OVS counts; the rules deleted, the frames stop (at representor 0,
    the slow path, which has no bridge now).  Then a policy as a
    NetworkPolicy would have it: a may reach b on TCP 8080 only; TCP 22
    and ICMP are dropped in the host's switch (its rule counts them) and
    never reach the guest (representor 0 receives nothing).  hw-tc-offload
    cannot be turned off while a rule is offloaded, and can without."""
    s = system
    l1, l2 = s.l1, s.l2
    s.ensure_pods(PODS)
    s.pin_neighbours({p: (PODS[p][1], PODS[p][3]) for p in PODS})
    reps = switchdev(s)
    r0, r1 = reps[0], reps[1]
    vf0, vf1 = port_no(l1, vf_port(0)), port_no(l1, vf_port(1))
    try:
        l2.check(f"ip link set {r0} up && ip link set {r1} up && "
                 f"tc qdisc replace dev {r0} ingress && tc qdisc replace dev {r1} ingress")
        # no bridge, no rule: the frames stop at representor 0
        assert s.ping("a", "10.41.0.2", count=2, wait=2) == 0
        # without rules hw-tc-offload may go off and on
        l2.check(f"ethtool -K {r0} hw-tc-offload off")
        assert hw_tc(l2, r0) == "off"
        l2.check(f"ethtool -K {r0} hw-tc-offload on")
        assert hw_tc(l2, r0) == "on"

        # a rule pair VF 0 <-> VF 1, in the host's switch only
        for dev, peer in ((r0, r1), (r1, r0)):
            l2.check(f"tc filter add dev {dev} ingress prio 10 protocol all flower "
                     f"skip_sw action mirred egress redirect dev {peer}", timeout=120)
        assert [(p, hw) for p, hw, _ in tc_filters(l2, r0)] == [(10, True)]
        assert [(p, hw) for p, hw, _ in tc_filters(l2, r1)] == [(10, True)]
        # hw-tc-offload stays on while a rule is offloaded (tc would show
        # it in_hw, its counters no longer read)
        l2.run(f"ethtool -K {r0} hw-tc-offload off")
        assert hw_tc(l2, r0) == "on"
        assert "Active offloaded tc filters, can't turn hw_tc_offload off" in \
            l2.check("dmesg | tail -n 20")
        before = rule_packets(l1, vf_port(0), f"output:{vf1}")
        assert s.ping("a", "10.41.0.2") == 3
        n = rule_packets(l1, vf_port(0), f"output:{vf1}", at_least=before + 3)
        assert n - before >= 3
        assert rule_packets(l1, vf_port(1), f"output:{vf0}", at_least=3) >= 3
        # tc's count is the switch's (the device reads OVS's counters)
        deadline = time.monotonic() + 30
        while tc_filters(l2, r0)[0][2] != rule_packets(l1, vf_port(0), f"output:{vf1}"):
            assert time.monotonic() < deadline, (tc_filters(l2, r0), switch_flows(l1, vf_port(0)))
            time.sleep(0.5)

        # the rules deleted: nothing in the guest's table, no traffic
        l2.check(f"tc filter del dev {r0} ingress && tc filter del dev {r1} ingress",
                 timeout=120)
        assert [a for (_, prio, a, _) in switch_flows(l1, vf_port(0)) if prio] == []
        assert s.ping("a", "10.41.0.2", count=2, wait=2) == 0

        # the policy: a -> b on TCP 8080 only; b -> a all
        l2.check(f"tc filter add dev {r0} ingress prio 1 protocol ip flower skip_sw "
                 f"ip_proto tcp dst_ip 10.41.0.2 dst_port 8080 "
                 f"action mirred egress redirect dev {r1} && "
                 f"tc filter add dev {r0} ingress prio 9 protocol all flower skip_sw "
                 f"action drop && "
                 f"tc filter add dev {r1} ingress prio 1 protocol all flower skip_sw "
                 f"action mirred egress redirect dev {r0}", timeout=120)
        assert sorted(hw for _, hw, _ in tc_filters(l2, r0)) == [True, True]
        l2.check("ip netns exec b /mnt/tools/traffic tcp-sink -listen :8080 -duration 3s "
                 "> /tmp/sink8080.log 2>&1 & echo $! > /tmp/sink8080.pid")
        # (listening: port 8080 = 1F90 in state 0A of b's /proc/net/tcp)
        l2.wait_until("ip netns exec b grep -q ':1F90 00000000:0000 0A' /proc/net/tcp",
                      timeout=120)
        l2.check("ip netns exec a /mnt/tools/traffic tcp-send -to 10.41.0.2:8080 "
                 "-duration 2s", timeout=300)
        l2.wait_until("! kill -0 $(cat /tmp/sink8080.pid) 2>/dev/null", timeout=300)
        got = re.search(r"received (\d+) bytes", l2.check("cat /tmp/sink8080.log"))
        assert got and int(got.group(1)) > 0, l2.check("cat /tmp/sink8080.log")

        rx0 = json.loads(l2.check(f"ip -s -j link show {r0}"))[0]["stats64"]["rx"]["packets"]
        dropped = rule_packets(l1, vf_port(0), "drop")
        assert s.ping("a", "10.41.0.2", count=3, wait=2) == 0
        l2.run("ip netns exec a timeout 5 /mnt/tools/traffic tcp-send "
               "-to 10.41.0.2:22 -duration 1s", timeout=120)
        # the pings and the SYNs to port 22 were dropped in the host's switch
        assert rule_packets(l1, vf_port(0), "drop", at_least=dropped + 4) - dropped >= 4
        # ... and never reached the guest: representor 0 received nothing
        assert json.loads(l2.check(f"ip -s -j link show {r0}")
                          )[0]["stats64"]["rx"]["packets"] == rx0
    finally:
        l2.run(f"tc qdisc del dev {r0} ingress; tc qdisc del dev {r1} ingress", timeout=120)
        l2.check(f"devlink dev eswitch set pci/{s.pf} mode legacy", timeout=120)
    # nothing of the rules is left in the host's switch
    assert switch_flows(l1, vf_port(0)) == []
