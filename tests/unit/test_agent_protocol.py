# SPDX-License-Identifier: GPL-2.0-or-later
"""The agent's wire format, both ends: the Python codec, and the C agent's
client mode (`vsriov-agent run --connect`) against a Python agent."""
import os
import socket
import struct
import subprocess
import tempfile
import threading

import pytest

from harness import agent, paths


def agent_binary():
    return paths.agent_binary()


def test_frame_roundtrip():
    r = agent.FrameReader()
    r.feed(agent.encode_exec(7, "echo hi", 2.5))
    ftype, fid, payload = r.next()
    assert (ftype, fid) == (agent.EXEC, 7)
    assert struct.unpack_from("<I", payload)[0] == 2500
    assert payload[4:] == b"echo hi"
    assert r.next() is None


def test_reader_resyncs_after_garbage_and_split_frames():
    r = agent.FrameReader()
    data = b"\x00garbage VSA" + agent.encode(agent.PONG, 3, b"ab") + agent.encode(agent.READY, 0)
    frames = []
    for i in range(len(data)):  # one byte at a time
        r.feed(data[i:i + 1])
        while (f := r.next()):
            frames.append(f)
    assert frames == [(agent.PONG, 3, b"ab"), (agent.READY, 0, b"")]


def test_wait_ready_gives_up_early_with_the_reason():
    """A boot the console says will not complete (l1host's lost timer)
    ends the wait at once, with "agent not ready within" (which l1host's
    retry looks for) and the reason; READY still wins when it comes."""
    a, b = socket.socketpair()
    with a, b:
        conn = agent.AgentConnection(a, "t")
        asked = []

        def give_up():
            asked.append(1)
            return "lost a timer" if len(asked) >= 2 else None
        with pytest.raises(agent.AgentError,
                           match=r"agent not ready within \d+ s: lost a timer$"):
            conn.wait_ready(60, give_up, every=0.05)
        assert len(asked) == 2
        b.sendall(agent.encode(agent.READY, 0, b"hi"))
        assert conn.wait_ready(60, lambda: None, every=0.05) == "hi"


def test_reader_skips_oversized_length():
    r = agent.FrameReader()
    bogus = struct.pack("<IB3xII", agent.MAGIC, agent.EXEC, 1, agent.MAX_PAYLOAD + 1)
    r.feed(bogus + agent.encode(agent.PING, 9, b"x"))
    assert r.next() == (agent.PING, 9, b"x")


def test_result_decoding_rejects_bad_lengths():
    ok = struct.pack("<iII", 3, 2, 1) + b"oke"
    assert agent.decode_result(ok) == (3, "ok", "e")
    with pytest.raises(agent.AgentError):
        agent.decode_result(struct.pack("<iII", 0, 100, 0))


class FakeGuestAgent(threading.Thread):
    """Serves the agent protocol on a Unix socket, as QEMU's chardev would
    relay a guest's agent, running commands locally."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.lsock = socket.socket(socket.AF_UNIX)
        self.lsock.bind(path)
        self.lsock.listen(4)

    def run(self):
        while True:
            try:
                conn, _ = self.lsock.accept()
            except OSError:
                return
            reader = agent.FrameReader()
            conn.sendall(b"stale bytes" + agent.encode(agent.RESULT, 999, b"x" * 12))
            while True:
                data = conn.recv(65536)
                if not data:
                    break
                reader.feed(data)
                while (f := reader.next()):
                    ftype, fid, payload = f
                    if ftype == agent.PING:
                        conn.sendall(agent.encode(agent.PONG, fid, payload))
                    elif ftype == agent.EXEC:
                        p = subprocess.run(payload[4:].decode(), shell=True, capture_output=True)
                        body = struct.pack("<iII", p.returncode, len(p.stdout), len(p.stderr))
                        conn.sendall(agent.encode(agent.RESULT, fid, body + p.stdout + p.stderr))


def test_c_client_runs_command_and_relays_status():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "a.sock")
        FakeGuestAgent(path).start()
        p = subprocess.run([agent_binary(), "run", "--connect", path, "--wait", "10", "--",
                            "echo out; echo err >&2; exit 7"], capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 7
        assert p.stdout == "out\n"
        assert p.stderr == "err\n"


def test_c_client_reports_unreachable_agent():
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run([agent_binary(), "run", "--connect", os.path.join(d, "none"),
                            "--wait", "0.5", "--", "true"], capture_output=True, text=True,
                           timeout=30)
        assert p.returncode == 125
        assert "no agent answered" in p.stderr


def test_c_agent_usage_error():
    p = subprocess.run([agent_binary(), "bogus"], capture_output=True, text=True)
    assert p.returncode == 2
    assert "usage:" in p.stderr


def test_c_client_gives_up_when_qemu_pid_is_gone():
    dead = subprocess.Popen(["true"])
    dead.wait()
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run([paths.agent_binary(), "run", "--connect", os.path.join(d, "none"),
                            "--wait", "60", "--pid", str(dead.pid), "--", "true"],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 125
        assert "exited before its guest's agent answered" in p.stderr
