"""SQLite B-tree lookups by rowid in storage (``sqlite_lookup.c`` reading the database file's pages from flash, one
Execute Program and one Memory Read per lookup) against the host path (the same walk on a host core, one Read per
page through the kernel stack) with and without a warm host cache of the interior pages, at tree depths 2-4, on
cosmos-plus and samsung-970pro: latency, throughput at queue depth 1, energy per lookup; every answer checked
against sqlite3's. The ratio the saved round trips predict from preset parameters (docs/programs.md "Reading
flash: what to expect") is printed beside the measured one, and XRP's reported ratio beside both."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from nearflash import programs
from nearflash._native import programs as _native_programs
from nearflash.experiment import Experiment, Options
from nearflash.programs import sqlite as sq
from nearflash.programs.experiments.common import device, option

LBA = 256  # where the database file starts on the device
OUT = 1 << 16


def _us(dev: Any, key: str) -> float:
    """A preset time parameter in us."""
    v, unit = dev.param(key).split()[:2]
    return float(v) * {"ns": 1e-3, "us": 1.0, "ms": 1e3}[unit]


def predicted_ratio(dev: Any, depth: int) -> dict[str, float]:
    """Cold host / in-storage lookup latency from preset parameters (docs/programs.md "What to expect"):
    host(d) = d (O + W_read + F), storage(d) = 2 O + W_exec + d (F + W_page), with O = kernel_submit +
    kernel_complete + 2 link_latency per round trip, F = t_cmd + t_read + one block over the channel + t_decode per
    page, W_read = (fw_read + map) instructions, W_exec = fw_other + execute_dispatch instructions, W_page = (fw_page
    + map) instructions, each x cpi / core_freq. Dropped (all small, and all on the host path's side, so the
    prediction is conservative): the block's DMA to the host, the program's own instructions."""
    o = _us(dev, "host.kernel_submit") + _us(dev, "host.kernel_complete") + 2 * _us(dev, "host.link_latency")
    mts = float(dev.param("nand.channel_rate").split()[0])
    width = float(dev.param("nand.channel_width").split()[0])
    xfer = dev.lba_bytes / (mts * width / 8)  # bytes / (MB/s) = us
    f = _us(dev, "nand.t_cmd") + _us(dev, "nand.t_read") + xfer + _us(dev, "ecc.t_decode")
    ns_per = float(dev.param("controller.cpi").split()[0]) / float(dev.param("controller.core_freq").split()[0])

    def insns(key: str) -> float:
        return float(dev.param(key).split()[0]) * ns_per / 1e3  # us

    dispatch = float({n: d for n, d, *_ in _native_programs.parameters()}["execute_dispatch_instructions"]) * ns_per / 1e3
    w_read = insns("controller.fw_read_instructions") + insns("ftl.map_instructions")
    w_exec = insns("controller.fw_other_instructions") + dispatch
    w_page = insns("controller.fw_page_instructions") + insns("ftl.map_instructions")
    host, storage = depth * (o + w_read + f), 2 * o + w_exec + depth * (f + w_page)
    return {"round_trip_us": o, "page_us": f, "fw_read_us": w_read, "host_us": host, "storage_us": storage,
            "ratio": host / storage}


def _storage(dev: Any, image: sq.Database, flash: list[tuple[int, int]], ids: list[int], con: Any,
             check: bool) -> dict[str, Any]:
    lat, wrong = [], 0
    dev.reset_stats()
    t0 = dev.now_ns
    for rowid in ids:
        t = dev.now_ns
        r = programs.execute(dev, 1, [(0, OUT)], flash=flash, params=image.params(), cparam1=rowid,
                             cparam2=image.root)
        if r.value >= sq.UNSUPPORTED:
            got = None if r.value == sq.NOT_FOUND else ("error", r.value)
        else:
            got = sq.record_as_row(sq.decode_record(programs.read_slm(dev, 0, r.value).tobytes()), rowid)
        lat.append(dev.now_ns - t)
        if check and got != sq.row_of(con, rowid):
            wrong += 1
    total = dev.now_ns - t0
    return {"latency_ns": lat, "total_ns": total, "energy_j": dev.report().total_energy_j, "wrong": wrong,
            "reads": dev.report().extensions["programs"]["stats"]["flash_reads"]}


def _host(dev: Any, obj: bytes, image: sq.Database, flash: list[tuple[int, int]], ids: list[int],
          warm: list[int]) -> dict[str, Any]:
    """The host path; with `warm`, the cache is filled first (its reads are not in any lookup's latency, and the
    window's energy, which holds them, is not reported)."""
    dev.reset_stats()
    res = programs.host_runs(dev, obj, flash, [(image.params(), rowid, image.root) for rowid in ids], warm=warm)
    return {"latency_ns": [r["latency_ns"] for r in res], "energy_j": None if warm else dev.report().total_energy_j,
            "results": [r["result"] for r in res], "hits": sum(r["cache_hits"] for r in res)}


def run_sqlite(exp: Experiment, opts: Options) -> None:
    presets = option(opts, "presets", ["cosmos-plus", "samsung-970pro"], ["cosmos-plus", "samsung-970pro"])
    # (page size, rows): depth 2, 3 and 4 trees (the full depth-3 database has 1,000,000 rows)
    configs = [(4096, 3000), (4096, 60_000), (512, 60_000)] if opts.quick else \
        [(4096, 20_000), (4096, 1_000_000), (1024, 1_000_000)]
    n_storage = option(opts, "lookups", 100, 10_000)
    n_host = option(opts, "host_lookups", 50, 1000)
    obj = programs.example("sqlite_lookup")
    rows_out, results = [], {}
    tmp = Path(tempfile.mkdtemp(prefix="nearflash-sqlite-"))
    for page_size, rows in configs:
        path = tmp / f"t-{page_size}-{rows}.db"
        sq.build(path, rows, page_size=page_size, seed=opts.seed)
        con = sqlite3.connect(path)
        last = con.execute("SELECT max(rowid) FROM t").fetchone()[0]
        rng = np.random.default_rng(opts.seed)
        ids = [int(x) for x in rng.integers(1, last + 1, n_storage)]
        for preset in presets:
            with device(preset, opts.seed) as dev:
                image = sq.open_image(path, dev.lba_bytes)
                dev.write(LBA, np.frombuffer(image.image, np.uint8))
                dev.flush()
                flash = [(LBA, len(image.image) // dev.lba_bytes)]
                depth = image.depth()
                programs.load(dev, 1, obj)
                programs.activate(dev, 1)
                s = _storage(dev, image, flash, ids, con, check=True)
                if s["wrong"]:
                    raise AssertionError(f"{preset}, {rows} rows: {s['wrong']} of {len(ids)} lookups differ from sqlite3")
                cold = _host(dev, obj, image, flash, ids[:n_host], [])
                warm_blocks = image.blocks_of_pages(image.interior_pages(), LBA, dev.lba_bytes)
                warm = _host(dev, obj, image, flash, ids[:n_host], warm_blocks)
                pred = predicted_ratio(dev, depth)
            mean = {k: float(np.mean(v["latency_ns"])) / 1e3 for k, v in (("s", s), ("c", cold), ("w", warm))}
            s_host = float(np.mean(s["latency_ns"][:n_host])) / 1e3
            e_s, e_c = s["energy_j"] / len(ids), cold["energy_j"] / len(cold["latency_ns"])
            key = f"{preset}/depth{depth}"
            results[key] = {"rows": rows, "page_size": page_size, "depth": depth, "db_bytes": len(image.image),
                            "lookups_checked": len(ids), "storage_us": mean["s"], "host_cold_us": mean["c"],
                            "host_warm_us": mean["w"], "predicted": pred, "energy_storage_uj": e_s * 1e6,
                            "energy_host_cold_uj": e_c * 1e6,
                            "p99_storage_us": float(np.percentile(s["latency_ns"], 99)) / 1e3,
                            "p99_host_cold_us": float(np.percentile(cold["latency_ns"], 99)) / 1e3}
            rows_out.append([preset, depth, rows, page_size, len(image.image) / 2**20, len(ids), mean["s"],
                             mean["c"], mean["w"], mean["c"] / s_host, pred["ratio"], mean["w"] / s_host,
                             1e6 / mean["s"], 1e6 / mean["c"], e_s * 1e6, e_c * 1e6])
            exp.compare(f"{preset}, depth {depth}: cold host / in-storage lookup latency", mean["c"] / s_host,
                        pred["ratio"], "x",
                        f"model column: host d(O+W+F) = {pred['host_us']:.0f} us over storage 2O+W'+d(F+w) = "
                        f"{pred['storage_us']:.0f} us (O = {pred['round_trip_us']:.1f} us per round trip, W = "
                        f"{pred['fw_read_us']:.1f} us firmware per Read, F = {pred['page_us']:.1f} us per page; "
                        "docs/programs.md)",
                        reference="model", better="higher")
            exp.compare(f"{preset}, depth {depth}: cold host / in-storage lookup latency vs XRP", mean["c"] / s_host,
                        2.5, "x", "XRP (OSDI'22): up to 2.5x throughput for BPF-KV B+-tree lookups",
                        comparable=False,
                        why_not_comparable="XRP's device is an Intel Optane SSD (reads of a few us), where the kernel "
                        "round trip is most of a hop; on these NAND presets a page read (36-83 us) is")
    exp.table("SQLite rowid lookups: in storage vs host path (latency in us, QD1 throughput in lookups/s, energy "
              "per lookup in uJ)", ["preset", "depth", "rows", "page size", "file MiB", "lookups checked",
                                    "in storage", "host cold", "host warm", "cold/storage", "predicted",
                                    "warm/storage", "storage /s", "host cold /s", "storage uJ", "host cold uJ"],
              rows_out)
    exp.record("results", results)
    exp.note("Every in-storage lookup's record equals sqlite3's row (checked, lookups checked column); the host path "
             "runs the same program, so its answers are the same walk's.")
    exp.note("In storage a lookup is one Execute Program and one Memory Read of the record; the host path makes one "
             "Read per level (cold) or one Read for the leaf with the interior pages in its page cache (warm).")
    exp.note("Throughput is at queue depth 1 (one lookup after another): 1 / mean latency.")
    fig, ax = exp.figure("sqlite", width=7, height=4)
    for preset in presets:
        pts = sorted((v["depth"], v["storage_us"], v["host_cold_us"], v["host_warm_us"])
                     for k, v in results.items() if k.startswith(preset + "/"))
        d = [p[0] for p in pts]
        ax.plot(d, [p[1] for p in pts], "o-", label=f"{preset} in storage")
        ax.plot(d, [p[2] for p in pts], "s--", label=f"{preset} host cold")
        ax.plot(d, [p[3] for p in pts], "^:", label=f"{preset} host warm")
    ax.set_xlabel("B-tree depth")
    ax.set_ylabel("mean lookup latency (us)")
    ax.legend(fontsize=7)
