#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Read the insn-count plugin's totals from its socket: prints its line,
"user U kernel K vcpus N".  Runs where the QEMU runs (Level 1 for the
bench's VM, with python3 only); importable for read()."""
import socket
import sys


def read(path, timeout=30):
    """The plugin's totals at @path: {"user": U, "kernel": K, "vcpus": N}."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(timeout)
        s.connect(path)
        data = b""
        while not data.endswith(b"\n"):
            got = s.recv(256)
            if not got:
                break
            data += got
    w = data.decode().split()
    return {w[i]: int(w[i + 1]) for i in range(0, len(w) - 1, 2)}


if __name__ == "__main__":
    c = read(sys.argv[1])
    print(f"user {c['user']} kernel {c['kernel']} vcpus {c['vcpus']}")
