# SPDX-License-Identifier: GPL-2.0-or-later
"""A guest's SR-IOV writes, made through QEMU's qtest protocol.

QEMU started with `-accel qtest -qtest unix:SOCK,server=on,wait=off` runs no
guest code: this client plays the guest's PCI core, the way the C qtests'
vsriov-pcie.h does (ECAM enabled in the q35 MCH, a root port given bus 1),
so the host side of VF Enable can be driven and timed in places where
libqos is not built (Level 1).  It also plays the PF driver's side of the
administration virtqueue (Admin: a split virtqueue of its own in guest
memory, as tests/qtest/vsriov-admin-test.c has it), through which the VFs
are configured.  Standard library only: it runs in Level 1.

    python3 qtest_pci.py SOCK vfs N          NumVFs = N and VF Enable (0: clear), each
                                             VF reset as its driver would
    python3 qtest_pci.py SOCK vlan VF VID    VF's VLAN (RESOURCE_OBJ_MODIFY)
    python3 qtest_pci.py SOCK mac VF MAC     VF's MAC (RESOURCE_OBJ_MODIFY)
"""
import struct
import socket
import sys
import time

ECAM = 0xB0000000
MCH_PCIEXBAR = 0x60
SRIOV_CAP_ID = 0x10
SRIOV_CTRL, SRIOV_TOTAL_VF, SRIOV_NUM_VF = 0x08, 0x0E, 0x10
VFE = 0x1
CLASS_REVISION = 0x08
# the administration virtqueue (docs/vf-config-channel.md, admin.h)
PCI_COMMAND, CMD_MEMORY_MASTER = 0x04, 0x6
PCI_CAP_LIST, CAP_ID_VNDR = 0x34, 0x09
PREF_BASE, PREF_LIMIT, PREF_BASE_HI, PREF_LIMIT_HI = 0x24, 0x26, 0x28, 0x2C
BAR_BASE = 0xC0000000
COMMON_CFG, NOTIFY_CFG, PCI_CFG = 1, 2, 5
S_NEEDS_RESET = 0x40
C_DFSELECT, C_DF, C_GFSELECT, C_GF, C_STATUS = 0, 4, 8, 12, 20
C_Q_SELECT, C_Q_SIZE, C_Q_ENABLE, C_Q_NOFF = 22, 24, 28, 30
C_Q_DESC, C_Q_AVAIL, C_Q_USED, C_ADM_Q_IDX = 32, 40, 48, 60
F_VERSION_1, F_ADMIN_VQ = 32, 41
S_ACK, S_DRIVER, S_DRIVER_OK, S_FEATURES_OK = 1, 2, 4, 8
QSIZE, DESC, AVAIL, USED, OUT_BUF, IN_BUF = 16, 0x100000, 0x101000, 0x102000, 0x110000, 0x111000
GROUP_SELF, GROUP_SRIOV, CMD_LIST_QUERY, CMD_LIST_USE = 0, 1, 0, 1
CMD_DEVICE_CAP_GET, CMD_DRIVER_CAP_SET = 0x8, 0x9
# A VF's member configuration object: RESOURCE_OBJ_MODIFY of the SR-IOV group
CMD_RESOURCE_OBJ_MODIFY, OBJ_MEMBER_CFG, MEMBER_CFG_CAP = 0xB, 0x0207, 0x0805
CMD_RESOURCE_OBJ_QUERY = 0xC
FIELD_MAC, FIELD_VLAN = 1 << 0, 1 << 1


class QtestError(Exception):
    pass


