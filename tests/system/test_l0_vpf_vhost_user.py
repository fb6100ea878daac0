# SPDX-License-Identifier: GPL-2.0-or-later
"""Level 0: a virtual PF whose VF backends are vhost-user ports of OVS-DPDK
(userspace datapath, no hugepages).  Two VFs, each in its own netns in the
guest, ping each other through OVS; OVS's port counters see the traffic."""
import pytest

from harness.ovs import OvsDpdk
from system.guest_net import FIND_PF, enable_vfs, vf_into_netns

pytestmark = pytest.mark.slow

NUM_VFS = 2


@pytest.fixture
def ovs_dpdk():
    ovs = OvsDpdk().start()
    yield ovs
    ovs.stop()


def test_vpf_vhost_user_pool_on_ovs_dpdk(ovs_dpdk, guest_factory):
    ovs_dpdk.add_userspace_bridge("br0")
    args = ["-object", "memory-backend-memfd,id=mem0,size=1G,share=on",
            "-machine", "memory-backend=mem0",
            "-device", "pcie-root-port,id=rp0,chassis=1"]
    for i in range(NUM_VFS):
        sock = ovs_dpdk.add_vhost_user_port("br0", f"vhu{i}")
        args += ["-chardev", f"socket,id=c{i},path={sock},server=on,wait=off",
                 "-netdev", f"vhost-user,id=b{i},chardev=c{i}"]
    args += ["-object", "vsriov-pool,id=p0," + ",".join(f"netdevs=b{i}" for i in range(NUM_VFS)),
             "-device", "virtio-net-pci,bus=rp0,id=pf0,sriov-pool=p0"]
    g = guest_factory("vhu", qemu_args=args)

    (pf_info,) = g.qmp.execute("query-vsriov")
    assert {vf["backend"] for vf in pf_info["vfs"]} == {"vhost-user"}
    pf = g.check(FIND_PF).strip()
    enable_vfs(g, pf, NUM_VFS)
    vf_into_netns(g, pf, 0, "a", "10.30.0.1/24")
    vf_into_netns(g, pf, 1, "b", "10.30.0.2/24")
    g.wait_until("ip -n a link show pod0 | grep -q LOWER_UP && "
                 "ip -n b link show pod0 | grep -q LOWER_UP", timeout=60)
    # OVS starts forwarding on a vhost-user port once the guest's driver has
    # set its queues up; until then (and while ARP resolves) pings are lost.
    # Wait for that with a deadline, then demand a clean run.
    for i in range(NUM_VFS):
        ovs_dpdk.wait_link_up(f"vhu{i}", timeout=60)
    g.wait_until("ip netns exec a ping -c 1 -W 2 10.30.0.2", timeout=60)
    out = g.check("ip netns exec a ping -c 5 -W 5 10.30.0.2", timeout=120)
    assert " 0% packet loss" in out, out
    for port in ("vhu0", "vhu1"):
        stats = ovs_dpdk.port_stats("br0", port)
        assert stats.get("rx_pkts", 0) >= 5 and stats.get("tx_pkts", 0) >= 5, \
            f"{port}: {stats}"
    enable_vfs(g, pf, 0)
    assert {vf["state"] for vf in g.qmp.execute("query-vsriov")[0]["vfs"]} == {"disabled"}
