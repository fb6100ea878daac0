# SPDX-License-Identifier: GPL-2.0-or-later
"""A clean Debian 12 root for installing our packages (tests/system/
test_packages.py): debootstrap's minbase of bookworm with Debian's own
sources and nothing else, made once and kept as a tarball under
$VSRIOV_CACHE/pkg-test, unpacked afresh for every run.

Commands run in it through chroot in a mount namespace of their own
(unshare), so /proc, /dev and the bind mounts below vanish with the
command, whatever happens to the test.  apt's package lists and
downloaded .debs live outside the root ($VSRIOV_CACHE/pkg-test/lists,
archives), bind-mounted, so a second run downloads nothing it has."""
import fcntl
import glob
import os
import shlex
import shutil
import subprocess
import tempfile
import time

from harness import paths

BASE = os.path.join(paths.CACHE, "pkg-test")
TARBALL = os.path.join(BASE, "bookworm-minbase.tar.zst")
LISTS = os.path.join(BASE, "lists")
ARCHIVES = os.path.join(BASE, "archives")
APT_LOCK = os.path.join(BASE, "apt.lock")
MIRROR = os.environ.get("BOOKWORM_MIRROR", "http://deb.debian.org/debian")
SECURITY = os.environ.get("BOOKWORM_SECURITY_MIRROR", "http://deb.debian.org/debian-security")

# What the tarball is made of: a change here makes a new one.
SOURCES = (f"deb {MIRROR} bookworm main\n"
           f"deb {MIRROR} bookworm-updates main\n"
           f"deb {SECURITY} bookworm-security main\n")
RECIPE = "debootstrap --variant=minbase bookworm\n" + SOURCES + "policy-rc.d 101\n"

# Where apt, dpkg and the system keep caches and logs: not what a package
# leaves behind (paths relative to the root; a prefix ignores what is below).
IGNORED = ("proc", "dev", "sys", "mnt", "tmp", "run", "var/cache/apt", "var/lib/apt",
           "var/log", "var/cache/debconf/config.dat-old",
           "var/cache/debconf/templates.dat-old", "var/lib/dpkg/status-old",
           "var/lib/dpkg/diversions-old", "var/lib/dpkg/statoverride-old",
           "var/cache/ldconfig/aux-cache")


def _log(msg):
    print(f"[debroot] {msg}", flush=True)


def ensure_tarball():
    """The cached base root's tarball, made (debootstrap, a few minutes)
    when missing or made from another recipe.  Returns the seconds spent."""
    t0 = time.monotonic()
    os.makedirs(BASE, exist_ok=True)
    with open(APT_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)      # one maker at a time
        _make_tarball()
    return time.monotonic() - t0


def _make_tarball():
    stamp = TARBALL + ".recipe"
    if os.path.exists(TARBALL) and os.path.exists(stamp) and open(stamp).read() == RECIPE:
        return
    tmp = os.path.join(BASE, "root.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    _log(f"debootstrap --variant=minbase bookworm from {MIRROR} (once; kept in {TARBALL})")
    logf = os.path.join(BASE, "debootstrap.log")
    with open(logf, "w") as log:
        r = subprocess.run(["debootstrap", "--variant=minbase", "bookworm", tmp, MIRROR],
                           stdout=log, stderr=subprocess.STDOUT)
    if r.returncode:
        raise RuntimeError(f"debootstrap bookworm failed (is {MIRROR} reachable?); log in {logf}")
    with open(os.path.join(tmp, "etc/apt/sources.list"), "w") as f:
        f.write(SOURCES)
    # No service is started in a chroot (there is no systemd running
    # anyway; this keeps invoke-rc.d of other packages quiet too).
    prc = os.path.join(tmp, "usr/sbin/policy-rc.d")
    with open(prc, "w") as f:
        f.write("#!/bin/sh\nexit 101\n")
    os.chmod(prc, 0o755)
    for d in ("var/lib/apt/lists", "var/cache/apt/archives"):
        subprocess.run(["find", os.path.join(tmp, d), "-mindepth", "1", "-delete"], check=True)
    subprocess.run(["tar", "--zstd", "-C", tmp, "-cf", TARBALL + ".tmp", "."], check=True)
    os.replace(TARBALL + ".tmp", TARBALL)
    with open(stamp, "w") as f:
        f.write(RECIPE)
    shutil.rmtree(tmp)


class Root:
    """A fresh root unpacked from the tarball into a new folder under
    BASE (removed by close)."""

    def __init__(self, binds=None):
        # Roots of runs that were killed before their close (a day old).
        for old in glob.glob(os.path.join(BASE, "root-*")):
            if time.time() - os.stat(old).st_mtime > 86400:
                shutil.rmtree(old, ignore_errors=True)
        self.d = tempfile.mkdtemp(prefix="root-", dir=BASE)
        # {folder in the root (it exists there): host folder}, read-only
        self.binds = binds or {}
        d = self.d
        subprocess.run(["tar", "--zstd", "-C", d, "-xf", TARBALL], check=True)
        shutil.copy("/etc/resolv.conf", os.path.join(d, "etc/resolv.conf"))
        for x in (LISTS, os.path.join(LISTS, "partial"), ARCHIVES,
                  os.path.join(ARCHIVES, "partial")):
            os.makedirs(x, exist_ok=True)

    def run(self, cmd, check=True, timeout=900):
        """Run the shell command cmd in the root, as root; returns the
        CompletedProcess (stdout and stderr together, as text)."""
        r_ = shlex.quote(self.d)
        mounts = [f"mount -t proc proc {r_}/proc",
                  f"mount --rbind /dev {r_}/dev",
                  f"mount --bind {shlex.quote(LISTS)} {r_}/var/lib/apt/lists",
                  f"mount --bind {shlex.quote(ARCHIVES)} {r_}/var/cache/apt/archives"]
        for inside, host in self.binds.items():
            mounts.append(f"mount --bind -o ro {shlex.quote(host)} {r_}{shlex.quote(inside)}")
        script = " && ".join(mounts) + (
            f" && exec chroot {r_} /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin"
            " HOME=/root LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive /bin/sh -c "
            + shlex.quote(cmd))
        # apt's lists and archives are shared with other runs on this
        # machine: one apt at a time.
        r = subprocess.run(["flock", APT_LOCK, "unshare", "--mount", "--propagation", "private",
                            "sh", "-c", script],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout)
        if check and r.returncode:
            raise AssertionError(f"in the root: {cmd}: exit {r.returncode}\n{r.stdout[-4000:]}")
        return r

    def files(self):
        """{relative path: kind} of everything in the root but IGNORED."""
        out = {}
        for top, dirs, names in os.walk(self.d):
            rel_top = os.path.relpath(top, self.d)
            rel_top = "" if rel_top == "." else rel_top
            keep = []
            for n in dirs:
                rel = os.path.join(rel_top, n)
                if rel.startswith(IGNORED):
                    continue
                p = os.path.join(top, n)
                if os.path.islink(p):
                    out[rel] = "link"
                else:
                    out[rel] = "dir"
                    keep.append(n)
            dirs[:] = keep
            for n in names:
                rel = os.path.join(rel_top, n)
                if rel.startswith(IGNORED):
                    continue
                out[rel] = "link" if os.path.islink(os.path.join(top, n)) else "file"
        return out

    def close(self):
        shutil.rmtree(self.d, ignore_errors=True)
