# SPDX-License-Identifier: GPL-2.0-or-later
"""Level 1: a switchdev PF whose VFs come from vdpa-pool-daemon, end to end
through QEMU (issue 34): the guest's representor objects become the
daemon's representor ports on OVS-DPDK.

OVS-DPDK and the daemon run as test_l1_daemon_reps.py sets them up (a
VDUSE PF; pool `sw` allows switchdev, pool `legacy` does not).  Our QEMU
runs with -accel qtest, its PF with sriov-eswitch=on and a
vsriov-daemon-pool of pool `sw`; tests/harness/qtest_pci.py plays the PF's
driver: VF Enable, VIRTIO_NET_F_ESWITCH, representor 0's queues, the
eswitch object, then VF 0's representor, which QEMU asks the daemon for
(REP_OPEN) and connects to the tap it gets.  A frame VF 0 sends on the
switch (an OpenFlow packet-out with VF 0's port as in_port) arrives on
representor 0's receive queue; a frame the driver sends on representor 0's
transmit queue enters the switch at the representor port (its in_port
flow counts it).  Destroying the representor removes the port (REP_CLOSE,
OVSDB polled), and a new one works again; QEMU gone, nothing is left.  A
QEMU whose pool does not allow switchdev gets EPERM for the representor
and no port is made."""
import json

import pytest

from harness.e2e import BRIDGE, DAEMON_LOG
# (OVS-DPDK and the daemon with pools sw and legacy, once per module)
from nested.test_l1_daemon_reps import host  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.slow, pytest.mark.nested]

QEMU = "/vsriov/qemu-build/qemu-system-x86_64"


def qemu_cmd(name, pool, count, extra=""):
    return (f"setsid {QEMU}{extra} -M q35 -nodefaults -display none -accel qtest "
            f"-qtest unix:/tmp/{name}-qt.sock,server=on,wait=off -qtest-log /dev/null "
            f"-qmp unix:/tmp/{name}-q.sock,server=on,wait=off "
            "-object memory-backend-memfd,id=mem0,size=256M,share=on "
            "-machine memory-backend=mem0 -m 256M "
            f"-object vsriov-daemon-pool,id=p0,socket=/run/vpd/api.sock,pool={pool},"
            f"count={count} "
            "-device pcie-root-port,id=rp0,chassis=1,addr=0x2 -netdev user,id=n0 "
            "-device virtio-net-pci,bus=rp0,id=pf0,netdev=n0,sriov-pool=p0,"
            f"sriov-eswitch=on > /scratch/qemu-{name}.log 2>&1 < /dev/null "
            f"& echo $! > /tmp/{name}.pid")


