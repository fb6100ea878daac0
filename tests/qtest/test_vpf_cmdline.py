# SPDX-License-Identifier: GPL-2.0-or-later
"""Bad configurations of a virtual PF end QEMU's start with one clear error
naming the problem (and good ones start).  QEMU runs with -accel qtest and
-S, so no guest code runs."""
import subprocess

import pytest

from harness import paths

ROOT_PORT = ["-device", "pcie-root-port,id=rp0,chassis=1"]


def backends(n, first=0):
    args = []
    for i in range(first, first + n):
        args += ["-netdev", f"hubport,id=b{i},hubid={i + 1}"]
    return args


def pool(ids, name="p0"):
    return ["-object", f"vsriov-pool,id={name}," + ",".join(f"netdevs={i}" for i in ids)]


def qemu(args):
    return subprocess.run([paths.QEMU_BIN, "-M", "q35", "-nodefaults", "-display", "none",
                           "-accel", "qtest", "-qtest", "null", "-S",
                           "-qmp", "stdio"] + args,
                          input='{"execute":"qmp_capabilities"}\n{"execute":"quit"}\n',
                          capture_output=True, text=True, timeout=60)


def test_good_configuration_starts():
    p = qemu(ROOT_PORT + backends(2) + pool(["b0", "b1"]) +
             ["-device", "virtio-net-pci,bus=rp0,id=pf0,sriov-pool=p0"])
    assert p.returncode == 0, p.stderr


BAD = [
    ("non-pcie-bus",
     backends(1) + pool(["b0"]) + ["-device", "virtio-net-pci,id=pf0,sriov-pool=p0"],
     "sriov-pool needs the PF on a PCI Express port"),
    ("no-id",
     ROOT_PORT + backends(1) + pool(["b0"]) + ["-device", "virtio-net-pci,bus=rp0,sriov-pool=p0"],
     "needs an id"),
    ("unknown-pool",
     ROOT_PORT + ["-device", "virtio-net-pci,bus=rp0,id=pf0,sriov-pool=nope"],
     "nope"),
    ("missing-netdevs-only",
     ROOT_PORT + pool(["ghost"]) + ["-device", "virtio-net-pci,bus=rp0,id=pf0,sriov-pool=p0"],
     "vsriov-pool 'p0' has no free backend for PF 'pf0': netdev 'ghost' does not exist"),
    ("totalvfs-above-pool",
     ROOT_PORT + backends(2) + pool(["b0", "b1"]) +
     ["-device", "virtio-net-pci,bus=rp0,id=pf0,sriov-pool=p0,sriov-totalvfs=3"],
     "sriov-totalvfs=3 but vsriov-pool 'p0' has 2 free backend(s)"),
    ("totalvfs-without-pool",
     ROOT_PORT + ["-device", "virtio-net-pci,bus=rp0,id=pf0,sriov-totalvfs=3"],
     "sriov-totalvfs needs sriov-pool"),
    ("duplicate-netdev",
     ROOT_PORT + backends(1) + pool(["b0", "b0"]),
     "netdev 'b0' is listed twice"),
    ("empty-pool",
     ["-object", "vsriov-pool,id=p0"],
     "netdevs"),
    ("not-function-0",
     ROOT_PORT + backends(2) + pool(["b0"]) +
     ["-device", "virtio-net-pci,bus=rp0,addr=0.1,id=pf0,sriov-pool=p0,netdev=b1,"
                 "multifunction=on"],
     "must be function 0"),
    ("pool-exhausted-by-first-pf",
     ["-device", "pcie-root-port,id=rp0,chassis=1", "-device", "pcie-root-port,id=rp1,chassis=2"] +
     backends(2) + pool(["b0", "b1"]) +
     ["-device", "virtio-net-pci,bus=rp0,id=pf0,sriov-pool=p0",
      "-device", "virtio-net-pci,bus=rp1,id=pf1,sriov-pool=p0"],
     "vsriov-pool 'p0' has no free backend for PF 'pf1'"),
    ("misspelt-netdevs-and-totalvfs",
     ROOT_PORT + backends(2) + pool(["b0", "b1", "vf2", "vf3"]) +
     ["-device", "virtio-net-pci,bus=rp0,id=pf0,sriov-pool=p0,sriov-totalvfs=4"],
     "sriov-totalvfs=4 but vsriov-pool 'p0' has 2 free backend(s): "
     "netdev 'vf2' does not exist, netdev 'vf3' does not exist"),
    ("missing-vhost-vdpa-device",
     ROOT_PORT + ["-netdev", "vhost-vdpa,id=b0,vhostdev=/dev/vhost-vdpa-99"] + pool(["b0"]) +
     ["-device", "virtio-net-pci,bus=rp0,id=pf0,sriov-pool=p0"],
     "Could not open '/dev/vhost-vdpa-99': No such file or directory"),
    ("backend-in-use-by-another-nic",
     ROOT_PORT + backends(2) + pool(["b0", "b1"]) +
     ["-device", "virtio-net-pci,netdev=b0,id=other",
      "-device", "virtio-net-pci,bus=rp0,id=pf0,sriov-pool=p0,sriov-totalvfs=2"],
     "sriov-totalvfs=2 but vsriov-pool 'p0' has 1 free backend(s): "
     "netdev 'b0' is used by 'other'"),
    ("lazy-totalvfs-above-pool-size",
     ROOT_PORT + backends(2) + ["-object", "vsriov-pool,id=p0,lazy=on,netdevs=b0,netdevs=b1",
                                "-device", "virtio-net-pci,bus=rp0,id=pf0,sriov-pool=p0,"
                                "sriov-totalvfs=3"],
     "sriov-totalvfs=3 but lazy vsriov-pool 'p0' has 2 backend(s)"),
    ("lazy-not-a-bool",
     ROOT_PORT + backends(1) + ["-object", "vsriov-pool,id=p0,lazy=sometimes,netdevs=b0"],
     "lazy"),
    ("with-sriov-pf-vfs",
     ROOT_PORT + backends(2) + pool(["b0"]) +
     ["-device", "virtio-net-pci,bus=rp0,addr=0.1,netdev=b1,sriov-pf=pf0",
      "-device", "virtio-net-pci,bus=rp0,addr=0.0,id=pf0,sriov-pool=p0"],
     "cannot be combined with VFs declared with sriov-pf"),
]


