# SPDX-License-Identifier: GPL-2.0-or-later
"""Level 0: a user's guest on a stock distribution kernel (issue 33).

One guest per kernel that scripts/guest/fetch-stock-kernels fetched:
Debian 12's, Debian 13's and the newest Debian ships, each booted on the
virtual PF with a pool of two taps on a host bridge (test_l0_vpf's
set-up), and QEMU tracing every administration command.  On each:

- the PF comes up under virtio-pci and virtio_net;
- where the kernel has an administration virtqueue (Linux 6.8 and
  newer) it negotiates VIRTIO_F_ADMIN_VQ and every command its
  virtio_pci sends at probe is answered OK by QEMU; an older kernel
  negotiates nothing of it and sends none;
- `echo 2 > sriov_numvfs` gives two VFs bound to virtio_net, which ping
  each other from two network namespaces through the host bridge (the
  taps' counters move);
- `echo 0 > sriov_numvfs` gives the VFs back: QMP shows them disabled
  and their backends free in the pool (a lazy pool, whose VFs hold
  backends only while enabled, so that giving them back shows);
- the kernel log has no warning, oops, BUG, call trace, nor a refused
  or failed command (checked last, so that a kernel failing only this
  has had everything else checked).

The kernels are fetched by the build, not here: one that could not be
fetched fails its test with the build's reason.

Linux 7.x's virtio_pci asks for the self group's capabilities
(CAP_ID_LIST_QUERY) only if the SR-IOV group's command list has them: the
PF lists them there too and takes them for the self group (admin.c's
admin_enabled()), so that kernel probes with no failed command."""
import re
import time

import pytest

from harness import stock
from system.guest_net import FIND_PF, enable_vfs, vf_into_netns
from system.test_l0_vpf import host_switch, vpf_tap_args

pytestmark = pytest.mark.slow

NUM_VFS = 2
# The administration virtqueue came with Linux 6.8 ("virtio-pci:
# Introduce admin virtqueue"); older kernels do not know the feature bit.
ADMIN_VQ_SINCE = (6, 8)
VIRTIO_F_ADMIN_VQ = 41
ADMIN_OPCODES = {0x0: "LIST_QUERY", 0x1: "LIST_USE", 0x7: "CAP_ID_LIST_QUERY",
                 0x8: "DEVICE_CAP_GET", 0x9: "DRIVER_CAP_SET"}
# Kernel log lines that fail the test: the kernel's own reports of trouble,
# and a virtio or PCI message of failure or refusal.
BAD_DMESG = re.compile(r"WARNING:|Oops|BUG:|Call Trace|general protection|cut here|"
                       r"(virtio|pci|sriov).*(fail|refus|error)", re.IGNORECASE)
# virtio_pci's messages for an administration command that failed
# (vp_modern_admin_cmd_exec(): "Failed to execute command on admin vq: %d",
# "admin command error: status(%#x) qualifier(%#x)"), reported apart.
ADMIN_CMD_FAILED = re.compile(r"Failed to execute command on admin vq|admin command error")
class AdminCommandFailed(AssertionError):
    """The guest's virtio_pci logged an administration command as failed."""


TRACE_CMD = re.compile(r"vsriov_admin_cmd PF (\S+): opcode 0x([0-9a-f]+) flags 0x[0-9a-f]+ "
                       r"member (\d+)")
TRACE_DONE = re.compile(r"vsriov_admin_done PF (\S+): opcode 0x([0-9a-f]+) flags 0x[0-9a-f]+ done: "
                        r"status (\d+) qualifier 0x([0-9a-f]+)")


def admin_trace(path):
    """The administration commands QEMU traced, in order: a list of
    (opcode, status, qualifier), status None for one not (yet) answered."""
    cmds = []
    with open(path, errors="replace") as f:
        for line in f:
            m = TRACE_CMD.search(line)
            if m:
                cmds.append([int(m.group(2), 16), None, None])
                continue
            m = TRACE_DONE.search(line)
            if m:
                op = int(m.group(2), 16)
                pending = [c for c in cmds if c[0] == op and c[1] is None]
                assert pending, f"QEMU traced an answer to opcode {op:#x} it never took: {line}"
                pending[0][1:] = [int(m.group(3)), int(m.group(4), 16)]
    return [tuple(c) for c in cmds]


def describe(cmds):
    return ", ".join(f"{ADMIN_OPCODES.get(op, hex(op))} -> "
                     + ("no answer" if st is None else f"status {st} qualifier {q:#x}")
                     for op, st, q in cmds) or "none"


def bound_drivers(g, dev):
    """[PCI driver, virtio driver] of PCI function @dev (a sysfs folder),
    "none" for each not bound."""
    return g.check(f"for d in {dev}/driver {dev}/virtio*/driver; do "
                   f"if [ -e $d ]; then basename $(readlink $d); else echo none; fi; "
                   f"done").split()


def wait_bound(g, pf, i, k, timeout=30):
    """Wait until VF @i of @pf is bound to virtio-pci and virtio_net."""
    vf = f"/sys/bus/pci/devices/{pf}/virtfn{i}"
    try:
        g.wait_until(f"test -e {vf}/driver && test -e {vf}/virtio*/driver", timeout=timeout)
    except AssertionError:
        pass
    drivers = bound_drivers(g, vf) if g.run(f"test -e {vf}").ok else ["no VF"] * 2
    assert drivers == ["virtio-pci", "virtio_net"], \
        (f"{k}: VF {i} is not bound to virtio-pci and virtio_net {timeout} s after VF "
         f"Enable: PCI driver {drivers[0]}, virtio driver {drivers[1]}.")


def lazy_pool_args(n):
    """test_l0_vpf's PF and tap pool, the pool lazy."""
    return [a.replace("vsriov-pool,id=p0,", "vsriov-pool,id=p0,lazy=on,")
            for a in vpf_tap_args(n)]


def pool_holders(g):
    """(free, [who holds each backend]) of the pool, from QMP."""
    (pool,) = g.qmp.execute("query-vsriov-pools")
    assert pool["lazy"], pool
    return pool["free"], [e.get("claimed-by") for e in pool["entries"]]


def tap_counters(host, taps):
    """{tap: (rx_packets, tx_packets)} on the host side."""
    out = host.run(" ; ".join(f"echo {t} $(cat /sys/class/net/{t}/statistics/rx_packets) "
                              f"$(cat /sys/class/net/{t}/statistics/tx_packets)"
                              for t in taps)).stdout
    return {t: (int(rx), int(tx)) for t, rx, tx in (ln.split() for ln in out.splitlines())}


def vfs_ping_through_taps(g, host, pf, subnet, what):
    """VFs 0 and 1 of @pf in namespaces a and b (@subnet.1 and .2) ping
    each other through the host bridge: each request leaves through VF
    0's tap and reaches VF 1 through VF 1's, each reply the other way."""
    vf_into_netns(g, pf, 0, "a", f"{subnet}.1/24")
    vf_into_netns(g, pf, 1, "b", f"{subnet}.2/24")
    g.wait_until("ip -n a link show pod0 | grep -q LOWER_UP && "
                 "ip -n b link show pod0 | grep -q LOWER_UP", timeout=30)
    taps = ["tvf0", "tvf1"]
    before = tap_counters(host, taps)
    res = g.run(f"ip netns exec a ping -c 3 -W 5 {subnet}.2", timeout=60)
    assert res.ok and " 0% packet loss" in res.stdout, \
        f"{what}: VF 0 did not reach VF 1 through the host bridge:\n{res}"
    after = tap_counters(host, taps)
    for t in taps:
        rx, tx = (after[t][j] - before[t][j] for j in (0, 1))
        assert rx >= 3 and tx >= 3, \
            f"{what}: the ping did not pass through host tap {t} (rx {rx}, tx {tx} packets)"


