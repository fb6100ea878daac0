# SPDX-License-Identifier: GPL-2.0-or-later
"""Level 0: live migration of a VM whose guest created VFs (issue 18).

Two QEMUs on this machine, each with its own tap pool of the same shape on
one host switch.  The guest enables two VFs, configures them through the
PF (the administration virtqueue), and puts them into two pods that ping
each other while the VM migrates: the pings go on, and no more are lost
than QEMU's measured downtime explains (pings_across); on the destination
the VF configuration the guest reads back and QMP's query-vsriov are what
the guest set; the administration virtqueue takes new commands there.  A
destination whose pool is too small fails the migration while the source
runs, with a sentence that names the pool, and the source keeps working.
A lazy pool's destination claims its backends from the incoming state."""
import math
import os
import re
import signal
import time

import pytest

from harness.vm import Guest, MigrationFailed
from system.guest_net import FIND_PF, enable_vfs, vf_into_netns
from system.test_l0_vf_control import (guest_vfs, pf_netdev, qmp_vfs, rebind_vf0,
                                       vf_summary, vpf_args)
from system.test_l0_vpf import host_switch

pytestmark = pytest.mark.slow

VF0_MAC = "02:00:00:00:18:01"
PINGS = 300             # at 0.1 s: 30 s, the migration in the middle
PING_INTERVAL_MS = 100
# What a migration may cost the pings (pings_across): those a pinger on
# the wall clock sends into the stopped VM, ceil(QEMU's downtime / the
# interval), and the one whose request or reply is on its way between the
# two VFs when the source stops (the source's tap or hub holds it, and
# nobody reads it any more).  The pinger here is in the VM and stops with
# it, so the stop delays its pings rather than losing them; and on a host
# switch a ping on the destination finds the switch already moved: QEMU
# announces the VFs (a RARP from each) before the vCPUs run, which moves
# the answering VF's MAC, and the pinging VF's first request moves its own.
PINGS_IN_FLIGHT = 1


def configured_vpf(netns, guest_factory, name):
    """A guest with two VFs configured through the PF and in two pods that
    reach each other: (host netns, guest, PF address, PF netdev)."""
    host = netns(f"vsr-{name[:5]}")
    host_switch(host, 2)
    host_switch(host, 2, taps="d")      # the destination's
    g = guest_factory(name, netns=host.name, qemu_args=vpf_args(2))
    return (host, g) + configure_two_pods(g)


def configure_two_pods(g, net="10.18.0"):
    """In guest g: two VFs configured through the PF, in pods a and b (at
    net.1 and net.2) that reach each other: (PF address, PF netdev)."""
    pf = g.check(FIND_PF).strip()
    dev = pf_netdev(g, pf)
    enable_vfs(g, pf, 2)
    g.check(f"ip link set {dev} vf 0 mac {VF0_MAC} vlan 100 max_tx_rate 1000")
    g.check(f"ip link set {dev} vf 1 spoofchk off state enable")
    rebind_vf0(g, pf, VF0_MAC)
    vf_into_netns(g, pf, 0, "a", f"{net}.1/24")
    vf_into_netns(g, pf, 1, "b", f"{net}.2/24")
    g.wait_until("ip -n a link show pod0 | grep -q LOWER_UP && "
                 "ip -n b link show pod0 | grep -q LOWER_UP", timeout=30)
    assert " 0% packet loss" in g.check(f"ip netns exec a ping -c 2 -W 5 {net}.2", timeout=30)
    return pf, dev


def start_pings(g, peer, count=PINGS):
    """Pod a of guest g pings @peer @count times, every PING_INTERVAL_MS,
    in the background (busybox ping: one "seq=N" line per reply, in
    /tmp/ping.log, then "done"); returns once it has answers."""
    g.check(f"(ip netns exec a ping -i {PING_INTERVAL_MS / 1000} -c {count} -W 1 {peer} "
            f"> /tmp/ping.log 2>&1; echo done >> /tmp/ping.log) &")
    g.wait_until("grep -q seq=3 /tmp/ping.log", timeout=30)


