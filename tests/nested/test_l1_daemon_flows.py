# SPDX-License-Identifier: GPL-2.0-or-later
"""Level 1: a guest's offloaded rules (FLOW_ADD, FLOW_DEL, FLOW_STATS,
issue 35) in vdpa-pool-daemon's OpenFlow tables on real OVS-DPDK with
VDUSE VFs, as test_l1_daemon_reps.py sets them up (its `host` fixture),
with pool `sw` widened to VFs 0-2 and VLANs 100-199.

The protocol's Python client plays two QEMUs ("VMs"): A claims VFs 0 and
1, B VF 2, each opens its VFs' representor ports.  First the paths work:
A's rule VF0 -> VF1 forwards a frame that an OpenFlow packet-out injects
with VF 0's port as in_port (actions=table: OVS's classifier takes it as
VF 0's) to VF 1's port (ofproto/trace), counted by FLOW_STATS as OVS's
own dump-flows counts it; a frame no rule matches goes to VF 0's
representor port (read from its tap) and the forwarded one does not; a
drop rule counts its frame, which reaches no tap; a VLAN push within the
pool's range is taken.  Then where it is stopped: a rule naming B's VF
(as HANDLE or as OUT) is EPERM, a VLAN push outside the range EPERM, and
OVS holds nothing of them (A's table's cookies); 1100 rules: the 1025th
is ENOSPC (max-flows' default), OVS holds 1024; B's representor port
closed, its VF's rule is gone; A's connection closed, its table is empty
(dump-flows) and B's rule is still there.

Then ovs-vswitchd restarts (it forgets every flow) while two clients have
rules: the daemon makes each client's table again (rules and miss flows,
logged one line each), a frame through A's rule counts again, and
FLOW_STATS, read all along, never goes backwards: OVS's new counters come
on top of what it counted before.

Last, the daemon restarted with max-flow-changes = 2: A's churn of
deletes and adds, retried at once on each refusal, runs into EAGAIN, and
B's CLAIM is answered within QEMU's 5 s between two of A's EAGAINs.  A
rate that low is reached however slow OVS's bundles are on a loaded
machine (one change would have to take 0.5 s), where 50 a second was not
(OVS-DPDK's bundle takes ~13 ms in this emulated host on a quiet
machine, several times that on a loaded one)."""
import json

import pytest

from harness.e2e import BRIDGE, DAEMON_LOG, daemon_binary, start_daemon, stop_daemon
from harness.ovs import L1_VSWITCHD_DPDK
# (OVS-DPDK and the daemon, once per module)
from nested.test_l1_daemon_reps import host  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.slow, pytest.mark.nested]

CONF = f"""[daemon]
socket = /run/vpd/api.sock
state = /var/lib/vpd/state
ovs-bridge = {BRIDGE}
[pf sw0]
num-vfs = 3
vdpa-mgmtdev = vduse
vduse-msg-timeout = 120
[pool sw]
pf = sw0
vfs = 0-2
allow-uids = 0
switchdev = yes
vlans = 100-199
"""
# The churn's: one connection's changes go to OVS one at a time, so a
# client reaches the limit only if OVS makes a change in less than 1/rate
# s; 2 a second is reached unless a change takes 0.5 s.
CHURN_RATE = 2
CHURN_CONF = CONF + f"max-flow-changes = {CHURN_RATE}\n"

