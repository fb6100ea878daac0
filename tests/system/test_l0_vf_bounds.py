# SPDX-License-Identifier: GPL-2.0-or-later
"""Level 0: a PF whose device answers slowly, late or never does not hold
the guest up, and the guest's driver does what the specification asks of
it (issue 33, "Defects a user can hit").

The PF's device holds back every answer of its administration virtqueue
by x-sriov-admin-delay milliseconds (QEMU's testing knob; 4294967295:
never), and QEMU traces each command (vsriov_admin_cmd when the device
takes it, vsriov_admin_done when it answers).  The guest's virtio_net
answers `ip link show` from the VF configuration it keeps (read when the
VFs are enabled, changed by each SET) and from counters a work item
refreshes outside the RTNL lock; a SET waits for the device at most the
driver's deadline (VIRTIO_ADMIN_CMD_TIMEOUT, 10 s), killably; virtio_pci
keeps a command it stopped waiting for until the device returns it, or
frees it when the device is reset.

- A device that takes 4 s per command: `ip addr` answers within 1 s while
  `echo 2 > sriov_numvfs` waits for the device (no RTNL lock there), and
  afterwards `ip link show` (with and without counters) and `ip addr`
  answer within 1 s and send the device no command; a SET succeeds after
  the device's 4 s, a shell command answering meanwhile, and `ip link
  show` shows it at once.
- A device that takes 6 s: a SET queued behind another command fails with
  ETIMEDOUT at the driver's deadline; the device's late answer still
  changes what `ip link show` reports.
- A device that never answers (the lockdep kernel, hung tasks reported
  after 5 s): a SET fails with ETIMEDOUT at the deadline, a killed one
  ends at once, the guest answers throughout; `echo 2 > sriov_numvfs`
  fails at the deadline, and while that preparation is unanswered the next
  one is refused (EBUSY); the VFs are disabled and the PF's driver unbound
  and bound again (a reset, which frees the commands the device still
  holds) without an oops, a use-after-free or undefined-behaviour report,
  a hung task or a lockdep report, and with a device that answers again
  everything works again.
- The conformance points: the self group's capability commands
  (CAP_ID_LIST_QUERY, DEVICE_CAP_GET, DRIVER_CAP_SET) are answered OK,
  which the device does only after the self group's own LIST_USE; a rate
  above the capability is refused by the driver, no SET reaching the
  device; the VF link states read back as set, in the guest and in QMP;
  a failed pci_enable_sriov() after SRIOV_MEMBERS_PREPARE is followed by
  a second PREPARE (of 0); a VF whose device offers VIRTIO_NET_F_ADMIN_MAC
  without VIRTIO_NET_F_STATUS probes without the feature.

The kernels: VSRIOV_TEST_KERNEL (default vmlinuz-test) and
VSRIOV_TEST_LOCKDEP_KERNEL (default vmlinuz-lockdep), names in the guest
artifacts or absolute paths.  The ADMIN_MAC test needs the virtio core's
debugfs (CONFIG_VIRTIO_DEBUG) to hide a feature from the driver."""
import os
import re
import time

import pytest

from harness import paths
from system.guest_net import FIND_PF
from system.test_l0_vf_control import (guest_vfs, lockdep_saw_nothing, pf_netdev,
                                       qmp_vfs, vf0_virtio)
from system.test_l0_vpf import host_switch, vpf_tap_args

pytestmark = pytest.mark.slow


def _kernel(var, default):
    name = os.environ.get(var, default)
    return name if os.path.isabs(name) else paths.guest(name)


KERNEL = _kernel("VSRIOV_TEST_KERNEL", "vmlinuz-test")
LOCKDEP_KERNEL = _kernel("VSRIOV_TEST_LOCKDEP_KERNEL", "vmlinuz-lockdep")

# The driver's deadline for an administration command (virtio_pci's
# VIRTIO_ADMIN_CMD_TIMEOUT), and what a timed-out command may take beyond
# it under TCG (the guest's own timer and scheduling).
DEADLINE = 10
MARGIN = 3
# What "answers at once" means here, for a guest command timed in the guest.
PROMPT = 1.0
NEVER = 4294967295

