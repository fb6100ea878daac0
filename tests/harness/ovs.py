# SPDX-License-Identifier: GPL-2.0-or-later
"""OVS-DPDK (userspace datapath) on this machine, for Level 0 tests with
vhost-user backends.

Bookworm's OVS lacks the DPDK datapath, so the trixie chroot's
ovs-vswitchd-dpdk (OVS 3.5, DPDK 24.11) runs, without hugepages or PCI
devices.  Its run folder is bind-mounted into the chroot, so the vhost-user
sockets it serves are reachable from QEMU outside at the same inode.  No
physical port is added: traffic stays between the ports of the test.  It
runs in a network namespace of its own: the persistent taps its userspace
datapath makes (`ovs-netdev`, one per bridge) go with the namespace, even
when a test ends before it deletes its bridges.
"""
import os
import subprocess
import tempfile
import time

from . import paths
from .netns import NetNS

CHROOT_RUN = "/mnt/vsriov-ovs"

# ovsdb-server of a Level 1 emulated host, from an empty database.
_L1_OVSDB_START = (
    "mkdir -p /run/openvswitch /etc/openvswitch /var/log/openvswitch && "
    "rm -f /etc/openvswitch/conf.db && "
    "ovsdb-tool create /etc/openvswitch/conf.db /usr/share/openvswitch/vswitch.ovsschema && "
    "ovsdb-server /etc/openvswitch/conf.db --remote=punix:/run/openvswitch/db.sock "
    "--pidfile --detach --log-file && "
    "ovs-vsctl --no-wait init && "
)
# OVS with the kernel datapath in a Level 1 emulated host (run with
# l1host.check).
L1_OVS_START = _L1_OVSDB_START + "ovs-vswitchd --pidfile --detach --log-file"
DPDK_EXTRA = ("--no-huge --legacy-mem -m 1024 --no-pci --file-prefix=vsriov "
              "--iova-mode=va")

# OVS-DPDK's ovs-vswitchd in a Level 1 emulated host (its database set up
# by L1_OVS_DPDK_START).
L1_VSWITCHD_DPDK = ("/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk "
                    "--pidfile=/run/openvswitch/ovs-vswitchd.pid --detach "
                    "--log-file=/var/log/openvswitch/ovs-vswitchd.log")

# OVS-DPDK (userspace datapath) in a Level 1 emulated host, from an empty
# database: what serves VDUSE devices there.  Without hugepages; mempools
# per port (the shared default asks for 262144 mbufs, more than -m 1024);
# the PMD thread sleeps up to 1 ms when idle (Level 1 has two vCPUs and the
# Level 2 guest needs one).
L1_OVS_DPDK_START = _L1_OVSDB_START + (
    "ovs-vsctl --no-wait set Open_vSwitch . other_config:dpdk-init=true "
    f"other_config:dpdk-extra='{DPDK_EXTRA}' other_config:per-port-memory=true "
    f"other_config:pmd-sleep-max=1000 && {L1_VSWITCHD_DPDK} && "
    "for i in $(seq 600); do "
    "[ \"$(ovs-vsctl get Open_vSwitch . dpdk_initialized)\" = true ] && exit 0; sleep 0.1; done; "
    "echo 'OVS-DPDK did not initialise DPDK in 60 s' >&2; exit 1"
)


def restart_vswitchd(l1):
    """Level 1's ovs-vswitchd (kernel datapath) exits and, once it is gone
    (ovs-appctl answers before it is: a new one started at once finds its
    pidfile still locked), starts again."""
    pid = l1.check("cat /var/run/openvswitch/ovs-vswitchd.pid").strip()
    l1.check("ovs-appctl -t ovs-vswitchd exit", timeout=120)
    l1.wait_until(f"! test -d /proc/{pid} || grep -q '^State:[[:space:]]*Z' /proc/{pid}/status",
                  timeout=60)
    l1.check("ovs-vswitchd --pidfile --detach --log-file", timeout=120)


def _sh(cmd, timeout=60, check=True):
    res = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=timeout)
    if check and res.returncode != 0:
        raise AssertionError(f"`{cmd}` failed ({res.returncode}):\n{res.stdout}{res.stderr}")
    return res


