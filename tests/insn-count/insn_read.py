#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Read the insn-count plugin's totals from its socket.  Runs where the
QEMU runs (Level 1 for the bench's VM, with python3 only).

    insn_read.py SOCK
        prints the plugin's line, "user U kernel K vcpus N"
    insn_read.py SOCK --window SECS [--with CMD]
        a window: two snapshots SECS apart, each the time, the totals and
        CMD's output (e.g. a switch port's counters, read right after the
        totals in both snapshots, so its delay shifts the window and does
        not change its length), as JSON; one process, so starting Python
        is not in the window"""
import argparse
import json
import socket
import subprocess
import time


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


def snapshot(path, cmd):
    t = time.time()
    s = {"time": t, **read(path)}
    if cmd:
        s["with"] = subprocess.run(cmd, shell=True, check=True, capture_output=True,
                                   text=True).stdout
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sock")
    ap.add_argument("--window", type=float)
    ap.add_argument("--with", dest="cmd")
    a = ap.parse_args()
    if a.window is None:
        c = read(a.sock)
        print(f"user {c['user']} kernel {c['kernel']} vcpus {c['vcpus']}")
        return
    first = snapshot(a.sock, a.cmd)
    time.sleep(max(0.0, first["time"] + a.window - time.time()))
    print(json.dumps([first, snapshot(a.sock, a.cmd)]))


if __name__ == "__main__":
    main()
