# SPDX-License-Identifier: GPL-2.0-or-later
"""The daemon's OpenFlow 1.4 encoder (vdpa-pool-daemon/src/openflow.c)
checked by Open vSwitch itself.  of-dump prints the messages the daemon
sends (its own flows, for PF index 1, VF 3: OpenFlow port 1004): OVS's
decoder (`ovs-ofctl ofp-print`) must read each as exactly what the daemon
means, with no decode error; and where ofp-print does not show every field
(a flow stats request's cookie), OVS's own encoding of the same request,
caught by a fake switch, must be the same bytes."""
import os
import shutil
import socket
import struct
import subprocess

import pytest

SAN_ENV = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=1",
           "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}
OVS_OFCTL = shutil.which("ovs-ofctl")
NEED_OFCTL = ("ovs-ofctl missing: it comes with Debian's openvswitch-common, one of the host "
              "packages scripts/lib.sh host_ensure installs (scripts/build-ours runs it)")


def cookie(kind, pf, vf):
    """The daemon's cookies: "VP" | kind | PF index | VF index."""
    return 0x5650 << 48 | kind << 40 | pf << 16 | vf


def rule_cookie(table, flow_id):
    """A guest's rule: "VP" | 8 | its client's table | FLOW_ID."""
    return 0x5650 << 48 | RULE << 40 | table << 32 | flow_id


DENY, ALLOW, OTHERS, REP_DENY, TO_REP, FROM_REP, MISS, RULE = 1, 2, 3, 4, 5, 6, 7, 8
TABLE = 5           # the client's table of rules in of-dump
VF4_PORT = 1005     # VF 4 of the second [pf]
MAGIC, MAGIC_MASK = 0x5650 << 48, 0xffff << 48
ALL_BUT_KIND = ((1 << 64) - 1) & ~(0xff << 40)
VF_PORT = 1004      # VF 3 of the second [pf]: 1 * 1000 + 3 + 1
REP_PORT = 1504     # its representor port: 1 * 1000 + 500 + 3 + 1
MAC = "02:00:00:00:00:10"


def flow_mod(xid, text):
    return f"OFPT_FLOW_MOD (OF1.4) (xid={xid:#x}): {text}"


def add(xid, match, kind, actions):
    """An ADD as the daemon means it: table 0, counters reset."""
    return flow_mod(xid, f"ADD {match} cookie:{cookie(kind, 1, 3):#x} reset_counts "
                    f"actions={actions}")


def delete(xid, c, mask, table=255):
    """A non-strict DELETE by cookie in table (255: every table, as the
    daemon deletes its own flows): any match, any priority."""
    return flow_mod(xid, f"DEL table:{table} priority=0 cookie:{c:#x}/{mask:#x} actions=drop")


def bundle_ctrl(xid, kind):
    return f"OFPT_BUNDLE_CONTROL (OF1.4) (xid={xid:#x}):\n bundle_id=0x9 type={kind} flags=atomic"


def bundle_add(xid, inner):
    """The inner message carries the bundle message's xid (OVS refuses it
    otherwise: OFPBFC_MSG_BAD_XID)."""
    return f"OFPT_BUNDLE_ADD_MESSAGE (OF1.4) (xid={xid:#x}):\n bundle_id=0x9 flags=atomic\n{inner}"