LIST_QUERY, LIST_USE = 0x0, 0x1
CAP_ID_LIST_QUERY, DEVICE_CAP_GET, DRIVER_CAP_SET = 0x7, 0x8, 0x9
# A member's configuration object: QUERY (0xc) without and with its
# counters, MODIFY (0xb); trace() names them by opcode and flags.
CFG_GET, STATS_GET, CFG_SET = 0xc00, 0xc01, 0xb00
PREPARE = 0x12
VIRTIO_NET_F_STATUS = 16
VIRTIO_NET_F_ADMIN_MAC = 71

UPTIME = "cut -d' ' -f1 /proc/uptime"
TRACE = re.compile(r"vsriov_admin_(cmd|done) PF \S+: opcode 0x([0-9a-f]+) flags 0x([0-9a-f]+) "
                   r"(?:member (\d+)|done: status (\d+))")
# The kernel's reports of trouble (KASAN and UBSAN where the kernel has them).
BAD_DMESG = re.compile(r"BUG:|Oops|WARNING:|general protection|Call Trace|KASAN|UBSAN|"
                       r"blocked for more than|hung_task|possible circular locking|"
                       r"possible recursive locking|lock inversion")


def pf_guest(netns, guest_factory, name, delay_ms=0, n=2, kernel=KERNEL, extra_args=(),
             append=""):
    """A guest on @kernel with a PF of @n tap-backed VFs (a 10 Gbit/s link)
    whose device holds back each administration answer @delay_ms, QEMU
    tracing the commands: (guest, PF address, PF netdev)."""
    host = netns(f"vsr-{name[:5]}")
    host_switch(host, n)
    opts = ",speed=10000,duplex=full" + (f",x-sriov-admin-delay={delay_ms}" if delay_ms else "")
    g = guest_factory(name, netns=host.name, kernel=kernel, append=append,
                      qemu_args=vpf_tap_args(n, opts) + ["-trace", "vsriov_admin_*",
                                                         *extra_args])
    pf = g.check(FIND_PF).strip()
    return g, pf, pf_netdev(g, pf)


def timed(g, cmd, timeout=60):
    """Run @cmd in the guest, timed there (/proc/uptime, 10 ms steps):
    (its Result without the timing line, seconds)."""
    res = g.run(f"a=$({UPTIME}); {{ {cmd}; }}; rc=$?; echo \"@elapsed $a $({UPTIME})\"; "
                f"exit $rc", timeout)
    lines = res.stdout.splitlines()
    _, a, b = lines[-1].split()
    res.stdout = "\n".join(lines[:-1])
    return res, float(b) - float(a)


def background(g, cmd, out):
    """Start @cmd in the guest: its output goes to @out.log, and @out gets
    its exit status and guest seconds when it ends."""
    g.check(f"(a=$({UPTIME}); {{ {cmd}; }} > {out}.log 2>&1; "
            f"echo $? $a $({UPTIME}) > {out}.tmp; mv {out}.tmp {out}) > /dev/null 2>&1 &")


def wait_blocked(g, what, timeout=10):
    """Poll until a guest process whose command line has @what sleeps in
    the kernel (state D: uninterruptible, or killable)."""
    g.wait_until(f"for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null | "
                 f"grep -q '{what}' && grep -q '^State:.*D' $p/status && exit 0; done; exit 1",
                 timeout=timeout)


def finished(g, out, timeout):
    """Wait for background()'s @out: (exit status, seconds, its output)."""
    deadline = time.monotonic() + timeout
    while not g.run(f"test -e {out}").ok:
        assert time.monotonic() < deadline, \
            f"the guest's command behind {out} did not end within {timeout} s"
        time.sleep(0.2)
    rc, a, b = g.check(f"cat {out}").split()
    return int(rc), float(b) - float(a), g.check(f"cat {out}.log")


def _op(opcode, flags):
    """The command: its opcode, or for RESOURCE_OBJ_MODIFY/_QUERY (0xb,
    0xc: a member's configuration object) CFG_SET, CFG_GET or STATS_GET."""
    if opcode == 0xb:
        return CFG_SET
    if opcode == 0xc:
        return STATS_GET if flags & 1 else CFG_GET
    return opcode


def trace(g):
    """QEMU's trace so far: [(cmd|done, command, member or status)]."""
    with open(g.qemu_log, errors="replace") as f:
        return [(m[1], _op(int(m[2], 16), int(m[3], 16)),
                 int(m[4] if m[4] is not None else m[5]))
                for m in TRACE.finditer(f.read())]


