# SPDX-License-Identifier: GPL-2.0-or-later
"""A real libvirtd (bookworm's 9.0) on this machine, started by the tests.

What bookworm's libvirt needs to run our QEMU 10.2 (see
docs/user-guide.md#libvirt): the libvirt-qemu user to exist, QEMU run as
root so it can open our build tree and the test's sockets, virtlogd.  This
machine has no systemd, so the daemons are started here and stopped at the
end if this module started them.
"""
import os
import pwd
import subprocess
import time

QEMU_CONF = "/etc/libvirt/qemu.conf"
MARK = "# vsriov tests"
CONF_LINES = ['user = "root"', 'group = "root"', 'security_driver = "none"']
SOCKET = "/run/libvirt/libvirt-sock"


def _sh(cmd, check=True, timeout=120):
    res = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=timeout)
    if check and res.returncode != 0:
        raise AssertionError(f"`{cmd}` failed ({res.returncode}):\n{res.stdout}{res.stderr}")
    return res


def virsh(args, check=True, timeout=120):
    return _sh(f"virsh -c qemu:///system {args}", check, timeout)


class Libvirtd:
    def __init__(self):
        self.started = []

    def _configure(self):
        for d in ("/var/log/libvirt/qemu", "/var/lib/libvirt/qemu", "/run/libvirt",
                  "/var/cache/libvirt/qemu"):
            os.makedirs(d, exist_ok=True)
        try:
            pwd.getpwnam("libvirt-qemu")
        except KeyError:
            _sh("useradd --system --no-create-home --shell /usr/sbin/nologin libvirt-qemu")
        os.makedirs(os.path.dirname(QEMU_CONF), exist_ok=True)
        text = open(QEMU_CONF).read() if os.path.exists(QEMU_CONF) else ""
        if MARK not in text:
            with open(QEMU_CONF, "a") as f:
                f.write(f"\n{MARK}\n" + "\n".join(CONF_LINES) + "\n")

    def _start(self, name, args, ready):
        if _sh(f"pgrep -x {name}", check=False).returncode == 0:
            return
        _sh(f"{name} {args}")
        self.started.append(name)
        deadline = time.monotonic() + 60
        while not ready():
            if time.monotonic() > deadline:
                raise AssertionError(f"{name} did not come up in 60 s")
            time.sleep(0.1)

    def start(self):
        self._configure()
        try:
            self._start("virtlogd", "-d", lambda: os.path.exists("/run/libvirt/virtlogd-sock"))
            self._start("libvirtd", "-d", lambda: os.path.exists(SOCKET) and
                        virsh("list", check=False).returncode == 0)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self):
        for name in reversed(self.started):
            _sh(f"pkill -x {name}", check=False)
            deadline = time.monotonic() + 30
            while _sh(f"pgrep -x {name}", check=False).returncode == 0:
                if time.monotonic() > deadline:
                    _sh(f"pkill -9 -x {name}", check=False)
                    break
                time.sleep(0.1)


class SecondLibvirtd:
    """A second libvirtd on this machine, as a migration destination:
    libvirt refuses to migrate a domain to the host it runs on (the
    migration cookie compares host names and host UUIDs), and two daemons
    on one host would share their state folders.  This one runs in mount
    and UTS namespaces of its own: its own host name, host UUID and
    /etc/libvirt, /run/libvirt, /var/lib/libvirt, /var/log/libvirt and
    /var/cache/libvirt (folders under @root), on this machine's network.
    Its socket is `socket`; `uri` is its connection URI."""

    HOSTNAME = "vsriov-dst"
    HOST_UUID = "5a5a5a5a-1818-4000-8000-000000000018"
    DIRS = {"etc": "/etc/libvirt", "run": "/run/libvirt", "lib": "/var/lib/libvirt",
            "log": "/var/log/libvirt", "cache": "/var/cache/libvirt"}

    def __init__(self, root):
        self.root = root
        self.socket = os.path.join(root, "run", "libvirt-sock")
        self.uri = f"qemu:///system?socket={self.socket}"

    def virsh(self, args, check=True, timeout=120):
        return _sh(f"virsh -c '{self.uri}' {args}", check, timeout)

    def domain_log(self, name):
        """Where this daemon's /var/log/libvirt/qemu/NAME.log is."""
        return os.path.join(self.root, "log", "qemu", f"{name}.log")

    def _pid(self, name):
        try:
            with open(os.path.join(self.root, f"{name}.pid")) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def start(self):
        for sub in self.DIRS:
            os.makedirs(os.path.join(self.root, sub), exist_ok=True)
        for sub in ("qemu", "secrets", "nwfilter"):
            os.makedirs(os.path.join(self.root, "etc", sub), exist_ok=True)
        for sub in ("lib/qemu", "log/qemu", "cache/qemu"):
            os.makedirs(os.path.join(self.root, sub), exist_ok=True)
        with open(os.path.join(self.root, "etc", "libvirtd.conf"), "w") as f:
            f.write(f'host_uuid = "{self.HOST_UUID}"\n')
        # As the first daemon's (Libvirtd), and no cgroups: the two
        # daemons number their domains alike, so their cgroup folders for
        # one domain name would be the same.
        with open(os.path.join(self.root, "etc", "qemu.conf"), "w") as f:
            f.write("\n".join(CONF_LINES + ["cgroup_controllers = [ ]"]) + "\n")
        mounts = "".join(f"mount --bind {os.path.join(self.root, sub)} {path} && "
                         for sub, path in self.DIRS.items())
        script = (f"{mounts}hostname {self.HOSTNAME} && "
                  f"virtlogd -d -p {self.root}/virtlogd.pid && "
                  f"libvirtd -d -p {self.root}/libvirtd.pid")
        for path in self.DIRS.values():
            os.makedirs(path, exist_ok=True)
        _sh(f"unshare --mount --uts --propagation private sh -c '{script}'")
        deadline = time.monotonic() + 60
        while not (os.path.exists(self.socket) and
                   self.virsh("list", check=False).returncode == 0):
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError("the second libvirtd did not come up in 60 s")
            time.sleep(0.1)
        return self

    def stop(self):
        for name in ("libvirtd", "virtlogd"):
            pid = self._pid(name)
            if pid is None:
                continue
            try:
                os.kill(pid, 15)
            except ProcessLookupError:
                continue
            deadline = time.monotonic() + 30
            while os.path.exists(f"/proc/{pid}"):
                if time.monotonic() > deadline:
                    os.kill(pid, 9)
                    break
                time.sleep(0.1)
