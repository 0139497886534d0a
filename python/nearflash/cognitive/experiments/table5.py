"""Table 5 and Eqs. 2-4: DLG-x hashing latency from the NPE model (Hash-AlexNet with random weights, and our
Fashion-MNIST CNN), beside the paper's DLG-x and CPU figures, the B-CPU model (MACs x ``host_mac_time``, numpy/BLAS
one image at a time) and, for reference only, our executors' wall clock on this host."""

from __future__ import annotations

import time

from nearflash.cognitive import baselines as bl
from nearflash.cognitive.data import fashion_mnist, load_model
from nearflash.cognitive.host_int8 import Int8Network
from nearflash.experiment import Experiment, Options

PAPER = {"DLG-x": (38.0, 94.0), "CPU": (114.0, 121.0), "GPU": (1.83, 7.13)}


def run_table5(exp: Experiment, opts: Options) -> None:
    from nearflash import _native

    cog = _native.cognitive
    params = {k: float(v) for k, v in opts.extra.items() if k not in ("images",)}
    cyc_ns = 1e9 / float(params.get("clock", 100) * 1e6)
    rows = []
    totals = {}
    for net in ("hash_alexnet", "fashion"):
        layers = cog.npe_timing(net, 48, params or None)
        total_ms = sum(l["cycles"] for l in layers) * cyc_ns / 1e6
        totals[net] = total_ms
        for l in layers:
            if l["weight_bytes"] or l["compute_cycles"] > 0:
                rows.append([net, l["layer"], l["compute_cycles"], l["data_cycles"], l["cycles"] * cyc_ns / 1e6,
                             l["weight_bytes"], "compute" if l["compute_bound"] else "bandwidth"])
    exp.table("NPE timing per layer (Eqs. 2-4; ping-pong weight buffers; FC on one PE column)",
              ["network", "layer", "compute cycles", "data cycles", "ms", "weight bytes", "bound"], rows)
    exp.compare("DLG-x Hash-AlexNet hashing latency", totals["hash_alexnet"], PAPER["DLG-x"][0], "ms",
                "paper's first model group (labels lost in the text); second group 94 ms")
    n = int(opts.extra.get("images", 50 if opts.quick else 500))
    imgs, _ = fashion_mnist("test", n)
    model = load_model()
    q8 = model.quantise(imgs[: min(100, n)])
    net = Int8Network(q8)
    cpu_model_ms = net.macs() * bl.host_cost("host_mac_time") * 1e3
    # this host's wall clock, for reference: numpy/BLAS one image at a time, the crate's executors on all cores
    net.hash(imgs[:1])
    t0 = time.perf_counter()
    for img in imgs:
        net.hash(img[None, :])
    numpy_ms = (time.perf_counter() - t0) / n * 1e3
    t0 = time.perf_counter()
    q8.hash(imgs)
    cpu_int8_ms = (time.perf_counter() - t0) / n * 1e3
    t0 = time.perf_counter()
    model.hash(imgs)
    cpu_float_ms = (time.perf_counter() - t0) / n * 1e3
    exp.compare("Fashion CNN: DLG-x modelled / B-CPU (MACs x host_mac_time)", totals["fashion"] / cpu_model_ms, None, "x",
                f"DLG-x {totals['fashion']:.3f} ms vs B-CPU {cpu_model_ms:.3f} ms per image ({net.macs()} MACs, numpy/"
                "BLAS one image at a time on the reference machine)")
    exp.table("Hashing latency per image (ms)", ["platform", "Hash-AlexNet", "Fashion CNN", "paper group 1", "paper group 2"], [
        ["DLG-x (NPE model)", totals["hash_alexnet"], totals["fashion"], PAPER["DLG-x"][0], PAPER["DLG-x"][1]],
        ["B-CPU model (MACs x host_mac_time)", None, cpu_model_ms, PAPER["CPU"][0], PAPER["CPU"][1]],
        ["this host: numpy/BLAS one image at a time (wall)", None, numpy_ms, None, None],
        ["this host: crate int8 executor, all cores (wall)", None, cpu_int8_ms, None, None],
        ["this host: crate float reference, all cores (wall)", None, cpu_float_ms, None, None],
        ["GPU (paper only)", None, None, PAPER["GPU"][0], PAPER["GPU"][1]],
    ])
    exp.record("totals_ms", totals)
    exp.note("Hash-AlexNet: single-tower AlexNet (227x227x3, 5 conv, 2 FC of 4096) plus a 48-bit hash layer; its "
             "weights are random (only shapes and bytes matter for timing). Kernels above the 256 KB weight buffer "
             "would be re-fetched per output row; none of AlexNet's are.")
    fig, ax = exp.figure("table5_layers", width=9)
    alex = [r for r in rows if r[0] == "hash_alexnet"]
    ax.bar([r[1] for r in alex], [r[4] for r in alex], color=["tab:blue" if r[6] == "compute" else "tab:red" for r in alex])
    ax.set_ylabel("ms on DLG-x (red: bandwidth-bound)")
    ax.set_title(f"Hash-AlexNet on DLG-x: {totals['hash_alexnet']:.1f} ms (paper 38 / 94 ms)")
