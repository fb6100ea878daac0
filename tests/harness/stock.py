# SPDX-License-Identifier: GPL-2.0-or-later
"""Debian's stock kernels, as scripts/guest/fetch-stock-kernels left them
in $VSRIOV_CACHE/stock-kernels: <name> -> <version>/ (vmlinuz,
initramfs.gz, kver, suite), or <name>.error saying why that kernel could
not be fetched."""
import dataclasses
import os
import re

from . import paths

STOCK_DIR = os.path.join(paths.CACHE, "stock-kernels")
FETCH = "scripts/guest/fetch-stock-kernels"
FILES = ("vmlinuz", "initramfs.gz", "kver", "suite")
# What each name is (the script's suites for it).
NAMES = {
    "debian12": "Debian 12's kernel (bookworm, bookworm-security)",
    "debian13": "Debian 13's kernel (trixie, trixie-security)",
    "newest": "the newest kernel Debian ships (trixie-backports, unstable, experimental)",
}


@dataclasses.dataclass
class StockKernel:
    name: str
    version: str    # the Debian package version, e.g. 6.1.192-2
    kver: str       # the kernel release, e.g. 6.1.0-56-amd64
    suite: str
    kernel: str     # path of the vmlinuz
    initrd: str     # path of its initramfs (our init and agent)

    @property
    def release(self):
        """(major, minor) of the kernel release."""
        m = re.match(r"(\d+)\.(\d+)", self.kver)
        return int(m.group(1)), int(m.group(2))

    def __str__(self):
        return f"Linux {self.kver} (Debian {self.version} from {self.suite})"


def _read(path):
    with open(path) as f:
        return f.read().strip()


def why_missing(name):
    """Why the stock kernel @name (a key of NAMES) is not there, in a
    sentence, or None when it is."""
    err = os.path.join(STOCK_DIR, f"{name}.error")
    if os.path.exists(err):
        return f"{_read(err)} (so said {FETCH}, run by the build)"
    d = os.path.join(STOCK_DIR, name)
    if not all(os.path.exists(os.path.join(d, f)) for f in FILES):
        return (f"{NAMES[name][0].upper()}{NAMES[name][1:]} is not in {d}: the build did "
                f"not run {FETCH} (scripts/build-guest runs it).")
    return None


def kernel(name):
    """The stock kernel @name, which must be there (why_missing())."""
    d = os.path.join(STOCK_DIR, name)
    return StockKernel(name, os.path.basename(os.path.realpath(d)),
                       _read(os.path.join(d, "kver")), _read(os.path.join(d, "suite")),
                       os.path.join(d, "vmlinuz"), os.path.join(d, "initramfs.gz"))