# What both scripts below use in Level 1: the API's client, what OVS shows.
COMMON = r"""
import errno, json, os, re, select, statistics, subprocess, sys, threading, time
sys.path.insert(0, "/src/tests")
from harness import vpd
BR = sys.argv[1]
SOCK = "/run/vpd/api.sock"
RULE = 8
out = {}


def sh(cmd):
    return subprocess.run(cmd, shell=True, check=True, capture_output=True,
                          text=True).stdout.strip()


def ofport(port):
    return int(sh(f"ovs-vsctl get Interface {port} ofport"))


def table_flows(table):
    # {cookie: (priority, match, actions, n_packets, n_bytes)} of a table
    text = sh(f"ovs-ofctl -O OpenFlow14 --no-names dump-flows {BR} table={table}")
    got = {}
    for line in text.splitlines():
        m = re.search(r"cookie=(0x[0-9a-f]+),.*n_packets=(\d+), n_bytes=(\d+),.*"
                      r"priority=(\d+),?(\S*) actions=(\S+)", line)
        if m:
            got[int(m.group(1), 16)] = (int(m.group(4)), m.group(5), m.group(6),
                                        int(m.group(2)), int(m.group(3)))
    return got


def rule_cookie(table, flow_id):
    return 0x5650 << 48 | RULE << 40 | table << 32 | flow_id


def rule_ids(table):
    # the FLOW_IDs of the rules OVS holds in table
    return sorted(c & 0xffffffff for c in table_flows(table)
                  if c >> 40 == (0x5650 << 8 | RULE))


CTL = "$(ls /run/openvswitch/ovs-vswitchd*.$(cat /run/openvswitch/ovs-vswitchd.pid).ctl)"


def dp_names():
    return {m.group(2): m.group(1) for m in
            re.finditer(r"^\s+(\S+) \d+/(\d+):", sh(f"ovs-appctl -t {CTL} dpif/show"), re.M)}


def trace(port, dst, ethertype):
    # the datapath actions of a frame to dst entering at port, names for ports
    text = sh(f"ovs-appctl -t {CTL} ofproto/trace {BR} "
              f"in_port={ofport(port)},dl_dst={dst},dl_type={ethertype:#x}")
    acts = re.search(r"^Datapath actions: (.*)$", text, re.M).group(1)
    names = dp_names()
    return re.sub(r"\b(\d+)\b", lambda m: names.get(m.group(1), m.group(1)), acts)


def frame(dst, ethertype, mark):
    return (bytes.fromhex(dst.replace(":", "")) + bytes.fromhex("02aa00000001") +
            ethertype.to_bytes(2, "big") + mark.encode().ljust(50, b"\0"))


def packet_out(port, data):
    sh(f"ovs-ofctl -O OpenFlow14 packet-out {BR} "
       f"in_port={ofport(port)},packet={data.hex()},actions=table")


def read_marks(fd, until, timeout=30):
    # the marks of our frames (EtherTypes 0x88b5-0x88b7) read from a tap,
    # up to and with until
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not select.select([fd], [], [], 0.5)[0]:
            continue
        data = os.read(fd, 65536)
        if len(data) >= 14 and data[12:14] in (b"\x88\xb5", b"\x88\xb6", b"\x88\xb7"):
            seen.append(data[14:].rstrip(b"\0").decode())
            if seen[-1] == until:
                return seen
    return seen + ["(timed out)"]


def poll(what, fn, timeout=30):
    deadline = time.monotonic() + timeout
    while not fn():
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: not within {timeout} s")
        time.sleep(0.05)


def refused(fn, *args, **kw):
    try:
        fn(*args, **kw)
    except vpd.DaemonError as e:
        return [e.errno, e.message]
    return None


def table_of(c, handle):
    # the client's table, as STATUS shows it ("table=T: N rule(s) ...")
    for v in vpd.Client(SOCK).status():
        if v["HANDLE"] == handle:
            for f in v["FLOWS"]:
                m = re.match(r"table=(\d+): (\d+) rule", f)
                if m:
                    return int(m.group(1)), int(m.group(2))
    return None, None


def timed_claim(c):
    t0 = time.monotonic()
    (vf, fd), = c.claim("sw", 1, owner="vm-b")
    os.close(fd)
    return vf, time.monotonic() - t0
"""

