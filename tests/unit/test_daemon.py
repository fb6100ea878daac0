# SPDX-License-Identifier: GPL-2.0-or-later
"""vdpa-pool-daemon's API against the real daemon (built with ASan/UBSan),
with the kernel faked: --fake-vhost-dir serves plain files as the pooled
VFs' vhost-vdpa devices, so claims, fd passing, authorisation by peer
credentials, release on disconnect, the state file and restarts are tested
here; provisioning is tested against the real kernel at Level 1."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from harness import vpd

CONFIG = """
[daemon]
socket = {d}/api.sock
state = {d}/state
# Other users reach the socket: refusing them is the daemon's job here.
socket-mode = 0666
[pf eni0np1]
num-vfs = 4
vdpa-mgmtdev = vdpasim_net
[pool a]
pf = eni0np1
vfs = 0-2
allow-uids = 0
vlans = 100-199
mac-policy = any
[pool b]
pf = eni0np1
vfs = 3
"""
NOBODY = 65534
SAN_ENV = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=1",
           "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}


def daemon_binary():
    return os.path.join(os.environ["VSRIOV_BUILD_OURS"], "vdpa-pool-daemon", "vdpa-pool-daemon-asan")


class Daemon:
    def __init__(self, d, args=()):
        self.d = d
        self.sock = os.path.join(d, "api.sock")
        self.proc = None
        self.args = list(args)

    def start(self):
        self.log = open(os.path.join(self.d, "daemon.log"), "a")
        self.proc = subprocess.Popen(
            [daemon_binary(), "-c", os.path.join(self.d, "vpd.conf"),
             "--fake-vhost-dir", os.path.join(self.d, "dev"), *self.args],
            stdout=subprocess.PIPE, stderr=self.log, text=True,
            env=dict(os.environ, **SAN_ENV))
        line = self.proc.stdout.readline()
        assert line == "READY\n", f"daemon did not start: {line!r}\n{self.logtext()}"
        return self

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=30)
        self.log.close()
        assert rc == 0, f"daemon exited {rc}\n{self.logtext()}"

    def logtext(self):
        with open(os.path.join(self.d, "daemon.log")) as f:
            return f.read()

    def client(self):
        return vpd.Client(self.sock)


def make_daemon(daemon_keys="", args=(), config=CONFIG, pools=(("a", range(3)), ("b", [3]))):
    """A started daemon in a fresh folder; daemon_keys go into [daemon],
    args on its command line; pools are the (pool, VFs) of config."""
    # Not pytest's tmp_path: other users must reach the socket (their
    # refusal is the daemon's to give, not the file system's).
    d = tempfile.mkdtemp(prefix="vsriov-vpd-")
    os.chmod(d, 0o755)
    os.makedirs(os.path.join(d, "dev"))
    for pool, vfs in pools:
        for vf in vfs:
            with open(os.path.join(d, "dev", f"{pool}-{vf}"), "w") as f:
                f.write(f"{pool}-{vf}")
    with open(os.path.join(d, "vpd.conf"), "w") as f:
        f.write(config.format(d=d).replace("[daemon]\n", "[daemon]\n" + daemon_keys, 1))
    return Daemon(d, args).start()


def finish_daemon(dm):
    """Stop dm if it runs; it must not have reported a sanitizer error."""
    if dm.proc.poll() is None:
        dm.stop()
    log = dm.logtext()
    shutil.rmtree(dm.d)
    assert "ERROR: AddressSanitizer" not in log
    assert "runtime error" not in log


@pytest.fixture
def daemon():
    dm = make_daemon()
    yield dm
    finish_daemon(dm)


# A client in its own process, which claims and then waits, so that the
# test can kill it (or let it reconnect) like a QEMU.
HOLDER = """
import sys, time
sys.path.insert(0, {harness!r})
from harness import vpd
c = vpd.Client({sock!r})
got = c.claim({pool!r}, {n})
print(" ".join(str(v["HANDLE"]) for v, _ in got), flush=True)
line = sys.stdin.readline()
if line.startswith("reconnect"):
    c = vpd.Client({sock!r})
    print(" ".join(str(v["HANDLE"]) for v in c.query()), flush=True)
    sys.stdin.readline()
