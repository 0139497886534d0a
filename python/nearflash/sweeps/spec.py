"""A sweep's specification (TOML or a dict) expanded into points.

    name = "qd-by-channels"
    [base]                       # every point starts from this
    preset = "cosmos-plus"
    seed = 1
    overrides = { chips_per_channel = 2 }
    [workload]                   # a `nearflash bench` job (BenchJob fields; sizes as "4k", "256m", "90%")
    rw = "randread"
    ios = 20000
    size = "256m"
    [grid]                       # the cartesian product of these lists
    iodepth = [1, 4, 16, 64]     # a workload field
    channels = [2, 4, 8, 16]     # anything else is a preset parameter (as `--set`)
    [[points]]                   # and/or explicit points, each over the base
    preset = "samsung-970pro"
    iodepth = 8

A key is `preset` or `seed`, a workload field, or a preset parameter (`nand.t_read`, `channels`); `set.NAME` and
`workload.NAME` say which explicitly. The swept keys become the table's columns.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Iterable, Union

from nearflash.errors import InvalidArgument
from nearflash.tomlfile import read_toml
from nearflash.workload import BenchJob

TOP_KEYS = {"name", "base", "workload", "grid", "points"}
BASE_KEYS = {"preset", "seed", "overrides"}
WORKLOAD_KEYS = {f.name for f in fields(BenchJob)} - {"seed"}
MAX_POINTS = 100_000
Scalar = Union[str, int, float, bool]


@dataclass(frozen=True)
class Point:
    """One run: a device (preset, seed, parameter overrides) and a bench job, with the swept values it stands for."""

    preset: str
    seed: int
    overrides: dict[str, Scalar]
    workload: dict[str, Scalar]
    axes: dict[str, Scalar]

    @property
    def id(self) -> str:
        """Stable across runs (the key of its stored result, so a resumed sweep skips it)."""
        key = json.dumps([self.preset, self.seed, self.overrides, self.workload], sort_keys=True)
        return hashlib.sha256(key.encode()).hexdigest()[:16]

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @staticmethod
    def from_json(text: str) -> "Point":
        return Point(**json.loads(text))

    def job(self) -> BenchJob:
        """The bench job, with sizes parsed ("4k", "90%") and every field checked."""
        from nearflash.cli import parse_size, parse_span

        w = dict(self.workload)
        try:
            if isinstance(w.get("bs"), str):
                w["bs"] = parse_size(w["bs"])
            if isinstance(w.get("size"), str):
                w["size"] = parse_span(w["size"])
        except argparse.ArgumentTypeError as e:
            raise InvalidArgument(str(e)) from None
        job = BenchJob(**w, seed=self.seed)
        job.check()
        return job


@dataclass
class Spec:
    name: str
    points: list[Point]
    axes: list[str]  # the keys that vary, in the order they were given


def _scalar(where: str, v: Any) -> Scalar:
    if not isinstance(v, (str, int, float, bool)):
        raise InvalidArgument(f"{where}: values must be strings, numbers or booleans, got {v!r}")
    return v


def _place(key: str, value: Scalar, base: dict[str, Any], where: str) -> None:
    """Puts one key of a grid or point where it belongs: the device's base, the workload, or the overrides."""
    if key in ("preset", "seed"):
        if key == "seed" and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise InvalidArgument(f"{where}: seed must be a non-negative integer, got {value!r}")
        if key == "preset" and not isinstance(value, str):
            raise InvalidArgument(f"{where}: preset must be a name or a .toml file, got {value!r}")
        base[key] = value
    elif key.startswith("workload.") or key in WORKLOAD_KEYS:
        name = key.removeprefix("workload.")
        if name not in WORKLOAD_KEYS:
            raise InvalidArgument(f"{where}: unknown workload field {name!r}; fields: {', '.join(sorted(WORKLOAD_KEYS))}")
        base["workload"][name] = value
    else:
        base["overrides"][key.removeprefix("set.")] = value


def _table(spec: dict[str, Any], key: str) -> dict[str, Any]:
    v = spec.get(key, {})
    if not isinstance(v, dict):
        raise InvalidArgument(f"[{key}] must be a table, got {type(v).__name__}")
    return v


