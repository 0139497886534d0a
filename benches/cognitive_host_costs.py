"""Per-operation costs of the Cognitive SSD's host-CPU baselines on a reference machine, measured once and stored as
the `host_*` parameters of `crates/nearflash-cognitive/src/params.rs` (with the date, this method and the machine in
their source). The experiments cost the baselines as counted work (MACs, Hamming distances, graph-search steps)
times these, so their comparisons do not move with this machine's load; this script is how the numbers were got and
how to get them again on another machine.

What is timed, on one thread (BLAS, OpenMP and rayon pinned to one), as thread CPU time, the least of `--repeats`
runs (the run least disturbed by other processes on a shared machine):

- **hashing**: the Fashion CNN in int8 by numpy/BLAS (`nearflash.cognitive.host_int8`, im2col + one matrix product
  per layer; its codes are checked equal to the crate's executor bit for bit), one image at a time as a served query
  is, and in batches of 16; per MAC. The crate's own executor (direct loops) is timed beside it for reference.
- **brute force**: top-T by Hamming distance over the database's 48-bit codes: numpy (XOR, `bitwise_count`,
  `argpartition`), the crate's Rust scan, and FAISS's `IndexBinaryFlat` when `faiss` is importable (`pip install
  faiss-cpu`, the `baselines` extra); per code scanned, the fastest kept.
- **graph search**: the GSE's algorithm on the host (the crate's Rust code, pages in DRAM), per neighbour step.

    .venv/bin/python benches/cognitive_host_costs.py [--db 10000] [--queries 64] [--repeats 7] [--out DIR]

Prints the measured costs and the parameter lines; writes `cognitive_host_costs.json` under `--out`.
"""

from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable  # noqa: E402

import numpy as np  # noqa: E402

from nearflash import _native  # noqa: E402
from nearflash.cognitive import fashion_mnist, load_model  # noqa: E402
from nearflash.cognitive.host_int8 import Int8Network  # noqa: E402


