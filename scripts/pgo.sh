#!/usr/bin/env bash
# Remakes pgo/nearflash.profdata.gz, the profile that release builds are optimised with (profile-guided optimisation:
# rustc's -Cprofile-use; scripts/env.sh turns it on where the profile was made by the same rustc).
# Run it after changing the simulator's hot paths (the event loop, the array, the FTL, the host and controller
# bookings): functions changed since the profile was made are compiled without it, so a stale profile costs speed,
# never correctness (the optimiser only reorders and inlines; every result is the same bit for bit).
#
# What it does: builds the `simspeed` and `serve_train` examples instrumented (-Cprofile-generate, its own target
# directory), runs simspeed's workloads at short sizes (the simulator's own loop: reads, sequential reads, GC-steady
# writes, with and without data) and serve_train (the NBD plugin's path: `Shared::io` driven by 32 threads of 4 KiB
# random reads on a reopened filled image, as fio drives nbdkit in benches/nbd_fio.py, plus a few writes, flushes,
# trims and a realtime run), merges the raw profiles with the toolchain's llvm-profdata (rustup's llvm-tools
# component, installed if missing), then builds simspeed with the new profile and checks that it answers the
# training cases exactly as the instrumented build did (CI builds without the profile, so this is where a build with it
# is checked; a difference leaves the tracked profile as it was), and records which rustc made it
# (pgo/rustc-version). Takes about six minutes on two cores. The training runs are examples, not tests: a test
# binary's symbols carry other crate hashes than the plugin's and the Python module's builds, so its counts would
# match none of their functions.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
host="$(rustc -vV | sed -n 's/^host: //p')"
profdata="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"
if [ ! -x "$profdata" ]; then
  rustup component add llvm-tools >/dev/null
fi
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
# Its own target directory and no profile in use: the instrumented build must not see the old profile.
RUSTFLAGS="-Cprofile-generate=$raw" cargo build --release -q -p nearflash-core --example simspeed \
  -p nearflash-workloads --example serve_train --target-dir "$ROOT/target/pgo-generate"
# simspeed's training cases: I/Os, then its arguments.
cases=(
  "200000 cosmos-plus 0.9 0"                        # 4 KiB random reads, timing-only
  "50000 cosmos-plus 0.9 1"                         # the same with data
  "20000 cosmos-plus 0.9 2"                         # 128 KiB sequential reads
  "50000 cosmos-plus 0.9 3 blocks_per_plane=128"    # GC-steady 4 KiB random writes
  "20000 cosmos-plus 0.9 4 blocks_per_plane=128"    # the same with data
)
# Each case's answers (IOPS, bandwidth, latencies, WAF, busy dies) without its wall-clock figures.
answers() {  # simspeed binary, then LLVM_PROFILE_FILE
  local case
  for case in "${cases[@]}"; do
    read -r ios args <<<"$case"
    # shellcheck disable=SC2086 # args: simspeed's arguments, split on purpose
    LLVM_PROFILE_FILE="$2" SIMSPEED_IOS="$ios" "$1" $args
  done | sed -E 's/ +[0-9]+ sim IO\/s wall \|/ |/; s/ \| precondition [0-9.]+s$//'
}
answers "$ROOT/target/pgo-generate/release/examples/simspeed" "$raw/%p-%m.profraw" > "$raw/answers-instrumented"
# The served device (crates/nearflash-workloads/examples/serve_train.rs): 200,000 reads at depth 32, pace none.
LLVM_PROFILE_FILE="$raw/%p-%m.profraw" "$ROOT/target/pgo-generate/release/examples/serve_train" 200000
"$profdata" merge -o "$raw/merged.profdata" "$raw"/*.profraw
# The profile only changes how the code is laid out and inlined, never an answer: check that on a build that uses it
# (CI builds without the profile, so this is where a build with it is checked).
# shellcheck source=scripts/pgo_flags.sh
source "$ROOT/scripts/pgo_flags.sh"
RUSTFLAGS="$(pgo_flags "$raw/merged.profdata" | paste -sd' ' -)" cargo build --release -q -p nearflash-core --example simspeed \
  --target-dir "$ROOT/target/pgo-use"
answers "$ROOT/target/pgo-use/release/examples/simspeed" /dev/null > "$raw/answers-optimised"
if ! diff -u "$raw/answers-instrumented" "$raw/answers-optimised"; then
  echo "pgo.sh: the build with the new profile answers differently from the instrumented one (above)" >&2
  exit 1  # the tracked profile is left as it was
fi
cat "$raw/answers-optimised"
mkdir -p pgo
gzip -9 -n -c "$raw/merged.profdata" > pgo/nearflash.profdata.gz  # -n: the same profile, the same bytes
rustc -vV > pgo/rustc-version
echo "wrote pgo/nearflash.profdata.gz ($(stat -c %s pgo/nearflash.profdata.gz) bytes) for $(head -1 pgo/rustc-version)"