# Runs in Level 1: the PF's driver (qtest), QMP and OVS, step by step;
# prints one JSON object of what it saw.
DRIVER = r"""
import json, re, struct, subprocess, sys, time
sys.path.insert(0, "/src/tests")
from harness import vpd
from harness.qtest_pci import GROUP_SELF, Admin, QtestPci, Ring
BR, NAME = sys.argv[1], sys.argv[2]
CREATE, DESTROY, OBJ_ESWITCH, OBJ_REP = 0xA, 0xD, 0x205, 0x206
out = {}


def sh(cmd):
    return subprocess.run(cmd, shell=True, check=True, capture_output=True,
                          text=True).stdout.strip()


def qmp(cmd):
    r = json.loads(sh(f"python3 /src/tests/harness/qmp.py /tmp/{NAME}-q.sock {cmd}"))
    return r["return"]


def poll(what, cond, timeout=60):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out: {what}")
        time.sleep(0.05)


def ports():
    return sh(f"ovs-vsctl list-ports {BR}").split()


def ofport(port):
    return int(sh(f"ovs-vsctl get Interface {port} ofport"))


def n_packets(match):
    text = sh(f"ovs-ofctl -O OpenFlow14 --no-names dump-flows {BR} {match}")
    return sum(int(n) for n in re.findall(r"n_packets=(\d+)", text))


def frame(src, dst, mark):
    return (bytes.fromhex(dst.replace(":", "")) + bytes.fromhex(src.replace(":", "")) +
            b"\x88\xb5" + mark.encode().ljust(50, b"\0"))


def rep_create(a, rep_id, member):
    return a.run(CREATE, GROUP_SELF, 0,
                 struct.pack("<HxxIQHHIQ", OBJ_REP, rep_id, 0, 0, 0, member, 0),
                 timeout=30)[0]


# The flows of tables other than 0 (the connection's own):
# [(table, priority, match, actions, n_packets)].
def guest_flows():
    got = []
    for f in sh(f"ovs-ofctl -O OpenFlow14 --no-names dump-flows {BR}").splitlines():
        m = re.search(r"table=(\d+), n_packets=(\d+).*?(?:priority=(\d+),?)?(\S*) "
                      r"actions=(\S+)", f)
        if m and m.group(1) != "0":
            got.append((int(m.group(1)), int(m.group(3) or 32768), m.group(4),
                        m.group(5), int(m.group(2))))
    return got


def fobj(opcode, typ, oid, data=b""):
    flags = b"" if opcode == DESTROY else bytes(8)
    return a.run(opcode, GROUP_SELF, 0, struct.pack("<HxxI", typ, oid) + flags + data,
                 timeout=30)


# Rules of the guest's eswitch through QEMU into the daemon's table.
def flows():
    GROUP, CLS, RULE, QUERY = 0x200, 0x201, 0x202, 0xC
    out["rep2"] = rep_create(a, 1, 2)
    poll("two representor ports", lambda: len(
        [v for v in vpd.Client("/run/vpd/api.sock").status() if v.get("REP_PORT")]) == 2)
    vfs = sorted((v["VF_INDEX"], v["PORT"], v["REP_PORT"])
                 for v in vpd.Client("/run/vpd/api.sock").status() if v.get("REP_PORT"))
    (_, p0, r0), (_, p1, r1) = vfs
    out["group"] = fobj(CREATE, GROUP, 0, struct.pack("<HB5x", 0xfff5, 1))[0]
    # PORT (whole), ETH (the type only)
    cls = (struct.pack("<B7x", 2) + struct.pack("<BBxxB3x", 8, 0, 4) + b"\xff" * 4 +
           struct.pack("<BBxxB3x", 1, 0, 14) + bytes(12) + b"\xff\xff")
    out["classifier"] = fobj(CREATE, CLS, 0, cls)[0]

    def rule(src, action, port, ethertype=0x88b5, flags=0, tci=0):
        return (struct.pack("<IIBBBBHH", 0, 0, 0, 18, action, flags, port, tci) +
                struct.pack("<I", src) + bytes(12) + struct.pack(">H", ethertype))

    out["rule"] = fobj(CREATE, RULE, 0, rule(1, 5, 2))[0]
    out["table"] = [(prio, act) for (_, prio, m, act, _) in guest_flows()
                    if f"in_port={ofport(p0)}" in m and prio]
    # VF 0's frame of type 0x88b5 goes to VF 1's port; another to its
    # representor (the table's miss flow)
    sh(f"ovs-ofctl -O OpenFlow14 packet-out {BR} in_port={ofport(p0)},"
       f"packet={frame(vf0['mac'], '02:aa:00:00:00:02', 'rule').hex()},actions=table")
    poll("the rule counts the frame", lambda: any(
        n == 1 for (_, prio, m, act, n) in guest_flows() if prio and act == f"output:{ofport(p1)}"))
    st, res = fobj(QUERY, RULE, 0)
    out["query"] = [st, len(res)] + list(struct.unpack_from("<QQ", res, 16 + 18))
    rx.add()
    other = frame(vf0["mac"], "02:aa:00:00:00:03", "miss")
    other = other[:12] + b"\x88\xb6" + other[14:]
    sh(f"ovs-ofctl -O OpenFlow14 packet-out {BR} in_port={ofport(p0)},"
       f"packet={other.hex()},actions=table")
    out["miss"] = rx.used()[26:].rstrip(b"\0").decode()
    # refusals: the pool's VLANs (none but untagged), a representor in use
    out["vlan_push"] = fobj(CREATE, RULE, 1, rule(2, 5, 1, flags=2, tci=100))[0]
    out["rep_in_use"] = a.run(DESTROY, GROUP_SELF, 0, struct.pack("<HxxI", OBJ_REP, 1))[0]
    # the rule goes: so does its flow
    out["del"] = fobj(DESTROY, RULE, 0)[0]
    out["after_del"] = [f for f in guest_flows() if f[1]]
    out["again"] = fobj(CREATE, RULE, 0, rule(1, 1, 0))[0]
    out["drop_rule"] = [(prio, act) for (_, prio, m, act, _) in guest_flows()
                        if f"in_port={ofport(p0)}" in m and prio]


# The switchdev PF with a rule migrates to QEMU DST, on the same pool.
def migrate():
    GROUP, CLS, RULE, QUERY = 0x200, 0x201, 0x202, 0xC
    DST = NAME + "-dst"
    out["rep2"] = rep_create(a, 1, 2)
    out["group"] = fobj(CREATE, GROUP, 0, struct.pack("<HB5x", 0xfff5, 1))[0]
    cls = (struct.pack("<B7x", 2) + struct.pack("<BBxxB3x", 8, 0, 4) + b"\xff" * 4 +
           struct.pack("<BBxxB3x", 1, 0, 14) + bytes(12) + b"\xff\xff")
    out["classifier"] = fobj(CREATE, CLS, 0, cls)[0]
    out["rule"] = fobj(CREATE, RULE, 0,
                       struct.pack("<IIBBBBHH", 0, 0, 0, 18, 5, 0, 2, 0) +
                       struct.pack("<I", 1) + bytes(12) + struct.pack(">H", 0x88b5))[0]

    def mine(pid):
        return sorted((v["VF_INDEX"], v["PORT"], v.get("REP_PORT"))
                      for v in vpd.Client("/run/vpd/api.sock").status()
                      if v.get("OWNER", "").endswith(f"@pid-{pid}"))

    def rule_flows(p0, p1):
        return [(t, prio, act, n) for (t, prio, m, act, n) in guest_flows()
                if f"in_port={ofport(p0)}" in m and act == f"output:{ofport(p1)}"]

    def cross(p0, p1, n):
        sh(f"ovs-ofctl -O OpenFlow14 packet-out {BR} in_port={ofport(p0)},"
           f"packet={frame(vf0['mac'], '02:aa:00:00:00:02', 'rule').hex()},actions=table")
        poll("the rule counts the frame", lambda: [f[3] for f in rule_flows(p0, p1)] == [n])

    src_pid = int(open(f"/tmp/{NAME}.pid").read())
    (_, s0, _), (_, s1, _) = mine(src_pid)
    cross(s0, s1, 1)
    dst_pid = int(open(f"/tmp/{DST}.pid").read())
    poll("the destination's claims", lambda: len(mine(dst_pid)) == 2)
    ack = {"capabilities": [{"capability": "switchover-ack", "state": True},
                            {"capability": "return-path", "state": True}]}
    for side in (NAME, DST):
        sh(f"python3 /src/tests/harness/qmp.py /tmp/{side}-q.sock "
           f"migrate-set-capabilities '{json.dumps(ack)}'")
    sh(f"python3 /src/tests/harness/qmp.py /tmp/{DST}-q.sock migrate-incoming "
       f"'{json.dumps({'uri': f'unix:/tmp/{NAME}-mig.sock'})}'")
    qmp(f"migrate '{json.dumps({'uri': f'unix:/tmp/{NAME}-mig.sock'})}'")
    poll("the migration's end", lambda: qmp("query-migrate").get("status")
         in ("completed", "failed"), timeout=180)
    out["migration"] = qmp("query-migrate")["status"]
    # the destination: its own VFs, with representor ports and the rule
    pf = json.loads(sh(f"python3 /src/tests/harness/qmp.py /tmp/{DST}-q.sock "
                       "query-vsriov"))["return"][0]
    out["dst_mode"] = pf["eswitch-mode"]
    poll("the destination's representor ports",
         lambda: all(r for (_, _, r) in mine(dst_pid)))
    (_, d0, _), (_, d1, _) = mine(dst_pid)
    poll("the destination's rule in its table", lambda: len(rule_flows(d0, d1)) == 1)
    out["dst_rule"] = rule_flows(d0, d1)
    out["src_rule"] = rule_flows(s0, s1)
    cross(d0, d1, 1)
    # the driver, now on the destination, reads the rule's counters: the
    # source's and the destination's
    a.q = QtestPci(f"/tmp/{DST}-qt.sock")
    st, res = fobj(QUERY, RULE, 0)
    out["dst_query"] = [st] + list(struct.unpack_from("<QQ", res, 16 + 18))
    # the source goes: its table with it, the destination's stays
    sh(f"kill {src_pid}; while kill -0 {src_pid} 2>/dev/null; do sleep 0.05; done")
    poll("the source's table gone", lambda: not rule_flows(s0, s1))
    out["dst_rule_after"] = [f[:3] for f in rule_flows(d0, d1)]
    cross(d0, d1, 2)
    out["dst_query_after"] = list(struct.unpack_from("<QQ", fobj(QUERY, RULE, 0)[1], 16 + 18))


q = QtestPci(f"/tmp/{NAME}-qt.sock")
_, enabled = q.set_vfs(1 if sys.argv[3] == "refused" else 2)
rx, tx = Ring(3, 0x200000), Ring(4, 0x210000)
a = Admin(q, features=1 << 17, features2=1 << (72 - 64), rings=[rx, tx])
a.use(GROUP_SELF)
out["eswitch"] = a.run(CREATE, GROUP_SELF, 0,
                       struct.pack("<HxxIQQ", OBJ_ESWITCH, 0, 0, 0))[0]
ports_before = ports()
out["rep"] = rep_create(a, 0, 1)
if sys.argv[3] == "refused":
    out["ports_unchanged"] = ports() == ports_before
    out["representor"] = qmp("query-vsriov")[0]["vfs"][0].get("representor")
    print(json.dumps(out))
    raise SystemExit(0)

vf0 = qmp("query-vsriov")[0]["vfs"][0]
out["representor"] = vf0.get("representor")
if sys.argv[3] in ("flows", "migrate"):
    flows() if sys.argv[3] == "flows" else migrate()
    print(json.dumps(out))
    raise SystemExit(0)
(vf,) = [v for v in vpd.Client("/run/vpd/api.sock").status() if v.get("REP_PORT")]
port, rep = vf["PORT"], vf["REP_PORT"]
out["ports"] = [port, rep, rep in ports()]

# VF 0's frame on the switch -> representor 0's receive queue
rx.add()
sh(f"ovs-ofctl -O OpenFlow14 packet-out {BR} in_port={ofport(port)},"
   f"packet={frame(vf0['mac'], '02:aa:00:00:00:01', 'vf0-to-rep').hex()},actions=table")
got = rx.used()
out["rep_rx"] = [got[:12].hex(), got[12:12 + 14].hex(), got[26:].rstrip(b"\0").decode()]

# representor 0's transmit queue -> the switch, at the representor port
before = n_packets(f"in_port={ofport(rep)}")
tx.add(bytes(12) + frame("02:aa:00:00:00:01", vf0["mac"], "rep-to-vf0"))
tx.used()
poll("the representor port's in_port flow counts the frame",
     lambda: n_packets(f"in_port={ofport(rep)}") > before)
out["rep_tx_counted"] = n_packets(f"in_port={ofport(rep)}") - before
out["qmp_counters"] = {k: v for k, v in qmp("query-vsriov")[0]["vfs"][0]["representor"].items()
                       if k.endswith("packets")}

# the representor goes: so does its port; a new one works again
out["destroy"] = a.run(DESTROY, GROUP_SELF, 0, struct.pack("<HxxI", OBJ_REP, 0))[0]
poll("the representor port gone from OVSDB", lambda: rep not in ports())
out["after_destroy"] = [qmp("query-vsriov")[0]["vfs"][0].get("representor"),
                        vf["PORT"] in ports()]
out["again"] = rep_create(a, 1, 1)
poll("the representor port back", lambda: rep in ports())
out["again_netdev"] = qmp("query-vsriov")[0]["vfs"][0]["representor"]["netdev"]
print(json.dumps(out))
"""


