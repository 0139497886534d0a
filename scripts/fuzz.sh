#!/usr/bin/env bash
# Runs every cargo-fuzz target for $1 seconds each (default 30). Installs cargo-fuzz if missing. The fuzzers need
# nightly-only compiler flags; RUSTC_BOOTSTRAP lets the stable toolchain accept them.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_EACH="${1:-30}"
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "installing cargo-fuzz"
  cargo install -q cargo-fuzz
fi
cd "$ROOT/fuzz"
mkdir -p corpus
for target in $(cargo fuzz list); do
  echo "fuzzing $target for ${SECONDS_EACH}s"
  mkdir -p "corpus/$target"
  RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer none "$target" "corpus/$target" -- \
    -max_total_time="$SECONDS_EACH" -max_len=4096 -print_final_stats=0 2>&1 | tail -n 3
done
