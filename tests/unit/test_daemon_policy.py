# SPDX-License-Identifier: GPL-2.0-or-later
"""The pools' policy as the real daemon applies it through its socket (the
daemon and its fixture are test_daemon.py's): pool a of its configuration
lets clients choose MACs (mac-policy = any), pool b has the default policy,
locked."""
import errno
import os
import subprocess

import pytest

from harness import vpd
from unit import test_daemon

daemon = test_daemon.daemon


def claim_one(c, pool, handover=False):
    ((vf, fd),) = c.claim(pool, 1, handover=handover)
    os.close(fd)
    return vf


def test_mac_policy_defaults_to_locked(daemon):
    with daemon.client() as c:
        vf = claim_one(c, "b")
        with pytest.raises(vpd.DaemonError) as e:
            c.set_attrs(vf["HANDLE"], mac="02:00:00:00:00:44")
        assert e.value.errno == 22
        assert e.value.message == "pool 'b' does not let clients change VF MACs"
        # Its own MAC, the daemon's, it may set (as QEMU does with the rest).
        out = c.set_attrs(vf["HANDLE"], mac=vf["MAC"], link_state=1)
        assert (out["MAC"], out["LINK_STATE"]) == (vf["MAC"], 1)


def test_mac_of_another_vf_is_refused(daemon):
    """No two VFs share a MAC: one another VF has (in any pool) or the
    daemon's MAC of another VF is EADDRINUSE; a VF's own is never in use."""
    with daemon.client() as c1, daemon.client() as c2:
        v1, v2 = claim_one(c1, "a"), claim_one(c2, "a")
        c1.set_attrs(v1["HANDLE"], vlan=100, mac="02:00:00:00:00:10")
        c1.set_attrs(v1["HANDLE"], vlan=101, mac="02:00:00:00:00:10")
        b_mac = next(v["MAC"] for v in c1.status() if v["POOL"] == "b")
        for mac, msg in (("02:00:00:00:00:10", "is in use by another VF"),
                         (b_mac, "is the daemon's MAC of another VF"),
                         (v1["MAC"], "is the daemon's MAC of another VF")):
            with pytest.raises(vpd.DaemonError) as e:
                c2.set_attrs(v2["HANDLE"], vlan=100, mac=mac)
            assert e.value.errno == errno.EADDRINUSE
            assert e.value.message == f"MAC {mac} {msg}"
        (now,) = c2.query()
        assert (now["MAC"], now["VLAN"]) == (v2["MAC"], 0)
        # Given up by the first VF, the MAC may go to the second.
        c1.set_attrs(v1["HANDLE"], mac="02:00:00:00:00:11")
        assert c2.set_attrs(v2["HANDLE"], mac="02:00:00:00:00:10")["MAC"] == \
            "02:00:00:00:00:10"


def test_mac_hands_over_with_the_sources_token_only():
    """mac-handover = token: a migration's destination may take the MAC of
    the source's VF only by showing the source connection's hand-over
    token, which the daemon gives in each CLAIM's REPLY to that connection
    alone.  The same uid and owner name are not enough, nor a made-up
    token, nor one's own; a token shown lends only its owner's MACs."""
    dm = test_daemon.make_daemon(config=test_daemon.CONFIG.replace(
        "mac-policy = any\n", "mac-policy = any\nmac-handover = token\n"))
    try:
        with dm.client() as src, dm.client() as dst, dm.client() as other:
            s, d, o = (claim_one(c, "a", handover=True) for c in (src, dst, other))
            tokens = (src.handover, dst.handover, other.handover)
            assert all(t and len(t) == 16 for t in tokens) and len(set(tokens)) == 3, tokens
            # (a client that does not ask gets none: it may not know the attribute)
            with dm.client() as old:
                claim_one(old, "b")
                assert old.handover is None
            src.set_attrs(s["HANDLE"], mac="02:00:00:00:00:33")
            for c, v, token in ((dst, d, None), (dst, d, bytes(16)), (dst, d, dst.handover),
                                (other, o, None), (other, o, other.handover)):
                with pytest.raises(vpd.DaemonError) as e:
                    c.set_attrs(v["HANDLE"], mac="02:00:00:00:00:33", handover=token)
                assert e.value.errno == errno.EADDRINUSE, (token, e.value)
            # The source's token lends the source's MACs, and no other VF's.
            out = dst.set_attrs(d["HANDLE"], mac="02:00:00:00:00:33", handover=src.handover)
            assert out["MAC"] == "02:00:00:00:00:33"
            with pytest.raises(vpd.DaemonError) as e:
                dst.set_attrs(d["HANDLE"], mac=o["MAC"], handover=src.handover)
            assert e.value.errno == errno.EADDRINUSE
            # (a later change keeps the MAC the destination took)
            assert dst.set_attrs(d["HANDLE"], vlan=101)["MAC"] == "02:00:00:00:00:33"
    finally:
        test_daemon.finish_daemon(dm)


