# SPDX-License-Identifier: GPL-2.0-or-later
"""Our series as upstream's reviewers would try them: for the SR-IOV CNI
and the SR-IOV network device plugin, the release (harness/upstream.py)
with our series applied builds, passes `go vet` and the project's own
golangci-lint (the version its Makefile pins, its .golangci.yml), and its
own unit tests (its Makefile's `test` target: every package but the
mocks) pass before and after the series, with more passing after.

The counts go to $VSRIOV_ARTIFACTS/upstream-plugins.json and are printed
(pytest -s shows them).  For the CI's time: the trees are unpacked under
$VSRIOV_CACHE/upstream-trees at the same paths each run, so that Go's
build cache and golangci-lint's cache ($VSRIOV_CACHE/golangci-lint-cache)
serve the next run; golangci-lint itself is installed, when missing, in
$VSRIOV_GOTOOLS/golangci-lint-<version>/ (default $VSRIOV_CACHE/gotools)
with `go install`; and the counts of a release without the series, which
depend only on its tarball, Go and the test command, are kept in
upstream-trees too and run again when one of those changes.  On a fresh
machine, scripts/test builds the golangci-lints and compiles the releases'
dependencies in the background while it builds the rest and runs the
first unit tests (harness/upstream.py's prebuild()); these tests wait for
that first."""
import hashlib
import json
import os
import re
import subprocess

import pytest

from harness import golang, paths, upstream

pytestmark = pytest.mark.slow

TREES = os.path.join(paths.CACHE, "upstream-trees")
LINT_CACHE = os.path.join(paths.CACHE, "golangci-lint-cache")
COUNTS = os.path.join(paths.ARTIFACTS, "upstream-plugins.json")
# The Makefiles' `test` targets give each package 15 s (device plugin) or
# 30 s (CNI); this machine has 2 cores and builds under load: more room.
TEST_TIMEOUT = "300s"
# Ginkgo's summary of a suite, once its colours are removed.
GINKGO_SUMMARY = re.compile(r"(\d+) Passed \| (\d+) Failed \| (\d+) Pending \| (\d+) Skipped")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def go(tree_dir, *args, timeout=1200, env=None):
    return subprocess.run(["go", *args], cwd=tree_dir, env=env or upstream.go_env(),
                          capture_output=True, text=True, timeout=timeout)


class Trees:
    def __init__(self, project):
        self.project = project
        self.after = upstream.tree(project, os.path.join(TREES, "after"))

    def before(self):
        """The release without the series, unpacked on first use."""
        return upstream.tree(self.project, os.path.join(TREES, "before"), patched=False)


@pytest.fixture(scope="module", params=sorted(upstream.RELEASES))
def trees(request):
    """The release of one project as it is and with our series."""
    waited = upstream.wait_prebuild()
    if waited >= 1:
        print(f"\nwaited {waited:.0f} s for scripts/test's prebuild of the Go tools and "
              f"dependencies ({golang.GOTOOLS}/prebuild.log)")
    return Trees(request.param)


def makefile_var(tree_dir, name):
    with open(os.path.join(tree_dir, "Makefile")) as f:
        value = upstream.makefile_var(f.read(), name)
    assert value, f"{name} is not set in {tree_dir}/Makefile"
    return value


def netns_names():
    try:
        return set(os.listdir("/run/netns"))
    except FileNotFoundError:
        return set()


def unit_tests(tree_dir):
    """Run the project's unit tests as its Makefile's `test` target does;
    return (Ginkgo specs passed, failed; Go test functions passed, failed)
    and the output."""
    pkgs = [p for p in go(tree_dir, "list", "./...").stdout.split() if not re.search(r"/mocks$", p)]
    made_before = netns_names()
    try:
        p = go(tree_dir, "test", "-count=1", "-v", "-timeout", TEST_TIMEOUT, *pkgs)
    finally:
        # sriov-cni's specs make network namespaces (containernetworking's
        # testutils.NewNS: cnitest-<uuid>) and leave some behind.
        for ns in sorted(netns_names() - made_before):
            if ns.startswith("cnitest-"):
                subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    out = ANSI.sub("", p.stdout + p.stderr)
    specs = [tuple(map(int, m)) for m in GINKGO_SUMMARY.findall(out)]
    counts = {
        "specs_passed": sum(s[0] for s in specs),
        "specs_failed": sum(s[1] for s in specs),
        "tests_passed": len(re.findall(r"^--- PASS: ", out, re.M)),
        "tests_failed": len(re.findall(r"^--- FAIL: ", out, re.M)),
        "exit": p.returncode,
    }
    return counts, out


