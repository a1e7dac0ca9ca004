"""Write tests/slow_files.txt from a run's JUnit XML: the test files taking longest, slowest first.

Why: ``./dev test`` hands whole files to two xdist workers (``--dist loadfile``) in the order
tests/conftest.py gives them, which puts these files first (pytest-xdist's own order, by number of
tests, leaves a long file to run alone at the end). Refresh after the suite changes much:

    ./dev test --junitxml=/tmp/kubechain-tests.xml
    .venv/bin/python tests/support/slow_files.py /tmp/kubechain-tests.xml > tests/slow_files.txt
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import defaultdict

#: Files shorter than this keep their collection order (they fill the workers' tails).
MIN_SECONDS = 3.0


def file_seconds(junit_xml: str) -> dict[str, float]:
    """Seconds per test file (``tests/integration/test_x.py``) summed over its test cases."""
    seconds: defaultdict[str, float] = defaultdict(float)
    for case in ET.parse(junit_xml).iter("testcase"):
        parts = case.get("classname", "").split(".")
        for i, part in enumerate(parts):
            if part.startswith("test_"):
                seconds["/".join(parts[:i + 1]) + ".py"] += float(case.get("time") or 0)
                break
    return dict(seconds)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    print("# Test files by seconds in one run, slowest first (tests/support/slow_files.py writes this;")
    print("# tests/conftest.py starts them first). A file not listed runs after these, in collection order.")
    for path, secs in sorted(file_seconds(argv[1]).items(), key=lambda row: -row[1]):
        if secs >= MIN_SECONDS:
            print(f"{secs:7.1f} {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
