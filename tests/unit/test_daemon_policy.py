# SPDX-License-Identifier: GPL-2.0-or-later
"""The pools' policy as the real daemon applies it through its socket (the
daemon and its fixture are test_daemon.py's): pool a of its configuration
lets clients choose MACs (mac-policy = any), pool b has the default policy,
locked."""
import os

import pytest

from harness import vpd
from unit import test_daemon

daemon = test_daemon.daemon


def claim_one(c, pool):
    ((vf, fd),) = c.claim(pool, 1)
    os.close(fd)
    return vf


def test_mac_policy_defaults_to_locked(daemon):
    with daemon.client() as c:
        vf = claim_one(c, "b")
        with pytest.raises(vpd.DaemonError) as e:
            c.set_attrs(vf["HANDLE"], mac="02:00:00:00:00:44")
        assert e.value.errno == 22
        assert e.value.message == "pool 'b' does not let clients change VF MACs"
        # Its own MAC, the daemon's, it may set (as QEMU does with the rest).
        out = c.set_attrs(vf["HANDLE"], mac=vf["MAC"], link_state=1)
        assert (out["MAC"], out["LINK_STATE"]) == (vf["MAC"], 1)
