# SPDX-License-Identifier: GPL-2.0-or-later
"""Host end of the test agent protocol (tests/agent/PROTOCOL.md).

The guest end is tests/agent/vsriov-agent.c.  Frames are

    u32 magic 'VSAG' | u8 type | u8 pad[3] | u32 id | u32 len | payload[len]

all little endian.  EXEC carries u32 timeout_ms + the shell command; RESULT
carries i32 status + u32 stdout_len + u32 stderr_len + stdout + stderr.
"""
import dataclasses
import socket
import struct
import time

MAGIC = 0x47415356
HEADER = struct.Struct("<IB3xII")
READY, PING, PONG, EXEC, RESULT = 1, 2, 3, 4, 5
STATUS_TIMEOUT = -1
STATUS_EXEC_FAILED = -2
MAX_PAYLOAD = 16 << 20


class AgentError(Exception):
    """The agent could not be reached, or a command failed when it had to work."""


class AgentNoAnswer(AgentError):
    """A command sent got no answer by its deadline: the agent, the guest
    or the channel to it is stuck (a command that merely runs too long is
    killed by the agent and answered with STATUS_TIMEOUT)."""


@dataclasses.dataclass
class Result:
    cmd: str
    status: int
    stdout: str
    stderr: str
    where: str = "guest"

    @property
    def ok(self):
        return self.status == 0

    def __str__(self):
        what = "timed out" if self.status == STATUS_TIMEOUT else f"exit status {self.status}"
        return (f"[{self.where}] `{self.cmd}`: {what}\n--- stdout\n{self.stdout}"
                f"--- stderr\n{self.stderr}")


def encode(ftype, fid, payload=b""):
    return HEADER.pack(MAGIC, ftype, fid, len(payload)) + payload


def encode_exec(fid, cmd, timeout_s):
    return encode(EXEC, fid, struct.pack("<I", int(timeout_s * 1000)) + cmd.encode())


def decode_result(payload):
    if len(payload) < 12:
        raise AgentError(f"short RESULT payload ({len(payload)} bytes)")
    status, out_len, err_len = struct.unpack_from("<iII", payload)
    if 12 + out_len + err_len > len(payload):
        raise AgentError("RESULT lengths exceed the payload")
    out = payload[12:12 + out_len].decode(errors="replace")
    err = payload[12 + out_len:12 + out_len + err_len].decode(errors="replace")
    return status, out, err


class FrameReader:
    """Finds frames in a byte stream, skipping anything before a magic."""

    def __init__(self):
        self.buf = bytearray()

    def feed(self, data):
        self.buf += data

    def next(self):
        magic = struct.pack("<I", MAGIC)
        while True:
            i = self.buf.find(magic)
            if i < 0:
                del self.buf[:max(0, len(self.buf) - 3)]
                return None
            del self.buf[:i]
            if len(self.buf) < HEADER.size:
                return None
            _, ftype, fid, length = HEADER.unpack_from(self.buf)
            if length > MAX_PAYLOAD:
                del self.buf[:4]  # not a real frame: look for the next magic
                continue
            if len(self.buf) < HEADER.size + length:
                return None
            payload = bytes(self.buf[HEADER.size:HEADER.size + length])
            del self.buf[:HEADER.size + length]
            return ftype, fid, payload


class AgentConnection:
    """One connected stream to a guest's agent (QEMU's chardev socket)."""

    def __init__(self, sock, where="guest"):
        self.sock = sock
        self.where = where
        self.reader = FrameReader()
        self.next_id = 1
        self.ready_info = None

    def _recv_frame(self, deadline):
        while True:
            frame = self.reader.next()
            if frame:
                return frame
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(1 << 20)
            except socket.timeout:
                raise TimeoutError from None
            if not data:
                raise AgentError(f"[{self.where}] agent connection closed (did the guest die?)")
            self.reader.feed(data)

    def wait_ready(self, timeout, give_up=None, every=5.0):
        """Wait for the READY frame the agent sends when it starts.
        give_up(), if given, is asked @every seconds: a reason (a string)
        ends the wait early, as if the timeout had passed."""
        start = time.monotonic()
        deadline = start + timeout
        while True:
            try:
                ftype, _, payload = self._recv_frame(
                    min(deadline, time.monotonic() + every) if give_up else deadline)
            except TimeoutError:
                now = time.monotonic()
                why = give_up() if give_up and now < deadline else None
                if now < deadline and not why:
                    continue
                raise AgentError(f"[{self.where}] agent not ready within "
                                 f"{now - start:.0f} s" + (f": {why}" if why else "")) from None
            if ftype == READY:
                self.ready_info = payload.decode(errors="replace")
                return self.ready_info

    def run(self, cmd, timeout=60):
        """Run cmd with /bin/sh -c in the guest; returns a Result."""
        fid = self.next_id
        self.next_id += 1
        self.sock.sendall(encode_exec(fid, cmd, timeout))
        deadline = time.monotonic() + timeout + 30
        while True:
            try:
                ftype, rid, payload = self._recv_frame(deadline)
            except TimeoutError:
                raise AgentNoAnswer(f"[{self.where}] no answer to `{cmd}` "
                                    f"within {timeout + 30:.0f} s") from None
            if ftype == RESULT and rid == fid:
                status, out, err = decode_result(payload)
                return Result(cmd, status, out, err, self.where)

    def send(self, cmd, timeout=60):
        """Send a command without waiting for its result: for commands that
        end the guest (reboot -f, poweroff -f), which never answer."""
        fid = self.next_id
        self.next_id += 1
        self.sock.sendall(encode_exec(fid, cmd, timeout))

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