class QtestPci:
    def __init__(self, path, root_slot=2, timeout=60):
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.sock = socket.socket(socket.AF_UNIX)
                self.sock.connect(path)
                break
            except OSError:
                self.sock.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)  # QEMU creates the socket when it starts
        self.f = self.sock.makefile("rw")
        self.slot = root_slot
        self.write_s = self.wait_worst_s = 0.0
        self.vf_states = []
        self._caps = {}
        self._init_ecam()

    def cmd(self, line):
        self.f.write(line + "\n")
        self.f.flush()
        while True:
            r = self.f.readline()
            if not r:
                raise QtestError(f"QEMU closed the qtest connection after {line!r}")
            if r.startswith("IRQ"):
                continue
            if not r.startswith("OK"):
                raise QtestError(f"{line!r}: {r.strip()}")
            return r.split()[1] if len(r.split()) > 1 else None

    def _ecam(self, bus, devfn, off):
        return ECAM + (bus << 20) + (devfn << 12) + off

    def read(self, bus, devfn, off, size):
        return int(self.cmd(f"read{'bwl'[size >> 1]} {self._ecam(bus, devfn, off):#x}"), 16)

    def write(self, bus, devfn, off, size, val):
        self.cmd(f"write{'bwl'[size >> 1]} {self._ecam(bus, devfn, off):#x} {val:#x}")

    def _init_ecam(self):
        def cf8(off):
            return 0x80000000 | (off & 0xFC)
        self.cmd(f"outl 0xcf8 {cf8(MCH_PCIEXBAR + 4):#x}")
        self.cmd("outl 0xcfc 0x0")
        self.cmd(f"outl 0xcf8 {cf8(MCH_PCIEXBAR):#x}")
        self.cmd(f"outl 0xcfc {ECAM | 1:#x}")
        if self.read(0, 0, 0, 2) != 0x8086:
            raise QtestError("ECAM not reachable: not a q35 machine?")
        port = self.slot << 3
        self.write(0, port, 0x18, 1, 0)  # primary bus
        self.write(0, port, 0x19, 1, 1)  # secondary bus
        self.write(0, port, 0x1A, 1, 1)  # subordinate bus

    def ext_cap(self, bus, devfn, cap_id):
        pos, guard = 0x100, 480
        while pos and guard:
            hdr = self.read(bus, devfn, pos, 4)
            if hdr in (0, 0xFFFFFFFF):
                return 0
            if hdr & 0xFFFF == cap_id:
                return pos
            pos, guard = hdr >> 20, guard - 1
        return 0

    def sriov_cap(self):
        cap = self.ext_cap(1, 0, SRIOV_CAP_ID)
        if not cap:
            raise QtestError("the PF at 01:00.0 has no SR-IOV capability")
        return cap

    def set_vfs(self, n, cap=None, timeout=60):
        """NumVFs = n and VF Enable (n = 0: VF Enable cleared), then what a
        driver does with each VF: reset it and wait until the reset
        completes (a VF whose backend is on its way holds it), as Linux's
        virtio_pci does.  Returns the seconds until all are done (or VF
        Enable did not take) and whether VF Enable took; self.vf_states
        says per VF "ready" (it offers VIRTIO_F_VERSION_1), "failed" (it
        offers nothing: its backend did not come) or "absent";
        self.write_s is how long the VF Enable write itself took (its
        qtest round trip: what it held the vCPU), self.wait_worst_s the
        longest round trip of a read while waiting (the longest QEMU's
        main loop, and the BQL, was held meanwhile)."""
        cap = cap or self.sriov_cap()
        self.write(1, 0, cap + SRIOV_CTRL, 2, 0)
        self.write_s = self.wait_worst_s = 0.0
        self.vf_states = []
        if not n:
            return 0.0, False
        self.write(1, 0, cap + SRIOV_NUM_VF, 2, n)
        t0 = time.perf_counter()
        self.write(1, 0, cap + SRIOV_CTRL, 2, VFE)
        self.write_s = time.perf_counter() - t0
        if not self.read(1, 0, cap + SRIOV_CTRL, 2) & VFE:
            return time.perf_counter() - t0, False
        for i in range(n):
            self.vf_states.append(self.vf_reset(i, deadline=t0 + timeout))
        return time.perf_counter() - t0, True

    def virtio_cap(self, bus, devfn, cfg_type):
        """Offset of the virtio PCI capability of @cfg_type, or 0."""
        pos = self.read(bus, devfn, PCI_CAP_LIST, 1) & ~3
        while pos:
            if (self.read(bus, devfn, pos, 1) == CAP_ID_VNDR and
                    self.read(bus, devfn, pos + 3, 1) == cfg_type):
                return pos
            pos = self.read(bus, devfn, pos + 1, 1) & ~3
        return 0

    def _window(self, bus, devfn, off, size):
        """The PCI configuration access window of the device set to @size
        bytes at @off of its common configuration; returns the offset of
        its data.  (The capabilities' places are the same for every VF.)"""
        key = (bus, devfn)
        if key not in self._caps:
            common = self.virtio_cap(bus, devfn, COMMON_CFG)
            self._caps[key] = (self.virtio_cap(bus, devfn, PCI_CFG),
                               self.read(bus, devfn, common + 4, 1),
                               self.read(bus, devfn, common + 8, 4))
        win, bar, base = self._caps[key]
        self.write(bus, devfn, win + 4, 1, bar)
        self.write(bus, devfn, win + 8, 4, base + off)
        self.write(bus, devfn, win + 12, 4, size)
        return win + 16

    def common(self, bus, devfn, off, size, val=None):
        """Read (or write @val to) the common configuration through the
        PCI configuration access capability: no BAR needs to be mapped."""
        data = self._window(bus, devfn, off, size)
        if val is None:
            return self.read(bus, devfn, data, size)
        self.write(bus, devfn, data, size, val)
        return None

    def vf_reset(self, i, deadline):
        """VF @i reset as a driver resets it: device_status written 0, then
        read until it reads 0.  Returns its state then (set_vfs())."""
        if not self.vf_present(i):
            return "absent"
        self.common(1, i + 1, C_STATUS, 1, 0)
        while True:
            data = self._window(1, i + 1, C_STATUS, 1)
            t1 = time.perf_counter()
            status = self.read(1, i + 1, data, 1)
            self.wait_worst_s = max(self.wait_worst_s, time.perf_counter() - t1)
            if not status:
                break
            if time.perf_counter() > deadline:
                raise QtestError(f"VF {i}: its reset did not complete (status "
                                 f"{status:#x})")
            time.sleep(0.002)
        self.common(1, i + 1, C_DFSELECT, 4, F_VERSION_1 // 32)
        offered = self.common(1, i + 1, C_DF, 4)
        return "ready" if offered & (1 << (F_VERSION_1 % 32)) else "failed"

    def disable_timed(self, cap=None):
        cap = cap or self.sriov_cap()
        t0 = time.perf_counter()
        self.write(1, 0, cap + SRIOV_CTRL, 2, 0)
        return time.perf_counter() - t0

    def admin(self):
        """The PF's administration virtqueue, set up as a driver would."""
        return Admin(self)

    def vf_present(self, index):
        return self.read(1, index + 1, CLASS_REVISION, 4) != 0xFFFFFFFF


class Admin:
    """The PF driver's side of the administration virtqueue: the virtio PCI
    structures found, the PF's BARs placed in the root port's window,
    VIRTIO_F_ADMIN_VQ negotiated, the queue set up, the SR-IOV group's
    commands taken into use (LIST_QUERY, LIST_USE), and the members'
    configuration capability set to what the device offers (DEVICE_CAP_GET,
    DRIVER_CAP_SET), as Linux's driver does."""

    def __init__(self, q, features=0, features2=0, rings=()):
        """@features (bits 0..63) and @features2 (64..95) besides
        VERSION_1 and ADMIN_VQ; @rings: the device's other queues to set up
        before DRIVER_OK (Ring)."""
        self.q = q
        self._map()
        self._find()
        self._start(features, features2, rings)
        self.use(GROUP_SRIOV)
        self.member_cap()

    def use(self, group):
        """LIST_QUERY, then LIST_USE of all of it, for @group."""
        st, res = self.run(CMD_LIST_QUERY, group, 0)
        if st:
            raise QtestError(f"LIST_QUERY: status {st}")
        st, _ = self.run(CMD_LIST_USE, group, 0, res[:8])
        if st:
            raise QtestError(f"LIST_USE: status {st}")

    def member_cap(self):
        """DRIVER_CAP_SET of the members' configuration capability, all of
        what DEVICE_CAP_GET offers: the objects can be used from then on."""
        cap_id = struct.pack("<H6x", MEMBER_CFG_CAP)
        st, cap = self.run(CMD_DEVICE_CAP_GET, GROUP_SELF, 0, cap_id)
        if st:
            raise QtestError(f"DEVICE_CAP_GET: status {st}")
        st, _ = self.run(CMD_DRIVER_CAP_SET, GROUP_SELF, 0, cap_id + cap[:16])
        if st:
            raise QtestError(f"DRIVER_CAP_SET: status {st}")

    def _map(self):
        q, port = self.q, self.q.slot << 3
        q.write(0, port, PREF_BASE, 2, (BAR_BASE >> 16) & 0xFFF0)
        q.write(0, port, PREF_LIMIT, 2, ((BAR_BASE + 0x7FFFFFF) >> 16) & 0xFFF0)
        q.write(0, port, PREF_BASE_HI, 4, 0)
        q.write(0, port, PREF_LIMIT_HI, 4, 0)
        q.write(0, port, PCI_COMMAND, 2, CMD_MEMORY_MASTER)
        for bar in range(0, 6, 2):
            reg = 0x10 + bar * 4
            v = q.read(1, 0, reg, 4)
            if v & 0x4 and v & 0x8:     # 64-bit, prefetchable: the modern BAR
                q.write(1, 0, reg, 4, BAR_BASE + (bar // 2) * 0x1000000)
                q.write(1, 0, reg + 4, 4, 0)
        q.write(1, 0, PCI_COMMAND, 2, CMD_MEMORY_MASTER)

    def _cap_addr(self, cap):
        bar = self.q.read(1, 0, cap + 4, 1)
        return BAR_BASE + (bar // 2) * 0x1000000 + self.q.read(1, 0, cap + 8, 4)

    def _find(self):
        q = self.q
        self.common = self.notify = None
        cap = q.read(1, 0, PCI_CAP_LIST, 1) & ~3
        while cap:
            if q.read(1, 0, cap, 1) == CAP_ID_VNDR:
                kind = q.read(1, 0, cap + 3, 1)
                if kind == COMMON_CFG:
                    self.common = self._cap_addr(cap)
                elif kind == NOTIFY_CFG:
                    self.notify = self._cap_addr(cap)
                    self.notify_mult = q.read(1, 0, cap + 16, 4)
            cap = q.read(1, 0, cap + 1, 1) & ~3
        if self.common is None or self.notify is None:
            raise QtestError("the PF at 01:00.0 has no virtio PCI structures")

    def _w(self, size, addr, val):
        self.q.cmd(f"write{'bwlq'[size.bit_length() - 1]} {addr:#x} {val:#x}")

    def _r(self, size, addr):
        return int(self.q.cmd(f"read{'bwlq'[size.bit_length() - 1]} {addr:#x}"), 16)

    def _mem(self, addr, data):
        self.q.cmd(f"write {addr:#x} {len(data)} 0x{data.hex()}")

    def _start(self, features, features2, rings):
        c = self.common
        self._w(1, c + C_STATUS, 0)
        self._w(1, c + C_STATUS, S_ACK | S_DRIVER)
        self._w(4, c + C_DFSELECT, 1)
        if not self._r(4, c + C_DF) & 1 << (F_ADMIN_VQ - 32):
            raise QtestError("the PF does not offer VIRTIO_F_ADMIN_VQ")
        features |= 1 << F_VERSION_1 | 1 << F_ADMIN_VQ
        for word, val in enumerate((features & 0xFFFFFFFF, features >> 32, features2)):
            self._w(4, c + C_GFSELECT, word)
            self._w(4, c + C_GF, val)
        self._w(1, c + C_STATUS, S_ACK | S_DRIVER | S_FEATURES_OK)
        if not self._r(1, c + C_STATUS) & S_FEATURES_OK:
            raise QtestError("the PF refused VIRTIO_F_ADMIN_VQ")
        self.index = self._r(2, c + C_ADM_Q_IDX)
        self._w(2, c + C_Q_SELECT, self.index)
        self._w(2, c + C_Q_SIZE, QSIZE)
        for off, addr in ((C_Q_DESC, DESC), (C_Q_AVAIL, AVAIL), (C_Q_USED, USED)):
            self._w(4, c + off, addr)
            self._w(4, c + off + 4, 0)
        self.notify_off = self._r(2, c + C_Q_NOFF)
        self._w(2, c + C_Q_ENABLE, 1)
        self._mem(AVAIL, bytes(0x100))
        self._mem(USED, bytes(0x100))
        self.avail_idx = self.used_idx = 0
        for ring in rings:
            ring.setup(self)
        self._w(1, c + C_STATUS, S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK)

    def submit(self, opcode, group, member, data=b""):
        """Queue a command and kick; returns the seconds the kick took
        (what the notification held the "vCPU")."""
        out = struct.pack("<HH12xQ", opcode, group, member) + data
        self._mem(OUT_BUF, out)
        self._mem(IN_BUF, bytes(8 + 192))
        self._mem(DESC, struct.pack("<QIHH", OUT_BUF, len(out), 1, 1) +
                  struct.pack("<QIHH", IN_BUF, 8 + 192, 2, 0))
        self._w(2, AVAIL + 4 + (self.avail_idx % QSIZE) * 2, 0)
        self.avail_idx += 1
        self._w(2, AVAIL + 2, self.avail_idx & 0xFFFF)
        t0 = time.perf_counter()
        self._w(2, self.notify + self.notify_off * self.notify_mult, self.index)
        return time.perf_counter() - t0

    def wait(self, timeout=30):
        """Until the device used the command: (status, result bytes)."""
        deadline = time.monotonic() + timeout
        while self._r(2, USED + 2) == self.used_idx & 0xFFFF:
            if time.monotonic() > deadline:
                raise QtestError(f"the administration command got no answer in {timeout} s")
            time.sleep(0.0005)
        length = self._r(4, USED + 8 + (self.used_idx % QSIZE) * 8)
        self.used_idx += 1
        res = bytes.fromhex(self.q.cmd(f"read {IN_BUF:#x} {max(length, 8)}")[2:])
        return struct.unpack_from("<H", res)[0], res[8:length]

    def run(self, opcode, group, member, data=b"", timeout=30):
        self.submit(opcode, group, member, data)
        return self.wait(timeout)

    def cfg_set(self, vf, fields, mac=bytes(6), vlan=0, proto=0x8100):
        """RESOURCE_OBJ_MODIFY of VF @vf's member configuration (its
        @fields), as Linux's driver sends it.  Returns the seconds the kick
        took, the seconds until the answer, and the status."""
        cfg = struct.pack("<6sHHBBI8x", mac, vlan, proto, 0, 0, 0)
        t0 = time.perf_counter()
        kick = self.submit(CMD_RESOURCE_OBJ_MODIFY, GROUP_SRIOV, vf + 1,
                           struct.pack("<HxxIQ", OBJ_MEMBER_CFG, 0, fields) + cfg)
        st, _ = self.wait()
        return kick, time.perf_counter() - t0, st

    def set_vlan(self, vf, vid):
        return self.cfg_set(vf, FIELD_VLAN, vlan=vid)

    def set_mac(self, vf, mac):
        return self.cfg_set(vf, FIELD_MAC, mac=mac)


class Ring:
    """A split virtqueue of the PF's other than the admin queue, of QSIZE
    entries, at @base in guest memory (descriptors, then the available
    ring at +0x1000, the used ring at +0x2000, buffers from +0x3000, 2 KiB
    each)."""

    def __init__(self, index, base):
        self.index, self.base = index, base

    def setup(self, admin):
        self.a = a = admin
        c = a.common
        a._w(2, c + C_Q_SELECT, self.index)
        a._w(2, c + C_Q_SIZE, QSIZE)
        for off, addr in ((C_Q_DESC, self.base), (C_Q_AVAIL, self.base + 0x1000),
                          (C_Q_USED, self.base + 0x2000)):
            a._w(4, c + off, addr)
            a._w(4, c + off + 4, 0)
        self.notify_off = a._r(2, c + C_Q_NOFF)
        a._mem(self.base + 0x1000, bytes(0x100))
        a._mem(self.base + 0x2000, bytes(0x100))
        self.avail_idx = self.used_idx = 0
        a._w(2, c + C_Q_ENABLE, 1)

    def buf(self, i):
        return self.base + 0x3000 + (i % QSIZE) * 0x800

    def add(self, data=None, length=0x800):
        """One buffer: device-readable with @data, else device-writable."""
        a, i = self.a, self.avail_idx % QSIZE
        if data is not None:
            a._mem(self.buf(i), data)
            length = len(data)
        a._mem(self.base + i * 16, struct.pack("<QIHH", self.buf(i), length,
                                               0 if data is not None else 2, 0))
        a._w(2, self.base + 0x1000 + 4 + i * 2, i)
        self.avail_idx += 1
        a._w(2, self.base + 0x1000 + 2, self.avail_idx & 0xFFFF)
        a._w(2, a.notify + self.notify_off * a.notify_mult, self.index)

    def used(self, timeout=30):
        """Until the device used the next buffer: the bytes it wrote."""
        a, deadline = self.a, time.monotonic() + timeout
        while a._r(2, self.base + 0x2000 + 2) == self.used_idx & 0xFFFF:
            if time.monotonic() > deadline:
                raise QtestError(f"queue {self.index}: no buffer used in {timeout} s")
            time.sleep(0.001)
        slot = self.base + 0x2000 + 4 + (self.used_idx % QSIZE) * 8
        head, length = a._r(4, slot), a._r(4, slot + 4)
        self.used_idx += 1
        if not length:
            return b""
        return bytes.fromhex(a.q.cmd(f"read {self.buf(head):#x} {length}")[2:])


def main(argv):
    path, what = argv[1], argv[2]
    q = QtestPci(path)
    if what == "vfs":
        n = int(argv[3])
        took, enabled = q.set_vfs(n)
        present = sum(q.vf_present(i) for i in range(max(n, 1)))
        print(f"vfe={int(enabled)} present={present} "
              f"ready={q.vf_states.count('ready')} ms={took * 1000:.2f} "
              f"write_ms={q.write_s * 1000:.2f}")
    elif what == "vlan":   # VF VID: RESOURCE_OBJ_MODIFY, prints the status
        vf, vid = int(argv[3]), int(argv[4])
        _, _, st = q.admin().set_vlan(vf, vid)
        print(f"status={st}")
    elif what == "stats":  # VF's counters: RESOURCE_OBJ_QUERY with STATS
        vf = int(argv[3])
        a = q.admin()
        t0 = time.monotonic()
        st, res = a.run(CMD_RESOURCE_OBJ_QUERY, GROUP_SRIOV, vf + 1,
                        struct.pack("<HxxIQ", OBJ_MEMBER_CFG, 0, 1), timeout=60)
        took = time.monotonic() - t0
        # the 24-byte configuration, then RX_BASIC and TX_BASIC replies
        rx, tx = (struct.unpack_from("<Q", res, 24 + off + 8)[0] if len(res) >= 24 + off + 16
                  else -1 for off in (0, 56))
        print(f"status={st} rx_packets={rx} tx_packets={tx} s={took:.2f}")
    elif what == "mac":    # VF MAC: RESOURCE_OBJ_MODIFY, prints the status
        vf, mac = int(argv[3]), bytes.fromhex(argv[4].replace(":", ""))
        _, _, st = q.admin().set_mac(vf, mac)
        print(f"status={st}")
    else:
        raise SystemExit(f"unknown command {what}")


if __name__ == "__main__":
    main(sys.argv)
