# SPDX-License-Identifier: GPL-2.0-or-later
"""Level 0: `virsh migrate --live` of a domain whose guest created VFs
(issue 18), between two real libvirtds on this machine.

The source is the test's libvirtd (harness.libvirt.Libvirtd); the
destination a second one in mount and UTS namespaces of its own
(harness.libvirt.SecondLibvirtd), since libvirt refuses to migrate a
domain to the host it runs on.  The domain is docs/examples/vpf-domain.xml
with both VF backends on one QEMU hub, so the guest's two pods reach each
other through it.  The guest enables two VFs and configures them through
the PF; the destination's XML is the source's `virsh dumpxml --migratable`
with its host-side paths changed, as docs/user-guide.md#live-migration
tells an operator.  A migration to a destination whose pool is too small
fails (QEMU's sentence naming the pool is in the destination's domain
log), and the source runs on; then
the domain migrates with its pods pinging (no more pings lost than
libvirt's measured downtime explains), and on the destination the guest's
VF configuration and QMP's are what the guest set, and its PF takes
new VF commands."""
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET

import pytest

from harness.libvirt import SecondLibvirtd, virsh
from harness.vm import GuestBase
from system.test_l0_libvirt import connect_agent, domain_exists, domain_xml
from system.test_l0_migration import configure_two_pods, pings_across, start_pings
from system.test_l0_vf_control import guest_vfs, qmp_vfs, vf_summary

pytestmark = pytest.mark.slow

NAME = "vsriov-migrate"
PINGS = 600     # at 0.1 s: 60 s; virsh migrate (3.5 to 10 s measured) in the middle
QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"


class VirshQMP:
    """QMP through `virsh qemu-monitor-command` of one libvirtd."""

    def __init__(self, run_virsh):
        self.virsh = run_virsh

    def execute(self, cmd, args=None):
        req = {"execute": cmd, **({"arguments": args} if args else {})}
        out = self.virsh(f"qemu-monitor-command {NAME} '{json.dumps(req)}'").stdout
        return json.loads(out)["return"]


class DomainGuest(GuestBase):
    """The domain's guest, through its agent channel and one libvirtd."""

    def __init__(self, agent, run_virsh):
        self.agent = agent
        self.name = NAME
        self.qmp = VirshQMP(run_virsh)

    def run(self, cmd, timeout=60):
        return self.agent.run(cmd, timeout)


def destination_xml(source_xml, agent_socket, console, pool_netdevs=None):
    """The source's migratable XML with the destination's host-side paths
    (and, to make it too small, another pool)."""
    ET.register_namespace("qemu", QEMU_NS)
    root = ET.fromstring(source_xml)
    root.find("devices/serial/source").set("path", console)
    root.find("devices/channel/source").set("path", agent_socket)
    if pool_netdevs:
        for arg in root.iter(f"{{{QEMU_NS}}}arg"):
            if arg.get("value").startswith("vsriov-pool,"):
                arg.set("value", "vsriov-pool,id=p0," +
                        ",".join(f"netdevs={n}" for n in pool_netdevs))
    return ET.tostring(root, encoding="unicode")


def completed_downtime_ms(run_virsh):
    """The last migration's downtime as libvirt measured it: from the
    source's stop to the destination's resume (so at least QEMU's own
    figure, which ends when the source has sent the last state)."""
    out = run_virsh(f"domjobinfo --completed {NAME}").stdout
    return int(re.search(r"^Total downtime: +(\d+) +ms$", out, re.M).group(1))


def migrate(dst, xml_path, check=True):
    # non-peer-to-peer: virsh talks to both daemons; QEMU's stream stays on
    # loopback.
    return virsh(f"migrate --live --xml {xml_path} {NAME} '{dst.uri}' "
                 f"tcp://127.0.0.1 --listen-address 127.0.0.1", check=check, timeout=300)