def count(g, kind, opcode):
    return sum(1 for k, op, _ in trace(g) if k == kind and op == opcode)


def wait_trace(g, kind, opcode, at_least, timeout=60):
    """Poll QEMU's trace until it has @at_least (@kind, @opcode) lines."""
    deadline = time.monotonic() + timeout
    while count(g, kind, opcode) < at_least:
        assert time.monotonic() < deadline, \
            f"QEMU's trace has no {kind} of opcode {opcode:#x} #{at_least} within {timeout} s"
        time.sleep(0.05)


def wait_vfs(g, pf, n, timeout=60):
    g.wait_until(f"ls /sys/bus/pci/devices/{pf}/virtfn{n - 1}/virtio*/net/ 2>/dev/null "
                 f"| grep -q .", timeout=timeout)


def set_delay(g, ms):
    """Change the device's delay at run time."""
    try:
        g.qmp.execute("qom-set", {"path": "/machine/peripheral/pf0",
                                  "property": "x-sriov-admin-delay", "value": ms})
    except Exception as e:
        raise AssertionError(f"QEMU's x-sriov-admin-delay cannot be changed at run time "
                             f"(qom-set), which this test needs: {e}") from None


def dmesg_clean(g):
    dmesg = g.check("dmesg")
    bad = [line for line in dmesg.splitlines() if BAD_DMESG.search(line)]
    assert not bad, "the kernel reported trouble:\n" + "\n".join(bad) + "\n--- dmesg\n" + dmesg


def vf_vlan(g, dev, vf):
    vlans = guest_vfs(g, dev)[vf].get("vlan_list") or [{}]
    return vlans[0].get("vlan", 0)


def test_slow_device_leaves_netlink_answering(netns, guest_factory):
    g, pf, dev = pf_guest(netns, guest_factory, "vfslow", delay_ms=4000)

    # The enable waits for the device (PREPARE, the capability, each VF's
    # configuration: 4 s each) without the RTNL lock.
    background(g, f"echo 2 > /sys/bus/pci/devices/{pf}/sriov_numvfs", "/tmp/enable")
    wait_trace(g, "cmd", PREPARE, 1)
    res, t = timed(g, "ip addr")
    print(f"ip addr while the enable waits for the device: {t:.2f} s")
    assert res.ok, res
    assert t < PROMPT, f"ip addr took {t:.2f} s while the enable waited for the device"
    assert not g.run("test -e /tmp/enable").ok, \
        "the enable had ended before ip addr: it was not timed while the enable waited"
    rc, t, out = finished(g, "/tmp/enable", timeout=120)
    print(f"echo 2 > sriov_numvfs: {t:.2f} s")
    assert rc == 0, f"the enable failed: {out}"
    wait_vfs(g, pf, 2)

    # The driver answers from what it keeps: no command, no wait.
    gets, stats = count(g, "cmd", CFG_GET), count(g, "cmd", STATS_GET)
    for cmd in (f"ip link show {dev}", f"ip -s link show {dev}", "ip addr"):
        res, t = timed(g, cmd)
        print(f"{cmd} with the VFs enabled: {t:.2f} s")
        assert res.ok, res
        assert t < PROMPT, f"{cmd} took {t:.2f} s with a device that takes 4 s per command"
    assert count(g, "cmd", CFG_GET) == gets, "ip link show asked the device for a configuration"
    # (the counters' refresh, which ip -s asked for, runs on its own)
    wait_trace(g, "done", STATS_GET, stats + 2)

    # A SET waits for the device, holding the RTNL lock; the guest answers.
    sets = count(g, "cmd", CFG_SET)
    background(g, f"ip link set {dev} vf 0 vlan 100", "/tmp/set")
    wait_trace(g, "cmd", CFG_SET, sets + 1)
    res, t = timed(g, f"cat /sys/class/net/{dev}/address")
    print(f"a shell command while the SET waits: {t:.2f} s")
    assert res.ok, res
    assert t < PROMPT, f"a shell command took {t:.2f} s while a SET waited"
    res, t = timed(g, "ip addr")
    print(f"ip addr while the SET holds the RTNL lock: {t:.2f} s")
    rc, t, out = finished(g, "/tmp/set", timeout=2 * DEADLINE)
    print(f"ip link set vf 0 vlan 100: {t:.2f} s")
    assert rc == 0, f"the SET failed: {out}"
    assert t > 3, f"the SET took {t:.2f} s: the device did not hold it back, this measured nothing"

    # What it set shows at once, without a command.
    res, t = timed(g, f"ip -d link show {dev}")
    print(f"ip -d link show after the SET: {t:.2f} s")
    assert t < PROMPT and re.search(r"vf 0 .*vlan 100", res.stdout), res
    assert count(g, "cmd", CFG_GET) == gets, "ip link show asked the device for a configuration"
    assert qmp_vfs(g)[0]["config"]["vlan"] == 100


