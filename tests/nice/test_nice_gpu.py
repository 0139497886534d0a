"""The GPU baseline of Figs. 14-17 (`nearflash.nice.gpu`): roofline-bound kernels, copies and whole workloads computed
by hand on a GPU of round numbers, the preset's Jetson NX figures, monotonicity in the batch on the real networks,
and bad input refused with the argument named."""

from __future__ import annotations

import math

import pytest

from nearflash import InvalidArgument
from nearflash.device import Device
from nearflash.nice import network_kernels
from nearflash.nice.experiments.common import PRESET, SHRINK
from nearflash.nice.gpu import Gpu

#: 100 op/ns sustained (100 cores x 1 GHz x 2 x 50%), 5 B/ns (10 GB/s x 50%), 1 us per launch, 0.5 us per copy call.
ROUND = dict(cores=100, clock_hz=1e9, ops_per_core_cycle=2, compute_efficiency=0.5, dram_bytes_per_s=10e9,
             memory_efficiency=0.5, launch_ns=1000, copy_call_ns=500, active_w=5)


@pytest.fixture(scope="module")
def preset_gpu() -> Gpu:
    dev = Device(None, preset=PRESET, **SHRINK)
    try:
        return Gpu.from_device(dev)
    finally:
        dev.close()


def test_a_kernel_costs_its_launch_plus_the_binding_roof():
    g = Gpu(**ROUND)
    assert g.ops_per_ns == 100 and g.bytes_per_ns == 5
    assert g.kernel_ns(1e6, 1000) == 1000 + 1e6 / 100          # compute-bound: 10 us of operations
    assert g.kernel_ns(1000, 1e6) == 1000 + 1e6 / 5            # memory-bound: 200 us of DRAM traffic
    assert g.kernel_ns(0, 0) == 1000                           # an empty kernel still pays its launch
    assert g.copy_ns(1e6) == 500 + 2 * 1e6 / 5                 # unified memory: read and write the bytes


def test_knn_by_hand():
    g = Gpu(**ROUND)
    t = g.knn(n=1000, dim=10, element_bytes=2, k=4, queries=1)
    copy = (500 + 2 * (1000 * 10 * 2 + 10 * 4) / 5) + (500 + 2 * (4 * 12) / 5)
    dist = 1000 + max(2 * 1000 * 10 / 100, (1000 * 10 * 2 + 1000 * 4) / 5)
    select = 1000 + max(1000 * (1 + math.log2(4)) / 100, 1000 * 4 / 5)
    assert t["copy_ns"] == pytest.approx(copy) and t["compute_ns"] == pytest.approx(dist + select)
    assert t["total_ns"] == pytest.approx(16635.2)


def test_cnn_by_hand():
    g = Gpu(**ROUND)
    ks = [{"macs": 100, "weights": 10, "inputs": 50, "outputs": 20}, {"macs": 0, "weights": 0, "inputs": 20, "outputs": 20}]
    t = g.cnn(ks, batch=2, image_bytes=50)
    assert t["copy_ns"] == pytest.approx((500 + 2 * (2 * 50 + 10 * 4) / 5) + (500 + 2 * (2 * 20 * 4) / 5))
    assert t["compute_ns"] == pytest.approx((1000 + 100 * 5 / 5) + (1000 + 4 * (10 + 2 * 70) / 5) + (1000 + 4 * 2 * 40 / 5))
    assert t["kernels"] == 3 and t["total_ns"] == pytest.approx(4404)


def test_the_preset_describes_the_jetson_nx_gpu(preset_gpu):
    g = preset_gpu
    assert g.cores == 384 and g.clock_hz == pytest.approx(1.1e9) and g.ops_per_core_cycle == 2
    assert g.ops_per_ns == pytest.approx(384 * 1.1 * 2 * 0.5)   # 422.4 of the 844.8 GFLOP/s FP32 peak
    assert g.bytes_per_ns == pytest.approx(51.2 * 0.7)
    assert g.launch_ns == 10_000 and g.copy_call_ns == 10_000 and g.active_w == pytest.approx(6.0)


@pytest.mark.parametrize("net, image_bytes", [("lenet5", 28 * 28), ("mobilenet_v2", 3 * 224 * 224)])
def test_cnn_latency_grows_with_the_batch_and_the_time_per_image_does_not(preset_gpu, net, image_bytes):
    ks = network_kernels(net)
    times = [preset_gpu.cnn(ks, b, image_bytes)["total_ns"] for b in (1, 2, 4, 8, 16, 64, 256)]
    assert all(a < b for a, b in zip(times, times[1:])), times
    per_image = [t / b for t, b in zip(times, (1, 2, 4, 8, 16, 64, 256))]
    assert all(a >= b for a, b in zip(per_image, per_image[1:])), per_image


def test_mobilenet_on_the_nx_gpu_is_compute_bound_near_its_multiply_adds(preset_gpu):
    ks = network_kernels("mobilenet_v2")
    macs = sum(k["macs"] for k in ks)
    assert 290e6 < macs < 310e6
    t = preset_gpu.cnn(ks, 32, 3 * 224 * 224)
    # The compute floor: 2 ops per multiply-add at the sustained rate; launches and memory can only add to it.
    floor = 2 * 32 * macs / preset_gpu.ops_per_ns + len(ks) * preset_gpu.launch_ns
    assert floor < t["compute_ns"] < 3 * floor


def test_knn_latency_grows_with_queries_and_dimension(preset_gpu):
    one = [preset_gpu.knn(16384, d, 2, 128)["total_ns"] for d in (4, 8, 16, 32, 64)]
    assert all(a < b for a, b in zip(one, one[1:]))
    batched = [preset_gpu.knn(16384, 16, 2, 128, q)["total_ns"] for q in (1, 16, 256)]
    assert all(a < b for a, b in zip(batched, batched[1:]))
    assert batched[2] / 256 < batched[0]


def test_bad_input_is_refused_naming_the_argument():
    g = Gpu(**ROUND)
    ks = network_kernels("lenet5")
    for bad, name in ((0, "batch"), (-1, "batch"), (1.5, "batch")):
        with pytest.raises(ValueError, match=name):
            g.cnn(ks, bad, 784)
    with pytest.raises(ValueError, match="kernels"):
        g.cnn([], 1, 784)
    with pytest.raises(ValueError, match="element_bytes"):
        g.knn(10, 4, 3, 2)
    for kw in ("n", "dim", "k", "queries"):
        args = {"n": 10, "dim": 4, "element_bytes": 2, "k": 2, "queries": 1, kw: 0}
        with pytest.raises(ValueError, match=kw):
            g.knn(**args)
    with pytest.raises(ValueError, match="ops"):
        g.kernel_ns(-1, 0)
    with pytest.raises(ValueError, match="bytes"):
        g.copy_ns(-1)
    for field, v in (("cores", 0), ("clock_hz", float("nan")), ("compute_efficiency", 1.5),
                     ("memory_efficiency", 0), ("launch_ns", -1), ("active_w", float("inf"))):
        with pytest.raises(ValueError, match=field):
            Gpu(**{**ROUND, field: v})
    with pytest.raises(InvalidArgument, match="lenet5"):
        network_kernels("resnet50")


def test_a_preset_without_a_gpu_is_named():
    dev = Device(None, preset="cosmos-plus", blocks_per_plane=32, pages_per_block=16, over_provisioning=25)
    try:
        with pytest.raises(ValueError, match="cosmos-plus.*no host GPU"):
            Gpu.from_device(dev)
    finally:
        dev.close()