def test_handed_over_vf_takes_the_sources_daemon_mac():
    """After a migration, SR-IOV CNI's DEL gives the destination's VF the MAC
    it had before ADD: the source VF's daemon MAC.  Once the source lets
    its VF go, the destination's VF has that daemon MAC for its own (the
    two VFs swap theirs), so the DEL is taken, also after a restart of the
    daemon (the state file); the source's VF is offered again at once,
    with the destination's former daemon MAC."""
    dm = test_daemon.make_daemon(config=test_daemon.CONFIG.replace(
        "mac-policy = any\n", "mac-policy = any\nmac-handover = token\n"))
    pod = "02:00:00:00:0a:01"
    dst = dm.client()       # (open while the daemon restarts: its claim stays)
    try:
        with dm.client() as src:
            s = claim_one(src, "a", handover=True)
            src.set_attrs(s["HANDLE"], mac=pod, vlan=100)            # the CNI's ADD
            d = claim_one(dst, "a")
            dst.set_attrs(d["HANDLE"], mac=pod, vlan=100, handover=src.handover)
            # (while the source holds it, its daemon MAC is its own)
            with pytest.raises(vpd.DaemonError) as e:
                dst.set_attrs(d["HANDLE"], mac=s["MAC"])
            assert e.value.errno == errno.EADDRINUSE, e.value
        test_daemon.wait_free(dm, "a", 2, timeout=10)                # the source QEMU ended
        log = dm.logtext()
        dm.stop()
        dm.start()
        with dm.client() as again:        # (the same process: its claim back)
            (v,) = again.query()
            assert (v["HANDLE"], v["MAC"]) == (d["HANDLE"], pod), v
            out = again.set_attrs(d["HANDLE"], mac=s["MAC"], vlan=0)  # the CNI's DEL
            assert out["MAC"] == s["MAC"], out
            with dm.client() as other:
                got = {v["VF_INDEX"]: v["MAC"] for v, fd in other.claim("a", 2)
                       if os.close(fd) is None}
            assert got[s["VF_INDEX"]] == d["MAC"], (got, s, d)
        assert f"VF {d['VF_INDEX']} of pool 'a' took over the MAC of VF {s['VF_INDEX']}" in log
    finally:
        test_daemon.finish_daemon(dm)
        dst.close()


def test_daemon_refuses_pools_sharing_a_vlan_on_its_bridge(tmp_path):
    conf = tmp_path / "vpd.conf"
    conf.write_text(f"[daemon]\nsocket = {tmp_path}/api.sock\nstate = {tmp_path}/state\n"
                    "ovs-bridge = br0\n[pf eni0np1]\nnum-vfs = 4\n"
                    "[pool a]\npf = eni0np1\nvfs = 0-1\nvlans = 100-199\n"
                    "[pool b]\npf = eni0np1\nvfs = 2-3\nvlans = 199-200\n")
    p = subprocess.run([test_daemon.daemon_binary(), "-c", str(conf),
                        "--fake-vhost-dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, **test_daemon.SAN_ENV))
    assert p.returncode == 1
    assert p.stdout == ""
    assert p.stderr == (f"vdpa-pool-daemon: {conf}:11: pool 'b' shares VLAN 199 with pool "
                        "'a' (line 7) on OVS bridge 'br0'\n")
    assert not os.path.exists(tmp_path / "api.sock")
