# SPDX-License-Identifier: GPL-2.0-or-later
"""harness/prom.py, the strict parser test_l1_metrics.py and
test_l1_systemd.py read `vdpa-poolctl metrics` with, can fail."""
import pytest

from harness.prom import parse


def test_parser_refuses_what_the_format_does_not_allow():
    """The parser can fail: each of these breaks a rule it checks."""
    good = ("# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1\"} 3\n"
            "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\n"
            "h_sum 3\nh_count 2\n")
    parse(good)
    for bad in (good.replace("# HELP h H.\n", "# HELP a_total again\n# HELP h H.\n"),
                good.replace("h_count 2\n", "h_count 2\na_total{x=\"2\"} 1\n"),
                good.replace('le="+Inf"} 2', 'le="+Inf"} 0'),
                good.replace('a_total{x="1"}', 'a_total{x="a\\tb"}'),
                good.replace('a_total{x="1"}', 'a_total{x="1",x="2"}'),
                good.replace("a_total{x=\"1\"} 3\n", "a_total{x=\"1\"} 3\na_total{x=\"1\"} 4\n"),
                good.replace('le="1"} 1', 'le="1"} 3'),
                good[:-1]):
        with pytest.raises(AssertionError):
            parse(bad)
