# SPDX-License-Identifier: GPL-2.0-or-later
"""vdpa-pool-daemon's state faults and claim identity, against the real
daemon (ASan/UBSan) with the kernel faked, through its socket: the
fixture and helpers are test_daemon.py's.

A claim names its process by boot id, pid and start time: a process that
merely has the same pid (a recycled pid, or the state file of another
boot) gets nothing.  Pid recycling is not provoked here: the state file
is edited instead, so that the recorded start time or boot id is not the
live process's, which is what a recycled pid or a reboot looks like to the
daemon.

vhost-vdpa lets one process open a device at a time (others get EBUSY).
The fake backends of --fake-vhost-dir are plain files, which anyone may
open: with that option only, the daemon takes a fake device as held open
when someone holds an exclusive flock(2) on its file (hold() below stands
in for a VM that still has the device)."""
import fcntl
import glob
import os
import re
import subprocess
import uuid

import pytest

from harness import vpd

from . import test_daemon
from .test_daemon import SAN_ENV, daemon_binary, free_count, holder, poolctl

# test_daemon.py's fixtures: the daemon, and the clean-up of the holder's files.
daemon = test_daemon.daemon
_remove_harness_copy = test_daemon._remove_harness_copy

QUARANTINED = 3          # STATUS's COUNT of a quarantined VF


def path(dm, name):
    return os.path.join(dm.d, name)


def read(dm, name="state"):
    with open(path(dm, name)) as f:
        return f.read()


def write(dm, text, name="state"):
    with open(path(dm, name), "wb" if isinstance(text, bytes) else "w") as f:
        f.write(text)


def start_time(pid):
    """Field 22 of /proc/PID/stat, counted after the last ')'."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def into_snapshot(dm):
    """Restart the daemon and stop it: its claims are then in the snapshot
    (each start writes one and empties the journal)."""
    dm.stop()
    dm.start()
    dm.stop()


def reconnect(p):
    """The holder connects again; the handles it holds then."""
    p.stdin.write("reconnect\n")
    p.stdin.flush()
    return p.stdout.readline().split()


def hold(dm, dev):
    """An fd holding fake device dev as vhost-vdpa's one opener would."""
    fd = os.open(path(dm, os.path.join("dev", dev)), os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def states(dm):
    with dm.client() as c:
        return {f"{v['POOL']}-{v['VF_INDEX']}": v["COUNT"] for v in c.status()}


# ---- 1. claims name their process by boot, pid and start time ---------------

def test_state_records_boot_id_and_start_time(daemon):
    p = holder(daemon, "b", 1)
    p.stdout.readline()
    into_snapshot(daemon)
    text = read(daemon)
    with open("/proc/sys/kernel/random/boot_id") as f:
        assert f"boot-id={f.read().strip()}\n" in text
    assert f"pid={p.pid}\nstart-time={start_time(p.pid)}\n" in text
    assert "version=3\n" in text
    daemon.start()
    assert reconnect(p) != []           # the same process gets its claim back
    p.kill()


def test_claim_of_a_recycled_pid_is_not_adopted(daemon):
    p = holder(daemon, "b", 1)
    p.stdout.readline()
    into_snapshot(daemon)
    real = start_time(p.pid)
    text = read(daemon)
    assert f"start-time={real}\n" in text
    # The claimant of the state file started at another time: p is another
    # process that got its pid.
    write(daemon, text.replace(f"start-time={real}\n", f"start-time={real - 1}\n"))
    daemon.start()
    assert free_count(daemon, "b") == 1
    assert f"pid {p.pid} is another process now" in daemon.logtext()
    assert reconnect(p) == []
    p.kill()


def test_claims_of_another_boot_are_released(daemon):
    p = holder(daemon, "b", 1)
    p.stdout.readline()
    into_snapshot(daemon)
    text = read(daemon)
    boot = re.search(r"^boot-id=(\S+)$", text, re.M).group(1)
    write(daemon, text.replace(boot, str(uuid.uuid4())))
    daemon.start()
    assert free_count(daemon, "b") == 1
    assert "claimed during another boot of the host" in daemon.logtext()
    assert reconnect(p) == []
    p.kill()


OLD_STATE = """[state]
generation=3

[claim b 3]
owner=vm-old
uid=0
pid={pid}
mac=02:00:00:00:00:03
vlan=0
qos=0
vlan-proto=33024
spoofchk=true
trust=false
link-state=0
min-tx-rate=0
max-tx-rate=0

"""


def test_old_state_file_claims_are_released(daemon):
    """A state file of an older daemon names no boot and no start time:
    its claims cannot be given back safely, so they are released."""
    p = holder(daemon, "a", 1)
    p.stdout.readline()
    daemon.stop()
    write(daemon, OLD_STATE.format(pid=p.pid))
    os.unlink(path(daemon, "state.journal"))
    daemon.start()
    log = daemon.logtext()
    assert "[claim b 3]: the state file (format 1) does not say which process" in log
    assert free_count(daemon, "b") == 1 and free_count(daemon, "a") == 3
    assert reconnect(p) == []
    assert "version=3\n" in read(daemon)     # written in today's format
    p.kill()


# ---- 2. one daemon per state file and socket --------------------------------

def second_daemon(dm, *args):
    return subprocess.run([daemon_binary(), "-c", path(dm, "vpd.conf"),
                           "--fake-vhost-dir", path(dm, "dev"), *args],
                          capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, **SAN_ENV))