# Runs in Level 1: the two clients and what OVS shows, step by step;
# prints one JSON object of what it saw.
CLIENT = COMMON + r"""
a, b = vpd.Client(SOCK), vpd.Client(SOCK)
(va0, fa0), (va1, fa1) = a.claim("sw", 2, owner="vm-a")
os.close(fa0)
os.close(fa1)
h0, h1 = va0["HANDLE"], va1["HANDLE"]
p0, p1 = "vpd-sw0-%d" % va0["VF_INDEX"], "vpd-sw0-%d" % va1["VF_INDEX"]
rep0, tap0 = a.rep_open(h0)
rep1, tap1 = a.rep_open(h1)
(vb, fb), = b.claim("sw", 1, owner="vm-b")
os.close(fb)
hb = vb["HANDLE"]
pb = "vpd-sw0-%d" % vb["VF_INDEX"]
repb, tapb = b.rep_open(hb)
out["ports"] = [p0, p1, pb, rep0, rep1, repb]

# -- the paths work ------------------------------------------------------
FWD_DST, DROP_DST, MISS_DST = "02:bb:00:00:00:01", "02:bb:00:00:00:02", "02:bb:00:00:00:03"
t0 = time.monotonic()
a.flow_add(1, 10, h0, out=h1, eth_dst=(FWD_DST, "ff:ff:ff:ff:ff:ff"), eth_type=0x88b5)
out["first_add_s"] = time.monotonic() - t0
a.flow_add(2, 20, h0, eth_type=0x88b6)                             # drop
a.flow_add(3, 30, h0, out=h1, eth_type=0x88b7, vlan_push=150)      # push, in range
b.flow_add(1, 10, hb, eth_type=0x88b6)                              # B's own rule
ta, na = table_of(a, h0)
tb, nb = table_of(b, hb)
out["tables"] = [ta, na, tb, nb]
out["table0_vf0"] = sh(f"ovs-ofctl -O OpenFlow14 --no-names dump-flows {BR} "
                       f"table=0,in_port={ofport(p0)}")
out["a_flows"] = {hex(k): v for k, v in table_flows(ta).items()}
out["poolctl"] = sh(os.environ["VPD_POOLCTL"] + " status --socket " + SOCK)

packet_out(p0, frame(FWD_DST, 0x88b5, "fwd"))
packet_out(p0, frame(DROP_DST, 0x88b6, "drop"))
packet_out(p0, frame(MISS_DST, 0x88b5, "miss"))
out["marks_at_tap0"] = read_marks(tap0, "miss")
out["stats"] = {i: list(a.flow_stats(i)) for i in (1, 2, 3)}
out["ovs_counts"] = {i: list(table_flows(ta)[rule_cookie(ta, i)][3:5]) for i in (1, 2, 3)}
out["trace_fwd"] = trace(p0, FWD_DST, 0x88b5)
out["trace_miss"] = trace(p0, MISS_DST, 0x88b5)
out["trace_push"] = trace(p0, MISS_DST, 0x88b7)
out["trace_drop"] = trace(p0, DROP_DST, 0x88b6)

# -- where it is stopped ---------------------------------------------------
ids_before = rule_ids(ta)
out["refused"] = {
    "other_handle": refused(a.flow_add, 10, 10, hb, eth_type=0x88b5),
    "other_out": refused(a.flow_add, 11, 10, h0, out=hb, eth_type=0x88b8),
    "push_outside": refused(a.flow_add, 12, 10, h0, out=h1, eth_type=0x88b9, vlan_push=300),
    "exists": refused(a.flow_add, 1, 10, h0, eth_type=0x88ba),
    "no_such_rule": refused(a.flow_stats, 99),
    "b_deletes_a": refused(b.flow_del, 2),
}
out["ids_before_after"] = [ids_before, rule_ids(ta), rule_ids(tb)]

# -- 1100 rules: the 1025th ENOSPC -----------------------------------------
for i in (1, 2, 3):
    a.flow_del(i)
results, add_s, eagain = [], [], 0
for n in range(1100):
    while True:
        t0 = time.monotonic()
        try:
            a.flow_add(1000 + n, 5, h0, eth_type=0x88b5,
                       eth_dst=("02:dd:00:00:%02x:%02x" % (n >> 8, n & 0xff),
                                "ff:ff:ff:ff:ff:ff"))
            add_s.append(time.monotonic() - t0)
            results.append(0)
            break
        except vpd.DaemonError as e:
            if e.errno == errno.EAGAIN:     # paced by max-flow-changes
                eagain += 1
                time.sleep(0.005)
                continue
            results.append(e.errno)
            if len(results) == 1025:
                out["enospc_message"] = e.message
            break
out["many"] = {"ok": results.count(0), "first_refused": results.index(errno.ENOSPC) + 1,
               "refusals": sorted(set(results) - {0}), "in_ovs": len(rule_ids(ta)),
               "eagain_while_adding": eagain, "status": table_of(a, h0)}
out["flow_add_ms"] = {"median": statistics.median(add_s) * 1000,
                      "p90": sorted(add_s)[int(len(add_s) * 0.9)] * 1000,
                      "max": max(add_s) * 1000}

# -- B's representor port closed, its VF claimed again -----------------------
b.rep_close(hb)
out["b_after_rep_close"] = rule_ids(tb)       # its VF's rules went with the port
os.close(tapb)
b.release(hb)
vb, _ = timed_claim(b)
hb = vb["HANDLE"]
repb, tapb = b.rep_open(hb)
b.flow_add(2, 10, hb, eth_type=0x88b6)
tb, _ = table_of(b, hb)

# -- A closes: its table empty, B's rule still there -------------------------
a.close()
os.close(tap0)
os.close(tap1)
poll("A's table empty", lambda: table_flows(ta) == {}, 60)
out["after_close"] = {"a_table": table_flows(ta), "b_ids": rule_ids(tb), "b_table": tb}
b.close()
os.close(tapb)
print(json.dumps(out))
"""

