# SPDX-License-Identifier: GPL-2.0-or-later
"""Level 0: a PF in switchdev mode migrates with its representors (issue
34: "the mode and the representors in the migration stream").

Two QEMUs run no guest code (-accel qtest); the source's "guest" is
tests/harness/qtest_pci.py, which plays the PF's driver: it negotiates
VIRTIO_NET_F_ESWITCH, sets up representor 0's receive queue, creates the
eswitch object and VF 0's representor, and a frame written into that
representor's host backend (a stream netdev QEMU listens on) arrives on
the queue.  After the migration the destination is in switchdev mode, VF 0's
representor is connected to the destination's own backend, and a frame
written there arrives in the buffer the guest had posted on the source.
The driver's flow objects (issue 35: a group and a classifier, QEMU's
own state; a static pool takes no rules) come with it: the destination
reads them back as they were created.  A destination without
sriov-eswitch refuses the stream, and the source goes on in switchdev
mode with its representor carrying frames."""
import copy
import json
import os
import signal
import socket
import struct
import subprocess
import time

import pytest

from harness import paths
from harness.qtest_pci import GROUP_SELF, Admin, QtestPci, Ring

pytestmark = pytest.mark.slow

F_CTRL_VQ, F2_ESWITCH = 17, 1 << (72 - 64)
CREATE, QUERY, DESTROY = 0x000A, 0x000C, 0x000D
OBJ_ESWITCH, OBJ_REP = 0x0205, 0x0206
OBJ_GROUP, OBJ_CLASSIFIER = 0x0200, 0x0201
GROUP = struct.pack("<HB5x", 0xfff5, 1)
# source port, then the EtherType
CLASSIFIER = (struct.pack("<B7x", 2) + struct.pack("<BBxxB3x", 8, 0, 4) + b"\xff" * 4 +
              struct.pack("<BBxxB3x", 1, 0, 14) + bytes(12) + b"\xff\xff")
REP0_RX = 3


class Vm:
    """A QEMU of this test: a PF with 2 VFs (hub ports) and, with
    @eswitch, representor backends r0 (a stream netdev listening on
    DIR/NAME-r0.sock) and r1."""

    def __init__(self, tmp, name, eswitch=True, incoming=False):
        self.tmp, self.name = tmp, name
        self.qmp_path = f"{tmp}/{name}-q.sock"
        self.qt_path = f"{tmp}/{name}-qt.sock"
        self.r0_path = f"{tmp}/{name}-r0.sock"
        self.log = f"{tmp}/{name}.log"
        reps = (["-netdev", f"stream,id=r0,server=on,addr.type=unix,"
                            f"addr.path={self.r0_path}",
                 "-netdev", "hubport,id=r1,hubid=9"] if eswitch else [])
        pool = {"qom-type": "vsriov-pool", "id": "p0", "netdevs": ["b0", "b1"]}
        if eswitch:
            pool["rep-netdevs"] = ["r0", "r1"]
        argv = [paths.QEMU_BIN, "-M", "q35", "-nodefaults", "-display", "none",
                "-accel", "qtest", "-qtest", f"unix:{self.qt_path},server=on,wait=off",
                "-qtest-log", "/dev/null",
                "-qmp", f"unix:{self.qmp_path},server=on,wait=off",
                "-device", "pcie-root-port,id=rp0,chassis=1,addr=0x2",
                "-netdev", "hubport,id=pf,hubid=0",
                "-netdev", "hubport,id=b0,hubid=1", "-netdev", "hubport,id=b1,hubid=2",
                *reps, "-object", json.dumps(pool),
                "-device", "virtio-net-pci,bus=rp0,id=pf0,netdev=pf,sriov-pool=p0"
                           + (",sriov-eswitch=on" if eswitch else "")]
        if incoming:
            argv += ["-incoming", "defer"]
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        self.qmp_sock = self._connect(self.qmp_path)
        self.qmp_f = self.qmp_sock.makefile("rw")
        self.qmp_f.readline()
        self.qmp("qmp_capabilities")

    def _connect(self, path, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(path)
                return s
            except OSError:
                s.close()
                assert self.proc.poll() is None, self.tail()
                assert time.monotonic() < deadline, f"{path}: not there"
                time.sleep(0.02)

    def tail(self):
        with open(self.log) as f:
            return f.read()[-3000:]

    def qmp(self, cmd, **args):
        self.qmp_f.write(json.dumps({"execute": cmd, "arguments": args}) + "\n")
        self.qmp_f.flush()
        while True:
            line = self.qmp_f.readline()
            assert line, f"QEMU {self.name} closed QMP:\n{self.tail()}"
            r = json.loads(line)
            if "event" in r:
                continue
            assert "return" in r, f"{cmd}: {r}"
            return r["return"]

    def pf(self):
        return self.qmp("query-vsriov")[0]

    def rep_backend(self):
        """The host's end of representor backend r0."""
        s = self._connect(self.r0_path)
        return s

    def wait_migration(self, states, timeout=120):
        deadline = time.monotonic() + timeout
        while True:
            st = self.qmp("query-migrate").get("status")
            if st in states:
                return st
            assert time.monotonic() < deadline, f"migration still {st}"
            time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def send_frame(sock, frame):
    sock.sendall(struct.pack(">I", len(frame)) + frame)


def frame(n):
    return bytes([0xFF] * 6 + [2, 0, 0, 0, 0, n]) + b"\x88\xb5" + bytes([n]) * 46


def switchdev_source(tmp):
    """The source in switchdev mode, VF 0 with representor 0, whose
    receive queue has had one frame and holds one more buffer."""
    src = Vm(tmp, "src")
    q = QtestPci(src.qt_path)
    _, enabled = q.set_vfs(2)
    assert enabled
    rx = Ring(REP0_RX, 0x200000)
    a = Admin(q, features=1 << F_CTRL_VQ, features2=F2_ESWITCH, rings=[rx])
    a.use(GROUP_SELF)
    st, _ = a.run(CREATE, GROUP_SELF, 0, struct.pack("<HxxIQQ", OBJ_ESWITCH, 0, 0, 0))
    assert st == 0, f"eswitch: status {st}"
    st, _ = a.run(CREATE, GROUP_SELF, 0,
                  struct.pack("<HxxIQHHIQ", OBJ_REP, 0, 0, 0, 0, 1, 0))
    assert st == 0, f"representor: status {st}"
    assert src.pf()["eswitch-mode"] == "switchdev"
    for typ, oid, data in ((OBJ_GROUP, 3, GROUP), (OBJ_CLASSIFIER, 7, CLASSIFIER)):
        st, _ = a.run(CREATE, GROUP_SELF, 0, struct.pack("<HxxIQ", typ, oid, 0) + data)
        assert st == 0, f"flow object {typ:#x}: status {st}"
    host = src.rep_backend()
    rx.add()
    rx.add()
    send_frame(host, frame(1))
    got = rx.used()
    assert got[12:] == frame(1), got.hex()
    assert got[:12] == bytes(10) + b"\x01\x00", got[:12].hex()
    return src, a, rx, host


def test_switchdev_pf_migrates_with_its_representors(tmp_path):
    tmp = str(tmp_path)
    src, a, rx, host = switchdev_source(tmp)
    dst = Vm(tmp, "dst", incoming=True)
    try:
        dst.qmp("migrate-incoming", uri=f"unix:{tmp}/mig.sock")
        src.qmp("migrate", uri=f"unix:{tmp}/mig.sock")
        assert src.wait_migration({"completed", "failed"}) == "completed", src.tail()
        assert dst.wait_migration({"completed", "failed"}) == "completed", dst.tail()
        pf = dst.pf()
        assert pf["eswitch-mode"] == "switchdev"
        rep = pf["vfs"][0]["representor"]
        assert (rep["id"], rep["netdev"]) == (0, "r0")
        assert "representor" not in pf["vfs"][1]

        # the buffer the guest posted on the source takes the frame
        da = copy.copy(a)
        da.q = QtestPci(dst.qt_path)
        rx.a = da
        send_frame(dst.rep_backend(), frame(2))
        got = rx.used()
        assert got[12:] == frame(2), got.hex()
        assert dst.pf()["vfs"][0]["representor"]["rx-packets"] == 1
        # the flow objects, as the driver created them on the source
        for typ, oid, data in ((OBJ_GROUP, 3, GROUP), (OBJ_CLASSIFIER, 7, CLASSIFIER)):
            assert da.run(QUERY, GROUP_SELF, 0,
                          struct.pack("<HxxIQ", typ, oid, 0)) == (0, data)
        assert da.run(QUERY, GROUP_SELF, 0, struct.pack("<HxxIQ", OBJ_GROUP, 0, 0))[0] == 22
    finally:
        host.close()
        src.stop()
        dst.stop()


def test_destination_without_eswitch_refuses_the_stream(tmp_path):
    tmp = str(tmp_path)
    src, a, rx, host = switchdev_source(tmp)
    dst = Vm(tmp, "dst", eswitch=False, incoming=True)
    try:
        # (the return path tells the source that the destination failed)
        for vm in (src, dst):
            vm.qmp("migrate-set-capabilities",
                   capabilities=[{"capability": "return-path", "state": True}])
        dst.qmp("migrate-incoming", uri=f"unix:{tmp}/mig.sock")
        src.qmp("migrate", uri=f"unix:{tmp}/mig.sock")
        assert src.wait_migration({"completed", "failed"}) == "failed"
        dst.proc.wait(timeout=60)
        assert dst.proc.returncode != 0
        # the destination offers no VIRTIO_NET_F_ESWITCH, which the
        # source's driver negotiated (bit 72: 0x100 of the third word)
        log = dst.tail()
        assert "Features 0x00000000000000000000020100020000 unsupported" in log, log
        # the source goes on in switchdev mode, its representor carrying
        assert src.qmp("query-status")["status"] == "running"
        assert src.pf()["eswitch-mode"] == "switchdev"
        send_frame(host, frame(3))
        got = rx.used()
        assert got[12:] == frame(3), got.hex()
    finally:
        host.close()
        src.stop()
        dst.stop()
