# SPDX-License-Identifier: GPL-2.0-or-later
"""Level 1: what the daemon makes OVS's kernel datapath do to a VF's
frames, on frames.

vdpa-pool-daemon puts a netdevsim PF's VF representors on br-vpd and a
client holds every VF; the PF's netdev is the bridge's uplink, linked to a
netdevsim port in a namespace (the wire).  A VF's frames enter its
representor's receive path (harness/l1net.py says how) and are counted
where OVS stops or passes them (the flows' n_packets, the ingress
policer's counters) and where they come out (a packet socket on another
VF's representor, or on the wire): spoof checking on drops a foreign
source at the VF's deny flow and off lets it pass; a VF whose VLAN is
802.1ad sends onto the wire with an outer 802.1ad tag (its own 802.1Q tag
inside), one that is 802.1Q with an 802.1Q tag; max_tx_rate caps a stream
at the rate, the policer dropping the rest, and without it nothing is
policed."""
import os

import pytest

from harness import paths
from harness.l1net import ALLOW, DENY, Switch

pytestmark = [pytest.mark.slow, pytest.mark.nested]

BCAST = "ff:ff:ff:ff:ff:ff"


@pytest.fixture(scope="module")
def switch(l1host):
    sw = Switch(l1host).start()
    yield sw
    sw.stop()


def mac(vf):
    return f"02:00:00:00:00:{0x10 + vf:02x}"