ALLOW_MAC = f"priority=100,in_port={VF_PORT},dl_src={MAC}"
EXPECTED = {
    # No version bitmap: OVS reads "every version up to 1.4", as the
    # specification says.
    "hello": "OFPT_HELLO (OF1.4) (xid=0x1):\n version bitmap: 0x01, 0x02, 0x03, 0x04, 0x05",
    "echo_reply": "OFPT_ECHO_REPLY (OF1.4) (xid=0x22): 4 bytes of payload\n"
                  "00000000  de ad be ef                                     |....            |",
    "barrier_request": "OFPT_BARRIER_REQUEST (OF1.4) (xid=0x2):",
    # ofp-print shows neither cookie nor mask of a flow stats request:
    # test_flow_stats_request_as_ovs_encodes_it checks those.  Every table:
    # a VF's miss flow is in its client's table of rules.
    "flow_stats_request": "OFPST_FLOW request (OF1.4) (xid=0x3):",
    "delete_all": delete(4, MAGIC, MAGIC_MASK),
    "add_others": flow_mod(5, f"ADD priority=0 cookie:{cookie(OTHERS, 0, 0):#x} reset_counts "
                           "actions=NORMAL"),
    "add_deny": add(6, f"priority=10,in_port={VF_PORT}", DENY, "drop"),
    "add_allow_mac": add(7, ALLOW_MAC, ALLOW, "NORMAL"),
    "add_allow": add(8, f"priority=100,in_port={VF_PORT}", ALLOW, "NORMAL"),
    "delete_allow": delete(9, cookie(ALLOW, 1, 3), (1 << 64) - 1),
    "bundle_open": bundle_ctrl(10, "OPEN_REQUEST"),
    "bundle_add_delete_allow": bundle_add(11, delete(11, cookie(ALLOW, 1, 3), (1 << 64) - 1)),
    "bundle_add_allow_mac": bundle_add(12, add(12, ALLOW_MAC, ALLOW, "NORMAL")),
    "bundle_commit": bundle_ctrl(13, "COMMIT_REQUEST"),
    "bundle_discard": bundle_ctrl(14, "DISCARD_REQUEST"),
    "add_rep_deny": add(15, f"priority=10,in_port={REP_PORT}", REP_DENY, "drop"),
    "add_to_rep": add(16, f"priority=100,in_port={VF_PORT}", TO_REP, f"output:{REP_PORT}"),
    "add_from_rep": add(17, f"priority=100,in_port={REP_PORT}", FROM_REP,
                        f"output:{VF_PORT}"),
    # Its client has rules (table 5): the VF goes through that table, whose
    # miss flow sends to the representor port as before.
    "add_to_table": add(18, f"priority=100,in_port={VF_PORT}", TO_REP, f"goto_table:{TABLE}"),
    "add_miss": add(19, f"table:{TABLE} priority=0,in_port={VF_PORT}", MISS,
                    f"output:{REP_PORT}"),
    "delete_miss": delete(20, cookie(MISS, 1, 3), (1 << 64) - 1),
    # A guest's rules: in_port the daemon's, priority PRIORITY + 1, every
    # match field of the contract, pop, push + set_field (4296 = 0x1000 |
    # 200: OFPVID_PRESENT), output.
    "add_rule_tcp": flow_mod(
        21, f"ADD table:{TABLE} priority=65521,tcp,in_port={VF_PORT},dl_vlan=100,"
        "dl_src=02:00:00:00:00:00/ff:ff:ff:00:00:00,dl_dst=02:00:00:00:00:20,"
        "nw_src=10.0.0.0/8,nw_dst=10.1.2.3,tp_src=0x400/0xfc00,tp_dst=80 "
        f"cookie:{rule_cookie(TABLE, 42):#x} reset_counts "
        f"actions=pop_vlan,push_vlan:0x8100,set_field:4296->vlan_vid,output:{VF4_PORT}"),
    # an EtherType without a VLAN id: untagged frames only (vlan_tci 0/0x1fff)
    "add_rule_udp6_drop": flow_mod(
        22, f"ADD table:{TABLE} priority=8,udp6,in_port={VF_PORT},vlan_tci=0x0000/0x1fff,"
        "ipv6_src=fd00::1,"
        f"ipv6_dst=fd00::/64,tp_dst=53 cookie:{rule_cookie(TABLE, 43):#x} reset_counts "
        "actions=drop"),
    # a hairpin (OUT = HANDLE): OVS drops output to a frame's own in_port
    "add_rule_hairpin": flow_mod(
        26, f"ADD table:{TABLE} priority=8,udp6,in_port={VF_PORT},vlan_tci=0x0000/0x1fff,"
        "ipv6_src=fd00::1,"
        f"ipv6_dst=fd00::/64,tp_dst=53 cookie:{rule_cookie(TABLE, 43):#x} reset_counts "
        "actions=IN_PORT"),
    "delete_rule": delete(23, rule_cookie(TABLE, 42), (1 << 64) - 1, TABLE),
    # a client's whole table: "VP" | 8 | 5, any FLOW_ID
    "delete_table": delete(24, rule_cookie(TABLE, 0), 0xffffffff00000000, TABLE),
    "rule_stats_request": f"OFPST_FLOW request (OF1.4) (xid=0x19): table={TABLE}",
}


