# SPDX-License-Identifier: GPL-2.0-or-later
"""Bad configurations of a virtual PF end QEMU's start with one error, the
whole sentence naming the problem; good ones start, and QMP
(query-vsriov, query-vsriov-pools) shows how their PFs split their pools.
QEMU runs with -accel qtest and -S, so no guest code runs."""
import json
import subprocess

import pytest

from harness import paths

ROOT_PORT = ["-device", "pcie-root-port,id=rp0,chassis=1"]
TWO_ROOT_PORTS = ["-device", "pcie-root-port,id=rp0,chassis=1",
                  "-device", "pcie-root-port,id=rp1,chassis=2"]


def backends(n, first=0):
    args = []
    for i in range(first, first + n):
        args += ["-netdev", f"hubport,id=b{i},hubid={i + 1}"]
    return args


def pool(ids, name="p0"):
    return ["-object", f"vsriov-pool,id={name}," + ",".join(f"netdevs={i}" for i in ids)]


def qemu(args, queries=()):
    """QEMU with args, stopped before the guest runs: the process, and the
    "return" of each QMP command in queries (run after qmp_capabilities,
    before quit)."""
    cmds = [{"execute": "qmp_capabilities"}, *({"execute": q} for q in queries),
            {"execute": "quit"}]
    p = subprocess.run([paths.QEMU_BIN, "-M", "q35", "-nodefaults", "-display", "none",
                        "-accel", "qtest", "-qtest", "null", "-S",
                        "-qmp", "stdio"] + args,
                       input="".join(json.dumps(c) + "\n" for c in cmds),
                       capture_output=True, text=True, timeout=60)
    answers = [json.loads(line) for line in p.stdout.splitlines() if '"return"' in line]
    return p, [a["return"] for a in answers[1:1 + len(queries)]]


def layout(args):
    """QEMU started with args (it must start), as QMP shows it: {PF: (its
    total VFs, its VFs' backends)} and {pool: (free, lazy, {backend: the VF
    that holds it, or None})}."""
    p, (pfs, pools) = qemu(args, ["query-vsriov", "query-vsriov-pools"])
    assert p.returncode == 0, p.stderr
    return ({pf["id"]: (pf["total-vfs"], [vf.get("netdev") for vf in pf["vfs"]])
             for pf in pfs},
            {q["id"]: (q["free"], q["lazy"],
                       {e["netdev"]: e.get("claimed-by") for e in q["entries"]})
             for q in pools})


def test_good_configuration_starts():
    """A PF on a pool of two gets both backends as its two VFs."""
    pfs, pools = layout(ROOT_PORT + backends(2) + pool(["b0", "b1"]) +
                        ["-device", "virtio-net-pci,bus=rp0,id=pf0,sriov-pool=p0"])
    assert pfs == {"pf0": (2, ["b0", "b1"])}, pfs
    assert pools == {"p0": (0, False, {"b0": "/machine/peripheral/pf0/vf[0]",
                                       "b1": "/machine/peripheral/pf0/vf[1]"})}, pools


