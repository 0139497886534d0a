#!/usr/bin/env bash
# Creates (once) the project's virtual environment and builds the native module into it.
# Sourced by demo.sh and test.sh; safe to run repeatedly (pip and maturin skip what is up to date).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"
stamp="$VENV/.deps-stamp"
if [ ! -f "$stamp" ] || [ "$ROOT/pyproject.toml" -nt "$stamp" ] || [ "$ROOT/scripts/env.sh" -nt "$stamp" ]; then
  "$PY" -m pip install -q --upgrade pip
  "$PY" -m pip install -q "maturin>=1.5,<2" numpy matplotlib rich pytest hypothesis pytest-timeout duckdb
  touch "$stamp"
fi
# Release build: the simulator's hot loops are meant to run optimised, in tests too.
log="$(mktemp)"
if ! ( cd "$ROOT" && "$VENV/bin/maturin" develop --release >"$log" 2>&1 ); then
  cat "$log" >&2; rm -f "$log"; echo "building the native module failed" >&2; exit 1
fi
rm -f "$log"
"$PY" -c "import nearflash" || { echo "nearflash failed to build/import" >&2; exit 1; }
