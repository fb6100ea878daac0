# SPDX-License-Identifier: GPL-2.0-or-later
"""Network namespaces on the test machine (Level 0), always cleaned up.

A test's host-side network (bridges, taps, OVS) lives in a namespace the
test creates, so no test traffic reaches the machine's own interfaces.
"""
import subprocess
import uuid


def sh(cmd, check=True, timeout=60):
    res = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=timeout)
    if check and res.returncode != 0:
        raise AssertionError(f"`{cmd}` failed ({res.returncode}):\n{res.stdout}{res.stderr}")
    return res


class NetNS:
    def __init__(self, prefix="vsr"):
        self.name = f"{prefix}-{uuid.uuid4().hex[:8]}"

    def __enter__(self):
        sh(f"ip netns add {self.name}")
        try:
            self.run("ip link set lo up")
        except BaseException:
            # A set-up that fails half-way leaves nothing behind either.
            self.close()
            raise
        return self

    def run(self, cmd, check=True, timeout=60):
        return sh(f"ip netns exec {self.name} sh -c {quote(cmd)}", check, timeout)

    def close(self):
        pids = sh(f"ip netns pids {self.name}", check=False).stdout.split()
        if pids:
            sh(f"kill -9 {' '.join(pids)}", check=False)
        sh(f"ip netns del {self.name}", check=False)

    def __exit__(self, *exc):
        self.close()


def quote(s):
    import shlex
    return shlex.quote(s)
