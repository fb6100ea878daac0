# SPDX-License-Identifier: GPL-2.0-or-later
"""Level 0 with a real libvirtd (bookworm's 9.0) driving our QEMU: the
example domain of docs/examples/vpf-domain.xml is defined and started; the PF
is libvirt's own <interface> on its own pcie-root-port (virsh domiflist and
dumpxml show it, the guest finds it behind the root port) with the pool set
by <qemu:override>; its guest enables VFs, `virsh qemu-monitor-command` sees
them; the guest reboots from inside, by `virsh reboot` (ACPI) and by `virsh
reset`, each time with its VFs disabled; `virsh shutdown`, start again,
`virsh destroy` and undefine leave nothing behind.  A domain whose pool
names a backend that does not exist fails to start with QEMU's message
naming it, so does the example domain on a QEMU without our patches
(bookworm's own), and so does a domain of docs/examples/vpf-daemon-domain.xml
whose pool the daemon does not know.  The user guide's annotated domain passes
`virsh define --validate`."""
import json
import os
import socket
import string
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET

import pytest

from harness import paths
from harness.agent import AgentConnection
from harness.libvirt import virsh

pytestmark = pytest.mark.slow

TEMPLATE = os.path.join(paths.SRC, "docs", "examples", "vpf-domain.xml")


def qarg(value):
    return f"<qemu:arg value='{value}'/>"


def domain_xml(name, artifacts, agent_socket, backends, pool, emulator=None, hub=None):
    """The example domain; each backend a hub port of its own hub, or all
    on hub @hub (a switch between the VFs inside QEMU)."""
    netdevs = []
    for i, b in enumerate(backends):
        netdevs += [qarg("-netdev"), qarg(f"hubport,id={b},hubid={hub or i + 1}")]
    with open(TEMPLATE) as f:
        return string.Template(f.read()).substitute(
            name=name, kernel=paths.guest("vmlinuz-test"),
            initrd=paths.guest("initramfs-test.gz"),
            emulator=emulator or paths.QEMU_BIN,
            console=os.path.join(artifacts, f"{name}-console.log"),
            agent_socket=agent_socket, netdevs="\n    ".join(netdevs),
            pool_netdevs=",".join(f"netdevs={b}" for b in pool))


def connect_agent(path, name, deadline):
    """Connect to the agent channel QEMU listens on (it exists once QEMU runs)."""
    while True:
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(path)
            return AgentConnection(s, name)
        except OSError:
            s.close()
        assert time.monotonic() < deadline, f"no agent socket {path} in time"
        time.sleep(0.2)


def qmp(name, cmd):
    out = virsh(f"qemu-monitor-command {name} '{json.dumps({'execute': cmd})}'").stdout
    return json.loads(out)["return"]


def domain_exists(name):
    return virsh(f"dominfo {name}", check=False).returncode == 0


PF_ALIAS = "ua-vsriov-pf0"          # the example's <interface> alias
PF_MAC = "52:54:00:5a:00:00"


def wait_booted_again(agent, agent_path, name, marker):
    """Wait until the guest behind @agent_path has booted again (the tmpfs
    file @marker, written before, is gone) and return a fresh connection."""
    deadline = time.monotonic() + 180
    while True:
        try:
            agent.wait_ready(max(1, deadline - time.monotonic()))
            if not agent.run(f"test -e {marker}").ok:
                return agent
        except Exception:
            pass
        assert time.monotonic() < deadline, f"{name} did not boot again within 180 s"
        agent.close()
        agent = connect_agent(agent_path, name, deadline)


def guest_pf(agent):
    """The guest's view of the PF: (its PCI address, its parent's)."""
    out = agent.run(f"for n in /sys/class/net/*; do [ \"$(cat $n/address)\" = {PF_MAC} ] "
                    f"&& readlink -f $n/device/..; done; true")
    assert out.ok and out.stdout.strip(), f"no guest NIC with MAC {PF_MAC}: {out}"
    parts = out.stdout.strip().split("/")
    return parts[-1], parts[-2]


