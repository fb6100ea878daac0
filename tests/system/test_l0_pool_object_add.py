# SPDX-License-Identifier: GPL-2.0-or-later
"""Level 0: a premapped vsriov-daemon-pool added at run time (object-add)
does not hold the BQL while the daemon answers (issue 36, "The BQL held
for seconds at start").

A pool of 64 VFs is claimed in 4 CLAIMs of 16.  QEMU used to wait for
each answer in poll() with the BQL held, up to the daemon's deadline of
5 s per CLAIM: the guest's vCPUs and the monitor stopped meanwhile.
Here a daemon speaking docs/daemon-protocol.md answers each CLAIM only
once the test has seen the guest's agent and QMP answer while that
CLAIM is outstanding: with QEMU waiting under the BQL, neither answers
before QEMU gives the CLAIM up (the daemon sees its connection close
first), which fails the test.

Then the pool is ready (VSRIOV_POOL_STATE_CHANGED, query-vsriov-pools)
and holds the 64 VFs' descriptors; object-del gives them back.  Level 0
has no vhost-vdpa device: the daemon's VFs are plain files, as
vdpa-pool-daemon's --fake-vhost-dir serves them (tests/unit/
test_daemon.py), so no VF passes traffic here (Level 1 does that).

A second QEMU (-accel qtest, the guest's PCI writes played by
harness/qtest_pci.py) shows the failures: a migration while the pool
claims is refused naming it, a PF device_add'ed meanwhile has VFs
"claiming", and the VFs its VF Enable enables answer at once while their
driver's reset waits for them; the daemon refusing the second CLAIM makes
the pool "failed" with the daemon's sentence (event, query, QEMU's log),
gives back the first CLAIM's VFs, and fails the enabled VFs (their resets
complete on VFs that offer no features, VF Enable unchanged)."""
import array
import os
import random
import select
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time

import pytest

from harness import paths, vpd
from harness.qmp import QMP, QMPError
from harness.qtest_pci import C_STATUS, SRIOV_CTRL, SRIOV_NUM_VF, VFE, QtestPci

pytestmark = pytest.mark.slow

BIG = 64            # VFs of the pool added to the running guest
PER_CLAIM = 16      # VFs per CLAIM (QEMU's VPD_MSG_FDS)
REFUSAL = "fake daemon: pool 'big' is being drained"
EAGAIN = 11       # the administration command's status
PCI_CAP_LIST, PCI_CAP_ID_EXP = 0x34, 0x10
PCI_EXP_SLTCTL, PCI_EXP_SLTCTL_PCC = 0x18, 0x0400   # power controller: off