def least_cpu_ns(fn: Callable[[], Any], repeats: int) -> float:
    """The least thread CPU time (ns) of `repeats` calls."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.thread_time_ns()
        fn()
        best = min(best, time.thread_time_ns() - t0)
    return best


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} logical CPUs, {platform.system()} {platform.release()}, Python {platform.python_version()}"


def numpy_brute_force(codes: np.ndarray, query: int, t: int) -> np.ndarray:
    d = np.bitwise_count(codes ^ np.uint64(query))
    top = np.argpartition(d, t - 1)[:t]
    return top[np.lexsort((top, d[top]))]


def at_least(low: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least `low`."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"{v}: at least {low}")
        return v

    return parse


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # the graph search is timed up to T = 1000, and the int8 scales are calibrated on 1000 images
    ap.add_argument("--db", type=at_least(1000), default=10000, help="database images (train split), 1000 to 60000")
    ap.add_argument("--queries", type=at_least(1), default=64, help="query images (test split), 1 to 10000")
    ap.add_argument("--repeats", type=at_least(1), default=7)
    ap.add_argument("--out", default=".")
    a = ap.parse_args(argv)
    if a.db > 60000 or a.queries > 10000:
        ap.error(f"--db {a.db} / --queries {a.queries}: Fashion-MNIST has 60000 train and 10000 test images")
    db, _ = fashion_mnist("train", a.db)
    qs, _ = fashion_mnist("test", a.queries)
    model = load_model()
    q8 = model.quantise(db[:1000])
    net = Int8Network(q8)
    macs = net.macs()
    codes = net.hash(db)
    q_codes = net.hash(qs)
    if not np.array_equal(q_codes, q8.hash(qs)):
        raise SystemExit("numpy executor's codes differ from the crate's: not the same network")

    one_ns = least_cpu_ns(lambda: [net.hash(q[None, :]) for q in qs], a.repeats) / len(qs)
    batch_ns = least_cpu_ns(lambda: net.hash(qs, batch=16), a.repeats) / len(qs)
    crate_ns = least_cpu_ns(lambda: [q8.hash(q[None, :]) for q in qs[:16]], max(2, a.repeats // 2)) / 16

    t = 200
    bf = {"numpy": least_cpu_ns(lambda: [numpy_brute_force(codes, int(c), t) for c in q_codes], a.repeats),
          "nearflash (Rust)": least_cpu_ns(lambda: [_native.cognitive.brute_force(codes, int(c), t) for c in q_codes],
                                           a.repeats)}
    try:
        import faiss  # optional: pip install faiss-cpu

        faiss.omp_set_num_threads(1)
        index = faiss.IndexBinaryFlat(model.bits)
        index.add(codes.view(np.uint8).reshape(-1, 8)[:, : model.bits // 8].copy())
        qb = q_codes.view(np.uint8).reshape(-1, 8)[:, : model.bits // 8].copy()
        bf["faiss IndexBinaryFlat"] = least_cpu_ns(lambda: index.search(qb, t), a.repeats)
    except ImportError:
        pass
    bf_impl = min(bf, key=bf.get)
    per_code = {k: v / len(qs) / len(codes) for k, v in bf.items()}

    graph = _native.cognitive.Graph(codes, model.bits, 25, 1)
    pages = graph.pages("plain")
    graph.host_search(q_codes[:1], t, "plain", pages)  # the plain pages are generated once, outside the timing
    steps = {}
    for tt in (50, 200, 1000):
        _, st = graph.host_search(q_codes, tt, "plain", pages)
        ns = least_cpu_ns(lambda: graph.host_search(q_codes, tt, "plain", pages), a.repeats)
        steps[tt] = (ns, int(st["neighbour_steps"].sum()), int(st["expansions"].sum()))
    per_step = sum(v[0] for v in steps.values()) / sum(v[1] for v in steps.values())

    date = datetime.date.today().isoformat()
    where = machine()
    res = {
        "date": date, "machine": where, "numpy": np.__version__,
        "blas": np.show_config(mode="dicts").get("Build Dependencies", {}).get("blas", {}).get("name", "?"),
        "database": len(codes), "queries": len(qs), "repeats": a.repeats,
        "hash": {"macs_per_image": macs, "numpy_one_image_ns": one_ns, "numpy_batched16_ns": batch_ns,
                 "crate_executor_one_image_ns": crate_ns, "ns_per_mac_one_image": one_ns / macs,
                 "ns_per_mac_batched": batch_ns / macs},
        "brute_force": {"t": t, "ns_per_code": per_code, "fastest": bf_impl},
        "graph_search": {"per_t": {str(k): {"ns": v[0], "neighbour_steps": v[1], "expansions": v[2]}
                                   for k, v in steps.items()}, "ns_per_step": per_step},
    }
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "cognitive_host_costs.json").write_text(json.dumps(res, indent=2))
    print(json.dumps(res, indent=2))
    how = (f"measured {date} by benches/cognitive_host_costs.py on {where}, one thread, least thread CPU time of "
           f"{a.repeats} runs")
    print("\n# params.rs lines (host baselines):")
    print(f'host_mac_time: Time = {one_ns / macs:.4g}, "ns", "{how}: numpy {np.__version__}/BLAS int8 Fashion CNN '
          f'one image at a time {one_ns / 1e6:.3f} ms / {macs} MACs (batched 16: {batch_ns / macs:.3g} ns/MAC; the '
          f'crate executor {crate_ns / 1e6:.2f} ms)";')
    print(f'host_hamming_time: Time = {per_code[bf_impl]:.4g}, "ns", "{how}: {bf_impl} top-{t} of {len(codes)} '
          f'48-bit codes, per code ({", ".join(f"{k} {v:.3g}" for k, v in per_code.items())})";')
    print(f'host_graph_step_time: Time = {per_step:.4g}, "ns", "{how}: the GSE algorithm in Rust on the host, plain '
          f'pages in DRAM, {len(codes)} codes, T = 50/200/1000, per neighbour step";')


if __name__ == "__main__":
    main()
