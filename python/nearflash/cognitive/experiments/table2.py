"""Table 2: ordinary fio-like 128 KiB I/O while DLG-x hashes query after query, with the runtime waiting for DLG-x
by Method A (blocking) or Method B (doorbell + polling), against the same I/O with DLG-x idle (peak). Method B runs
three times: as the firmware's defaults (DLG-x's weight reads a flash class taking work-conserving turns with the
host's reads on the dies at the declared share, `weight_stream_share` = 2, the medium host queues' weight, and column
reads of each layer's weight bytes, `weight_reads = column`), with DLG-x's weight stream first (share 0: the urgent
level), and with whole weight pages (`weight_reads = page`), to show what each does. All are measured in one run on
the same device model."""

from __future__ import annotations

import numpy as np

from nearflash import _native
from nearflash.cognitive.data import fashion_mnist
from nearflash.cognitive.experiments.setup import deployed
from nearflash.experiment import Experiment, Options

#: Table 2 (MB/s): Method A, Method B, peak for write / randwrite / read / randread.
PAPER = {
    "write": (79.79, 524.86, 886.58),
    "randwrite": (76.19, 421.23, 761.90),
    "read": (72.30, 654.31, 903.79),
    "randread": (81.13, 698.98, 901.41),
}
BLOCK = 128 * 1024
REGION = 512 * 1024 * 1024
#: Database items deployed: Table 2's DLG-x only hashes, so the graph just has to exist (the weights and their
#: layout do not depend on it).
DB_ITEMS = 100
#: The runs of one workload: (method, firmware parameters).
MODES = {"peak": ("B", {}), "A": ("A", {}), "B": ("B", {}), "B_stream_first": ("B", {"weight_stream_share": 0}),
         "B_page": ("B", {"weight_reads": "page"})}


def fio_like(ssd, workload: str, window_ns: int, depth: int, dlgx_images, step_ns: int, seed: int) -> tuple[float, int]:
    """(MB/s of `workload` over the window, DLG-x tasks completed); DLG-x keeps one DLG_hashing of `dlgx_images`
    in flight all along when given."""
    dev = ssd.device.native
    q = ssd.device.queue(depth=depth).qid
    nlb = BLOCK // ssd.device.lba_bytes
    blocks = REGION // BLOCK
    rng = np.random.default_rng(seed)
    write = "write" in workload
    seq = 0
    end = dev.now_ns + window_ns
    inflight, done_bytes, tasks, dlg_busy = 0, 0, 0, False
    while dev.now_ns < end:
        while inflight < depth:
            b = int(rng.integers(blocks)) if workload.startswith("rand") else seq % blocks
            seq += 1
            cid = dev.next_cid(q)
            if write:
                dev.submit_write(q, cid, b * nlb, nlb, None)
            else:
                dev.submit_read(q, cid, b * nlb, nlb, None)
            inflight += 1
        if dlgx_images is not None and not dlg_busy:
            ssd.submit_hashing(dlgx_images)
            dlg_busy = True
        dev.advance(step_ns)
        for c in dev.reap(q):
            inflight -= 1
            if (c[1], c[2]) == (0, 0) and c[4] <= end:
                done_bytes += BLOCK
        if dlg_busy and ssd.queue.reap(raise_errors=False):
            dlg_busy, tasks = False, tasks + 1
    while inflight:
        dev.wait(q)
        inflight -= 1
    while dlg_busy and ssd.queue.wait(raise_errors=False) is None:
        pass
    return done_bytes / (window_ns / 1e9) / 1e6, tasks


def dlgx_load(ssd) -> dict:
    """What DLG-x asked of the flash while it ran (from the firmware's counters since the last reset): images
    hashed per second of DLG-x busy time, weight reads (pages sensed) and weight bytes moved per image, and the
    share of every channel's time its weight transfers took (bytes at the channel rate; the Change Read Column of
    a column read, 0.3 us against 5 us or more of data, is left out)."""
    st = ssd.report()["stats"]
    busy_s = st["dlgx_busy_ns"] / 1e9
    if not busy_s or not st["hashed_images"]:
        return {"images_per_s": 0.0, "pages_per_image": 0.0, "bytes_per_image": 0.0, "channel_share": 0.0}
    p = {name: (float(v), unit) for name, v, unit, _ in _native.cognitive.parameters() if name in ("channel_bw", "channels")}
    assert p["channel_bw"][1] == "MB/s", "unit of the DLG-x side's channel rate"
    xfer_s = st["weight_bytes_read"] / (p["channel_bw"][0] * 1e6)
    return {
        "images_per_s": st["hashed_images"] / busy_s,
        "pages_per_image": st["weight_pages_read"] / st["hashed_images"],
        "bytes_per_image": st["weight_bytes_read"] / st["hashed_images"],
        "channel_share": xfer_s / (busy_s * p["channels"][0]),
    }


