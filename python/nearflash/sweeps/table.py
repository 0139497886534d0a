"""The sweep's results as one table (pandas: CSV always, Parquet where pyarrow is installed) and a plot per swept
axis (IOPS and p99 latency against the axis, one line per combination of the other axes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nearflash.errors import InvalidArgument
from nearflash.sweeps.point import METRICS
from nearflash.sweeps.spec import Spec

#: At most this many lines in one plot; beyond it the other axes are averaged over.
MAX_LINES = 8


def pandas() -> Any:
    try:
        import pandas as pd
    except ImportError:
        raise InvalidArgument("sweeps gather their results with pandas: pip install 'nearflash[sweep]'") from None
    return pd


def frame(spec: Spec, rows: dict[str, dict[str, Any]]) -> Any:
    """One row per point in the specification's order: the swept axes, the point id, status, error, figures."""
    pd = pandas()
    records = []
    for p in spec.points:
        r = rows.get(p.id, {"status": "not run", "error": ""})
        records.append({**{a: p.axes.get(a) for a in spec.axes}, "point": p.id, "preset": p.preset,
                        "status": r.get("status"), "error": r.get("error", ""),
                        **{m: r.get(m) for m in METRICS}})
    return pd.DataFrame.from_records(records, columns=[*spec.axes, "point", "preset", "status", "error", *METRICS])


def write_table(df: Any, out: Path, parquet: bool) -> list[Path]:
    paths = [out / "results.csv"]
    df.to_csv(paths[0], index=False)
    if parquet:
        try:
            df.to_parquet(out / "results.parquet", index=False)
        except ImportError as e:
            raise InvalidArgument(f"Parquet needs pyarrow (pip install pyarrow): {e}") from None
        paths.append(out / "results.parquet")
    return paths


def _latency_column(df: Any) -> str:
    return "read_p99_us" if df["read_p99_us"].notna().any() else "write_p99_us"


def plot_axes(spec: Spec, df: Any, out: Path) -> list[Path]:
    """`plot_<axis>.png` for every axis with more than one value, from the points that succeeded."""
    ok = df[df["status"] == "ok"]
    paths: list[Path] = []
    swept = [a for a in spec.axes if len(ok[a].dropna().unique()) >= 2]
    if not swept:
        return paths
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lat = _latency_column(ok)
    for axis in swept:
        others = [a for a in spec.axes if a != axis and ok[a].nunique(dropna=False) > 1]
        fig, (ax_iops, ax_lat) = plt.subplots(1, 2, figsize=(11, 4.2))
        groups = list(ok.groupby(others, dropna=False)) if others else [((), ok)]
        if len(groups) > MAX_LINES:
            groups = [(("mean over " + ", ".join(others),), ok.groupby(axis, as_index=False)[["iops", lat]].mean())]
        for key, g in groups:
            key = key if isinstance(key, tuple) else (key,)
            label = ", ".join(f"{a}={v}" for a, v in zip(others, key)) if others and len(key) == len(others) \
                else (key[0] if key else None)
            g = g.sort_values(axis)
            ax_iops.plot(g[axis].astype(str), g["iops"], marker="o", label=label)
            ax_lat.plot(g[axis].astype(str), g[lat], marker="o", label=label)
        ax_iops.set(xlabel=axis, ylabel="IOPS (virtual time)", title=f"{spec.name}: IOPS by {axis}")
        ax_lat.set(xlabel=axis, ylabel=lat.replace("_", " "), title=f"{spec.name}: {lat.split('_')[0]} p99 by {axis}")
        if others:
            ax_iops.legend(fontsize=7)
        fig.tight_layout()
        path = out / f"plot_{axis.replace('/', '_').replace('.', '_')}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths
