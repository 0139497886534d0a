"""The suite's workers take the longest test files first (tests/conftest.py, tests/file_seconds.json)."""

import json
from pathlib import Path
from types import SimpleNamespace

import conftest

ROOT = Path(__file__).resolve().parents[1]


def test_every_timed_file_exists():
    """A renamed or removed file's figure would order nothing; refresh with scripts/test_file_seconds.py."""
    seconds = json.loads(conftest.FILE_SECONDS.read_text())
    assert len(seconds) > 50
    assert all(s >= 0 for s in seconds.values())
    missing = [f for f in seconds if not (ROOT / f).is_file()]
    assert not missing, f"tests/file_seconds.json names files that do not exist: {missing}"


def test_files_are_ordered_longest_first_keeping_each_files_tests_in_order():
    seconds = json.loads(conftest.FILE_SECONDS.read_text())
    by_time = sorted(seconds, key=lambda f: -seconds[f])
    long, short = by_time[0], by_time[len(by_time) // 2]  # a file with no figure (new) goes after both
    assert seconds[long] > seconds[short] > 0
    ids = ["tests/new_file.py::a", f"{short}::a", f"{long}::b", f"{short}::b", f"{long}::a", "tests/new_file.py::b"]
    items = [SimpleNamespace(nodeid=i) for i in ids]
    conftest.pytest_collection_modifyitems(None, items)
    assert [i.nodeid for i in items] == [f"{long}::b", f"{long}::a", f"{short}::a", f"{short}::b", "tests/new_file.py::a", "tests/new_file.py::b"]
