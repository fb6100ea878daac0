# SPDX-License-Identifier: GPL-2.0-or-later
"""Level 1: vdpa-pool-daemon's representor ports (switchdev pools, issue 34)
on real OVS-DPDK with VDUSE VFs, as the daemon serves them on a host with
no vDPA NIC (harness/e2e.py's set-up, without a VM).

The protocol's Python client plays QEMU: it claims two VFs of a pool with
`switchdev = yes` and asks for VF 0's representor port (REP_OPEN), getting
the tap's fd.  A frame written into that fd comes out of VF 0's port (the
representor port's in_port flow and VF 0's port count it; VF 1's port
does not).  Frames VF 0 sends come out of the tap fd: they are injected
into the switch as VF 0's with an OpenFlow packet-out (in_port = VF 0's
port, actions=table: OVS's own classifier takes them as VF 0's frames, as
test_l2_e2e.py's VMs send them); VF 1's frames, a broadcast among them,
never reach the tap nor VF 0 (a frame of VF 0 sent after them is the first
to arrive).  REP_CLOSE removes the port, its flows and the tap, and VF 0
has its legacy allow flow again.  A daemon restart keeps a representor
port whose tap the claimant still holds (frames pass both ways after it)
and removes one whose tap is gone.  REP_OPEN in a pool with `switchdev = no`
is EPERM and another connection's VF is EPERM, with nothing made; a netdev
in the way of the tap's name is EIO, nothing made or taken over; a client
that disconnects with a representor port open leaves nothing behind
(OVSDB polled with a deadline)."""
import json

import pytest

from harness.e2e import BRIDGE, DAEMON_LOG, daemon_binary, start_daemon, stop_daemon
from harness.ovs import L1_OVS_DPDK_START

pytestmark = [pytest.mark.slow, pytest.mark.nested]

CONF = f"""[daemon]
socket = /run/vpd/api.sock
state = /var/lib/vpd/state
ovs-bridge = {BRIDGE}
[pf sw0]
num-vfs = 5
vdpa-mgmtdev = vduse
vduse-msg-timeout = 120
[pool sw]
pf = sw0
vfs = 0-3
allow-uids = 0
switchdev = yes
[pool legacy]
pf = sw0
vfs = 4
vlans = 200
"""

