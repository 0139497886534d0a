"""Host-side functional SparseLengthsSum throughput: nearflash's Rust SLS (``nearflash._native.recssd.sls``)
against numpy fancy-index-and-sum and, when installed, ``torch.nn.functional.embedding_bag(mode="sum")``, all
measured in this run, beside a memory-bandwidth roofline measured in this run (numpy copy and sum of a large
array). Throughput is in GB/s of rows gathered: ``len(indices) x dim x 4 B / time``.

Not a test. Usage::

    .venv/bin/python benches/recssd_sls_host.py [--quick] [--json out.json]

The script re-runs itself with ``RAYON_NUM_THREADS=1`` (unless ``--single`` is given) so the single-thread Rust
figure sits beside numpy's single-thread one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from roofline import median_time as _best_of, roofline  # noqa: E402


def numpy_sls(table: np.ndarray, idx: np.ndarray, off: np.ndarray) -> np.ndarray:
    # Fixed-length bags here, so reduceat is exact (no empty bags).
    return np.add.reduceat(table[idx], off, axis=0)


def run(quick: bool) -> dict:
    from nearflash._native import recssd as rs

    try:
        import torch
        import torch.nn.functional as tf
    except ImportError:
        torch = None
    repeats = 3 if quick else 7
    rows = 1_000_000
    rng = np.random.default_rng(0)
    cases = [(32, 64, 80), (32, 2048, 80), (64, 256, 120)] if quick else [
        (32, 64, 80), (32, 512, 80), (32, 4096, 80), (64, 256, 120), (64, 2048, 120), (32, 4096, 20)
    ]
    results = {
        "threads": os.environ.get("RAYON_NUM_THREADS", str(os.cpu_count())),
        "roofline": roofline(repeats, 256 if quick else 1024),
        "torch": None if torch is None else torch.__version__,
        "cases": [],
    }
    tables: dict[int, np.ndarray] = {}
    for dim, bags, lookups in cases:
        if dim not in tables:
            tables[dim] = rng.standard_normal((rows, dim), dtype=np.float32)
        table = tables[dim]
        idx = rng.integers(0, rows, bags * lookups)
        off = np.arange(bags, dtype=np.int64) * lookups
        gathered = idx.size * dim * 4
        ours = rs.sls(table, idx, off)
        np.testing.assert_allclose(ours, numpy_sls(table, idx, off), rtol=1e-4, atol=1e-4)
        row = {
            "dim": dim,
            "bags": bags,
            "lookups": lookups,
            "nearflash_GBps": gathered / _best_of(lambda: rs.sls(table, idx, off), repeats) / 1e9,
            "numpy_GBps": gathered / _best_of(lambda: numpy_sls(table, idx, off), repeats) / 1e9,
        }
        if torch is not None:
            tt, ti, to = torch.from_numpy(table), torch.from_numpy(idx), torch.from_numpy(off)
            got = tf.embedding_bag(ti, tt, to, mode="sum").numpy()
            np.testing.assert_allclose(ours, got, rtol=1e-4, atol=1e-4)
            row["torch_GBps"] = gathered / _best_of(lambda: tf.embedding_bag(ti, tt, to, mode="sum"), repeats) / 1e9
        results["cases"].append(row)
    return results


def report(res: dict) -> None:
    roof = res["roofline"]
    print(f"threads={res['threads']}  torch={res['torch'] or 'not installed'}")
    print(f"roofline: numpy copy {roof['copy_GBps']:.2f} GB/s (read+write), numpy sum {roof['sum_read_GBps']:.2f} GB/s")
    head = f"{'dim':>4} {'bags':>5} {'L':>4} {'nearflash':>10} {'numpy':>8} {'x numpy':>8} {'of sum-BW':>9}"
    print(head + (f" {'torch':>8} {'x torch':>8}" if res["torch"] else ""))
    for c in res["cases"]:
        line = (
            f"{c['dim']:>4} {c['bags']:>5} {c['lookups']:>4} {c['nearflash_GBps']:>10.2f} {c['numpy_GBps']:>8.2f} "
            f"{c['nearflash_GBps'] / c['numpy_GBps']:>8.1f} {c['nearflash_GBps'] / roof['sum_read_GBps']:>9.2f}"
        )
        if "torch_GBps" in c:
            line += f" {c['torch_GBps']:>8.2f} {c['nearflash_GBps'] / c['torch_GBps']:>8.2f}"
        print(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer cases and repeats")
    ap.add_argument("--single", action="store_true", help="only this process's thread setting (no 1-thread rerun)")
    ap.add_argument("--json", help="write all results to this file")
    args = ap.parse_args()
    runs = [run(args.quick)]
    report(runs[0])
    if not args.single and os.environ.get("RAYON_NUM_THREADS") != "1":
        cmd = [sys.executable, __file__, "--single", "--json", "-"] + (["--quick"] if args.quick else [])
        out = subprocess.run(cmd, env={**os.environ, "RAYON_NUM_THREADS": "1"}, capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print()
        report(runs[1])
    if args.json == "-":
        print(json.dumps(runs[0]))
    elif args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=2)


if __name__ == "__main__":
    main()
