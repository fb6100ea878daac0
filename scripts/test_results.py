#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Merge the junit files of pytest runs made side by side (scripts/test)
into one, print one summary line for all of them, and exit with their
worst status.

    test_results.py --seconds S --out JUNIT STATUS:JUNIT...

STATUS is each run's pytest exit status.  5 (no test collected) counts
as success unless every run says 5 (a -k that selects tests of only one
suite); a run that wrote no junit file (it crashed) fails the whole.
"""
import argparse
import os
import sys
import xml.etree.ElementTree as ET


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("runs", nargs="+", metavar="STATUS:JUNIT")
    a = ap.parse_args()
    merged = ET.Element("testsuites")
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    statuses = []
    for run in a.runs:
        status, path = run.split(":", 1)
        status = int(status)
        if not os.path.exists(path):
            print(f"test_results: {path} missing (that pytest exited {status})",
                  file=sys.stderr)
            status = status or 3
        else:
            root = ET.parse(path).getroot()
            for suite in (root.iter("testsuite")):
                merged.append(suite)
                for k in counts:
                    counts[k] += int(suite.get(k, 0))
        statuses.append(status)
    ET.ElementTree(merged).write(a.out, encoding="utf-8", xml_declaration=True)

    failed = counts["failures"] + counts["errors"]
    passed = counts["tests"] - failed - counts["skipped"]
    words = [f"{passed} passed"]
    for n, k in ((counts["failures"], "failed"), (counts["errors"], "errors"),
                 (counts["skipped"], "skipped")):
        if n:
            words.append(f"{n} {k}")
    m, s = divmod(a.seconds, 60)
    print(f"========== {', '.join(words)} in {a.seconds} s ({m} min {s} s), "
          f"{len(a.runs)} runs side by side ==========")

    if all(s == 5 for s in statuses):
        return 5
    bad = [s for s in statuses if s not in (0, 5)]
    return max(bad) if bad else 0


if __name__ == "__main__":
    sys.exit(main())
