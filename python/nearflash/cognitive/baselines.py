"""The paper's four baselines (Sec. 5.3), modelled per query beside the Cognitive SSD's device time, and its power
model (Table 6).

As in the paper's Fig. 11 set-up, "data (weight/graph) cannot be accommodated in DRAM and must travel across the
SSD cache, I/O interface, and DRAM before reaching a compute unit": every baseline reads the hashing model's int8
weights and the graph pages its search visits from the SSD through the host's kernel I/O stack, per query (each page
once per query: the host's page cache is cold at each query, never re-read within one).

Every host-CPU time is counted work times a per-operation cost (`host_*` parameters, measured once on a reference
machine by ``benches/cognitive_host_costs.py``), so the comparisons do not move with this machine's load:

- **B-CPU**: hashing on the host CPU (the network's MACs x ``host_mac_time``, numpy/BLAS one image at a time; for
  Hash-AlexNet the paper's Table 5 CPU time, an input), graph search on the host CPU (neighbour steps x
  ``host_graph_step_time``).
- **B-GPU**: hashing on a GTX 1080 Ti (weights and the image over PCIe 3.0 x16; per-layer kernel launches plus
  FLOPs at a share of peak), graph search on the host CPU (as B-CPU).
- **B-FPGA**: hashing on a ZC706 board (the DLG-x NPE timing, Eqs. 2-4, with weights streamed from the board's DDR3
  instead of the flash channels, after crossing PCIe Gen2 x4), graph search on the host CPU (as B-CPU).
- **B-DLG-x**: DLG-x on the ZC706 without near-data processing: NPE as B-FPGA, and the GSE's cycles with every graph
  page the GSE asks for read from the SSD by the host and sent over PCIe to the board, one dependent page at a time.

The reads through the kernel stack are timed on the same device model; every other cost is a named parameter with
unit and source (`PARAMS` here, `host_*` in ``nearflash._native.cognitive.parameters()``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np


class Param(NamedTuple):
    value: float
    unit: str
    source: str


#: Baseline hardware costs (SI units in the names' suffixes).
PARAMS: dict[str, Param] = {
    "gpu_flops": Param(11.34e12, "FLOP/s", "GTX 1080 Ti datasheet: 11.34 TFLOPS fp32 peak (the paper's GPU)"),
    "gpu_efficiency": Param(0.3, "ratio", "assumed: cuDNN on layers this small reaches a fraction of peak; launches "
                                         "dominate anyway"),
    "gpu_launch_s": Param(5e-6, "s", "assumed: CUDA kernel launch and synchronisation, about 5 us per layer"),
    "gpu_pcie_bw": Param(12e9, "B/s", "assumed: PCIe 3.0 x16 is 15.75 GB/s raw; ~12 GB/s is what pinned cudaMemcpy "
                                      "reaches"),
    "gpu_pcie_latency_s": Param(10e-6, "s", "assumed: a cudaMemcpy call with DMA set-up, per transfer (weights + "
                                            "image in, code out: 2)"),
    "cpu_alexnet_hash_s": Param(0.114, "s", "paper Table 5: CPU hashing 114 ms on 2x Xeon E5-2630 (first model group, "
                                            "taken as Hash-AlexNet; labels lost). Used for Hash-AlexNet only: our "
                                            "executor takes Fashion-sized images"),
    "fpga_clock": Param(100e6, "Hz", "paper Sec. 5.3/5.5: the FPGA boards run at 100 MHz"),
    "fpga_ddr_bw": Param(12.8e9, "B/s", "ZC706 (UG954): PL DDR3 SODIMM, 64 bits at 1600 MT/s"),
    "fpga_pcie_bw": Param(1.6e9, "B/s", "ZC706 (UG954): PCIe Gen2 x4 = 2 GB/s after 8b/10b; 80% of it after TLP "
                                        "overhead (assumed)"),
    "fpga_pcie_latency_s": Param(5e-6, "s", "assumed: DMA descriptor, doorbell and completion interrupt, per transfer"),
}

#: Table 6 (W): idle and active power of each configuration, the host included ("Cognitive SSD+CPU" for ours).
POWER_W = {
    "Cognitive SSD": (98.5, 122.0),
    "B-DLG-x": (89.0, 185.7),
    "B-FPGA": (89.0, 195.6),
    "B-CPU": (80.0, 186.0),
    "B-GPU": (90.0, 330.0),
}
POWER_SOURCE = "paper Table 6 (power meter; Cognitive SSD + host CPU for ours, whole server for the baselines)"
#: The Cognitive SSD board alone (Table 6, first column).
BOARD_POWER_W = (17.0, 20.0)

CONFIGS = ("Cognitive SSD", "B-CPU", "B-GPU", "B-FPGA", "B-DLG-x")


#: Canonical units of the `host_*` parameters as ``parameters()`` lists them (seconds, bytes).
_SI = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "B": 1.0, "KiB": 1024.0, "MiB": 1024.0 ** 2, "GiB": 1024.0 ** 3}


def host_cost(name: str) -> float:
    """A host-CPU baseline parameter (``host_*``) in seconds or bytes."""
    from nearflash import _native

    for key, value, unit, _source in _native.cognitive.parameters():
        if key == name:
            return float(value) * _SI[unit]
    raise KeyError(name)


def host_sources() -> list[list[str]]:
    """(name, value, unit, source) of the `host_*` parameters, for the experiments' parameter tables."""
    from nearflash import _native

    return [list(p) for p in _native.cognitive.parameters() if p[0].startswith("host_")]