def test_late_answer_after_the_deadline(netns, guest_factory):
    g, pf, dev = pf_guest(netns, guest_factory, "vflate", delay_ms=6000)
    g.check(f"echo 2 > /sys/bus/pci/devices/{pf}/sriov_numvfs", timeout=120)
    wait_vfs(g, pf, 2)

    # The counters' refresh takes the device first; a SET behind it waits
    # 6 + 6 s, more than the driver's deadline.
    stats = count(g, "cmd", STATS_GET)
    g.check(f"ip -s link show {dev} > /dev/null")
    wait_trace(g, "cmd", STATS_GET, stats + 1)
    sets = count(g, "done", CFG_SET)
    res, t = timed(g, f"ip link set {dev} vf 0 vlan 200", timeout=DEADLINE + 30)
    print(f"a SET behind another command of a 6 s device: {t:.2f} s, {res.stderr.strip()}")
    assert not res.ok and "Connection timed out" in res.stderr, \
        f"the SET did not time out (ETIMEDOUT) behind another command: {res}"
    assert DEADLINE - 1 <= t <= DEADLINE + MARGIN, \
        f"the SET gave up after {t:.2f} s, not at the driver's {DEADLINE} s deadline"
    res, t = timed(g, "ip addr")
    assert res.ok and t < PROMPT, f"ip addr took {t:.2f} s after the SET gave up: {res}"

    # The device applies it in its turn; its late answer changes what the
    # driver reports.
    wait_trace(g, "done", CFG_SET, sets + 1)
    assert [s for k, op, s in trace(g) if k == "done" and op == CFG_SET][-1] == 0
    deadline = time.monotonic() + 10
    while not re.search(r"vf 0 .*vlan 200", g.check(f"ip -d link show {dev}")):
        assert time.monotonic() < deadline, \
            "the device's late answer to the SET did not change what ip link show reports"
        time.sleep(0.2)
    assert qmp_vfs(g)[0]["config"]["vlan"] == 200
    assert g.check("echo alive").strip() == "alive"