def run_table2(exp: Experiment, opts: Options) -> None:
    window_ms = float(opts.extra.get("window_ms", 60 if opts.quick else 300))
    depth = int(opts.extra.get("depth", 16))
    per_task = int(opts.extra.get("images_per_task", 32))
    workloads = str(opts.extra.get("workloads", "read,randread" if opts.quick else "write,randwrite,read,randread")).split(",")
    for w in workloads:  # all checked before the first run
        if w not in PAPER:
            raise ValueError(f"workloads: {w!r}; one of {', '.join(PAPER)}")
    images, _ = fashion_mnist("test", per_task)
    rows, results = [], {}
    for w in exp.steps(workloads):
        got, load = {}, {}
        for mode, (method, params) in MODES.items():
            ssd, _ = deployed(DB_ITEMS, method=method, seed=opts.seed, params=params)
            if "read" in w:  # the region the reads touch is written first (timing only), as fio's file is
                fio_like(ssd, "write", int(REGION / 400e6 * 1e9), depth, None, 50_000, opts.seed)
                ssd.device.flush()
                ssd.device.advance(50_000_000)
            ssd.device.reset_stats()
            got[mode] = fio_like(ssd, w, int(window_ms * 1e6), depth, None if mode == "peak" else images, 20_000, opts.seed)
            load[mode] = dlgx_load(ssd)
        a, b, b0, bp, peak = got["A"][0], got["B"][0], got["B_stream_first"][0], got["B_page"][0], got["peak"][0]
        pa, pb, pp = PAPER[w]
        results[w] = {"A": a, "B": b, "B_stream_first": b0, "B_page": bp, "peak": peak, "tasks_A": got["A"][1],
                      "tasks_B": got["B"][1], "tasks_B_stream_first": got["B_stream_first"][1], "tasks_B_page": got["B_page"][1],
                      "dlgx_load_B": load["B"], "dlgx_load_B_stream_first": load["B_stream_first"],
                      "dlgx_load_B_page": load["B_page"]}
        rows.append([w, a, b, b0, bp, peak, b / peak, b0 / peak, bp / peak, a / peak, got["A"][1], got["B"][1],
                     got["B_stream_first"][1],
                     load["B"]["channel_share"], load["B_page"]["channel_share"], pa, pb, pp, pb / pp])
        exp.compare(f"{w}: Method B / peak bandwidth", b / peak, pb / pp, "ratio", "issue: B keeps at least half the peak")
        exp.compare(f"{w}: Method B with whole weight pages / peak", bp / peak, pb / pp, "ratio")
        exp.compare(f"{w}: Method A / peak bandwidth", a / peak, pa / pp, "ratio")
    exp.table("128 KiB fio-like I/O under continuous DLG-x hashing (MB/s)",
              ["workload", "Method A", "Method B", "B, stream first", "B, whole pages", "peak", "B/peak",
               "B stream first/peak", "B whole pages/peak", "A/peak", "DLG-x tasks A", "DLG-x tasks B",
               "DLG-x tasks B stream first",
               "DLG-x channel share B", "same, whole pages", "paper A", "paper B", "paper peak", "paper B/peak"], rows)
    exp.table("DLG-x's load while it ran (Method B)",
              ["workload", "images/s", "weight reads/image", "weight KiB/image", "share of channel time",
               "same, stream first", "images/s, whole pages", "KiB/image, whole pages", "share, whole pages"],
              [[w, r["dlgx_load_B"]["images_per_s"], r["dlgx_load_B"]["pages_per_image"],
                r["dlgx_load_B"]["bytes_per_image"] / 1024, r["dlgx_load_B"]["channel_share"],
                r["dlgx_load_B_stream_first"]["channel_share"], r["dlgx_load_B_page"]["images_per_s"],
                r["dlgx_load_B_page"]["bytes_per_image"] / 1024, r["dlgx_load_B_page"]["channel_share"]]
               for w, r in results.items()])
    exp.record("bandwidth", results)
    exp.note(f"Queue depth {depth}, {window_ms:g} ms of device time per point, {per_task} Fashion-MNIST image(s) per "
             "DLG_hashing, one task in flight at a time (resubmitted when it completes): DLG-x is never idle, as in the "
             "paper's worst case. Reads touch a 512 MiB region written beforehand. The device is Cosmos+ (8 channels x "
             "8 ways) with 32 blocks per plane.")
    exp.note("Method A books every controller core from dispatch to the task's end (the runtime waits); Method B books "
             "a status poll every poll_interval (10 us, assumed). In both, DLG-x's weight reads are a flash class of "
             "their own (cognitive.weights) sharing the dies with the I/O by the scheduler's work-conserving round robin "
             "at the declared share (weight_stream_share = 2, the medium host queues' weight: one for one when both "
             "wait on a die, all of it when the I/O does not); 'B, stream first' is share 0, the urgent level. The "
             "channels are not shared by class: a sensed page waits for its channel in request order, so a weight read "
             "queues behind the data-outs of the host reads ahead of it, whatever its share on the die.")
    exp.note("DLG-x reads each weighted layer's bytes (Eq. 3's S_k/M per channel) with column reads (weight_reads = "
             "column: the page is sensed, only the 1 KiB ECC codewords holding the layer cross the channel, after a "
             "Change Read Column, nand.t_column_change); 'B, whole pages' is Method B with weight_reads = page, every "
             "page a layer touches moved whole (the Fashion CNN's four layers share one page per channel, so each "
             "image moved that page four times).")
    exp.note("DLG-x tasks completed in the window (one 32-image task in flight at a time) say what the reads' "
             "bandwidth cost it: at equal turns on the dies its weight reads still queue for the channels behind the "
             "reads' 16 KiB data-outs, so it finishes few tasks; with the stream first it keeps its pace and the reads "
             "keep about 0.7 of the peak.")
    fig, ax = exp.figure("table2_methods", width=8)
    x = np.arange(len(rows))
    for i, (name, col) in enumerate([("Method A", 1), ("Method B", 2), ("B, stream first", 3), ("B, whole pages", 4), ("peak", 5)]):
        ax.bar(x + (i - 2) * 0.16, [r[col] for r in rows], 0.16, label=name)
    ax.set_xticks(x, [r[0] for r in rows])
    ax.set_ylabel("MB/s")
    ax.legend()
    ax.set_title("128 KiB I/O while DLG-x hashes continuously")
