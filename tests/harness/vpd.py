# SPDX-License-Identifier: GPL-2.0-or-later
"""A client of vdpa-pool-daemon's API (docs/daemon-protocol.md), written
from the protocol reference independently of the daemon's C codec, so the
tests check one against the other."""
import array
import os
import socket
import struct

MAGIC, VERSION, HEADER = 0x31445056, 1, 16
CLAIM, RELEASE, SET_ATTRS, QUERY, STATUS, REP_OPEN, REP_CLOSE = 1, 2, 3, 4, 5, 6, 7
FLOW_ADD, FLOW_DEL, FLOW_STATS = 8, 9, 10
VF_STATS = 12
REPLY, ERROR = 64, 65
A = dict(POOL=1, OWNER=2, COUNT=3, HANDLE=4, VF=5, VF_INDEX=6, MAC=7, VLAN=8, QOS=9,
         VLAN_PROTO=10, SPOOFCHK=11, TRUST=12, LINK_STATE=13, MIN_TX_RATE=14,
         MAX_TX_RATE=15, VHOST_PATH=16, ERRNO=17, MESSAGE=18, PORT=19, FLOW=20,
         HANDOVER=21, REP_PORT=22, FLOW_ID=23, PRIORITY=24, M_ETH_DST=25, M_ETH_SRC=26,
         M_ETH_TYPE=27, M_VLAN_VID=28, M_IP_PROTO=29, M_IPV4_SRC=30, M_IPV4_DST=31,
         M_IPV6_SRC=32, M_IPV6_DST=33, M_L4_SRC=34, M_L4_DST=35, OUT=36, VLAN_POP=37,
         VLAN_PUSH=38, PACKETS=39, BYTES=40)
NAMES = {v: k for k, v in A.items()}
FMT = dict(COUNT="<I", HANDLE="<I", VF_INDEX="<I", VLAN="<H", QOS="B", VLAN_PROTO="<H",
           SPOOFCHK="B", TRUST="B", LINK_STATE="B", MIN_TX_RATE="<I", MAX_TX_RATE="<I",
           ERRNO="<I", FLOW_ID="<I", PRIORITY="<H", M_ETH_TYPE="<H", M_VLAN_VID="<H",
           M_IP_PROTO="B", OUT="<I", VLAN_POP="B", VLAN_PUSH="<H", PACKETS="<Q", BYTES="<Q")


class ProtocolError(Exception):
    """The daemon broke docs/daemon-protocol.md (a bad magic, a reply to
    another request, an unexpected message type, fds that do not match the
    VFs): a bug of the daemon, never a refusal it may give."""


class DaemonError(Exception):
    def __init__(self, errno, message):
        super().__init__(f"[errno {errno}] {message}")
        self.errno, self.message = errno, message


def attr(name, value):
    t = A[name]
    if isinstance(value, list):            # nested
        v = b"".join(attr(n, x) for n, x in value)
    elif name in FMT:
        v = struct.pack(FMT[name], value)
    elif isinstance(value, str):
        v = value.encode() + b"\0"
    else:
        v = bytes(value)
    return struct.pack("<HH", t, len(v)) + v + b"\0" * (-len(v) % 4)


def encode(msg_type, seq, attrs):
    payload = b"".join(attr(n, v) for n, v in attrs)
    return struct.pack("<IHHII", MAGIC, VERSION, msg_type, seq, len(payload)) + payload


def decode_attrs(data):
    out = []
    while data:
        t, n = struct.unpack_from("<HH", data)
        v = data[4:4 + n]
        data = data[4 + n + (-n % 4):]
        name = NAMES[t]
        if name == "VF":
            items = decode_attrs(v)
            vf = dict(items)
            vf["FLOWS"] = [x for n, x in items if n == "FLOW"]  # repeated
            out.append((name, vf))
        elif name in FMT:
            out.append((name, struct.unpack(FMT[name], v)[0]))
        elif name in ("MAC",):
            out.append((name, ":".join(f"{b:02x}" for b in v)))
        elif name == "HANDOVER" or name.startswith("M_"):
            out.append((name, bytes(v)))
        else:
            out.append((name, v.rstrip(b"\0").decode()))
    return out


