"""Fig. 13: ordinary read throughput under a stream of ISC requests, with NICE's coroutine scheduling and without
(paper Sec. V-B: an SSD benchmark of 256 KB reads, 8T8Q and 16T16Q, 615 MB, while the host issues ISC commands at
various IOPS; with scheduling the reads lose less, and the ISC task costs 19.5 ms vs 20.78 ms, ~5%).

Same device, same image, two firmware settings (`--ext nice:{"scheduling": ...}`):
* coroutine (NICE): the A53 decodes and locates, the Cortex-R5 issues the flash transfers, the FPGA's interrupt wakes
  the A53; the A53 cores stay free for ordinary I/O in between;
* polling (no scheduling): each ISC request runs to completion on one A53 core, which issues its page transactions
  and spins until NICE-K is done.
The benchmark: T threads, each with its own queue and one 256 KiB Read outstanding (T = 8 or 16: "8T8Q", "16T16Q"),
reading a file of the ext4 image front to back (wrapping) until `bench_mib` are read. ISC: NICE-K (op 3) over an
int16 embedding file, issued by one more thread at a fixed rate (up to `isc_depth` in flight; a request whose turn
comes while that many are in flight waits). Virtual time advances in `step_us` steps; the throughput is bytes read
over the virtual time the benchmark took.

The ISC-priority switch (`isc_priority`, NICE's flash class relative to the host queues'): above (the paper's "we
prioritize" ISC requests, Sec. IV-C), equal or below; each setting is a full set of the series (`--set
isc_priority=above,equal,below`, all three by default).

A control series ("host reads") replaces each ISC request by an ordinary Read of the same file's blocks on the
coroutine firmware, at the same rate and depth: the NAND bytes an ISC request takes, without the in-storage path. The
ordinary reads' loss under it is what any reader of that file would cost them; what ISC costs beyond it is the
intrusiveness of the in-storage path (its firmware work, hand-offs and accelerator), the figure that shows whether
NICE is "non-intrusive"."""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path

import numpy as np

from nearflash.device import Device
from nearflash.experiment import Experiment, Options
from nearflash.nice.experiments.common import OP_KNN, PRESET, SHRINK, cap, debugfs, make_image
from nearflash.recssd.experiments.common import option

#: Paper Sec. V-B: the ISC task's latency with / without coroutine scheduling (ms).
PAPER_ISC_MS = (20.78, 19.5)
#: The paper's benchmark reads 615 MB in 256 KB reads.
READ_BLOCKS = 64
K = 128
#: The series: NICE's firmware, run to completion, and the control (ordinary Reads of the ISC's file, coroutines).
CONTROL = "host reads"
SERIES = ("coroutine", "polling", CONTROL)
#: The ISC-priority switch's settings; the paper prioritises ISC requests (Sec. IV-C).
PRIORITIES = ("above", "equal", "below")
PAPER_PRIORITY = "above"


def _key(threads: int, prio: str, sched: str, rate) -> str:
    """A point's name: the control series is named without a priority (ordinary Reads keep their queue's class)."""
    return f"{threads}T/{sched}/{rate}" if sched == CONTROL else f"{threads}T/{prio}/{sched}/{rate}"


def _runs(blocks: list[int], n: int) -> list[tuple[int, int]]:
    """The file's blocks as Reads of up to `n` consecutive LBAs."""
    out, i = [], 0
    while i < len(blocks):
        j = i + 1
        while j < len(blocks) and j - i < n and blocks[j] == blocks[j - 1] + 1:
            j += 1
        out.append((blocks[i], j - i))
        i = j
    return out


