# SPDX-License-Identifier: GPL-2.0-or-later
"""The Debian packages installed as an operator would (issue 37).

scripts/package builds vsriov-qemu and vdpa-pool-daemon from this run's
builds (and fails on a lintian error); then, in a clean Debian 12 root
(debootstrap's minbase with Debian's sources only, harness/debroot.py),
`apt-get install ./*.deb` must find every dependency in Debian; the
installed QEMU must start a virtual PF with its firmware, answer
query-vsriov and pass our qtests; `vdpa-poolctl check` must accept the
example configuration and the shipped default, which defines no pool,
and the installed daemon must start on it with nothing to serve; the
daemon's units must be enabled and its group made; an upgrade keeps the
admin's edit of the conffile and their disabled service; removal keeps
only the conffile, and purge leaves nothing: a second install, remove
and purge cycle must give back the very same file list, and nothing
named after our packages may stay."""
import glob
import json
import os
import re
import shlex
import subprocess
import time

import pytest

from harness import debroot, paths

pytestmark = pytest.mark.slow

OURS = ("vsriov-qemu", "vdpa-pool-daemon")
QTESTS = os.path.join(paths.QEMU_BUILD, "tests", "qtest", "vsriov")
with open(os.path.join(paths.SRC, "tests", "qtest", "targets")) as f:
    QTEST_TARGETS = [line.strip() for line in f if line.strip()]


def _timed(what, times, f, *a, **kw):
    t0 = time.monotonic()
    r = f(*a, **kw)
    times[what] = round(time.monotonic() - t0, 1)
    return r


@pytest.fixture(scope="module")
def debs(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("debs"))
    r = subprocess.run([os.path.join(paths.SRC, "scripts", "package"), "--no-build",
                        "--output", out], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=600)
    assert r.returncode == 0, "scripts/package failed:\n" + r.stdout[-4000:]
    print(r.stdout)
    found = sorted(glob.glob(os.path.join(out, "*.deb")))
    assert [os.path.basename(d).split("_")[0] for d in found] == sorted(OURS)
    return out


def _upgrade_deb(debs, d):
    """vdpa-pool-daemon again, its version VERSION.1: an upgrade."""
    deb = glob.glob(os.path.join(debs, "vdpa-pool-daemon_*.deb"))[0]
    tree = os.path.join(d, "tree")
    subprocess.run(["dpkg-deb", "-R", deb, tree], check=True)
    ctl = os.path.join(tree, "DEBIAN", "control")
    with open(ctl) as f:
        text = f.read()
    version = re.search(r"^Version: (.*)$", text, re.M).group(1) + ".1"
    with open(ctl, "w") as f:
        f.write(re.sub(r"^Version: .*$", "Version: " + version, text, flags=re.M))
    os.makedirs(os.path.join(d, "up"))
    out = os.path.join(d, "up", f"vdpa-pool-daemon_{version}_amd64.deb")
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zxz", "-b", tree, out],
                   check=True, stdout=subprocess.DEVNULL)
    return out


def _qmp_check(root):
    """The installed QEMU starts a q35 machine (firmware from Debian's
    packages: bios-256k.bin, efi-virtio.rom) with a virtual PF and two
    VFs, and answers query-vsriov."""
    cmds = "\n".join(json.dumps({"execute": c})
                     for c in ("qmp_capabilities", "query-vsriov", "quit"))
    r = root.run(
        "printf '%s\\n' " + shlex.quote(cmds) + " | vsriov-qemu-system-x86_64 -M q35 -display none"
        " -S -nodefaults -netdev user,id=pfnet -netdev user,id=vf0 -netdev user,id=vf1"
        " -object vsriov-pool,id=p0,netdevs=vf0,netdevs=vf1"
        " -device pcie-root-port,id=rp0,chassis=1"
        " -device virtio-net-pci,bus=rp0,id=pf0,netdev=pfnet,sriov-pool=p0 -qmp stdio",
        timeout=120)
    answers = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    vsriov = [a["return"] for a in answers if isinstance(a.get("return"), list)]
    assert vsriov and vsriov[0][0]["id"] == "pf0" and vsriov[0][0]["total-vfs"] == 2, r.stdout
    return r