class OvsDpdk:
    def __init__(self):
        self.root = os.environ.get("TRIXIE_ROOT", os.path.join(paths.CACHE, "trixie"))
        self.rundir = tempfile.mkdtemp(prefix="vsr-ovs-", dir="/tmp")
        self.mounts = []
        self.ns = None

    def _mount(self, what, where, *opts):
        if subprocess.run(["mountpoint", "-q", where]).returncode == 0:
            return
        os.makedirs(where, exist_ok=True)
        _sh(f"mount {' '.join(opts)} {what} {where}")
        self.mounts.append(where)

    def chroot(self, cmd, timeout=60, check=True):
        env = (f"PATH=/usr/sbin:/usr/bin:/sbin:/bin OVS_RUNDIR={CHROOT_RUN} "
               f"OVS_LOGDIR={CHROOT_RUN} OVS_DBDIR={CHROOT_RUN}")
        return _sh(f"ip netns exec {self.ns.name} chroot {self.root} /usr/bin/env -i {env} "
                   f"sh -c '{cmd}'", timeout, check)

    def vsctl(self, args, timeout=60):
        return self.chroot(f"ovs-vsctl --timeout={timeout} --db=unix:{CHROOT_RUN}/db.sock {args}",
                           timeout + 10).stdout

    def start(self):
        self.ns = NetNS("vsr-ovs").__enter__()
        self._mount("proc", f"{self.root}/proc", "-t proc")
        self._mount("sys", f"{self.root}/sys", "-t sysfs")
        self._mount("/dev", f"{self.root}/dev", "--bind")
        self._mount(self.rundir, f"{self.root}{CHROOT_RUN}", "--bind")
        self.chroot(f"ovsdb-tool create {CHROOT_RUN}/conf.db "
                    "/usr/share/openvswitch/vswitch.ovsschema")
        self.chroot(f"ovsdb-server {CHROOT_RUN}/conf.db --remote=punix:{CHROOT_RUN}/db.sock "
                    f"--pidfile={CHROOT_RUN}/ovsdb-server.pid --detach "
                    f"--log-file={CHROOT_RUN}/ovsdb-server.log")
        self.vsctl("--no-wait init")
        # pmd-sleep-max lets the PMD thread sleep when idle: this machine has
        # two cores and the TCG guest needs one.
        # Mempools per port: the shared default asks for 262144 mbufs,
        # more than -m 1024 holds (the port's link then never comes up).
        self.vsctl(f'--no-wait set Open_vSwitch . other_config:dpdk-init=true '
                   f'other_config:dpdk-extra="{DPDK_EXTRA}" '
                   f'other_config:per-port-memory=true other_config:pmd-sleep-max=1000')
        self.chroot(f"/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk "
                    f"unix:{CHROOT_RUN}/db.sock --pidfile={CHROOT_RUN}/ovs-vswitchd.pid "
                    f"--detach --log-file={CHROOT_RUN}/ovs-vswitchd.log", timeout=120)
        deadline = time.monotonic() + 60
        while self.vsctl("get Open_vSwitch . dpdk_initialized").strip() != "true":
            if time.monotonic() > deadline:
                raise AssertionError("OVS-DPDK did not initialise DPDK in 60 s:\n" +
                                     self.log_tail())
            time.sleep(0.2)
        return self

    def add_userspace_bridge(self, name):
        self.vsctl(f"add-br {name} -- set bridge {name} datapath_type=netdev")

    def add_vhost_user_port(self, bridge, port):
        """A dpdkvhostuserclient port; returns the socket path for QEMU
        (which is the vhost-user server: server=on)."""
        self.vsctl(f"add-port {bridge} {port} -- set Interface {port} "
                   f"type=dpdkvhostuserclient options:vhost-server-path={CHROOT_RUN}/{port}.sock")
        return os.path.join(self.rundir, f"{port}.sock")

    def wait_link_up(self, port, timeout=60):
        """Poll the port's link_state until "up", with a deadline."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.vsctl(f"get Interface {port} link_state").strip()
            if state == "up":
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"OVS port {port} link_state is {state} after "
                                     f"{timeout} s:\n{self.log_tail()}")
            time.sleep(0.2)

    def port_stats(self, bridge, port):
        """Live OpenFlow port counters (OVSDB's statistics column is only
        refreshed every few seconds)."""
        out = self.chroot(f"ovs-ofctl dump-ports {bridge} {port}").stdout
        stats = {}
        for direction in ("rx", "tx"):
            line = next((ln for ln in out.splitlines() if ln.strip().startswith(direction)
                         or f": {direction} " in ln), "")
            for kv in line.replace(":", " ").replace(",", " ").split():
                if "=" in kv:
                    k, v = kv.split("=", 1)
                    if v.isdigit():
                        stats[f"{direction}_{k}"] = int(v)
        return stats

    def log_tail(self, lines=30):
        try:
            with open(os.path.join(self.rundir, "ovs-vswitchd.log")) as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def stop(self):
        for daemon in ("ovs-vswitchd", "ovsdb-server"):
            pidfile = os.path.join(self.rundir, f"{daemon}.pid")
            try:
                pid = int(open(pidfile).read())
            except (OSError, ValueError):
                continue
            try:
                os.kill(pid, 15)
            except ProcessLookupError:
                continue
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
            else:
                os.kill(pid, 9)
        for m in reversed(self.mounts):
            _sh(f"umount -l {m}", check=False)
        _sh(f"rm -rf {self.rundir}", check=False)
        if self.ns:
            self.ns.close()
            self.ns = None
