"""Instructions per simulated I/O for the cases of ``benches/simspeed.py``, counted by valgrind's callgrind.

Wall-clock rates move with the machine's load; instruction counts do not, so A/B comparisons of the simulator's own
code (e.g. a build of main against a branch) use these. The case's set-up (preconditioning, the written span) runs
uninstrumented; callgrind is switched on (``callgrind_control -i on``) once it is done and counts only inside
``nearflash_core::bench::run``, over one run of ``--ios`` I/Os (seed 2, as simspeed's first measured run).

``.venv/bin/python benches/simspeed_instructions.py [--only 4K] [--ios 20000] [--preset cosmos-plus]``
Put another build's package first with PYTHONPATH to measure it. Needs ``valgrind`` (Debian: valgrind). The set-up
runs about 4x slower than natively (the 512 GiB GC-steady write case: a few minutes); the counted run about 50x.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
import simspeed  # noqa: E402

COUNTED = "nearflash_core::bench::run"


def child(preset: str, name: str, ios: int, go: Path) -> None:
    """Runs under valgrind: sets the case up, says READY, waits for `go`, runs the counted bench."""
    c = simspeed.with_page_size(next(c for c in simspeed.cases(False) if c.name == name), preset)
    dev, span, _ = simspeed.prepare(preset, c, False, int(2.0 * 2**30))
    print("READY", flush=True)
    while not go.exists():
        time.sleep(0.2)
    r = dev.bench(c.rw, c.bs, c.qd, 1, ios, (0, span), 2, False)
    op = r["report"].op("read" if "read" in c.rw else "write")
    print(json.dumps({"iops": op.iops, "p99_us": op.p99_us, "waf": r["report"].waf}), flush=True)


def count(preset: str, name: str, ios: int) -> dict:
    """Instructions executed inside the bench loop for `ios` I/Os of case `name`, and the run's virtual figures."""
    with tempfile.TemporaryDirectory(prefix="simspeed-ir-") as d:
        out, go = Path(d) / "callgrind.out", Path(d) / "go"
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no",
               f"--toggle-collect={COUNTED}", f"--callgrind-out-file={out}",
               sys.executable, __file__, "--child", name, "--preset", preset, "--ios", str(ios), "--go", str(go)]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert p.stdout is not None
        for line in p.stdout:
            if line.strip() == "READY":
                break
        else:
            raise RuntimeError(f"{name}: set-up failed: {p.stderr.read() if p.stderr else ''}")
        subprocess.run(["callgrind_control", "-i", "on", str(p.pid)], check=True, capture_output=True)
        go.touch()
        rest, err = p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"{name}: exit {p.returncode}: {err[-2000:]}")
        totals = re.search(r"^totals:\s+(\d+)", out.read_text(), re.M)
        if not totals:
            raise RuntimeError(f"{name}: no totals in {out}")
        ir = int(totals.group(1))
        return {"case": name, "ios": ios, "instructions": ir, "per_io": ir / ios, "virtual": json.loads(rest.strip().splitlines()[-1])}


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="cosmos-plus")
    ap.add_argument("--ios", type=int, default=20_000, help="I/Os counted per case")
    ap.add_argument("--only", nargs="*", help="cases whose name contains one of these words")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--go", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.ios <= 0:
        ap.error(f"--ios must be positive, got {args.ios}")
    if args.child:
        child(args.preset, args.child, args.ios, args.go)
        return 0
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            ap.error(f"{tool} not found (Debian package: valgrind)")
    for c in simspeed.cases(False):
        if args.only and not any(o.lower() in c.name.lower() for o in args.only):
            continue
        r = count(args.preset, c.name, args.ios)
        print(f"{simspeed.with_page_size(c, args.preset).name:52} {r['per_io']:>10,.0f} instructions per I/O   {json.dumps(r['virtual'])}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