def test_install_use_remove_purge(debs, artifacts, tmp_path):
    times = {}
    times["base root (debootstrap, 0 when cached)"] = round(debroot.ensure_tarball(), 1)
    upgrade = _upgrade_deb(debs, str(tmp_path))
    # The packages at /mnt, the upgrade at /opt, the qtests of this run's
    # QEMU build at /srv.
    root = _timed("unpack the base root", times, debroot.Root,
                  {"/mnt": debs, "/opt": os.path.dirname(upgrade), "/srv": QTESTS})
    log = open(os.path.join(artifacts, "root.log"), "w")

    def run(cmd, **kw):
        r = root.run(cmd, **kw)
        log.write(f"# {cmd}\n{r.stdout}\n")
        log.flush()
        return r

    try:
        _timed("apt-get update", times, run, "apt-get update")
        clean = root.files()
        debs_in_root = " ".join("./mnt/" + os.path.basename(d)
                                for d in sorted(glob.glob(os.path.join(debs, "*.deb"))))

        # 1. Dependencies from Debian alone: the root's only sources are
        # Debian's, and apt must find all that the packages need.
        r = _timed("apt-get install ./*.deb (with dependencies)", times, run,
                   f"cd / && apt-get install -y {debs_in_root}")
        run("apt-get check && dpkg --audit")
        st = run("dpkg-query -W -f '${Package} ${Status}\\n' " + " ".join(OURS)).stdout
        assert st.count("install ok installed") == 2, st

        # 2. QEMU: the wrapper names, the firmware, our device and QMP.
        assert "QEMU emulator version 10.2.2" in run("vsriov-qemu-system-x86_64 --version").stdout
        assert "qemu-img version 10.2.2" in run("vsriov-qemu-img --version").stdout
        objs = run("vsriov-qemu-system-x86_64 -object help").stdout
        assert "vsriov-pool" in objs and "vsriov-daemon-pool" in objs, objs
        props = run("vsriov-qemu-system-x86_64 -device virtio-net-pci,help").stdout
        assert "sriov-pool=" in props and "sriov-eswitch=" in props, props
        _timed("QEMU start with a virtual PF, query-vsriov", times, _qmp_check, root)
        # Our qtests (built with QEMU, run by the qtest suite against the
        # build tree) against the installed binary.
        t0 = time.monotonic()
        for name in QTEST_TARGETS:
            r = run(f"cd /srv && QTEST_QEMU_BINARY=/usr/bin/vsriov-qemu-system-x86_64"
                    f" ./{name} --tap -k", check=False, timeout=600)
            lines = r.stdout.splitlines()
            assert r.returncode == 0 and not [x for x in lines if x.startswith("not ok")] \
                and [x for x in lines if x.startswith("ok")], f"{name}:\n{r.stdout[-4000:]}"
        times["qtests against the installed QEMU"] = round(time.monotonic() - t0, 1)
        assert "qemu-system-x86_64" not in run("ls /usr/bin").stdout.replace(
            "vsriov-qemu-system-x86_64", ""), "it must not take Debian's QEMU's name"

        # 3. The daemon: the example configuration and the shipped default
        # (no PF, no pool: the daemon would provision nothing).
        ex = run("vdpa-poolctl check"
                 " /usr/share/doc/vdpa-pool-daemon/examples/vdpa-pool-daemon.conf").stdout
        assert "pool tenant-a: pf ens1f0np0 VFs 0-3" in ex, ex
        default = run("vdpa-poolctl check /etc/vdpa-pool-daemon.conf").stdout
        assert default.startswith("socket /run/vdpa-pool-daemon/api.sock") and \
            not re.search(r"^(pf|pool) ", default, re.M), default
        # The installed daemon runs on it: ready, with nothing to serve
        # (--fake-vhost-dir: no provisioning, as the root has no vdpa
        # module; its socket and state in /tmp), and stops on SIGTERM.
        out = run("d=/tmp/vpd && mkdir -p $d/fake && "
                  "{ vdpa-pool-daemon -c /etc/vdpa-pool-daemon.conf --socket $d/api.sock"
                  " --state $d/state --fake-vhost-dir $d/fake >$d/out 2>&1 & pid=$!; } && "
                  "for i in $(seq 100); do grep -q '^READY' $d/out && break; sleep 0.1; done; "
                  "kill -TERM $pid; wait $pid; echo exit=$?; cat $d/out").stdout
        assert "ready: 0 pooled VF(s)" in out and "\nREADY" in out and "exit=0" in out, out
        assert run("getent group vdpa-pool").stdout.startswith("vdpa-pool:x:")
        wants = run("ls /etc/systemd/system/sockets.target.wants"
                    " /etc/systemd/system/multi-user.target.wants").stdout
        assert "vdpa-pool-daemon.socket" in wants and "vdpa-pool-daemon.service" in wants, wants
        # The metrics timer and its service (vdpa-poolctl metrics for
        # node_exporter) are shipped, valid units, and not enabled: the
        # admin enables the timer where node_exporter runs.
        units = "/lib/systemd/system/vdpa-pool-metrics.service" \
            " /lib/systemd/system/vdpa-pool-metrics.timer"
        run(f"test -f {units.split()[0]} && test -f {units.split()[1]}")
        assert "vdpa-pool-metrics" not in run("ls /etc/systemd/system/*.wants").stdout
        r = run(f"systemd-analyze verify --man=no {units}", check=False)
        assert r.returncode == 0, r.stdout
        run("test -f /usr/share/man/man8/vdpa-pool-daemon.8.gz"
            " && test -f /usr/share/man/man8/vdpa-poolctl.8.gz"
            " && test -f /usr/share/man/man1/vsriov-qemu-system-x86_64.1.gz")

        # An upgrade (the same package, a higher version): the admin's
        # edit of the conffile and their disabling of the service are kept.
        run("sed -i 's/^#ovs-bridge = br-vsriov/ovs-bridge = br-admin/' /etc/vdpa-pool-daemon.conf"
            " && systemctl disable vdpa-pool-daemon.service")
        _timed("apt-get install (upgrade of the daemon)", times, run,
               "apt-get install -y ./opt/" + os.path.basename(upgrade))
        st = run("dpkg-query -W -f '${Version}' vdpa-pool-daemon").stdout
        assert st.endswith(".1"), st
        assert "OVS bridge br-admin" in run("vdpa-poolctl check /etc/vdpa-pool-daemon.conf").stdout
        # (the service's Also= took the socket with it)
        wants = run("ls /etc/systemd/system/*.wants").stdout
        assert "vdpa-pool-daemon" not in wants, wants

        # 4. Remove, then purge; then the same again from the state the
        # first purge left (dependencies installed): the file lists must
        # be the same, so every file our packages and their scripts made
        # went with them.
        def cycle(n):
            if n == 2:
                _timed("apt-get install ./*.deb (dependencies there)", times, run,
                       f"cd / && apt-get install -y {debs_in_root}")
            # What the daemon leaves when it has run: its state.
            run("mkdir -p -m 700 /var/lib/vdpa-pool-daemon &&"
                " echo '{}' > /var/lib/vdpa-pool-daemon/state")
            run("apt-get remove -y " + " ".join(OURS))
            left = root.files()
            assert "etc/vdpa-pool-daemon.conf" in left, "remove must keep the conffile"
            gone = [p for p in ("usr/sbin/vdpa-pool-daemon", "usr/bin/vsriov-qemu-system-x86_64",
                                "usr/lib/vsriov-qemu") if p in left]
            assert not gone, f"left after remove: {gone}"
            _timed(f"apt-get purge (cycle {n})", times, run, "apt-get purge -y " + " ".join(OURS))
            after = root.files()
            named = sorted(p for p in after if re.search(r"vdpa-pool|vsriov", p))
            assert not named, f"left after purge: {named}"
            return after

        first = cycle(1)
        second = cycle(2)
        added = sorted(set(second) - set(first))
        lost = sorted(set(first) - set(second))
        assert not added and not lost, f"a second install/purge cycle left {added}, took {lost}"
        # What the first cycle added to the clean root, for the record
        # (the dependencies' files).
        with open(os.path.join(artifacts, "added-by-dependencies.txt"), "w") as f:
            f.write("\n".join(sorted(set(first) - set(clean))) + "\n")
    finally:
        log.close()
        root.close()
        with open(os.path.join(artifacts, "times.txt"), "w") as f:
            f.write("".join(f"{k}: {v} s\n" for k, v in times.items()))
        print("\n".join(f"{k}: {v} s" for k, v in times.items()))
