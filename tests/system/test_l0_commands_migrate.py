# SPDX-License-Identifier: GPL-2.0-or-later
"""Level 0: whatever a guest's driver sends, its VM still migrates (issue
36: "a guest can make a migration fail ... test every command outcome,
failed ones included, followed by a migration").

Two QEMUs at a time run no guest code (-accel qtest, test_l0_eswitch_
migration's Vm: a switchdev-capable PF on a static pool with
representor backends); tests/harness/qtest_pci.py plays a hostile PF
driver.  Each round sets a state a driver would (VFs enabled, a VLAN, a MAC,
switchdev mode, a representor, a flow group) between random
administration commands (our opcodes
and group types mostly, random members, lengths and payloads: every
outcome, from OK to each refusal, and eswitch, representor and flow
objects made and refused) mixed with random writes over the SR-IOV
capability (VF Enable and NumVFs among them), then migrates to a fresh
QEMU, which runs the next round.  Each migration completes; the
destination shows what the source showed (query-vsriov, the SR-IOV
capability's bytes, the flow objects' QUERY) and its driver's commands
are answered."""
import random
import struct

import pytest

from harness.qtest_pci import GROUP_SELF, GROUP_SRIOV, IN_BUF, Admin, QtestPci, Ring
from system.test_l0_eswitch_migration import F2_ESWITCH, F_CTRL_VQ, GROUP, QUERY, REP0_RX, Vm

pytestmark = pytest.mark.slow

ROUNDS, OPS = 4, 300
SRIOV_CAP_LEN = 0x40
OBJ_TYPES = (0x200, 0x201, 0x202, 0x205, 0x206)


def sriov_bytes(q):
    cap = q.sriov_cap()
    return bytes(q.read(1, 0, cap + off, 1) for off in range(SRIOV_CAP_LEN))


def objects(a):
    """{(type, id): QUERY's (status, data)} of ids 0-3 of each type."""
    return {(t, i): a.run(QUERY, GROUP_SELF, 0, struct.pack("<HxxIQ", t, i, 0))
            for t in OBJ_TYPES for i in range(4)}


def valid_state(a, q, r):
    """What a driver sets that the migration must carry: both VFs
    enabled, VF 0's VLAN, VF 1's MAC, switchdev mode, representor 0 and
    a group (each may be there already: then refused, and kept)."""
    a.use(GROUP_SELF)
    a.use(GROUP_SRIOV)
    q.set_vfs(0)
    q.set_vfs(2)
    assert a.set_vlan(0, 10 + r)[2] == 0
    assert a.set_mac(1, bytes([2, 0, 0, 0, 0x5a, r]))[2] == 0
    a.run(0xA, GROUP_SELF, 0, struct.pack("<HxxIQQ", 0x205, 0, 0, 0))
    a.run(0xA, GROUP_SELF, 0, struct.pack("<HxxIQHHIQ", 0x206, 0, 0, 0, 0, 1, 0))
    a.run(0xA, GROUP_SELF, 0, struct.pack("<HxxIQ", 0x200, 3, 0) + GROUP)


def hostile(rnd, a, q, statuses):
    cap = q.sriov_cap()
    for _ in range(OPS // 2):
        if rnd.randrange(4) == 3:
            size = rnd.choice((1, 2, 4))
            q.write(1, 0, cap + rnd.randrange(-8, SRIOV_CAP_LEN),
                    size, rnd.getrandbits(8 * size))
            continue
        opcode = rnd.randrange(0x18)
        group = rnd.randrange(3)
        member = rnd.randrange(4)
        data = bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(0, 48)))
        if opcode in (0xA, 0xC, 0xD) and len(data) >= 2 and rnd.randrange(2):
            # an object type of ours, to get past the first check
            data = struct.pack("<H", rnd.choice(OBJ_TYPES)) + data[2:]
        st, _ = a.run(opcode, group, member, data)
        qualifier = struct.unpack("<H", bytes.fromhex(q.cmd(f"read {IN_BUF + 2:#x} 2")[2:]))[0]
        statuses[st, qualifier] = statuses.get((st, qualifier), 0) + 1


def state(vm, a, q):
    pf = vm.pf()
    return pf, sriov_bytes(q), objects(a)


def test_random_commands_then_migration(tmp_path):
    tmp = str(tmp_path)
    rnd = random.Random(0x5647)
    src = Vm(tmp, "m0")
    vms = [src]
    statuses = {}
    try:
        q = QtestPci(src.qt_path)
        q.set_vfs(2)
        rx = Ring(REP0_RX, 0x200000)
        a = Admin(q, features=1 << F_CTRL_VQ, features2=F2_ESWITCH, rings=[rx])
        a.use(GROUP_SELF)
        carried = []
        for r in range(ROUNDS):
            hostile(rnd, a, q, statuses)
            valid_state(a, q, r)
            hostile(rnd, a, q, statuses)
            before = state(src, a, q)
            carried.append(before[0]["eswitch-mode"])
            dst = Vm(tmp, f"m{r + 1}", incoming=True)
            vms.append(dst)
            dst.qmp("migrate-incoming", uri=f"unix:{tmp}/mig{r}.sock")
            src.qmp("migrate", uri=f"unix:{tmp}/mig{r}.sock")
            assert src.wait_migration({"completed", "failed"}) == "completed", \
                f"round {r}: the migration failed\n--- source\n{src.tail()}" \
                f"\n--- destination\n{dst.tail()}"
            assert dst.wait_migration({"completed", "failed"}) == "completed", dst.tail()
            src.stop()
            # the driver goes on with the destination
            q = QtestPci(dst.qt_path)
            a.q = q
            after = state(dst, a, q)
            assert after[0] == before[0], f"round {r}: query-vsriov differs"
            assert after[1] == before[1], \
                f"round {r}: the SR-IOV capability differs:\n{before[1].hex()}\n{after[1].hex()}"
            assert after[2] == before[2], f"round {r}: the flow and eswitch objects differ"
            src = dst
        # the state that the hostile commands left crossed: switchdev
        # mode at least once
        assert "switchdev" in carried, carried
        # every outcome was seen: OK and refusals of several kinds
        print(f"(status, qualifier): commands: {statuses}")
        assert statuses.get((0, 0), 0) > 0 and len(statuses) >= 4, statuses
        # and the destination's driver is answered: its lists again, a
        # VF's VLAN with VFs enabled
        a.use(GROUP_SELF)
        a.use(GROUP_SRIOV)
        q.set_vfs(0)
        q.set_vfs(2)
        assert a.set_vlan(1, 7)[2] == 0
        assert src.pf()["vfs"][1]["config"]["vlan"] == 7
    finally:
        for vm in vms:
            vm.stop()