"""


_harness_copy = None


def harness_path():
    """A folder holding harness/vpd.py that any user can read: a client run
    as nobody must not depend on where the source tree was cloned (a clone
    in root's home is not readable by nobody)."""
    global _harness_copy
    if _harness_copy is None:
        d = tempfile.mkdtemp(prefix="vsr-harness-", dir="/tmp")
        os.mkdir(os.path.join(d, "harness"))
        for f in ("__init__.py", "vpd.py"):
            shutil.copy(os.path.join(os.path.dirname(vpd.__file__), f),
                        os.path.join(d, "harness", f))
        for root, dirs, files in os.walk(d):
            os.chmod(root, 0o755)
            for f in files:
                os.chmod(os.path.join(root, f), 0o644)
        _harness_copy = d
    return _harness_copy


@pytest.fixture(scope="module", autouse=True)
def _remove_harness_copy():
    yield
    global _harness_copy
    if _harness_copy:
        shutil.rmtree(_harness_copy, ignore_errors=True)
        _harness_copy = None


def holder(dm, pool, n, user=None):
    code = HOLDER.format(harness=harness_path(), sock=dm.sock, pool=pool, n=n)
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         user=user, group=user, extra_groups=[] if user else None)
    return p


def free_count(dm, pool):
    with dm.client() as c:
        return sum(1 for v in c.status() if v["POOL"] == pool and v["COUNT"] == 0)


def assert_released(dm, pool, n):
    """The daemon releases what a client held as it sees the client's
    connection close or its process exit, before it answers any request
    sent after that: the next one sees pool with n free VFs at once."""
    assert free_count(dm, pool) == n, f"pool {pool} not back to {n} free at the next request"


def wait_free(dm, pool, n, timeout):
    deadline = time.monotonic() + timeout
    while free_count(dm, pool) != n:
        assert time.monotonic() < deadline, f"pool {pool} not back to {n} free"
        time.sleep(0.01)
    return time.monotonic()


def test_claim_passes_vhost_fds(daemon):
    with daemon.client() as c:
        got = c.claim("a", 2, owner="vm1")
        for vf, fd in got:
            st = os.fstat(fd)
            path = os.path.join(daemon.d, "dev", f"a-{vf['VF_INDEX']}")
            assert vf["VHOST_PATH"] == path
            assert (st.st_dev, st.st_ino) == (os.stat(path).st_dev, os.stat(path).st_ino)
            assert vf["VLAN"] == 0 and vf["SPOOFCHK"] == 1  # the pool enforces it
        vpd.close_fds(fd for _, fd in got)
        assert sorted(v["HANDLE"] for v in c.query()) == sorted(v["HANDLE"] for v, _ in got)
        with pytest.raises(vpd.DaemonError) as e:
            c.claim("a", 2)
        assert e.value.errno == 28 and "pool 'a' has 1 free VF(s), 2 asked" in e.value.message
        with pytest.raises(vpd.DaemonError) as e:
            c.claim("nosuch", 1)
        assert e.value.errno == 2 and "no pool named 'nosuch'" in e.value.message
        # Release one explicitly; the other goes with the connection.
        c.release(got[0][0]["HANDLE"])
        assert free_count(daemon, "a") == 2
    assert_released(daemon, "a", 3)