def run_driver(l1, name, how):
    l1.check(f"cat > /tmp/eswitch_driver.py <<'EOF'\n{DRIVER}EOF")
    res = l1.run(f"python3 /tmp/eswitch_driver.py {BRIDGE} {name} {how}", timeout=240)
    assert res.ok, (f"{res}\n--- QEMU\n{l1.check(f'tail -20 /scratch/qemu-{name}.log')}"
                    f"\n--- daemon\n{l1.check(f'tail -30 {DAEMON_LOG}')}")
    return json.loads(res.stdout.splitlines()[-1])


def stop_qemu(l1, name):
    l1.check(f"kill $(cat /tmp/{name}.pid); "
             f"while kill -0 $(cat /tmp/{name}.pid) 2>/dev/null; do sleep 0.05; done",
             timeout=60)


def test_representor_through_qemu_and_the_daemon(host):
    l1 = host
    l1.check(qemu_cmd("esw", "sw", 2))
    try:
        out = run_driver(l1, "esw", "ok")
    finally:
        rep_ports = l1.check(f"ovs-vsctl list-ports {BRIDGE} | grep '^vr' || true").split()
        stop_qemu(l1, "esw")
    assert out["eswitch"] == 0 and out["rep"] == 0, out
    port, rep, on_bridge = out["ports"]
    assert rep == "vr" + port and on_bridge, out
    assert out["representor"]["netdev"] == "p0.rep0", out
    # the VF's frame, with the header QEMU writes (num_buffers 1)
    hdr, eth, mark = out["rep_rx"]
    assert hdr == "00" * 10 + "0100" and mark == "vf0-to-rep", out
    assert out["rep_tx_counted"] == 1, out
    assert out["qmp_counters"] == {"rx-packets": 1, "tx-packets": 1}, out
    assert out["destroy"] == 0 and out["after_destroy"] == [None, True], out
    assert out["again"] == 0 and out["again_netdev"] == "p0.rep0", out
    assert rep_ports == [rep], rep_ports
    # QEMU gone: its connection and its taps with it, so is the port
    l1.wait_until(f"! ovs-vsctl list-ports {BRIDGE} | grep -q '^vr'", timeout=30)