def _device(image: bytes, scheduling: str, threads: int, wake: str = "auto", isc_priority: str = PAPER_PRIORITY) -> Device:
    # One queue per benchmark thread plus the ISC issuer's (the preset's 16 covers the paper's 16T16Q alone).
    dev = Device(None, preset=PRESET, max_queues=max(16, threads + 1), **SHRINK)
    dev.attach("nice", scheduling=scheduling, wake=wake, isc_priority=isc_priority)
    bs = dev.lba_bytes
    buf = np.frombuffer(image + b"\0" * ((-len(image)) % bs), dtype=np.uint8)
    for off in range(0, buf.size, 1 << 20):
        dev.write(off // bs, buf[off : off + (1 << 20)])
    dev.flush()
    dev.advance(1_000_000_000)  # let the image's programs finish before measuring
    return dev


def _bind(dev: Device, head: int, block: bytes) -> tuple[int, int]:
    """NICE_Write of the op block at the file's hyper-address; the ISC request to issue (a one-block Read there)."""
    bs = dev.lba_bytes
    isc_lba = cap(dev) + head
    dev.write(isc_lba, np.frombuffer(block + b"\0" * (bs - len(block)), dtype=np.uint8))
    dev.advance(1_000_000_000)  # the first invocation learnt the image and wrote the OOB lists: let that finish
    return isc_lba, 1


def _run(dev: Device, runs: list[tuple[int, int]], request: tuple[int, int], threads: int, isc_iops: float,
         bench_bytes: int, isc_depth: int, step_ns: int) -> dict:
    """The benchmark with `request` (a Read: LBA, blocks) issued at `isc_iops`: throughput, the requests' latencies,
    and what the firmware counted."""
    bs = dev.lba_bytes
    before = dict(dev.report().extensions["nice"])
    qs = [dev.queue(depth=1) for _ in range(threads)]
    iq = dev.queue(depth=isc_depth)
    t0 = dev.now_ns
    next_isc = t0
    gap = 1e9 / isc_iops if isc_iops > 0 else None
    pos, read, submitted = 0, 0, 0
    isc_sent: dict[int, int] = {}
    isc_lat: list[int] = []
    pending: dict[tuple[int, int], int] = {}
    last = t0
    while read < bench_bytes or any(q.in_flight for q in qs):
        for q in qs:
            for c in q.reap():
                read += pending.pop((q.qid, c.cid))
                last = max(last, c.time_ns)
            if q.in_flight == 0 and submitted < bench_bytes:
                lba, n = runs[pos % len(runs)]
                pos += 1
                pending[(q.qid, q.submit_read(lba, n, None))] = n * bs
                submitted += n * bs
        for c in iq.reap():
            isc_lat.append(c.time_ns - isc_sent.pop(c.cid))
        while gap is not None and dev.now_ns >= next_isc and submitted < bench_bytes:
            if iq.in_flight < isc_depth:
                isc_sent[iq.submit_read(*request, None)] = dev.now_ns
            next_isc += gap
        dev.advance(step_ns)
    for c in iq.wait_all():
        isc_lat.append(c.time_ns - isc_sent.pop(c.cid))
    after = dict(dev.report().extensions["nice"])
    for q in qs + [iq]:
        q.close()
    return {
        "mb_per_s": read / max(1, last - t0) * 1e3,
        "isc_done": len(isc_lat),
        "isc_ms": float(np.mean(isc_lat)) / 1e6 if isc_lat else None,
        "polling_ms": (after["polling_ns"] - before["polling_ns"]) / 1e6,
        "isc_shared_sectors": after["isc_shared_sectors"] - before["isc_shared_sectors"],
    }


def _alone(dev: Device, request: tuple[int, int]) -> float:
    """The request's latency on an idle device (ms), mean of five."""
    lat = []
    for _ in range(5):
        t = dev.now_ns
        dev.read(*request)
        lat.append(dev.now_ns - t)
    return float(np.mean(lat)) / 1e6


def run_fig13(exp: Experiment, opts: Options) -> None:
    modes = option(opts, "threads", [8], [8, 16])
    rates = option(opts, "isc_iops", [0, 2000, 8000], [0, 500, 1000, 2000, 4000, 6000, 8000])
    bench_mib = option(opts, "bench_mib", 24, 615)
    file_kib = option(opts, "isc_file_kib", 256, 256)
    isc_depth = option(opts, "isc_depth", 16, 16)
    step_ns = int(option(opts, "step_us", 20.0, 20.0) * 1000)
    # Wake-up of both firmwares (auto: interrupts with coroutines, polling with run to completion, the paper's pair).
    wake = option(opts, "wake", "auto", "auto")
    if wake not in ("auto", "interrupt", "polling"):
        raise ValueError(f"wake={wake!r}: auto, interrupt or polling")
    prios = option(opts, "isc_priority", list(PRIORITIES), list(PRIORITIES))
    for p in prios:
        if p not in PRIORITIES:
            raise ValueError(f"isc_priority={p!r}: one or more of {', '.join(PRIORITIES)}")
    d = 16
    rng = np.random.default_rng(opts.seed)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        emb = rng.integers(-2000, 2000, (file_kib * 1024 // (2 * d), d)).astype("<i2")
        (root / "emb.bin").write_bytes(emb.tobytes())
        (root / "bench.bin").write_bytes(rng.integers(0, 256, 32 << 20, dtype=np.uint8).tobytes())
        image = make_image(root, 48)
        img = Path(tmp) / "fs.img"
        emb_blocks = [int(b) for b in debugfs(img, ["blocks /emb.bin"])[0].split()]
        head = emb_blocks[0]
        if emb_blocks != list(range(head, head + len(emb_blocks))):
            raise RuntimeError(f"emb.bin is not one extent ({emb_blocks}): the host-read control needs one Read")
        bench_blocks = [int(b) for b in debugfs(img, ["blocks /bench.bin"])[0].split()]
        runs = _runs(bench_blocks, READ_BLOCKS)
        q = rng.integers(-2000, 2000, d)
        block = bytes([OP_KNN, 16]) + struct.pack("<HHH", d, K, 0) + q.astype("<i4").tobytes()
        points, rows = {}, []
        for threads in modes:
            for prio in prios:
                for sched in SERIES:
                    if sched == CONTROL and prio != prios[0]:
                        continue  # ordinary Reads keep their queue's class: the control is the same at every setting
                    dev = _device(image, "coroutine" if sched == CONTROL else sched, threads, wake, prio)
                    for rate in exp.steps(rates):
                        if sched == CONTROL:
                            dev.advance(1_000_000_000)
                            request = (head, len(emb_blocks))
                        else:
                            request = _bind(dev, head, block)
                        r = _run(dev, runs, request, threads, rate, bench_mib << 20, isc_depth, step_ns)
                        points[_key(threads, prio, sched, rate)] = r
                        rows.append([f"{threads}T{threads}Q", "-" if sched == CONTROL else prio, sched, rate,
                                     r["mb_per_s"], r["isc_done"], r["isc_ms"], r["polling_ms"],
                                     r["isc_shared_sectors"]])
                    points[_key(threads, prio, sched, "alone")] = _alone(dev, request)
                    dev.close()
    exp.table("Ordinary 256 KiB read throughput (MB/s) under ISC load; ISC = NICE-K over a "
              f"{file_kib} KiB int16 file (D = {d}, K = {K})",
              ["mode", "ISC priority", "firmware", "ISC IOPS (offered)", "read MB/s", "ISC done", "ISC latency (ms)",
               "A53 spinning (ms)", "ISC sectors shared"], rows)
    exp.record("points", points)
    top = max(rates)
    for threads in modes:
        ctl = {r: points[_key(threads, prios[0], CONTROL, r)]["mb_per_s"] for r in rates}
        for prio in prios:
            pts = {(s, r): points[_key(threads, prio, s, r)]["mb_per_s"] for s in SERIES for r in rates
                   if s != CONTROL}
            for s in SERIES:
                base = ctl[0] if s == CONTROL else pts.get((s, 0))
                if base and (s != CONTROL or prio == prios[0]):
                    got = ctl[top] if s == CONTROL else pts[(s, top)]
                    label = "ordinary Reads" if s == CONTROL else f"ISC {prio}"
                    exp.compare(f"{threads}T{threads}Q read throughput loss at {top} ISC IOPS, {s} ({label})",
                                100 * (1 - got / base), None, "%")
            for s in ("coroutine", "polling"):
                beyond = 1 - pts[(s, top)] / ctl[top]
                exp.compare(f"{threads}T{threads}Q read throughput loss at {top} ISC IOPS beyond host reads of the "
                            f"same bytes, ISC {prio}, {s}", 100 * beyond, None, "%",
                            "what the in-storage path costs the ordinary reads beyond the NAND bytes it reads")
        co, po = (points[_key(threads, PAPER_PRIORITY if PAPER_PRIORITY in prios else prios[0], s, "alone")]
                  for s in ("coroutine", "polling"))
        exp.compare("ISC task latency alone, with / without scheduling", co / po, PAPER_ISC_MS[0] / PAPER_ISC_MS[1], "x",
                    f"{co * 1e3:.0f} us vs {po * 1e3:.0f} us (paper: 20.78 ms vs 19.5 ms, their ratio)",
                    reference="paper-derived")
    exp.note(f"device: {PRESET} shrunk in blocks only ({SHRINK}); the benchmark file and the embedding file are "
             "on a mke2fs image copied in with ordinary Writes; the benchmark reads bench_mib (paper: 615 MB)")
    exp.note(f"wake-up: {wake} (--set wake=interrupt|polling applies one to both firmwares; auto is interrupts with "
             "coroutines and polling with run to completion)")
    exp.note(f"ISC priority (NICE's flash class against the host queues'): {', '.join(prios)}; the paper "
             "prioritises ISC requests (Sec. IV-C), so 'above' is its setting; ordinary Reads keep their queue's class "
             "(the control series is run once)")
    exp.note("the paper gives no ISC task or rates; ours is NICE-K over a small file so that ISC requests are "
             "short and many, and each is issued as it comes due (up to isc_depth in flight)")
    fig, axes = exp.figure("fig13", 5.5 * len(modes), 4.2, ncols=len(modes))
    axes = np.atleast_1d(axes)
    styles = {"above": "-", "equal": "-.", "below": ":"}
    for ax, threads in zip(axes, modes):
        for prio in prios:
            for s, m, label in (("coroutine", "o", "coroutine"), ("polling", "s", "polling")):
                ax.plot(rates, [points[_key(threads, prio, s, r)]["mb_per_s"] for r in rates], marker=m,
                        label=f"{label}, ISC {prio}", linestyle=styles[prio])
        ax.plot(rates, [points[_key(threads, prios[0], CONTROL, r)]["mb_per_s"] for r in rates], marker="^",
                label="control: host reads of the ISC's file", linestyle="--", color="grey")
        ax.set(title=f"Fig. 13: {threads}T{threads}Q, 256 KiB reads", xlabel="ISC IOPS offered",
               ylabel="ordinary read MB/s")
        ax.legend(fontsize=7)
