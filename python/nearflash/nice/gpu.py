"""The NICE paper's GPU baseline (Figs. 14-17): the Jetson NX's 384-core Volta GPU, modelled as a roofline.

Every kernel costs a launch plus the larger of its compute time (operations / (cores x clock x operations per core
per cycle x efficiency)) and its memory time (bytes / (DRAM bandwidth x efficiency)); a host<->GPU copy is a call
plus a DRAM-to-DRAM copy (read and write) in the NX's unified LPDDR4x, which CPU and GPU share. The file itself is
read through the modelled kernel storage stack by the experiment, as HOST-ISC does, before the copy. Parameters are
the `nice-zu7eg` preset's `host.gpu_*`, `host.dram_bandwidth` and `energy.host_gpu_active` (units and sources
there); `Gpu.from_device` reads them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

#: Units the GPU's preset parameters may be written in, to canonical Hz, ns, B/s, W and plain numbers.
_SCALE = {"Hz": 1.0, "kHz": 1e3, "MHz": 1e6, "GHz": 1e9, "ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9,
          "B/s": 1.0, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "uW": 1e-6, "mW": 1e-3, "W": 1.0,
          "count": 1.0, "ratio": 1.0, "fraction": 1.0, "ops/cycle": 1.0}

#: Bytes of one f32 element (weights and activations on the GPU; FP32 code, Tensor Cores unused).
F32 = 4
#: Bytes Faiss returns per neighbour: a float distance and an int64 label.
KNN_RESULT_BYTES = 12


def _canonical(dev: Any, path: str) -> float:
    value, unit = dev.param(path).split()
    if unit not in _SCALE:
        raise ValueError(f"{path}: unit {unit!r} is not one the GPU model reads ({', '.join(_SCALE)})")
    return float(value) * _SCALE[unit]


def _positive(name: str, v: float) -> None:
    if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
        raise ValueError(f"{name} must be a positive number, got {v!r}")


@dataclass(frozen=True)
class Gpu:
    """An integrated GPU: peak rates, efficiencies, fixed costs and power (canonical units)."""

    cores: float
    clock_hz: float
    ops_per_core_cycle: float
    compute_efficiency: float
    dram_bytes_per_s: float
    memory_efficiency: float
    launch_ns: float
    copy_call_ns: float
    active_w: float

    def __post_init__(self) -> None:
        for name in ("cores", "clock_hz", "ops_per_core_cycle", "dram_bytes_per_s"):
            _positive(name, getattr(self, name))
        for name in ("compute_efficiency", "memory_efficiency"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0 < v <= 1):
                raise ValueError(f"{name} must be in (0, 1], got {v!r}")
        for name in ("launch_ns", "copy_call_ns", "active_w"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a non-negative number, got {v!r}")

    @classmethod
    def from_device(cls, dev: Any) -> "Gpu":
        """The host GPU of the device's preset (`host.gpu_*`, `host.dram_bandwidth`, `energy.host_gpu_active`)."""
        try:
            g = {k: _canonical(dev, f"host.gpu_{k}") for k in
                 ("cores", "freq", "ops_per_core_cycle", "compute_efficiency", "memory_efficiency", "launch",
                  "copy_call")}
            active = _canonical(dev, "energy.host_gpu_active")
        except KeyError as e:
            raise ValueError(f"preset {dev.preset!r} describes no host GPU (missing {e.args[0]})") from None
        return cls(g["cores"], g["freq"], g["ops_per_core_cycle"], g["compute_efficiency"],
                   _canonical(dev, "host.dram_bandwidth"), g["memory_efficiency"], g["launch"], g["copy_call"],
                   active)

    @property
    def ops_per_ns(self) -> float:
        """Sustained operations per ns (peak x efficiency)."""
        return self.cores * self.clock_hz * self.ops_per_core_cycle * self.compute_efficiency / 1e9

    @property
    def bytes_per_ns(self) -> float:
        """Sustained DRAM bytes per ns."""
        return self.dram_bytes_per_s * self.memory_efficiency / 1e9

    def kernel_ns(self, ops: float, nbytes: float) -> float:
        """One kernel: launch + max(compute, memory)."""
        if ops < 0 or nbytes < 0:
            raise ValueError(f"a kernel's ops ({ops}) and bytes ({nbytes}) must not be negative")
        return self.launch_ns + max(ops / self.ops_per_ns, nbytes / self.bytes_per_ns)

    def copy_ns(self, nbytes: float) -> float:
        """A host<->GPU copy: the call plus reading and writing `nbytes` of the shared DRAM."""
        if nbytes < 0:
            raise ValueError(f"a copy's bytes ({nbytes}) must not be negative")
        return self.copy_call_ns + 2 * nbytes / self.bytes_per_ns

    def cnn(self, kernels: list[dict[str, int]], batch: int, image_bytes: int) -> dict[str, float]:
        """A batch through a network (`nearflash.nice.network_kernels`): copy the u8 images and the f32 weights
        in, convert the images to f32, run every kernel (f32 weights read once per kernel, activations read and
        written per image), copy the logits out. Times in ns."""
        if not isinstance(batch, int) or batch < 1:
            raise ValueError(f"batch must be a positive integer, got {batch!r}")
        if not kernels:
            raise ValueError("kernels: a network has at least one kernel")
        weights = sum(k["weights"] for k in kernels)
        copy = self.copy_ns(batch * image_bytes + weights * F32) + self.copy_ns(batch * kernels[-1]["outputs"] * F32)
        pixels = batch * kernels[0]["inputs"]
        compute = self.kernel_ns(pixels, pixels * (1 + F32))
        for k in kernels:
            ops = 2 * batch * k["macs"] if k["macs"] else batch * k["inputs"]
            compute += self.kernel_ns(ops, F32 * (k["weights"] + batch * (k["inputs"] + k["outputs"])))
        return {"copy_ns": copy, "compute_ns": compute, "kernels": len(kernels) + 1, "total_ns": copy + compute}

    def knn(self, n: int, dim: int, element_bytes: int, k: int, queries: int = 1) -> dict[str, float]:
        """Exact KNN of `queries` queries over `n` vectors of `dim` integers (Faiss's flat index on the GPU): copy
        the corpus and the queries in, one distance kernel (2 ops per multiply-add, the corpus read once, a distance
        per vector and query written), one top-K selection kernel (1 + log2 K compares per distance, the distances
        read), the neighbours copied out. Times in ns."""
        for name, v in (("n", n), ("dim", dim), ("k", k), ("queries", queries)):
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if element_bytes not in (2, 4):
            raise ValueError(f"element_bytes must be 2 or 4, got {element_bytes!r}")
        copy = self.copy_ns(n * dim * element_bytes + queries * dim * F32) + self.copy_ns(queries * k * KNN_RESULT_BYTES)
        dist = self.kernel_ns(2 * queries * n * dim, n * dim * element_bytes + queries * n * F32)
        select = self.kernel_ns(queries * n * (1 + math.log2(k)), queries * n * F32)
        return {"copy_ns": copy, "compute_ns": dist + select, "total_ns": copy + dist + select}