class SlowDaemon:
    """vdpa-pool-daemon's API as far as a premapped pool's creation needs
    it (CLAIM, RELEASE), on a Unix socket.  Each CLAIM is answered only
    when the test opens its gate (gate(i)), or refused (ERROR) if it is
    the @refuse-th.  What happens goes into one ordered log, to which the
    test adds what it saw (note()): the test's assertions are about the
    order of the two."""

    def __init__(self, nvfs, refuse=None):
        self.d = tempfile.mkdtemp(prefix="vsr-slowvpd-", dir="/tmp")
        self.path = os.path.join(self.d, "api.sock")
        self.vf_dir = os.path.join(self.d, "dev")
        os.makedirs(self.vf_dir)
        self.vf_files = []
        for i in range(nvfs):
            f = os.path.join(self.vf_dir, f"big-{i}")
            with open(f, "w") as fh:
                fh.write(f"big-{i}")
            self.vf_files.append(f)
        self.refuse = refuse
        self.cv = threading.Condition()
        self.log = []
        self.gates = {}
        self.claims = 0
        self.next_vf = 0
        self.conn = None
        self.accepts = 0
        self.stop = threading.Event()
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(self.path)
        self.srv.listen(4)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    # -- the test's side ---------------------------------------------------
    def note(self, *what):
        with self.cv:
            self.log.append(what)
            self.cv.notify_all()

    def snapshot(self):
        with self.cv:
            return list(self.log)

    def wait_for(self, what, timeout=60):
        with self.cv:
            if not self.cv.wait_for(lambda: what in self.log, timeout):
                raise AssertionError(f"the daemon saw no {what} within {timeout} s: "
                                     f"{self.log}")

    def _gate(self, i):
        with self.cv:
            return self.gates.setdefault(i, threading.Event())

    def gate(self, i):
        self._gate(i).set()

    def peer_closed(self):
        """Whether QEMU has closed its connection by now (a CLAIM it gave
        up on closes it): read without waiting, so what QEMU did before
        this call shows."""
        conn = self.conn
        if conn is None:
            return True
        try:
            return conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True

    def drop(self):
        """Close the connection being served, as a daemon that restarts."""
        self.conn.shutdown(socket.SHUT_RDWR)

    def close(self):
        self.stop.set()
        self.srv.close()
        self.thread.join(10)
        shutil.rmtree(self.d, ignore_errors=True)

    # -- the daemon's side -------------------------------------------------
    def _run(self):
        self.srv.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.srv.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.conn = conn
            self.accepts += 1
            self._serve(conn)

    def _recv(self, conn, n):
        buf = b""
        while len(buf) < n:
            if self.stop.is_set():
                return None
            r, _, _ = select.select([conn], [], [], 0.2)
            if not r:
                continue
            data = conn.recv(n - len(buf))
            if not data:
                return None
            buf += data
        return buf

    def _closed_while_waiting(self, conn, gate):
        """Wait for @gate; True if the peer closed the connection first."""
        while not gate.is_set():
            if self.stop.is_set():
                return True
            r, _, _ = select.select([conn], [], [], 0.1)
            if r:
                try:
                    if conn.recv(1, socket.MSG_PEEK) == b"":
                        return True
                except OSError:
                    return True
                gate.wait(0.1)      # (another request: after this one)
        return False

    def _serve(self, conn):
        with conn:
            while True:
                hdr = self._recv(conn, vpd.HEADER)
                if hdr is None:
                    break
                magic, _, mtype, seq, n = struct.unpack("<IHHII", hdr)
                payload = self._recv(conn, n) if n else b""
                if magic != vpd.MAGIC or payload is None:
                    break
                attrs = dict(vpd.decode_attrs(payload))
                if mtype == vpd.CLAIM:
                    with self.cv:
                        i = self.claims
                        self.claims += 1
                    self.note("claim-received", i)
                    if self._closed_while_waiting(conn, self._gate(i)):
                        break
                    if not self._answer_claim(conn, seq, i, attrs["COUNT"]):
                        break
                elif mtype == vpd.RELEASE:
                    conn.sendall(vpd.encode(vpd.REPLY, seq, []))
                else:
                    conn.sendall(vpd.encode(vpd.ERROR, seq, [
                        ("ERRNO", 95), ("MESSAGE", "not in this fake daemon")]))
        self.note("closed")

    def _answer_claim(self, conn, seq, i, count):
        if i == self.refuse:
            conn.sendall(vpd.encode(vpd.ERROR, seq, [("ERRNO", 1), ("MESSAGE", REFUSAL)]))
            self.note("claim-refused", i)
            return True
        vfs, fds = [], []
        for _ in range(count):
            h = self.next_vf
            self.next_vf += 1
            vfs.append(("VF", [("HANDLE", h + 1), ("VF_INDEX", h)]))
            # (a VF given back may come again: the files are reused)
            fds.append(os.open(self.vf_files[h % len(self.vf_files)], os.O_RDONLY))
        data = vpd.encode(vpd.REPLY, seq, vfs)
        try:
            sent = conn.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                          array.array("i", fds))])
            if sent < len(data):
                conn.sendall(data[sent:])
        except OSError:
            return False
        finally:
            for fd in fds:
                os.close(fd)
        self.note("claim-answered", i)
        return True


def pool_info(qmp, pid="p0"):
    (pool,) = [p for p in qmp.execute("query-vsriov-pools") if p["id"] == pid]
    return pool


def fds_into(pid, folder):
    """How many of process @pid's descriptors are files in @folder."""
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            n += os.readlink(f"/proc/{pid}/fd/{fd}").startswith(folder + "/")
        except OSError:
            pass
    return n


