# SPDX-License-Identifier: GPL-2.0-or-later
"""Golden messages of vdpa-pool-daemon's wire format (tests/golden/): the
tests' Python client, written from docs/daemon-protocol.md, builds exactly
these bytes and reads them back.  The daemon's C codec, which QEMU's
vsriov-daemon-pool compiles too (hw-virtio-sriov/vpd-wire/ links it), is
held to the same bytes by vdpa-pool-daemon/tests/test-protocol.c (in
test_meson_unit.py), so all three ends agree on one definition."""
import os
import struct

import pytest

from harness import paths, vpd

MAC = bytes([2, 0, 0, 0, 0, 1])
# name: (type, seq, attributes), as test-protocol.c builds them too
GOLDEN = {
    "claim": (vpd.CLAIM, 7, [("POOL", "tenant-a"),
                             ("OWNER", "/machine/peripheral/pf0/vf[0]"), ("COUNT", 1)]),
    "release": (vpd.RELEASE, 8, [("HANDLE", 3)]),
    "set-attrs": (vpd.SET_ATTRS, 9, [("HANDLE", 3), ("MAC", MAC), ("VLAN", 100), ("QOS", 5),
                                     ("VLAN_PROTO", 0x88a8), ("SPOOFCHK", 1), ("TRUST", 0),
                                     ("LINK_STATE", 2), ("MIN_TX_RATE", 10),
                                     ("MAX_TX_RATE", 1000), ("HANDOVER", bytes(range(16)))]),
    "query": (vpd.QUERY, 10, []),
    "reply-claim": (vpd.REPLY, 7, [("VF", [("HANDLE", 3), ("VF_INDEX", 2), ("MAC", MAC),
                                           ("SPOOFCHK", 1),
                                           ("VHOST_PATH", "/dev/vhost-vdpa-2")])]),
    "rep-open": (vpd.REP_OPEN, 12, [("HANDLE", 3)]),
    "rep-close": (vpd.REP_CLOSE, 13, [("HANDLE", 3)]),
    "reply-rep-open": (vpd.REPLY, 12, [("PORT", "vrvpd-sw0-0")]),
    # a guest's rule: TCP to 10.0.0.2:8080 from VF handle 3, to handle 4
    "flow-add": (vpd.FLOW_ADD, 14, [
        ("FLOW_ID", 7), ("PRIORITY", 0xfffe), ("HANDLE", 3),
        ("M_ETH_DST", bytes([2, 0, 0, 0, 0, 2]) + bytes([0xff] * 6)),
        ("M_ETH_TYPE", 0x0800), ("M_IP_PROTO", 6),
        ("M_IPV4_DST", bytes([10, 0, 0, 2, 255, 255, 255, 255])),
        ("M_L4_DST", bytes([0x1f, 0x90, 0xff, 0xff])), ("OUT", 4),
        ("VLAN_POP", 1), ("VLAN_PUSH", 100)]),
    "flow-del": (vpd.FLOW_DEL, 15, [("FLOW_ID", 7)]),
    "flow-stats": (vpd.FLOW_STATS, 16, [("FLOW_ID", 7)]),
    "reply-flow-stats": (vpd.REPLY, 16, [("PACKETS", 3), ("BYTES", (1 << 40) + 294)]),
    "vf-stats": (vpd.VF_STATS, 17, [("HANDLE", 3)]),
    "error": (vpd.ERROR, 11, [("ERRNO", 28),
                              ("MESSAGE", "pool 'a' has 0 free VF(s), 1 asked")]),
}


def golden():
    out = {}
    with open(os.path.join(paths.SRC, "tests", "golden", "vpd-messages.txt")) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                name, hexed = line.split()
                out[name] = bytes.fromhex(hexed)
    return out


def test_golden_file_names_every_message():
    assert sorted(golden()) == sorted(GOLDEN)


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_python_client_builds_and_reads_the_golden_bytes(name):
    msg_type, seq, attrs = GOLDEN[name]
    data = golden()[name]
    assert vpd.encode(msg_type, seq, attrs) == data
    magic, version, t, s, length = struct.unpack_from("<IHHII", data)
    assert (magic, version, t, s, length) == (vpd.MAGIC, vpd.VERSION, msg_type, seq,
                                              len(data) - vpd.HEADER)
    decoded = vpd.decode_attrs(data[vpd.HEADER:])
    assert [n for n, _ in decoded] == [n for n, _ in attrs]
    for (n, v), (_, want) in zip(decoded, attrs):
        if n == "VF":
            assert v["HANDLE"] == 3 and v["VHOST_PATH"] == "/dev/vhost-vdpa-2", v
        elif n == "MAC":
            assert v == ":".join(f"{b:02x}" for b in want)
        else:
            assert v == want
