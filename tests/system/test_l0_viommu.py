# SPDX-License-Identifier: GPL-2.0-or-later
"""Level 0: a VF's DMA goes through the guest's vIOMMU, as its PF's does
(issue 36: "VFs ignore the PF's DMA properties").

The guest has an Intel vIOMMU (`-device intel-iommu`) and runs Debian
12's stock kernel with `intel_iommu=on` (the test kernel has no IOMMU
support; VF Enable needs none of our patches).  The PF is a
virtio-net-pci with `iommu_platform=on` and `packed=on` on a pool of two
taps (test_l0_vpf's set-up).  Its VFs are created by QEMU from the PF's
properties; on each:

- the guest's virtio driver negotiated VIRTIO_F_ACCESS_PLATFORM (33) and
  VIRTIO_F_RING_PACKED (34), as on the PF: without them a VF would take
  guest physical addresses and DMA past the vIOMMU;
- the VF is in an IOMMU group of its own: the guest's DMA API maps its
  buffers in the vIOMMU;
- the two VFs ping each other from two network namespaces through the
  host bridge (the taps count both ways), and QEMU's vIOMMU translated
  addresses for each VF's requester ID while they did (the
  `vtd_dmar_translate` trace): their rings and buffers went through it.
"""
import re

import pytest

from harness import stock
from system.guest_net import FIND_PF
from system.test_l0_stock_kernels import vfs_ping_through_taps, wait_bound
from system.test_l0_vpf import host_switch, vpf_tap_args

pytestmark = pytest.mark.slow

NUM_VFS = 2
ACCESS_PLATFORM, RING_PACKED = 33, 34
TRANSLATE = re.compile(r"vtd_dmar_translate dev ([0-9a-f]{2}):([0-9a-f]{2})\.([0-9a-f]{2}) "
                       r"iova 0x([0-9a-f]+) -> gpa 0x([0-9a-f]+)")


def feature_bits(g, dev, *bits):
    """The guest's negotiated virtio features @bits of PCI function @dev."""
    f = g.check(f"cat /sys/bus/pci/devices/{dev}/virtio*/features").strip()
    return [len(f) > b and f[b] == "1" for b in bits]


def translated(trace):
    """{(bus, slot, func): translations} QEMU's vIOMMU traced."""
    seen = {}
    with open(trace, errors="replace") as f:
        for line in f:
            m = TRANSLATE.search(line)
            if m:
                key = tuple(int(m.group(i), 16) for i in (1, 2, 3))
                seen[key] = seen.get(key, 0) + 1
    return seen


def test_vfs_dma_through_the_viommu_as_the_pf(netns, guest_factory, artifacts):
    missing = stock.why_missing("debian12")
    if missing:
        pytest.fail(missing, pytrace=False)
    k = stock.kernel("debian12")
    trace = f"{artifacts}/viommu-trace.log"
    host = netns("vsr-iommu")
    host_switch(host, NUM_VFS)
    g = guest_factory("viommu", netns=host.name, kernel=k.kernel, initrd=k.initrd,
                      append="intel_iommu=on",
                      qemu_args=["-device", "intel-iommu,intremap=off"] +
                      vpf_tap_args(NUM_VFS, pf_opts=",disable-legacy=on,"
                                   "iommu_platform=on,packed=on") +
                      ["-trace", f"enable=vtd_dmar_translate,file={trace}"])
    assert "DMAR: IOMMU enabled" in g.check("dmesg"), "the guest's vIOMMU is not on"
    pf = g.check(FIND_PF).strip()
    assert feature_bits(g, pf, ACCESS_PLATFORM, RING_PACKED) == [True, True]

    g.check(f"echo {NUM_VFS} > /sys/bus/pci/devices/{pf}/sriov_numvfs")
    vfs = []
    for i in range(NUM_VFS):
        wait_bound(g, pf, i, k)
        vfs.append(g.check(f"basename $(readlink /sys/bus/pci/devices/{pf}/virtfn{i})").strip())
    for vf in vfs:
        assert feature_bits(g, vf, ACCESS_PLATFORM, RING_PACKED) == [True, True], \
            f"VF {vf} did not negotiate the PF's ACCESS_PLATFORM and RING_PACKED"
        assert g.run(f"test -e /sys/bus/pci/devices/{vf}/iommu_group").ok, \
            f"VF {vf} is in no IOMMU group"
    groups = {g.check(f"basename $(readlink /sys/bus/pci/devices/{d}/iommu_group)").strip()
              for d in [pf] + vfs}
    assert len(groups) == 1 + NUM_VFS, f"the PF and its VFs share IOMMU groups: {groups}"

    g.wait_until(" && ".join(f"ls /sys/bus/pci/devices/{vf}/virtio*/net/ | grep -q ."
                             for vf in vfs), timeout=30)
    vfs_ping_through_taps(g, host, pf, "10.34.0", "vIOMMU")

    # Every VF's DMA was translated by the vIOMMU (bus:slot.func as the
    # guest numbers them: the PF's bus, functions 1 and 2).
    seen = translated(trace)
    for vf in vfs:
        bus, slot, func = (int(x, 16) for x in re.split(r"[:.]", vf)[1:])
        assert seen.get((bus, slot, func), 0) > 0, \
            f"QEMU's vIOMMU translated nothing for VF {vf}: {seen}"