BAD = [
    ("non-pcie-bus",
     backends(1) + pool(["b0"]) + ["-device", "virtio-net-pci,id=pf0,sriov-pool=p0"],
     "sriov-pool needs the PF on a PCI Express port"),
    ("no-id",
     ROOT_PORT + backends(1) + pool(["b0"]) + ["-device", "virtio-net-pci,bus=rp0,sriov-pool=p0"],
     "a virtual SR-IOV PF (sriov-pool) needs an id"),
    ("unknown-pool",
     ROOT_PORT + ["-device", "virtio-net-pci,bus=rp0,id=pf0,sriov-pool=nope"],
     "Device 'nope' not found"),
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
     "vsriov-pool: netdev 'b0' is listed twice"),
    ("empty-pool",
     ["-object", "vsriov-pool,id=p0"],
     "Parameter 'netdevs' is missing"),
    ("not-function-0",
     ROOT_PORT + backends(2) + pool(["b0"]) +
     ["-device", "virtio-net-pci,bus=rp0,addr=0.1,id=pf0,sriov-pool=p0,netdev=b1,"
                 "multifunction=on"],
     "a virtual SR-IOV PF must be function 0 of its slot (its VFs take the functions "
     "after it)"),
    ("pool-exhausted-by-first-pf",
     TWO_ROOT_PORTS + backends(2) + pool(["b0", "b1"]) +
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
     "Parameter 'lazy' expects 'on' or 'off'"),
    ("eswitch-without-pool",
     ROOT_PORT + ["-device", "virtio-net-pci,bus=rp0,id=pf0,sriov-eswitch=on"],
     "sriov-eswitch=on needs sriov-pool"),
    ("eswitch-pool-without-reps",
     ROOT_PORT + backends(1) + pool(["b0"]) +
     ["-device", "virtio-net-pci,bus=rp0,id=pf0,sriov-pool=p0,sriov-eswitch=on"],
     "sriov-eswitch=on: pool 'p0' gives no representor backends (rep-netdevs)"),
    ("eswitch-multiqueue-pf",
     ROOT_PORT + backends(2) +
     ["-netdev", "tap,id=mq,queues=2,ifname=vsriovmq0,script=no,downscript=no",
      "-object", "vsriov-pool,id=p0,netdevs=b0,rep-netdevs=b1",
      "-device", "virtio-net-pci,bus=rp0,id=pf0,netdev=mq,mq=on,sriov-pool=p0,"
                 "sriov-eswitch=on"],
     "sriov-eswitch=on needs a PF with one queue pair (its netdev has 2)"),
    ("reps-fewer-than-netdevs",
     ROOT_PORT + backends(3) +
     ["-object", "vsriov-pool,id=p0,netdevs=b0,netdevs=b1,rep-netdevs=b2"],
     "vsriov-pool 'p0' has 2 backends in 'netdevs' and 1 in 'rep-netdevs': "
     "one representor backend per VF backend"),
    ("rep-is-a-vf-backend",
     ROOT_PORT + backends(2) +
     ["-object", "vsriov-pool,id=p0,netdevs=b0,netdevs=b1,rep-netdevs=b1,"
                 "rep-netdevs=b0"],
     "vsriov-pool 'p0': netdev 'b1' is in both 'netdevs' and 'rep-netdevs'"),
    ("with-sriov-pf-vfs",
     ROOT_PORT + backends(2) + pool(["b0"]) +
     ["-device", "virtio-net-pci,bus=rp0,addr=0.1,netdev=b1,sriov-pf=pf0",
      "-device", "virtio-net-pci,bus=rp0,addr=0.0,id=pf0,sriov-pool=p0"],
     "sriov-pool cannot be combined with VFs declared with sriov-pf, nor used on a VF"),
]


# What QEMU adds to a sentence, on the lines after it.
HINTS = {
    "non-pcie-bus": "Put it on a root port, e.g. -device pcie-root-port,id=rp0 "
                    "-device virtio-net-pci,bus=rp0,...\n",
}


@pytest.mark.parametrize("name,args,sentence", BAD, ids=[b[0] for b in BAD])
def test_bad_configuration_is_refused(name, args, sentence):
    """QEMU exits 1 with one error: the option at fault, then the whole
    sentence (and a hint, where there is one), nothing else."""
    p, _ = qemu(args)
    assert p.returncode == 1, f"{name}: QEMU exited {p.returncode}:\n{p.stderr}"
    first, _, rest = p.stderr.partition("\n")
    assert first.startswith("qemu-system-x86_64: ") and first.endswith(": " + sentence), \
        f"{name}: expected the sentence '{sentence}', got:\n{p.stderr}"
    assert rest == HINTS.get(name, ""), f"{name}: more than one error:\n{p.stderr}"


