# SPDX-License-Identifier: GPL-2.0-or-later
"""Level 1: the emulated host boots and has the parts the product needs:
a vDPA device on vdpa_sim_net with its /dev/vhost-vdpa-N, netdevsim VFs in
switchdev mode with representors, and OVS (kernel datapath) holding them.
Level 2: a guest started inside it on vhost-vdpa passes packets."""
import re

import pytest

from harness.ovs import L1_OVS_START as OVS_START

pytestmark = [pytest.mark.slow, pytest.mark.nested]


def test_modules_load(l1host):
    l1host.check("modprobe -a vhost_vdpa vdpa_sim_net netdevsim openvswitch")
    mods = l1host.check("cut -d' ' -f1 /proc/modules")
    for m in ("vhost_vdpa", "vdpa_sim", "vdpa_sim_net", "vringh", "netdevsim", "openvswitch"):
        assert m in mods.split(), f"{m} not loaded"


def test_vdpa_device(l1host):
    l1host.check("modprobe -a vhost_vdpa vdpa_sim_net")
    l1host.check("vdpa dev add mgmtdev vdpasim_net name vdpa0 mac 52:54:00:00:00:10")
    l1host.wait_until("test -c /dev/vhost-vdpa-0", timeout=30)
    assert "vdpa0" in l1host.check("vdpa dev show")
    l1host.check("vdpa dev del vdpa0")
    l1host.wait_until("! test -e /dev/vhost-vdpa-0", timeout=30)


def test_netdevsim_switchdev_and_ovs(l1host):
    l1host.check("modprobe -a netdevsim openvswitch")
    l1host.check("echo '1 1' > /sys/bus/netdevsim/new_device")
    l1host.wait_until("test -d /sys/bus/netdevsim/devices/netdevsim1/net", timeout=30)
    l1host.check("echo 4 > /sys/bus/netdevsim/devices/netdevsim1/sriov_numvfs")
    l1host.check("devlink dev eswitch set netdevsim/netdevsim1 mode switchdev")
    assert "mode switchdev" in l1host.check("devlink dev eswitch show netdevsim/netdevsim1")
    # Representors: one netdev per VF whose phys_port_name is pf0vfN.
    reps = l1host.wait_until(
        "for n in /sys/class/net/*; do p=$(cat $n/phys_port_name 2>/dev/null); "
        "case $p in pf0vf*) echo $(basename $n) $p;; esac; done | sort -k2 | "
        "tee /tmp/reps | wc -l | grep -qx 4", timeout=30)
    del reps
    reps = [line.split()[0] for line in l1host.check("cat /tmp/reps").splitlines()]
    assert len(reps) == 4

    l1host.check(OVS_START, timeout=120)
    l1host.check("ovs-vsctl add-br br0")
    for r in reps:
        l1host.check(f"ip link set {r} up && ovs-vsctl add-port br0 {r}")
    ports = l1host.check("ovs-vsctl list-ports br0").split()
    assert sorted(ports) == sorted(reps)
    dp = l1host.check("ovs-dpctl show")
    for r in reps:
        assert r in dp, f"{r} not in the kernel datapath:\n{dp}"


MEMCHK_QEMU = (
    "/vsriov/qemu-build/qemu-system-x86_64 -M q35 -nodefaults -display none -accel qtest "
    "-qtest null -S -m 256M {mem} -netdev vhost-vdpa,id=v0,vhostdev=/dev/{dev} "
    "-object vsriov-pool,id=p0,netdevs=v0 -device pcie-root-port,id=rp0,chassis=1 "
    "-device virtio-net-pci,bus=rp0,id=pf0,sriov-pool=p0 -qmp stdio < /tmp/quit.json")
SHARED_RAM = "-object memory-backend-memfd,id=mem0,size=256M,share=on -machine memory-backend=mem0"
NUMA_RAM = ("-object memory-backend-memfd,id=node0,size=128M,share=on "
            "-object {node1},id=node1,size=128M "
            "-numa node,nodeid=0,memdev=node0 -numa node,nodeid=1,memdev=node1")
