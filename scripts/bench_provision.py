#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Provisioning 64 VFs from nothing in the emulated host, side by side.

Each run starts from a new netdevsim device with no VFs and no vDPA
devices, and no OVS bridge, and ends when every VF has a vDPA device bound
to vhost_vdpa with its /dev/vhost-vdpa-N and its representor is a port of a
new OVS bridge (kernel datapath), in VLAN 4095 with its OpenFlow port
number and a default-deny flow: the daemon (eswitch over devlink netlink,
sriov_numvfs, VDPA_CMD_DEV_NEW per VF, one OVSDB transaction, one OpenFlow
bundle) from its start to READY, and a shell script doing the same with
`devlink`, `echo > sriov_numvfs`, one `vdpa dev add` per VF, `ip link set
up`, `ovs-vsctl add-port` and `ovs-ofctl add-flow` per VF.  Each is run
ROUNDS times, alternating."""
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

from harness import paths  # noqa: E402
from harness.ovs import L1_OVS_START  # noqa: E402
from harness.vm import L1Host  # noqa: E402

NUM_VFS = 64
ROUNDS = int(os.environ.get("VSRIOV_BENCH_ROUNDS", "3"))

SCRIPT = r"""#!/bin/sh
# The same steps as vdpa-pool-daemon's provisioning, with the tools.
set -e
dev=$1 n=$2
devlink dev eswitch set netdevsim/netdevsim$dev mode switchdev
echo $n > /sys/bus/netdevsim/devices/netdevsim$dev/sriov_numvfs
i=0
while [ $i -lt $n ]; do
	vdpa dev add mgmtdev vdpasim_net name sh$dev-$i mac 02:00:00:00:$(printf %02x $dev):$(printf %02x $i)
	i=$((i + 1))
done
i=0
while [ $i -lt $n ]; do
	d=$(ls /sys/bus/vdpa/devices/sh$dev-$i/ | grep vhost-vdpa-)
	test -c /dev/$d
	i=$((i + 1))
done
br=br$dev
sw=$(cat /sys/bus/netdevsim/devices/netdevsim$dev/net/*/phys_switch_id | head -1)
ovs-vsctl add-br $br -- set-fail-mode $br secure -- \
	set Bridge $br protocols=OpenFlow10,OpenFlow13,OpenFlow14
ovs-ofctl add-flow $br "cookie=0x5650030000000000,priority=0,actions=NORMAL"
for r in /sys/class/net/*; do
	[ "$(cat $r/phys_switch_id 2>/dev/null)" = "$sw" ] || continue
	vf=$(sed -n 's/^pf[0-9]*vf//p' $r/phys_port_name 2>/dev/null)
	[ -n "$vf" ] || continue
	rep=$(basename $r)
	ip link set $rep up
	ovs-vsctl add-port $br $rep -- set Interface $rep ofport_request=$((vf + 1)) \
		external_ids:vpd-state=free -- set Port $rep tag=4095
	ovs-ofctl add-flow $br "cookie=0x565001000000$(printf %04x $vf),priority=10,in_port=$((vf + 1)),actions=drop"
done
test "$(ovs-vsctl list-ports $br | wc -l)" = "$n"
"""

CONF = """[daemon]
socket = /run/vpd{dev}/api.sock
state = /run/vpd{dev}/state
ovs-bridge = br{dev}
[pf {pf}]
num-vfs = {n}
eswitch = switchdev
vdpa-mgmtdev = vdpasim_net
[pool p]
pf = {pf}
"""


def check_bridge(l1, dev):
    """Both ways end with the same OVS: 64 ports and 65 flows; then the
    bridge goes, so that every run starts from the same OVS."""
    assert int(l1.check(f"ovs-vsctl list-ports br{dev} | wc -l")) == NUM_VFS
    flows = l1.check(f"ovs-ofctl --no-stats dump-flows br{dev}")
    assert flows.count("actions=drop") == NUM_VFS and "actions=NORMAL" in flows, flows
    l1.check(f"ovs-vsctl del-br br{dev}", timeout=300)
    # ... and no netdevsim device or vDPA device of it stays behind, so the
    # next run's /sys/class/net and /sys/bus/vdpa are as small as this one's.
    l1.check(f"echo {dev} > /sys/bus/netdevsim/del_device && "
             "for d in $(ls /sys/bus/vdpa/devices/); do vdpa dev del $d; done", timeout=600)


def timed(l1, cmd):
    """Seconds cmd takes in Level 1, timed there (bash's EPOCHREALTIME)."""
    out = l1.check(f"bash -c 's=$EPOCHREALTIME; {cmd}; e=$EPOCHREALTIME; "
                   "echo $s $e'", timeout=1200).split()
    return float(out[-1]) - float(out[-2])


def main():
    out = paths.ARTIFACTS
    os.makedirs(out, exist_ok=True)
    daemon = "/vsriov" + os.path.join(os.environ["VSRIOV_BUILD_OURS"],
                                      "vdpa-pool-daemon", "vdpa-pool-daemon")[len(paths.CACHE):]
    l1 = L1Host("bench-prov", os.path.join(out, "provision"))
    l1.start(boot_timeout=300)
    res = {"vfs": NUM_VFS, "rounds": ROUNDS, "daemon_s": [], "script_s": []}
    try:
        l1.check("modprobe -a vhost_vdpa vdpa_sim_net netdevsim openvswitch")
        l1.check(L1_OVS_START, timeout=120)
        l1.check(f"cat > /tmp/provision.sh <<'EOF'\n{SCRIPT}EOF\nchmod +x /tmp/provision.sh")
        dev = 10
        for _ in range(ROUNDS):
            l1.new_netdevsim(dev, max_vfs=NUM_VFS)
            res["script_s"].append(timed(l1, f"/tmp/provision.sh {dev} {NUM_VFS}"))
            check_bridge(l1, dev)
            dev += 1
            pf = l1.new_netdevsim(dev, max_vfs=NUM_VFS)
            l1.check(f"mkdir -p /run/vpd{dev} && cat > /tmp/vpd{dev}.conf <<'EOF'\n"
                     f"{CONF.format(dev=dev, pf=pf, n=NUM_VFS)}EOF")
            # From start to READY (the line it prints when provisioned and serving).
            res["daemon_s"].append(timed(
                l1, f"{daemon} -c /tmp/vpd{dev}.conf 2>/scratch/vpd{dev}.log | "
                    "{ read line; echo $line > /tmp/ready; kill $(pidof vdpa-pool-daemon); }"))
            assert l1.check("cat /tmp/ready").strip() == "READY"
            n = int(l1.check(f"ls /sys/bus/vdpa/devices/ | grep -c '^vpd-{pf}-'").strip())
            assert n == NUM_VFS, n
            check_bridge(l1, dev)
            dev += 1
    finally:
        l1.stop()
    d, s = statistics.median(res["daemon_s"]), statistics.median(res["script_s"])
    res.update(daemon_median_s=round(d, 3), script_median_s=round(s, 3),
               speedup=round(s / d, 2), goal="at least 5x faster than the script")
    with open(os.path.join(out, "provision.json"), "w") as f:
        json.dump(res, f, indent=2)
    md = ("| provisioning 64 VFs | median (s) | runs (s) |\n|---|---|---|\n"
          f"| vdpa-pool-daemon | {d:.3f} | {', '.join(f'{x:.2f}' for x in res['daemon_s'])} |\n"
          f"| shell script | {s:.3f} | {', '.join(f'{x:.2f}' for x in res['script_s'])} |\n"
          f"\nspeed-up: {s / d:.2f}x\n")
    with open(os.path.join(out, "provision.md"), "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    main()