def test_libvirt_domain_with_virtual_pf(libvirtd, artifacts):
    name = "vsriov-vpf"
    if domain_exists(name):
        virsh(f"destroy {name}", check=False)
        virsh(f"undefine {name}")
    sockdir = tempfile.mkdtemp(prefix="vsr-lv-", dir="/tmp")
    agent_path = os.path.join(sockdir, "agent.sock")
    xml = os.path.join(artifacts, f"{name}.xml")
    with open(xml, "w") as f:
        f.write(domain_xml(name, artifacts, agent_path, ["vf0", "vf1"], ["vf0", "vf1"]))
    agent = None
    try:
        virsh(f"define {xml}")
        virsh(f"start {name}")
        agent = connect_agent(agent_path, name, time.monotonic() + 60)
        agent.wait_ready(180)

        # libvirt's own view: the PF is its <interface>, on its root port,
        # and <qemu:override> gave that device the pool.
        iflist = virsh(f"domiflist {name}").stdout
        assert any(PF_MAC in line and "virtio" in line for line in iflist.splitlines()), iflist
        live = ET.fromstring(virsh(f"dumpxml {name}").stdout)
        (iface,) = live.findall("devices/interface")
        assert iface.find("alias").get("name") == PF_ALIAS
        assert iface.find("address").get("bus") == "0x01"
        ports = [c for c in live.findall("devices/controller")
                 if c.get("model") == "pcie-root-port" and c.get("index") == "1"]
        assert len(ports) == 1, "libvirt did not keep the PF's pcie-root-port"
        (pf,) = qmp(name, "query-vsriov")
        assert pf["id"] == PF_ALIAS and pf["total-vfs"] == 2 and pf["pool"] == "p0"

        # The guest sees the PF behind a QEMU pcie-root-port (1b36:000c).
        bdf, parent = guest_pf(agent)
        assert bdf.endswith(":00.0"), bdf
        port_id = agent.run(f"cat /sys/bus/pci/devices/{parent}/vendor "
                            f"/sys/bus/pci/devices/{parent}/device").stdout.split()
        assert port_id == ["0x1b36", "0x000c"], (parent, port_id)
        assert agent.run(f"echo 2 > /sys/bus/pci/devices/{bdf}/sriov_numvfs").ok
        vfs = agent.run(f"ls -d /sys/bus/pci/devices/{bdf}/virtfn*").stdout.split()
        assert len(vfs) == 2, vfs
        (pf,) = qmp(name, "query-vsriov")
        assert [vf["state"] for vf in pf["vfs"]] == ["enabled", "enabled"]
        assert PF_ALIAS in virsh(f"qemu-monitor-command {name} --hmp 'info vsriov'").stdout

        # Three ways to reboot: from inside the guest, libvirt's (ACPI power
        # button, which libvirt turns into a reset) and a hard reset.  Each
        # time the guest boots again with its VFs disabled, still running.
        for how in ("guest", "virsh reboot", "virsh reset"):
            marker = "/tmp/vsriov-booted"
            assert agent.run(f"touch {marker}").ok
            if how == "guest":
                agent.send("reboot -f")
            else:
                virsh(f"{how.split()[1]} {name}")
            agent = wait_booted_again(agent, agent_path, name, marker)
            (pf,) = qmp(name, "query-vsriov")
            assert [vf["state"] for vf in pf["vfs"]] == ["disabled", "disabled"], how
            assert "running" in virsh(f"domstate {name}").stdout, how
            bdf, _ = guest_pf(agent)
            assert agent.run(f"echo 1 > /sys/bus/pci/devices/{bdf}/sriov_numvfs").ok, how

        # A graceful shutdown, then a start again and a destroy.
        agent.close()
        agent = None
        virsh(f"shutdown {name}")
        deadline = time.monotonic() + 120
        while "shut off" not in virsh(f"domstate {name}").stdout:
            assert time.monotonic() < deadline, f"{name} did not shut off within 120 s"
            time.sleep(0.5)
        virsh(f"start {name}")
        agent = connect_agent(agent_path, name, time.monotonic() + 60)
        agent.wait_ready(180)
        (pf,) = qmp(name, "query-vsriov")
        assert pf["num-vfs"] == 0
        virsh(f"destroy {name}")
        assert "shut off" in virsh(f"domstate {name}").stdout
    finally:
        if agent:
            agent.close()
        virsh(f"destroy {name}", check=False)
        virsh(f"undefine {name}", check=False)
    assert not domain_exists(name)
    left = subprocess.run(["pgrep", "-f", f"guest={name}"], capture_output=True, text=True)
    assert left.stdout == "", f"QEMU processes left: {left.stdout}"


def test_libvirt_domain_with_unknown_backend_fails_clearly(libvirtd, artifacts):
    name = "vsriov-bad"
    if domain_exists(name):
        virsh(f"undefine {name}")
    xml = os.path.join(artifacts, f"{name}.xml")
    with open(xml, "w") as f:
        f.write(domain_xml(name, artifacts,
                           os.path.join(tempfile.mkdtemp(prefix="vsr-lv-", dir="/tmp"), "a.sock"),
                           ["vf0"], ["ghost"]))
    try:
        virsh(f"define {xml}")
        res = virsh(f"start {name}", check=False)
        assert res.returncode != 0
        assert ("vsriov-pool 'p0' has no free backend for PF 'ua-vsriov-pf0': "
                "netdev 'ghost' does not exist") in res.stderr, res.stderr
    finally:
        virsh(f"undefine {name}", check=False)


