"""SQLite B-tree lookups by rowid in storage (``sqlite_lookup.c`` reading the database file's pages from flash, one
Execute Program and one Memory Read per lookup) against the host path (the same walk on a host core, one Read per
page through the kernel stack) with and without a warm host cache of the interior pages, at tree depths 2-4, on
cosmos-plus and samsung-970pro: latency, throughput at queue depth 1, energy per lookup; every answer checked
against sqlite3's. The ratio the saved round trips predict from preset parameters (docs/programs.md "Reading
flash: what to expect") is printed beside the measured one, and XRP's reported ratio beside both."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

import numpy as np

import nearflash
from nearflash import programs
from nearflash._native import programs as _native_programs
from nearflash.errors import InvalidArgument
from nearflash.experiment import Experiment, Options
from nearflash.programs import sqlite as sq
from nearflash.programs.experiments.common import option

LBA = 256  # where the database file starts on the device
OUT = 1 << 16


def _us(dev: Any, key: str) -> float:
    """A preset time parameter in us."""
    v, unit = dev.param(key).split()[:2]
    return float(v) * {"ns": 1e-3, "us": 1.0, "ms": 1e3}[unit]


def predicted_ratio(dev: Any, depth: int, page_bytes: int = 0) -> dict[str, float]:
    """Cold host / in-storage lookup latency from preset parameters (docs/programs.md "What to expect"):
    host(d) = d (O + W_read + F), storage(d) = 2 O + W_exec + d (F + W_page), with O = kernel_submit +
    kernel_complete + 2 link_latency per round trip, F = t_cmd + t_read + b (one block over the channel + t_decode)
    per page of b blocks (a database page of ``page_bytes`` in one flash page), W_read = (fw_read + b map)
    instructions, W_exec = fw_other + execute_dispatch instructions, W_page = (fw_page + b map) instructions, each
    x cpi / core_freq. Dropped (all small, and all on the host path's side, so the prediction is conservative): the
    blocks' DMA to the host, the program's own instructions."""
    b = max(1, -(-page_bytes // dev.lba_bytes))
    o = _us(dev, "host.kernel_submit") + _us(dev, "host.kernel_complete") + 2 * _us(dev, "host.link_latency")
    mts = float(dev.param("nand.channel_rate").split()[0])
    width = float(dev.param("nand.channel_width").split()[0])
    xfer = dev.lba_bytes / (mts * width / 8)  # bytes / (MB/s) = us
    f = _us(dev, "nand.t_cmd") + _us(dev, "nand.t_read") + b * (xfer + _us(dev, "ecc.t_decode"))
    ns_per = float(dev.param("controller.cpi").split()[0]) / float(dev.param("controller.core_freq").split()[0])

    def insns(key: str) -> float:
        return float(dev.param(key).split()[0]) * ns_per / 1e3  # us

    dispatch = float({n: d for n, d, *_ in _native_programs.parameters()}["execute_dispatch_instructions"]) * ns_per / 1e3
    w_read = insns("controller.fw_read_instructions") + b * insns("ftl.map_instructions")
    w_exec = insns("controller.fw_other_instructions") + dispatch
    w_page = insns("controller.fw_page_instructions") + b * insns("ftl.map_instructions")
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


@dataclass(frozen=True)
class Config:
    """One database: its page size and rows; `text_bytes` pads each row's text (0: ``row <rowid>``); `sized`: a
    database of a given file size (GB), built in the work folder and placed on a file-backed device image (sparse:
    only the database's pages are written), both removed after the run."""

    page_size: int
    rows: int
    text_bytes: int = 0
    sized: bool = False


#: Page sizes of the GB databases: 8 KiB gives a depth-3 table B-tree from 0.2 to ~5 GiB, 4 KiB depth 4 from
#: ~0.7 GiB (docs/programs.md "Databases of gigabytes": no GB table is depth 2 at any page size).
SIZED_PAGES = (8192, 4096)


def configs(opts: Options) -> list[Config]:
    """The databases of a run: depths 2-4 at MB sizes, then those of ``--set gib=1,3`` (default: none with
    ``--quick``, 1 and 3 GiB at full size) at each of :data:`SIZED_PAGES`."""
    out = [Config(4096, 3000), Config(4096, 60_000), Config(512, 60_000)] if opts.quick else \
        [Config(4096, 20_000), Config(4096, 1_000_000), Config(1024, 1_000_000)]
    given = opts.extra.get("gib")
    if given is None:
        gib = [] if opts.quick else [1.0, 3.0]
    else:
        try:
            gib = [float(g) for g in str(given).split(",") if g.strip()]
        except ValueError:
            raise InvalidArgument(f"gib must be database sizes in GiB separated by commas, got {given!r}") from None
    for g in gib:
        if not 0 < g <= 16:
            raise InvalidArgument(f"gib: database sizes in GiB must be in (0, 16], got {g}")
        out += [Config(p, sq.rows_for(int(g * 2**30)), sq.SIZED_TEXT_BYTES, True) for p in SIZED_PAGES]
    return out


@contextlib.contextmanager
def _placed(path: Path, preset: str, seed: int, image_dir: Optional[Path]) -> Iterator[tuple[Any, sq.Database, dict]]:
    """A device holding the database file at LBA: in memory, or (``image_dir``) a file-backed image there; yields the
    device, the database and the wall-clock seconds its writing took (with the image's bytes on disk after)."""
    kw = {} if image_dir is None else {"create": True}
    dev = nearflash.Device(image_dir, preset=preset, seed=seed, **kw)
    try:
        dev.attach("programs")
        image = sq.open_image(path, dev.lba_bytes)
        t = time.perf_counter()
        dev.write(LBA, np.frombuffer(image.image, np.uint8))
        dev.flush()
        wall = {"write_s": time.perf_counter() - t}
        if image_dir is not None:
            wall["image_bytes_on_disk"] = sum(f.stat().st_blocks * 512 for f in image_dir.iterdir())
            wall["image_bytes_apparent"] = sum(f.stat().st_size for f in image_dir.iterdir())
        yield dev, image, wall
    finally:
        dev.close()
        if image_dir is not None:
            shutil.rmtree(image_dir, ignore_errors=True)


def run_sqlite(exp: Experiment, opts: Options) -> None:
    presets = option(opts, "presets", ["cosmos-plus", "samsung-970pro"], ["cosmos-plus", "samsung-970pro"])
    rows_out: list[list[Any]] = []
    results: dict[str, Any] = {}
    builds: list[list[Any]] = []
    base = Path(opts.extra.get("workdir") or exp.out_dir)
    if not base.is_dir():
        if "workdir" in opts.extra:
            raise InvalidArgument(f"workdir {str(base)!r} is not an existing directory")
        base.mkdir(parents=True)
    work = Path(tempfile.mkdtemp(prefix="sqlite-work-", dir=base))  # the databases and device images
    try:
        _run(exp, opts, presets, work, rows_out, results, builds)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    exp.table("SQLite rowid lookups: in storage vs host path (latency in us, QD1 throughput in lookups/s, energy "
              "per lookup in uJ)", ["preset", "depth", "rows", "page size", "file MiB", "lookups checked",
                                    "in storage", "host cold", "host warm", "cold/storage", "predicted",
                                    "warm/storage", "storage /s", "host cold /s", "storage uJ", "host cold uJ"],
              rows_out)
    _report(exp, presets, results, builds)


def _run(exp: Experiment, opts: Options, presets: list[str], work: Path, rows_out: list, results: dict,
         builds: list) -> None:
    n_storage = option(opts, "lookups", 100, 10_000)
    n_host = option(opts, "host_lookups", 50, 1000)
    obj = programs.example("sqlite_lookup")
    for cfg in configs(opts):
        path = work / f"t-{cfg.page_size}-{cfg.rows}.db"
        t = time.perf_counter()
        sq.build(path, cfg.rows, page_size=cfg.page_size, seed=opts.seed, text_bytes=cfg.text_bytes)
        build_s = time.perf_counter() - t
        con = sqlite3.connect(path)
        last = con.execute("SELECT max(rowid) FROM t").fetchone()[0]
        rng = np.random.default_rng(opts.seed)
        ids = [int(x) for x in rng.integers(1, last + 1, n_storage)]
        for preset in presets:
            image_dir = work / f"{preset}.img" if cfg.sized else None
            with _placed(path, preset, opts.seed, image_dir) as (dev, image, wall):
                flash = [(LBA, len(image.image) // dev.lba_bytes)]
                depth = image.depth()
                programs.load(dev, 1, obj)
                programs.activate(dev, 1)
                s = _storage(dev, image, flash, ids, con, check=True)
                if s["wrong"]:
                    raise AssertionError(f"{preset}, {cfg.rows} rows: {s['wrong']} of {len(ids)} lookups differ from sqlite3")
                cold = _host(dev, obj, image, flash, ids[:n_host], [])
                warm_blocks = image.blocks_of_pages(image.interior_pages(), LBA, dev.lba_bytes)
                warm = _host(dev, obj, image, flash, ids[:n_host], warm_blocks)
                pred = predicted_ratio(dev, depth, cfg.page_size)
                db_bytes = path.stat().st_size
            if cfg.sized:
                builds.append([preset, depth, cfg.rows, cfg.page_size, db_bytes / 2**30, build_s, wall["write_s"],
                               db_bytes / 2**20 / wall["write_s"], wall["image_bytes_apparent"] / 2**30,
                               wall["image_bytes_on_disk"] / 2**30])
            mean = {k: float(np.mean(v["latency_ns"])) / 1e3 for k, v in (("s", s), ("c", cold), ("w", warm))}
            s_host = float(np.mean(s["latency_ns"][:n_host])) / 1e3
            e_s, e_c = s["energy_j"] / len(ids), cold["energy_j"] / len(cold["latency_ns"])
            mib = db_bytes / 2**20
            key = f"{preset}/depth{depth}/{cfg.page_size}B-{cfg.rows}rows"
            results[key] = {"rows": cfg.rows, "page_size": cfg.page_size, "depth": depth, "db_bytes": db_bytes,
                            "sized": cfg.sized, "lookups_checked": len(ids), "storage_us": mean["s"],
                            "host_cold_us": mean["c"], "host_warm_us": mean["w"], "predicted": pred,
                            "energy_storage_uj": e_s * 1e6, "energy_host_cold_uj": e_c * 1e6,
                            "p99_storage_us": float(np.percentile(s["latency_ns"], 99)) / 1e3,
                            "p99_host_cold_us": float(np.percentile(cold["latency_ns"], 99)) / 1e3,
                            **({"build_s": build_s, **wall} if cfg.sized else {})}
            rows_out.append([preset, depth, cfg.rows, cfg.page_size, mib, len(ids), mean["s"],
                             mean["c"], mean["w"], mean["c"] / s_host, pred["ratio"], mean["w"] / s_host,
                             1e6 / mean["s"], 1e6 / mean["c"], e_s * 1e6, e_c * 1e6])
            size = f", {mib / 1024:.2f} GiB, {cfg.page_size // 1024} KiB pages" if cfg.sized else ""
            exp.compare(f"{preset}, depth {depth}{size}: cold host / in-storage lookup latency", mean["c"] / s_host,
                        pred["ratio"], "x",
                        f"model column: host d(O+W+F) = {pred['host_us']:.0f} us over storage 2O+W'+d(F+w) = "
                        f"{pred['storage_us']:.0f} us (O = {pred['round_trip_us']:.1f} us per round trip, W = "
                        f"{pred['fw_read_us']:.1f} us firmware per Read, F = {pred['page_us']:.1f} us per page; "
                        "docs/programs.md)",
                        reference="model", better="higher")
            exp.compare(f"{preset}, depth {depth}{size}: cold host / in-storage lookup latency vs XRP",
                        mean["c"] / s_host, 2.5, "x", "XRP (OSDI'22): up to 2.5x throughput for BPF-KV B+-tree lookups",
                        comparable=False,
                        why_not_comparable="XRP's device is an Intel Optane SSD (reads of a few us), where the kernel "
                        "round trip is most of a hop; on these NAND presets a page read (36-83 us) is")
        con.close()
        path.unlink()


def _report(exp: Experiment, presets: list[str], results: dict[str, Any], builds: list[list[Any]]) -> None:
    if builds:
        exp.table("GB databases: building with sqlite3 and writing to a file-backed device image, wall-clock seconds on "
                  "this machine (the image is sparse: only the database's pages are written)",
                  ["preset", "depth", "rows", "page size", "file GiB", "build s", "write s", "write MiB/s",
                   "image GiB (apparent)", "image GiB (on disk)"], builds)
        _size_table(exp, results)
    exp.record("results", results)
    exp.note("Every in-storage lookup's record equals sqlite3's row (checked, lookups checked column); the host path "
             "runs the same program, so its answers are the same walk's.")
    exp.note("In storage a lookup is one Execute Program and one Memory Read of the record; the host path makes one "
             "Read per level (cold) or one Read for the leaf with the interior pages in its page cache (warm).")
    exp.note("Throughput is at queue depth 1 (one lookup after another): 1 / mean latency.")
    fig, ax = exp.figure("sqlite", width=7, height=4)
    for preset in presets:
        pts = sorted((v["depth"], v["storage_us"], v["host_cold_us"], v["host_warm_us"])
                     for k, v in results.items() if k.startswith(preset + "/") and not v["sized"])
        d = [p[0] for p in pts]
        ax.plot(d, [p[1] for p in pts], "o-", label=f"{preset} in storage")
        ax.plot(d, [p[2] for p in pts], "s--", label=f"{preset} host cold")
        ax.plot(d, [p[3] for p in pts], "^:", label=f"{preset} host warm")
    ax.set_xlabel("B-tree depth (MB databases)")
    ax.set_ylabel("mean lookup latency (us)")
    ax.legend(fontsize=7)
    if builds:
        fig, ax = exp.figure("sqlite_size", width=7, height=4)
        for (preset, depth, blocks), group in _by(results, _level_key).items():
            ax.plot([v["db_bytes"] / 2**20 for v in group], [v["storage_us"] for v in group], "o-",
                    label=f"{preset}, depth {depth}, {blocks} block(s) per page")
        ax.set_xscale("log")
        ax.set_xlabel("database file (MiB)")
        ax.set_ylabel("mean in-storage lookup latency (us)")
        ax.legend(fontsize=7)


def _size_table(exp: Experiment, results: dict[str, Any]) -> None:
    """Lookup latency against the file's size at one depth, preset and flash read per level (a page of up to 4
    KiB is one block): the spread across sizes, beside the step one more level makes."""
    rows = []
    for (preset, depth, blocks), group in _by(results, _level_key).items():
        if len(group) < 2:
            continue
        st = [v["storage_us"] for v in group]
        co = [v["host_cold_us"] for v in group]
        rows.append([preset, depth, blocks, ", ".join(f"{v['db_bytes'] / 2**20:,.0f}" for v in group),
                     ", ".join(str(v["page_size"]) for v in group), min(st), max(st), max(st) / min(st) - 1,
                     min(co), max(co), max(co) / min(co) - 1])
    exp.table("Lookup latency by file size at one depth (us; spread = max/min - 1)",
              ["preset", "depth", "4 KiB blocks per page", "file MiB", "page sizes", "in storage min", "max",
               "spread", "host cold min", "max", "spread"], rows)
    exp.record("latency_by_size", [dict(zip(["preset", "depth", "blocks_per_page", "file_mib", "page_sizes",
                                              "storage_min_us", "storage_max_us", "storage_spread", "cold_min_us",
                                              "cold_max_us", "cold_spread"], r)) for r in rows])


def _level_key(v: dict[str, Any]) -> tuple[str, int, int]:
    """What sets a lookup's time: preset, depth and the 4 KiB blocks a page read moves."""
    return v["preset"], v["depth"], -(-v["page_size"] // 4096)


def _by(results: dict[str, Any], key: Any) -> dict[Any, list[dict[str, Any]]]:
    out: dict[Any, list[dict[str, Any]]] = {}
    for k, v in results.items():
        out.setdefault(key({**v, "preset": k.split("/")[0]}), []).append(v)
    return {k: sorted(g, key=lambda v: v["db_bytes"]) for k, g in sorted(out.items())}
