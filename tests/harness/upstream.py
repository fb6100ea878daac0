# SPDX-License-Identifier: GPL-2.0-or-later
"""Upstream SR-IOV CNI and SR-IOV network device plugin releases, unpacked
from the tarballs in ../shared/upstream/ (the Go module proxy serves their
dependencies but not the projects), optionally with our series applied.

A test that needs a release calls tree(); where the tarball is absent it is
skipped with a sentence that says which file and where it was looked for.

`python3 -m harness.upstream prebuild` (run from tests/) builds ahead what
the tests of the releases need and our series does not change: see
prebuild()."""
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

import pytest

from harness import golang, paths

# The releases the series in sriov-cni-patch/ are made against.
RELEASES = {
    "sriov-cni": ("v2.10.0", "sriov-cni-patch"),
    "sriov-network-device-plugin": ("v3.11.0", "sriov-cni-patch/device-plugin"),
}


# Where the tarballs are looked for, in order, when $VSRIOV_UPSTREAM is not
# set: shared/upstream beside the source tree or one of its parents (a CI
# job's clone may sit a level deeper than the development tree), then the
# development machines' /work/shared/upstream.
SEARCH = ["shared/upstream", "../shared/upstream", "../../shared/upstream"]
FALLBACK = "/work/shared/upstream"
# The process group of a prebuild() that is running.
PREBUILD_PGRP = os.path.join(golang.GOTOOLS, "prebuild.pgrp")


def upstream_dir():
    """$VSRIOV_UPSTREAM, else the first folder of SEARCH (relative to the
    source tree's parent) or FALLBACK that has the tarballs; else the
    first candidate (where the skip message says it looked)."""
    if os.environ.get("VSRIOV_UPSTREAM"):
        return os.environ["VSRIOV_UPSTREAM"]
    parent = os.path.dirname(os.path.abspath(paths.SRC))
    cands = [os.path.normpath(os.path.join(parent, c)) for c in SEARCH] + [FALLBACK]
    for c in cands:
        if os.path.exists(os.path.join(c, f"sriov-cni-{RELEASES['sriov-cni'][0]}.tar.gz")):
            return c
    return cands[0]


def tarball(project):
    version = RELEASES[project][0]
    return os.path.join(upstream_dir(), f"{project}-{version}.tar.gz")


def series(project):
    """The patch files of our series for project, in order (not the cover
    letter, 0000-cover-letter.patch, which changes nothing)."""
    d = os.path.join(paths.SRC, RELEASES[project][1])
    return sorted(os.path.join(d, f) for f in os.listdir(d)
                  if f.endswith(".patch") and f != "0000-cover-letter.patch")


def go_env():
    return golang.env()


def makefile_var(text, name):
    """The value a Makefile's text gives name (`NAME = v` or `NAME ?= v`), or None."""
    m = re.search(rf"^{name}\s*\??=\s*(\S+)", text, re.M)
    return m and m.group(1)


def release_makefile(project):
    """The Makefile of project's release, from its tarball."""
    with tarfile.open(tarball(project)) as tar:
        member = next(m for m in tar.getmembers() if m.name.count("/") == 1
                      and m.name.endswith("/Makefile"))
        return tar.extractfile(member).read().decode()


def tree(project, dest, patched=True):
    """Unpack project's release into dest/<project> (a git repository whose
    first commit is the release) and, if patched, `git am` our series on
    it.  Returns the tree's path.  Skips when the tarball is absent."""
    tar = tarball(project)
    if not os.path.exists(tar):
        pytest.skip(f"{os.path.basename(tar)} is not in {upstream_dir()} "
                    f"(set VSRIOV_UPSTREAM to the folder that has it)")
    top = os.path.join(dest, project)
    shutil.rmtree(top, ignore_errors=True)
    os.makedirs(top)
    subprocess.run(["tar", "xzf", tar, "-C", top, "--strip-components=1"], check=True)
    git = ["git", "-c", "user.name=vsriov tests", "-c", "user.email=tests@localhost",
           "-c", "commit.gpgsign=false"]
    subprocess.run(git + ["init", "-q"], cwd=top, check=True)
    subprocess.run(git + ["add", "-A"], cwd=top, check=True)
    subprocess.run(git + ["commit", "-q", "-m", f"{project} {RELEASES[project][0]}"],
                   cwd=top, check=True)
    if patched:
        p = subprocess.run(git + ["am", "-q", "--3way", *series(project)], cwd=top,
                           capture_output=True, text=True)
        assert p.returncode == 0, (f"our series does not apply to {project} "
                                   f"{RELEASES[project][0]}:\n{p.stdout}{p.stderr}")
    return top