def test_device_that_never_answers(netns, guest_factory):
    g, pf, dev = pf_guest(netns, guest_factory, "vfnever", kernel=LOCKDEP_KERNEL)
    sysfs = f"/sys/bus/pci/devices/{pf}"
    g.check(f"echo 2 > {sysfs}/sriov_numvfs")
    wait_vfs(g, pf, 2)
    lockdep_saw_nothing(g)
    g.check("echo 5 > /proc/sys/kernel/hung_task_timeout_secs")
    set_delay(g, NEVER)

    # A SET gives up at the deadline; the guest answers meanwhile and after.
    background(g, f"ip link set {dev} vf 0 vlan 300", "/tmp/set")
    wait_blocked(g, "vlan 300")
    res, t = timed(g, f"cat /sys/class/net/{dev}/address")
    assert res.ok and t < PROMPT, f"a shell command took {t:.2f} s while a SET waited: {res}"
    rc, t, out = finished(g, "/tmp/set", timeout=DEADLINE + 30)
    print(f"a SET to a device that never answers: {t:.2f} s, {out.strip()}")
    assert rc != 0 and "Connection timed out" in out, f"the SET did not time out: {out}"
    assert DEADLINE - 1 <= t <= DEADLINE + MARGIN, \
        f"the SET gave up after {t:.2f} s, not at the driver's {DEADLINE} s deadline"
    res, t = timed(g, "ip addr")
    print(f"ip addr after it: {t:.2f} s")
    assert res.ok and t < PROMPT, f"ip addr took {t:.2f} s after the SET gave up: {res}"
    # (the hung-task detector looked at the SET's wait, killable: no report)
    dmesg_clean(g)

    # A SET that is killed while it waits ends at once, and lets the RTNL
    # lock go.
    res, t = timed(g, f"ip link set {dev} vf 1 vlan 5 & p=$!; "
                      f"until grep -q '^State:.*D' /proc/$p/status; do :; done; "
                      f"a=$({UPTIME}); kill -9 $p; wait $p; echo killed $a $({UPTIME})")
    _, a, b = res.stdout.split()[-3:]
    print(f"a waiting SET killed: gone after {float(b) - float(a):.2f} s")
    assert float(b) - float(a) < PROMPT, f"a killed SET took {float(b) - float(a):.2f} s to end"
    res, t = timed(g, "ip addr")
    assert res.ok and t < PROMPT, f"ip addr took {t:.2f} s after the killed SET: {res}"

    # The VFs go; enabling them again gives up at the deadline, and while
    # that PREPARE is unanswered the next enable is refused at once.
    res, t = timed(g, f"echo 0 > {sysfs}/sriov_numvfs")
    print(f"echo 0 > sriov_numvfs with commands abandoned: {t:.2f} s")
    assert res.ok, res
    res, t = timed(g, f"echo 2 > {sysfs}/sriov_numvfs", timeout=DEADLINE + 30)
    print(f"echo 2 > sriov_numvfs to a device that never answers: {t:.2f} s, {res.stderr.strip()}")
    assert not res.ok and "Connection timed out" in res.stderr, res
    assert DEADLINE - 1 <= t <= DEADLINE + MARGIN, \
        f"the enable gave up after {t:.2f} s, not at the driver's {DEADLINE} s deadline"
    res, t = timed(g, f"echo 2 > {sysfs}/sriov_numvfs")
    assert not res.ok and "busy" in res.stderr and t < PROMPT, \
        f"an enable while a PREPARE is unanswered was not refused at once: {res}"

    # A reset of the PF (its driver unbound and bound again) frees what the
    # device still held; the new driver's command lists give up at the
    # deadline, and the guest goes on.
    res, t = timed(g, f"echo {pf} > /sys/bus/pci/drivers/virtio-pci/unbind && "
                      f"echo {pf} > /sys/bus/pci/drivers/virtio-pci/bind", timeout=60)
    print(f"the PF's driver unbound and bound again: {t:.2f} s")
    assert res.ok, res
    g.wait_until(f"ls {sysfs}/virtio*/net/ | grep -q .", timeout=60)
    assert g.check("echo alive").strip() == "alive"
    dmesg_clean(g)
    lockdep_saw_nothing(g)

    # With a device that answers again, the next driver has it all again.
    set_delay(g, 0)
    g.check(f"echo {pf} > /sys/bus/pci/drivers/virtio-pci/unbind && "
            f"echo {pf} > /sys/bus/pci/drivers/virtio-pci/bind")
    g.wait_until(f"ls {sysfs}/virtio*/net/ | grep -q .", timeout=60)
    dev = pf_netdev(g, pf)
    g.check(f"echo 2 > {sysfs}/sriov_numvfs")
    wait_vfs(g, pf, 2)
    g.check(f"ip link set {dev} vf 0 vlan 300")
    assert vf_vlan(g, dev, 0) == 300
    dmesg_clean(g)
    lockdep_saw_nothing(g)