def test_attributes_within_policy(daemon):
    with daemon.client() as c:
        ((vf, fd),) = c.claim("a", 1)
        os.close(fd)
        h = vf["HANDLE"]
        out = c.set_attrs(h, vlan=100, qos=3, mac="02:00:00:00:00:10", max_tx_rate=1000)
        assert (out["VLAN"], out["QOS"], out["MAC"], out["MAX_TX_RATE"]) == \
            (100, 3, "02:00:00:00:00:10", 1000)
        for attrs, msg in (({"vlan": 4095}, "VLAN 4095 is not a VLAN id (0-4094)"),
                           ({"vlan": 200}, "VLAN 200 is outside pool 'a''s range 100-199"),
                           ({"mac": "01:00:5e:00:00:01"}, "is not a unicast address"),
                           ({"trust": 1}, "pool 'a' does not allow trusted VFs")):
            with pytest.raises(vpd.DaemonError) as e:
                c.set_attrs(h, **attrs)
            assert e.value.errno == 22 and msg in e.value.message
        # Refused requests changed nothing.
        (now,) = c.query()
        assert (now["VLAN"], now["MAC"]) == (100, "02:00:00:00:00:10")
    # Released with the connection, the VF is back to its defaults.
    assert_released(daemon, "a", 3)
    with daemon.client() as c:
        assert all(v["VLAN"] == 0 for v in c.status())


def test_vf_stats_only_of_ones_own_vfs(daemon):
    """VF_STATS (a guest reading its VF's counters through QEMU): of a VF
    this connection claimed, a REPLY; with this daemon, which runs without
    OVS, without counters and saying why.  Another connection's VF, or
    none: refused."""
    with daemon.client() as c, daemon.client() as other:
        ((vf, fd),) = c.claim("a", 1)
        os.close(fd)
        out = c.request(vpd.VF_STATS, [("HANDLE", vf["HANDLE"])])[0]
        assert out == [("MESSAGE", "the daemon runs without OVS")]
        with pytest.raises(vpd.DaemonError) as e:
            other.request(vpd.VF_STATS, [("HANDLE", vf["HANDLE"])])
        assert e.value.errno == 1 and "is not claimed by this client" in e.value.message
        with pytest.raises(vpd.DaemonError) as e:
            c.request(vpd.VF_STATS, [("HANDLE", 999)])
        assert e.value.errno == 2 and e.value.message == "no VF has handle 999"


def test_unauthorised_peer_is_refused(daemon):
    p = holder(daemon, "a", 1, user=NOBODY)
    _, err = p.communicate(timeout=30)
    assert p.returncode != 0
    assert f"uid {NOBODY} gid {NOBODY} may not claim from pool 'a'" in err, err
    # Nor may it see everyone's claims, nor touch a VF it does not hold.
    code = ("import sys; sys.path.insert(0, %r); from harness import vpd\n"
            "c = vpd.Client(%r)\n"
            "for f in (c.status, lambda: c.release(0)):\n"
            "    try: f()\n"
            "    except vpd.DaemonError as e: print(e.errno, e.message)\n"
            % (harness_path(), daemon.sock))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         user=NOBODY, group=NOBODY, extra_groups=[], timeout=30).stdout
    assert "1 STATUS is for root only" in out
    assert "1 that VF is not claimed by this client" in out
    assert free_count(daemon, "a") == 3


def test_killed_client_releases_before_the_next_request(daemon):
    p = holder(daemon, "a", 2)
    assert len(p.stdout.readline().split()) == 2
    assert free_count(daemon, "a") == 1
    p.kill()
    p.wait()
    assert_released(daemon, "a", 3)


def test_garbage_closes_only_that_connection(daemon):
    with daemon.client() as c:
        c.send_raw(b"\0" * 16)
        with pytest.raises((ConnectionError, OSError)):
            c.recv_reply()
    with daemon.client() as c:
        c.send_raw(vpd.encode(vpd.CLAIM, 1, [("POOL", "a")])[:-2] + b"\xff\xff")
        with pytest.raises((ConnectionError, OSError)):
            c.recv_reply()
    assert free_count(daemon, "a") == 3


def test_restart_keeps_claims_and_gives_them_back(daemon):
    p = holder(daemon, "a", 2)
    handles = sorted(p.stdout.readline().split())
    daemon.stop()
    daemon.start()
    # Restored from the state file, held by nobody until pid reconnects.
    with daemon.client() as c:
        held = [v for v in c.status() if v["COUNT"] == 2]
    assert sorted(str(v["HANDLE"]) for v in held) == handles
    p.stdin.write("reconnect\n")
    p.stdin.flush()
    assert sorted(p.stdout.readline().split()) == handles
    assert free_count(daemon, "a") == 1
    p.kill()
    p.wait()
    assert_released(daemon, "a", 3)


