# SPDX-License-Identifier: GPL-2.0-or-later
"""Frames through the kernel datapath of a Level 1 emulated host, for tests
of what the daemon makes OVS do to a VF's traffic.

netdevsim's VF representors cannot be linked to a peer (6.12's
link_device takes only ports with netdevsim's PF netdev_ops: "is not a
netdevsim"), so what a VF sends is played this way: frames sent on one end
of a veth pair arrive at the other, whose ingress hands them to the
representor's receive path (tc mirred ingress redirect, from ingress to
ingress so that a frame's own VLAN tags stay as they came).  From there on
it is the path a VF's frame takes on a switchdev NIC: the representor's
ingress qdisc (where OVS puts its ingress policer), OVS's kernel datapath
and its flows, and out of other ports.  Frames leave the switch through
real netdevs: a representor (what its VF would receive: a packet socket
sees it sent) or the PF's netdev, linked to a netdevsim port in a
namespace of its own (the wire).

Standard library only: it also runs in Level 1 as a script,

    python3 l1net.py send DEV DST SRC MARKER (--count N | --seconds S) [--size B] [--vlan TPID:VID]
    python3 l1net.py capture DEV MARKER READY STOP
    python3 l1net.py link DEV_A NETNS_B DEV_B
    python3 l1net.py hold SOCKET POOL COUNT FIFO OUT

send prints {"frames", "bytes", "seconds"} of what it sent (bytes: whole
frames without FCS); capture, once STOP exists, the frames carrying MARKER
it saw, grouped by outer tag and source: [[tpid, vid, inner_tpid,
inner_vid, src, count], ...] (tpid 0: untagged); hold claims COUNT VFs and
then runs SET_ATTRS lines ("VF_INDEX JSON") read from FIFO, answering each
on OUT ("OK VF_INDEX" or "ERR VF_INDEX message").
"""
import json
import os
import re
import select
import socket
import struct
import subprocess
import sys
import time

ETH_P_ALL = 0x0003
ETH_P_EXPERIMENTAL = 0x88B5     # IEEE 802 local experimental ethertype
SOL_PACKET, PACKET_AUXDATA = 263, 8
TP_STATUS_VLAN_VALID, TP_STATUS_VLAN_TPID_VALID = 0x10, 0x40
VLAN_TPIDS = (0x8100, 0x88A8)

# ---- Level 0 side: the switch of a test, set up in Level 1 ----------------

L1_SCRIPT = "/src/tests/harness/l1net.py"
BRIDGE = "br-vpd"
DENY, ALLOW = 1, 2      # the kinds of the daemon's per-VF flows (docs/daemon-admin.md)
CONF = """[daemon]
socket = /run/vpd-dp/api.sock
state = /var/lib/vpd-dp/state
ovs-bridge = {bridge}
[pf {pf}]
num-vfs = {vfs}
eswitch = switchdev
vdpa-mgmtdev = vdpasim_net
[pool a]
pf = {pf}
vfs = 0-{last}
vlans = 100-199
mac-policy = any
# clients may turn spoof checking off
spoof-check = no
"""