def test_driver_capability_and_self_group(netns, guest_factory):
    g, pf, dev = pf_guest(netns, guest_factory, "vfcap")
    g.check(f"echo 2 > /sys/bus/pci/devices/{pf}/sriov_numvfs")
    wait_vfs(g, pf, 2)

    # At DRIVER_OK each group type gets its command list (self, SR-IOV):
    # LIST_QUERY and LIST_USE twice, before any other command.  The self
    # group's commands are answered OK, DRIVER_CAP_SET among them: the
    # device takes them after the self group's LIST_USE (or, for Linux's
    # mainline, the SR-IOV group's, which this driver does not list them
    # in).
    cmds = [op for k, op, _ in trace(g) if k == "cmd"]
    assert cmds[:4] == [LIST_QUERY, LIST_USE, LIST_QUERY, LIST_USE], \
        f"the driver did not set a command list per group type first: {cmds}"
    done = {op: [s for k, o, s in trace(g) if k == "done" and o == op]
            for op in (CAP_ID_LIST_QUERY, DEVICE_CAP_GET, DRIVER_CAP_SET)}
    print(f"the self group's commands' statuses: {done}")
    for op, statuses in done.items():
        assert statuses and all(s == 0 for s in statuses), \
            f"the capability command {op:#x} was not answered OK: {statuses}"

    # A rate above the driver capability (the PF's 10 Gbit/s) is refused by
    # the driver: no SET reaches the device.
    sets = count(g, "cmd", CFG_SET)
    res = g.run(f"ip link set {dev} vf 1 max_tx_rate 20000")
    assert not res.ok and "Invalid argument" in res.stderr, res
    assert count(g, "cmd", CFG_SET) == sets, "a SET outside the capability reached the device"
    g.check(f"ip link set {dev} vf 1 max_tx_rate 10000")
    assert count(g, "cmd", CFG_SET) == sets + 1
    cmds = [op for k, op, _ in trace(g) if k == "cmd"]
    assert cmds.index(DRIVER_CAP_SET) < cmds.index(CFG_SET), \
        f"a SET went out before DRIVER_CAP_SET: {cmds}"

    # Each link state reads back as set, in the guest and on the device.
    for state in ("disable", "enable", "auto"):
        g.check(f"ip link set {dev} vf 1 state {state}")
        assert guest_vfs(g, dev)[1]["link_state"] == state
        assert qmp_vfs(g)[1]["config"]["link-state"] == state


def test_prepare_zero_after_a_failed_enable(netns, guest_factory):
    """VF BARs too large for the root port's window (4 KiB per queue
    notification) and no reallocation: pci_enable_sriov() fails after the
    device was prepared, which the driver undoes with PREPARE(0)."""
    g, pf, dev = pf_guest(netns, guest_factory, "vfprep", append="pci=realloc=off",
                          extra_args=["-global", "virtio-net-pci.page-per-vq=on"])
    res = g.run(f"echo 2 > /sys/bus/pci/devices/{pf}/sriov_numvfs")
    assert not res.ok and "Cannot allocate memory" in res.stderr, res
    assert "not enough MMIO resources for SR-IOV" in g.check("dmesg"), \
        "the enable did not fail for want of VF BAR space: this tests nothing"
    prepares = [s for k, op, s in trace(g) if k == "done" and op == PREPARE]
    assert prepares == [0, 0], \
        f"PREPAREs answered: {prepares}, not the enable's and the PREPARE(0) after its failure"


def test_admin_mac_without_status_is_turned_off(netns, guest_factory):
    g, pf, dev = pf_guest(netns, guest_factory, "vfamac", n=1)
    g.check(f"echo 1 > /sys/bus/pci/devices/{pf}/sriov_numvfs")
    wait_vfs(g, pf, 1)
    vdev = os.path.basename(vf0_virtio(g, pf))
    g.run("mount -t debugfs none /sys/kernel/debug 2>/dev/null")
    debug = f"/sys/kernel/debug/virtio/{vdev}"
    assert g.run(f"test -e {debug}/filter_feature_add").ok, \
        "the kernel has no virtio debugfs (CONFIG_VIRTIO_DEBUG): the test cannot hide a feature"
    # The VF's driver sees its device offer ADMIN_MAC without STATUS.
    g.check(f"echo {VIRTIO_NET_F_STATUS} > {debug}/filter_feature_add && "
            f"echo {vdev} > /sys/bus/virtio/drivers/virtio_net/unbind")
    res = g.run(f"echo {vdev} > /sys/bus/virtio/drivers/virtio_net/bind")
    assert res.ok, f"the VF's driver did not probe a device offering ADMIN_MAC without STATUS: {res}"
    g.wait_until(f"ls /sys/bus/virtio/devices/{vdev}/net/ | grep -q .", timeout=30)
    features = g.check(f"cat /sys/bus/virtio/devices/{vdev}/features").strip()
    assert features[VIRTIO_NET_F_STATUS] == "0" and features[VIRTIO_NET_F_ADMIN_MAC] == "0", \
        features
    assert "VIRTIO_NET_F_ADMIN_MAC but not" in g.check("dmesg")