# (before the PF: memory present when its VFs are created)
DIMM = (" -m 256M,slots=1,maxmem=512M -object {dimm},id=dimm0,size=128M "
        "-device pc-dimm,id=d0,memdev=dimm0")


def test_unmappable_guest_memory_is_refused_at_start(l1host):
    """A VF whose vhost-vdpa device cannot reach guest memory would
    negotiate and never pass a packet; QEMU refuses to start instead, naming
    the fix.  VA mode (vdpa_sim's default): private guest RAM is refused,
    shared file-backed RAM starts.  PA mode (vdpa_sim use_va=0, as hardware
    parents): a memlock limit below guest RAM is refused, enough starts."""
    l1host.check("echo '{\"execute\":\"qmp_capabilities\"}' > /tmp/quit.json && "
                 "echo '{\"execute\":\"quit\"}' >> /tmp/quit.json")
    l1host.check("modprobe -a vhost_vdpa vdpa_sim_net")
    dev = add_vdpa(l1host, "memchk", "52:54:00:00:00:40")

    r = l1host.run(MEMCHK_QEMU.format(mem="", dev=dev), timeout=120)
    assert r.status == 1, str(r)
    assert "netdev 'v0': the vDPA device (/sys/devices/memchk) maps guest memory by " \
        "virtual address" in r.stderr, str(r)
    assert "guest RAM 'pc.ram' is private\n" in r.stderr, str(r)
    assert "Give the guest shared file-backed RAM, e.g. -object " \
        "memory-backend-memfd,id=mem,size=256M,share=on -machine " \
        "memory-backend=mem" in r.stderr, str(r)
    r = l1host.run(MEMCHK_QEMU.format(mem=SHARED_RAM, dev=dev), timeout=120)
    assert r.status == 0, str(r)
    # Every backend mapped into the guest is guest RAM: NUMA nodes' memdevs
    # (the machine's RAM is then a container) and plugged DIMMs'.
    for mem, which in ((NUMA_RAM.format(node1="memory-backend-memfd,share=on"), None),
                       (NUMA_RAM.format(node1="memory-backend-ram"), "node1"),
                       (SHARED_RAM + DIMM.format(dimm="memory-backend-memfd,share=on"), None),
                       (SHARED_RAM + DIMM.format(dimm="memory-backend-ram"), "dimm0")):
        r = l1host.run(MEMCHK_QEMU.format(mem=mem, dev=dev), timeout=120)
        if which is None:
            assert r.status == 0, str(r)
        else:
            assert r.status == 1, str(r)
            assert f"guest RAM '{which}' is private\n" in r.stderr, str(r)

    # PA mode: the simulator pins guest RAM like hardware does.
    l1host.check("vdpa dev del memchk && rmmod vdpa_sim_net vdpa_sim && "
                 "modprobe vdpa_sim use_va=0 && modprobe vdpa_sim_net")
    try:
        dev = add_vdpa(l1host, "memchk", "52:54:00:00:00:40")
        r = l1host.run("prlimit --memlock=67108864 " + MEMCHK_QEMU.format(mem="", dev=dev),
                       timeout=120)
        assert r.status == 1, str(r)
        assert "netdev 'v0': 1 vDPA device(s) pin guest RAM (256 MiB each, 256 MiB in " \
            "all) but the memlock limit is 64 MiB\nRaise it (ulimit -l" in r.stderr, str(r)
        r = l1host.run("prlimit --memlock=unlimited " + MEMCHK_QEMU.format(mem="", dev=dev),
                       timeout=120)
        assert r.status == 0, str(r)
    finally:
        l1host.check("vdpa dev del memchk; rmmod vdpa_sim_net vdpa_sim; "
                     "modprobe -a vdpa_sim_net")


def add_vdpa(l1host, name, mac):
    """A vdpa_sim_net device (no control queue) and its /dev/vhost-vdpa-N."""
    l1host.check(f"vdpa dev add mgmtdev vdpasim_net name {name} mac {mac} "
                 "device_features 0x308010028")
    return l1host.wait_until(f"ls /sys/bus/vdpa/devices/{name}/ | grep vhost-vdpa-",
                             timeout=30).stdout.split()[0]