def test_rules_through_qemu_and_the_daemon(host):
    """Issue 35 between QEMU and the daemon: a rule the driver creates
    (group, classifier, rule: VF 1's frames of EtherType 0x88b5 to VF 2)
    becomes a flow of the daemon's table for this QEMU's connection; a
    frame VF 1 sends with that type crosses to VF 2's port and the rule's
    QUERY counts it as OVS does; another type misses and reaches
    representor 0.  A VLAN push outside the pool's VLANs is the daemon's
    EPERM; a representor that a rule names cannot go; the rule destroyed,
    its flow goes; QEMU gone, the table is empty."""
    l1 = host
    l1.check(qemu_cmd("esf", "sw", 2))
    try:
        out = run_driver(l1, "esf", "flows")
    finally:
        stop_qemu(l1, "esf")
    assert [out[k] for k in ("eswitch", "rep", "rep2", "group", "classifier", "rule")] \
        == [0] * 6, out
    vf1 = out["table"]
    assert len(vf1) == 1 and vf1[0][0] == 0xfff6 and vf1[0][1].startswith("output:"), out
    assert out["query"] == [0, 16 + 18 + 16, 1, 64], out
    assert out["miss"] == "miss", out
    assert out["vlan_push"] == 1, out         # EPERM
    assert out["rep_in_use"] == 22, out        # EINVAL (INVALID_COMMAND)
    assert out["del"] == 0 and out["after_del"] == [], out
    assert out["again"] == 0 and out["drop_rule"] == [[0xfff6, "drop"]], out
    # the daemon's reason reaches the host's log
    assert ("virtual SR-IOV PF 'pf0': rule 1: FLOW_ADD: vsriov-daemon-pool 'p0': the "
            "daemon refused: VLAN_PUSH 100 is outside pool 'sw''s range 0-0"
            in l1.check("cat /scratch/qemu-esf.log"))
    # QEMU gone: nothing of its rules is left in the switch
    l1.wait_until(f"test -z \"$(ovs-ofctl -O OpenFlow14 dump-flows {BRIDGE} | "
                  f"grep -v 'table=0,' | grep -v 'NXST\\|OFPST')\"", timeout=30)


