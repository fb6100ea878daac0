# SPDX-License-Identifier: GPL-2.0-or-later
"""Test guests under TCG: Level 0 guests, the Level 1 emulated host, and
Level 2 guests started from inside Level 1.

Every guest is driven through the test agent on a virtio-serial port and,
at Level 0 and 1, through QMP.  Nothing waits a fixed time: each wait is a
poll or a blocking read with a deadline, and a guest that dies ends the wait
at once with its console log in the error.
"""
import json
import os
import select
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from . import paths
from .agent import AgentConnection, AgentError, AgentNoAnswer, Result, STATUS_TIMEOUT
from .qmp import QMP

AGENT_PORT = "org.vsriov.agent"


def tail(path, lines=40):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return f"({path} not readable)\n"


class GuestBase:
    """What every guest offers: run commands, and check them."""

    name = "guest"

    def run(self, cmd, timeout=60):
        raise NotImplementedError

    def check(self, cmd, timeout=60):
        """Run cmd; it must exit 0.  Returns its stdout."""
        res = self.run(cmd, timeout)
        if res.status != 0:
            raise AssertionError(str(res))
        return res.stdout

    def wait_until(self, cmd, timeout=60, interval=0.2):
        """Poll cmd until it exits 0, with a deadline; returns the last Result."""
        deadline = time.monotonic() + timeout
        while True:
            res = self.run(cmd, timeout=max(5, timeout))
            if res.ok:
                return res
            if time.monotonic() > deadline:
                raise AssertionError(f"not true within {timeout} s: {res}")
            time.sleep(interval)


class MigrationFailed(AgentError):
    """A live migration failed, timed out, or its destination did not run."""


def migrate(src_qmp, dest_qmp, uri, what, logs, timeout, interval, dest_alive=lambda: True):
    """The live migration every level runs: the destination listens on
    @uri, the source sends; then poll the source's query-migrate until it
    completed and the destination's status until it runs, within @timeout.
    @src_qmp/@dest_qmp(cmd, args=None) give a command's return value;
    @what names the migration and @logs() gives both QEMU logs, for the
    MigrationFailed raised when it failed, timed out, or the destination
    did not run (or is gone: @dest_alive).  Returns the source's last
    query-migrate answer."""
    dest_qmp("migrate-incoming", {"uri": uri})
    src_qmp("migrate", {"uri": uri})
    deadline = time.monotonic() + timeout
    while True:
        st = src_qmp("query-migrate")
        if st.get("status") == "completed":
            break
        if st.get("status") in ("failed", "cancelled") or time.monotonic() > deadline:
            raise MigrationFailed(f"{what}: {st}\n{logs()}")
        time.sleep(interval)
    while dest_qmp("query-status")["status"] != "running":
        if time.monotonic() > deadline or not dest_alive():
            raise MigrationFailed(f"{what}: the destination did not run after it\n{logs()}")
        time.sleep(interval)
    return st