def pings_across(g, downtime_ms, count=PINGS, timeout=60, after=None):
    """In g, the destination, the @count pings of start_pings go on after the
    switch-over; once they end, no more were lost than a pinger on the
    wall clock would have sent while the VM was stopped (QEMU's downtime,
    in ms) plus PINGS_IN_FLIGHT.  With @after, the pinger is stopped (and
    the loss counted up to then) once @after pings past the switch-over were
    answered: for a @count that must outlast a migration of unknown length.
    @timeout: for the first command on the destination, which a guest just
    switched over under nested TCG answers slowly (its code translated
    anew).  Prints the figures."""
    log = g.check("cat /tmp/ping.log", timeout=timeout)
    assert "done" not in log, "the pings ended before the switch-over"
    switch_seq = max(int(s) for s in re.findall(r"seq=(\d+)", log))
    if after:
        g.wait_until("test $(grep -o 'seq=[0-9]*' /tmp/ping.log | tail -n 1 | cut -d= -f2) "
                     f"-ge {switch_seq + after}",
                     timeout=after * PING_INTERVAL_MS / 1000 + timeout)
        g.check("killall -INT ping")
    g.wait_until("grep -q done /tmp/ping.log", timeout=count * PING_INTERVAL_MS / 1000 + 60)
    log = g.check("cat /tmp/ping.log")
    seqs = sorted({int(s) for s in re.findall(r"seq=(\d+)", log)})
    sent = count
    if after:
        # (the last request may be on its way when the pinger stops)
        sent = int(re.search(r"(\d+) packets transmitted", log).group(1)) - 1
    lost = sorted(set(range(sent)) - set(seqs))
    bound = math.ceil(downtime_ms / PING_INTERVAL_MS) + PINGS_IN_FLIGHT
    print(f"pings: {len(seqs)} of {sent} answered, {len(lost)} lost {lost} "
          f"(the switch-over after seq {switch_seq}); downtime {downtime_ms} ms "
          f"explains at most {bound}")
    assert len(lost) <= bound, \
        f"{len(lost)} pings lost ({lost}), more than the {bound} a downtime of " \
        f"{downtime_ms} ms explains\n{log}"


def destination(g, host, n=2, qemu_args=None):
    """g's migration destination on host's switch, with taps d*."""
    return Guest(g.name + "-dst", g.artifacts, netns=host.name, incoming=True,
                 qemu_args=qemu_args or vpf_args(n, taps="d"))


def lazy_args(taps):
    """vpf_args(2) with lazy=on."""
    a = vpf_args(2, taps)
    a[a.index("vsriov-pool,id=p0,netdevs=b0,netdevs=b1")] += ",lazy=on"
    return a


def test_migrate_with_pods_pinging(netns, guest_factory):
    host, src, pf, dev = configured_vpf(netns, guest_factory, "migr")
    before_vfs = [vf_summary(vf) for vf in guest_vfs(src, dev)]
    before_qmp = [(vf["mac"], vf["config"]) for vf in qmp_vfs(src)]

    start_pings(src, "10.18.0.2")
    with destination(src, host) as dst:
        st = src.migrate_to(dst)
        print(f"migration: total {st['total-time']} ms, setup {st['setup-time']} ms, "
              f"downtime {st['downtime']} ms")
        # The source QEMU is paused for good; its guest is the destination's.
        assert src.qmp.execute("query-status")["status"] == "postmigrate"
        pings_across(dst, st["downtime"])

        # What the guest set is what it reads back, and what QMP reports.
        assert [vf_summary(vf) for vf in guest_vfs(dst, dev)] == before_vfs
        assert [(vf["mac"], vf["config"]) for vf in qmp_vfs(dst)] == before_qmp
        assert [vf["state"] for vf in qmp_vfs(dst)] == ["enabled", "enabled"]

        # The administration virtqueue goes on where it was.
        dst.check(f"ip link set {dev} vf 1 vlan 200")
        assert qmp_vfs(dst)[1]["config"]["vlan"] == 200
        assert guest_vfs(dst, dev)[1]["vlan_list"][0]["vlan"] == 200
        assert " 0% packet loss" in dst.check("ip netns exec b ping -c 3 -W 5 10.18.0.1",
                                              timeout=30)

        # Disabling and enabling VFs works on the destination.
        dst.check("ip netns del a && ip netns del b")
        enable_vfs(dst, pf, 0)
        assert [vf["state"] for vf in qmp_vfs(dst)] == ["disabled", "disabled"]
        enable_vfs(dst, pf, 2)
        assert [vf["config"]["vlan"] for vf in qmp_vfs(dst)] == [0, 0]


