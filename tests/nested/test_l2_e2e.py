# SPDX-License-Identifier: GPL-2.0-or-later
"""The whole system, end to end (issue 14): pods in a VM on guest-created
VFs whose packets cross a real switch, with the guest's VF settings
enforced there.

Level 1 runs OVS-DPDK, vdpa-pool-daemon with a VDUSE PF (each pooled VF a
VDUSE device that OVS-DPDK serves: its OVS port is the VF's switch port)
and our QEMU; harness/e2e.py sets it up.  The Level 2 VM runs the test
kernel; its PF is itself a VDUSE device on the same bridge, its VFs come
from the daemon (a lazy vsriov-daemon-pool).  In the VM: `echo 4 >
sriov_numvfs`, tests/cni-flow moves VFs into pods with a MAC and VLAN set
through the PF, and the tests below check on real traffic, from both ends
and from OVS's own counters, that the switch does what the guest asked:
same VLAN passes, other VLANs do not, a forged source MAC is dropped (and
counted) while the pod's real traffic passes, max_tx_rate caps a stream,
link state disable/enable, a daemon restart does not stop a stream, a
stuck daemon makes a VF command fail with EAGAIN and QEMU puts back
what the daemon applied late, a second VM of another tenant on the same switch is isolated and cannot join
the first tenant's VLAN, VFs the guest disables go back to the pool,
default-deny, claimable again, and a live migration of the VM is refused
with QEMU's reason (its vhost-vdpa devices on OVS-DPDK's VDUSE ports offer
a feature QEMU's shadow virtqueues lack) while the VM runs on.

The tests share one Level 1 host and one VM (a module fixture) and run in
file order; each leaves the pods as it found them."""
import re
import shlex

import pytest

from harness.agent import AgentError
from harness.e2e import (System, daemon_binary, drop_count, port_stats, qos_drops,
                         start_daemon, stop_daemon, vf_port)

pytestmark = [pytest.mark.slow, pytest.mark.nested]

# Pods: VF index, MAC, VLAN, address.  a and b share VLAN 100; c is in
# VLAN 150 (same tenant, another VLAN); d is for the rate test.
PODS = {
    "a": (0, "02:00:00:00:0a:01", 100, "10.40.0.1/24"),
    "b": (1, "02:00:00:00:0a:02", 100, "10.40.0.2/24"),
    "c": (2, "02:00:00:00:0a:03", 150, "10.40.0.3/24"),
    "d": (3, "02:00:00:00:0a:04", 100, "10.40.0.4/24"),
}
FORGED_MAC = "02:00:00:00:0a:99"


@pytest.fixture(scope="module")
def system(l1host):
    s = System(l1host)
    s.start_host()
    try:
        s.start_vm()
        yield s
    finally:
        s.stop()


def test_guest_creates_vfs_and_pods(system):
    s = system
    l1, l2 = s.l1, s.l2
    assert l2.check(f"cat /sys/bus/pci/devices/{s.pf}/sriov_totalvfs").strip() == "4"
    s.enable_vfs(4)
    # The guest reads back what the switch does: the daemon's pool checks
    # source MACs unless told not to.
    vfs = [line for line in l2.check(f"ip link show {s.pf_dev}").splitlines()
           if line.strip().startswith("vf ")]
    assert len(vfs) == 4 and all("spoof checking on" in v for v in vfs), vfs
    for pod, (vf, mac, vlan, ip) in PODS.items():
        s.add_pod(pod, vf, mac, vlan, ip)
    # The daemon programmed each VF's switch port as the guest asked (and
    # QEMU's VF i is the daemon's VF i: lazy claims take the lowest free).
    for pod, (vf, mac, vlan, _) in PODS.items():
        port = vf_port(vf)
        assert l1.check(f"ovs-vsctl get Port {port} tag").strip() == str(vlan)
        assert l1.check(f"ovs-vsctl get Interface {port} external_ids:attached-mac"
                        ).strip().strip('"') == mac
    l2.wait_until("for p in a b c d; do ip -n $p link show net1 | grep -q LOWER_UP || "
                  "exit 1; done", timeout=60)


def test_same_vlan_passes_through_the_switch(system):
    s = system
    before = {p: port_stats(s.l1, vf_port(PODS[p][0])) for p in ("a", "b")}
    assert s.ping("a", "10.40.0.2", count=5) == 5
    after = {p: port_stats(s.l1, vf_port(PODS[p][0])) for p in ("a", "b")}
    # Both directions crossed OVS: into the switch from a, out to b, back.
    for p in ("a", "b"):
        assert after[p]["rx_pkts"] - before[p]["rx_pkts"] >= 5, (before, after)
        assert after[p]["tx_pkts"] - before[p]["tx_pkts"] >= 5, (before, after)