class Guest(GuestBase):
    """A TCG guest run by our QEMU on this machine (Level 0)."""

    def __init__(self, name, artifacts, *, qemu_args=(), memory="1G", smp=1,
                 kernel=None, initrd=None, append="", netns=None, qemu=None,
                 no_reboot=True, machine="q35", shares=None, incoming=False):
        self.name = name
        self.artifacts = artifacts
        os.makedirs(artifacts, exist_ok=True)
        self.qemu = qemu or paths.QEMU_BIN
        self.qemu_args = list(qemu_args)
        self.memory, self.smp, self.machine = memory, smp, machine
        # The test kernel (guest-kernel-patches/, small, all built in) unless
        # a test asks for another, e.g. Debian's own (paths.DEBIAN_KERNEL).
        self.kernel = kernel or paths.guest("vmlinuz-test")
        self.initrd = initrd or paths.guest("initramfs-test.gz")
        self.append = append
        self.netns = netns
        self.no_reboot = no_reboot
        # {mount tag: host folder}, read-only 9p shares; in the guest:
        # mount -t 9p -o trans=virtio TAG /somewhere
        self.shares = dict(shares or {})
        # A migration's destination: QEMU waits (-incoming defer) for
        # migrate_from(); no boot of its own.
        self.incoming = incoming
        # Unix socket paths must stay short; logs go to the artifacts folder.
        self.sockdir = tempfile.mkdtemp(prefix=f"vsr-{name[:8]}-", dir="/tmp")
        self.console_log = os.path.join(artifacts, f"{name}-console.log")
        self.qemu_log = os.path.join(artifacts, f"{name}-qemu.log")
        self.proc = None
        self.qmp = None
        self.agent = None
        self.agent_listener = None

    # -- life cycle ---------------------------------------------------------
    def argv(self):
        a = [self.qemu, "-accel", "tcg", "-M", self.machine, "-cpu", "max",
             "-m", self.memory, "-smp", str(self.smp),
             "-nodefaults", "-display", "none", "-vga", "none",
             # A test run that is killed takes its guests with it.
             "-run-with", "exit-with-parent=on",
             "-chardev", f"file,id=con,path={self.console_log}",
             "-serial", "chardev:con",
             "-chardev", f"socket,id=qmp,path={self.sockdir}/qmp.sock",
             "-mon", "chardev=qmp,mode=control",
             "-device", "virtio-serial-pci,id=vser0",
             # The guest closing the port (a reboot) drops the connection;
             # QEMU then connects again to the listener the harness keeps.
             "-chardev", f"socket,id=agent,path={self.sockdir}/agent.sock,reconnect-ms=100",
             "-device", f"virtserialport,bus=vser0.0,chardev=agent,name={AGENT_PORT}",
             "-kernel", self.kernel, "-initrd", self.initrd,
             "-append", ("console=ttyS0 panic=-1 quiet loglevel=4 "
                         f"vsriov.hostname={self.name} {self.append}").strip()]
        if self.no_reboot:
            a.append("-no-reboot")
        if self.incoming:
            a += ["-incoming", "defer"]
        for tag, path in self.shares.items():
            a += ["-virtfs", f"local,path={path},mount_tag={tag},security_model=none,readonly=on"]
        a += self.qemu_args
        if self.netns:
            a = ["ip", "netns", "exec", self.netns] + a
        return a

    def _listen(self, name):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(os.path.join(self.sockdir, name))
        s.listen(1)
        return s

    def _accept(self, lsock, what, deadline):
        """Accept QEMU's connection; fail at once if QEMU exits first."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AgentError(f"[{self.name}] QEMU did not connect its {what} socket in time\n"
                                 f"--- qemu log\n{tail(self.qemu_log)}")
            r, _, _ = select.select([lsock], [], [], min(left, 0.5))
            if r:
                conn, _ = lsock.accept()
                return conn
            if self.proc.poll() is not None:
                raise AgentError(f"[{self.name}] QEMU exited with {self.proc.returncode} "
                                 f"before connecting {what}\n--- qemu log\n{tail(self.qemu_log)}")

    def start(self, boot_timeout=180, give_up=None):
        qmp_l = self._listen("qmp.sock")
        agent_l = self.agent_listener = self._listen("agent.sock")
        argv = self.argv()
        with open(self.qemu_log, "w") as log:
            log.write("# " + " ".join(shlex.quote(x) for x in argv) + "\n")
            log.flush()
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            self.qmp = QMP(self._accept(qmp_l, "QMP", deadline), self.name)
            self.agent = AgentConnection(self._accept(agent_l, "agent", deadline), self.name)
            self.qmp.handshake()
            if not self.incoming:
                self.wait_agent(boot_timeout, give_up)
        except BaseException:
            self.stop()
            raise
        finally:
            qmp_l.close()
        return self

    def wait_agent(self, timeout, give_up=None):
        try:
            return self.agent.wait_ready(timeout, give_up)
        except AgentError as e:
            raise AgentError(f"{e}\n--- console\n{tail(self.console_log)}"
                             f"--- qemu log\n{tail(self.qemu_log)}") from None

    def stop(self, timeout=30):
        if self.proc and self.proc.poll() is None:
            if self.qmp:
                try:
                    self.qmp.execute("quit", timeout=10)
                except Exception:
                    pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        for c in (self.qmp, self.agent, self.agent_listener):
            if c:
                c.close()
        shutil.rmtree(self.sockdir, ignore_errors=True)

    # What a kernel prints when a timer it armed never fired: seen under
    # TCG on a loaded machine at boot, which then never completes (an RCU
    # stall; the vCPU idle).
    LOST_TIMER = "kthread timer wakeup didn't happen"

    def lost_timer(self):
        """For start(give_up=): why this boot will not complete, or None."""
        try:
            with open(self.console_log, errors="replace") as f:
                if self.LOST_TIMER in f.read():
                    return f"its kernel lost a timer (\"{self.LOST_TIMER}\" on the console)"
        except FileNotFoundError:
            pass
        return None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def reset(self, boot_timeout=180):
        """system_reset, then wait for the agent of the new boot (on the
        same connection, or on the one QEMU makes again when the old guest's
        close of the port dropped it)."""
        self.qmp.execute("system_reset")
        deadline = time.monotonic() + boot_timeout
        while True:
            try:
                return self.wait_agent(max(1, deadline - time.monotonic()))
            except AgentError:
                if time.monotonic() > deadline:
                    raise
            self.agent.close()
            self.agent = AgentConnection(
                self._accept(self.agent_listener, "agent", deadline), self.name)

    def migrate_to(self, dest, timeout=300, cap=None):
        """Live-migrate this guest to dest, a Guest(incoming=True) already
        started, over a Unix socket.  Returns the source's last
        query-migrate answer once the migration completed and the
        destination runs; raises MigrationFailed (with QEMU's error and
        both logs) if it failed.  cap: {capability: bool} set on both."""
        uri = f"unix:{dest.sockdir}/migrate.sock"
        if cap:
            caps = [{"capability": k, "state": v} for k, v in cap.items()]
            for g in (self, dest):
                g.qmp.execute("migrate-set-capabilities", {"capabilities": caps})
        return migrate(self.qmp.execute, dest.qmp.execute, uri,
                       f"[{self.name}] migration to {dest.name}",
                       lambda: (f"--- source qemu log\n{tail(self.qemu_log)}"
                                f"--- destination qemu log\n{tail(dest.qemu_log)}"),
                       timeout, 0.05, dest_alive=lambda: dest.proc.poll() is None)

    def vcpu_report(self):
        """Where each vCPU is (RIP, halted or not), from QEMU's monitor:
        tells a guest stuck in a loop from one idle and never woken."""
        try:
            out = self.qmp.execute("human-monitor-command",
                                   {"command-line": "info registers -a"}, timeout=10)
        except Exception as e:  # the report must never hide the failure
            return f"(no vCPU report: {e})\n"
        keep = [ln for ln in out.splitlines() if ln.startswith(("CPU#", "RIP="))]
        return "\n".join(keep) + "\n"

    # -- use ----------------------------------------------------------------
    def run(self, cmd, timeout=60):
        if self.proc.poll() is not None:
            raise AgentError(f"[{self.name}] QEMU has exited ({self.proc.returncode})\n"
                             f"--- console\n{tail(self.console_log)}")
        try:
            return self.agent.run(cmd, timeout)
        except AgentNoAnswer as e:
            raise AgentNoAnswer(f"{e}\n--- vCPUs\n{self.vcpu_report()}"
                                f"--- console\n{tail(self.console_log)}") from None


class L1Host(Guest):
    """The emulated host (Level 1): Debian trixie rootfs with OVS, vdpa_sim,
    netdevsim and our QEMU (over 9p from Level 0's cache)."""

    # systemd=True: units this host's boot need not start (libvirt, the
    # image's timers, the caches rebuilt because /usr is newer than /etc in
    # an image made by copying); their names go to systemd.mask= on the
    # command line.
    SYSTEMD_MASK = ("ldconfig.service", "systemd-journal-catalog-update.service",
                    "libvirtd.service", "libvirtd.socket", "libvirtd-ro.socket",
                    "libvirtd-admin.socket", "libvirt-guests.service", "virtlogd.service",
                    "virtlogd.socket", "virtlogd-admin.socket", "dpdk.service",
                    "apt-daily.timer", "apt-daily-upgrade.timer", "dpkg-db-backup.timer",
                    "fstrim.timer", "logrotate.timer", "getty@tty1.service")

    def __init__(self, name, artifacts, *, scratch=None, memory="6G", smp=2, qemu_args=(),
                 systemd=False, **kw):
        """systemd: boot with the root's systemd as PID 1 and the agent as
        one of its services (scripts/guest/l1-systemd-init) instead of the
        agent as PID 1."""
        self.scratch = scratch or os.path.join(artifacts, f"{name}-scratch")
        os.makedirs(self.scratch, exist_ok=True)
        initrd, append = paths.guest("initramfs.gz"), ""
        if systemd:
            initrd = self._systemd_initrd(artifacts)
            append = (" rdinit=/init-systemd systemd.wants=vsriov-agent.service "
                      "systemd.show_status=false " +
                      " ".join(f"systemd.mask={u}" for u in self.SYSTEMD_MASK))
        args = [
            "-drive", f"file={paths.guest('l1root.ext4')},if=virtio,format=raw,snapshot=on",
            "-virtfs", f"local,path={paths.CACHE},mount_tag=vsriov,security_model=none,readonly=on",
            "-virtfs", f"local,path={paths.SRC},mount_tag=src,security_model=none,readonly=on",
            "-virtfs", f"local,path={self.scratch},mount_tag=scratch,security_model=none",
        ] + list(qemu_args)
        super().__init__(name, artifacts, qemu_args=args, memory=memory, smp=smp,
                         kernel=paths.guest("vmlinuz"), initrd=initrd,
                         # A task blocked 20 s says so on the console (with
                         # its stack): the report a stuck command leaves.
                         append="vsriov.root=/dev/vda "
                                "sysctl.kernel.hung_task_timeout_secs=20" + append, **kw)

    @staticmethod
    def _systemd_initrd(artifacts):
        """The shared initramfs with /init-systemd appended (a second,
        gzip'd newc archive: the kernel unpacks both)."""
        import gzip
        import importlib.util
        spec = importlib.util.spec_from_file_location(
            "mkinitramfs", os.path.join(paths.SRC, "scripts", "guest", "mkinitramfs.py"))
        mk = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mk)
        c = mk.Cpio()
        with open(os.path.join(paths.SRC, "scripts", "guest", "l1-systemd-init"), "rb") as f:
            c.file("init-systemd", f.read(), 0o755)
        out = os.path.join(artifacts, "initramfs-systemd.gz")
        with open(paths.guest("initramfs.gz"), "rb") as f:
            base = f.read()
        with open(out, "wb") as f:
            f.write(base + b"\0" * (-len(base) % 4) + gzip.compress(c.finish(), mtime=0))
        return out

    def new_netdevsim(self, dev_id, max_vfs=64):
        """Create netdevsim device @dev_id with one port (the netdevsim
        module loaded) allowing @max_vfs VFs; returns the port's netdev."""
        self.check(f"echo '{dev_id} 1' > /sys/bus/netdevsim/new_device")
        pf = self.wait_until(f"ls /sys/bus/netdevsim/devices/netdevsim{dev_id}/net/ | grep .",
                             timeout=30).stdout.split()[0]
        # netdevsim allows 4 VFs unless told otherwise (a debugfs knob).
        self.check(f"echo {max_vfs} > /sys/kernel/debug/netdevsim/netdevsim{dev_id}/max_vfs")
        return pf

    def qmp_at(self, sock, cmd, args=None, log=lambda: ""):
        """One QMP command to a QEMU of Level 1 at @sock (harness/qmp.py
        there): its return value; an error answer raises AgentError, with
        @log() (that QEMU's log)."""
        a = f" {shlex.quote(json.dumps(args))}" if args else ""
        r = json.loads(self.check(f"python3 /src/tests/harness/qmp.py {sock} {cmd}{a}",
                                  timeout=180))
        if "return" not in r:
            raise AgentError(f"[{self.name}] {sock} {cmd}: {r}\n{log()}")
        return r["return"]

    def start_l2(self, name, qemu_args=(), memory="512M", boot_timeout=600, **kw):
        return NestedGuest(self, name, qemu_args=qemu_args, memory=memory, **kw).start(
            boot_timeout)


