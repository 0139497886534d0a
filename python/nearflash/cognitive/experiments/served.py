"""Served mode (Sec. 5.5's web service): ApacheBench against ``nearflash cognitive serve``'s endpoint on the loopback,
requests/s and latency percentiles (wall, this host) beside the direct ``CognitiveSSD.search`` call and the modelled
device latency, against T."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from nearflash.cognitive.data import fashion_mnist
from nearflash.cognitive.experiments.setup import deployed
from nearflash.cognitive.serve import make_server
from nearflash.errors import NearflashError
from nearflash.experiment import Experiment, Options

PERCENTILES = (50, 90, 95, 99)


def ab_run(url: str, body: Path, n: int, c: int) -> dict[str, float]:
    """One ApacheBench run (POST ``body``): requests/s, mean latency and percentiles (ms, from ab's ``-e`` CSV),
    failures. ``-l``: the JSON answers' length varies with the timings in them, which is not a failure."""
    csv = body.with_suffix(".csv")
    r = subprocess.run(["ab", "-q", "-l", "-n", str(n), "-c", str(c), "-s", "30", "-e", str(csv), "-p", str(body),
                        "-T", "application/octet-stream", url], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"ab failed ({r.returncode}): {r.stderr.strip()}")
    out = r.stdout

    def num(pattern: str) -> float:
        m = re.search(pattern, out)
        if m is None:
            raise RuntimeError(f"ab output without {pattern!r}:\n{out}")
        return float(m.group(1))

    res = {"rps": num(r"Requests per second:\s+([0-9.]+)"), "mean_ms": num(r"Time per request:\s+([0-9.]+) \[ms\] \(mean\)"),
           "failed": num(r"Failed requests:\s+(\d+)"),
           "non2xx": num(r"Non-2xx responses:\s+(\d+)") if "Non-2xx" in out else 0.0}
    pct = dict(line.split(",") for line in csv.read_text().splitlines()[1:])
    for p in PERCENTILES:
        res[f"p{p}_ms"] = float(pct[str(p)])
    return res


def run_served(exp: Experiment, opts: Options) -> None:
    if shutil.which("ab") is None:
        raise NearflashError("experiment cognitive served: ApacheBench (`ab`, Debian apache2-utils) is not installed")
    db_n = int(opts.extra.get("db", 2000 if opts.quick else 10000))
    n = int(opts.extra.get("requests", 100 if opts.quick else 1000))
    conc = int(opts.extra.get("concurrency", 4 if opts.quick else 8))
    ts = [int(t) for t in str(opts.extra.get("ts", "10,200" if opts.quick else "10,200,600,1000")).split(",")]
    ssd, _ = deployed(db_n, seed=opts.seed)
    qs, _ = fashion_mnist("test", 16)
    server = make_server(ssd, "127.0.0.1", 0)
    host, port = server.server_address[:2]
    th = threading.Thread(target=server.serve_forever, daemon=True)
    th.start()
    rows, series = [], []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            body = Path(tmp) / "query.bin"
            body.write_bytes(qs[0].tobytes())
            for t in exp.steps(ts):
                wall, dev = [], []
                for q in [qs[0]] * len(qs):  # the direct call: the query ab sends, without HTTP
                    t0 = time.perf_counter()
                    ssd.search(q[None, :], t)
                    wall.append((time.perf_counter() - t0) * 1e3)
                    dev.append(ssd.last_latency_ns / 1e6)
                before = server.service.stats()
                ab = ab_run(f"http://{host}:{port}/search?t={t}", body, n, conc)
                after = server.service.stats()
                served = after["searches"] - before["searches"]
                srv_dev = (after["device_ns"] - before["device_ns"]) / max(served, 1) / 1e6
                row = [t, ab["rps"], ab["mean_ms"], *(ab[f"p{p}_ms"] for p in PERCENTILES), ab["failed"] + ab["non2xx"],
                       float(np.mean(wall)), 1e3 / float(np.mean(wall)), srv_dev, 1e3 / srv_dev]
                rows.append(row)
                series.append((t, ab, float(np.mean(wall)), srv_dev))
    finally:
        server.shutdown()
        server.server_close()
    exp.table(f"ApacheBench: {n} POSTs per T, {conc} concurrent, loopback (wall, this host) beside the direct call",
              ["T", "ab req/s", "ab mean ms", *(f"ab p{p} ms" for p in PERCENTILES), "failed or non-2xx",
               "direct call ms (wall)", "direct calls/s", "device ms (modelled, per query)", "device QPS (modelled)"],
              rows)
    exp.compare("HTTP requests/s over direct calls/s (wall, mean over T)",
                float(np.mean([r[1] / r[9] for r in rows])), None, "x", "below 1: the HTTP layer's cost")
    exp.record("sizes", {"database": db_n, "requests": n, "concurrency": conc})
    exp.note("Wall times are this host's (the emulator runs the device model in the server process; one lock "
             "serialises the device, as the single DLG-x). The device column is the modelled time of DLG_hashing + "
             "DLG_index per query: what the prototype would take, not what this host takes to emulate it. The paper's "
             "Fig. 11 QPS (CROW + ab, Hash-AlexNet on ImageNet) is not comparable and was lost in extraction.")
    fig, (ax1, ax2) = exp.figure("served_latency_qps", width=11, ncols=2)
    xs = [s[0] for s in series]
    for p in PERCENTILES:
        ax1.plot(xs, [s[1][f"p{p}_ms"] for s in series], marker="o", label=f"ab p{p}")
    ax1.plot(xs, [s[2] for s in series], marker="s", label="direct call (wall)")
    ax1.plot(xs, [s[3] for s in series], marker="^", label="device (modelled)")
    ax1.set_xlabel("T")
    ax1.set_ylabel("ms per request")
    ax1.set_yscale("log")
    ax1.legend(fontsize=8)
    ax2.plot(xs, [s[1]["rps"] for s in series], marker="o", label="ab requests/s")
    ax2.plot(xs, [1e3 / s[2] for s in series], marker="s", label="direct calls/s")
    ax2.plot(xs, [1e3 / s[3] for s in series], marker="^", label="device QPS (modelled)")
    ax2.set_xlabel("T")
    ax2.set_ylabel("queries per second")
    ax2.set_yscale("log")
    ax2.legend(fontsize=8)
