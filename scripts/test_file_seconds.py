"""Writes tests/file_seconds.json, the seconds each pytest file took, from the output of a run with --durations=0
(setup, call and teardown of every test, summed per file). tests/conftest.py orders the files by it, longest first,
so that the suite's workers (pytest-xdist, --dist loadfile) never start a long file last.

    .venv/bin/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=0 > pytest.log
    .venv/bin/python scripts/test_file_seconds.py pytest.log
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "tests" / "file_seconds.json"
LINE = re.compile(r"^\s*([0-9.]+)s (setup|call|teardown)\s+(\S+?\.py)::")


def file_seconds(log: str) -> dict[str, float]:
    seconds: dict[str, float] = defaultdict(float)
    for line in log.splitlines():
        m = LINE.match(line)
        if m:
            seconds[m.group(3)] += float(m.group(1))
    return {f: round(s, 1) for f, s in sorted(seconds.items(), key=lambda fs: -fs[1])}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    seconds = file_seconds(Path(argv[0]).read_text())
    if not seconds:
        print(f"{argv[0]}: no --durations=0 lines", file=sys.stderr)
        return 1
    OUT.write_text(json.dumps(seconds, indent=0) + "\n")
    print(f"{OUT}: {len(seconds)} files, {sum(seconds.values()):.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
