#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Host-side VF enable latency with vhost-vdpa backends, side by side.

In the emulated host (Level 1), vdpa-pool-daemon provisions 64 VFs, each
with a vdpa_sim_net device bound to vhost_vdpa.  Our QEMU then runs with
`-accel qtest`, so no guest code runs: tests/harness/qtest_pci.py plays the
guest's PCI core, and the time measured is that of the guest's VF Enable
write, from the write to QEMU having every VF realized and bound to its
backend (the write returns when QEMU has handled it).  Three ways to have N
VFs on vhost-vdpa, each with guest RAM 1 GiB and 8 GiB (shared memfd, as a
VA-mode vDPA device needs), N = 1, 8, 32, 64:

- static: upstream QEMU's sriov-pf composition, N `-device
  virtio-net-pci,sriov-pf=pf0` each on a `-netdev vhost-vdpa` of a
  daemon's VF (opened by QEMU at start);
- premapped: our virtual PF with a vsriov-daemon-pool (lazy=off): the
  daemon's VFs are claimed, opened and mapped when QEMU starts;
- lazy: the same pool with lazy=on: claimed, opened and mapped at VF Enable.

Each configuration: QEMU started (time to its first qtest answer, i.e.
machine and devices up), ROUNDS enable/disable cycles.  Results in
$VSRIOV_CACHE/bench/vf-enable-host.{json,md}.  VSRIOV_BENCH_PA=1 adds runs
with vdpa_sim in PA mode (use_va=0), where each device pins all guest RAM
like hardware does (N = 1 and 8)."""
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from harness import paths  # noqa: E402
from harness.vm import L1Host  # noqa: E402

ROUNDS = int(os.environ.get("VSRIOV_BENCH_ROUNDS", "5"))
NS = [int(n) for n in os.environ.get("VSRIOV_BENCH_NS", "1,8,32,64").split(",")]
RAMS = os.environ.get("VSRIOV_BENCH_RAMS", "1G,8G").split(",")
MODES = ["static", "premapped", "lazy"]
NUM_VFS = max(NS)

CONF = """[daemon]
socket = /run/vpdb/api.sock
state = /run/vpdb/state
[pf {pf}]
num-vfs = {n}
eswitch = switchdev
vdpa-mgmtdev = vdpasim_net
[pool p]
pf = {pf}
{pool_extra}"""

# Runs in Level 1: one configuration, JSON on stdout.
RUNNER = r"""
import json, os, signal, subprocess, sys, time
sys.path.insert(0, "/src/tests")
from harness.qtest_pci import QtestPci

mode, n, ram, rounds, devs = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5:]
qemu = "/vsriov/qemu-build/qemu-system-x86_64"
sock = f"/tmp/bq-{os.getpid()}.sock"
# PA-mode devices pin guest RAM against the memlock limit
args = ["prlimit", "--memlock=unlimited", qemu, "-M", "q35", "-nodefaults", "-display", "none", "-accel", "qtest",
        "-qtest", f"unix:{sock},server=on,wait=off", "-qtest-log", "/dev/null",
        "-object", f"memory-backend-memfd,id=mem0,size={ram},share=on",
        "-machine", "memory-backend=mem0", "-m", ram,
        "-device", "pcie-root-port,id=rp0,chassis=1,addr=0x2", "-netdev", "user,id=n0"]
if mode == "static":
    for i in range(n):
        d = i + 1
        args += ["-netdev", f"vhost-vdpa,id=s{i},vhostdev=/dev/{devs[i]}",
                 "-device", f"virtio-net-pci,bus=rp0,addr={d >> 3:#x}.{d & 7:#x},"
                            f"sriov-pf=pf0,netdev=s{i},romfile="]
    args += ["-device", "virtio-net-pci,bus=rp0,addr=0x0.0x0,id=pf0,netdev=n0,romfile="]
else:
    lazy = "on" if mode == "lazy" else "off"
    args += ["-object", f"vsriov-daemon-pool,id=p0,socket=/run/vpdb/api.sock,pool=p,"
                        f"count={n},lazy={lazy}",
             "-device", "virtio-net-pci,bus=rp0,id=pf0,netdev=n0,sriov-pool=p0,romfile="]
t0 = time.perf_counter()
p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open("/scratch/bench-qemu.log", "a"))
q = QtestPci(sock, timeout=600)
start_s = time.perf_counter() - t0
cap = q.sriov_cap()
enable, disable = [], []
for _ in range(rounds):
    took, ok = q.set_vfs(n, cap)
    assert ok and all(q.vf_present(i) for i in range(n)), (mode, n, "VF Enable did not take")
    enable.append(took * 1000)
    disable.append(q.disable_timed(cap) * 1000)
    assert not q.vf_present(0)
p.send_signal(signal.SIGTERM)
p.wait(timeout=120)
print(json.dumps(dict(mode=mode, n=n, ram=ram, start_s=start_s, enable_ms=enable,
                      disable_ms=disable)))
"""


def run_matrix(l1, devs, modes, ns, rams, tag):
    rows = []
    for ram in rams:
        for n in ns:
            for mode in modes:
                out = l1.check(f"python3 /tmp/bench-runner.py {mode} {n} {ram} {ROUNDS} "
                               + " ".join(devs), timeout=3600)
                r = json.loads(out.strip().splitlines()[-1])
                r["vdpa_mode"] = tag
                r["enable_median_ms"] = round(statistics.median(r["enable_ms"]), 2)
                r["disable_median_ms"] = round(statistics.median(r["disable_ms"]), 2)
                rows.append(r)
                print(f"{tag} {mode:9} n={n:2} ram={ram}: start {r['start_s']:.2f} s, "
                      f"enable {r['enable_median_ms']} ms, disable {r['disable_median_ms']} ms",
                      flush=True)
    return rows


def l1_daemon():
    """The daemon of our build as Level 1 sees it (the cache is /vsriov)."""
    return "/vsriov" + os.path.join(os.environ["VSRIOV_BUILD_OURS"],
                                    "vdpa-pool-daemon", "vdpa-pool-daemon")[len(paths.CACHE):]


def provision(l1, daemon, num_vfs=NUM_VFS, pool_extra=""):
    """vdpa-pool-daemon on a netdevsim PF of @num_vfs vdpa_sim_net VFs, its
    socket /run/vpdb/api.sock, its pid in /tmp/vpdb.pid, @pool_extra lines
    in its pool 'p': the vhost-vdpa device of each VF."""
    pf = l1.new_netdevsim(20, max_vfs=num_vfs)
    conf = CONF.format(pf=pf, n=num_vfs, pool_extra=pool_extra)
    l1.check(f"mkdir -p /run/vpdb && cat > /tmp/vpdb.conf <<'EOF'\n{conf}EOF")
    l1.check(f"setsid {daemon} -c /tmp/vpdb.conf > /tmp/vpdb.out 2>/scratch/vpdb.log "
             "< /dev/null & echo $! > /tmp/vpdb.pid")
    l1.wait_until("grep -qx READY /tmp/vpdb.out", timeout=600)
    return [l1.check(f"ls /sys/bus/vdpa/devices/vpd-{pf}-{i}/ | grep vhost-vdpa-").strip()
            for i in range(num_vfs)]


def unprovision(l1):
    l1.check("kill $(cat /tmp/vpdb.pid); while kill -0 $(cat /tmp/vpdb.pid) 2>/dev/null; "
             "do sleep 0.1; done")
    l1.check("echo 20 > /sys/bus/netdevsim/del_device && "
             "for d in $(ls /sys/bus/vdpa/devices/); do vdpa dev del $d; done", timeout=600)


def markdown(rows):
    md = ["| vDPA | guest RAM | N | mode | QEMU start (s) | VF enable median (ms) | "
          "runs (ms) | VF disable median (ms) | enable / static |", "|---|---|---|---|---|---|---|---|---|"]
    static = {(r["vdpa_mode"], r["ram"], r["n"]): r["enable_median_ms"]
              for r in rows if r["mode"] == "static"}
    for r in rows:
        base = static.get((r["vdpa_mode"], r["ram"], r["n"]))
        ratio = f"{r['enable_median_ms'] / base:.2f}" if base else "-"
        md.append(f"| {r['vdpa_mode']} | {r['ram']} | {r['n']} | {r['mode']} | "
                  f"{r['start_s']:.2f} | {r['enable_median_ms']} | "
                  f"{', '.join(f'{x:.1f}' for x in r['enable_ms'])} | "
                  f"{r['disable_median_ms']} | {ratio} |")
    # RAM dependence: the same mode and N with 8 GiB vs 1 GiB
    md += ["", "| vDPA | N | mode | enable 8G / 1G | start 8G / 1G |", "|---|---|---|---|---|"]
    by = {(r["vdpa_mode"], r["mode"], r["n"], r["ram"]): r for r in rows}
    for (tag, mode, n, ram), r in by.items():
        if ram != "1G" or (tag, mode, n, "8G") not in by:
            continue
        r8 = by[(tag, mode, n, "8G")]
        md.append(f"| {tag} | {n} | {mode} | "
                  f"{r8['enable_median_ms'] / max(r['enable_median_ms'], 1e-3):.2f} | "
                  f"{r8['start_s'] / max(r['start_s'], 1e-3):.2f} |")
    return "\n".join(md) + "\n"


def main():
    out = paths.ARTIFACTS
    os.makedirs(out, exist_ok=True)
    daemon = l1_daemon()
    pa = os.environ.get("VSRIOV_BENCH_PA") == "1"
    l1 = L1Host("bench-vfe", os.path.join(out, "vf-enable-host"),
                memory="12G" if pa else "6G")
    l1.start(boot_timeout=300)
    rows = []
    try:
        l1.check("modprobe -a vhost_vdpa vdpa_sim_net netdevsim")
        l1.check(f"cat > /tmp/bench-runner.py <<'EOF'\n{RUNNER}EOF")
        devs = provision(l1, daemon)
        rows += run_matrix(l1, devs, MODES, NS, RAMS, "VA")
        if pa:
            unprovision(l1)
            l1.check("rmmod vdpa_sim_net vdpa_sim && modprobe vdpa_sim use_va=0 && "
                     "modprobe vdpa_sim_net")
            devs = provision(l1, daemon)
            rows += run_matrix(l1, devs, MODES, [n for n in NS if n <= 8], RAMS, "PA")
    finally:
        l1.stop()
    res = {"rounds": ROUNDS, "rows": rows,
           "goal": "premapped within 1.2x of static, independent of guest RAM"}
    with open(os.path.join(out, "vf-enable-host.json"), "w") as f:
        json.dump(res, f, indent=2)
    md = markdown(rows)
    with open(os.path.join(out, "vf-enable-host.md"), "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    main()