def wait_true(what, cond, timeout=60):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout} s: {what}")
        time.sleep(0.05)


def daemon_pool(dm, count):
    return {"qom-type": "vsriov-daemon-pool", "id": "p0", "socket": dm.path,
            "pool": "big", "count": count}


def test_object_add_of_a_large_pool_leaves_the_guest_and_monitor_answering(guest_factory):
    dm = SlowDaemon(BIG)
    try:
        g = guest_factory("pooladd")
        g.qmp.send("object-add", daemon_pool(dm, BIG))
        nclaims = BIG // PER_CLAIM
        for i in range(nclaims):
            dm.wait_for(("claim-received", i))
            # The guest runs and its agent answers while CLAIM i waits.
            g.check("echo alive")
            dm.note("agent-answered", i)
            log = dm.snapshot()
            assert not dm.peer_closed() and ("claim-answered", i) not in log, (
                f"the guest's agent answered only after QEMU gave up CLAIM {i} "
                f"(it waited for the daemon with the BQL held): {log}")
            if i == 0:
                g.qmp.answer("object-add")
                dm.note("object-add-returned")
            # ... and so does the monitor, which says the pool is claiming.
            state = pool_info(g.qmp)["state"]
            dm.note("qmp-answered", i, state)
            assert state == "claiming", state
            dm.gate(i)
        ev = g.qmp.wait_event("VSRIOV_POOL_STATE_CHANGED", timeout=60)
        assert ev["data"] == {"id": "p0", "state": "ready"}, ev
        log = dm.snapshot()
        print("order of events:", log)
        for i in range(nclaims):
            assert log.index(("agent-answered", i)) < log.index(("claim-answered", i)), log
            assert log.index(("qmp-answered", i, "claiming")) < \
                log.index(("claim-answered", i)), log
        assert log.index(("object-add-returned",)) < log.index(("claim-answered", 0)), log
        assert ("closed",) not in log, log

        # The pool serves its 64 VFs: QEMU holds their descriptors.
        pool = pool_info(g.qmp)
        assert (pool["state"], pool["free"], len(pool["entries"])) == ("ready", BIG, BIG), pool
        assert "error" not in pool, pool
        assert fds_into(g.proc.pid, dm.vf_dir) == BIG
        g.check("echo still alive")

        # Deleted, it gives them back (its connection closes).
        g.qmp.execute("object-del", {"id": "p0"})
        dm.wait_for(("closed",))
        wait_true("QEMU closed the VFs' descriptors",
                  lambda: fds_into(g.proc.pid, dm.vf_dir) == 0)
        assert g.qmp.execute("query-vsriov-pools") == []
    finally:
        dm.close()


class QtestQemu:
    """QEMU with -accel qtest (no guest code runs; harness/qtest_pci.py
    plays the guest's PCI writes), two root ports, QMP."""

    def __init__(self, artifacts):
        self.d = tempfile.mkdtemp(prefix="vsr-pooladd-", dir="/tmp")
        self.log_path = os.path.join(artifacts, "qemu.log")
        qmp_sock, qt_sock = os.path.join(self.d, "qmp.sock"), os.path.join(self.d, "qt.sock")
        lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        lsock.bind(qmp_sock)
        lsock.listen(1)
        argv = [paths.QEMU_BIN, "-M", "q35", "-nodefaults", "-display", "none",
                "-accel", "qtest", "-qtest", f"unix:{qt_sock},server=on,wait=off",
                "-chardev", f"socket,id=qmp,path={qmp_sock}",
                "-mon", "chardev=qmp,mode=control",
                "-run-with", "exit-with-parent=on",
                "-device", "pcie-root-port,id=rp0,chassis=1,addr=2.0",
                "-device", "pcie-root-port,id=rp1,chassis=2,addr=3.0",
                "-netdev", "hubport,id=n0,hubid=0", "-netdev", "hubport,id=n1,hubid=1"]
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT)
        try:
            lsock.settimeout(60)
            conn, _ = lsock.accept()
            self.qmp = QMP(conn, "qtest")
            self.qmp.handshake()
            self.q = QtestPci(qt_sock)
        except BaseException:
            self.close()
            raise
        finally:
            lsock.close()

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def vf_enable(self, n):
        """NumVFs = n and VF Enable, not waiting for the VFs."""
        cap = self.q.sriov_cap()
        self.q.write(1, 0, cap + SRIOV_NUM_VF, 2, n)
        self.q.write(1, 0, cap + SRIOV_CTRL, 2, VFE)

    def vf_enable_set(self):
        return bool(self.q.read(1, 0, self.q.sriov_cap() + SRIOV_CTRL, 2) & VFE)

    def quit(self):
        self.qmp.execute("quit")
        assert self.proc.wait(30) == 0, self.log()

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.d, ignore_errors=True)