class Client:
    def __init__(self, path, timeout=10):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.seq = 0
        self.handover = None    # this connection's token, from a CLAIM's REPLY

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send_raw(self, data):
        self.sock.sendall(data)

    def recv_reply(self):
        """(type, seq, attrs, fds) of the next message."""
        buf, fds = b"", []
        while len(buf) < HEADER:
            buf += self._recv(HEADER - len(buf), fds)
        magic, _, t, seq, n = struct.unpack("<IHHII", buf)
        if magic != MAGIC:
            raise ProtocolError(f"bad magic {magic:#x} in a reply header")
        while len(buf) < HEADER + n:
            buf += self._recv(HEADER + n - len(buf), fds)
        return t, seq, decode_attrs(buf[HEADER:]), fds

    def _recv(self, n, fds):
        ancbuf = socket.CMSG_SPACE(253 * 4)
        data, anc, _, _ = self.sock.recvmsg(n, ancbuf)
        if not data:
            raise ConnectionError("the daemon closed the connection")
        for level, ctype, cdata in anc:
            if level == socket.SOL_SOCKET and ctype == socket.SCM_RIGHTS:
                a = array.array("i")
                a.frombytes(cdata[:len(cdata) - len(cdata) % 4])
                fds.extend(a)
        return data

    def request(self, msg_type, attrs=()):
        self.seq += 1
        self.send_raw(encode(msg_type, self.seq, attrs))
        t, seq, out, fds = self.recv_reply()
        if seq != self.seq:
            close_fds(fds)
            raise ProtocolError(f"reply with seq {seq} to request {self.seq}")
        if t == ERROR:
            close_fds(fds)
            d = dict(out)
            raise DaemonError(d["ERRNO"], d["MESSAGE"])
        if t != REPLY:
            close_fds(fds)
            raise ProtocolError(f"message type {t} in answer to request {self.seq}")
        return out, fds

    def claim(self, pool, count, owner="test", handover=False):
        """[(vf dict, fd)] of count VFs claimed from pool; with handover,
        the REPLY's hand-over token goes to self.handover."""
        attrs = [("POOL", pool), ("OWNER", owner), ("COUNT", count)]
        out, fds = self.request(CLAIM, attrs + ([("HANDOVER", bytes(16))] if handover else []))
        self.handover = dict(out).get("HANDOVER", self.handover)
        vfs = [v for n, v in out if n == "VF"]
        if not len(vfs) == len(fds) == count:
            close_fds(fds)
            raise ProtocolError(f"CLAIM of {count} VF(s) answered with {len(vfs)} VF(s) "
                                f"and {len(fds)} fd(s): {out}")
        return list(zip(vfs, fds))

    def release(self, handle):
        self.request(RELEASE, [("HANDLE", handle)])

    def set_attrs(self, handle, handover=None, **attrs):
        """SET_ATTRS of the VF @handle; @handover: another connection's
        hand-over token (bytes) to show."""
        items = [("HANDLE", handle)]
        for k, v in attrs.items():
            name = k.upper()
            items.append((name, bytes(int(x, 16) for x in v.split(":")) if name == "MAC"
                          else v))
        if handover is not None:
            items.append(("HANDOVER", handover))
        out, _ = self.request(SET_ATTRS, items)
        return dict(out)["VF"]

    def rep_open(self, handle):
        """(port name, tap fd) of the VF @handle's new representor port."""
        out, fds = self.request(REP_OPEN, [("HANDLE", handle)])
        port = dict(out).get("PORT")
        if len(fds) != 1 or not port:
            close_fds(fds)
            raise ProtocolError(f"REP_OPEN answered with {len(fds)} fd(s): {out}")
        return port, fds[0]

    def rep_close(self, handle):
        self.request(REP_CLOSE, [("HANDLE", handle)])

    def flow_add(self, flow_id, priority, handle, out=None, **match):
        """FLOW_ADD of rule flow_id from the VF @handle, forwarded to the VF
        @out (None: dropped); match: M_* attributes by their lower-case
        names without the prefix (eth_dst=(mac, mask), eth_type=0x0800,
        ipv4_dst=(addr, mask), l4_dst=(port, mask) ...), vlan_pop=1,
        vlan_push=VID."""
        items = [("FLOW_ID", flow_id), ("PRIORITY", priority), ("HANDLE", handle)]
        for k, v in match.items():
            name = k.upper() if k.startswith("vlan_p") else "M_" + k.upper()
            items.append((name, _match_value(name, v)))
        if out is not None:
            items.append(("OUT", out))
        self.request(FLOW_ADD, items)

    def flow_del(self, flow_id):
        self.request(FLOW_DEL, [("FLOW_ID", flow_id)])

    def flow_stats(self, flow_id):
        """(packets, bytes) of rule flow_id."""
        d = dict(self.request(FLOW_STATS, [("FLOW_ID", flow_id)])[0])
        return d["PACKETS"], d["BYTES"]

    def query(self):
        return [v for n, v in self.request(QUERY)[0] if n == "VF"]

    def status(self):
        return [v for n, v in self.request(STATUS)[0] if n == "VF"]


def _match_value(name, v):
    """A match attribute's value: a number as FMT says, else (value, mask)
    of MACs ("02:..."), IP addresses or ports, each in network order."""
    if name in FMT:
        return v
    value, mask = v
    if name in ("M_L4_SRC", "M_L4_DST"):
        return struct.pack("!HH", value, mask)
    if name in ("M_ETH_DST", "M_ETH_SRC"):
        return bytes(int(x, 16) for x in (value + ":" + mask).split(":"))
    family = socket.AF_INET6 if ":" in value else socket.AF_INET
    return socket.inet_pton(family, value) + socket.inet_pton(family, mask)


def close_fds(fds):
    for fd in fds:
        os.close(fd)
