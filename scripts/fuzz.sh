#!/usr/bin/env bash
# Runs every cargo-fuzz target for $1 seconds each (default 30), starting from seed corpora of valid commands
# (fuzz/seeds.py), and prints the executions per target. Installs cargo-fuzz if missing. The fuzzers need
# nightly-only compiler flags; RUSTC_BOOTSTRAP lets the stable toolchain accept them.
# A longer run by hand: `bash scripts/fuzz.sh 600` (10 minutes per target; device_model is the model-based
# whole-device fuzzer: write/read/trim/flush/reopen/crash against a plain map).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_EACH="${1:-30}"
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "installing cargo-fuzz"
  cargo install -q cargo-fuzz
fi
cd "$ROOT/fuzz"
mkdir -p corpus
python3 seeds.py corpus
summary=""
for target in $(cargo fuzz list); do
  echo "fuzzing $target for ${SECONDS_EACH}s"
  mkdir -p "corpus/$target"
  log="$(mktemp)"
  status=0
  # Inputs that once failed (fuzz/regressions/TARGET, kept in git) run first, every time.
  extra=()
  [ -d "regressions/$target" ] && extra=("regressions/$target")
  RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer none "$target" "corpus/$target" "${extra[@]}" -- \
    -max_total_time="$SECONDS_EACH" -max_len=4096 -timeout=30 -print_final_stats=1 >"$log" 2>&1 || status=$?
  grep -v '^stat::' "$log" | tail -n 3
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
  summary+="$(printf '  %-20s %12s executions in %ss' "$target" "${execs:-?}" "$SECONDS_EACH")"$'\n'
  if [ "$status" -ne 0 ]; then
    cat "$log" | tail -n 40
    rm -f "$log"
    echo "fuzz target $target failed" >&2
    exit "$status"
  fi
  rm -f "$log"
done
echo "fuzzing summary:"
printf '%s' "$summary"