def add_pf(vm, bus="rp0", pf="pf0", netdev="n0"):
    """device_add a PF of 2 VFs on pool p0 into root port @bus (rp0 in
    slot 2, rp1 in 3), whose slot is then powered on, as a guest's pciehp
    does (a hot-plugged function is off until then)."""
    vm.qmp.execute("device_add", {"driver": "virtio-net-pci", "bus": bus, "id": pf,
                                  "netdev": netdev, "sriov-pool": "p0", "sriov-totalvfs": 2})
    port = (2 if bus == "rp0" else 3) << 3
    pos = vm.q.read(0, port, PCI_CAP_LIST, 1)
    while pos and vm.q.read(0, port, pos, 1) != PCI_CAP_ID_EXP:
        pos = vm.q.read(0, port, pos + 1, 1)
    assert pos, "the root port has no PCI Express capability"
    ctl = vm.q.read(0, port, pos + PCI_EXP_SLTCTL, 2)
    vm.q.write(0, port, pos + PCI_EXP_SLTCTL, 2, ctl & ~PCI_EXP_SLTCTL_PCC)


def vf_states(qmp):
    (pf,) = qmp.execute("query-vsriov")
    return [vf["backing"] for vf in pf["vfs"]]


def resets(q, n):
    """Each of VFs 0..@n-1 reset as its driver would (qtest_pci.vf_reset)."""
    return [q.vf_reset(i, deadline=time.perf_counter() + 60) for i in range(n)]


def test_refused_claims_fail_visibly_and_the_waiting_vfs_fail(artifacts):
    dm = SlowDaemon(32, refuse=1)
    vm = QtestQemu(artifacts)
    try:
        qmp, q = vm.qmp, vm.q
        # object-add returns while the daemon holds its first CLAIM.
        qmp.execute("object-add", daemon_pool(dm, 20))
        dm.wait_for(("claim-received", 0))
        pool = pool_info(qmp)
        assert (pool["state"], pool["free"]) == ("claiming", 20), pool
        assert ("claim-answered", 0) not in dm.snapshot()

        # No migration starts meanwhile: the blocker names the pool.
        with pytest.raises(QMPError) as e:
            qmp.execute("migrate", {"uri": "exec:cat > /dev/null"})
        assert "vsriov-daemon-pool 'p0' is still claiming its VFs" in e.value.desc, e.value.desc

        # A PF on it is realized at once, its VFs waiting for their backends;
        # the guest's VF Enable takes and the VFs answer, as PCIe has it,
        # while their driver's reset waits for the backends.
        add_pf(vm)
        assert vf_states(qmp) == ["claiming", "claiming"]
        vm.vf_enable(2)
        assert vm.vf_enable_set() and q.vf_present(0) and q.vf_present(1)
        q.common(1, 1, C_STATUS, 1, 0)
        assert q.common(1, 1, C_STATUS, 1) == 0x40     # DEVICE_NEEDS_RESET: held
        # The PF's driver cannot configure such a VF yet: EAGAIN, nothing kept.
        admin = q.admin()
        assert admin.set_vlan(0, 100)[2] == EAGAIN
        assert ("claim-answered", 0) not in dm.snapshot()

        # The first CLAIM comes, the second is refused.
        dm.gate(0)
        dm.wait_for(("claim-received", 1))
        dm.gate(1)
        ev = qmp.wait_event("VSRIOV_POOL_STATE_CHANGED", timeout=60)
        assert ev["data"]["state"] == "failed", ev
        assert f"vsriov-daemon-pool 'p0': the daemon refused: {REFUSAL}" in \
            ev["data"]["error"], ev
        pool = pool_info(qmp)
        assert (pool["state"], pool["free"]) == ("failed", 0), pool
        assert REFUSAL in pool["error"], pool
        # QEMU gave the first CLAIM's VFs back: it closed its connection.
        dm.wait_for(("closed",))
        wait_true("QEMU closed the first CLAIM's descriptors",
                  lambda: fds_into(vm.proc.pid, dm.vf_dir) == 0)

        # The waiting VFs fail: their resets complete on VFs that offer no
        # features, VF Enable stays set, QEMU says why.
        assert resets(q, 2) == ["failed", "failed"]
        assert vm.vf_enable_set() and q.vf_present(0)
        assert vf_states(qmp) == ["failed", "failed"]
        assert admin.set_vlan(0, 100)[2] == EAGAIN
        (pf,) = qmp.execute("query-vsriov")
        assert pf["vfs"][0].get("vlan", 0) == 0, pf
        assert f"2 of the 2 VF(s) enabled got no backend: vsriov-daemon-pool 'p0': the " \
               f"daemon refused: {REFUSAL}" in vm.log(), vm.log()
        # ... and so do the next ones.
        assert q.set_vfs(2)[1] and q.vf_states == ["failed", "failed"]
        # A PF that comes now hears why the pool has none.
        with pytest.raises(QMPError) as e:
            add_pf(vm, "rp1", "pf1", "n1")
        assert REFUSAL in e.value.desc, e.value.desc
        vm.quit()
    finally:
        vm.close()
        dm.close()


