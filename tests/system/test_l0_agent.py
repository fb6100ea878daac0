# SPDX-License-Identifier: GPL-2.0-or-later
"""Level 0: the test agent answers a command whatever the pause before it.

The agent once waited for the next command with a 1 s deadline; a command
arriving as that wait timed out was now and then never seen (a command
sent 1.0 s after the previous answer hung 3 times in 4; CI of 86db72f lost
a Level 1 that way).  The pause here is the stimulus, not a wait for
something: each command must be answered, at once."""
import time

import pytest

pytestmark = pytest.mark.slow


def test_command_after_a_one_second_pause_is_answered(guest_factory):
    g = guest_factory("agentidle")
    for pause in (1.0, 1.0, 1.0, 1.0, 0.5, 2.0):
        g.check("true")
        time.sleep(pause)
        # (an unanswered command raises AgentNoAnswer after 15 + 30 s)
        assert g.run("echo answered", timeout=15).stdout.strip() == "answered"