@pytest.mark.parametrize("name", ["debian12", "debian13", "newest"])
def test_stock_kernel_on_the_virtual_pf(name, netns, guest_factory, artifacts):
    missing = stock.why_missing(name)
    if missing:
        pytest.fail(missing, pytrace=False)
    k = stock.kernel(name)
    has_admin_vq = k.release >= ADMIN_VQ_SINCE
    trace = f"{artifacts}/{name}-trace.log"

    host = netns("vsr-stk")
    host_switch(host, NUM_VFS)
    t0 = time.monotonic()
    g = guest_factory(name, netns=host.name, kernel=k.kernel, initrd=k.initrd,
                      qemu_args=lazy_pool_args(NUM_VFS) +
                      ["-trace", f"enable=vsriov_admin_*,file={trace}"])
    boot = time.monotonic() - t0
    assert g.check("uname -r").strip() == k.kver, f"the guest did not boot {k}"

    # The PF, under virtio-pci and virtio_net.
    pf = g.check(FIND_PF).strip()
    assert pf, f"{k}: no PCI function with SR-IOV in the guest"
    drivers = bound_drivers(g, f"/sys/bus/pci/devices/{pf}")
    assert drivers == ["virtio-pci", "virtio_net"], f"{k}: the PF's drivers are {drivers}"

    # Its administration virtqueue: negotiated, and what virtio_pci sent at
    # probe all answered OK by QEMU (virtio_net's probe ended before the
    # agent started, so the commands are in the trace).
    features = g.check(f"cat /sys/bus/pci/devices/{pf}/virtio*/features").strip()
    negotiated = len(features) > VIRTIO_F_ADMIN_VQ and features[VIRTIO_F_ADMIN_VQ] == "1"
    probe_cmds = admin_trace(trace)
    print(f"{name}: {k}: agent ready {boot:.1f} s after QEMU started; "
          f"VIRTIO_F_ADMIN_VQ negotiated: {negotiated}; "
          f"administration commands at probe: {describe(probe_cmds)}")
    if has_admin_vq:
        assert negotiated, f"{k} did not negotiate VIRTIO_F_ADMIN_VQ (features {features})"
        assert [op for op, _, _ in probe_cmds[:2]] == [0x0, 0x1], \
            f"{k}'s virtio_pci did not list and use the commands first: {describe(probe_cmds)}"
        refused = [c for c in probe_cmds if c[1] != 0]
        assert not refused, (f"QEMU did not answer every administration command {k} sent "
                             f"at probe with OK: {describe(probe_cmds)}")
    else:
        assert not negotiated and not probe_cmds, \
            (f"{k} has no administration virtqueue, yet it negotiated VIRTIO_F_ADMIN_VQ "
             f"({negotiated}) or sent commands: {describe(probe_cmds)}")

    # Two VFs, bound to virtio_net, passing traffic through the host bridge.
    t1 = time.monotonic()
    g.check(f"echo {NUM_VFS} > /sys/bus/pci/devices/{pf}/sriov_numvfs")
    for i in range(NUM_VFS):
        wait_bound(g, pf, i, k)
    g.wait_until(" && ".join(f"ls /sys/bus/pci/devices/{pf}/virtfn{i}/virtio*/net/ | grep -q ."
                             for i in range(NUM_VFS)), timeout=30)
    enable = time.monotonic() - t1
    ev = g.qmp.wait_event("VSRIOV_VFS_CHANGED", timeout=30)
    assert ev["data"]["num-vfs"] == NUM_VFS
    (pf_info,) = g.qmp.execute("query-vsriov")
    assert [vf["state"] for vf in pf_info["vfs"]] == ["enabled"] * NUM_VFS
    assert pool_holders(g) == (0, [f"/machine/peripheral/pf0/vf[{i}]" for i in range(NUM_VFS)])
    vfs_ping_through_taps(g, host, pf, "10.33.0", k)

    # The VFs go back.
    g.check("ip netns del a && ip netns del b")
    enable_vfs(g, pf, 0)
    ev = g.qmp.wait_event("VSRIOV_VFS_CHANGED", timeout=30)
    assert ev["data"]["num-vfs"] == 0
    g.wait_until(f"! ls -d /sys/bus/pci/devices/{pf}/virtfn0 2>/dev/null", timeout=30)
    (pf_info,) = g.qmp.execute("query-vsriov")
    assert [vf["state"] for vf in pf_info["vfs"]] == ["disabled"] * NUM_VFS, pf_info
    free, holders = pool_holders(g)
    assert free == NUM_VFS and holders == [None] * NUM_VFS, \
        f"{k}: the disabled VFs' backends did not go back to the pool: held by {holders}"
    cmds = admin_trace(trace)
    print(f"{name}: VF Enable to both VFs' netdevs {enable:.1f} s; all administration "
          f"commands: {describe(cmds)}")
    assert all(st == 0 for _, st, _ in cmds), \
        f"QEMU did not answer every administration command of {k} with OK: {describe(cmds)}"

    # A clean kernel log (and every module of the initramfs loaded), last:
    # whatever it finds, everything above was checked.
    dmesg = g.check("dmesg")
    with open(f"{artifacts}/{name}-dmesg.log", "w") as f:
        f.write(dmesg)
    with open(g.console_log, errors="replace") as f:
        insmod = [ln for ln in f if "vsriov-init: insmod" in ln]
    assert not insmod, f"{k}: modules of the initramfs did not load:\n" + "".join(insmod)
    bad = [ln for ln in dmesg.splitlines()
           if BAD_DMESG.search(ln) and not ADMIN_CMD_FAILED.search(ln)]
    assert not bad, f"{k}'s kernel log reports trouble:\n" + "\n".join(bad)
    failed_cmds = [ln for ln in dmesg.splitlines() if ADMIN_CMD_FAILED.search(ln)]
    if failed_cmds:
        raise AdminCommandFailed(f"{k}'s virtio_pci logged failed administration commands "
                                 f"(QEMU took: {describe(admin_trace(trace))}):\n"
                                 + "\n".join(failed_cmds))
