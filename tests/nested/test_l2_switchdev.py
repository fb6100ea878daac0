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
  the daemon's pool (EPERM) and changes nothing.
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

SWITCHDEV_CONF = CONF.replace("mac-policy = any\n[pool tenant-b]",
                              "mac-policy = any\nswitchdev = yes\n[pool tenant-b]")
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
