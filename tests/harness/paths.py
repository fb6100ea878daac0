# SPDX-License-Identifier: GPL-2.0-or-later
"""Where the build put things (scripts/lib.sh is the one definition; these
follow it through the environment scripts/test exports)."""
import os

SRC = os.environ.get("VSRIOV_SRC") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
CACHE = os.environ.get("VSRIOV_CACHE", "/var/cache/vsriov")
QEMU_BUILD = os.environ.get("QEMU_BUILD", os.path.join(CACHE, "qemu-build"))
QEMU_BUILD_ASAN = os.environ.get("QEMU_BUILD_ASAN", os.path.join(CACHE, "qemu-build-asan"))
QEMU_BIN = os.environ.get("QEMU_BIN", os.path.join(QEMU_BUILD, "qemu-system-x86_64"))
GUEST_DIR = os.environ.get("GUEST_DIR", os.path.join(CACHE, "guest"))
ARTIFACTS = os.environ.get("VSRIOV_ARTIFACTS", os.path.join(CACHE, "test-artifacts"))


def guest(name):
    return os.path.join(GUEST_DIR, name)


def agent_binary():
    """The agent as built by scripts/build-ours (unit tests) or copied into
    the guest artifacts (guest tests)."""
    b = os.environ.get("VSRIOV_BUILD_OURS")
    if b and os.path.exists(os.path.join(b, "tests", "agent", "vsriov-agent")):
        return os.path.join(b, "tests", "agent", "vsriov-agent")
    return guest("vsriov-agent")
