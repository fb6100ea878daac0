# SPDX-License-Identifier: GPL-2.0-or-later
"""Level 1: libvirt (trixie's, in the emulated host) starts our QEMU as the
unprivileged libvirt-qemu user, with its default private /dev namespace,
from the example domains of docs/examples, on real vhost-vdpa devices
(vdpa_sim_net).

With a daemon pool (vpf-daemon-domain.xml): the domain starts, its VFs are
vhost-vdpa backends whose file descriptors the daemon passed, the daemon
logged the claim with QEMU's pid and uid 64055; `virsh destroy` returns the
VFs to the pool, and a pool that does not allow that uid makes `virsh
start` fail with the daemon's sentence, claiming nothing.

With a static pool (vpf-domain.xml with -netdev vhost-vdpa,vhostdev=): QEMU
opens the devices itself, so without the set-up the user guide gives
(cgroup_device_acl, the devices' group) `virsh start` fails with QEMU's
sentence naming the device; with it the domain starts on them.

The domains start paused: the guest side of a libvirt domain is Level 0's
(tests/system/test_l0_libvirt.py), and a Level 2 boot takes minutes."""
import contextlib
import os
import re
import string
import time

import pytest

from harness import paths
from harness.e2e import daemon_binary, l1_path, start_daemon

pytestmark = [pytest.mark.slow, pytest.mark.nested]

QEMU_UID = 64055   # Debian's libvirt-qemu
CONF = """[daemon]
socket = /run/vpd/api.sock
state = /var/lib/vpd/state
socket-group = libvirt-qemu
[pf {pf}]
num-vfs = 6
eswitch = switchdev
vdpa-mgmtdev = vdpasim_net
[pool tenant-a]
pf = {pf}
vfs = 0-3
allow-uids = {uid}
[pool tenant-b]
pf = {pf}
vfs = 4-5
"""
# libvirt in Level 1 as a distribution runs it: QEMU as libvirt-qemu, in its
# own /dev namespace (libvirt's default); no AppArmor/SELinux in Level 1.
QEMU_USER = f"""
id libvirt-qemu >/dev/null 2>&1 ||
    useradd --system --uid {QEMU_UID} --user-group --no-create-home \\
        --shell /usr/sbin/nologin libvirt-qemu
"""
LIBVIRTD_START = QEMU_USER + """
mkdir -p /run/libvirt /var/log/libvirt/qemu /var/lib/libvirt/qemu /var/cache/libvirt/qemu
cat >> /etc/libvirt/qemu.conf <<'EOF'
user = "libvirt-qemu"
group = "libvirt-qemu"
security_driver = "none"
EOF
cat >> /etc/libvirt/libvirtd.conf <<'EOF'
log_filters = "1:qemu 1:util.process 3:util 3:rpc 3:object 3:event"
log_outputs = "1:file:/scratch/libvirtd.log"
EOF
virtlogd -d && libvirtd -d
"""
VIRSH = "virsh -c qemu:///system"


def domain_xml(template, name, **kw):
    with open(os.path.join(paths.SRC, "docs", "examples", template)) as f:
        xml = string.Template(f.read()).substitute(
            name=name, kernel="/vsriov/guest/vmlinuz-test",
            initrd="/vsriov/guest/initramfs-test.gz",
            emulator=l1_path(paths.QEMU_BIN), console=f"/tmp/{name}-console.log",
            agent_socket=f"/tmp/{name}-agent.sock", **kw)
    # Small guest RAM: vhost-vdpa maps all of it, and Level 1 is emulated.
    return xml.replace("<memory unit='MiB'>1024</memory>", "<memory unit='MiB'>256</memory>")


def qarg(value):
    return f"<qemu:arg value='{value}'/>"


@pytest.fixture(scope="module")
def libvirt_host(l1host):
    daemon = daemon_binary()
    l1host.check("modprobe -a vhost_vdpa vdpa_sim_net netdevsim")
    pf = l1host.new_netdevsim(3)
    l1host.check(f"mkdir -p /run/vpd /var/lib/vpd && cat > /tmp/vpd.conf <<'EOF'\n"
                 f"{CONF.format(pf=pf, uid=QEMU_UID)}EOF")
    # The API socket is the daemon's and libvirt-qemu's group's (0660).
    l1host.check(QEMU_USER)
    start_daemon(l1host, daemon)
    l1host.check(LIBVIRTD_START, timeout=120)
    l1host.wait_until(f"{VIRSH} list", timeout=120)
    return l1host


def wait_claimed(h, pid):
    """The daemon's log line for process @pid's claim (it logs it once the
    reply is sent): [(pool, count, uid)]."""
    h.wait_until(f"grep -q 'claimed by .* (pid {pid} uid' /scratch/vpd.log", timeout=30)
    return re.findall(rf"pool '(\S+)': (\d+) VF\(s\) claimed by '\S+' \(pid {pid} uid (\d+)\)",
                      h.check("cat /scratch/vpd.log"))


@contextlib.contextmanager
def domain(h, name, xml):
    """Domain @name defined from @xml; destroyed and undefined at the end,
    whatever happened, and then no QEMU of it may be left."""
    h.check(f"cat > /tmp/{name}.xml <<'EOF'\n{xml}EOF")
    h.check(f"{VIRSH} define /tmp/{name}.xml")
    try:
        yield name
    finally:
        h.run(f"{VIRSH} destroy {name}", timeout=120)
        h.run(f"{VIRSH} undefine {name}")
    assert h.run(f"{VIRSH} dominfo {name}").status != 0
    assert h.run(f"pgrep -f 'guest=[{name[0]}]{name[1:]}'").stdout == ""


def test_daemon_pool_domain(libvirt_host):
    h = libvirt_host
    xml = domain_xml("vpf-daemon-domain.xml", "vsriov-daemon",
                     daemon_socket="/run/vpd/api.sock", daemon_pool="tenant-a", count=2)
    with domain(h, "vsriov-daemon", xml) as name:
        h.check(f"{VIRSH} start --paused {name}", timeout=600)
        pid = h.check(f"cat /run/libvirt/qemu/{name}.pid").strip()
        assert h.check(f"stat -c %u /proc/{pid}").strip() == str(QEMU_UID)
        vfs = h.check(f"{VIRSH} qemu-monitor-command {name} "
                      "'{\"execute\":\"query-vsriov\"}'")
        assert vfs.count('"backend":"vhost-vdpa"') == 2, vfs
        assert wait_claimed(h, pid) == [("tenant-a", "2", str(QEMU_UID))]

        t0 = time.monotonic()
        h.check(f"{VIRSH} destroy {name}", timeout=120)
        destroy_s = time.monotonic() - t0
        assert "shut off" in h.check(f"{VIRSH} domstate {name}")
        h.wait_until(f"grep -q 'client pid {pid} went away: 2 VF(s) released' "
                     "/scratch/vpd.log", timeout=30)
        print(f"virsh destroy of a daemon-backed domain: {destroy_s:.1f} s")

        # The same domain again: the VFs are claimable again.
        h.check(f"{VIRSH} start --paused {name}", timeout=600)
        pid = h.check(f"cat /run/libvirt/qemu/{name}.pid").strip()
        assert wait_claimed(h, pid) == [("tenant-a", "2", str(QEMU_UID))]


def test_daemon_pool_refusing_the_uid(libvirt_host):
    h = libvirt_host
    xml = domain_xml("vpf-daemon-domain.xml", "vsriov-refused",
                     daemon_socket="/run/vpd/api.sock", daemon_pool="tenant-b", count=1)
    with domain(h, "vsriov-refused", xml) as name:
        res = h.run(f"{VIRSH} start --paused {name}", timeout=600)
        assert res.status != 0
        assert (f"vsriov-daemon-pool 'p0': the daemon refused: uid {QEMU_UID} "
                f"gid {QEMU_UID} may not claim from pool 'tenant-b'") in res.stderr, res.stderr
        assert "shut off" in h.check(f"{VIRSH} domstate {name}")
        log = h.check("cat /scratch/vpd.log")
        assert re.search(rf"claim of 1 VF\(s\) from pool 'tenant-b' by pid \d+ uid {QEMU_UID} "
                         "refused", log), log
        assert not re.search(r"pool 'tenant-b': \d+ VF\(s\) claimed", log), log


def add_vdpa(h, name):
    h.check(f"vdpa dev add mgmtdev vdpasim_net name {name}")
    return h.wait_until(f"ls /sys/bus/vdpa/devices/{name}/ | grep vhost-vdpa-",
                        timeout=30).stdout.strip()


def test_static_vhost_vdpa_pool_domain(libvirt_host):
    h = libvirt_host
    devs = [add_vdpa(h, f"static{i}") for i in range(2)]
    name = "vsriov-static"
    netdevs = []
    for i, dev in enumerate(devs):
        netdevs += [qarg("-netdev"), qarg(f"vhost-vdpa,id=vf{i},vhostdev=/dev/{dev}")]
    xml = domain_xml("vpf-domain.xml", name, netdevs="\n    ".join(netdevs),
                     pool_netdevs="netdevs=vf0,netdevs=vf1")
    with domain(h, name, xml):
        # As installed: QEMU (libvirt-qemu, private /dev) cannot open them.
        res = h.run(f"{VIRSH} start --paused {name}", timeout=600)
        assert res.status != 0
        assert f"Could not open '/dev/{devs[0]}': No such file or directory" in res.stderr, \
            res.stderr

        # The user guide's set-up: the devices in cgroup_device_acl (which also
        # puts them into QEMU's /dev) and readable by libvirt-qemu's group.
        acl = ", ".join(f'"/dev/{d}"' for d in devs)
        h.check(f"chgrp libvirt-qemu {' '.join('/dev/' + d for d in devs)} && "
                f"chmod 660 {' '.join('/dev/' + d for d in devs)} && "
                "cat >> /etc/libvirt/qemu.conf <<'EOF'\ncgroup_device_acl = [\n"
                '    "/dev/null", "/dev/full", "/dev/zero", "/dev/random", "/dev/urandom",\n'
                '    "/dev/ptmx", "/dev/kvm", "/dev/userfaultfd",\n'
                f"    {acl}\n]\nEOF\n"
                "pkill -x libvirtd; for i in $(seq 300); do pgrep -x libvirtd >/dev/null || break; "
                "sleep 0.1; done; libvirtd -d")
        h.wait_until(f"{VIRSH} list", timeout=120)
        h.check(f"{VIRSH} start --paused {name}", timeout=600)
        vfs = h.check(f"{VIRSH} qemu-monitor-command {name} '{{\"execute\":\"query-vsriov\"}}'")
        assert vfs.count('"backend":"vhost-vdpa"') == 2, vfs
