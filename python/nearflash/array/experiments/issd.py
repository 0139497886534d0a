"""The striped scan (nearflash.array.scan) as the shared scaling experiment: ``nearflash experiment array issd``."""

from __future__ import annotations

from nearflash.array import scaling, scan
from nearflash.array.experiments.common import setup
from nearflash.experiment import Experiment, Options


def run_issd(exp: Experiment, opts: Options) -> None:
    s = setup(exp, opts)
    work = scan.scaling_work(s.preset, s.array(1).host, s.mib_per_device << 20)
    exp.note("The host path reads each device's stripes at queue depth 8 in 128 KiB commands; the in-storage path "
             "copies each 128 KiB piece into the device's SLM and runs examples/programs/threshold_sum.c on it, one "
             "piece at a time (the programs' host library runs one command at a time), returning 16 B. Each array's "
             "table holds mib_per_device MiB per device, striped in 1 MiB chunks.")
    scaling.run(exp, work, s.ns, s.array)
