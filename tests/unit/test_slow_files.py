"""tests/slow_files.txt, which orders the files the xdist workers get: written from JUnit XML, read
back as ranks (slowest first), and the committed listing names test files that exist."""

from __future__ import annotations

from pathlib import Path

from conftest import SLOW_FILES, slow_file_ranks
from support.slow_files import file_seconds

JUNIT = """<testsuites><testsuite>
<testcase classname="tests.integration.test_a" name="t1" time="2.5"/>
<testcase classname="tests.integration.test_a" name="t2" time="1.5"/>
<testcase classname="tests.unit.test_b.TestThing" name="t3" time="7"/>
</testsuite></testsuites>"""


def test_file_seconds_sums_a_files_cases(tmp_path: Path) -> None:
    xml = tmp_path / "run.xml"
    xml.write_text(JUNIT)
    assert file_seconds(str(xml)) == {"tests/integration/test_a.py": 4.0, "tests/unit/test_b.py": 7.0}


def test_ranks_follow_the_listing(tmp_path: Path) -> None:
    listing = tmp_path / "slow.txt"
    listing.write_text("# comment\n  7.0 tests/unit/test_b.py\n  4.0 tests/integration/test_a.py\n\n")
    assert slow_file_ranks(listing) == {"tests/unit/test_b.py": 0, "tests/integration/test_a.py": 1}
    assert slow_file_ranks(tmp_path / "missing.txt") == {}


def test_the_listing_names_existing_test_files() -> None:
    """A file renamed or removed since the listing was written only loses its place (it runs with the
    unlisted ones), so a few may be gone; most must still be there or the ordering means nothing."""
    ranks = slow_file_ranks(SLOW_FILES)
    assert len(ranks) >= 20, "tests/slow_files.txt lists too few files: regenerate it (tests/support/slow_files.py)"
    root = SLOW_FILES.parent.parent
    gone = [path for path in ranks if not (root / path).is_file()]
    assert len(gone) <= len(ranks) // 10, f"regenerate tests/slow_files.txt (tests/support/slow_files.py): {gone}"