def test_switchdev_pf_with_rules_migrates_on_the_daemon_pool(host):
    """Issues 34 and 35 across a migration with a daemon pool: a switchdev
    PF with representors of VFs 0 and 1 and a rule (VF 0's frames of type
    0x88b5 to VF 1) migrates to a QEMU on the same pool.  The
    destination's own VFs get representor ports and the rule in its own
    table; a frame crosses there, and the rule's QUERY on the destination
    counts the source's frame and this one.  The source gone, its table
    goes; the destination's rule stays and counts on."""
    l1 = host
    l1.check(qemu_cmd("esm", "sw", 2))
    l1.check(qemu_cmd("esm-dst", "sw", 2, extra=" -incoming defer"))
    try:
        out = run_driver(l1, "esm", "migrate")
    finally:
        log = l1.check("cat /scratch/qemu-esm-dst.log")
        l1.check("kill $(cat /tmp/esm.pid) 2>/dev/null; true")
        stop_qemu(l1, "esm-dst")
    assert [out[k] for k in ("eswitch", "rep", "rep2", "group", "classifier", "rule")] \
        == [0] * 6, out
    assert out["migration"] == "completed" and out["dst_mode"] == "switchdev", out
    # the destination's table: the rule at its priority, output to its VF 1
    ((table, prio, _, _),) = out["dst_rule"]
    assert prio == 0xfff6 and table not in [t for (t, *_) in out["src_rule"]], out
    # the source's frame, then the destination's, then one more
    assert out["dst_query"] == [0, 2, 128], out
    assert out["dst_rule_after"] == [out["dst_rule"][0][:3]], out
    assert out["dst_query_after"] == [3, 192], out
    # (the VFs' MACs are refused: this pool hands none over, which
    # test_l1_migration's does; the rule and the representors are not)
    assert "rule" not in log and "representor" not in log, log
    l1.wait_until(f"test -z \"$(ovs-ofctl -O OpenFlow14 dump-flows {BRIDGE} | "
                  f"grep -v 'table=0,' | grep -v 'NXST\\|OFPST')\"", timeout=30)


def test_pool_without_switchdev_refuses_the_representor(host):
    l1 = host
    l1.check(qemu_cmd("esl", "legacy", 1))
    try:
        out = run_driver(l1, "esl", "refused")
    finally:
        stop_qemu(l1, "esl")
    # EPERM (status 1), the mode stays, no port and no representor made
    assert out["eswitch"] == 0 and out["rep"] == 1, out
    assert out["ports_unchanged"] and out["representor"] is None, out
    # the reason reaches the host's log, in one sentence
    log = l1.check("cat /scratch/qemu-esl.log")
    assert ("virtual SR-IOV PF 'pf0': representor 0: vsriov-daemon-pool 'p0': the "
            "daemon refused: pool 'legacy' gives no representor ports (switchdev = no)"
            in log), log