def test_migration_to_a_smaller_pool_fails_early(netns, guest_factory):
    host, src, pf, dev = configured_vpf(netns, guest_factory, "migsm")
    with destination(src, host, n=1) as dst:
        with pytest.raises(MigrationFailed):
            src.migrate_to(dst, timeout=120)
        dst.proc.wait(30)
        log = open(dst.qemu_log).read()
        assert ("virtual SR-IOV PF 'pf0' has 1 VF(s) from pool 'p0' where the "
                "source's has 2") in log, log
    # The source never stopped, and its VFs work as before.
    assert src.qmp.execute("query-status")["status"] == "running"
    assert " 0% packet loss" in src.check("ip netns exec a ping -c 3 -W 5 10.18.0.2",
                                          timeout=30)
    assert qmp_vfs(src)[0]["config"]["vlan"] == 100
    src.check(f"ip link set {dev} vf 1 vlan 300")
    assert qmp_vfs(src)[1]["config"]["vlan"] == 300


def test_lazy_pool_migrates(netns, guest_factory):
    """A lazy pool's destination has no backends until the VFs come: the
    PF's VF Enable, loaded with it, claims them (a static pool gives them
    at once), and the pods go on."""
    host = netns("vsr-mlz")
    host_switch(host, 2)
    host_switch(host, 2, taps="d")
    g = guest_factory("miglazy", netns=host.name, qemu_args=lazy_args("t"))
    pf = g.check(FIND_PF).strip()
    dev = pf_netdev(g, pf)
    enable_vfs(g, pf, 2)
    g.check(f"ip link set {dev} vf 0 vlan 100")
    vf_into_netns(g, pf, 0, "a", "10.18.0.1/24")
    vf_into_netns(g, pf, 1, "b", "10.18.0.2/24")
    g.wait_until("ip -n a link show pod0 | grep -q LOWER_UP", timeout=30)
    with destination(g, host, qemu_args=lazy_args("d")) as dst:
        assert [vf["state"] for vf in qmp_vfs(dst)] == ["disabled", "disabled"]
        (pool,) = dst.qmp.execute("query-vsriov-pools")
        assert pool["free"] == 2, pool      # nothing claimed before the migration
        # (the destination acknowledges the switch-over once its VFs are
        # staged: a static pool's at once)
        g.migrate_to(dst, cap={"return-path": True, "switchover-ack": True})
        vfs = qmp_vfs(dst)
        assert [(vf["state"], vf["netdev"]) for vf in vfs] == \
            [("enabled", "b0"), ("enabled", "b1")], vfs
        assert vfs[0]["config"]["vlan"] == 100
        assert " 0% packet loss" in dst.check("ip netns exec a ping -c 3 -W 5 10.18.0.2",
                                              timeout=30)


