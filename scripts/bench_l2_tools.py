#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""How long a Level 2 guest takes to start a test tool, side by side in one
VM: from the 9p share (Level 1's own 9p share of this machine's folder, two
hops) and from the guest's memory, where tests/harness/e2e.py copies the
tools.  Each command runs ROUNDS times through the guest's agent, timed
from this machine; the agent's empty round trip (`true`) is the baseline.
Results in $VSRIOV_CACHE/bench/l2-tools.{json,md} (docs/benchmarks.md)."""
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from harness import paths  # noqa: E402
from harness.e2e import System  # noqa: E402
from harness.vm import L1Host  # noqa: E402

ROUNDS = int(os.environ.get("VSRIOV_BENCH_ROUNDS", "5"))
SHARE = "/tmp/tools.9p"
# (what, command); a tool given no subcommand prints its usage and exits.
COMMANDS = [("agent round trip", "true")] + [
    (f"{tool} from {where}", f"{d}/{tool} x")
    for tool in ("traffic", "cni-flow")
    for where, d in (("the 9p share", SHARE), ("memory", "/mnt/tools"))]


def timed(l2, cmd):
    t = time.monotonic()
    l2.run(cmd, timeout=300)
    return time.monotonic() - t


def main():
    out_dir = os.path.join(paths.CACHE, "bench")
    os.makedirs(out_dir, exist_ok=True)
    l1 = L1Host("l1", paths.ARTIFACTS)
    l1.start(boot_timeout=300)
    results = {"rounds": ROUNDS, "seconds": {}}
    try:
        s = System(l1)
        s.start_host()
        l2 = s.start_vm()
        l2.check(f"mount -t 9p -o trans=virtio,version=9p2000.L tools {SHARE}")
        # Rounds interleave the commands, so a change in the machine's load
        # falls on all of them alike.
        for _ in range(ROUNDS):
            for what, cmd in COMMANDS:
                results["seconds"].setdefault(what, []).append(round(timed(l2, cmd), 2))
        l2.check(f"umount {SHARE}")
        s.stop()
    finally:
        l1.stop()
    write(out_dir, results)


def write(out_dir, results):
    with open(os.path.join(out_dir, "l2-tools.json"), "w") as f:
        json.dump(results, f, indent=1)
    sec = results["seconds"]
    med = {what: statistics.median(v) for what, v in sec.items()}
    lines = [f"Starting a tool in a Level 2 guest, {results['rounds']} rounds "
             "(seconds through the agent, from this machine)", "",
             "| command | median | min | max |", "|---|---|---|---|"]
    for what, v in sec.items():
        lines.append(f"| {what} | {med[what]:.2f} | {min(v):.2f} | {max(v):.2f} |")
    lines.append("")
    for tool in ("traffic", "cni-flow"):
        share, mem = med[f"{tool} from the 9p share"], med[f"{tool} from memory"]
        lines.append(f"{tool}: memory/share {mem / share:.2f}x")
    with open(os.path.join(out_dir, "l2-tools.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