def test_virsh_migrate_live_with_pods_pinging(libvirtd, artifacts):
    if domain_exists(NAME):
        virsh(f"destroy {NAME}", check=False)
        virsh(f"undefine {NAME}")
    root = tempfile.mkdtemp(prefix="vsr-lvm-", dir="/tmp")
    os.chmod(root, 0o755)
    dst = SecondLibvirtd(os.path.join(root, "dst"))
    src_agent = os.path.join(root, "agent-src.sock")
    dst_agent = os.path.join(root, "agent-dst.sock")
    xml = os.path.join(artifacts, f"{NAME}.xml")
    with open(xml, "w") as f:
        f.write(domain_xml(NAME, artifacts, src_agent, ["vf0", "vf1"], ["vf0", "vf1"], hub=1))
    agent = None
    try:
        dst.start()
        virsh(f"define {xml}")
        virsh(f"start {NAME}")
        agent = connect_agent(src_agent, NAME, time.monotonic() + 60)
        agent.wait_ready(180)
        g = DomainGuest(agent, virsh)
        pf, dev = configure_two_pods(g, "10.18.1")
        before_vfs = [vf_summary(vf) for vf in guest_vfs(g, dev)]
        before_qmp = [(vf["mac"], vf["config"]) for vf in qmp_vfs(g)]
        migratable = virsh(f"dumpxml --migratable {NAME}").stdout

        # A destination with one VF in its pool: the migration fails before
        # the source stops, with QEMU's sentence naming the pool.
        small = os.path.join(artifacts, f"{NAME}-dst-small.xml")
        with open(small, "w") as f:
            f.write(destination_xml(migratable, dst_agent,
                                    os.path.join(artifacts, f"{NAME}-dst-small-console.log"),
                                    pool_netdevs=["vf0"]))
        res = migrate(dst, small, check=False)
        assert res.returncode != 0, res.stdout
        # virsh says so in one of three ways, by what libvirt sees first: the
        # source's failed job with the source QEMU's reason (the destination
        # said so on the return path, or closed the stream while the source
        # still wrote to it), or the destination QEMU's exit with its own
        # sentence.  The destination host's domain log has that sentence
        # every way.
        shape = ("virtual SR-IOV PF 'ua-vsriov-pf0' has 1 VF(s) from pool 'p0' where the "
                 "source's has 2")
        hint = "The destination needs a pool of the same shape (as many backends, or sriov-totalvfs)."
        err = res.stderr.strip()
        job = "error: operation failed: job 'migration out' failed: "
        assert err in (job + "Sibling indicated error 1",
                       job + "Unable to write to socket: Connection reset by peer") or \
            (err.startswith("error: internal error: qemu unexpectedly closed the monitor: ")
             and f"{shape}\n{hint}" in err), res.stderr
        dst_log = open(dst.domain_log(NAME)).read()
        assert f"{shape}\n{hint}" in dst_log, dst_log
        assert "running" in virsh(f"domstate {NAME}").stdout
        assert dst.virsh(f"dominfo {NAME}", check=False).returncode != 0
        assert " 0% packet loss" in g.check("ip netns exec a ping -c 2 -W 5 10.18.1.2",
                                            timeout=30)

        # The migration, the pods pinging through it (busybox ping: one
        # "seq=N" line per reply).
        good = os.path.join(artifacts, f"{NAME}-dst.xml")
        with open(good, "w") as f:
            f.write(destination_xml(migratable, dst_agent,
                                    os.path.join(artifacts, f"{NAME}-dst-console.log")))
        start_pings(g, "10.18.1.2", PINGS)
        t0 = time.monotonic()
        migrate(dst, good)
        print(f"virsh migrate --live: {time.monotonic() - t0:.1f} s")
        downtime_ms = completed_downtime_ms(virsh)
        print(f"downtime (libvirt's, the source's stop to the destination's resume): "
              f"{downtime_ms} ms")
        assert "shut off" in virsh(f"domstate {NAME}").stdout
        assert "running" in dst.virsh(f"domstate {NAME}").stdout
        agent.close()
        agent = connect_agent(dst_agent, NAME, time.monotonic() + 60)
        d = DomainGuest(agent, dst.virsh)
        pings_across(d, downtime_ms, PINGS)

        assert [vf_summary(vf) for vf in guest_vfs(d, dev)] == before_vfs
        assert [(vf["mac"], vf["config"]) for vf in qmp_vfs(d)] == before_qmp
        assert [vf["state"] for vf in qmp_vfs(d)] == ["enabled", "enabled"]
        d.check(f"ip link set {dev} vf 1 vlan 200")
        assert qmp_vfs(d)[1]["config"]["vlan"] == 200
        assert " 0% packet loss" in d.check("ip netns exec b ping -c 3 -W 5 10.18.1.1",
                                            timeout=30)
    finally:
        if agent:
            agent.close()
        dst.virsh(f"destroy {NAME}", check=False)
        dst.stop()
        virsh(f"destroy {NAME}", check=False)
        virsh(f"undefine {NAME}", check=False)
        shutil.rmtree(root, ignore_errors=True)
    assert not domain_exists(NAME)
    left = subprocess.run(["pgrep", "-f", f"guest={NAME}"], capture_output=True, text=True)
    assert left.stdout == "", f"QEMU processes left: {left.stdout}"