def test_other_vlan_is_isolated(system):
    s = system
    before = port_stats(s.l1, vf_port(PODS["c"][0]))
    assert s.ping("c", "10.40.0.1", count=3, wait=2) == 0
    assert s.ping("a", "10.40.0.3", count=3, wait=2) == 0
    after = port_stats(s.l1, vf_port(PODS["c"][0]))
    # c's frames did reach the switch; nothing of VLAN 100 reached c.
    assert after["rx_pkts"] > before["rx_pkts"], (before, after)


def test_forged_source_mac_is_dropped_at_the_switch(system):
    s = system
    port = vf_port(PODS["a"][0])
    mac = PODS["a"][1]
    drops = drop_count(s.l1, port)
    s.l2.check(f"ip -n a link set net1 address {FORGED_MAC}")
    try:
        assert s.ping("a", "10.40.0.2", count=3, wait=2) == 0
        assert drop_count(s.l1, port) >= drops + 3
    finally:
        s.l2.check(f"ip -n a link set net1 address {mac}")
    # Its own traffic still passes.
    s.l2.run("ip -n a neigh flush all; ip -n b neigh flush all")
    assert s.ping("a", "10.40.0.2", count=3) == 3


def test_max_tx_rate_caps_a_stream(system):
    """max_tx_rate as the switch enforces it: OVS-DPDK's ingress policer on
    the VF's port.  Under nested TCG one vCPU of the VM both sends and
    receives, some tens of frames a second, and how many varies tenfold
    with the load on the machine (0.54 to 5.6 Mbit/s in 15 streams of one
    run); so the stream uses 9000-byte frames to offer more than the
    smallest rate a guest can set (1 Mbit/s), a capped stream that offered
    too little is tried again, and what passed the policer is counted
    where the switch hands it to the receiving VF (delivered or dropped at
    its full ring), not at the receiving application, whose own limit may
    be below the cap."""
    s = system
    vf = PODS["d"][0]
    d_port, b_port = vf_port(vf), vf_port(PODS["b"][0])
    limit, secs, frame = 1, 8, 8900 + 8 + 20 + 14   # UDP, IPv4, Ethernet
    mtu_of = {"d": PODS["d"][0], "b": PODS["b"][0]}

    def stream():
        """(sent, arrived, policed frames, passed the switch, blocked)"""
        drops, before = qos_drops(s.l1, d_port), port_stats(s.l1, b_port)
        st = s.udp_stream("d", "b", "10.40.0.2", size=8900, secs=secs)
        after = port_stats(s.l1, b_port)
        to_b = sum(after[k] - before[k] for k in ("tx_pkts", "tx_drop"))
        return (st.sent, st.received, qos_drops(s.l1, d_port) - drops,
                to_b * frame * 8 / secs / 1e6, st.blocked)

    s.set_mtu(mtu_of, 9000)
    try:
        free = stream()
        s.l2.check(f"ip link set {s.pf_dev} vf {vf} max_tx_rate {limit}")
        assert s.l1.check(f"ovs-vsctl get Interface {d_port} ingress_policing_rate"
                          ).strip() == str(limit * 1000)
        assert s.l1.check(f"ovs-vsctl get Interface {d_port} ingress_policing_burst"
                          ).strip() == str(limit * 100)
        capped = []
        while len(capped) < 3 and (not capped or capped[-1][0] <= 1.3 * limit):
            capped.append(stream())
    finally:
        s.l2.check(f"ip link set {s.pf_dev} vf {vf} max_tx_rate 0")
        s.set_mtu(mtu_of, 1500)
    for name, (sent, arrived, dropped, passed, blocked) in (
            [("without", free)] + [("with", c) for c in capped]):
        print(f"{name} max_tx_rate {limit} Mbit/s: {sent:.2f} Mbit/s sent, {passed:.2f} "
              f"passed the switch, {arrived:.2f} arrived; {dropped} frames policed"
              + ("; the sender was blocked at the end" if blocked else ""))
    figures = {"without": free, "with": capped}
    # Without a cap the policer drops nothing.  With it, the stream offered
    # more than the cap, the policer dropped the excess, and what passed is
    # the cap (plus the 100 ms burst over 8 s, and a margin for timing).
    # A machine whose Level 2 guest offered no more than the smallest cap
    # three times running (1.19 Mbit/s uncapped, 0.65 capped, in one
    # loaded run) cannot show it: the test says so instead of failing.
    assert free[2] == 0, figures
    sent, arrived, dropped, passed, _ = capped[-1]
    if sent <= 1.3 * limit:
        pytest.skip(f"the guest offered {sent:.2f} Mbit/s or less three times, too little "
                    f"to exceed a cap of {limit} Mbit/s on this machine: {figures}")
    assert dropped > 0, figures
    assert passed < 1.2 * limit, figures
    assert arrived < 1.2 * limit, figures


