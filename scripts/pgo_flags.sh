# Sourced by scripts/pgo_config.sh (the flags every release build gets) and scripts/pgo.sh (which checks a build made
# with exactly these flags answers as the instrumented one did).
# pgo_flags PROFILE: rustc's flags for a build optimised with PROFILE, one per line.
#  -Cprofile-use: the profile (inlining, block order, hot/cold function sections).
#  -enable-split-machine-functions: LLVM also moves the blocks the profile never saw run out of each hot function
#   into a cold section, so the hot code packs into fewer instruction-cache lines (docs/validation.md, "Twenty-fifth
#   step": L1 instruction misses a read 31 -> 9, a GC-steady write 149 -> 76). Layout only: every answer is the same.
pgo_flags() {
  printf '%s\n' "-Cprofile-use=$1" "-Cllvm-args=-enable-split-machine-functions"
}
