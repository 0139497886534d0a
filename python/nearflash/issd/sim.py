"""Execution-driven studies (``nearflash_issd::sim``): real kernels on real data through the device model, with
Eq. 1 evaluated on the same system with the alpha and beta each run measured. A point is a dict: ``config``,
``kernel``, ``n_ch``, ``strategy``, ``input_bytes``, ``seconds``, ``bandwidth`` (B/s), ``model_bandwidth``,
``model_bottleneck``, ``alpha``, ``beta``, ``device_bytes``, ``energy`` [(component, J)].

``sizing`` = (min pages per channel, target seconds at the model's bandwidth, max pages): every point processes
enough data for its pipeline's fill and drain to stay small against the run.
"""

from __future__ import annotations

import json
from typing import Iterable

from nearflash._native import issd as _issd

#: Sizing of quick runs (tests, ``--quick``) and of full runs.
QUICK = (24, 4e-3, 1 << 14)
FULL = (64, 20e-3, 1 << 17)


def fig7(
    configs: Iterable[str], kernels: Iterable[str], n_ch: int, sizing=QUICK, seed: int = 1, agent: dict | None = None
) -> list[dict]:
    """Fig. 7 points; ``agent`` overrides the Agent's parameters (e.g. ``{"ftl_lookups": True}``)."""
    return _issd.sim_fig7(list(configs), list(kernels), n_ch, tuple(sizing), seed, None if agent is None else json.dumps(agent))


def fig8(kernel: str, r_host: float, n_host_cpu: int, accelerated: bool, sizing=QUICK, seed: int = 1) -> dict:
    return _issd.sim_fig8(kernel, r_host, n_host_cpu, accelerated, tuple(sizing), seed)


def fig9(kernel: str, n_host_cpu: int, sizing=QUICK, chunks: int = 256, seed: int = 1) -> dict:
    return _issd.sim_fig9(kernel, n_host_cpu, tuple(sizing), chunks, seed)


def prototype(pages: int, seed: int = 1) -> dict:
    return _issd.sim_prototype(pages, seed)


def setup(config: str, n_ch: int, n_host_cpu: int = 8) -> dict:
    """The device setup of a Fig. 7 configuration: preset, overrides (with reasons), Agent parameters, model."""
    return _issd.sim_setup(config, n_ch, n_host_cpu)


def model_error(p: dict) -> float:
    """|model - executed| / executed."""
    return abs(p["model_bandwidth"] - p["bandwidth"]) / p["bandwidth"]


def error_summary(points: list[dict]) -> tuple[float, float]:
    """Mean and maximum relative error of Eq. 1 against the executed runs."""
    e = [model_error(p) for p in points]
    return sum(e) / max(len(e), 1), max(e, default=0.0)


def energy_per_byte(p: dict, exclude: Iterable[str] = ()) -> float:
    """J per input byte over Fig. 10's components (minus ``exclude``)."""
    skip = set(exclude)
    return sum(j for c, j in p["energy"] if c not in skip) / p["input_bytes"]
