#!/usr/bin/env bash
# The main job: set up (once) and run a short benchmark on the embedded default device (cosmos-plus, in memory).
# Extra arguments go to `nearflash bench` (e.g. --rw randwrite --fill random, --preset samsung-970pro).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/env.sh"
exec "$ROOT/.venv/bin/nearflash" bench --ios 200000 "$@"
