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