@pytest.mark.parametrize("name,args,message", BAD, ids=[b[0] for b in BAD])
def test_bad_configuration_is_refused(name, args, message):
    p = qemu(args)
    assert p.returncode != 0, f"{name}: QEMU started:\n{p.stderr}"
    assert message in p.stderr, f"{name}: expected '{message}' in:\n{p.stderr}"
    assert "Aborted" not in p.stderr and p.returncode == 1, p.stderr


def test_pool_naming_a_missing_netdev_starts_with_a_warning():
    """A pool whose netdevs are not all there (a typo, most likely) gives
    the PF the VFs it can, and says which backend is missing."""
    p = qemu(ROOT_PORT + backends(1) + pool(["b0", "ghost"]) +
             ["-device", "virtio-net-pci,bus=rp0,id=pf0,sriov-pool=p0"])
    assert p.returncode == 0, p.stderr
    assert ("warning: vsriov-pool 'p0': netdev 'ghost' does not exist; "
            "PF 'pf0' gets 1 VF(s)") in p.stderr, p.stderr


def test_two_pfs_share_a_pool():
    p = qemu(["-device", "pcie-root-port,id=rp0,chassis=1",
              "-device", "pcie-root-port,id=rp1,chassis=2"] + backends(3) +
             pool(["b0", "b1", "b2"]) +
             ["-device", "virtio-net-pci,bus=rp0,id=pf0,sriov-pool=p0,sriov-totalvfs=2",
              "-device", "virtio-net-pci,bus=rp1,id=pf1,sriov-pool=p0"])
    assert p.returncode == 0, p.stderr


def test_pfs_share_a_lazy_pool_beyond_its_size():
    """A lazy pool hands out backends at VF Enable: two PFs may each
    advertise the whole pool, and QEMU starts holding none of it."""
    p = qemu(["-device", "pcie-root-port,id=rp0,chassis=1",
              "-device", "pcie-root-port,id=rp1,chassis=2"] + backends(2) +
             ["-object", "vsriov-pool,id=p0,lazy=on,netdevs=b0,netdevs=b1",
              "-device", "virtio-net-pci,bus=rp0,id=pf0,sriov-pool=p0",
              "-device", "virtio-net-pci,bus=rp1,id=pf1,sriov-pool=p0,sriov-totalvfs=2"])
    assert p.returncode == 0, p.stderr
