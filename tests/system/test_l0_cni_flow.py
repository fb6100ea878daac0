# SPDX-License-Identifier: GPL-2.0-or-later
"""Level 0: the SR-IOV CNI flow in a guest (issues 5 and 6).

The guest runs the patched kernel (guest-kernel-patches/) and
tests/cni-flow, which does sriov-cni's ADD and DEL with the same netlink
calls on top of sriov-cni-patch's sysfs resolution: each of two VFs is
given a MAC and VLAN 100 through the PF, moved into a "pod" netns, renamed
net1, addressed; the pods ping each other through the host switch; DEL
moves each VF back with its original name and MAC and resets it through
the PF.  QMP shows the VF configuration at each step.

test_l0_k8s_plugins.py does the same with the real SR-IOV CNI; this test
stays for tests/cni-flow itself, the stand-in that scripts/demo and the
Level 2 end-to-end test use because they run from this repository alone
(the upstream releases are not in any registry this project can reach),
and it runs where the releases are absent."""
import os

import pytest

from harness import golang, paths
from system.guest_net import FIND_PF, enable_vfs
from system.test_l0_vf_control import pf_netdev, qmp_vfs, vpf_args
from system.test_l0_vpf import host_switch

pytestmark = pytest.mark.slow

POD_MACS = ["02:00:00:00:01:01", "02:00:00:00:01:02"]


def build_cni_flow(out):
    golang.build_static(os.path.join(paths.SRC, "tests", "cni-flow"),
                        "build", "-o", os.path.join(out, "cni-flow"), ".")


def test_cni_add_del_in_guest(netns, guest_factory, artifacts):
    share = os.path.join(artifacts, "share")
    os.makedirs(share)
    build_cni_flow(share)
    host = netns("vsr-cnf")
    host_switch(host, 2)
    g = guest_factory("cniflow", netns=host.name, qemu_args=vpf_args(2),
                      shares={"cni": share})
    g.check("mkdir -p /mnt/cni && mount -t 9p -o trans=virtio,version=9p2000.L cni /mnt/cni")
    pf = g.check(FIND_PF).strip()
    enable_vfs(g, pf, 2)
    vf_addrs, names, macs = [], [], []
    for i in range(2):
        vf_addrs.append(g.check(f"basename $(readlink /sys/bus/pci/devices/{pf}/virtfn{i})").strip())
        names.append(g.check(f"ls /sys/bus/pci/devices/{pf}/virtfn{i}/virtio*/net/").strip())
        macs.append(g.check(f"cat /sys/class/net/{names[i]}/address").strip())
    pool_macs = [vf["mac"] for vf in qmp_vfs(g)]
    assert pool_macs == macs

    # ADD for two pods.
    for i, pod in enumerate(("a", "b")):
        g.check(f"ip netns add {pod} && ip -n {pod} link set lo up")
        g.check(f"/mnt/cni/cni-flow add -vf {vf_addrs[i]} -netns {pod} -ifname net1 "
                f"-mac {POD_MACS[i]} -vlan 100 -ip 10.23.0.{i + 1}/24 -state /tmp/{pod}.json")
        assert POD_MACS[i] in g.check(f"ip -n {pod} link show net1")
    q = qmp_vfs(g)
    for i in range(2):
        assert q[i]["mac"] == POD_MACS[i]
        assert q[i]["config"]["mac"] == POD_MACS[i] and q[i]["config"]["vlan"] == 100
    g.wait_until("ip -n a link show net1 | grep -q LOWER_UP && "
                 "ip -n b link show net1 | grep -q LOWER_UP", timeout=30)
    assert " 0% packet loss" in g.check("ip netns exec a ping -c 3 -W 5 10.23.0.2", timeout=60)
    fdb = host.run("bridge fdb show br br0").stdout
    assert all(m in fdb for m in POD_MACS), fdb

    # DEL: each VF comes back with its name and MAC, reset through the PF.
    for pod in ("a", "b"):
        g.check(f"/mnt/cni/cni-flow del -netns {pod} -ifname net1 -state /tmp/{pod}.json")
        g.check(f"ip netns del {pod}")
    for i in range(2):
        assert g.check(f"ls /sys/bus/pci/devices/{pf}/virtfn{i}/virtio*/net/").strip() == names[i]
        assert g.check(f"cat /sys/class/net/{names[i]}/address").strip() == macs[i]
    q = qmp_vfs(g)
    assert [vf["mac"] for vf in q] == pool_macs
    assert [vf["config"]["vlan"] for vf in q] == [0, 0]
    # The PF still lists both VFs, with their original MACs.
    dev = pf_netdev(g, pf)
    text = g.check(f"ip link show {dev}")
    assert all(f"link/ether {m}" in text for m in macs), text