def test_second_instance_refused_without_touching_the_first(daemon):
    with daemon.client() as c:
        ((vf, fd),) = c.claim("a", 1, owner="vm1")
        os.close(fd)
        before = os.stat(daemon.sock)
        p = second_daemon(daemon)
        assert p.returncode == 1 and p.stdout == ""
        assert (f"another vdpa-pool-daemon (pid {daemon.proc.pid}) holds the lock "
                f"{daemon.d}/state.lock") in p.stderr, p.stderr
        # Another state file, the same socket: refused too.
        p = second_daemon(daemon, "--state", path(daemon, "state2"))
        assert p.returncode == 1
        assert (f"another vdpa-pool-daemon (pid {daemon.proc.pid}) holds the lock "
                f"{daemon.d}/api.sock.lock") in p.stderr, p.stderr
        after = os.stat(daemon.sock)
        assert (before.st_ino, before.st_ctime_ns) == (after.st_ino, after.st_ctime_ns)
        assert [v["HANDLE"] for v in c.query()] == [vf["HANDLE"]]
    assert free_count(daemon, "a") == 3
    assert "claimed by 'vm1'" in daemon.logtext()


# ---- 3. a state file that is not one ----------------------------------------

@pytest.mark.parametrize("content", [
    b"\0\0\0\0" + bytes(range(256)) * 4,                # binary garbage
    b"[claims]\nvf=1\n",                                # a key file, not ours
    b"[state]\nversion=99\ngeneration=1\nboot-id=x\n",  # a version we do not know
    b"",                                                # empty
], ids=["garbage", "foreign", "version", "empty"])
def test_invalid_state_file_moved_aside_and_held_vfs_quarantined(daemon, content):
    held = [hold(daemon, "b-3"), hold(daemon, "a-1")]
    try:
        daemon.stop()
        write(daemon, content)
        daemon.start()
        log = daemon.logtext()
        (aside,) = glob.glob(path(daemon, "state.corrupt-*"))
        with open(aside, "rb") as f:
            assert f.read() == content
        assert f"state file {daemon.d}/state is not a state file of this daemon" in log
        assert f"moved to {aside}" in log
        for vf in ("a-1", "b-3"):
            pool, n = vf.split("-")
            assert (f"VF {n} of pool '{pool}': {daemon.d}/dev/{vf} is held open by a process "
                    "the daemon does not know: quarantined") in log
        assert states(daemon) == {"a-0": 0, "a-1": QUARANTINED, "a-2": 0, "b-3": QUARANTINED}
        with daemon.client() as c:
            with pytest.raises(vpd.DaemonError) as e:
                c.claim("b", 1)
            assert e.value.errno == 28 and "pool 'b' has 0 free VF(s)" in e.value.message
            got = c.claim("a", 2)
            assert sorted(v["VF_INDEX"] for v, _ in got) == [0, 2]
            vpd.close_fds(fd for _, fd in got)
        text = poolctl("status", "--socket", daemon.sock).stdout
        assert re.search(r"^b +3 +quarantined ", text, re.M), text
    finally:
        vpd.close_fds(held)


def test_held_vf_quarantined_at_every_start(daemon):
    """Not only after a lost state: a free VF whose device someone holds is
    never offered (a restart probes again and frees it once let go)."""
    fd = hold(daemon, "a-0")
    daemon.stop()
    daemon.start()
    assert states(daemon)["a-0"] == QUARANTINED
    assert "state.corrupt" not in daemon.logtext()
    os.close(fd)
    daemon.stop()
    daemon.start()
    assert states(daemon)["a-0"] == 0