def of_dump():
    tool = os.path.join(os.environ["VSRIOV_BUILD_OURS"], "vdpa-pool-daemon", "of-dump")
    p = subprocess.run([tool], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, **SAN_ENV))
    assert p.returncode == 0 and not p.stderr, p.stdout + p.stderr
    return dict(line.split(" ", 1) for line in p.stdout.splitlines())


def run_ofp_print(hexbytes):
    assert OVS_OFCTL, NEED_OFCTL
    return subprocess.run([OVS_OFCTL, "ofp-print", hexbytes], capture_output=True, text=True,
                          timeout=60)


def ofp_print(hexbytes):
    """OVS's reading of one message, which it must read whole and without
    complaint.  ovs-ofctl exits 0 even when it cannot decode a message:
    what it cannot read it marks with "***" (and may warn on stderr)."""
    p = run_ofp_print(hexbytes)
    assert p.returncode == 0 and not p.stderr and "***" not in p.stdout, p.stdout + p.stderr
    return p.stdout.rstrip("\n")


@pytest.fixture(scope="module")
def messages():
    return of_dump()


def test_of_dump_has_every_message(messages):
    assert sorted(messages) == sorted(EXPECTED)


@pytest.mark.parametrize("name", EXPECTED)
def test_ovs_decodes_it_as_meant(messages, name):
    assert ofp_print(messages[name]) == EXPECTED[name]


def test_decode_errors_are_seen(messages):
    """ofp_print() would see a message OVS cannot read: a bundled flow_mod
    whose xid is not its bundle message's, a message one byte too long."""
    m = bytearray.fromhex(messages["bundle_add_allow_mac"])
    m[16 + 7] ^= 1   # the inner header's xid
    p = run_ofp_print(m.hex())
    assert "***decode error: OFPBFC_MSG_BAD_XID***" in p.stdout, p.stdout + p.stderr
    m = bytearray.fromhex(messages["flow_stats_request"]) + b"\0"
    m[2:4] = struct.pack("!H", len(m))
    p = run_ofp_print(m.hex())
    assert "***decode error: OFPBRC_BAD_LEN***" in p.stdout, p.stdout + p.stderr
    assert "incorrect length 57" in p.stderr