def test_link_state_disable_and_enable(system):
    s = system
    vf = PODS["a"][0]
    s.l2.check(f"ip link set {s.pf_dev} vf {vf} state disable")
    try:
        assert s.ping("a", "10.40.0.2", count=3, wait=2) == 0
    finally:
        s.l2.check(f"ip link set {s.pf_dev} vf {vf} state enable")
    assert s.ping("a", "10.40.0.2", count=3) == 3


def test_daemon_restart_does_not_stop_a_stream(system):
    s = system
    l1, l2 = s.l1, s.l2
    l2.check("ip netns exec a ping -i 1 -c 40 -W 2 10.40.0.2 > /tmp/stream.log 2>&1 & "
             "echo $! > /tmp/stream.pid")
    l2.wait_until("grep -q 'bytes from' /tmp/stream.log", timeout=60)
    stop_daemon(l1)
    start_daemon(l1, daemon_binary())
    l2.wait_until("! kill -0 $(cat /tmp/stream.pid) 2>/dev/null", timeout=300)
    out = l2.check("cat /tmp/stream.log")
    m = re.search(r"(\d+) packets transmitted, (\d+) packets received", out)
    assert m, out
    sent, got = int(m.group(1)), int(m.group(2))
    print(f"daemon restart during a stream: {sent - got} of {sent} packets lost")
    assert sent == 40 and got >= sent - 2, out
    # QEMU's next request reaches the restarted daemon (it connects again
    # and gets its VFs back): the guest changes a VF's VLAN.
    vf = PODS["c"][0]
    l2.check(f"ip link set {s.pf_dev} vf {vf} vlan 160")
    assert l1.check(f"ovs-vsctl get Port {vf_port(vf)} tag").strip() == "160"


def agent_cmd(l2, cmd):
    """@cmd run in the Level 2 guest by its agent, from Level 1."""
    return (f"{l2.L1_AGENT} run --connect {l2.dir}/agent.sock --wait 10 "
            f"--pid $(cat {l2.dir}/pid) --timeout 10 -- {shlex.quote(cmd)}")


def rtts_ms(l1, l2, n):
    """@n round trips of the guest's agent, in ms as Level 1 times them."""
    out = l1.check(f"for i in $(seq {n}); do s=$(date +%s%N); "
                   f"{agent_cmd(l2, 'true')} >/dev/null || exit 1; "
                   "echo $(( ($(date +%s%N) - s) / 1000000 )); done", timeout=30 + 15 * n)
    return [int(x) for x in out.split()]


def rtts_until_done(l1, l2, path, limit=60):
    """The agent's round trips, in ms, each reading @path in the guest, until
    it says rc=: how the guest answered while a command there waited."""
    out = l1.check(f"for i in $(seq {limit}); do s=$(date +%s%N); "
                   f"o=$({agent_cmd(l2, 'cat ' + path)}) || exit 1; "
                   "echo $(( ($(date +%s%N) - s) / 1000000 )); "
                   "case \"$o\" in *rc=*) exit 0;; esac; done; exit 1", timeout=30 + 15 * limit)
    return [int(x) for x in out.split()]


def while_daemon_stopped(s, cmd):
    """@cmd run in the guest with the daemon SIGSTOPped until it ended: it
    fails after QEMU's 5 s deadline, and meanwhile the guest answers its
    agent all along (a guest held up in QEMU for the daemon, as before the
    asynchronous provider interface, answers once, after it).  Returns
    what the command said."""
    l1, l2 = s.l1, s.l2
    path = "/tmp/stopped.out"
    base = rtts_ms(l1, l2, 5)
    l1.check("kill -STOP $(cat /tmp/vpd.pid)")
    try:
        # (the guest's busybox date has whole seconds only)
        l2.check(f": >{path}; (s=$(date +%s); {cmd}; rc=$?; "
                 f"echo took $(( $(date +%s) - s )) rc=$rc) >>{path} 2>&1 &")
        during = rtts_until_done(l1, l2, path)
    finally:
        l1.check("kill -CONT $(cat /tmp/vpd.pid)")
    out = l2.check(f"cat {path}")
    took = int(re.search(r"took (\d+)", out).group(1))
    print(f"{cmd}: failed after {took} s; agent round trips from Level 1: {base} ms "
          f"before, {during} ms while it waited for the stopped daemon")
    assert "rc=0" not in out, out
    assert 4 <= took < 60, "the command did not wait for QEMU's 5 s deadline: " + out
    # A guest held in QEMU for the daemon is frozen through the wait, so it
    # answers at most once before the command ends: two answers while it
    # waited (and the one that saw it end) show a guest that ran.  How long
    # each round trip took depends on the machine's load and is printed,
    # not asserted.
    assert len(during) >= 3, (base, during)
    return out