def test_a_command_in_flight_does_not_hold_the_migration(netns, guest_factory):
    """A guest whose VF command waits for the device (its answers held:
    x-sriov-admin-hold, as a provider that does not answer) cannot keep
    its VM from migrating: when the VM stops, the command goes back to
    the administration virtqueue (QEMU's trace says so), and the
    destination runs it and answers it.  The guest's `ip link set`
    returns 0 there and the destination's QMP has the VLAN."""
    host, src, pf, dev = configured_vpf(netns, guest_factory, "infl")
    for e in ("vsriov_admin_cmd", "vsriov_admin_requeued"):
        src.qmp.execute("trace-event-set-state", {"name": e, "enable": True})
    src.qmp.execute("qom-set", {"path": "pf0", "property": "x-sriov-admin-hold",
                                "value": True})
    src.check(f"(ip link set {dev} vf 1 vlan 7; echo rc=$? > /tmp/set.rc) "
              "> /tmp/set.log 2>&1 &")
    # In flight: a command of it reached QEMU, and the guest still waits.
    deadline = time.monotonic() + 30
    while "vsriov_admin_cmd PF pf0" not in open(src.qemu_log).read():
        assert time.monotonic() < deadline, "no administration command reached QEMU"
        time.sleep(0.1)
    assert src.run("test -f /tmp/set.rc").status != 0, src.check("cat /tmp/set.log")
    with destination(src, host) as dst:
        src.migrate_to(dst)
        assert "vsriov_admin_requeued PF pf0" in open(src.qemu_log).read()
        dst.wait_until("test -f /tmp/set.rc", timeout=60)
        assert dst.check("cat /tmp/set.rc").strip() == "rc=0", dst.check("cat /tmp/set.log")
        assert qmp_vfs(dst)[1]["config"]["vlan"] == 7
        assert vf_summary(guest_vfs(dst, dev)[1])["vlan"] == 7


def slow_migration(src, dst):
    """Start a migration of src to dst at 200 KB/s (a minute or more for
    this guest) and wait until it is under way."""
    uri = f"unix:{dst.sockdir}/migrate.sock"
    src.qmp.execute("migrate-set-parameters", {"max-bandwidth": 200 * 1024})
    dst.qmp.execute("migrate-incoming", {"uri": uri})
    src.qmp.execute("migrate", {"uri": uri})
    deadline = time.monotonic() + 60
    while src.qmp.execute("query-migrate").get("ram", {}).get("transferred", 0) < 100 * 1024:
        assert src.qmp.execute("query-migrate")["status"] in ("setup", "active")
        assert time.monotonic() < deadline, "the migration did not get under way"
        time.sleep(0.05)


def wait_migration(src, states, timeout=60):
    deadline = time.monotonic() + timeout
    while (st := src.qmp.execute("query-migrate"))["status"] not in states:
        assert time.monotonic() < deadline, st
        time.sleep(0.05)
    return st


@pytest.mark.parametrize("how", ["cancel", "destination-killed"])
def test_failed_migration_leaves_the_source_as_it_was(netns, guest_factory, how):
    host, src, pf, dev = configured_vpf(netns, guest_factory, "migf" + how[0])
    before_qmp = [(vf["mac"], vf["config"]) for vf in qmp_vfs(src)]
    before_pools = src.qmp.execute("query-vsriov-pools")
    with destination(src, host) as dst:
        slow_migration(src, dst)
        if how == "cancel":
            src.qmp.execute("migrate_cancel")
            st = wait_migration(src, ("cancelled",))
        else:
            os.killpg(dst.proc.pid, signal.SIGKILL)
            st = wait_migration(src, ("failed",))
        print(f"{how}: {st['status']}")
    # The source runs on with its VFs, their configuration and its pool.
    assert src.qmp.execute("query-status")["status"] == "running"
    assert [(vf["mac"], vf["config"]) for vf in qmp_vfs(src)] == before_qmp
    assert src.qmp.execute("query-vsriov-pools") == before_pools
    assert " 0% packet loss" in src.check("ip netns exec a ping -c 3 -W 5 10.18.0.2",
                                          timeout=30)
    src.check(f"ip link set {dev} vf 1 vlan 300")
    assert qmp_vfs(src)[1]["config"]["vlan"] == 300
    # And it can still go: a second destination takes it.
    src.qmp.execute("migrate-set-parameters", {"max-bandwidth": 128 << 20})
    with destination(src, host) as dst2:
        src.migrate_to(dst2)
        assert qmp_vfs(dst2)[1]["config"]["vlan"] == 300
        assert " 0% packet loss" in dst2.check("ip netns exec a ping -c 3 -W 5 10.18.0.2",
                                               timeout=30)