class Switch:
    """vdpa-pool-daemon with a netdevsim PF of vfs VFs on OVS's kernel
    datapath (bridge br-vpd), all VFs claimed by one client whose
    SET_ATTRS set_attrs() makes; VF N's frames are sent on veth vinN; the
    PF's netdev is the bridge's uplink (a trunk port), linked to wire0 in
    namespace wire."""

    def __init__(self, l1, vfs=6, nsim_id=30):
        self.l1, self.vfs, self.nsim_id = l1, vfs, nsim_id
        self.reps = {}
        self.answers = 0

    def start(self):
        from .e2e import daemon_binary, start_daemon
        from .ovs import L1_OVS_START
        l1 = self.l1
        l1.check("modprobe -a vhost_vdpa vdpa_sim_net netdevsim openvswitch")
        self.pf = l1.new_netdevsim(self.nsim_id)
        wire = l1.new_netdevsim(self.nsim_id + 1)
        l1.check(f"ip netns add wire && ip link set {wire} netns wire && "
                 f"ip -n wire link set {wire} name wire0 && "
                 "ip netns exec wire sysctl -qw net.ipv6.conf.wire0.disable_ipv6=1 && "
                 "ip -n wire link set wire0 up")
        l1.check(L1_OVS_START, timeout=120)
        l1.check(f"cat > /tmp/vpd.conf <<'EOF'\n"
                 f"{CONF.format(bridge=BRIDGE, pf=self.pf, vfs=self.vfs, last=self.vfs - 1)}EOF")
        start_daemon(l1, daemon_binary())
        sw = l1.check(f"cat /sys/class/net/{self.pf}/phys_switch_id").strip()
        for line in l1.check("for n in /sys/class/net/*; do "
                             f"[ \"$(cat $n/phys_switch_id 2>/dev/null)\" = {sw} ] && "
                             "echo $(basename $n) $(cat $n/phys_port_name); done; true"
                             ).splitlines():
            name, port = line.split()
            if port.startswith("pf0vf"):
                self.reps[int(port[5:])] = name
        assert sorted(self.reps) == list(range(self.vfs)), self.reps
        # Each VF's frames: sent on vinN, received on vinNp, handed to the
        # representor's receive path.  No IPv6 on the test's own links, so
        # nothing but the test's frames crosses them.
        for vf, rep in self.reps.items():
            l1.check(f"ip link add vin{vf} type veth peer name vin{vf}p && "
                     f"sysctl -qw net.ipv6.conf.vin{vf}.disable_ipv6=1 "
                     f"net.ipv6.conf.vin{vf}p.disable_ipv6=1 && "
                     f"ip link set vin{vf} up && ip link set vin{vf}p up && "
                     f"tc qdisc add dev vin{vf}p clsact && "
                     f"tc filter add dev vin{vf}p ingress matchall "
                     f"action mirred ingress redirect dev {rep}")
        # The uplink: the PF's netdev as a trunk port, its peer the wire.
        l1.check(f"sysctl -qw net.ipv6.conf.{self.pf}.disable_ipv6=1 && "
                 f"ip link set {self.pf} up && python3 {L1_SCRIPT} link {self.pf} wire wire0 && "
                 f"ovs-vsctl add-port {BRIDGE} {self.pf}")
        l1.check(f"rm -f /tmp/dp.fifo && mkfifo /tmp/dp.fifo && : > /scratch/dp.out && "
                 f"setsid python3 {L1_SCRIPT} hold /run/vpd-dp/api.sock a {self.vfs} "
                 "/tmp/dp.fifo /scratch/dp.out > /scratch/dp.err 2>&1 < /dev/null & "
                 "echo $! > /tmp/dp.pid")
        l1.wait_until("grep -q HELD /scratch/dp.out || ! kill -0 $(cat /tmp/dp.pid)", timeout=60)
        out = l1.check("cat /scratch/dp.out /scratch/dp.err")
        assert out.startswith("HELD " + " ".join(map(str, range(self.vfs))) + "\n"), out
        return self

    def stop(self):
        from .e2e import stop_daemon
        self.l1.check("kill $(cat /tmp/dp.pid); true")
        stop_daemon(self.l1)

    def set_attrs(self, vf, **attrs):
        """SET_ATTRS of VF vf by the client holding it; the daemon's answer
        ("OK vf" or "ERR vf message")."""
        self.answers += 1
        self.l1.check(f"echo '{vf} {json.dumps(attrs)}' > /tmp/dp.fifo")
        self.l1.wait_until(f"test $(wc -l < /scratch/dp.out) -gt {self.answers}", timeout=60)
        return self.l1.check("tail -n 1 /scratch/dp.out").strip()

    def send(self, vf, dst, src, marker, count=None, seconds=None, size=1000, vlan=None):
        """Frames VF vf sends: see send() (Level 1 side)."""
        opts = (f" --count {count}" if count else "") + \
            (f" --seconds {seconds}" if seconds else "") + \
            (f" --vlan {vlan[0]:#x}:{vlan[1]}" if vlan else "")
        return json.loads(self.l1.check(f"python3 {L1_SCRIPT} send vin{vf} {dst} {src} {marker} "
                                        f"--size {size}{opts}", timeout=120))

    def capture(self, where, marker):
        """Start a capture of frames carrying marker on where (a VF index:
        its representor, what the VF would receive; "wire": the uplink's
        far end); returns the function that stops it and returns what it saw."""
        dev, ns = (self.reps[where], "") if where != "wire" else ("wire0", "ip netns exec wire ")
        files = f"/tmp/cap-{marker}"
        self.l1.check(f"rm -f {files}.*; {ns}setsid python3 {L1_SCRIPT} capture {dev} {marker} "
                      f"{files}.ready {files}.stop > {files}.out 2>&1 < /dev/null &")
        self.l1.wait_until(f"test -e {files}.ready", timeout=60)

        def stop():
            self.l1.check(f"touch {files}.stop")
            self.l1.wait_until(f"grep -q . {files}.out", timeout=60)
            return [tuple(x) for x in json.loads(self.l1.check(f"cat {files}.out"))]
        return stop

    @staticmethod
    def cookie(kind, vf):
        """The cookie of VF vf's flow of this kind (the first [pf])."""
        return 0x5650 << 48 | kind << 40 | vf

    def flow_packets(self, kind, vf):
        """n_packets of VF vf's flow of this kind (0 when it has none)."""
        out = self.l1.check(f"ovs-ofctl dump-flows {BRIDGE} cookie={self.cookie(kind, vf):#x}/-1")
        return sum(int(n) for n in re.findall(r"n_packets=(\d+)", out))

    def vf_packets(self, vf):
        """Frames of VF vf that OVS's table 0 has classified: its deny and
        allow flows' n_packets (the kernel datapath's counts reach them
        within a second or so)."""
        return self.flow_packets(DENY, vf) + self.flow_packets(ALLOW, vf)

    def wait_classified(self, counts, timeout=60):
        """Until OVS has classified counts[vf] frames of each VF vf: by
        then each has gone where its flow sent it."""
        deadline = time.monotonic() + timeout
        while True:
            now = {vf: self.vf_packets(vf) for vf in counts}
            if all(now[vf] >= n for vf, n in counts.items()):
                return
            assert time.monotonic() < deadline, \
                f"OVS classified {now} frames of VFs after {timeout} s, not {counts}"
            time.sleep(0.2)

    def police(self, vf):
        """The ingress policer of VF vf's representor: its rate as tc shows
        it and its counters (packets that hit it, dropped), or None."""
        out = self.l1.check(f"tc -s filter show dev {self.reps[vf]} ingress")
        if " police " not in out:
            return None
        rate = re.search(r" police \S+ rate (\S+) burst (\S+)", out)
        sent = re.search(r"Sent (\d+) bytes (\d+) pkt \(dropped (\d+)", out)
        assert rate and sent, out
        return {"rate": rate.group(1), "burst": rate.group(2), "packets": int(sent.group(2)),
                "dropped": int(sent.group(3))}


