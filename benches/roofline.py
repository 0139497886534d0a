"""Memory-bandwidth roofline of this host, measured in the run that uses it (benches only, not a test)."""

from __future__ import annotations

import statistics
import time

import numpy as np


def median_time(fn, repeats: int) -> float:
    """Median wall time of ``repeats`` calls after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def roofline(repeats: int, mib: int) -> dict[str, float]:
    """numpy copy (read + write bytes per second) and numpy sum (read bytes per second) of a ``mib`` MiB array, on
    one core: the bandwidth a single-threaded streaming pass reaches here."""
    src = np.ones(mib << 18, dtype=np.float32)
    dst = np.empty_like(src)
    t_copy = median_time(lambda: np.copyto(dst, src), repeats)
    t_sum = median_time(lambda: src.sum(), repeats)
    return {"copy_GBps": 2 * src.nbytes / t_copy / 1e9, "sum_read_GBps": src.nbytes / t_sum / 1e9}
