#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""VF enable cost on a virtual PF: 1 GiB vs 16 GiB guests, in one run.

For each guest size, a guest with a vPF of 4 tap-backed VFs enables and
disables its VFs ROUNDS times; each enable is timed inside the guest, from
the write to sriov_numvfs until every VF's netdev exists (the guest's
driver probe included).  Backends are opened when QEMU starts (eager mode),
so the enable cost should not depend on guest RAM: the report gives the
16 GiB / 1 GiB ratio of the medians."""
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from harness import paths  # noqa: E402
from harness.netns import NetNS  # noqa: E402
from harness.vm import Guest  # noqa: E402
from system.guest_net import FIND_PF  # noqa: E402
from system.test_l0_vpf import host_switch, vpf_tap_args  # noqa: E402

NUM_VFS = 4
ROUNDS = int(os.environ.get("VSRIOV_BENCH_ROUNDS", "10"))
SIZES = ["1G", "16G"]

# Runs in the guest (bash, whose EPOCHREALTIME has microseconds): enable,
# wait for every VF netdev, print the start and end times.
ENABLE = ("t0=$EPOCHREALTIME; echo {n} > /sys/bus/pci/devices/{pf}/sriov_numvfs; "
          "while [ $(ls -d /sys/bus/pci/devices/{pf}/virtfn*/virtio*/net/* 2>/dev/null "
          "| wc -l) -lt {n} ]; do :; done; echo $t0 $EPOCHREALTIME")


def measure(size, out):
    with NetNS("vsr-bench") as host:
        host_switch(host, NUM_VFS)
        t_start = time.monotonic()
        with Guest(f"bench{size}", out, memory=size, netns=host.name,
                   qemu_args=vpf_tap_args(NUM_VFS)) as g:
            boot_s = time.monotonic() - t_start
            pf = g.check(FIND_PF).strip()
            samples = []
            for _ in range(ROUNDS):
                t0, t1 = map(float, g.check(ENABLE.format(n=NUM_VFS, pf=pf),
                                            timeout=120).split())
                samples.append(round((t1 - t0) * 1000, 2))
                g.check(f"echo 0 > /sys/bus/pci/devices/{pf}/sriov_numvfs")
            return {"guest_ram": size, "boot_s": round(boot_s, 2), "enable_ms": samples,
                    "enable_ms_median": round(statistics.median(samples), 2),
                    "enable_ms_p90": round(sorted(samples)[int(0.9 * (len(samples) - 1))], 2)}


def main():
    out = paths.ARTIFACTS
    os.makedirs(out, exist_ok=True)
    results = [measure(size, out) for size in SIZES]
    ratio = results[1]["enable_ms_median"] / results[0]["enable_ms_median"]
    report = {"what": f"guest-side time of `echo {NUM_VFS} > sriov_numvfs` until "
                      f"{NUM_VFS} VF netdevs exist, vPF with tap backends, TCG",
              "rounds": ROUNDS, "results": results,
              "ratio_16G_over_1G_median": round(ratio, 3)}
    with open(os.path.join(out, "vf-enable.json"), "w") as f:
        json.dump(report, f, indent=2)
    lines = ["| guest RAM | boot (s) | enable median (ms) | enable p90 (ms) |",
             "|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['guest_ram']} | {r['boot_s']} | {r['enable_ms_median']} | "
                     f"{r['enable_ms_p90']} |")
    lines.append(f"\nratio 16G/1G of the median enable time: {ratio:.3f} ({ROUNDS} rounds each)")
    with open(os.path.join(out, "vf-enable.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"figures in {out}/vf-enable.json and vf-enable.md")


if __name__ == "__main__":
    main()
