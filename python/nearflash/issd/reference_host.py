"""The reference host: per-byte (and per-row) costs of the host path's kernels, DuckDB's queries beside them,
measured once on a named machine by ``benches/issd_reference_host.py`` and stored in the ``issd`` preset's
``[ext.reference_host]`` section with their unit and source (date, method, machine).

Host baselines that a comparison divides by are these costs x the work a run counts (bytes of pages, rows), so
they do not move with the load of the machine an experiment runs on; that machine's own timings may be shown beside
them as "this host", never in a comparison."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

PRESET = "issd"
SECTION = "ext.reference_host"


@dataclass(frozen=True)
class Cost:
    """One stored figure: value in `unit`, and where it comes from."""

    name: str
    value: float
    unit: str
    source: str


@lru_cache(maxsize=1)
def _section() -> dict[str, tuple[str, str, str]]:
    from nearflash import _native

    prefix = SECTION + "."
    return {path[len(prefix):]: (value, unit, source) for path, value, unit, source in _native.preset_params(PRESET)
            if path.startswith(prefix)}


def cost(name: str) -> Cost:
    """A stored cost by name (e.g. ``"scan_cpb"``); a clear error naming what is stored when it is not."""
    sec = _section()
    if name not in sec:
        raise KeyError(f"no reference-host cost {name!r} in preset {PRESET!r} [{SECTION}]; stored: {sorted(sec)}")
    value, unit, source = sec[name]
    return Cost(name, float(value), unit, source)


def machine() -> str:
    """The reference machine, as stored (CPU, cores, clock, date)."""
    return _section()["machine"][0]


def clock_hz() -> float:
    """The clock that converts the stored cycles to seconds (the machine's nominal clock when measured)."""
    c = cost("clock")
    if c.unit != "GHz":
        raise ValueError(f"{SECTION}.clock: expected GHz, the preset says {c.unit!r}")
    return c.value * 1e9


def cpb(kernel: str) -> float:
    """Host cycles per input byte of `kernel` (one core of the reference machine)."""
    return cost(f"{kernel}_cpb").value


def ipb(kernel: str) -> float:
    """Host instructions per input byte of `kernel` (counted: independent of the machine's speed)."""
    return cost(f"{kernel}_ipb").value


def seconds_per_byte(kernel: str) -> float:
    """One reference core's seconds per input byte of `kernel`."""
    return cpb(kernel) / clock_hz()


def duckdb_seconds_per_row(query: str) -> float:
    """One reference core's seconds per table row of DuckDB running `query` (``"scan"`` or ``"q6"``)."""
    return cost(f"duckdb_{query}_cycles_per_row").value / clock_hz()


def described(name: str) -> str:
    """`name = value unit (source)`, for notes."""
    c = cost(name)
    return f"{c.name} = {c.value:g} {c.unit} ({c.source})"