def test_eswitch_pf_starts_in_legacy_mode():
    """A PF with sriov-eswitch=on and a pool with representor backends
    starts in legacy mode, no VF with a representor; without it, QMP says
    no mode at all."""
    p, (pfs,) = qemu(ROOT_PORT + backends(4) +
                     ["-object", "vsriov-pool,id=p0,netdevs=b0,netdevs=b1,"
                                 "rep-netdevs=b2,rep-netdevs=b3",
                      "-device", "virtio-net-pci,bus=rp0,id=pf0,sriov-pool=p0,"
                                 "sriov-eswitch=on"], ["query-vsriov"])
    assert p.returncode == 0, p.stderr
    assert pfs[0]["eswitch-mode"] == "legacy"
    assert [vf.get("representor") for vf in pfs[0]["vfs"]] == [None, None]
    p, (pfs,) = qemu(ROOT_PORT + backends(1) + pool(["b0"]) +
                     ["-device", "virtio-net-pci,bus=rp0,id=pf0,sriov-pool=p0"],
                     ["query-vsriov"])
    assert p.returncode == 0, p.stderr
    assert "eswitch-mode" not in pfs[0]


def test_pool_naming_a_missing_netdev_starts_with_a_warning():
    """A pool whose netdevs are not all there (a typo, most likely) gives
    the PF the VFs it can, and says which backend is missing."""
    args = ROOT_PORT + backends(1) + pool(["b0", "ghost"]) + \
        ["-device", "virtio-net-pci,bus=rp0,id=pf0,sriov-pool=p0"]
    p, _ = qemu(args)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ("qemu-system-x86_64: -device virtio-net-pci,bus=rp0,id=pf0,"
                        "sriov-pool=p0: warning: vsriov-pool 'p0': netdev 'ghost' does not "
                        "exist; PF 'pf0' gets 1 VF(s)\n"), p.stderr
    pfs, pools = layout(args)
    assert pfs == {"pf0": (1, ["b0"])}, pfs
    assert pools == {"p0": (0, False, {"b0": "/machine/peripheral/pf0/vf[0]",
                                       "ghost": None})}, pools


def test_two_pfs_share_a_pool():
    """The first PF takes the backends its sriov-totalvfs asks, in the
    pool's order; the next PF gets the rest."""
    pfs, pools = layout(TWO_ROOT_PORTS + backends(3) + pool(["b0", "b1", "b2"]) +
                        ["-device", "virtio-net-pci,bus=rp0,id=pf0,sriov-pool=p0,sriov-totalvfs=2",
                         "-device", "virtio-net-pci,bus=rp1,id=pf1,sriov-pool=p0"])
    assert pfs == {"pf0": (2, ["b0", "b1"]), "pf1": (1, ["b2"])}, pfs
    assert pools == {"p0": (0, False, {"b0": "/machine/peripheral/pf0/vf[0]",
                                       "b1": "/machine/peripheral/pf0/vf[1]",
                                       "b2": "/machine/peripheral/pf1/vf[0]"})}, pools


def test_pfs_share_a_lazy_pool_beyond_its_size():
    """A lazy pool hands out backends at VF Enable: two PFs may each
    advertise the whole pool, and QEMU starts holding none of it (no VF
    has a backend, every backend is free)."""
    pfs, pools = layout(TWO_ROOT_PORTS + backends(2) +
                        ["-object", "vsriov-pool,id=p0,lazy=on,netdevs=b0,netdevs=b1",
                         "-device", "virtio-net-pci,bus=rp0,id=pf0,sriov-pool=p0",
                         "-device", "virtio-net-pci,bus=rp1,id=pf1,sriov-pool=p0,"
                                    "sriov-totalvfs=2"])
    assert pfs == {"pf0": (2, [None, None]), "pf1": (2, [None, None])}, pfs
    assert pools == {"p0": (2, True, {"b0": None, "b1": None})}, pools
