# SPDX-License-Identifier: GPL-2.0-or-later
"""Go for the tests: static binaries for guests (CGO off, so they run in
any guest) and Go tools (golangci-lint), with Go's build cache under
$VSRIOV_CACHE.

$VSRIOV_GOCACHE and $VSRIOV_GOTOOLS move the build cache and the tools
elsewhere (scripts/lib.sh exports the second; a measurement on cold caches
points both, and GOMODCACHE, at empty folders)."""
import contextlib
import fcntl
import os
import shutil
import subprocess
import time

from harness import paths

GOCACHE = os.environ.get("VSRIOV_GOCACHE") or os.path.join(paths.CACHE, "go-build")
GOTOOLS = os.environ.get("VSRIOV_GOTOOLS") or os.path.join(paths.CACHE, "gotools")
# A tool's installation on a fresh machine takes a few minutes of CPU; under
# load, several times that.
INSTALL_TIMEOUT = 1800


def env(**extra):
    """The environment of our go commands: CGO off, modules updated as
    needed, the pinned Go (no toolchain download), the build cache."""
    return dict(os.environ, CGO_ENABLED="0", GOFLAGS="-mod=mod", GOTOOLCHAIN="local",
                GOCACHE=GOCACHE, **extra)


def build_static(module_dir, *go_args):
    """Run `go <go_args>` (build or test -c, with -o) in module_dir."""
    subprocess.run(["go", *go_args], cwd=module_dir, env=env(), check=True,
                   capture_output=True, timeout=600)


@contextlib.contextmanager
def locked(name, timeout=INSTALL_TIMEOUT, on_busy=None):
    """Hold $VSRIOV_GOTOOLS/<name>.lock (an flock, so a process that dies
    lets go of it); yields the seconds spent waiting for it.  If another
    process holds it, calls on_busy() once, then waits; fails when that
    lasts longer than timeout."""
    os.makedirs(GOTOOLS, exist_ok=True)
    path = os.path.join(GOTOOLS, f"{name}.lock")
    with open(path, "a") as f:
        t0 = time.monotonic()
        busy = False
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                assert time.monotonic() - t0 < timeout, \
                    f"{path} has been held by another process for {timeout} s"
                if not busy and on_busy:
                    on_busy()
                busy = True
                time.sleep(1)
        try:
            yield time.monotonic() - t0
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def golangci_lint(version):
    """The path of golangci-lint at version, built with our Go into
    $VSRIOV_GOTOOLS/golangci-lint-<version>/ if it is not there yet (one
    process at a time: another one's build is waited for, not repeated)."""
    gobin = os.path.join(GOTOOLS, f"golangci-lint-{version}")
    binary = os.path.join(gobin, "golangci-lint")
    with locked(f"golangci-lint-{version}"):
        if os.path.exists(binary):
            return binary
        major = "/v2" if not version.startswith("v1.") else ""
        tmp = f"{gobin}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        p = subprocess.run(
            ["go", "install", f"github.com/golangci/golangci-lint{major}/cmd/golangci-lint@{version}"],
            env=env(GOBIN=tmp), capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
        assert p.returncode == 0, f"cannot install golangci-lint {version}:\n{p.stderr}"
        os.makedirs(gobin, exist_ok=True)
        os.replace(os.path.join(tmp, "golangci-lint"), binary)
        shutil.rmtree(tmp, ignore_errors=True)
    return binary
