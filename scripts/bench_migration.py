#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Live migration of a VM whose guest enabled VFs (issue 18): downtime and
total migration time against the number of enabled VFs and guest RAM.

Each point: a guest (TCG, the test kernel) with one virtual PF on a
premapped hubport pool (so that only QEMU and the guest are measured),
the guest enables every VF, then the VM migrates to a second QEMU with a
pool of its own of the same shape, over a Unix socket, without a bandwidth
cap; QEMU's own figures (query-migrate: total-time, downtime, setup-time,
transferred) are recorded.  Side by side in the same run: 0 VFs (the
plain virtio-net PF, no pool) and upstream QEMU's static composition
(`sriov-pf`: VFs declared on the command line, at most 7 without ARI).

Writes $VSRIOV_ARTIFACTS/migration.json, .md and .png.
    scripts/bench-migration [VFS ...] [--memory 1G,4G]"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
sys.path.insert(0, os.path.dirname(__file__))

from bench_pods import two_panels  # noqa: E402
from bench_scale import ENABLE, SMP, args as vpf_args  # noqa: E402
from harness import paths  # noqa: E402
from harness.vm import Guest  # noqa: E402
from system.guest_net import FIND_PF  # noqa: E402

VFS = [0, 4, 16, 64]
UPSTREAM_VFS = 4


def plain_args():
    return ["-device", "pcie-root-port,id=rp0,chassis=1",
            "-netdev", "hubport,id=pfnet0,hubid=0",
            "-device", "virtio-net-pci,bus=rp0,id=pf0,netdev=pfnet0"]


def upstream_args(n):
    """upstream's composition: VFs declared before their PF (test_l0_upstream_sriov)."""
    a = ["-device", "pcie-root-port,id=rp0,chassis=1"]
    for i in range(n + 1):
        a += ["-netdev", f"hubport,id=n{i},hubid={i}"]
    for i in range(1, n + 1):
        a += ["-device", f"virtio-net-pci,bus=rp0,addr=0x0.{i:#x},netdev=n{i},sriov-pf=pf0"]
    return a + ["-device", "virtio-net-pci,bus=rp0,addr=0x0.0x0,netdev=n0,id=pf0"]


def enable(g, n):
    if not n:
        return
    pf = g.check(FIND_PF).strip()
    g.check(ENABLE.format(n=n, pf=pf), timeout=1800)


def point(kind, n, memory, out):
    qargs = {"vsriov": lambda: vpf_args(1, n) if n else plain_args(),
             "upstream": lambda: upstream_args(n)}[kind]()
    name = f"mig-{kind[:2]}{n}-{memory}"
    with Guest(name, out, memory=memory, smp=SMP, qemu_args=qargs) as src:
        enable(src, n)
        with Guest(name + "-dst", out, memory=memory, smp=SMP, qemu_args=qargs,
                   incoming=True) as dst:
            src.qmp.execute("migrate-set-parameters", {"max-bandwidth": 64 << 30})
            t = time.monotonic()
            st = src.migrate_to(dst, timeout=1800)
            wall = time.monotonic() - t
            # The guest runs on the destination with its VFs.
            if n:
                pf = dst.check(FIND_PF).strip()
                got = int(dst.check(f"ls -d /sys/bus/pci/devices/{pf}/virtfn*/virtio*/net/* "
                                    f"| wc -l").strip())
                assert got == n, f"{got} of {n} VFs on the destination"
            else:
                dst.check("true")
    ram = st.get("ram", {})
    return {"kind": kind, "vfs": n, "memory": memory, "vcpus": SMP,
            "total_ms": st.get("total-time"), "downtime_ms": st.get("downtime"),
            "setup_ms": st.get("setup-time"), "transferred_mib":
            round(ram.get("transferred", 0) / 2**20, 1), "wall_s": round(wall, 2)}


def plot(out, results):
    series = []
    for mem in sorted({r["memory"] for r in results}):
        rs = [r for r in results if r["memory"] == mem and r["kind"] == "vsriov"
              and "error" not in r]
        series.append((f"vsriov, {mem}", "o-", [r["vfs"] for r in rs],
                       ([r["downtime_ms"] for r in rs], [r["total_ms"] for r in rs])))
        series += [(f"upstream sriov-pf, {mem}", "s", [r["vfs"]],
                    ([r["downtime_ms"]], [r["total_ms"]])) for r in results
                   if r["memory"] == mem and r["kind"] == "upstream" and "error" not in r]
    two_panels(os.path.join(out, "migration.png"),
               ("downtime (ms)", "total migration time (ms)"), series,
               "live migration, TCG guest, hubport pools, Unix socket")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("vfs", nargs="*", type=int, default=VFS)
    ap.add_argument("--memory", default="1G,4G")
    a = ap.parse_args()
    out = paths.ARTIFACTS
    os.makedirs(out, exist_ok=True)
    points = [("vsriov", n, m) for m in a.memory.split(",") for n in a.vfs]
    points += [("upstream", UPSTREAM_VFS, m) for m in a.memory.split(",")]
    results = []
    for kind, n, mem in points:
        try:
            results.append(point(kind, n, mem, out))
        except Exception as e:  # a point that fails is reported, not fatal
            results.append({"kind": kind, "vfs": n, "memory": mem, "vcpus": SMP,
                            "error": str(e).splitlines()[0]})
        print(results[-1], flush=True)
        with open(os.path.join(out, "migration.json"), "w") as f:
            json.dump({"what": "live migration figures from query-migrate; hubport pools, "
                               "TCG, the test kernel, Unix socket, no bandwidth cap",
                       "results": results}, f, indent=2)
    lines = ["| VFs | composition | guest RAM | downtime (ms) | total (ms) | setup (ms) | "
             "transferred (MiB) |", "|---|---|---|---|---|---|---|"]
    for r in results:
        what = "vsriov virtual PF" if r["kind"] == "vsriov" and r["vfs"] else \
            "plain virtio-net PF" if r["kind"] == "vsriov" else "upstream sriov-pf"
        if "error" in r:
            lines.append(f"| {r['vfs']} | {what} | {r['memory']} | failed: {r['error']} | | | |")
            continue
        lines.append(f"| {r['vfs']} | {what} | {r['memory']} | {r['downtime_ms']} | "
                     f"{r['total_ms']} | {r['setup_ms']} | {r['transferred_mib']} |")
    with open(os.path.join(out, "migration.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    plot(out, results)
    print(f"figures in {out}/migration.json, .md and .png")
    sys.exit(1 if any("error" in r for r in results) else 0)


if __name__ == "__main__":
    main()