def build(tree_dir, package, out):
    """A static binary of package (e.g. ./cmd/sriov) of tree_dir at out."""
    subprocess.run(["go", "build", "-o", out, package], cwd=tree_dir, env=go_env(),
                   check=True, capture_output=True, timeout=1200)
    return out


def prebuild():
    """Build what the tests of the releases (tests/unit/test_upstream_plugins.py)
    need and our series does not change: each release's pinned
    golangci-lint (golang.golangci_lint()), then the packages of other
    modules that the release's build, vet and tests import, compiled into
    Go's build cache from a copy of the release in a temporary folder (they
    sit in the module cache, so their cache keys do not depend on where the
    release is unpacked).  On a fresh machine that is minutes of CPU, which
    scripts/lib.sh starts in the background (nice 19) at the start of
    scripts/test, while the builds and the first unit tests leave a core
    idle.  Holds the lock "upstream-prebuild" throughout, its process group
    in PREBUILD_PGRP; wait_prebuild() waits for it.  A release whose
    tarball is absent is left out."""
    projects = [p for p in sorted(RELEASES) if os.path.exists(tarball(p))]
    with golang.locked("upstream-prebuild"):
        with open(PREBUILD_PGRP, "w") as f:
            f.write(f"{os.getpgrp()}\n")
        try:
            t0 = time.monotonic()
            for project in projects:
                version = makefile_var(release_makefile(project), "GOLANGCI_LINT_VERSION")
                if version:
                    golang.golangci_lint(version)
                    print(f"{time.monotonic() - t0:6.1f} s: golangci-lint {version}", flush=True)
            for project in projects:
                with tempfile.TemporaryDirectory(prefix=f"prebuild-{project}-") as d:
                    subprocess.run(["tar", "xzf", tarball(project), "-C", d,
                                    "--strip-components=1"], check=True)
                    p = subprocess.run(
                        ["go", "list", "-deps", "-test", "-f",
                         "{{if .Module}}{{if not .Module.Main}}{{.ImportPath}}{{end}}{{end}}",
                         "./..."], cwd=d, env=go_env(), capture_output=True, text=True,
                        check=True, timeout=golang.INSTALL_TIMEOUT)
                    subprocess.run(["go", "build", *p.stdout.split()], cwd=d, env=go_env(),
                                   check=True, timeout=golang.INSTALL_TIMEOUT)
                print(f"{time.monotonic() - t0:6.1f} s: {project}'s dependencies compiled",
                      flush=True)
        finally:
            os.unlink(PREBUILD_PGRP)


def wait_prebuild():
    """Wait for a prebuild() that is running (scripts/test's, in the
    background); return the seconds waited.  Once a test waits for it, it
    is what the run waits for: its processes lose their nice 19 (on a
    machine shared with other work they would get almost no CPU)."""
    def unnice():
        try:
            with open(PREBUILD_PGRP) as f:
                os.setpriority(os.PRIO_PGRP, int(f.read()), 0)
        except (OSError, ValueError):
            pass
    with golang.locked("upstream-prebuild", on_busy=unnice) as waited:
        return waited


if __name__ == "__main__":
    if sys.argv[1:] != ["prebuild"]:
        sys.exit("usage (from tests/): python3 -m harness.upstream prebuild")
    os.setpgrp()  # one group with its go commands, for wait_prebuild()
    prebuild()