def test_claims_of_a_process_gone_while_stopped_are_released(daemon):
    p = holder(daemon, "b", 1)
    p.stdout.readline()
    daemon.stop()
    p.kill()
    p.wait()
    daemon.start()
    assert free_count(daemon, "b") == 1
    # Found at load: the process of that pid is gone.
    assert f"[claim b 3]: pid {p.pid} is gone: released" in daemon.logtext()


def test_restored_claim_released_when_its_process_exits(daemon):
    p = holder(daemon, "b", 1)
    p.stdout.readline()
    daemon.stop()
    daemon.start()
    assert free_count(daemon, "b") == 0
    p.kill()           # never reconnected: its pidfd tells the daemon
    p.wait()
    assert_released(daemon, "b", 1)


def qemu(*args):
    from harness import paths
    return subprocess.run([paths.QEMU_BIN, "-M", "q35", "-nodefaults", "-display", "none",
                           *args], capture_output=True, text=True, timeout=120)


def qemu_qmp(cmds, *args):
    """QEMU with args, QMP on stdio: cmds run after qmp_capabilities, then
    quit; the process and each command's "return"."""
    cmds = [{"execute": "qmp_capabilities"}, *cmds, {"execute": "quit"}]
    p = subprocess.run(
        [paths_qemu(), "-M", "q35", "-nodefaults", "-display", "none", "-qmp", "stdio", *args],
        input="".join(json.dumps(c) + "\n" for c in cmds), capture_output=True,
        text=True, timeout=120)
    answers = [json.loads(line) for line in p.stdout.splitlines() if '"return"' in line]
    # (quit's own answer may not come before QEMU is gone)
    assert len(answers) >= len(cmds) - 1, (p.stdout, p.stderr)
    return p, [a["return"] for a in answers[1:len(cmds) - 1]]


def test_qemu_daemon_pool_errors_and_release(daemon):
    """QEMU's vsriov-daemon-pool: an unknown pool or a daemon that is not
    there stops QEMU with a sentence that says so; the VFs QEMU claimed go
    back to the pool when it exits (here: the fake fds are no vhost-vdpa
    devices, which QEMU says too)."""
    p = qemu("-object", f"vsriov-daemon-pool,id=p0,socket={daemon.sock},pool=nosuch,count=1")
    assert p.returncode == 1
    assert "vsriov-daemon-pool 'p0': the daemon refused: no pool named 'nosuch'" in p.stderr
    p = qemu("-object", f"vsriov-daemon-pool,id=p0,socket={daemon.d}/nosock,pool=a,count=1")
    assert p.returncode == 1
    assert "cannot connect to vdpa-pool-daemon at" in p.stderr
    p = qemu("-object", f"vsriov-daemon-pool,id=p0,socket={daemon.sock},pool=a,count=9")
    assert "the daemon refused: pool 'a' has 3 free VF(s), 9 asked" in p.stderr
    p = qemu("-object", f"vsriov-daemon-pool,id=p0,socket={daemon.sock},pool=a,count=2",
             "-device", "pcie-root-port,id=rp0", "-netdev", "user,id=n0",
             "-device", "virtio-net-pci,bus=rp0,id=pf0,netdev=n0,sriov-pool=p0")
    assert p.returncode == 1
    assert "Fail to query features from vhost-vDPA device" in p.stderr
    assert_released(daemon, "a", 3)
    assert "2 VF(s) claimed by 'p0@pid-" in daemon.logtext()


def test_qemu_query_of_a_daemon_pool_changes_nothing(daemon):
    """query-vsriov-pools reports a premapped daemon pool's VFs free
    without making their netdevs (it used to make them, as a side effect;
    here that fails loudly: the fake fds are no vhost-vdpa devices)."""
    p, answers = qemu_qmp([{"execute": "query-vsriov-pools"},
                           {"execute": "human-monitor-command",
                            "arguments": {"command-line": "info network"}}],
                          "-object", f"vsriov-daemon-pool,id=p0,socket={daemon.sock},pool=a,count=2")
    pools, network = answers
    assert [(q["id"], q["free"]) for q in pools] == [("p0", 2)], pools
    assert "p0.0" not in network and "vhost-vdpa" not in network, network
    assert "Fail to query features" not in p.stderr, p.stderr


