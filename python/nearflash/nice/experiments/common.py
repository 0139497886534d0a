"""What NICE's experiments share: a real ext4 image made by Debian's mke2fs written into a shrunk nice-zu7eg
device through ordinary Writes, the `nice` firmware attached, and invocations at hyper-addresses timed in virtual
time (`Device.now_ns`)."""

from __future__ import annotations

import os
import struct
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

from nearflash.device import Device
from nearflash.experiment import Experiment

PRESET = "nice-zu7eg"
#: The preset's geometry shrunk in blocks only (channels, ways, NAND and controller timings unchanged), so that a
#: memory device holding a few tens of MiB builds in a moment: 128 planes x 32 blocks x 16 pages of 4 KiB = 256 MiB.
SHRINK = {"blocks_per_plane": 32, "pages_per_block": 16, "over_provisioning": 25}
OP_CRC32, OP_KNN, OP_LOCATE, OP_FSR, OP_KNN_BATCH = 1, 3, 4, 5, 7


def make_image(root: Path, size_mib: int) -> bytes:
    """`mke2fs -t ext4 -b 4096 -d root` into a `size_mib` image; its bytes."""
    img = root.parent / "fs.img"
    subprocess.run(["mke2fs", "-q", "-F", "-t", "ext4", "-b", "4096", "-d", str(root), str(img), f"{size_mib}M"],
                   check=True, capture_output=True)
    return img.read_bytes()


