# SPDX-License-Identifier: GPL-2.0-or-later
"""vdpa-poolctl check: the example configuration is valid and shown in
human and JSON form; a bad file exits 1 with one line naming file and line;
bad usage exits 2."""
import json
import os
import subprocess

from harness import paths

EXAMPLE = os.path.join(paths.SRC, "vdpa-pool-daemon", "examples", "vdpa-pool-daemon.conf")


def poolctl(*args):
    tool = os.path.join(os.environ["VSRIOV_BUILD_OURS"], "vdpa-pool-daemon", "vdpa-poolctl")
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=60)


def test_example_config_is_valid():
    p = poolctl("check", EXAMPLE)
    assert p.returncode == 0, p.stderr
    assert "pool tenant-a: pf ens1f0np0 VFs 0-3 (4 free), VLANs 100-199, MAC policy prefix" \
        in p.stdout
    # lab says no mac-policy: its VFs keep the daemon's MACs
    lab = next(line for line in p.stdout.splitlines() if line.startswith("pool lab:"))
    assert lab.endswith(", MAC policy locked"), lab
    j = json.loads(poolctl("check", "--json", EXAMPLE).stdout)
    assert [pool["name"] for pool in j["pools"]] == ["tenant-a", "tenant-b", "lab"]
    assert j["pfs"][1] == {"name": "eni0np1", "num_vfs": 4, "switchdev": True}


def test_bad_config_names_the_line(tmp_path):
    bad = tmp_path / "bad.conf"
    bad.write_text("[pf a]\nnum-vfs = 2\n[pool p]\npf = a\nvlans = 4095\n")
    p = poolctl("check", str(bad))
    assert p.returncode == 1
    assert p.stderr == (f"vdpa-poolctl: {bad}:5: vlans must be a VLAN id or range within "
                        "0-4094, not '4095'\n")


OVERLAP = """[daemon]
ovs-bridge = br0
[pf a]
num-vfs = 2
[pf b]
num-vfs = 2
[pool p]
pf = a
[pool q]
pf = b
"""


def test_pools_sharing_a_vlan_on_the_bridge_are_refused(tmp_path):
    """Two pools on the daemon's bridge that both have untagged (the default
    vlans, 0) share a segment: refused, naming both pools and the VLAN."""
    bad = tmp_path / "overlap.conf"
    bad.write_text(OVERLAP)
    p = poolctl("check", str(bad))
    assert p.returncode == 1
    assert p.stderr == (f"vdpa-poolctl: {bad}:9: pool 'q' shares VLAN 0 (untagged) with "
                        "pool 'p' (line 7) on OVS bridge 'br0'\n")
    bad.write_text(OVERLAP + "vlans = 100-199\n")
    assert poolctl("check", str(bad)).returncode == 0


def test_usage_errors():
    for args in ([], ["bogus"], ["check"], ["check", "--yaml", "x"]):
        p = poolctl(*args)
        assert p.returncode == 2 and p.stderr.startswith("usage:"), args