BIG_CONFIG = """
[daemon]
socket = {d}/api.sock
state = {d}/state
[pf eni0np1]
num-vfs = 20
vdpa-mgmtdev = vdpasim_net
[pool big]
pf = eni0np1
vfs = 0-19
"""


def test_qemu_claims_a_large_pool_16_vfs_at_a_time():
    """QEMU takes at most 16 descriptors with one message (QIOChannelSocket):
    a premapped pool of 20 is claimed as 16 + 4, all of them usable; when
    the second CLAIM is refused, the first one's VFs go back as QEMU stops
    with the daemon's reason."""
    dm = make_daemon(config=BIG_CONFIG, pools=(("big", range(20)),))
    try:
        p, (pools,) = qemu_qmp(
            [{"execute": "query-vsriov-pools"}],
            "-object", f"vsriov-daemon-pool,id=p0,socket={dm.sock},pool=big,count=20")
        assert [(q["id"], q["free"], len(q["entries"])) for q in pools] == [("p0", 20, 20)], \
            (pools, p.stderr)
        log = dm.logtext()
        assert "16 VF(s) claimed by 'p0@pid-" in log and "4 VF(s) claimed by 'p0@pid-" in log, log
        assert_released(dm, "big", 20)
        p = qemu("-object", f"vsriov-daemon-pool,id=p0,socket={dm.sock},pool=big,count=21")
        assert p.returncode == 1
        assert "the daemon refused: pool 'big' has 4 free VF(s), 5 asked" in p.stderr, p.stderr
        assert_released(dm, "big", 20)
    finally:
        finish_daemon(dm)


def paths_qemu():
    from harness import paths
    return paths.QEMU_BIN


