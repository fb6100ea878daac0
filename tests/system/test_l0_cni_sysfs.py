# SPDX-License-Identifier: GPL-2.0-or-later
"""Level 0: the sysfs helpers of sriov-cni-patch/ (Go) against the live
sysfs of a guest whose virtual PF has enabled two VFs: the same `go test`
binary as the unit suite, built static, run inside the guest
(live_test.go there walks the paths of sriov-cni's lookups)."""
import os

import pytest

from harness import golang, paths
from system.guest_net import FIND_PF, enable_vfs
from system.test_l0_vpf import host_switch, vpf_tap_args

pytestmark = pytest.mark.slow


def build_test_binary(out):
    golang.build_static(os.path.join(paths.SRC, "sriov-cni-patch"),
                        "test", "-c", "-o", os.path.join(out, "utils.test"), "./pkg/utils")


def test_go_sysfs_resolution_on_live_guest(netns, guest_factory, artifacts):
    share = os.path.join(artifacts, "share")
    os.makedirs(share)
    build_test_binary(share)
    host = netns("vsr-cni")
    host_switch(host, 2)
    g = guest_factory("cni", netns=host.name, qemu_args=vpf_tap_args(2),
                      shares={"gotest": share})
    pf = g.check(FIND_PF).strip()
    enable_vfs(g, pf, 2)
    # A renamed VF must resolve too.
    g.check(f"ip link set $(ls /sys/bus/pci/devices/{pf}/virtfn1/virtio*/net/) name pod0")
    g.check("mkdir -p /mnt/gotest && mount -t 9p -o trans=virtio,version=9p2000.L "
            "gotest /mnt/gotest")
    out = g.check(f"VSRIOV_LIVE_PF={pf} /mnt/gotest/utils.test -test.run TestLiveSysfs "
                  "-test.v", timeout=120)
    assert "--- PASS: TestLiveSysfs" in out, out
    # The series' Ginkgo specs on fake trees pass in the guest as well.
    out = g.check("/mnt/gotest/utils.test -test.v", timeout=120)
    assert "--- PASS: TestNetdevSysfs" in out and "FAIL" not in out, out
