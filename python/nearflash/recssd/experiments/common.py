"""What every RecSSD experiment sets up the same way: a fresh Cosmos+ device sized for the tables, with the
UNVMe-like polled host stack the paper's host used (§5), the RecSSD firmware and host library; inputs; and the
run -> numbers plumbing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from nearflash.device import Device
from nearflash.experiment import Experiment, Options
from nearflash.recssd.embeddings import TableSpec
from nearflash.recssd.inputs import locality_batches, uniform_batch
from nearflash.recssd.models import SPECS, Batch, ModelSpec, RecModel, build_model
from nearflash.recssd.system import InferenceResult, RecSSD

#: Preset every RecSSD experiment runs on.
PRESET = "cosmos-plus"
#: LBAs per flash page and bytes per LBA of that preset (16 KiB pages, 4 KiB LBAs).
LBAS_PER_PAGE, LBA_BYTES, PAGE_BYTES = 4, 4096, 16384
#: Blocks per plane of the preset (512 GiB raw); doubled until the tables fit (the paper's board has 2 TB, §5).
BASE_BLOCKS_PER_PLANE = 1024
#: Request-id modulus of the firmware (table starts are rounded up to it).
MODULUS = 1000


def table_lbas(tables: Sequence[TableSpec], placement: str) -> int:
    """LBAs a model's tables occupy on the device (each table's start rounded up to the modulus)."""
    end = 0
    for t in tables:
        per_page = 1 if placement == "one_row_per_page" else PAGE_BYTES // (4 * t.dim)
        pages = -(-t.rows // per_page)
        end = -(-end // MODULUS) * MODULUS + pages * LBAS_PER_PAGE
    return end


def device_for(tables: Sequence[TableSpec], placement: str, exp: Experiment | None = None, **overrides: Any) -> Device:
    """A fresh in-memory device that stores no data (tables are generated), big enough for ``tables``."""
    need = table_lbas(tables, placement)
    blocks = BASE_BLOCKS_PER_PLANE
    # Logical capacity ~ 93% of raw (7% over-provisioning); leave room for the mapping's last partial group.
    while need * LBA_BYTES > 0.92 * blocks / BASE_BLOCKS_PER_PLANE * 512 * 2**30:
        blocks *= 2
    if blocks != BASE_BLOCKS_PER_PLANE:
        overrides.setdefault("blocks_per_plane", blocks)
        if exp is not None:
            note = (f"tables of {need * LBA_BYTES / 2**30:.0f} GiB ({placement}) exceed the preset's 476 GiB: "
                    f"blocks_per_plane = {blocks} ({blocks // BASE_BLOCKS_PER_PLANE * 512} GiB raw; the paper's "
                    "board has 2 TB, section 5)")
            if note not in exp.notes:
                exp.note(note)
    overrides.setdefault("stack", "polled")
    return Device(None, preset=PRESET, materialise=False, **overrides)


@dataclass
class ModelSetup:
    """A model on its own device."""

    name: str
    spec: ModelSpec
    model: RecModel
    system: RecSSD


def model_setup(
    name: str,
    spec: ModelSpec | None = None,
    *,
    placement: str = "packed",
    params: dict[str, Any] | None = None,
    seed: int = 0,
    exp: Experiment | None = None,
    precision: str = "fp32",
) -> ModelSetup:
    """``name``'s model (or a custom ``spec`` built like it) with generated tables (rows stored at ``precision``)
    on a fresh device."""
    spec = spec or SPECS[name]
    model = build_model(name, seed=seed) if spec is SPECS.get(name) else _custom_model(name, spec, seed)
    dev = device_for(spec.tables, placement, exp)
    return ModelSetup(name, spec, model, RecSSD(dev, list(spec.tables), seed=seed, placement=placement, params=params,
                                                       precision=precision))


def _custom_model(base: str, spec: ModelSpec, seed: int) -> RecModel:
    """A DLRM like ``base`` over a modified table set (Fig. 11's sweeps)."""
    from nearflash.recssd.models import DLRM

    bottom = {"RM1": [64, 32], "RM2": [64, 64], "RM3": [1024, 256, 32]}[base]
    top = {"RM1": [256, 64, 1], "RM2": [128, 64, 1], "RM3": [512, 256, 1]}[base]
    return DLRM(spec, bottom, top, seed, "cat")


def uniform_batches(spec: ModelSpec, batch_size: int, n: int, seed: int) -> list[Batch]:
    """``n`` batches of uniformly random ids (paper Fig. 9: 'randomly generated input indices')."""
    return [uniform_batch(spec, batch_size, seed=seed * 1000 + b) for b in range(n)]


def locality_run_batches(spec: ModelSpec, batch_size: int, n: int, k: float, seed: int) -> tuple[list[Batch], float]:
    """``n`` batches of the stack-distance trace with locality ``k``; returns them and the mean unique fraction."""
    batches, unique = locality_batches(spec, batch_size, n, k, seed)
    return batches, float(np.mean(unique))


def warmup_batches(spec: ModelSpec, batch_size: int, lookups_per_table: int) -> int:
    """Batches that give every table of ``spec`` at least ``lookups_per_table`` lookups: enough to fill a 2,000-row
    host LRU and, for small tables, to touch every line of the trace's id space once."""
    fewest = min(t.lookups for t in spec.tables)
    return max(1, -(-lookups_per_table // (fewest * batch_size)))


def run(setup: ModelSetup, batches: Sequence[Batch], path: str, pipelined: bool) -> InferenceResult:
    return setup.system.run(setup.model, list(batches), path, pipelined=pipelined)


def ms(ns: float) -> float:
    return float(ns) * 1e-6


def option(opts: Options, key: str, quick: Any, full: Any) -> Any:
    """``--set key=...`` if given (parsed like the default), else ``quick`` under ``--quick``, else ``full``."""
    default = quick if opts.quick else full
    if key not in opts.extra:
        return default
    raw = opts.extra[key]
    if isinstance(default, (list, tuple)):
        kind = type(default[0]) if default else str
        return [kind(v) for v in str(raw).split(",")]
    return type(default)(raw)


def spread(values: Any) -> dict[str, float]:
    """Mean, std and p5/p95 of per-batch (or per-seed) measurements, for the JSON and the tables."""
    v = np.asarray(values, dtype=float)
    return {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if v.size > 1 else 0.0,
            "p5": float(np.percentile(v, 5)), "p95": float(np.percentile(v, 95)), "n": int(v.size)}
