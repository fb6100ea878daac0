# SPDX-License-Identifier: GPL-2.0-or-later
"""Upstream SR-IOV CNI and SR-IOV network device plugin releases, unpacked
from the tarballs in ../shared/upstream/ (the Go module proxy serves their
dependencies but not the projects), optionally with our series applied.

A test that needs a release calls tree(); where the tarball is absent it is
skipped with a sentence that says which file and where it was looked for."""
import os
import shutil
import subprocess

import pytest

from harness import paths

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
    return dict(os.environ, GOFLAGS="-mod=mod", CGO_ENABLED="0",
                GOCACHE=os.path.join(paths.CACHE, "go-build"),
                GOTOOLCHAIN="local")


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