def debugfs(img: Path, cmds: list[str]) -> list[str]:
    """Answers of `debugfs` (Debian e2fsprogs) to each command on the image, in order."""
    with tempfile.NamedTemporaryFile("w", suffix=".cmds", delete=False) as f:
        f.write("\n".join(cmds) + "\n")
    try:
        out = subprocess.run(["debugfs", "-f", f.name, str(img)], check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(f.name)
    parts = out.split("debugfs: ")[1:]
    return [p.split("\n", 1)[1] if "\n" in p else "" for p in parts]


def device(image: bytes, cache_pages: int, exp: Experiment | None = None, **params: Any) -> Device:
    """A fresh shrunk nice-zu7eg device with the `nice` firmware (and its `params`), the image written through
    ordinary Writes."""
    dev = Device(None, preset=PRESET, **SHRINK)
    dev.attach("nice", ftl_cache_pages=cache_pages, **params)
    bs = dev.lba_bytes
    pad = (-len(image)) % bs
    buf = np.frombuffer(image + b"\0" * pad, dtype=np.uint8)
    for off in range(0, buf.size, 1 << 20):
        dev.write(off // bs, buf[off : off + (1 << 20)])
    dev.flush()
    if exp is not None and not any("shrunk" in n for n in exp.notes):
        exp.note(f"device: {PRESET} shrunk in blocks only ({SHRINK}); the ext4 image is made by mke2fs -d and copied "
                 "in with ordinary 1 MiB Writes, as dd would; the firmware learns the layout from those writes")
    return dev


def cap(dev: Device) -> int:
    """The capacity C (the firmware advertises 2C)."""
    return dev.lbas // 2


def timed_read(dev: Device, lba: int, n: int = 1) -> tuple[np.ndarray, int]:
    """A synchronous Read and its latency (virtual ns)."""
    t0 = dev.now_ns
    out = dev.read(lba, n)
    return out, dev.now_ns - t0


def invoke(dev: Device, at: int, block: bytes, read_sectors: int = 1) -> tuple[dict[str, Any], int, int]:
    """NICE_Write `block` (padded to whole sectors) at hyper-address C + `at`, then a NICE_Read of `read_sectors`
    there: (result, write ns, read ns)."""
    bs = dev.lba_bytes
    w = dev.write(cap(dev) + at, np.frombuffer(block + b"\0" * ((-len(block)) % bs), dtype=np.uint8))
    out, r = timed_read(dev, cap(dev) + at, read_sectors)
    op, size, inode, value = struct.unpack_from("<IQIQ", out.tobytes(), 0)
    return {"op": op, "size": size, "inode": inode, "value": value, "raw": out.tobytes()}, w, r


def fsr_block(path: str) -> bytes:
    return bytes([OP_FSR]) + path.encode() + b"\0"


def fsr_locating_extra_ns(dev: Device, paths: list[str], head: Callable[[str], int]) -> int:
    """What FSR-ISC pays beyond NICE to locate `paths` (each file's head block from `head`): the firmware's path walk
    (an FSR read) less a hyper-addressed locate, each timed after a first call (metadata cached, as NICE's runs are)."""
    extra = 0
    for p in paths:
        for _ in range(2):
            _, _, fsr_ns = invoke(dev, 0, fsr_block(p))
            _, _, loc_ns = invoke(dev, head(p), bytes([OP_LOCATE]))
        extra += fsr_ns - loc_ns
    return extra


def nice_ext(dev: Device) -> dict[str, Any]:
    return dict(dev.report().extensions["nice"])


#: Host CPU instructions per multiply-accumulate (4-lane NEON), assumed.
HOST_INSTR_PER_MAC = 0.25


def param_value(dev: Device, path: str) -> float:
    """A preset parameter's number in its declared unit (e.g. "energy.ssd_static" -> 1500.0, mW)."""
    return float(dev.param(path).split()[0])


def measured(dev: Device, fn):
    """Runs fn() in a fresh measurement window: (its result, joules the device's ledger charged in that window:
    NAND, channels, ECC, DRAM, link, controller and R5 instructions, FPGA units, and the static power of the SSD and
    the host over the window)."""
    dev.reset_stats()
    r = fn()
    return r, dev.report().total_energy_j


def idle_w(dev: Device) -> float:
    """Watts the host (DRAM, SoC, I/O) and the idle SSD draw while the host computes (preset `[energy]`, mW)."""
    return sum(param_value(dev, f"energy.{k}") for k in ("host_dram_static", "host_chipset_static",
                                                         "host_io_static", "ssd_static")) / 1e3


def host_compute_j(dev: Device, macs: float, compute_ns: float) -> float:
    """The host CPU's energy for `macs` multiply-accumulates taking `compute_ns`: its instructions (HOST_INSTR_PER_MAC
    each) x the preset's host_cpu_per_instruction, plus the host's and the idle SSD's static power over that time."""
    return macs * HOST_INSTR_PER_MAC * param_value(dev, "energy.host_cpu_per_instruction") * 1e-9 + compute_ns * 1e-9 * idle_w(dev)


def host_gpu_j(dev: Device, gpu, busy_ns: float) -> float:
    """The host GPU's energy for `busy_ns` of copies and kernels (`nearflash.nice.gpu.Gpu`): its active power
    (`energy.host_gpu_active`) plus the host's and the idle SSD's static power over that time."""
    return busy_ns * 1e-9 * (gpu.active_w + idle_w(dev))


#: The paper's headline (abstract): NICE's latency is 43.5x (9.32x) lower than the Jetson NX's CPU (GPU) on
#: average over its experiments.
PAPER_HEADLINE_CPU, PAPER_HEADLINE_GPU = 43.5, 9.32


def compare_headline(exp: Experiment, cpu_over_nice: list[float], gpu_over_nice: list[float]) -> None:
    """This figure's mean CPU / NICE and GPU / NICE latency beside the paper's headline averages."""
    note = "paper: average over all its experiments (abstract); ours: mean over this figure's points"
    exp.compare("CPU / NICE latency, mean (headline)", sum(cpu_over_nice) / len(cpu_over_nice), PAPER_HEADLINE_CPU,
                "x", note)
    exp.compare("GPU / NICE latency, mean (headline)", sum(gpu_over_nice) / len(gpu_over_nice), PAPER_HEADLINE_GPU,
                "x", note)


#: NICE-C's arithmetic in the experiments (`--set cnn_precision=f32` for the float path).
CNN_PRECISIONS = ("int8", "f32")


def cnn_classes_match(got: np.ndarray, ref: np.ndarray, precision: str) -> bool:
    """Whether the in-storage classes `got` are the numpy reference's (`ref`: logits, one row per image, of the same
    precision): every one on int8 (integer arithmetic, bit-exact), on f32 wherever the two largest logits are not a
    near-tie (summation order)."""
    if precision == "int8":
        return bool(np.array_equal(got, ref.argmax(1)))
    top2 = np.sort(ref, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 1e-4 * np.abs(top2).max()
    return bool(np.array_equal(got[clear], ref.argmax(1)[clear]))


def cnn_precision(opts: Any) -> str:
    """The `cnn_precision` option (int8 by default, as the firmware)."""
    from nearflash.recssd.experiments.common import option

    p = option(opts, "cnn_precision", "int8", "int8")
    if p not in CNN_PRECISIONS:
        raise ValueError(f"cnn_precision: {p!r}; one of {CNN_PRECISIONS}")
    return p
