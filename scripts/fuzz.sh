#!/usr/bin/env bash
# Runs every cargo-fuzz target for $1 seconds each (default 30), starting from seed corpora of valid commands
# (fuzz/seeds.py), and prints the executions per target. Installs cargo-fuzz if missing. The fuzzers need
# nightly-only compiler flags; RUSTC_BOOTSTRAP lets the stable toolchain accept them.
# A longer run by hand: `bash scripts/fuzz.sh 600` (10 minutes per target; device_model is the model-based
# whole-device fuzzer: write/read/trim/flush/reopen/crash against a plain map).
#
# Short runs (under a minute per target, the test suite's smoke run) build without a sanitizer and with 16 codegen
# units, and run FUZZ_JOBS targets at once (default: one per core): they check that the kept regressions and a few
# seconds of mutation find nothing. Long runs build with AddressSanitizer, which still matters in the `unsafe`
# blocks (memory-mapped stores, SIMD kernels, the programs' VM) where an out-of-bounds access would not panic.
# FUZZ_SANITIZER=none|address overrides the choice; short runs build at opt-level 0 (FUZZ_OPT_LEVEL overrides).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_EACH="${1:-30}"
if [ "$SECONDS_EACH" -lt 60 ]; then
  SANITIZER="${FUZZ_SANITIZER:-none}"
  BUILD=(--sanitizer "$SANITIZER" --codegen-units 16)
  JOBS="${FUZZ_JOBS:-$(nproc)}"
  # The smoke run replays the kept regressions and seeds and mutates for seconds: it needs the checks (debug
  # assertions, overflow checks, coverage), not optimisation. Its cold build is most of the phase: at opt-level 0
  # it takes half the CPU of opt-level 1 (docs/development.md); every seed and regression still runs. The fuzzers
  # have their own target directory, so nothing else rebuilds.
  export CARGO_PROFILE_RELEASE_OPT_LEVEL="${FUZZ_OPT_LEVEL:-0}"
else
  SANITIZER="${FUZZ_SANITIZER:-address}"
  BUILD=(--sanitizer "$SANITIZER")
  JOBS="${FUZZ_JOBS:-1}"
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "installing cargo-fuzz"
  # A debug build: cargo-fuzz only drives cargo, and its release build costs CI half a minute more CPU.
  cargo install -q --debug cargo-fuzz
fi
cd "$ROOT/fuzz"
export RUSTC_BOOTSTRAP=1
mkdir -p corpus
python3 seeds.py corpus
echo "building the fuzz targets (sanitizer: $SANITIZER)"
cargo fuzz build "${BUILD[@]}"
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT

# fuzz_one TARGET: one target's run, its output in $logs/TARGET.log and its exit status in $logs/TARGET.status.
fuzz_one() {
  local target="$1" status=0
  mkdir -p "corpus/$target"
  # Inputs that once failed (fuzz/regressions/TARGET, kept in git) run first, every time.
  local extra=()
  [ -d "regressions/$target" ] && extra=("regressions/$target")
  cargo fuzz run "${BUILD[@]}" "$target" "corpus/$target" "${extra[@]}" -- \
    -max_total_time="$SECONDS_EACH" -max_len=4096 -timeout=30 -print_final_stats=1 >"$logs/$target.log" 2>&1 \
    || status=$?
  echo "$status" >"$logs/$target.status"
}

targets=($(cargo fuzz list))
echo "fuzzing ${#targets[@]} targets for ${SECONDS_EACH}s each, $JOBS at a time"
running=0
for target in "${targets[@]}"; do
  fuzz_one "$target" &
  running=$((running + 1))
  if [ "$running" -ge "$JOBS" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait

summary=""
failed=""
for target in "${targets[@]}"; do
  echo "fuzzed $target for ${SECONDS_EACH}s"
  grep -v '^stat::' "$logs/$target.log" | tail -n 3
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$logs/$target.log" | tail -n 1)"
  summary+="$(printf '  %-20s %12s executions in %ss' "$target" "${execs:-?}" "$SECONDS_EACH")"$'\n'
  if [ "$(cat "$logs/$target.status")" -ne 0 ]; then
    tail -n 40 "$logs/$target.log"
    failed+=" $target"
  fi
done
echo "fuzzing summary:"
printf '%s' "$summary"
if [ -n "$failed" ]; then
  echo "fuzz targets failed:$failed" >&2
  exit 1
fi