def test_vfs_enabled_on_a_claiming_pool_wait_for_its_claims(artifacts):
    """The claims come: the VFs enabled meanwhile get the pool's
    descriptors only then (here they fail there, since the fake VFs are no
    vhost-vdpa devices: what a real one would have bound)."""
    dm = SlowDaemon(2)
    vm = QtestQemu(artifacts)
    try:
        vm.qmp.execute("object-add", daemon_pool(dm, 2))
        dm.wait_for(("claim-received", 0))
        add_pf(vm)
        vm.vf_enable(2)
        assert vm.vf_enable_set() and vm.q.vf_present(0)
        vm.q.common(1, 1, C_STATUS, 1, 0)
        assert vm.q.common(1, 1, C_STATUS, 1) == 0x40  # held
        assert "vhost-vDPA" not in vm.log()
        dm.gate(0)
        ev = vm.qmp.wait_event("VSRIOV_POOL_STATE_CHANGED", timeout=60)
        assert ev["data"] == {"id": "p0", "state": "ready"}, ev
        assert resets(vm.q, 2) == ["failed", "failed"]
        assert vm.vf_enable_set()
        log = vm.log()
        assert "Fail to query features from vhost-vDPA device" in log, log
        assert "2 of the 2 VF(s) enabled got no backend" in log, log
        vm.quit()
    finally:
        vm.close()
        dm.close()