def ovs_encoding(tmp_path, *args):
    """The first request ovs-ofctl (OpenFlow 1.4) sends to a switch for
    args, caught by a fake switch on a unix socket that only says hello."""
    assert OVS_OFCTL, NEED_OFCTL
    path = str(tmp_path / "switch.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(1)
    srv.settimeout(30)
    p = subprocess.Popen([OVS_OFCTL, "-O", "OpenFlow14", "--no-names", args[0],
                          "unix:" + path, *args[1:]],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        conn, _ = srv.accept()
        conn.settimeout(30)
        buf = b""

        def message():
            nonlocal buf
            while len(buf) < 8 or len(buf) < struct.unpack("!H", buf[2:4])[0]:
                data = conn.recv(65536)
                assert data, "ovs-ofctl closed the connection: " + p.stderr.read().decode()
                buf += data
            n = struct.unpack("!H", buf[2:4])[0]
            m, buf = buf[:n], buf[n:]
            return m

        assert message()[:2] == b"\x05\x00"                   # its hello
        conn.sendall(bytes.fromhex("0500000800000001"))      # ours: 1.4
        m = message()
        conn.close()
        return m
    finally:
        p.kill()
        p.wait()
        srv.close()


def without_xid(m):
    return m[:4] + b"\0\0\0\0" + m[8:]


def test_flow_stats_request_as_ovs_encodes_it(messages, tmp_path):
    """`vdpa-poolctl status` asks for one VF's flows: every kind of cookie
    of PF index 1, VF 3, in every table."""
    ovs = ovs_encoding(tmp_path, "dump-flows",
                       f"cookie={cookie(0, 1, 3):#x}/{ALL_BUT_KIND:#x}")
    ours = bytes.fromhex(messages["flow_stats_request"])
    assert without_xid(ours) == without_xid(ovs), (ours.hex(), ovs.hex())


def test_rule_stats_request_as_ovs_encodes_it(messages, tmp_path):
    """FLOW_STATS asks for one rule's counters: its exact cookie in its table."""
    ovs = ovs_encoding(tmp_path, "dump-flows", f"table={TABLE},cookie={rule_cookie(TABLE, 42):#x}/-1")
    ours = bytes.fromhex(messages["rule_stats_request"])
    assert without_xid(ours) == without_xid(ovs), (ours.hex(), ovs.hex())


@pytest.mark.parametrize("name,flow", [
    ("add_deny", f"cookie={cookie(DENY, 1, 3):#x},priority=10,in_port={VF_PORT},"
                 "reset_counts,actions=drop"),
    ("add_allow_mac", f"cookie={cookie(ALLOW, 1, 3):#x},{ALLOW_MAC},reset_counts,"
                      "actions=NORMAL"),
    ("add_allow", f"cookie={cookie(ALLOW, 1, 3):#x},priority=100,in_port={VF_PORT},"
                  "reset_counts,actions=NORMAL"),
    ("add_others", f"cookie={cookie(OTHERS, 0, 0):#x},priority=0,reset_counts,"
                   "actions=NORMAL"),
    ("add_to_table", f"cookie={cookie(TO_REP, 1, 3):#x},priority=100,in_port={VF_PORT},"
                     f"reset_counts,actions=goto_table:{TABLE}"),
    # (a guest's rules are checked by decoding only: OVS orders the OXM
    # fields of a match its own way, which OpenFlow leaves free)
])
def test_flow_mod_add_as_ovs_encodes_it(messages, tmp_path, name, flow):
    """OVS encodes the same ADD the same, but for one field that does not
    matter here: output's max_len, which only says how much of a packet
    goes to a controller; the daemon's is OFPCML_NO_BUFFER, OVS's 0."""
    ovs = without_xid(ovs_encoding(tmp_path, "add-flow", flow))
    ours = without_xid(bytes.fromhex(messages[name]))
    if b"\xff\xff\xff\xfa" in ours:   # output:NORMAL
        at = ours.index(b"\xff\xff\xff\xfa") + 4
        assert ours[at:at + 2] == b"\xff\xff" and ovs[at:at + 2] == b"\0\0"
        ours = ours[:at] + b"\0\0" + ours[at + 2:]
    assert ours == ovs, (ours.hex(), ovs.hex())


@pytest.mark.parametrize("name,match", [
    ("delete_all", f"cookie={MAGIC:#x}/{MAGIC_MASK:#x}"),
    ("delete_allow", f"cookie={cookie(ALLOW, 1, 3):#x}/-1"),
    ("delete_rule", f"table={TABLE},cookie={rule_cookie(TABLE, 42):#x}/-1"),
    ("delete_table", f"table={TABLE},cookie={rule_cookie(TABLE, 0):#x}/0xffffffff00000000"),
])
def test_flow_mod_delete_as_ovs_encodes_it(messages, tmp_path, name, match):
    """The same, but for priority, which a non-strict DELETE ignores: the
    daemon's is 0, OVS's its default, 0x8000."""
    ovs = without_xid(ovs_encoding(tmp_path, "del-flows", match))
    ours = without_xid(bytes.fromhex(messages[name]))
    assert ours[30:32] == b"\0\0" and ovs[30:32] == b"\x80\0"
    assert ours[:30] + ours[32:] == ovs[:30] + ovs[32:], (ours.hex(), ovs.hex())