def release_counts(trees):
    """unit_tests() of the release without the series, from the cache when
    the tarball, Go and the command are those it was made with."""
    with open(upstream.tarball(trees.project), "rb") as f:
        tarball_sha = hashlib.sha256(f.read()).hexdigest()
    go_version = go(trees.after, "env", "GOVERSION").stdout.strip()
    key = f"{tarball_sha} {go_version} go test -count=1 -v -timeout {TEST_TIMEOUT}"
    cache = os.path.join(TREES, f"{trees.project}-release-tests.json")
    if os.path.exists(cache):
        with open(cache) as f:
            cached = json.load(f)
        if cached["key"] == key:
            return dict(cached["counts"], cached=True), "(cached)"
    counts, out = unit_tests(trees.before())
    if counts["exit"] == 0:
        with open(cache, "w") as f:
            json.dump({"key": key, "counts": counts}, f)
    return counts, out


def record(project, key, value):
    data = {}
    if os.path.exists(COUNTS):
        with open(COUNTS) as f:
            data = json.load(f)
    data.setdefault(project, {})[key] = value
    os.makedirs(os.path.dirname(COUNTS), exist_ok=True)
    with open(COUNTS, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)


def test_series_applies_with_its_cover_letter(trees):
    """The series is `git am`ed (tree() fails otherwise), one commit a
    patch, and its cover letter names every patch."""
    patches = upstream.series(trees.project)
    log = subprocess.run(["git", "log", "--format=%s", "HEAD"], cwd=trees.after,
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert len(log) == len(patches) + 1, log
    cover = os.path.join(os.path.dirname(patches[0]), "0000-cover-letter.patch")
    with open(cover) as f:
        text = f.read()
    assert "*** SUBJECT HERE ***" not in text and "*** BLURB HERE ***" not in text
    for subject in log[:-1]:
        assert subject in text, f"the cover letter does not name {subject!r}"


def test_build_and_vet(trees):
    for args in (["build", "./..."], ["vet", "./..."]):
        p = go(trees.after, *args)
        assert p.returncode == 0, f"go {' '.join(args)} in {trees.project}:\n{p.stdout}{p.stderr}"


def test_golangci_lint_with_the_projects_configuration(trees):
    version = makefile_var(trees.after, "GOLANGCI_LINT_VERSION")
    assert os.path.exists(os.path.join(trees.after, ".golangci.yml"))
    lint = golang.golangci_lint(version)
    env = dict(upstream.go_env(), GOLANGCI_LINT_CACHE=LINT_CACHE)
    p = subprocess.run([lint, "run"], cwd=trees.after, env=env, capture_output=True, text=True,
                       timeout=1800)
    record(trees.project, "golangci-lint", {"version": version, "exit": p.returncode,
                                            "output": p.stdout.strip()})
    print(f"\n{trees.project}: golangci-lint {version}: exit {p.returncode} {p.stdout.strip()}")
    assert p.returncode == 0, f"golangci-lint {version}:\n{p.stdout}{p.stderr}"


def test_upstream_unit_tests_pass_before_and_after(trees):
    before, out_before = release_counts(trees)
    after, out_after = unit_tests(trees.after)
    record(trees.project, "unit tests", {"before": before, "after": after})
    print(f"\n{trees.project} {upstream.RELEASES[trees.project][0]} unit tests: "
          f"before the series {before['specs_passed']} specs and {before['tests_passed']} "
          f"test functions passed{' (cached)' if before.get('cached') else ''}, "
          f"after {after['specs_passed']} and {after['tests_passed']}")
    assert before["exit"] == 0 and before["specs_failed"] == before["tests_failed"] == 0, out_before
    assert after["exit"] == 0 and after["specs_failed"] == after["tests_failed"] == 0, out_after
    assert after["specs_passed"] > before["specs_passed"], "the series adds no passing test"
    assert after["tests_passed"] >= before["tests_passed"]
