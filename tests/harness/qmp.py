# SPDX-License-Identifier: GPL-2.0-or-later
"""A small synchronous QMP client (JSON over a Unix stream socket).

QEMU connects to a socket the harness listens on (`-chardev socket,...` in
client mode), so there is no race between QEMU creating a socket and the
harness connecting to it.
"""
import array
import json
import socket
import time


class QMPError(Exception):
    def __init__(self, cmd, error):
        super().__init__(f"QMP {cmd}: {error.get('class')}: {error.get('desc')}")
        self.cmd = cmd
        self.error_class = error.get("class")
        self.desc = error.get("desc", "")


class QMP:
    def __init__(self, sock, where="guest"):
        self.sock = sock
        self.where = where
        self.buf = b""
        self.events = []

    def _read_msg(self, deadline):
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"[{self.where}] QMP: no message in time")
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                raise TimeoutError(f"[{self.where}] QMP: no message in time") from None
            if not data:
                raise ConnectionError(f"[{self.where}] QMP connection closed")
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def handshake(self, timeout=30):
        deadline = time.monotonic() + timeout
        greeting = self._read_msg(deadline)
        if "QMP" not in greeting:
            raise ConnectionError(f"[{self.where}] not a QMP greeting: {greeting}")
        self.execute("qmp_capabilities", timeout=timeout)

    def execute(self, cmd, args=None, timeout=60, fds=()):
        """Run a command; returns its 'return' value or raises QMPError."""
        self.send(cmd, args, fds)
        return self.answer(cmd, timeout)

    def send(self, cmd, args=None, fds=()):
        """Send a command without waiting: answer() reads its answer (while
        the test does something else meanwhile).  @fds go with it
        (SCM_RIGHTS), as getfd and add-fd take them."""
        msg = {"execute": cmd}
        if args:
            msg["arguments"] = args
        data = json.dumps(msg).encode() + b"\n"
        if fds:
            sent = self.sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                               array.array("i", fds))])
            data = data[sent:]
        self.sock.sendall(data)

    def answer(self, cmd, timeout=60):
        """The answer to the command send() sent last (events are kept)."""
        deadline = time.monotonic() + timeout
        while True:
            resp = self._read_msg(deadline)
            if "event" in resp:
                self.events.append(resp)
            elif "error" in resp:
                raise QMPError(cmd, resp["error"])
            elif "return" in resp:
                return resp["return"]

    def hmp(self, command_line, timeout=60):
        return self.execute("human-monitor-command", {"command-line": command_line},
                            timeout=timeout)

    def wait_event(self, name, timeout=60, match=None):
        """Wait for an event (already received ones count), and consume it."""
        deadline = time.monotonic() + timeout
        while True:
            for i, ev in enumerate(self.events):
                if ev["event"] == name and (match is None or match(ev)):
                    return self.events.pop(i)
            resp = self._read_msg(deadline)
            if "event" in resp:
                self.events.append(resp)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def main(argv):
    """qmp.py SOCKET CMD [JSON-ARGS]: run one command on a QEMU listening on
    SOCKET (-qmp unix:SOCKET,server=on), waiting up to 30 s for the socket,
    and print the answer as JSON: {"return": ...} or {"error": ...}.  Used
    inside the emulated host, where QEMUs are started by shell commands."""
    path, cmd = argv[1], argv[2]
    args = json.loads(argv[3]) if len(argv) > 3 else None
    deadline = time.monotonic() + 30
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            break
        except OSError:
            s.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)
    q = QMP(s, path)
    q.handshake()
    try:
        print(json.dumps({"return": q.execute(cmd, args, timeout=120)}))
    except QMPError as e:
        print(json.dumps({"error": {"class": e.error_class, "desc": e.desc}}))


if __name__ == "__main__":
    import sys
    main(sys.argv)