def figures(lines):
    """Print the rate test's figures and keep them in the artifacts."""
    print("\n".join(lines))
    with open(os.path.join(paths.ARTIFACTS, "l1-datapath-rate.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def test_spoof_check_drops_a_foreign_source_and_off_lets_it_pass(switch):
    """VF 0 and VF 1 in VLAN 100.  With spoof checking on, VF 0's frames
    from its own MAC reach VF 1 through VF 0's allow flow, and the same
    frames from another source are counted by its deny flow and none
    reaches VF 1; with spoof checking off, they reach VF 1 through the
    allow flow."""
    for vf in (0, 1):
        assert switch.set_attrs(vf, vlan=100, mac=mac(vf), spoofchk=1) == f"OK {vf}"
    foreign = "02:00:00:00:00:99"

    def burst(src, marker, n=20):
        """n broadcast frames from VF 0 with source src: what reached VF 1
        (frames per source), and how many VF 0's allow and deny flows
        counted of them."""
        before = switch.flow_packets(ALLOW, 0), switch.flow_packets(DENY, 0)
        stop = switch.capture(1, marker)
        assert switch.send(0, BCAST, src, marker, count=n)["frames"] == n
        switch.wait_classified({0: sum(before) + n})
        got = {frame[4]: frame[5] for frame in stop()}
        return got, switch.flow_packets(ALLOW, 0) - before[0], \
            switch.flow_packets(DENY, 0) - before[1]

    assert burst(mac(0), "SPOOF-ON-OWN") == ({mac(0): 20}, 20, 0)
    assert burst(foreign, "SPOOF-ON-FOREIGN") == ({}, 0, 20)
    assert switch.set_attrs(0, spoofchk=0) == "OK 0"
    assert burst(foreign, "SPOOF-OFF-FOREIGN") == ({foreign: 20}, 20, 0)


def test_8021ad_vlan_leaves_with_an_outer_8021ad_tag(switch):
    """VF 2's VLAN 101 is 802.1ad, VF 3's VLAN 103 802.1Q.  On the wire,
    VF 2's untagged frames carry an outer 802.1ad tag (ethertype 0x88a8),
    VID 101, and the frames it tagged itself (802.1Q, VID 5) keep that tag
    inside it; VF 3's carry an 802.1Q tag, VID 103.  Set back to 802.1Q,
    VF 2's frames carry an 802.1Q tag."""
    assert switch.set_attrs(2, vlan=101, mac=mac(2), vlan_proto=0x88A8) == "OK 2"
    assert switch.set_attrs(3, vlan=103, mac=mac(3), vlan_proto=0x8100) == "OK 3"

    def on_the_wire(marker, frames):
        """Send frames [(vf, count, own tag or None)]: what the wire got,
        [(outer TPID, VID, inner TPID, VID, source, frames)]."""
        before = {vf: switch.vf_packets(vf) for vf, _, _ in frames}
        stop = switch.capture("wire", marker)
        for vf, n, tag in frames:
            assert switch.send(vf, BCAST, mac(vf), marker, count=n, vlan=tag)["frames"] == n
        switch.wait_classified({vf: before[vf] + sum(n for v, n, _ in frames if v == vf)
                                for vf in before})
        return sorted(stop())

    assert on_the_wire("QINQ", [(2, 10, None), (2, 7, (0x8100, 5)), (3, 5, None)]) == [
        (0x8100, 103, 0, 0, mac(3), 5),
        (0x88A8, 101, 0, 0, mac(2), 10),
        (0x88A8, 101, 0x8100, 5, mac(2), 7)]
    assert switch.set_attrs(2, vlan_proto=0x8100) == "OK 2"
    assert on_the_wire("DOT1Q", [(2, 10, None)]) == [(0x8100, 101, 0, 0, mac(2), 10)]


def test_max_tx_rate_caps_a_stream_and_without_it_nothing_is_policed(switch):
    """VF 4 with max_tx_rate 2 Mbit/s sends as fast as it can for 3 s: the
    representor's ingress policer (OVS's, with the daemon's burst of 100 ms
    at the rate) sees every frame and drops the excess, the rest reaches
    VF 4's allow flow, and what passes is close to the cap.  With
    max_tx_rate 0 (its pool has no cap) there is no policer and every frame
    passes."""
    cap, secs = 2, 3
    assert switch.set_attrs(4, vlan=102, mac=mac(4), max_tx_rate=cap) == "OK 4"
    pol0, allow0, seen0 = switch.police(4), switch.flow_packets(ALLOW, 4), switch.vf_packets(4)
    assert pol0 is not None and pol0["rate"] == f"{cap}Mbit", pol0
    sent = switch.send(4, BCAST, mac(4), "RATE", seconds=secs)
    offered = sent["bytes"] * 8 / sent["seconds"] / 1e6
    assert offered >= 5 * cap, f"the sender offered only {offered:.1f} Mbit/s: too little " \
        f"to show a cap of {cap} Mbit/s ({sent})"
    switch.l1.wait_until(f"tc -s filter show dev {switch.reps[4]} ingress | "
                         f"grep -q 'bytes {pol0['packets'] + sent['frames']} pkt'", timeout=30)
    dropped = switch.police(4)["dropped"] - pol0["dropped"]
    passed = sent["frames"] - dropped
    # What the policer let through, and only that, reached OVS's flows.
    switch.wait_classified({4: seen0 + passed})
    assert (switch.flow_packets(ALLOW, 4) - allow0, switch.vf_packets(4) - seen0) == \
        (passed, passed)
    rate = passed * sent["bytes"] / sent["frames"] * 8 / sent["seconds"] / 1e6
    capped = (f"max_tx_rate {cap} Mbit/s: offered {offered:.1f} Mbit/s for "
              f"{sent['seconds']:.2f} s ({sent['frames']} frames), the policer dropped "
              f"{dropped}, passed {passed}: {rate:.2f} Mbit/s")
    figures([capped])
    assert dropped > 0
    # At most the rate for the stream's time plus one burst (100 ms at the
    # rate); at least half the rate.
    assert 0.5 * cap <= rate <= 1.5 * cap * (1 + 0.1 / sent["seconds"]), \
        f"{rate:.2f} Mbit/s passed a cap of {cap} Mbit/s"

    assert switch.set_attrs(4, max_tx_rate=0) == "OK 4"
    assert switch.police(4) is None, switch.police(4)
    allow0, seen0 = switch.flow_packets(ALLOW, 4), switch.vf_packets(4)
    sent = switch.send(4, BCAST, mac(4), "UNCAPPED", seconds=secs)
    switch.wait_classified({4: seen0 + sent["frames"]})
    assert switch.flow_packets(ALLOW, 4) - allow0 == sent["frames"]
    rate = sent["bytes"] * 8 / sent["seconds"] / 1e6
    figures([capped, f"max_tx_rate 0: offered and passed {rate:.1f} Mbit/s "
                     f"({sent['frames']} frames)"])
    assert rate >= 5 * cap