def test_libvirt_domain_with_unknown_daemon_pool_fails_clearly(libvirtd, artifacts):
    from unit.test_daemon import CONFIG, Daemon
    d = tempfile.mkdtemp(prefix="vsr-lvd-", dir="/tmp")
    os.chmod(d, 0o755)
    os.makedirs(os.path.join(d, "dev"))
    with open(os.path.join(d, "vpd.conf"), "w") as f:
        f.write(CONFIG.format(d=d))
    daemon = Daemon(d).start()
    name = "vsriov-baddaemon"
    if domain_exists(name):
        virsh(f"undefine {name}")
    with open(os.path.join(paths.SRC, "docs", "examples", "vpf-daemon-domain.xml")) as f:
        xml_text = string.Template(f.read()).substitute(
            name=name, kernel=paths.guest("vmlinuz-test"),
            initrd=paths.guest("initramfs-test.gz"),
            emulator=paths.QEMU_BIN, console=os.path.join(artifacts, f"{name}-console.log"),
            agent_socket=os.path.join(d, "agent.sock"),
            daemon_socket=daemon.sock, daemon_pool="tenant-x", count=2)
    xml = os.path.join(artifacts, f"{name}.xml")
    with open(xml, "w") as f:
        f.write(xml_text)
    try:
        virsh(f"define {xml}")
        res = virsh(f"start {name}", check=False)
        assert res.returncode != 0
        assert "vsriov-daemon-pool 'p0': the daemon refused: no pool named 'tenant-x'" \
            in res.stderr, res.stderr
        assert not subprocess.run(["pgrep", "-f", f"guest={name}"],
                                  capture_output=True).stdout
    finally:
        virsh(f"undefine {name}", check=False)
        daemon.stop()


UNPATCHED_QEMU = "/usr/bin/qemu-system-x86_64"   # bookworm's QEMU 7.2 (HOST_PACKAGES)


def test_libvirt_domain_on_unpatched_qemu_fails_clearly(libvirtd, artifacts):
    name = "vsriov-unpatched"
    if domain_exists(name):
        virsh(f"undefine {name}")
    assert os.access(UNPATCHED_QEMU, os.X_OK), "qemu-system-x86 (bookworm) is not installed"
    xml = os.path.join(artifacts, f"{name}.xml")
    with open(xml, "w") as f:
        f.write(domain_xml(name, artifacts,
                           os.path.join(tempfile.mkdtemp(prefix="vsr-lv-", dir="/tmp"), "a.sock"),
                           ["vf0"], ["vf0"], emulator=UNPATCHED_QEMU))
    try:
        virsh(f"define {xml}")
        res = virsh(f"start {name}", check=False)
        assert res.returncode != 0
        assert "Parameter 'qom-type' does not accept value 'vsriov-pool'" in res.stderr, \
            res.stderr
    finally:
        virsh(f"undefine {name}", check=False)


def test_user_guide_domain_xml_defines(libvirtd, artifacts):
    """The annotated domain of docs/user-guide.md#libvirt is valid for
    libvirt (schema and qemu namespace, `virsh define --validate`); only its
    KVM type and emulator path are changed for this machine."""
    with open(os.path.join(paths.SRC, "docs", "user-guide.md")) as f:
        guide = f.read()
    section = guide[guide.index("## libvirt\n"):]
    xml_text = section[section.index("```xml\n<domain") + 7:]
    xml_text = xml_text[:xml_text.index("```")]
    root = ET.fromstring(xml_text)
    assert root.get("type") == "kvm"
    root.set("type", "qemu")
    root.find("devices/emulator").text = paths.QEMU_BIN
    name = root.find("name").text
    xml = os.path.join(artifacts, "user-guide-domain.xml")
    ET.register_namespace("qemu", "http://libvirt.org/schemas/domain/qemu/1.0")
    ET.ElementTree(root).write(xml)
    if domain_exists(name):
        virsh(f"undefine {name}")
    try:
        virsh(f"define --validate {xml}")
        live = virsh(f"dumpxml {name}").stdout
        assert "ua-vsriov-pf0" in live and "sriov-pool" in live
    finally:
        virsh(f"undefine {name}", check=False)