# Runs in Level 1, the daemon on CHURN_CONF: A churns its rule 1000 (a
# delete, an add, again), retrying each refusal at once, while B claims
# a VF; prints one JSON object.
CHURN = COMMON + r"""
a, b = vpd.Client(SOCK), vpd.Client(SOCK)
(va, fa), = a.claim("sw", 1, owner="vm-a")
os.close(fa)
h0 = va["HANDLE"]
_, tap0 = a.rep_open(h0)
vb, claim_before = timed_claim(b)       # unloaded
b.release(vb["HANDLE"])
a.flow_add(1000, 5, h0, eth_type=0x88b5, eth_dst=("02:dd:00:00:00:00", "ff:ff:ff:ff:ff:ff"))
churn = {"ok": 0, "eagain": 0}
stop = threading.Event()


def churner():
    while not stop.is_set():
        for fn, args in ((a.flow_del, (1000,)),
                         (a.flow_add, (1000, 5, h0))):
            while not stop.is_set():
                try:
                    if fn == a.flow_add:
                        fn(*args, eth_type=0x88b5, eth_dst=("02:dd:00:00:00:00",
                                                            "ff:ff:ff:ff:ff:ff"))
                    else:
                        fn(*args)
                    churn["ok"] += 1
                    break
                except vpd.DaemonError as e:
                    if e.errno != errno.EAGAIN:
                        raise
                    churn["eagain"] += 1
                    churn["message"] = e.message


t0 = time.monotonic()
th = threading.Thread(target=churner, daemon=True)
th.start()
poll("the churn's first EAGAIN", lambda: churn["eagain"] > 0)
at_claim = dict(churn)
vb, claim_during = timed_claim(b)
at_answer = dict(churn)
# (the flood goes on after B's answer: it came while A was refused)
poll("an EAGAIN after B's answer", lambda: churn["eagain"] > at_answer["eagain"])
stop.set()
th.join()
out["churn"] = dict(churn, at_claim=at_claim, at_answer=at_answer, churn_s=time.monotonic() - t0,
                    claim_before_s=claim_before, claim_during_s=claim_during)
a.close()
b.close()
os.close(tap0)
print(json.dumps(out))
"""