def loopback_counts(guest, dev, ip):
    """vdpa_sim_net loops a device's TX back to its RX: frames the guest
    sends come back to it, so its rx counter proves the data path."""
    guest.check(f"ip link set {dev} up && ip addr add {ip} dev {dev}")
    guest.wait_until(f"grep -qx 1 /sys/class/net/{dev}/carrier", timeout=60)
    guest.run(f"arping -c 3 -w 10 -I {dev} 10.99.99.99", timeout=60)
    rx = int(guest.check(f"cat /sys/class/net/{dev}/statistics/rx_packets"))
    tx = int(guest.check(f"cat /sys/class/net/{dev}/statistics/tx_packets"))
    return tx, rx


@pytest.mark.long
def test_l2_guest_on_vhost_vdpa_and_vpf(l1host):
    """A Level 2 guest whose NIC is a vhost-vdpa device on vdpa_sim_net, and
    whose virtual PF takes its VFs from a pool of two more vhost-vdpa
    devices: the paper's data path, with vdpa_sim_net as the host NIC."""
    l1host.check("modprobe -a vhost_vdpa vdpa_sim_net")
    nic = add_vdpa(l1host, "vdpa1", "52:54:00:00:00:20")
    vf0 = add_vdpa(l1host, "vdpa2", "52:54:00:00:00:30")
    vf1 = add_vdpa(l1host, "vdpa3", "52:54:00:00:00:31")
    # vdpa_sim maps only shared, file-backed guest memory (use_va mode).
    args = ["-object", "memory-backend-memfd,id=mem0,size=512M,share=on",
            "-machine", "memory-backend=mem0",
            "-netdev", f"vhost-vdpa,vhostdev=/dev/{nic},id=v0",
            "-device", "virtio-net-pci,netdev=v0,mac=52:54:00:00:00:20,romfile=",
            "-netdev", f"vhost-vdpa,vhostdev=/dev/{vf0},id=vf0",
            "-netdev", f"vhost-vdpa,vhostdev=/dev/{vf1},id=vf1",
            "-object", "vsriov-pool,id=p0,netdevs=vf0,netdevs=vf1",
            "-device", "pcie-root-port,id=rp0,chassis=1",
            "-device", "virtio-net-pci,bus=rp0,id=pf0,sriov-pool=p0,romfile="]
    with l1host.start_l2("l2", qemu_args=args, boot_timeout=900) as l2:
        assert l2.check("uname -r").strip().startswith("6.12.")
        n = l2.check("basename $(ls -d /sys/bus/pci/devices/0000:00:*/virtio*/net/* | head -1)"
                     ).strip()
        tx, rx = loopback_counts(l2, n, "10.99.0.1/24")
        assert tx >= 3 and rx >= 3, f"plain vhost-vdpa NIC: tx={tx} rx={rx}"

        pf = "0000:01:00.0"
        assert l2.check(f"cat /sys/bus/pci/devices/{pf}/sriov_totalvfs").strip() == "2"
        l2.check(f"echo 2 > /sys/bus/pci/devices/{pf}/sriov_numvfs")
        l2.wait_until(f"ls /sys/bus/pci/devices/{pf}/virtfn1/virtio*/net/ | grep -q .",
                      timeout=120)
        for i in range(2):
            dev = l2.check(f"ls /sys/bus/pci/devices/{pf}/virtfn{i}/virtio*/net/").strip()
            tx, rx = loopback_counts(l2, dev, f"10.99.{i + 1}.1/24")
            assert tx >= 3 and rx >= 3, f"VF {i} on vhost-vdpa: tx={tx} rx={rx}"
        # The simulator counted the VFs' traffic on the Level 1 side too
        # ("vdpa2: queue_type rx rx packets 12 rx bytes 996 ...").
        for name in ("vdpa2", "vdpa3"):
            stats = l1host.check(f"vdpa dev vstats show {name} qidx 0")
            m = re.search(r"rx packets (\d+)", stats)
            assert m and int(m.group(1)) >= 3, stats
