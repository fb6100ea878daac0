# SPDX-License-Identifier: GPL-2.0-or-later
"""The initramfs writer produces archives the kernel's format readers accept
(checked with cpio(1)), deterministically."""
import importlib.util
import os
import subprocess

from harness import paths

spec = importlib.util.spec_from_file_location(
    "mkinitramfs", os.path.join(paths.SRC, "scripts", "guest", "mkinitramfs.py"))
mk = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mk)


def build():
    c = mk.Cpio()
    c.file("bin/tool", b"#!/bin/sh\n", 0o755)
    c.symlink("sbin/alias", "/bin/tool")
    c.file("etc/odd-length", b"12345")
    return c.finish()


def test_cpio_lists_with_cpio_tool(tmp_path):
    data = build()
    listing = subprocess.run(["cpio", "-t", "--quiet"], input=data, capture_output=True,
                             check=True).stdout.decode().split()
    assert listing == ["bin", "bin/tool", "sbin", "sbin/alias", "etc", "etc/odd-length"]
    subprocess.run(["cpio", "-id", "--quiet"], input=data, cwd=tmp_path, check=True)
    assert (tmp_path / "etc/odd-length").read_bytes() == b"12345"
    assert os.readlink(tmp_path / "sbin/alias") == "/bin/tool"
    assert os.stat(tmp_path / "bin/tool").st_mode & 0o777 == 0o755


def test_cpio_is_deterministic():
    assert build() == build()
