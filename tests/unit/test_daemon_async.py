# SPDX-License-Identifier: GPL-2.0-or-later
"""vdpa-pool-daemon with a datapath that answers late (issue 15: OVS off
the API's path).  The daemon's --fake-datapath MS[,N] stands for a slow
OVS: each VF change is answered after MS, in order, and VF N of any pool
does not open.  The real daemon (ASan/UBSan), the kernel faked as in
test_daemon.py; Level 1 does the same with a real, SIGSTOPped
ovs-vswitchd (tests/nested/test_l1_daemon.py)."""
import os
import select
import time

import pytest

from harness import vpd

from .test_daemon import finish_daemon, free_count, make_daemon, wait_free


@pytest.fixture
def slow():
    dm = make_daemon(args=["--fake-datapath", "1500,2"])
    yield dm
    finish_daemon(dm)


def test_a_claim_waiting_for_the_datapath_holds_up_no_other_client(slow):
    """While a's CLAIM waits for the datapath (1.5 s), b's QUERYs are
    answered, one after the other: ten of them before a's answer comes."""
    with slow.client() as a, slow.client() as b:
        t0 = time.monotonic()
        a.send_raw(vpd.encode(vpd.CLAIM, 1, [("POOL", "b"), ("OWNER", "vm-a"),
                                              ("COUNT", 1)]))
        answered = 0
        while answered < 10 and not select.select([a.sock], [], [], 0)[0]:
            assert b.query() == []
            answered += 1
        time_b = time.monotonic() - t0
        assert answered == 10, f"a's claim was answered after {answered} of b's QUERYs"
        t, seq, out, fds = a.recv_reply()
        took = time.monotonic() - t0
        for fd in fds:
            os.close(fd)
    print(f"claim answered after {took:.2f} s; another client's ten QUERYs meanwhile "
          f"in {time_b * 1000:.1f} ms")
    assert (t, seq, len(fds)) == (vpd.REPLY, 1, 1), out
    # It did wait for the datapath, which cannot answer before 1.5 s.
    assert took >= 1.5, took


def test_requests_sent_behind_a_pending_claim_are_answered_in_order(slow):
    with slow.client() as a:
        a.send_raw(vpd.encode(vpd.CLAIM, 1, [("POOL", "b"), ("OWNER", "vm-a"),
                                              ("COUNT", 1)]) +
                   vpd.encode(vpd.QUERY, 2, []))
        t1, seq1, _, fds = a.recv_reply()
        t2, seq2, out2, _ = a.recv_reply()
        for fd in fds:
            os.close(fd)
    assert (t1, seq1, t2, seq2) == (vpd.REPLY, 1, vpd.REPLY, 2)
    # The QUERY was read after the claim was answered: it sees the VF.
    assert [v["VF_INDEX"] for n, v in out2 if n == "VF"] == [3]


def test_a_client_gone_while_its_claim_is_pending_leaves_nothing_claimed(slow):
    a = slow.client()
    a.send_raw(vpd.encode(vpd.CLAIM, 1, [("POOL", "a"), ("OWNER", "vm-a"),
                                          ("COUNT", 2)]))
    # The claim is under way (the pool has the VFs); the client goes.
    deadline = time.monotonic() + 5
    while free_count(slow, "a") != 1:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    a.close()
    wait_free(slow, "a", 3, timeout=10)
    assert "went away: 2 VF(s) released" in slow.logtext()
    # The daemon goes on serving; the VFs are claimable again.
    with slow.client() as c:
        got = c.claim("a", 2)
        for _, fd in got:
            os.close(fd)


def test_a_vf_the_datapath_does_not_open_refuses_the_whole_claim(slow):
    with slow.client() as c:
        with pytest.raises(vpd.DaemonError) as e:
            c.claim("a", 3)      # VFs 0-2: the fake datapath refuses VF 2
        assert e.value.errno == 5
        assert e.value.message == "VF 2 of pool 'a': fake datapath: VF 2 does not open"
        assert c.query() == []
    wait_free(slow, "a", 3, timeout=10)


def test_attributes_the_datapath_took_are_kept_and_answered(slow):
    with slow.client() as c:
        ((vf, fd),) = c.claim("a", 1)
        os.close(fd)
        t0 = time.monotonic()
        got = c.set_attrs(vf["HANDLE"], vlan=150)
        # Answered once the datapath took it, which it cannot before 1.5 s.
        assert got["VLAN"] == 150 and time.monotonic() - t0 >= 1.5
        assert c.query()[0]["VLAN"] == 150


def test_status_does_not_wait_long_for_the_flows():
    """STATUS asks the datapath for each VF's flows and waits for them;
    when they do not come within 2 s (VPD_FLOWS_WAIT_MS) it answers
    without them, saying so, before the datapath does (3 s)."""
    for delay, expect in ((100, "fake flow of VF 0"),
                          (3000, "unknown: OVS did not answer in time")):
        dm = make_daemon(args=["--fake-datapath", str(delay)])
        try:
            with dm.client() as c:
                t0 = time.monotonic()
                st = c.status()
                took = time.monotonic() - t0
            vf0 = next(v for v in st if v["POOL"] == "a" and v["VF_INDEX"] == 0)
            print(f"STATUS with the datapath answering after {delay} ms: {took:.2f} s")
            assert vf0["FLOWS"] == [expect], vf0
            if delay > 2000:
                # It waited its 2 s for the flows (no less).
                assert took >= 2.0, took
        finally:
            finish_daemon(dm)
