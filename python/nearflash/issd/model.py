"""The iSSD analytic model (paper §4; ``nearflash_issd::model``): Eq. 1-2 over stages (a) NAND->FMC, (b) FMC,
(c) FMC->DRAM, (d) SSD CPUs, (e) SSD->host, (f) host CPUs; the energy model with Fig. 10's parameters; static
partitioning; and the Fig. 7-10 studies. Configurations are Fig. 7's (HOST-SATA, HOST-4G, HOST-8G, iSSD-400,
iSSD-800, iSSD-XL) with ``n_ch`` channels; kernels are Table 2's (linear_regression, string_match, kmeans, scan).
Overrides replace named numeric parameters (SI units: B/s, Hz, J, W), e.g. ``config_overrides={"r_host": 4e9}``,
``kernel_overrides={"alpha": 0.02}``. Results are plain dicts/lists; times in s, bandwidths in B/s."""

from __future__ import annotations

from typing import Any

from nearflash._native import issd as _issd

CONFIGS: list[str] = _issd.model_configs()
KERNELS = ("linear_regression", "string_match", "kmeans", "scan")


def _kv(d: dict[str, float] | None) -> list[tuple[str, float]] | None:
    return None if d is None else [(k, float(v)) for k, v in d.items()]


def parameters() -> dict[str, Any]:
    """Kernel profiles, Table 1, energy parameters and the configurations (at 32 channels)."""
    return _issd.model_parameters()


def evaluate(
    config: str, kernel: str, n_ch: float, data_bytes: float = 1e9, config_overrides=None, kernel_overrides=None
) -> dict:
    """Stage times, T_total, bandwidth and bottleneck (Eq. 1)."""
    return _issd.model_study("evaluate", config, kernel, n_ch, data_bytes, _kv(config_overrides), _kv(kernel_overrides))


def bandwidth(config: str, kernel: str, n_ch: float, **overrides) -> float:
    """Data processing bandwidth, B/s."""
    return evaluate(config, kernel, n_ch, **overrides)["bandwidth"]


def energy(
    config: str,
    kernel: str,
    n_ch: float,
    data_bytes: float = 1e9,
    config_overrides=None,
    kernel_overrides=None,
    energy_overrides=None,
) -> dict:
    """Energy: ``per_byte`` [(component, J/B)], ``epb_comp``, ``epb_xfer``, ``e_dyn``, ``e_static``, ``e_total``."""
    return _issd.model_study(
        "energy", config, kernel, n_ch, data_bytes, _kv(config_overrides), _kv(kernel_overrides), _kv(energy_overrides)
    )


def partition(
    config: str, kernel: str, n_ch: float, data_bytes: float = 1e9, config_overrides=None, kernel_overrides=None
) -> dict:
    """Static split between an iSSD configuration and its host CPUs so both finish together."""
    return _issd.model_study(
        "partition", config, kernel, n_ch, data_bytes, _kv(config_overrides), _kv(kernel_overrides)
    )


def fig7(kernel: str) -> list[dict]:
    """Bandwidth of every Fig. 7 configuration at 8..64 channels."""
    return _issd.model_figure(7, kernel)


def fig8(kernel: str, r_host: float = 600e6) -> list[dict]:
    """Iso-performance FMC counts (400 MHz, with/without stream processor) matching 4/8/16-CPU hosts."""
    return _issd.model_figure(8, kernel, r_host)


def fig9(kernel: str) -> list[dict]:
    """Host only, iSSD only and partitioned bandwidth at 32 channels over SATA, for 4/8/16 host CPUs."""
    return _issd.model_figure(9, kernel)


def fig10(kernel: str) -> list[tuple[str, dict]]:
    """Energy per byte by component for HOST-SATA, iSSD-400 and iSSD-XL at 8 channels."""
    return [tuple(x) for x in _issd.model_figure(10, kernel)]
