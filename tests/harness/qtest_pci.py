# SPDX-License-Identifier: GPL-2.0-or-later
"""A guest's SR-IOV writes, made through QEMU's qtest protocol.

QEMU started with `-accel qtest -qtest unix:SOCK,server=on,wait=off` runs no
guest code: this client plays the guest's PCI core, the way the C qtests'
vsriov-pcie.h does (ECAM enabled in the q35 MCH, a root port given bus 1),
so the host side of VF Enable can be driven and timed in places where
libqos is not built (Level 1).  Standard library only: it runs in Level 1.

    python3 qtest_pci.py SOCK vfs N      set NumVFs = N and VF Enable (0: clear)
"""
import socket
import sys
import time

ECAM = 0xB0000000
MCH_PCIEXBAR = 0x60
SRIOV_CAP_ID = 0x10
SRIOV_CTRL, SRIOV_TOTAL_VF, SRIOV_NUM_VF = 0x08, 0x0E, 0x10
VFE = 0x1
CLASS_REVISION = 0x08
# the VF-configuration mailbox (docs/vf-config-channel.md)
VNDR_CAP_ID, VFCFG_VSEC_ID = 0x0B, 0x5646
VFCFG_OPCODE, VFCFG_STATUS, VFCFG_MEMBER, VFCFG_GROUP, VFCFG_DATA = 0x08, 0x0A, 0x0C, 0x10, 0x14
VFCFG_SET_MAC, VFCFG_SET_VLAN, VFCFG_EINPROGRESS = 0x8001, 0x8002, 115


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
        """NumVFs = n and VF Enable (n = 0: VF Enable cleared), then, as the
        SR-IOV spec lets a device take time, until the VFs respond or VF
        Enable clears again (refused).  Returns the seconds until then and
        whether VF Enable took; self.write_s is how long the VF Enable
        write itself took (its qtest round trip: what it held the vCPU),
        self.wait_worst_s the longest round trip of a read while waiting
        (the longest QEMU's main loop, and the BQL, was held meanwhile)."""
        cap = cap or self.sriov_cap()
        self.write(1, 0, cap + SRIOV_CTRL, 2, 0)
        self.write_s = self.wait_worst_s = 0.0
        if not n:
            return 0.0, False
        self.write(1, 0, cap + SRIOV_NUM_VF, 2, n)
        t0 = time.perf_counter()
        self.write(1, 0, cap + SRIOV_CTRL, 2, VFE)
        self.write_s = time.perf_counter() - t0
        self.wait_worst_s = 0.0
        while True:
            t1 = time.perf_counter()
            enabled = bool(self.read(1, 0, cap + SRIOV_CTRL, 2) & VFE)
            self.wait_worst_s = max(self.wait_worst_s, time.perf_counter() - t1)
            if not enabled or self.vf_present(n - 1):
                return time.perf_counter() - t0, enabled
            if time.perf_counter() - t0 > timeout:
                raise QtestError(f"VF Enable with {n} VFs: neither ready nor refused "
                                 f"after {timeout} s")
            time.sleep(0.002)

    def disable_timed(self, cap=None):
        cap = cap or self.sriov_cap()
        t0 = time.perf_counter()
        self.write(1, 0, cap + SRIOV_CTRL, 2, 0)
        return time.perf_counter() - t0

    def vfcfg_cap(self):
        pos, guard = 0x100, 480
        while pos and guard:
            hdr = self.read(1, 0, pos, 4)
            if hdr in (0, 0xFFFFFFFF):
                break
            if hdr & 0xFFFF == VNDR_CAP_ID and self.read(1, 0, pos + 4, 2) == VFCFG_VSEC_ID:
                return pos
            pos, guard = hdr >> 20, guard - 1
        raise QtestError("the PF at 01:00.0 has no VF configuration capability")

    def vfcfg_cmd(self, cap, vf, opcode, data=b"", timeout=30):
        """Run a mailbox command for VF @vf, as Linux's driver does (status
        polled while it reads EINPROGRESS).  Returns the seconds the
        opcode write took (what it held the "vCPU"), the seconds until the
        final status, and that status."""
        self.write(1, 0, cap + VFCFG_GROUP, 2, 1)
        self.write(1, 0, cap + VFCFG_MEMBER, 4, vf + 1)
        data = data + bytes(-len(data) % 4)
        for i in range(0, len(data), 4):
            self.write(1, 0, cap + VFCFG_DATA + i, 4, int.from_bytes(data[i:i + 4], "little"))
        t0 = time.perf_counter()
        self.write(1, 0, cap + VFCFG_OPCODE, 2, opcode)
        wrote = time.perf_counter() - t0
        deadline = t0 + timeout
        while True:
            status = self.read(1, 0, cap + VFCFG_STATUS, 2)
            if status != VFCFG_EINPROGRESS or time.perf_counter() > deadline:
                return wrote, time.perf_counter() - t0, status
            time.sleep(0.0005)

    def vf_present(self, index):
        return self.read(1, index + 1, CLASS_REVISION, 4) != 0xFFFFFFFF


def main(argv):
    path, what = argv[1], argv[2]
    q = QtestPci(path)
    if what == "vfs":
        n = int(argv[3])
        took, enabled = q.set_vfs(n)
        present = sum(q.vf_present(i) for i in range(max(n, 1)))
        print(f"vfe={int(enabled)} present={present} ms={took * 1000:.2f} "
              f"write_ms={q.write_s * 1000:.2f}")
    elif what == "vlan":   # VF VID: SET_VLAN through the mailbox, prints the status
        vf, vid = int(argv[3]), int(argv[4])
        _, _, st = q.vfcfg_cmd(q.vfcfg_cap(), vf, VFCFG_SET_VLAN, vid.to_bytes(2, "little") +
                               b"\0\0" + (0x8100).to_bytes(2, "little"))
        print(f"status={st}")
    elif what == "mac":    # VF MAC: SET_MAC through the mailbox, prints the status
        vf, mac = int(argv[3]), bytes.fromhex(argv[4].replace(":", ""))
        _, _, st = q.vfcfg_cmd(q.vfcfg_cap(), vf, VFCFG_SET_MAC, mac)
        print(f"status={st}")
    else:
        raise SystemExit(f"unknown command {what}")


if __name__ == "__main__":
    main(sys.argv)