def params(**overrides: float) -> dict[str, float]:
    """Parameter values, with overrides by name (unknown names refused)."""
    bad = sorted(set(overrides) - set(PARAMS))
    if bad:
        raise ValueError(f"unknown baseline parameters {bad}; known: {sorted(PARAMS)}")
    return {k: float(overrides.get(k, p.value)) for k, p in PARAMS.items()}


def dlgx_param(name: str) -> float:
    """A DLG-x parameter's default value in its listed unit (``nearflash._native.cognitive.parameters()``)."""
    from nearflash import _native

    for key, value, _unit, _source in _native.cognitive.parameters():
        if key == name:
            return float(value)
    raise KeyError(name)


def network_flops(layers: list[dict[str, Any]]) -> float:
    """FLOPs (2 per MAC) of one forward pass from ``npe_timing``'s rows: compute cycles x N_PE MACs for conv (Eq. 2
    inverted), one int8 weight per MAC for FC."""
    n_pe = dlgx_param("n_pe")
    total = 0.0
    for row in layers:
        if row["layer"].startswith("fc") or row["layer"] == "hash":
            total += 2.0 * row["weight_bytes"]
        elif row["layer"].startswith("conv"):
            total += 2.0 * n_pe * row["compute_cycles"]
    return total


def npe_seconds(network: str, bits: int, channels: int, channel_bw: float, clock: float) -> float:
    """The DLG-x NPE's hashing time (Eqs. 2-4) at ``clock`` Hz with weights arriving at ``channels`` x ``channel_bw``
    B/s (instead of the flash channels)."""
    from nearflash import _native

    rows = _native.cognitive.npe_timing(network, bits, {"channels": channels, "channel_bw": channel_bw / 1e6,
                                                        "clock": clock / 1e6})
    return sum(r["cycles"] for r in rows) / clock


def latencies(m: dict[str, float], p: dict[str, float]) -> dict[str, dict[str, float]]:
    """Per-query latency (s) of each configuration, split into parts, from the inputs ``m``:

    ``cssd`` device time of DLG_hashing + DLG_index; ``cpu_hash``, ``cpu_search`` host CPU times (counted work x
    cost); ``read_page`` one 16 KiB read and ``read_weights`` the model's int8 weights read through the kernel stack;
    ``host_pages`` the distinct graph pages a search visits (two-hop layout), which the host reads once each;
    ``pages`` the pages the GSE's 16 on-chip slots ask for (B-DLG-x ships each over PCIe); ``weight_bytes``;
    ``image_bytes``; ``flops``; ``layers`` (weighted layers plus activations: kernel launches); ``npe_ddr`` the NPE
    with weights from board DDR; ``gse`` the GSE's compute time.
    """
    io_graph = m["host_pages"] * m["read_page"]
    gpu_in = m["weight_bytes"] + m["image_bytes"]
    fpga_page = 16384 / p["fpga_pcie_bw"] + p["fpga_pcie_latency_s"]
    return {
        "Cognitive SSD": {"device": m["cssd"]},
        "B-CPU": {"read weights": m["read_weights"], "hash (CPU)": m["cpu_hash"], "search (CPU)": m["cpu_search"],
                  "read pages": io_graph},
        "B-GPU": {"read weights": m["read_weights"],
                  "PCIe": gpu_in / p["gpu_pcie_bw"] + 2 * p["gpu_pcie_latency_s"],
                  "hash (GPU)": m["layers"] * p["gpu_launch_s"] + m["flops"] / (p["gpu_flops"] * p["gpu_efficiency"]),
                  "search (CPU)": m["cpu_search"], "read pages": io_graph},
        "B-FPGA": {"read weights": m["read_weights"],
                   "PCIe": gpu_in / p["fpga_pcie_bw"] + 2 * p["fpga_pcie_latency_s"],
                   "hash (FPGA NPE)": m["npe_ddr"], "search (CPU)": m["cpu_search"], "read pages": io_graph},
        "B-DLG-x": {"read weights": m["read_weights"],
                    "PCIe": gpu_in / p["fpga_pcie_bw"] + 2 * p["fpga_pcie_latency_s"] + m["pages"] * fpga_page,
                    "hash (FPGA NPE)": m["npe_ddr"], "search (GSE)": m["gse"], "read pages": io_graph},
    }


def energy(latency_s: dict[str, float]) -> dict[str, dict[str, float]]:
    """Table 6's power x busy time: energy per query at full load (active W x latency), the part above idle, QPS
    (one query at a time) and QPS per active watt."""
    out = {}
    for name, lat in latency_s.items():
        idle, active = POWER_W[name]
        out[name] = {"idle_w": idle, "active_w": active, "energy_j": active * lat,
                     "dynamic_energy_j": (active - idle) * lat, "qps": 1 / lat, "qps_per_w": 1 / lat / active}
    return out


def mean(xs: Any) -> float:
    return float(np.mean(list(xs)))
