"""One sweep point, run in a process of its own: `python -m nearflash.sweeps` says it has started (`STARTED`), reads
the point (JSON) on stdin and writes its result row (JSON) on stdout. A point that fails reports its error in the
row; a crash of the process is reported by the runner from the exit status and stderr."""

from __future__ import annotations

import json
import sys
import traceback
from typing import Any

from nearflash.sweeps.spec import Point

#: Columns every row has, in the table's order after the swept axes.
METRICS = ["elapsed_s", "iops", "bandwidth_mb_s", "read_iops", "read_p50_us", "read_p99_us", "write_iops",
           "write_p50_us", "write_p99_us", "waf", "gc_runs", "energy_j", "sim_wall_s", "sim_ios_per_s"]


def metrics(result: dict[str, Any]) -> dict[str, Any]:
    """The table's figures from a bench result (virtual-time figures, then the simulator's own wall time)."""
    rep = result["report"]
    ops = {k: v for k, v in rep.ops.items() if k in ("read", "write")}
    row: dict[str, Any] = {
        "elapsed_s": rep.elapsed_s,
        "iops": sum(o.iops for o in ops.values()),
        "bandwidth_mb_s": sum(o.bandwidth_mb_s for o in ops.values()),
        "waf": rep.waf,
        "gc_runs": rep.ftl["gc_runs"],
        "energy_j": rep.total_energy_j,
        "sim_wall_s": result["wall_s"],
        "sim_ios_per_s": result["sim_ios_per_s"],
    }
    for name in ("read", "write"):
        o = ops.get(name)
        row[f"{name}_iops"] = o.iops if o else None
        row[f"{name}_p50_us"] = o.p50_us if o else None
        row[f"{name}_p99_us"] = o.p99_us if o else None
    return {k: row[k] for k in METRICS}


def run(point: Point) -> dict[str, Any]:
    """Runs `point` here; returns its row ({"status": "ok", ...figures} or {"status": "error", "error": ...})."""
    from nearflash.device import Device
    from nearflash.workload import run_bench

    try:
        job = point.job()
        with Device(None, preset=point.preset, seed=point.seed, materialise=job.data,
                    overrides=dict(point.overrides)) as dev:
            result = run_bench(dev, job, json_output=True)
        return {"status": "ok", "error": "", **metrics(result)}
    except Exception as e:  # noqa: BLE001  (any failure of a point is reported in its row; the sweep goes on)
        return {"status": "error", "error": f"{type(e).__name__}: {e}".strip(), **{m: None for m in METRICS}}


#: The first line a point's process writes, once its imports are done: the runner's timeout for the point counts
#: from here (start-up on a loaded machine is the machine's, not the point's).
STARTED = "nearflash-sweep-point: started"


def main() -> int:
    import nearflash.device  # noqa: F401  (what `run` needs, imported before the start is announced)
    import nearflash.workload  # noqa: F401

    print(STARTED, flush=True)
    try:
        point = Point.from_json(sys.stdin.read())
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        return 2
    print(json.dumps(run(point)))
    return 0