# Runs in Level 1: A (VFs 0, 1) and B (VF 2) with rules; ovs-vswitchd
# restarts (VSWITCHD_START starts it again); prints one JSON object.
RESTART_CLIENT = COMMON + r"""
FWD_DST, MISS_DST = "02:bb:00:00:00:01", "02:bb:00:00:00:03"
a, b = vpd.Client(SOCK), vpd.Client(SOCK)
(va0, fa0), (va1, fa1) = a.claim("sw", 2, owner="vm-a")
(vb, fb), = b.claim("sw", 1, owner="vm-b")
for fd in (fa0, fa1, fb):
    os.close(fd)
h0, h1, hb = va0["HANDLE"], va1["HANDLE"], vb["HANDLE"]
p0 = "vpd-sw0-%d" % va0["VF_INDEX"]
_, tap0 = a.rep_open(h0)
_, tap1 = a.rep_open(h1)
_, tapb = b.rep_open(hb)
a.flow_add(1, 10, h0, out=h1, eth_dst=(FWD_DST, "ff:ff:ff:ff:ff:ff"), eth_type=0x88b5)
a.flow_add(2, 20, h0, eth_type=0x88b6)
b.flow_add(1, 10, hb, eth_type=0x88b6)
ta, _ = table_of(a, h0)
tb, _ = table_of(b, hb)


def shape(table):
    # a table's flows without their counters
    return sorted([hex(k)] + list(v[:3]) for k, v in table_flows(table).items())


out["tables"] = [ta, tb]
out["before"] = {"a": shape(ta), "b": shape(tb)}
packet_out(p0, frame(FWD_DST, 0x88b5, "fwd-1"))
readings = []      # FLOW_STATS of A's rule 1, all along: [packets, bytes] or an error


def stats():
    try:
        readings.append(list(a.flow_stats(1)))
    except vpd.DaemonError as e:
        readings.append([e.errno, e.message])
    return readings[-1]


poll("rule 1 counts the first frame", lambda: stats() == [1, 64])

# ovs-vswitchd exits (once it is gone: ovs-appctl answers before), and starts again
pid = sh("cat /run/openvswitch/ovs-vswitchd.pid")
sh(f"ovs-appctl -t $(ls /run/openvswitch/ovs-vswitchd*.{pid}.ctl) exit")
poll("ovs-vswitchd gone", lambda: not os.path.exists(f"/proc/{pid}") or
     re.search(r"^State:\s*Z", open(f"/proc/{pid}/status").read(), re.M), 60)
out["flows_while_down"] = stats()
t0 = time.monotonic()
sh(os.environ["VSWITCHD_START"])


def restored():
    stats()
    try:
        return shape(ta) == out["before"]["a"] and shape(tb) == out["before"]["b"]
    except subprocess.CalledProcessError:      # ovs-vswitchd not answering yet
        return False


poll("both tables made again", restored, 240)
out["restored_s"] = time.monotonic() - t0
out["table0_vf0"] = sh(f"ovs-ofctl -O OpenFlow14 --no-names dump-flows {BR} "
                       f"table=0,in_port={ofport(p0)}")
packet_out(p0, frame(FWD_DST, 0x88b5, "fwd-2"))
poll("rule 1 counts the second frame", lambda: stats() == [2, 128])
out["ovs_counts"] = list(table_flows(ta)[rule_cookie(ta, 1)][3:5])
packet_out(p0, frame(MISS_DST, 0x88b5, "miss-after"))
out["marks_at_tap0"] = read_marks(tap0, "miss-after")
out["readings"] = readings
# the limits are the client's own: the restore took none of them
a.flow_add(3, 30, h0, eth_type=0x88b7)
out["after_add"] = table_of(a, h0)
a.close()
b.close()
for fd in (tap0, tap1, tapb):
    os.close(fd)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def flows_host(host):  # noqa: F811 (the imported fixture)
    l1 = host
    stop_daemon(l1)
    l1.check(f"cat > /tmp/vpd.conf <<'EOF'\n{CONF}EOF")
    l1.check(f"cat > /tmp/flows_client.py <<'EOF'\n{CLIENT}EOF")
    l1.check(f"cat > /tmp/flows_restart.py <<'EOF'\n{RESTART_CLIENT}EOF")
    l1.check(f"cat > /tmp/flows_churn.py <<'EOF'\n{CHURN}EOF")
    start_daemon(l1, daemon_binary())
    return l1


def test_guest_rules_on_ovs_dpdk(flows_host):
    l1 = flows_host
    poolctl = daemon_binary().replace("vdpa-pool-daemon/vdpa-pool-daemon",
                                      "vdpa-pool-daemon/vdpa-poolctl")
    res = l1.run(f"VPD_POOLCTL={poolctl} python3 /tmp/flows_client.py {BRIDGE}", timeout=900)
    assert res.ok, f"{res}\n--- daemon log\n{l1.check(f'tail -40 {DAEMON_LOG}')}"
    out = json.loads(res.stdout.splitlines()[-1])
    print(json.dumps({k: out[k] for k in ("first_add_s", "flow_add_ms", "many")}))
    p0, p1, pb, rep0, rep1, repb = out["ports"]
    ta, na, tb, nb = out["tables"]

    def cookie(table, flow_id):
        return hex(0x5650 << 48 | 8 << 40 | table << 32 | flow_id)

    # a table per connection, reached from table 0 by the VF's flow
    assert ta and tb and ta != tb and (na, nb) == (3, 1), out["tables"]
    assert f"actions=goto_table:{ta}" in out["table0_vf0"], out["table0_vf0"]
    assert f"table={ta}: 3 rule(s)" in out["poolctl"], out["poolctl"]
    flows = out["a_flows"]
    def fields(match):
        return sorted(match.split(","))

    # the rules at PRIORITY + 1, in_port VF 0's; the VFs' miss flows at 0;
    # an EtherType without a VLAN id is an untagged frame's (vlan_tci 0)
    f1, f2 = flows[cookie(ta, 1)], flows[cookie(ta, 2)]
    untagged = "vlan_tci=0x0000/0x1fff"
    assert (f1[0], fields(f1[1]), f1[2]) == (
        11, ["dl_dst=02:bb:00:00:00:01", "dl_type=0x88b5", "in_port=1", untagged],
        "output:2"), flows
    assert (f2[0], fields(f2[1]), f2[2]) == (
        21, ["dl_type=0x88b6", "in_port=1", untagged], "drop"), flows
    assert flows[cookie(ta, 3)][2] == "push_vlan:0x8100,set_field:4246->vlan_vid,output:2", \
        flows
    misses = sorted(v[:3] for v in flows.values() if v[0] == 0)
    assert misses == [[0, "in_port=1", "output:501"], [0, "in_port=2", "output:502"]], flows

    # the forwarded frame: counted by the rule (FLOW_STATS = OVS's counters),
    # out of VF 1's port, not to the representor; the unmatched one to it
    assert out["stats"]["1"] == [1, 64] == out["ovs_counts"]["1"], out
    assert out["stats"]["2"] == [1, 64] == out["ovs_counts"]["2"], out
    assert out["stats"]["3"] == [0, 0] == out["ovs_counts"]["3"], out
    assert out["marks_at_tap0"] == ["miss"], out["marks_at_tap0"]
    assert out["trace_fwd"] == p1, out["trace_fwd"]
    assert out["trace_miss"] == rep0, out["trace_miss"]
    assert out["trace_push"].endswith(p1) and "push_vlan(vid=150" in out["trace_push"], out
    assert out["trace_drop"] == "drop", out["trace_drop"]

    # refusals, and nothing of them in OVS
    r = out["refused"]
    assert r["other_handle"] == [1, "HANDLE: VF 2 of pool 'sw' is not claimed by this "
                                    "client"], r
    assert r["other_out"] == [1, "OUT: VF 2 of pool 'sw' is not claimed by this client"], r
    assert r["push_outside"] == [1, "VLAN_PUSH 300 is outside pool 'sw''s range 100-199"], r
    assert r["exists"] == [17, "rule 1 exists"], r
    assert r["no_such_rule"] == [2, "no rule 99"], r
    assert r["b_deletes_a"] == [2, "no rule 2"], r
    before, after, b_ids = out["ids_before_after"]
    assert before == after == [1, 2, 3] and b_ids == [1], out["ids_before_after"]

    # max-flows (1024 by default): the 1025th refused, OVS holds 1024
    m = out["many"]
    assert m["ok"] == 1024 and m["first_refused"] == 1025 and m["refusals"] == [28], m
    assert m["in_ovs"] == 1024 and m["status"] == [ta, 1024], m
    assert out["enospc_message"] == "pool 'sw' allows 1024 rules per client (max-flows)"

    # B's representor port closed: its VF's rule gone from OVS
    assert out["b_after_rep_close"] == [], out["b_after_rep_close"]

    # A closed: its table empty; B's rule stays
    a = out["after_close"]
    assert a["a_table"] == {} and a["b_ids"] == [2], a


def test_guest_rules_survive_ovs_vswitchd_restart(flows_host):
    l1 = flows_host
    res = l1.run(f"VSWITCHD_START='{L1_VSWITCHD_DPDK}' python3 /tmp/flows_restart.py {BRIDGE}",
                 timeout=600)
    log = l1.check(f"cat {DAEMON_LOG}")
    assert res.ok, f"{res}\n--- daemon log\n{log[-4000:]}"
    out = json.loads(res.stdout.splitlines()[-1])
    ta, tb = out["tables"]
    print(f"ovs-vswitchd restarted: both tables made again {out['restored_s']:.1f} s after "
          f"it started; FLOW_STATS read {len(out['readings'])} times meanwhile")

    # each client's table as it was: its rules and its VFs' miss flows
    # (shape() compares cookies, priorities, matches and actions)
    assert len(out["before"]["a"]) == 4 and len(out["before"]["b"]) == 2, out["before"]
    assert f"actions=goto_table:{ta}" in out["table0_vf0"], out["table0_vf0"]
    for table, rules, misses in ((ta, 2, 2), (tb, 1, 1)):
        assert f"rules in table {table} restored after ovs-vswitchd came back: " \
               f"{rules} rule(s), {misses} miss flow(s)" in log, log[-4000:]

    # a frame through the rule after the restart counts on top of the first;
    # OVS's own counter has only the second; the miss flow still goes to
    # VF 0's representor port
    assert out["ovs_counts"] == [1, 64], out
    counts = [r for r in out["readings"] if isinstance(r[1], int)]   # (not an error)
    assert counts[0] == [1, 64] and counts[-1] == [2, 128], out["readings"]
    assert all(x <= y for x, y in zip(counts, counts[1:])), out["readings"]
    assert out["marks_at_tap0"] == ["miss-after"], out["marks_at_tap0"]

    # the limits were the client's own: a rule more, three in all
    assert out["after_add"] == [ta, 3], out["after_add"]


def test_rule_churn_paced_while_another_claims(flows_host):
    """max-flow-changes: A's churn hits EAGAIN; B's CLAIM is answered
    within QEMU's wait for an answer (5 s) between two of A's EAGAINs.
    The daemon runs on CHURN_CONF for this test only."""
    l1 = flows_host
    stop_daemon(l1)
    l1.check(f"cat > /tmp/vpd.conf <<'EOF'\n{CHURN_CONF}EOF")
    start_daemon(l1, daemon_binary())
    try:
        res = l1.run(f"python3 /tmp/flows_churn.py {BRIDGE}", timeout=300)
    finally:
        stop_daemon(l1)
        l1.check(f"cat > /tmp/vpd.conf <<'EOF'\n{CONF}EOF")
        start_daemon(l1, daemon_binary())
    assert res.ok, f"{res}\n--- daemon log\n{l1.check(f'tail -40 {DAEMON_LOG}')}"
    c = json.loads(res.stdout.splitlines()[-1])["churn"]
    print(json.dumps(c))
    assert c["at_claim"]["eagain"] > 0 and c["ok"] > 0, c
    assert c["eagain"] > c["at_answer"]["eagain"], c
    assert c["claim_during_s"] < 5, c
    assert c["message"] == f"pool 'sw' allows {CHURN_RATE} rule changes a second per " \
                           "client (max-flow-changes)", c
