"""What every array experiment reads from ``--set``: the device counts, the data per device, the preset, the
switch uplink (to move the knee) and the closed-loop rounds; and the arrays they build."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from nearflash.array.array import Array
from nearflash.experiment import Experiment, Options
from nearflash.programs.experiments.common import option

#: --quick: the uplink at 2.5 x cosmos-plus's sequential-read bound (1.6 GB/s) puts the knee inside N = 1..8.
QUICK_UPLINK = 4.0


@dataclass(frozen=True)
class Setup:
    ns: list[int]
    mib_per_device: int
    preset: str
    seed: int
    host: Optional[dict[str, float]]
    closed_loop: int = 0

    def array(self, n: int) -> Array:
        return Array(n, self.preset, seed=self.seed, host=self.host, closed_loop=self.closed_loop)


def uplink_host(uplink: float) -> Optional[dict]:
    """The host overrides for ``--set uplink=GB/s`` (0: host.toml's own uplink)."""
    return {"uplink_bandwidth": uplink} if uplink > 0 else None


def note_uplink(exp: Experiment, uplink: float) -> None:
    """Says in the experiment's notes that the uplink was moved, when it was."""
    if uplink > 0:
        exp.note(f"The switch uplink is set to {uplink} GB/s (host.toml: 26.87) to move the knee.")


def setup(exp: Experiment, opts: Options) -> Setup:
    ns = option(opts, "devices", [1, 2, 4, 8], [1, 2, 4, 8, 16, 32, 48, 64])
    mib = option(opts, "mib_per_device", 1, 8)
    preset = option(opts, "preset", "cosmos-plus", "samsung-970pro")
    uplink = option(opts, "uplink", QUICK_UPLINK, 0.0)
    host = uplink_host(uplink)
    closed_loop = option(opts, "closed_loop", 0, 0)
    note_uplink(exp, uplink)
    if closed_loop:
        exp.note(f"Closed loop: up to {closed_loop} rounds of back-pressure from the shared host (docs/arrays.md); "
                 "each point's report says how many ran (data.points[..].closed_loop).")
    return Setup(ns, mib, preset, opts.seed, host, closed_loop)