def test_qemu_has_one_deadline_per_daemon_request(tmp_path):
    """A daemon that answers a byte at a time (stuck, or hostile) cannot keep
    QEMU waiting past its deadline of 5 s for the whole request (each read
    used to get 5 s of its own: 16 bytes of header alone, 80 s)."""
    import socket as so
    import threading
    path = str(tmp_path / "slow.sock")
    srv = so.socket(so.AF_UNIX, so.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    stop = threading.Event()

    def trickle():
        conn, _ = srv.accept()
        conn.recv(4096)
        answer = vpd.encode(vpd.REPLY, 1, [])
        for b in answer:
            if stop.wait(2):
                break
            conn.send(bytes([b]))
        conn.close()

    t = threading.Thread(target=trickle, daemon=True)
    t.start()
    t0 = time.monotonic()
    p = qemu("-object", f"vsriov-daemon-pool,id=p0,socket={path},pool=a,count=1")
    took = time.monotonic() - t0
    stop.set()
    srv.close()
    assert p.returncode == 1
    assert f"vsriov-daemon-pool 'p0': {path} did not answer within 5 s" in p.stderr, p.stderr
    print(f"QEMU gave up after {took:.1f} s")
    # The deadline itself: QEMU waited its 5 s, and gave up long before
    # the whole reply came (16 bytes x 2 s); 30 s leaves room for its start.
    assert 5 <= took < 30, took


def test_state_file_round_trip_of_odd_owner_names(daemon):
    owner = " vm\t1\nwith\\odd [chars] = x "
    p = holder(daemon, "b", 1)
    p.stdout.readline()
    with daemon.client() as c:
        ((vf, fd),) = c.claim("a", 1, owner=owner)
        os.close(fd)
        c.set_attrs(vf["HANDLE"], vlan=150, mac="02:00:00:00:00:33")
        daemon.stop()
    # The connection above is gone but its process (this one) lives on.
    daemon.start()
    with daemon.client() as c:
        st = {v["HANDLE"]: v for v in c.status()}
    got = st[vf["HANDLE"]]
    assert (got["OWNER"], got["VLAN"], got["MAC"]) == (owner, 150, "02:00:00:00:00:33")
    p.kill()


def test_journal_compaction_and_torn_line(daemon):
    """Changes go to a journal that is compacted into a new snapshot now and
    then; after a restart the last value wins, and a last line cut short
    (a write the daemon did not finish) is ignored."""
    p = holder(daemon, "b", 1)
    p.stdout.readline()
    with daemon.client() as c:
        ((vf, fd),) = c.claim("a", 1, owner="vm-j")
        os.close(fd)
        for i in range(600):              # more than one journal's worth
            c.set_attrs(vf["HANDLE"], vlan=100 + i % 100)
        daemon.stop()
    with open(os.path.join(daemon.d, "state")) as f:
        gen = int(f.read().split("generation=")[1].split()[0])
    with open(os.path.join(daemon.d, "state.journal"), "a") as f:
        f.write(f"{gen} claim a 2 0 1 02:00:00")   # torn: no newline
    daemon.start()
    with daemon.client() as c:
        st = {v["HANDLE"]: v for v in c.status()}
    assert st[vf["HANDLE"]]["VLAN"] == 100 + 599 % 100
    assert st[vf["HANDLE"]]["OWNER"] == "vm-j"
    assert sum(1 for v in st.values() if v["COUNT"]) == 2      # a's and b's
    with open(os.path.join(daemon.d, "state")) as f:
        assert "\ngeneration=" in f.read()
    # A write cut short in the middle of the journal (the disk was full
    # for a moment): what comes after it must not merge with it.  The cut
    # part here looks like a whole record (of the old format, without
    # checksum): it is not taken for one either.
    with open(os.path.join(daemon.d, "state")) as f:
        gen = int(f.read().split("generation=")[1].split()[0])
    with daemon.client() as c:
        ((vf, fd),) = c.claim("a", 1, owner="vm-m")
        os.close(fd)
        c.set_attrs(vf["HANDLE"], vlan=150)
        with open(os.path.join(daemon.d, "state.journal"), "a") as f:
            f.write(f"{gen} free a {vf['VF_INDEX']}")         # no newline
        c.set_attrs(vf["HANDLE"], vlan=160)
        daemon.stop()
    daemon.start()
    with daemon.client() as c:
        st = {v["HANDLE"]: v for v in c.status()}
    assert (st[vf["HANDLE"]]["OWNER"], st[vf["HANDLE"]]["VLAN"]) == ("vm-m", 160)
    assert "record damaged or cut short, ignored" in daemon.logtext()
    p.kill()


def poolctl(*args, **kw):
    tool = os.path.join(os.environ["VSRIOV_BUILD_OURS"], "vdpa-pool-daemon", "vdpa-poolctl")
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=60, **kw)


def test_poolctl_status(daemon):
    import json
    with daemon.client() as c:
        ((vf, fd),) = c.claim("a", 1, owner="vm7")
        os.close(fd)
        c.set_attrs(vf["HANDLE"], vlan=120)
        j = json.loads(poolctl("status", "--json", "--socket", daemon.sock).stdout)
        assert len(j) == 4
        mine = next(e for e in j if e["handle"] == vf["HANDLE"])
        assert (mine["pool"], mine["state"], mine["owner"], mine["vlan"]) == \
            ("a", "claimed", "vm7", 120)
        assert mine["vhost"] == os.path.join(daemon.d, "dev", f"a-{vf['VF_INDEX']}")
        assert sum(e["state"] == "free" for e in j) == 3
        text = poolctl("status", "--socket", daemon.sock).stdout
        assert text.startswith("POOL") and "vm7" in text and "claimed" in text
    p = poolctl("status", "--socket", daemon.sock, user=NOBODY, group=NOBODY,
                extra_groups=[])
    assert p.returncode == 1
    assert p.stderr == "vdpa-poolctl: the daemon refused: STATUS is for root only\n"
    p = poolctl("status", "--socket", daemon.d + "/nosock")
    assert p.returncode == 1 and "cannot talk to the daemon at" in p.stderr
    assert poolctl("status", "--bogus").returncode == 2