def test_stuck_daemon_times_out_then_catches_up(system):
    """A daemon that does not answer (SIGSTOPped): the guest's VF command
    fails with EAGAIN ("try again: nothing changed"), not EPERM (nothing
    was refused), after QEMU's deadline of 5 s, and meanwhile the guest
    runs: the command waits on the PF's administration virtqueue while
    QEMU waits for the daemon in its main loop, so the guest's agent keeps
    answering.  QEMU, which gave up on the request, sends the VF's
    recorded configuration after it: when the daemon resumes it applies
    the late request and then that, so the switch ends as the guest was
    told (VLAN 160), and the next command works."""
    s = system
    l1, l2 = s.l1, s.l2
    vf = PODS["c"][0]
    port = vf_port(vf)
    assert l1.check(f"ovs-vsctl get Port {port} tag").strip() == "160"
    # Every change of the ports' VLANs, as OVSDB makes them.
    mon = "/tmp/port-tags.csv"
    l1.check(f"setsid stdbuf -oL ovsdb-client monitor Open_vSwitch Port name tag "
             f"--format=csv >{mon} 2>&1 < /dev/null & echo $! >/tmp/mon.pid")
    try:
        l1.wait_until(f"grep -q ',{port},' {mon}", timeout=30)
        out = while_daemon_stopped(s, f"ip link set {s.pf_dev} vf {vf} vlan 170")
        assert "Resource temporarily unavailable" in out, out
        assert "vlan 160" in l2.check(f"ip link show {s.pf_dev} | grep 'vf {vf} '")
        # The next command comes after both of QEMU's requests.
        l2.check(f"ip link set {s.pf_dev} vf {vf} vlan 165")
        assert l1.check(f"ovs-vsctl get Port {port} tag").strip() == "165"
        l1.wait_until(f"grep -q ',165$' {mon}", timeout=30)
    finally:
        l1.run("kill $(cat /tmp/mon.pid)")
    # (rows: uuid,action,name,tag; a change is an "old" row, then a "new"
    # one with the name)
    rows = [line.split(",") for line in l1.check(f"cat {mon}").splitlines()]
    tags = [r[3] for r in rows if len(r) == 4 and r[2] == port and r[1] in ("initial", "new")]
    # Whether the late request reached the switch (170) or the daemon's
    # worker only saw what QEMU put back after it, the switch was at 160
    # when the next command came.
    print(f"VLANs of {port} in OVSDB: {tags}")
    assert tags[0] == "160" and tags[-2:] == ["160", "165"], rows
    l2.check(f"ip link set {s.pf_dev} vf {vf} vlan 160")
    assert l1.check(f"ovs-vsctl get Port {port} tag").strip() == "160"


def test_two_tenants_vms_are_isolated(system):
    """A second VM, of tenant-b (VLANs 200-299), on the same switch: its pod
    reaches none of tenant-a's pods, and its guest cannot put its VF into
    tenant-a's VLAN (the daemon refuses; the port keeps its VLAN)."""
    s = system
    vm2 = System(s.l1, pool="tenant-b", count=1)
    vm2.start_vm("vm2", mac="52:54:00:00:02:00")
    try:
        vm2.enable_vfs(1)
        vm2.add_pod("x", 0, "02:00:00:00:0b:09", 200, "10.40.0.9/24")
        port = vf_port(4)  # tenant-b's first VF
        assert s.l1.check(f"ovs-vsctl get Port {port} tag").strip() == "200"
        vm2.l2.wait_until("ip -n x link show net1 | grep -q LOWER_UP", timeout=60)
        assert vm2.ping("x", "10.40.0.1", count=3, wait=2) == 0
        assert s.ping("a", "10.40.0.9", count=3, wait=2) == 0
        r = vm2.l2.run(f"ip link set {vm2.pf_dev} vf 0 vlan 100")
        assert r.status != 0 and "Operation not permitted" in r.stderr, r
        assert s.l1.check(f"ovs-vsctl get Port {port} tag").strip() == "200"
        # tenant-a's pods still reach each other.
        assert s.ping("a", "10.40.0.2", count=3) == 3
        vm2.del_pod("x")
        vm2.enable_vfs(0)
    finally:
        vm2.l2.stop()