# ---- Level 1 side ----------------------------------------------------------


def mac_bytes(mac):
    return bytes(int(x, 16) for x in mac.split(":"))


def frame(dst, src, marker, size, vlan=None):
    """An Ethernet frame of size bytes (without FCS): dst, src, an optional
    802.1Q/802.1ad tag (tpid, vid), the experimental ethertype, marker."""
    head = mac_bytes(dst) + mac_bytes(src)
    if vlan:
        head += struct.pack("!HH", vlan[0], vlan[1])
    head += struct.pack("!H", ETH_P_EXPERIMENTAL) + marker.encode()
    return head + bytes(max(0, size - len(head)))


def send(dev, dst, src, marker, count=None, seconds=None, size=1000, vlan=None):
    """Send frames on dev as fast as a packet socket takes them: count of
    them, or for seconds.  Returns what was sent."""
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((dev, 0))
    f = frame(dst, src, marker, size, vlan)
    n = 0
    t0 = time.monotonic()
    end = t0 + seconds if seconds else None
    while (count is None or n < count) and (end is None or time.monotonic() < end):
        s.send(f)
        n += 1
    took = time.monotonic() - t0
    s.close()
    return {"frames": n, "bytes": n * len(f), "seconds": took}


def outer_tags(data, aux):
    """(tpid, vid, inner tpid, inner vid) of a received frame, the first
    tag taken from the packet socket's auxdata when the kernel moved it out
    of the frame (0s where there is no tag)."""
    tags = []
    if aux is not None:
        status, _, _, _, _, tci, tpid = struct.unpack("IIIHHHH", aux[:20])
        if status & TP_STATUS_VLAN_VALID:
            tags.append((tpid if status & TP_STATUS_VLAN_TPID_VALID else 0x8100, tci & 0xFFF))
    off = 12
    while len(tags) < 2 and len(data) >= off + 4 and \
            struct.unpack_from("!H", data, off)[0] in VLAN_TPIDS:
        tpid, tci = struct.unpack_from("!HH", data, off)
        tags.append((tpid, tci & 0xFFF))
        off += 4
    tags += [(0, 0)] * (2 - len(tags))
    return tags[0] + tags[1]