# Runs in Level 1: the client (QEMU's part) and what OVS shows, step by
# step; prints one JSON object of what it saw.
CLIENT = r"""
import json, os, re, select, subprocess, sys, time
sys.path.insert(0, "/src/tests")
from harness import vpd
BR = sys.argv[1]
SOCK = "/run/vpd/api.sock"
out = {}


def sh(cmd):
    return subprocess.run(cmd, shell=True, check=True, capture_output=True,
                          text=True).stdout.strip()


def ofport(port):
    return int(sh(f"ovs-vsctl get Interface {port} ofport"))


def ports():
    return sh(f"ovs-vsctl list-ports {BR}").split()


def flows(match=""):
    # (priority, match, actions, n_packets) of the daemon's flows
    text = sh(f"ovs-ofctl -O OpenFlow14 --no-names dump-flows {BR} {match}")
    got = []
    for line in text.splitlines():
        m = re.search(r"n_packets=(\d+).*priority=(\d+),?(\S*) actions=(\S+)", line)
        if m:
            got.append((int(m.group(2)), m.group(3), m.group(4), int(m.group(1))))
    return sorted(got, reverse=True)


CTL = "$(ls /run/openvswitch/ovs-vswitchd*.$(cat /run/openvswitch/ovs-vswitchd.pid).ctl)"


def dp_names():
    # the datapath's port numbers -> port names
    return {m.group(2): m.group(1) for m in
            re.finditer(r"^\s+(\S+) \d+/(\d+):", sh(f"ovs-appctl -t {CTL} dpif/show"), re.M)}


def dp_outputs(port):
    # where OVS-DPDK's datapath sends what enters port (its flows, from the
    # frames it took): port names.  (A VDUSE port whose virtqueues nobody
    # runs has no port counters, "?": the datapath's flows say instead.)
    names = dict(dp_names())
    odp = next(k for k, v in names.items() if v == port)
    outs = set()
    for line in sh(f"ovs-appctl -t {CTL} dpif/dump-flows {BR}").splitlines():
        if f"in_port({odp})" in line:
            outs.update(names.get(a, a) for a in
                        re.search(r"actions:(\S*)", line).group(1).split(","))
    return sorted(outs)


def trace_outputs(port, src, dst):
    # where the switch would send a frame from src to dst entering at port
    text = sh(f"ovs-appctl -t {CTL} ofproto/trace {BR} "
              f"in_port={ofport(port)},dl_src={src},dl_dst={dst}")
    names = dp_names()
    acts = re.search(r"^Datapath actions: (.*)$", text, re.M).group(1)
    return sorted(names.get(a, a) for a in acts.split(","))


def frame(src, dst, mark):
    return (bytes.fromhex(dst.replace(":", "")) + bytes.fromhex(src.replace(":", "")) +
            b"\x88\xb5" + mark.encode().ljust(50, b"\0"))


def packet_out(port, data):
    sh(f"ovs-ofctl -O OpenFlow14 packet-out {BR} "
       f"in_port={ofport(port)},packet={data.hex()},actions=table")


def read_marks(fd, until, timeout=30):
    # our frames' marks read from the tap, up to and with until
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not select.select([fd], [], [], 0.5)[0]:
            continue
        data = os.read(fd, 65536)
        if len(data) >= 14 and data[12:14] == b"\x88\xb5":
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


c = vpd.Client(SOCK)
got = c.claim("sw", 2, owner="vm-reps")
(vf0, _), (vf1, _) = got
h0, h1 = vf0["HANDLE"], vf1["HANDLE"]
p0, p1 = "vpd-sw0-%d" % vf0["VF_INDEX"], "vpd-sw0-%d" % vf1["VF_INDEX"]
out["vf_ports"] = [p0, p1]
out["legacy_flows_before"] = flows(f"in_port={ofport(p0)}")

rep, tap = c.rep_open(h0)
out["rep"] = rep
out["rep_ofport"] = ofport(rep)
out["rep_in_ports"] = rep in ports()
out["rep_type"] = sh(f"ovs-vsctl get Interface {rep} type")
out["rep_netdev"] = os.path.exists(f"/sys/class/net/{rep}")
out["query_port"] = [v.get("PORT") for v in c.query()]
out["vf0_flows"] = flows(f"in_port={ofport(p0)}")
out["rep_flows"] = flows(f"in_port={ofport(rep)}")
out["vf0_tag"] = sh(f"ovs-vsctl get Port {p0} tag")
out["status_rep_port"] = [v.get("REP_PORT") for v in vpd.Client(SOCK).status()
                          if v["HANDLE"] == h0]
out["poolctl"] = sh(os.environ["VPD_POOLCTL"] + " status --socket " + SOCK)

# into the tap: out of VF 0's port, not VF 1's
before = flows(f"in_port={ofport(rep)}")
os.write(tap, frame("02:aa:00:00:00:01", "ff:ff:ff:ff:ff:ff", "from-rep"))
poll("the tap's frame through the switch",
     lambda: flows(f"in_port={ofport(rep)}")[0][3] > before[0][3])
out["tap_to_vf0"] = {"rep_flows_before": before,
                     "rep_flows_after": flows(f"in_port={ofport(rep)}"),
                     "dp_outputs": dp_outputs(rep)}

# VF 1's frames (a broadcast, a unicast to the tap's source), then VF 0's
packet_out(p1, frame(vf1["MAC"], "ff:ff:ff:ff:ff:ff", "vf1-bcast"))
packet_out(p1, frame(vf1["MAC"], "02:aa:00:00:00:01", "vf1-ucast"))
packet_out(p0, frame(vf0["MAC"], "02:aa:00:00:00:01", "vf0-ucast"))
out["marks_at_tap"] = read_marks(tap, "vf0-ucast")
out["vf1_flows_during"] = flows(f"in_port={ofport(p1)}")
out["vf0_flows_after"] = flows(f"in_port={ofport(p0)}")
out["vf1_bcast_to"] = trace_outputs(p1, vf1["MAC"], "ff:ff:ff:ff:ff:ff")
out["vf0_to"] = trace_outputs(p0, vf0["MAC"], "ff:ff:ff:ff:ff:ff")

# REP_CLOSE: port, flows and tap gone, VF 0's legacy flows back
c.rep_close(h0)
out["after_close"] = {"ports": ports(), "vf0_flows": flows(f"in_port={ofport(p0)}"),
                      "rep_flows": flows(f"in_port={ofport(p0) + 500}"),
                      "netdev": os.path.exists(f"/sys/class/net/{rep}"),
                      "vf0_tag": sh(f"ovs-vsctl get Port {p0} tag"),
                      "query_port": [v.get("PORT") for v in c.query()]}
os.close(tap)

# refusals: a pool without switchdev, another connection's VF
ports_before = ports()
(vl, _), = c.claim("legacy", 1, owner="vm-reps")
refused = {}
try:
    c.rep_open(vl["HANDLE"])
except vpd.DaemonError as e:
    refused["legacy"] = [e.errno, e.message]
try:
    vpd.Client(SOCK).rep_open(h0)
except vpd.DaemonError as e:
    refused["other"] = [e.errno, e.message]
out["refused"] = refused
out["ports_after_refusals"] = ports() == ports_before
out["vr_netdevs"] = sorted(n for n in os.listdir("/sys/class/net") if n.startswith("vr"))

# a netdev of the name in the way: EIO, nothing made, nothing taken over
sh("ip link add vrvpd-sw0-1 type dummy")
try:
    c.rep_open(h1)
except vpd.DaemonError as e:
    refused["in_the_way"] = [e.errno, e.message]
out["in_the_way"] = {"ports": ports(), "vf1_flows": flows(f"in_port={ofport(p1)}"),
                     "taps": sorted(n for n in os.listdir("/sys/class/net")
                                    if n.startswith(("vr", "vpdtap"))),
                     "query_port": [v.get("PORT") for v in c.query()]}
sh("ip link del vrvpd-sw0-1")

# daemon restarts: a representor port whose tap its client still holds is
# kept (and passes frames); one whose tap is gone is removed
def restart():
    pid = open("/tmp/vpd.pid").read().strip()
    sh(f"kill {pid}")
    poll("the daemon stopped", lambda: subprocess.run(["kill", "-0", pid]).returncode)
    sh(f"rm -f /scratch/vpd.out; setsid {os.environ['VPD_DAEMON']} -c /tmp/vpd.conf "
       "> /scratch/vpd.out 2>> /scratch/vpd.log < /dev/null & echo $! > /tmp/vpd.pid")
    poll("the daemon ready", lambda: "READY" in open("/scratch/vpd.out").read(), 120)
    return vpd.Client(SOCK)


rep, tap = c.rep_open(h0)
c = restart()
kept = {"query_port": [v.get("PORT") for v in c.query()], "in_ports": rep in ports(),
        "vf0_flows": flows(f"in_port={ofport(p0)}")}
before = flows(f"in_port={ofport(rep)}")[0][3]
os.write(tap, frame("02:aa:00:00:00:01", "ff:ff:ff:ff:ff:ff", "after-restart"))
poll("the tap's frame through the switch after the restart",
     lambda: flows(f"in_port={ofport(rep)}")[0][3] > before)
packet_out(p0, frame(vf0["MAC"], "02:aa:00:00:00:01", "vf0-after-restart"))
kept["marks_at_tap"] = read_marks(tap, "vf0-after-restart")
out["restart_kept"] = kept
os.close(tap)
poll("the tap gone with its fd", lambda: not os.path.exists(f"/sys/class/net/{rep}"))
c = restart()
out["restart_gone"] = {"query_port": [v.get("PORT") for v in c.query()],
                       "ports": ports(), "vf0_flows": flows(f"in_port={ofport(p0)}"),
                       "rep_flows": flows(f"in_port={ofport(p0) + 500}")}

# a client gone with its representor port open: nothing left behind
rep, tap = c.rep_open(h0)
out["reopened"] = rep in ports()
c.close()
poll("the representor port gone from OVSDB", lambda: rep not in ports())
poll("VF 0's flows back to default-deny",
     lambda: [f[2] for f in flows(f"in_port={ofport(p0)}")] == ["drop"])
out["after_disconnect"] = {"rep_flows": flows(f"in_port={ofport(p0) + 500}"),
                           "netdev": os.path.exists(f"/sys/class/net/{rep}")}
os.close(tap)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def host(l1host):
    l1 = l1host
    l1.check("modprobe -a vduse vhost_vdpa")
    l1.check(L1_OVS_DPDK_START, timeout=180)
    l1.check(f"ovs-vsctl add-br {BRIDGE} -- set bridge {BRIDGE} datapath_type=netdev")
    l1.check(f"mkdir -p /run/vpd /var/lib/vpd && cat > /tmp/vpd.conf <<'EOF'\n{CONF}EOF")
    l1.check(f"cat > /tmp/reps_client.py <<'EOF'\n{CLIENT}EOF")
    start_daemon(l1, daemon_binary())
    yield l1
    stop_daemon(l1)


def test_representor_ports_on_ovs_dpdk(host):
    l1 = host
    poolctl = daemon_binary().replace("vdpa-pool-daemon/vdpa-pool-daemon",
                                      "vdpa-pool-daemon/vdpa-poolctl")
    res = l1.run(f"VPD_POOLCTL={poolctl} VPD_DAEMON={daemon_binary()} "
                 f"python3 /tmp/reps_client.py {BRIDGE}", timeout=240)
    assert res.ok, f"{res}\n--- daemon log\n{l1.check(f'tail -40 {DAEMON_LOG}')}"
    out = json.loads(res.stdout.splitlines()[-1])
    p0, _ = out["vf_ports"]
    rep = out["rep"]
    vf0_port = 1        # the daemon's numbers: VF 0 of the first [pf] ...
    rep_port = 501      # ... and its representor port

    # the port: named after the VF, a kernel tap on the bridge
    assert rep == "vr" + p0 and out["rep_ofport"] == rep_port, out
    assert out["rep_in_ports"] and out["rep_netdev"] and out["rep_type"] == "system", out
    assert out["query_port"] == [rep, None], out
    assert out["status_rep_port"] == [rep], out
    assert f"representor port {rep}" in out["poolctl"], out["poolctl"]
    # the VF talks to its representor port only: legacy flow off, VLAN 4095
    assert out["legacy_flows_before"][0][2] == "NORMAL", out
    assert [(f[0], f[2]) for f in out["vf0_flows"]] == [(100, f"output:{rep_port}"),
                                                       (10, "drop")], out
    assert [(f[0], f[2]) for f in out["rep_flows"]] == [(100, f"output:{vf0_port}"),
                                                       (10, "drop")], out
    assert out["vf0_tag"] == "4095", out

    # a frame into the tap: out of VF 0's port, by the representor's flow
    t = out["tap_to_vf0"]
    assert t["rep_flows_after"][0][3] > t["rep_flows_before"][0][3], t
    assert t["dp_outputs"] == [p0], t
    # VF 0's frames out of the tap; VF 1's nowhere near it or VF 0
    assert out["marks_at_tap"] == ["vf0-ucast"], out["marks_at_tap"]
    assert out["vf0_flows_after"][0][3] >= 1 and out["vf0_to"] == [rep], out
    assert sum(f[3] for f in out["vf1_flows_during"] if f[2] == "NORMAL") >= 2, out
    assert not {rep, p0} & set(out["vf1_bcast_to"]), out

    # REP_CLOSE: gone, and VF 0 back to its legacy flows
    a = out["after_close"]
    assert rep not in a["ports"] and not a["netdev"] and a["rep_flows"] == [], a
    assert [(f[0], f[2]) for f in a["vf0_flows"]] == [(100, "NORMAL"), (10, "drop")], a
    assert a["vf0_tag"] == "0" and a["query_port"] == [None, None], a

    # refusals made nothing
    assert out["refused"]["legacy"] == [1, "pool 'legacy' gives no representor ports "
                                           "(switchdev = no)"], out
    assert out["refused"]["other"][0] == 1, out
    assert out["ports_after_refusals"] and out["vr_netdevs"] == [], out

    # a daemon restart keeps the representor port its client holds the tap
    # of, working; with the tap gone, the port goes and VF 0 has its legacy flows
    k = out["restart_kept"]
    assert k["query_port"][0] == rep and k["in_ports"], k
    assert [(f[0], f[2]) for f in k["vf0_flows"]] == [(100, f"output:{rep_port}"),
                                                     (10, "drop")], k
    assert k["marks_at_tap"] == ["vf0-after-restart"], k
    g = out["restart_gone"]
    assert g["query_port"][0] is None and rep not in g["ports"] and g["rep_flows"] == [], g
    assert [(f[0], f[2]) for f in g["vf0_flows"]] == [(100, "NORMAL"), (10, "drop")], g

    # the tap could not be made (a netdev has its name): EIO, nothing made
    assert out["refused"]["in_the_way"][0] == 5, out["refused"]
    w = out["in_the_way"]
    assert "vrvpd-sw0-1" not in w["ports"] and w["taps"] == ["vrvpd-sw0-1"], w
    assert [f[2] for f in w["vf1_flows"]] == ["NORMAL", "drop"], w
    assert set(w["query_port"]) == {None}, w

    # disconnected with a representor port open: nothing left
    assert out["reopened"], out
    d = out["after_disconnect"]
    assert d["rep_flows"] == [] and not d["netdev"], d