def test_disabled_vfs_return_to_the_pool(system):
    s = system
    l1 = s.l1
    for pod in PODS:
        s.del_pod(pod)
    s.enable_vfs(0)
    # A lazy pool gives the VFs back at VF disable: the daemon has them
    # free again, their ports default-deny (VLAN 4095, drop).
    l1.wait_until("python3 /tmp/vpd_client.py free tenant-a | grep -qx 4", timeout=60)
    for vf in range(4):
        assert l1.check(f"ovs-vsctl get Port {vf_port(vf)} tag").strip() == "4095"
        assert l1.check(f"ovs-vsctl get Interface {vf_port(vf)} external_ids:vpd-state"
                        ).strip() == "free"
    # Another VM (here the daemon's own client) can claim them.
    out = l1.check("python3 /tmp/vpd_client.py claim tenant-a 4")
    assert sorted(out.split()) == [vf_port(vf) for vf in range(4)], out


def test_stuck_daemon_at_vf_enable(system):
    """The daemon SIGSTOPped while the guest enables lazy VFs: the guest's
    driver asks QEMU for the VFs' backends before VF Enable (PREPARE_VFS),
    QEMU asks the daemon from its main loop, so the guest keeps running;
    the enable fails with EAGAIN after QEMU's deadline.  When the daemon
    resumes, the VFs it hands out late go back at once: none stays claimed
    by nobody, and the next enable works."""
    s = system
    l1, l2 = s.l1, s.l2
    l1.wait_until("python3 /tmp/vpd_client.py free tenant-a | grep -qx 4", timeout=60)
    claims = "grep -c \"claimed by '/machine/\" /scratch/vpd.log || true"
    before = int(l1.check(claims).strip())
    out = while_daemon_stopped(s, f"echo 2 > /sys/bus/pci/devices/{s.pf}/sriov_numvfs")
    assert "Resource temporarily unavailable" in out, out
    assert l2.check(f"cat /sys/bus/pci/devices/{s.pf}/sriov_numvfs").strip() == "0"
    # The daemon answers the two claims late; QEMU gives those VFs back.
    l1.wait_until(f"test $({claims}) -ge {before + 2}", timeout=60)
    l1.wait_until("python3 /tmp/vpd_client.py free tenant-a | grep -qx 4", timeout=60)
    s.enable_vfs(2)
    l1.wait_until("python3 /tmp/vpd_client.py free tenant-a | grep -qx 2", timeout=60)
    s.enable_vfs(0)
    l1.wait_until("python3 /tmp/vpd_client.py free tenant-a | grep -qx 4", timeout=60)



def test_vm_on_vduse_ports_cannot_migrate_and_says_why(system):
    """Live migration (issue 18) of this VM, whose PF and VFs are vhost-vdpa
    devices on OVS-DPDK's VDUSE ports, to a destination QEMU in the same
    emulated host (its PF on a VDUSE port of its own, its VFs from the
    daemon's same pool): QEMU refuses it at once and says why.  QEMU
    migrates a vhost-vdpa device through shadow virtqueues, which do not
    support a feature these devices offer (VIRTIO_NET_F_GSO, bit 6, which
    DPDK's VDUSE devices offer).  The VM runs on as it was: its pods ping,
    its VFs' ports keep their VLAN, and the destination held no VF."""
    s = system
    l1, src = s.l1, s.l2
    s.enable_vfs(2)
    for pod in ("a", "b"):
        s.add_pod(pod, *PODS[pod])
    src.wait_until("ip -n a link show net1 | grep -q LOWER_UP && "
                   "ip -n b link show net1 | grep -q LOWER_UP", timeout=60)
    l1.wait_until("python3 /tmp/vpd_client.py free tenant-a | grep -qx 2", timeout=60)
    tags = [l1.check(f"ovs-vsctl get Port {vf_port(vf)} tag").strip() for vf in range(4)]
    assert tags == ["100", "100", "4095", "4095"], tags
    dst = s.start_destination()
    try:
        with pytest.raises(AgentError, match=r"vdpa svq does not work with features 0x40"):
            src.migrate_to(dst)
    finally:
        dst.stop()
    assert src.qmp("query-status")["status"] == "running"
    assert s.ping("a", "10.40.0.2") == 3
    assert l1.check("python3 /tmp/vpd_client.py free tenant-a").strip() == "2"
    assert [l1.check(f"ovs-vsctl get Port {vf_port(vf)} tag").strip()
            for vf in range(4)] == tags