def capture(dev, marker, ready, stop):
    """Frames carrying marker seen on dev (either direction) until the file
    stop exists; ready is created once the socket listens."""
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
    s.bind((dev, 0))
    s.setblocking(False)
    open(ready, "w").close()
    seen = {}
    want = marker.encode()
    quiet = 0
    while True:
        stopping = os.path.exists(stop)
        if not select.select([s], [], [], 0.1)[0]:
            quiet += 1
            if stopping and quiet > 3:
                break
            continue
        quiet = 0
        while True:
            try:
                data, anc, _, _ = s.recvmsg(65536, socket.CMSG_SPACE(64))
            except BlockingIOError:
                break
            if want not in data:
                continue
            aux = next((d for lvl, t, d in anc if lvl == SOL_PACKET and t == PACKET_AUXDATA),
                       None)
            key = outer_tags(data, aux) + (":".join(f"{b:02x}" for b in data[6:12]),)
            seen[key] = seen.get(key, 0) + 1
    return [list(k) + [n] for k, n in sorted(seen.items())]


def link(dev_a, netns_b, dev_b):
    """Link netdevsim port dev_a (this namespace) with dev_b in the named
    namespace netns_b: what one sends, the other receives."""
    idx_b = int(subprocess.run(["ip", "netns", "exec", netns_b, "cat",
                                f"/sys/class/net/{dev_b}/ifindex"],
                               check=True, capture_output=True, text=True).stdout)
    here = os.open("/proc/self/ns/net", os.O_RDONLY)
    there = os.open(f"/run/netns/{netns_b}", os.O_RDONLY)
    with open("/sys/bus/netdevsim/link_device", "w") as f:
        f.write(f"{here}:{socket.if_nametoindex(dev_a)} {there}:{idx_b}")


def hold(sock, pool, count, fifo, out):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from harness import vpd
    c = vpd.Client(sock)
    got = c.claim(pool, count, owner="l1net")
    handles = {v["VF_INDEX"]: v["HANDLE"] for v, _ in got}
    with open(out, "a") as o:
        o.write("HELD " + " ".join(str(vf) for vf in sorted(handles)) + "\n")
    # read and write: no end of file between writers
    for line in os.fdopen(os.open(fifo, os.O_RDWR), "r"):
        vf, attrs = line.split(" ", 1)
        try:
            c.set_attrs(handles[int(vf)], **json.loads(attrs))
            answer = f"OK {vf}"
        except vpd.DaemonError as e:
            answer = f"ERR {vf} {e.message}"
        with open(out, "a") as o:
            o.write(answer + "\n")


def main(argv):
    import argparse
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("send")
    for name in ("dev", "dst", "src", "marker"):
        a.add_argument(name)
    a.add_argument("--count", type=int)
    a.add_argument("--seconds", type=float)
    a.add_argument("--size", type=int, default=1000)
    a.add_argument("--vlan")
    a = sub.add_parser("capture")
    for name in ("dev", "marker", "ready", "stop"):
        a.add_argument(name)
    a = sub.add_parser("link")
    for name in ("dev_a", "netns_b", "dev_b"):
        a.add_argument(name)
    a = sub.add_parser("hold")
    for name in ("sock", "pool", "count", "fifo", "out"):
        a.add_argument(name)
    args = p.parse_args(argv[1:])
    if args.cmd == "send":
        vlan = tuple(int(x, 0) for x in args.vlan.split(":")) if args.vlan else None
        print(json.dumps(send(args.dev, args.dst, args.src, args.marker, args.count,
                              args.seconds, args.size, vlan)))
    elif args.cmd == "capture":
        print(json.dumps(capture(args.dev, args.marker, args.ready, args.stop)), flush=True)
    elif args.cmd == "link":
        link(args.dev_a, args.netns_b, args.dev_b)
    elif args.cmd == "hold":
        hold(args.sock, args.pool, int(args.count), args.fifo, args.out)


if __name__ == "__main__":
    main(sys.argv)
