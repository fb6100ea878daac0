#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""What `ip link show` of a PF with N VFs costs the guest.

Each point: a guest (TCG, 1 vCPU, the test kernel: guest-kernel-patches/)
with one virtual PF on a hubport pool of N VFs, all enabled.  The driver
asks the PF's administration virtqueue for each VF's configuration and
counters.  Measured: the time of RUNS `ip link show dev <pf>` in the
guest, one `ip -batch` process for all (tracing off), then, for one more,
the PF's config-space accesses (QEMU's pci_cfg_read and pci_cfg_write
trace events for the PF's function, each a vCPU exit) and the
administration commands (vsriov_admin_cmd), switched on through QMP for
that one run only.  Per VF: the slope between the smallest and the
largest N.

Writes $VSRIOV_ARTIFACTS/ip-link.json, .md and .png.
    scripts/bench-ip-link [N ...]"""
import argparse
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
sys.path.insert(0, os.path.dirname(__file__))

from bench_pods import two_panels  # noqa: E402
from bench_scale import ENABLE, args as vpf_args  # noqa: E402
from harness import paths  # noqa: E402
from harness.vm import Guest  # noqa: E402
from system.guest_net import FIND_PF  # noqa: E402

NS = [1, 8, 32]
RUNS = int(os.environ.get("VSRIOV_BENCH_RUNS", "200"))
KERNELS = [("test", "vmlinuz-test")]
EVENTS = ["pci_cfg_read", "pci_cfg_write", "vsriov_admin_cmd"]


def trace_lines(path):
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return []


def point(kernel_name, kernel, n, out):
    trace = os.path.join(out, f"ip-link-{kernel_name}-{n}.trace")
    if os.path.exists(trace):
        os.unlink(trace)
    qargs = vpf_args(1, n) + ["-trace", f"file={trace}"]
    with Guest(f"iplink-{kernel_name}{n}", out, memory="1G", smp=1,
               kernel=paths.guest(kernel), qemu_args=qargs) as g:
        pf = g.check(FIND_PF).strip()
        dev = g.check(f"ls /sys/bus/pci/devices/{pf}/virtio*/net/").strip()
        g.check(ENABLE.format(n=n, pf=pf), timeout=1800)
        shown = g.check(f"ip link show dev {dev}")
        vfs = len(re.findall(r"^\s+vf \d+ ", shown, re.M))
        assert vfs == n, f"{kernel_name}: ip link show lists {vfs} of {n} VFs:\n{shown}"
        # (one ip process for all: its start-up, ~16 ms under TCG, is not
        # what is measured)
        t = g.check(f"yes 'link show dev {dev}' | head -n {RUNS} > /tmp/shows; "
                    "t0=$EPOCHREALTIME; ip -batch /tmp/shows >/dev/null || exit 1; "
                    "echo $t0 $EPOCHREALTIME", timeout=1800).split()
        ms = (float(t[1]) - float(t[0])) * 1000 / RUNS
        # One more, traced: what it asks of QEMU.
        for e in EVENTS:
            g.qmp.execute("trace-event-set-state", {"name": e, "enable": True})
        before = len(trace_lines(trace))
        g.check(f"ip link show dev {dev} >/dev/null")
        for e in EVENTS:
            g.qmp.execute("trace-event-set-state", {"name": e, "enable": False})
        # (the log is flushed per line; the run's lines are all there once
        # the guest answered)
        lines = trace_lines(trace)[before:]
    bdf = pf.split(":", 1)[1]      # "01:00.0"
    cfg = [ln for ln in lines if "pci_cfg_" in ln and f" {bdf} @" in ln]
    return {"kernel": kernel_name, "vfs": n, "runs": RUNS, "ms_per_show": round(ms, 2),
            "pf_config_accesses": len(cfg),
            "pf_config_writes": sum("pci_cfg_write" in ln for ln in cfg),
            "admin_commands": sum("vsriov_admin_cmd" in ln for ln in lines)}


def per_vf(results, kernel, key):
    rs = sorted((r for r in results if r["kernel"] == kernel and "error" not in r),
                key=lambda r: r["vfs"])
    if len(rs) < 2:
        return None
    lo, hi = rs[0], rs[-1]
    return (hi[key] - lo[key]) / (hi["vfs"] - lo["vfs"])


def markdown(results):
    md = ["| kernel | VFs | ms per `ip link show` | PF config accesses | of them writes | "
          "admin VQ commands |", "|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            md.append(f"| {r['kernel']} | {r['vfs']} | failed: {r['error']} | | | |")
            continue
        md.append(f"| {r['kernel']} | {r['vfs']} | {r['ms_per_show']} | "
                  f"{r['pf_config_accesses']} | {r['pf_config_writes']} | "
                  f"{r['admin_commands']} |")
    md += ["", "| per VF (slope) | ms | PF config accesses | admin VQ commands |",
           "|---|---|---|---|"]
    for k, _ in KERNELS:
        vals = [per_vf(results, k, key) for key in
                ("ms_per_show", "pf_config_accesses", "admin_commands")]
        if None not in vals:
            md.append(f"| {k} | {vals[0]:.2f} | {vals[1]:.1f} | {vals[2]:.1f} |")
    return "\n".join(md) + "\n"


def plot(out, results):
    series = []
    for k, _ in KERNELS:
        rs = sorted((r for r in results if r["kernel"] == k and "error" not in r),
                    key=lambda r: r["vfs"])
        series.append((k, "o-", [r["vfs"] for r in rs],
                       ([r["ms_per_show"] for r in rs], [r["pf_config_accesses"] for r in rs])))
    two_panels(os.path.join(out, "ip-link.png"),
               ("ms per `ip link show` of the PF",
                "PF config-space accesses (vCPU exits) per show"), series,
               "VF configuration through the administration virtqueue (TCG guest)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ns", nargs="*", type=int, default=NS)
    a = ap.parse_args()
    out = paths.ARTIFACTS
    os.makedirs(out, exist_ok=True)
    results = []
    for k, kernel in KERNELS:
        for n in a.ns:
            t = time.monotonic()
            try:
                results.append(point(k, kernel, n, out))
            except Exception as e:  # a point that fails is reported, not fatal
                results.append({"kernel": k, "vfs": n, "error": str(e).splitlines()[0]})
            print(results[-1], f"({time.monotonic() - t:.0f} s)", flush=True)
            with open(os.path.join(out, "ip-link.json"), "w") as f:
                json.dump({"what": "ip link show of a PF with N VFs in a TCG guest "
                                   "(administration virtqueue)",
                           "results": results}, f, indent=2)
    md = markdown(results)
    with open(os.path.join(out, "ip-link.md"), "w") as f:
        f.write(md)
    print(md)
    plot(out, results)
    print(f"figures in {out}/ip-link.json, .md and .png")
    sys.exit(1 if any("error" in r for r in results) else 0)


if __name__ == "__main__":
    main()
