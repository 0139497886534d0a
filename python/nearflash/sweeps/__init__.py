"""Parameter sweeps: a grid or list of (preset, overrides, workload) points, each run in a process of its own (a local
pool, or Ray tasks with `ray=`), gathered into one table with a plot per swept axis; resumable.

    result = nearflash.sweep("qd.toml", out="sweep-out", jobs=4)
    result.table            # pandas DataFrame: swept axes, point id, status, error, figures
    result.failed           # the rows of points that failed, with their errors

See `nearflash.sweeps.spec` for the specification's format.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from nearflash.errors import InvalidArgument
from nearflash.sweeps import runner, table
from nearflash.sweeps.spec import Point, Spec, expand, load


@dataclass
class SweepResult:
    spec: Spec
    table: Any  # pandas.DataFrame
    paths: list[Path]
    ran: int  # points run now (the others were finished before)

    @property
    def failed(self) -> Any:
        return self.table[self.table["status"] != "ok"]


def sweep(spec: Union[str, os.PathLike, dict[str, Any], Spec], out: Union[str, os.PathLike] = "sweep-out",
          jobs: Optional[int] = None, ray: Union[bool, str, None] = None, parquet: bool = False,
          timeout_s: float = runner.DEFAULT_POINT_TIMEOUT_S, show_progress: bool = False) -> SweepResult:
    """Runs the sweep `spec` (a TOML file, a dict of the same shape, or an expanded Spec) into `out`.

    jobs: local processes at once (default: the CPU count); ray: True (a local Ray) or a cluster address to run the
    points as Ray tasks instead; show_progress: a bar on a terminal (as the CLI does). Finished points found in
    `out` are not rerun."""
    if not isinstance(spec, (Spec, dict, str, os.PathLike)):
        raise InvalidArgument(f"spec must be a TOML file, a dict or a Spec, got {type(spec).__name__}")
    s = spec if isinstance(spec, Spec) else expand(spec) if isinstance(spec, dict) else load(spec)
    if jobs is not None and (not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1):
        raise InvalidArgument(f"jobs must be a positive integer, got {jobs!r}")
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
        raise InvalidArgument(f"timeout_s must be positive, got {timeout_s!r}")
    if ray is not None and ray is not False and not isinstance(ray, (bool, str)):
        raise InvalidArgument(f"ray must be True or a cluster address, got {ray!r}")
    table.pandas()  # fail before running anything if the table cannot be written
    if parquet:
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise InvalidArgument("Parquet output needs pyarrow: pip install pyarrow") from None
    out_dir = Path(out)
    if out_dir.exists() and not out_dir.is_dir():
        raise InvalidArgument(f"out: {out_dir} exists and is not a directory")
    started_ray = runner.ray_connect(ray if isinstance(ray, str) else None) if ray else False
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        rows = runner.run_points(s.points, out_dir, jobs or os.cpu_count() or 1, use_ray=bool(ray),
                                 timeout_s=timeout_s, json_output=not show_progress)
    finally:
        if started_ray:
            import ray as ray_module

            ray_module.shutdown()
    df = table.frame(s, rows)
    paths = table.write_table(df, out_dir, parquet) + table.plot_axes(s, df, out_dir)
    ran = sum(1 for r in rows.values() if not r.get("resumed"))
    return SweepResult(s, df, paths, ran)


__all__ = ["Point", "Spec", "SweepResult", "expand", "load", "sweep"]
