# SPDX-License-Identifier: GPL-2.0-or-later
"""REP_OPEN and REP_CLOSE (docs/daemon-protocol.md) against the real
daemon (ASan/UBSan) with the kernel faked: who may give which VF a
representor port, and when it goes.  --fake-vhost-dir makes each "tap" a
socket; the tap, its OVS port and flows are Level 1's
(tests/nested/test_l1_daemon_reps.py)."""
import errno
import os
import stat
import time

import pytest

from harness import vpd

from .test_daemon import CONFIG, finish_daemon, make_daemon

# pool a gives representor ports, pool b does not (the default)
SWITCHDEV = CONFIG.replace("mac-policy = any\n", "mac-policy = any\nswitchdev = yes\n", 1) \
                  .replace("[daemon]\n", "[daemon]\novs-bridge = br-test\n", 1)


@pytest.fixture
def daemon():
    dm = make_daemon(config=SWITCHDEV)
    yield dm
    finish_daemon(dm)


def refused(fn, *args):
    with pytest.raises(vpd.DaemonError) as e:
        fn(*args)
    return e.value.errno, e.value.message


def rep_ports(c):
    """Each VF's representor port as STATUS shows it."""
    return {v["HANDLE"]: v.get("REP_PORT") for v in c.status()}


def test_rep_open_gives_a_port_and_an_fd_and_close_takes_it(daemon):
    c = daemon.client()
    (vf, fd), = c.claim("a", 1)
    os.close(fd)
    h = vf["HANDLE"]
    port, tap = c.rep_open(h)
    try:
        # named after the VF (fake: its vDPA device's name)
        assert port == f"vrvpd-eni0np1-{vf['VF_INDEX']}"
        assert stat.S_ISSOCK(os.fstat(tap).st_mode)
        assert [v.get("PORT") for v in c.query()] == [port]
        assert rep_ports(c)[h] == port
        assert refused(c.rep_open, h) == (
            errno.EEXIST, f"VF {vf['VF_INDEX']} of pool 'a' has a representor port already "
                          f"({port})")
    finally:
        os.close(tap)
    c.rep_close(h)
    assert rep_ports(c)[h] is None
    assert "PORT" not in c.query()[0]
    assert refused(c.rep_close, h) == (
        errno.ENOENT, f"VF {vf['VF_INDEX']} of pool 'a' has no representor port")
    # and again: a port once closed may be made anew
    port2, tap = c.rep_open(h)
    os.close(tap)
    assert port2 == port


def test_rep_open_refusals_change_nothing(daemon):
    c, other = daemon.client(), daemon.client()
    (va, fd), = c.claim("a", 1)
    os.close(fd)
    (vb, fd), = c.claim("b", 1)
    os.close(fd)
    before = c.status()
    # a pool without switchdev
    assert refused(c.rep_open, vb["HANDLE"]) == (
        errno.EPERM, "pool 'b' gives no representor ports (switchdev = no)")
    # another connection's VF, and a VF nobody holds
    assert refused(other.rep_open, va["HANDLE"]) == (
        errno.EPERM, f"VF {va['VF_INDEX']} of pool 'a' is not claimed by this client")
    free = next(v["HANDLE"] for v in before if v["COUNT"] == 0 and v["POOL"] == "a")
    assert refused(c.rep_open, free)[0] == errno.EPERM
    assert refused(other.rep_close, va["HANDLE"])[0] == errno.EPERM
    # no such handle
    assert refused(c.rep_open, 4096) == (errno.ENOENT, "no VF has handle 4096")
    assert refused(c.rep_close, 4096)[0] == errno.ENOENT
    assert c.status() == before
    # a REP_OPEN without HANDLE
    with pytest.raises(vpd.DaemonError) as e:
        c.request(vpd.REP_OPEN, [])
    assert e.value.errno == errno.EINVAL
    assert c.status() == before


def test_release_and_disconnect_remove_the_port(daemon):
    c = daemon.client()
    got = c.claim("a", 2)
    for _, fd in got:
        os.close(fd)
    h0, h1 = (v["HANDLE"] for v, _ in got)
    for h in (h0, h1):
        os.close(c.rep_open(h)[1])
    c.release(h0)
    admin = daemon.client()
    assert rep_ports(admin)[h0] is None and rep_ports(admin)[h1]
    c.close()
    # the connection's VFs are released: no representor port left
    deadline = time.monotonic() + 10
    while any(rep_ports(admin).values()):
        assert time.monotonic() < deadline, rep_ports(admin)
        time.sleep(0.01)
    assert "representor port vrvpd-eni0np1-" in daemon.logtext()
