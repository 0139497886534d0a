"""The striped scan (nearflash.array.scan) as the shared scaling experiment: ``nearflash experiment array issd``."""

from __future__ import annotations

from nearflash.array import scaling, scan
from nearflash.array.array import Array
from nearflash.experiment import Experiment, Options
from nearflash.programs.experiments.common import option

#: --quick: the uplink at 2.5 x cosmos-plus's sequential-read bound puts the knee inside N = 1..8.
QUICK_UPLINK = 4.0


def run_issd(exp: Experiment, opts: Options) -> None:
    ns = option(opts, "devices", [1, 2, 4, 8], [1, 2, 4, 8, 16, 32, 48, 64])
    mib = option(opts, "mib_per_device", 1, 8)
    preset = option(opts, "preset", "cosmos-plus", "samsung-970pro")
    uplink = option(opts, "uplink", QUICK_UPLINK, 0.0)
    host = {"uplink_bandwidth": uplink} if uplink > 0 else None

    def make(n: int) -> Array:
        return Array(n, preset, seed=opts.seed, host=host)

    work = scan.scaling_work(preset, make(1).host, mib << 20)
    exp.note("The host path reads each device's stripes at queue depth 8 in 128 KiB commands; the in-storage path "
             "copies each 128 KiB piece into the device's SLM and runs examples/programs/threshold_sum.c on it, one "
             "piece at a time (the programs' host library runs one command at a time), returning 16 B. Each array's "
             "table holds mib_per_device MiB per device, striped in 1 MiB chunks.")
    if host is not None:
        exp.note(f"The switch uplink is set to {uplink} GB/s (host.toml: 26.87) to move the knee.")
    scaling.run(exp, work, ns, make)
