#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Scale of a virtual PF (issue 16): a guest enables many VFs.

Shapes, each in a guest of its own (TCG, the test kernel, hubport pools so
that only QEMU and the guest are measured):
  - 1 PF with 255 VFs (the most one PF can have behind ARI on one bus);
  - 4 PFs with 64 VFs each.
For each: the guest-side time of `echo N > sriov_numvfs` until every VF's
netdev exists, of `echo 0 > sriov_numvfs`, and QEMU's resident memory
before and after the VFs were created (at realize: premapped pools) and
while they are enabled, per VF.  A PF with that many VFs needs room in
its root port's windows (pref64-reserve, mem-reserve: each VF has a 16 KiB
BAR) and enough vCPUs for the VFs' MSI-X vectors (docs/user-guide.md,
"Many VFs").  Writes $VSRIOV_ARTIFACTS/scale.json and scale.md."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from harness import paths  # noqa: E402
from harness.vm import Guest  # noqa: E402

SHAPES = [(1, 255), (4, 64)]
SMP = int(os.environ.get("VSRIOV_BENCH_SMP", "4"))

ENABLE = ("t0=$EPOCHREALTIME; echo {n} > /sys/bus/pci/devices/{pf}/sriov_numvfs; "
          "while [ $(ls -d /sys/bus/pci/devices/{pf}/virtfn*/virtio*/net/* 2>/dev/null "
          "| wc -l) -lt {n} ]; do sleep 0.05; done; echo $t0 $EPOCHREALTIME")
DISABLE = ("t0=$EPOCHREALTIME; echo 0 > /sys/bus/pci/devices/{pf}/sriov_numvfs; "
           "echo $t0 $EPOCHREALTIME")
# The PFs: virtio-net functions 0 with an SR-IOV capability, by bus order.
FIND_PFS = ("for d in /sys/bus/pci/devices/*; do [ -e $d/sriov_totalvfs ] && "
            "basename $d; done")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(f.read().split("VmRSS:")[1].split()[0])


def args(pfs, vfs):
    a = []
    hub = 0
    # Room for the VFs' BARs in each port's windows (docs/user-guide.md,
    # "Many VFs"); the firmware fits four ports of half this below 4 GiB.
    reserve = "pref64-reserve=128M,mem-reserve=64M" if vfs > 128 else \
        "pref64-reserve=32M,mem-reserve=16M"
    for p in range(pfs):
        a += ["-device", f"pcie-root-port,id=rp{p},chassis={p + 1},{reserve}",
              "-netdev", f"hubport,id=pfnet{p},hubid={hub}"]
        hub += 1
        ids = []
        for v in range(vfs):
            a += ["-netdev", f"hubport,id=b{p}x{v},hubid={hub}"]
            ids.append(f"netdevs=b{p}x{v}")
            hub += 1
        a += ["-object", f"vsriov-pool,id=pool{p}," + ",".join(ids),
              "-device", f"virtio-net-pci,bus=rp{p},id=pf{p},netdev=pfnet{p},"
              f"sriov-pool=pool{p}"]
    return a


def measure(pfs, vfs, out):
    t = time.monotonic()
    with Guest(f"scale{pfs}x{vfs}", out, memory="2G", smp=SMP,
               qemu_args=args(pfs, vfs)) as g:
        boot_s = time.monotonic() - t
        pid = g.proc.pid
        names = g.check(FIND_PFS).split()
        assert len(names) == pfs, names
        rss0 = rss_kib(pid)
        enable, disable = [], []
        for pf in names:
            t0, t1 = map(float, g.check(ENABLE.format(n=vfs, pf=pf), timeout=3600).split())
            enable.append(round((t1 - t0) * 1000))
        enabled = sum(1 for p in g.qmp.execute("query-vsriov") for v in p["vfs"]
                      if v["state"] == "enabled")
        rss1 = rss_kib(pid)
        for pf in names:
            t0, t1 = map(float, g.check(DISABLE.format(pf=pf), timeout=3600).split())
            disable.append(round((t1 - t0) * 1000))
    return {"pfs": pfs, "vfs_per_pf": vfs, "vcpus": SMP, "boot_s": round(boot_s, 1),
            "enabled": enabled, "enable_ms": enable, "disable_ms": disable,
            "qemu_rss_mib_vfs_disabled": round(rss0 / 1024), "qemu_rss_mib_vfs_enabled":
            round(rss1 / 1024),
            "rss_kib_per_enabled_vf": round((rss1 - rss0) / max(enabled, 1))}


def main():
    out = paths.ARTIFACTS
    os.makedirs(out, exist_ok=True)
    shapes = SHAPES
    if len(sys.argv) > 1:
        shapes = [tuple(map(int, s.split("x"))) for s in sys.argv[1:]]
    results = []
    for p, v in shapes:
        try:
            results.append(measure(p, v, out))
        except Exception as e:  # a shape that fails is reported, not fatal
            results.append({"pfs": p, "vfs_per_pf": v, "vcpus": SMP,
                            "error": str(e).splitlines()[0]})
        with open(os.path.join(out, "scale.json"), "w") as f:
            json.dump({"what": "guest-side VF enable/disable time and QEMU RSS, hubport "
                               "pools, TCG, the test kernel", "results": results}, f,
                      indent=2)
    lines = ["| PFs x VFs | vCPUs | enable (ms, per PF) | disable (ms, per PF) | "
             "QEMU RSS, VFs disabled / enabled (MiB) | RSS per enabled VF (KiB) |",
             "|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['pfs']} x {r['vfs_per_pf']} | {r['vcpus']} | failed: "
                         f"{r['error']} | | | |")
            continue
        lines.append(f"| {r['pfs']} x {r['vfs_per_pf']} | {r['vcpus']} | "
                     f"{', '.join(map(str, r['enable_ms']))} | "
                     f"{', '.join(map(str, r['disable_ms']))} | "
                     f"{r['qemu_rss_mib_vfs_disabled']} / {r['qemu_rss_mib_vfs_enabled']} | "
                     f"{r['rss_kib_per_enabled_vf']} |")
    with open(os.path.join(out, "scale.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"figures in {out}/scale.json and scale.md")
    sys.exit(1 if any("error" in r for r in results) else 0)


if __name__ == "__main__":
    main()