def expand(spec: dict[str, Any]) -> Spec:
    """Checks a specification and lists its points (duplicates once); raises InvalidArgument naming the bad key."""
    if not isinstance(spec, dict):
        raise InvalidArgument(f"a sweep specification is a table, got {type(spec).__name__}")
    unknown = set(spec) - TOP_KEYS
    if unknown:
        raise InvalidArgument(f"unknown key(s) {', '.join(sorted(unknown))}; a sweep has {', '.join(sorted(TOP_KEYS))}")
    name = spec.get("name", "sweep")
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgument(f"name must be a non-empty string, got {name!r}")
    base_t = _table(spec, "base")
    bad = set(base_t) - BASE_KEYS
    if bad:
        raise InvalidArgument(f"[base]: unknown key(s) {', '.join(sorted(bad))}; it has {', '.join(sorted(BASE_KEYS))}")
    base: dict[str, Any] = {"preset": "cosmos-plus", "seed": 1, "overrides": {}, "workload": {}}
    for k in ("preset", "seed"):
        if k in base_t:
            _place(k, base_t[k], base, "[base]")
    for k, v in _table(base_t, "overrides").items():
        base["overrides"][k] = _scalar(f"[base.overrides] {k}", v)
    for k, v in _table(spec, "workload").items():
        _place(f"workload.{k}", _scalar(f"[workload] {k}", v), base, "[workload]")

    grid = _table(spec, "grid")
    for k, vals in grid.items():
        if not isinstance(vals, list) or not vals:
            raise InvalidArgument(f"[grid] {k}: a non-empty list of values, got {vals!r}")
        for v in vals:
            _scalar(f"[grid] {k}", v)
    listed = spec.get("points", [])
    if not isinstance(listed, list) or not all(isinstance(p, dict) for p in listed):
        raise InvalidArgument("[[points]] must be an array of tables")
    n_grid = 1
    for vals in grid.values():
        n_grid *= len(vals)
    if (n_grid if grid else 0) + len(listed) > MAX_POINTS:
        raise InvalidArgument(f"the sweep has {n_grid + len(listed)} points; at most {MAX_POINTS}")
    if not grid and not listed:
        raise InvalidArgument("the sweep has no points: give [grid] lists and/or [[points]]")

    combos: list[dict[str, Scalar]] = []
    if grid:
        combos += [dict(zip(grid, values)) for values in itertools.product(*grid.values())]
    for i, p in enumerate(listed):
        combos.append({k: _scalar(f"[[points]] #{i + 1} {k}", v) for k, v in p.items()})
    axes = list(dict.fromkeys(k for c in combos for k in c))

    points: dict[str, Point] = {}
    for c in combos:
        b = {"preset": base["preset"], "seed": base["seed"], "overrides": dict(base["overrides"]),
             "workload": dict(base["workload"])}
        for k, v in c.items():
            _place(k, v, b, "[grid]" if k in grid else "[[points]]")
        p = Point(b["preset"], b["seed"], b["overrides"], b["workload"], {a: c.get(a) for a in axes})
        p.job()  # a wrong workload value is the specification's fault: refuse it before running anything
        points.setdefault(p.id, p)
    check_device_parameters(points.values())
    return Spec(name, list(points.values()), axes)


def check_device_parameters(points: Iterable[Point]) -> None:
    """Refuses an unknown preset, an unknown parameter or a value that does not parse in its parameter's unit before
    anything runs or is created: each (preset, parameter, value) the points use (a grid's lists, not its product).
    Values that are only wrong together (too few blocks for the over-provisioning) still fail as points."""
    from nearflash.device import check_overrides
    from nearflash.errors import NearflashError

    seen: set[tuple[str, str, str]] = set()
    for p in points:
        for key, value in [("", ""), *p.overrides.items()]:
            check = (p.preset, key, json.dumps(value))
            if check in seen:
                continue
            seen.add(check)
            try:
                check_overrides(p.preset, {key: value} if key else {})
            except NearflashError as e:
                what = f"preset {p.preset!r}" + (f", {key} = {value!r}" if key else "")
                raise InvalidArgument(f"{what}: {e}") from None


def load(path: Union[str, Path]) -> Spec:
    return expand(read_toml(Path(path), "sweep specification"))