def test_pool_on_a_connection_passed_as_a_file_descriptor(artifacts):
    """fd=NAME: a management application connects to the daemon and passes
    the connection (getfd); the pool claims over it and QEMU never
    connects to the daemon's socket itself.  A descriptor that is not a
    Unix stream socket connected to the daemon, both socket and fd, or
    neither, are refused when the object is created.  Once the daemon
    closes the connection, the pool's next request fails, saying that
    QEMU cannot make it again."""
    dm = SlowDaemon(2)
    vm = QtestQemu(artifacts)
    try:
        qmp = vm.qmp

        def add(pid="p1", **props):
            qmp.execute("object-add", {"qom-type": "vsriov-daemon-pool", "id": pid,
                                       "pool": "big", "count": 2, **props})

        def refused(passed=None, **props):
            if passed is not None:
                qmp.execute("getfd", {"fdname": "bad"}, fds=[passed])
            with pytest.raises(QMPError) as e:
                add(**props)
            return e.value.desc

        r, w = os.pipe()
        try:
            assert refused(r, fd="bad") == \
                "vsriov-daemon-pool 'p1': fd 'bad' is not a Unix stream socket"
        finally:
            os.close(r)
            os.close(w)
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as d:
            assert refused(d.fileno(), fd="bad") == \
                "vsriov-daemon-pool 'p1': fd 'bad' is not a Unix stream socket"
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as lone:
            assert refused(lone.fileno(), fd="bad").startswith(
                "vsriov-daemon-pool 'p1': fd 'bad' is not connected to vdpa-pool-daemon: ")
        assert refused(fd="nosuch") == "File descriptor named 'nosuch' has not been found"
        assert refused(fd="x", socket=dm.path) == \
            "vsriov-daemon-pool 'p1' takes socket or fd, not both"
        assert refused() == "vsriov-daemon-pool 'p1' needs socket (or fd), pool and count"
        assert qmp.execute("query-vsriov-pools") == []
        assert dm.accepts == 0

        # The application's connection, passed: the pool claims over it.
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
            c.connect(dm.path)
            qmp.execute("getfd", {"fdname": "vpd"}, fds=[c.fileno()])
        wait_true("the daemon accepted the application's connection", lambda: dm.accepts == 1)
        add(pid="p0", fd="vpd", lazy=True)
        add_pf(vm)
        vm.vf_enable(1)
        dm.wait_for(("claim-received", 0))
        dm.gate(0)
        dm.wait_for(("claim-answered", 0))
        # (the fake VF is no vhost-vdpa device: the VF fails, its backend goes back)
        assert resets(vm.q, 1) == ["failed"]
        assert dm.accepts == 1

        # The daemon closes it (a restart): the next claim fails, and QEMU
        # does not connect to the daemon's socket.
        dm.drop()
        dm.wait_for(("closed",))
        assert vm.q.set_vfs(1)[1] and vm.q.vf_states == ["failed"]
        assert "the daemon closed the connection passed as fd 'vpd', and QEMU " \
               "cannot make it again" in vm.log(), vm.log()
        assert dm.accepts == 1
        vm.quit()
    finally:
        vm.close()
        dm.close()


def test_vf_enable_churn_on_a_lazy_daemon_pool(artifacts):
    """A guest flipping VF Enable of a lazy daemon pool as fast as it can,
    resetting its VFs and reading them while their claims come and go
    (the daemon answers at once; its fake VFs are no vhost-vdpa devices,
    so every VF that gets one fails, which swaps it): QEMU survives and
    answers, VF Enable reads what the guest wrote last, and once it is
    clear every VF the daemon handed out goes back."""
    dm = SlowDaemon(4)
    for i in range(100000):
        dm.gate(i)
    vm = QtestQemu(artifacts)
    try:
        q = vm.q
        vm.qmp.execute("object-add", {**daemon_pool(dm, 4), "lazy": True})
        add_pf(vm)
        cap = q.sriov_cap()
        rng = random.Random(36)
        for _ in range(300):
            what = rng.random()
            if what < 0.5:
                n = rng.randint(0, 2)
                q.write(1, 0, cap + SRIOV_CTRL, 2, 0)
                if n:
                    q.write(1, 0, cap + SRIOV_NUM_VF, 2, n)
                    q.write(1, 0, cap + SRIOV_CTRL, 2, VFE)
            elif what < 0.8 and q.vf_present(0):
                q.common(1, 1, C_STATUS, 1, 0)
                q.common(1, 1, C_STATUS, 1)
            else:
                time.sleep(rng.random() / 100)
        assert vm.qmp.execute("query-status")["status"] == "running"
        assert q.set_vfs(2)[1] and len(q.vf_states) == 2
        assert q.read(1, 0, cap + SRIOV_CTRL, 2) & VFE
        q.write(1, 0, cap + SRIOV_CTRL, 2, 0)
        assert not q.vf_present(0)
        print(f"{dm.claims} claims in the churn")
        assert dm.claims > 10, dm.claims
        # (backends that came for a VF Enable since cleared stay 10 s)
        wait_true("QEMU gave back every VF", lambda: fds_into(vm.proc.pid, dm.vf_dir) == 0,
                  timeout=60)
        vm.quit()
    finally:
        vm.close()
        dm.close()
