# SPDX-License-Identifier: GPL-2.0-or-later
"""Static Go binaries for guests: built on this machine (CGO off, so they
run in any guest), with the build cache under $VSRIOV_CACHE."""
import os
import subprocess

from harness import paths


def build_static(module_dir, *go_args):
    """Run `go <go_args>` (build or test -c, with -o) in module_dir."""
    env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-mod=mod",
               GOCACHE=os.path.join(paths.CACHE, "go-build"))
    subprocess.run(["go", *go_args], cwd=module_dir, env=env, check=True,
                   capture_output=True, timeout=600)
