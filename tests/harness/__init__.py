# SPDX-License-Identifier: GPL-2.0-or-later
"""vsriov's test harness: guests under TCG at three levels, QMP, the test
agent, network namespaces.  See docs/testing.md."""