class NestedGuest(GuestBase):
    """A Level 2 guest: QEMU runs inside Level 1, and every command reaches
    the Level 2 agent through `vsriov-agent run --connect` in Level 1."""

    L1_QEMU = "/vsriov/qemu-build/qemu-system-x86_64"
    L1_AGENT = "/vsriov/guest/vsriov-agent"

    def __init__(self, l1, name, *, qemu_args=(), memory="512M", smp=1, append="",
                 prefix="", incoming=False):
        self.l1, self.name = l1, name
        self.incoming = incoming    # a migration's destination: -incoming defer
        self.dir = f"/run/vsriov-{name}"
        self.qemu_args = list(qemu_args)
        self.memory, self.smp, self.append = memory, smp, append
        self.prefix = prefix  # e.g. "ulimit -l unlimited;"
        self.console_log = f"/scratch/{name}-console.log"

    def argv(self):
        a = [self.L1_QEMU, "-accel", "tcg", "-M", "q35", "-cpu", "max",
             "-m", self.memory, "-smp", str(self.smp),
             "-nodefaults", "-display", "none", "-vga", "none", "-no-reboot",
             "-chardev", f"file,id=con,path={self.console_log}", "-serial", "chardev:con",
             "-qmp", f"unix:{self.dir}/qmp.sock,server=on,wait=off",
             "-device", "virtio-serial-pci,id=vser0",
             "-chardev", f"socket,id=agent,path={self.dir}/agent.sock,server=on,wait=off",
             "-device", f"virtserialport,bus=vser0.0,chardev=agent,name={AGENT_PORT}",
             "-kernel", "/vsriov/guest/vmlinuz-test", "-initrd", "/vsriov/guest/initramfs-test.gz",
             "-append", f"console=ttyS0 panic=-1 quiet loglevel=4 vsriov.hostname={self.name} "
                        f"{self.append}".strip()]
        if self.incoming:
            a += ["-incoming", "defer"]
        return a + self.qemu_args

    def start(self, boot_timeout=600):
        cmd = " ".join(shlex.quote(x) for x in self.argv())
        self.l1.check(f"mkdir -p {self.dir} && {{ {self.prefix} setsid {cmd} "
                      f"> /scratch/{self.name}-qemu.log 2>&1 < /dev/null & "
                      f"echo $! > {self.dir}/pid; }}")
        if self.incoming:
            self.qmp("query-status")    # (waits for QMP's socket)
            return self
        res = self.l1.run(f"{self.L1_AGENT} run --connect {self.dir}/agent.sock "
                          f"--wait {boot_timeout} --pid $(cat {self.dir}/pid) --timeout 30 -- true",
                          timeout=boot_timeout + 60)
        if not res.ok:
            qlog = self.qemu_log()
            con = tail(os.path.join(self.l1.scratch, f"{self.name}-console.log"))
            raise AgentError(f"[{self.name}] Level 2 guest did not come up: {res}\n"
                             f"--- L2 qemu log\n{qlog}--- L2 console\n{con}")
        return self

    def qmp(self, cmd, args=None):
        """One QMP command (harness/qmp.py in Level 1): its return value;
        an error answer raises, with the guest's QEMU log."""
        return self.l1.qmp_at(f"{self.dir}/qmp.sock", cmd, args,
                           lambda: f"--- L2 qemu log\n{self.qemu_log()}")

    def qemu_log(self):
        return tail(os.path.join(self.l1.scratch, f"{self.name}-qemu.log"))

    def migrate_to(self, dest, timeout=600):
        """Live-migrate to dest, a NestedGuest(incoming=True) started in the
        same Level 1, over a Unix socket; returns the source's last
        query-migrate answer once the destination runs, or raises
        MigrationFailed."""
        uri = f"unix:{dest.dir}/migrate.sock"
        return migrate(self.qmp, dest.qmp, uri, f"[{self.name}] migration to {dest.name}",
                       lambda: (f"--- source qemu log\n{self.qemu_log()}"
                                f"--- destination qemu log\n{dest.qemu_log()}"),
                       timeout, 0.2)

    def run(self, cmd, timeout=60):
        res = self.l1.run(f"{self.L1_AGENT} run --connect {self.dir}/agent.sock --wait 60 "
                          f"--pid $(cat {self.dir}/pid) --timeout {timeout} -- {shlex.quote(cmd)}",
                          timeout=timeout + 120)
        status = STATUS_TIMEOUT if res.status == 124 else res.status
        return Result(cmd, status, res.stdout, res.stderr, self.name)

    def stop(self):
        self.l1.run(f"kill $(cat {self.dir}/pid) 2>/dev/null; "
                    f"while kill -0 $(cat {self.dir}/pid) 2>/dev/null; do sleep 0.1; done",
                    timeout=60)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
