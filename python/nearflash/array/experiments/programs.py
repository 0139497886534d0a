"""TPC-H Q6 (``examples/programs/lineitem_filter.c``) on every drive's local lineitem partition, reduced on the host
(nearflash.array.programs), as the shared scaling experiment: ``nearflash experiment array programs``."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from nearflash.array import programs, scaling, scan
from nearflash.array.array import Array, Shard
from nearflash.array.experiments.common import setup
from nearflash.array.host import ArrayReport, HostModel, PathCost
from nearflash.experiment import Experiment, Options
from nearflash.issd import lineitem
from nearflash.programs import api, example
from nearflash.programs.experiments.common import PAGE, Q6

#: Pages of lineitem per Execute Program (128 KiB).
PIECE_PAGES = 16
RECORDS_PER_PAGE = (PAGE - lineitem.PAGE_HEADER) // lineitem.RECORD_SIZE


@functools.lru_cache(maxsize=2)
def partition(pages: int) -> np.ndarray:
    """The first `pages` pages of lineitem (tpchgen), as every drive's local partition."""
    return lineitem.generate(rows=pages * RECORDS_PER_PAGE, page_size=PAGE, comment_pool="compact")


def local_lineitem(shard: Shard, pages: int) -> list[tuple[int, int, int]]:
    """Writes the drive's partition from block 0 and lists it in pieces of PIECE_PAGES pages."""
    dev = shard.device
    data = partition(pages)
    dev.write(0, data)
    dev.flush()
    piece = PIECE_PAGES * PAGE
    return [(off // dev.lba_bytes, -(-min(piece, data.size - off) // dev.lba_bytes), min(piece, data.size - off))
            for off in range(0, data.size, piece)]


def q6_total(outputs: list[tuple[int, np.ndarray]]) -> tuple[int, int]:
    """The host's merge: Q6's (count, sum of price x discount) over every piece."""
    return scan.count_and_sum(outputs)


def job() -> programs.Job:
    return programs.Job(example("lineitem_filter"), 16, Q6, cparam1=PAGE)


def scaling_work(preset: str, host: HostModel, pages: int) -> scaling.Scaling:
    """A unit is one byte of lineitem pages; each device holds `pages` pages. Host path: every byte crosses the
    shared host; its CPU per byte is the program's counted instructions on one piece (the same VM, before
    measuring) x the host's ns per instruction; one device reads at its preset's sequential-read bound."""
    j = job()
    sample = partition(pages)[: PIECE_PAGES * PAGE].copy()
    _, instructions = api.run_local(j.program, [sample, np.zeros(16, np.uint8)], j.params, j.cparam1)
    from nearflash.device import Device

    with Device(None, preset) as dev:
        ns_per_instruction = programs.host_ns_per_instruction(dev)
    rate, by = scan.read_rate(preset)
    cpu = instructions * ns_per_instruction / sample.size
    piece = PIECE_PAGES * PAGE
    merge = host["scan_ns_per_byte"]
    costs = {"host": PathCost(1.0, 0.0, cpu, rate, f"the preset's sequential-read bound ({by})"),
             "in_storage": PathCost(16 / piece, 0.0, 16 * merge / piece, None)}
    single = None

    def work(array: Array, path: str, executor: Any) -> tuple[ArrayReport, float]:
        nonlocal single
        report, total = programs.run(array, j, local_lineitem, pages, path=path, reduce=q6_total, executor=executor)
        if len(array) == 1 and single is None:
            single = total
        if single is not None and total != (single[0] * len(array), single[1] * len(array)):
            raise AssertionError(f"Q6 on {len(array)} drives by {path}: {total}, not {len(array)} x {single}")
        return report, float(len(array) * partition(pages).size)

    return scaling.Scaling(f"TPC-H Q6 on every drive's lineitem ({preset}, {pages} pages per drive)", "lineitem byte",
                           work, costs, ("GB/s", 1e9))


def run_programs(exp: Experiment, opts: Options) -> None:
    s = setup(exp, opts)
    pages = (s.mib_per_device << 20) // PAGE
    work = scaling_work(s.preset, s.array(1).host, pages)
    exp.note("Every drive holds the same partition, the first rows of TPC-H lineitem (tpchgen) in 8 KiB pages of "
             "150-byte records: the binding generates a table from its first row only, and the model's costs do "
             "not depend on the values. The merged answer is checked to be N x one drive's on both paths.")
    exp.note("In storage: per 128 KiB piece a Memory Copy into SLM, Execute Program of lineitem_filter.c (Q6's "
             "filter and sum of price x discount), a 16 B Memory Read; host path: reads at queue depth 8 and the same "
             "program on a shared host core (counted instructions x host_cycles_per_instruction / host.cpu_freq).")
    scaling.run(exp, work, s.ns, s.array)
