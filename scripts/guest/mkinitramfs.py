#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Build the test guests' initramfs (a newc cpio, gzip'd).

It holds busybox, iproute2's ip/vdpa/devlink/bridge/tc and ethtool with
their libraries, our agent, the kernel modules asked for (with their
dependencies, in load order, decompressed) and our /init.  Everything
comes from the trixie chroot given by --root, so the binaries match the
guest kernel's userland.

The output is rewritten only when its content changes, so an unchanged run
leaves the file (and whatever depends on its mtime) alone.
"""
import argparse
import gzip
import io
import lzma
import os
import stat
import subprocess
import sys

BINARIES = ["/usr/sbin/ip", "/usr/sbin/vdpa", "/usr/sbin/devlink", "/usr/sbin/bridge",
            "/usr/sbin/tc", "/usr/sbin/ethtool", "/usr/bin/bash"]
# Debian's busybox-static runs its own applets before searching PATH
# (FEATURE_PREFER_APPLETS), so its ash would run busybox's ip instead of
# iproute2's: /bin/sh is bash, which searches PATH.
SHELL = "/usr/bin/bash"


class Cpio:
    """Minimal writer of the newc format, deterministic (mtime 0)."""

    def __init__(self):
        self.out = io.BytesIO()
        self.ino = 1
        self.seen = set()

    def _entry(self, name, mode, data=b"", nlink=1):
        name_b = name.encode() + b"\0"
        hdr = "070701" + "".join(f"{v:08x}" for v in (
            self.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(name_b), 0))
        self.ino += 1
        self.out.write(hdr.encode() + name_b)
        self.out.write(b"\0" * ((4 - (110 + len(name_b)) % 4) % 4))
        self.out.write(data)
        self.out.write(b"\0" * ((4 - len(data) % 4) % 4))

    def dir(self, path):
        parts = path.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            p = "/".join(parts[:i])
            if p and p not in self.seen:
                self.seen.add(p)
                self._entry(p, stat.S_IFDIR | 0o755, nlink=2)

    def file(self, path, data, mode=0o644):
        path = path.strip("/")
        self.dir(os.path.dirname(path))
        if path in self.seen:
            return
        self.seen.add(path)
        self._entry(path, stat.S_IFREG | mode, data)

    def symlink(self, path, target):
        path = path.strip("/")
        self.dir(os.path.dirname(path))
        if path in self.seen:
            return
        self.seen.add(path)
        self._entry(path, stat.S_IFLNK | 0o777, target.encode())

    def finish(self):
        self._entry("TRAILER!!!", 0)
        return self.out.getvalue()


def resolve_modules(root, kver, names):
    mroot = f"{root}/usr/lib/modules/{kver}"
    deps, by_name = {}, {}
    with open(f"{mroot}/modules.dep") as f:
        for line in f:
            k, v = line.split(":", 1)
            deps[k] = v.split()
            by_name[os.path.basename(k).split(".ko")[0].replace("-", "_")] = k
    order = []

    def visit(path):
        if path in order:
            return
        for d in reversed(deps[path]):  # deepest dependencies come last
            visit(d)
        order.append(path)

    for n in names:
        key = n.replace("-", "_")
        if key not in by_name:
            sys.exit(f"mkinitramfs: module {n} not found in {mroot}/modules.dep")
        visit(by_name[key])
    return [(os.path.basename(p).replace(".xz", "").replace(".zst", ""),
             f"{mroot}/{p}") for p in order]


def read_module(path):
    if path.endswith(".xz"):
        return lzma.open(path).read()
    if path.endswith(".zst"):
        return subprocess.check_output(["zstd", "-dc", path])
    with open(path, "rb") as f:
        return f.read()


def library_closure(root, binaries):
    """Shared libraries of the binaries, as the chroot's loader sees them."""
    libs = set()
    for b in binaries:
        out = subprocess.run(["chroot", root, "/usr/bin/ldd", b], capture_output=True,
                             text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if "=>" in parts and len(parts) >= 3 and parts[2].startswith("/"):
                libs.add(parts[2])
            elif parts and parts[0].startswith("/"):
                libs.add(parts[0])
    return sorted(libs)


def add_host_file(cpio, root, path, mode=None):
    """Add the chroot's file at path (the name the loader asks for), with the
    content symlinks lead to inside the chroot."""
    real = path
    for _ in range(40):
        if not os.path.islink(root + real):
            break
        target = os.readlink(root + real)
        real = target if target.startswith("/") else os.path.normpath(
            os.path.join(os.path.dirname(real), target))
    with open(root + real, "rb") as f:
        data = f.read()
    cpio.file(path, data, mode if mode is not None else os.stat(root + real).st_mode & 0o777)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--kver", required=True)
    ap.add_argument("--init", required=True)
    ap.add_argument("--agent", required=True)
    ap.add_argument("--modules", required=True, help="comma-separated module names")
    ap.add_argument("--extra-modules", help="folder of out-of-tree .ko files to add")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    names = [m for m in a.modules.split(",") if m]
    order = resolve_modules(a.root, a.kver, names)

    c = Cpio()
    for d in ["bin", "sbin", "etc", "proc", "sys", "dev", "tmp", "run", "mnt", "newroot",
              "lib/modules", "usr/bin", "usr/sbin", "var/run/netns", "root"]:
        c.dir(d)
    with open(f"{a.root}/usr/bin/busybox", "rb") as f:
        c.file("bin/busybox", f.read(), 0o755)
    applets = subprocess.check_output([f"{a.root}/usr/bin/busybox", "--list-full"], text=True)
    ours = {os.path.basename(b) for b in BINARIES} | {"sh"}
    for ap_path in applets.split():
        if os.path.basename(ap_path) not in ours:  # iproute2's, not busybox's
            c.symlink(ap_path, "/bin/busybox")
    for b in BINARIES:
        with open(a.root + b, "rb") as f:
            c.file(b, f.read(), 0o755)
    for lib in library_closure(a.root, BINARIES):
        add_host_file(c, a.root, lib)
    c.symlink("bin/sh", SHELL)
    with open(a.agent, "rb") as f:
        c.file("bin/vsriov-agent", f.read(), 0o755)
    with open(a.init, "rb") as f:
        c.file("init", f.read(), 0o755)

    for name, path in order:
        c.file(f"lib/modules/{name}", read_module(path))
    c.file("etc/modules.order", "".join(f"{n}\n" for n, _ in order).encode())
    # Out-of-tree modules are carried but not loaded: tests insmod what they need.
    if a.extra_modules:
        for ko in sorted(os.listdir(a.extra_modules)):
            if ko.endswith(".ko"):
                with open(os.path.join(a.extra_modules, ko), "rb") as f:
                    c.file(f"lib/modules/extra/{ko}", f.read())
    c.file("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n")
    c.file("etc/group", b"root:x:0:\n")

    data = gzip.compress(c.finish(), compresslevel=6, mtime=0)
    try:
        with open(a.out, "rb") as f:
            if f.read() == data:
                return
    except FileNotFoundError:
        pass
    with open(a.out + ".tmp", "wb") as f:
        f.write(data)
    os.replace(a.out + ".tmp", a.out)
    print(f"mkinitramfs: wrote {a.out} ({len(data)} bytes, modules: "
          f"{' '.join(n for n, _ in order)})")


if __name__ == "__main__":
    main()
