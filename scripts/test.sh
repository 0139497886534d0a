#!/usr/bin/env bash
# The whole test suite: set up (once), then every Rust test, every Python test, and a short fuzzing run of the
# command decoder and the whole command path (longer by hand: FUZZ_SECONDS=600 bash scripts/test.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/env.sh
echo "== Rust tests"
cargo test --release --workspace --exclude nearflash-py -q
echo "== Python tests"
# Two worker processes (CI has 2 cores); a test file's tests stay in one worker, so module fixtures are built once.
# The longest files go first (tests/conftest.py orders them by tests/file_seconds.json; --no-loadscope-reorder keeps
# that order instead of xdist's, by number of tests).
.venv/bin/python -m pytest -q -n "${PYTEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder
echo "== Fuzzing"
bash scripts/fuzz.sh "${FUZZ_SECONDS:-5}"
