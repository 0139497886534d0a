"""Fig. 16: MobileNetV2 (224x224x3) on NICE-C by batch size, against FSR-C and the host CPU (paper Sec. V-D:
NICE has the lowest latency, 15% below FSR-C; 1.56x faster than the NX's GPU; 4.94x the GPU's and 33.17x the CPU's
throughput per watt).

As Fig. 17 (`fig17.py`), with network 1 of op 6: the images file holds `batch` random 224x224x3 u8 images (CHW), the
weights file MobileNetV2's 3.5 M f32 parameters (random, He-scaled; `nearflash.nice.mobilenet`), both under
/data/imagenet/mobilenet (depth 3). The firmware runs the real network on every image (NICE-C's 8-bit datapath;
`--set cnn_precision=f32` for the f32 path) and NICE-C's timing model charges the PE array; each class is checked
against the numpy reference of the same precision, and the int8 logits against the float model's. The host CPU computes the
300 M multiply-adds per image at Fig. 14's assumed rate; HOST-GPU runs the same reads, then the NX's GPU
(`nearflash.nice.gpu`: the network's kernels, f32, as a roofline with launches and unified-memory copies). Energy as
in Fig. 17."""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path

import numpy as np

from nearflash.experiment import Experiment, Options
from nearflash.nice import mobilenet, mobilenet_v2_timing, network_kernels
from nearflash.nice.experiments.common import (cnn_classes_match, cnn_precision, compare_headline,
                                               debugfs, device, fsr_locating_extra_ns, host_compute_j, host_gpu_j, idle_w, invoke,
                                               make_image, measured)
from nearflash.nice.experiments.fig14 import HOST_MACS_PER_NS, _host_read_ns
from nearflash.nice.experiments.fig17 import OP_CNN
from nearflash.nice.gpu import Gpu
from nearflash.nice.host import RESULT_HEADER
from nearflash.recssd.experiments.common import option

NET_MOBILENET = 1
#: Paper Sec. V-D: FSR-C's latency over NICE's for MobileNetV2 (NICE 15% faster).
PAPER_FSR_RATIO = 1.15
#: Paper Sec. V-D: GPU / NICE latency (average over batches) and NICE's throughput per watt over the GPU's.
PAPER_GPU_RATIO = 1.56
PAPER_GPU_TPW = 4.94
#: DeepDive (Baharani et al., GLSVLSI'21, the paper's ref. [27]) on MobileNetV2: 47.4 frames per second per watt
#: (its abstract, Xilinx ZCU102), at the 0.34 W NICE Sec. II-C quotes for it: 16.1 images/s. Modelled as a host-attached
#: accelerator fed by the host's reads (as HOST-CPU), one image after another at that rate (no batching gain stated).
DEEPDIVE_FPS_PER_W = 47.4
DEEPDIVE_W = 0.34
DIR = "/data/imagenet/mobilenet"


def run_fig16(exp: Experiment, opts: Options) -> None:
    batches = option(opts, "batches", [1], [1, 2, 4, 8])
    rate = option(opts, "host_macs_per_ns", HOST_MACS_PER_NS, HOST_MACS_PER_NS)
    precision = cnn_precision(opts)
    n_cal = option(opts, "calibration_images", 1, 4)
    rng = np.random.default_rng(opts.seed)
    wts = mobilenet.random_weights(opts.seed)
    imgs = rng.integers(0, 256, (max(batches), mobilenet.IMAGE_BYTES), dtype=np.uint8)
    # Activation scales for the 8-bit datapath, calibrated on other random images (NCQ1 section of the weights file).
    scales = mobilenet.calibrate(wts, rng.integers(0, 256, (n_cal, mobilenet.IMAGE_BYTES), dtype=np.uint8))
    int8 = lambda w, x: mobilenet.logits_int8(w, x, scales)  # noqa: E731
    forward = int8 if precision == "int8" else mobilenet.logits
    macs = mobilenet_v2_timing(1)["macs"]
    rows, data = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        d = root / DIR.lstrip("/")
        d.mkdir(parents=True)
        wbytes = mobilenet.weights_file(wts, scales)
        (d / "weights.bin").write_bytes(wbytes)
        for b in batches:
            (d / f"images_{b}.bin").write_bytes(imgs[:b].tobytes())
        image = make_image(root, 16 + (len(wbytes) + sum(batches) * mobilenet.IMAGE_BYTES) // 2**20 * 2)
        img = Path(tmp) / "fs.img"
        head = lambda p: int(debugfs(img, [f"blocks {p}"])[0].split()[0])  # noqa: E731
        w_head = head(f"{DIR}/weights.bin")
        dev = device(image, 1024, exp, cnn_precision=precision)
        queue = dev.queue(depth=64)
        gpu, kernels = Gpu.from_device(dev), network_kernels("mobilenet_v2")
        block = bytes([OP_CNN, NET_MOBILENET]) + bytes(6) + struct.pack("<Q", w_head)
        extra_fsr = fsr_locating_extra_ns(dev, [f"{DIR}/weights.bin", f"{DIR}/images_{batches[0]}.bin"], head)
        ref, errs = {}, []
        for b in exp.steps(batches):
            h = head(f"{DIR}/images_{b}.bin")
            (r, t_w, t_r), nice_j = measured(dev, lambda: invoke(dev, h, block))
            got = np.frombuffer(r["raw"], dtype="<u2", count=r["value"], offset=RESULT_HEADER)
            for i in range(b):
                if i not in ref:
                    ref[i] = forward(wts, imgs[i])
                    if precision == "int8":  # the int8 logits beside the float model's (relative L2 error)
                        f = mobilenet.logits(wts, imgs[i])
                        errs.append(float(np.linalg.norm(ref[i] - f) / np.linalg.norm(f)))
                assert cnn_classes_match(got[i : i + 1], ref[i][None], precision), \
                    f"NICE-C MobileNetV2 differs from numpy on image {i}"
            nice_ns = t_w + t_r
            read_ns, read_j = measured(dev, lambda: _host_read_ns(dev, queue, h, -(-b * mobilenet.IMAGE_BYTES // 4096))
                                      + _host_read_ns(dev, queue, w_head, -(-len(wbytes) // 4096)))
            compute_ns = b * macs / rate
            host_ns = read_ns + compute_ns
            host_j = read_j + host_compute_j(dev, b * macs, compute_ns)
            g = gpu.cnn(kernels, b, mobilenet.IMAGE_BYTES)
            gpu_ns, gpu_j = read_ns + g["total_ns"], read_j + host_gpu_j(dev, gpu, g["total_ns"])
            dd_compute_ns = b / (DEEPDIVE_FPS_PER_W * DEEPDIVE_W) * 1e9
            dd_ns, dd_j = read_ns + dd_compute_ns, read_j + dd_compute_ns * 1e-9 * (DEEPDIVE_W + idle_w(dev))
            dd_own_j = b / DEEPDIVE_FPS_PER_W
            fsr_ns = nice_ns + extra_fsr
            data[str(b)] = {"nice_ns": nice_ns, "fsr_ns": fsr_ns, "host_ns": host_ns, "host_read_ns": read_ns,
                            "host_compute_ns": compute_ns, "nice_j": nice_j, "host_j": host_j, "gpu_ns": gpu_ns,
                            "gpu_j": gpu_j, "gpu_copy_ns": g["copy_ns"], "gpu_compute_ns": g["compute_ns"],
                            "deepdive_ns": dd_ns, "deepdive_j": dd_j, "deepdive_own_j": dd_own_j}
            rows.append([b, nice_ns / 1e6, fsr_ns / 1e6, host_ns / 1e6, gpu_ns / 1e6, dd_ns / 1e6, host_ns / nice_ns,
                         gpu_ns / nice_ns, nice_j * 1e3, host_j * 1e3, gpu_j * 1e3, host_j / nice_j, gpu_j / nice_j])
        dev.close()
    if errs:
        exp.record("int8_vs_float", {"relative_l2_error": errs})
        exp.compare("int8 logits vs float, relative L2 error, largest over the images", max(errs), None, "",
                    "NICE-C's 8-bit datapath (int8 weights per layer, dynamic per-tensor activation scales)")
    exp.table("MobileNetV2 (random weights, random 224x224x3 images): latency per batch (ms), energy per batch (mJ)",
              ["batch", "NICE", "FSR-C", "HOST-CPU", "HOST-GPU", "DeepDive", "CPU/NICE", "GPU/NICE", "NICE mJ", "CPU mJ", "GPU mJ",
               "CPU/NICE energy", "GPU/NICE energy"], rows)
    exp.record("points", data)
    big = data[str(max(batches))]
    exp.compare("FSR-C / NICE latency, largest batch", big["fsr_ns"] / big["nice_ns"], PAPER_FSR_RATIO, "x")
    exp.compare("CPU / NICE energy per image (throughput per watt), largest batch", big["host_j"] / big["nice_j"],
                33.17, "x", "paper: TPW 33.17x the NX's CPU")
    exp.compare("CPU / NICE latency, largest batch", big["host_ns"] / big["nice_ns"], None, "x")
    pts = [data[str(b)] for b in batches]
    gpu_r = [p["gpu_ns"] / p["nice_ns"] for p in pts]
    exp.compare("GPU / NICE latency, mean over batches", sum(gpu_r) / len(gpu_r), PAPER_GPU_RATIO, "x")
    exp.compare("NICE / GPU throughput per watt (GPU / NICE energy per image), mean over batches",
                sum(p["gpu_j"] / p["nice_j"] for p in pts) / len(pts), PAPER_GPU_TPW, "x")
    compare_headline(exp, [p["host_ns"] / p["nice_ns"] for p in pts], gpu_r)
    exp.compare("DeepDive / NICE energy per image, mean over batches",
                sum(p["deepdive_j"] / p["nice_j"] for p in pts) / len(pts), None, "x",
                "paper: NICE's TPW 'even comparable to DEEPDIVE', no number; ours: with the host's reads and the "
                "platform's static power while it computes, as for the CPU and GPU")
    exp.compare("DeepDive / NICE energy per image, DeepDive's own 0.34 W only, mean over batches",
                sum(p["deepdive_own_j"] / p["nice_j"] for p in pts) / len(pts), None, "x",
                "1 / 47.4 FPS/W per image against NICE's whole-device energy")
    exp.note("weights are MobileNetV2's 3.5 M parameters stored as f32 (14 MB), quantised to int8 by the firmware: "
             "the transfers move 4x what an int8 weights file would, while NICE-C computes on 8-bit elements "
             f"(CnnParams.element_bytes; datapath: {precision})")
    exp.note(f"HOST-GPU: the host's reads as HOST-CPU, then {len(kernels) + 1} kernels per batch (u8->f32, then each "
             "convolution, pool, activation, classifier in f32) on the roofline GPU model (nearflash.nice.gpu, preset "
             "host.gpu_*) plus the unified-memory copies; GPU energy = busy time x (6 W GPU + host and idle-SSD static)")
    exp.note(f"DeepDive: {DEEPDIVE_FPS_PER_W} FPS/W (Baharani et al. 2021, abstract) at {DEEPDIVE_W} W (NICE Sec. II-C) "
             f"= {DEEPDIVE_FPS_PER_W * DEEPDIVE_W:.1f} images/s after the host's reads; energy = its power plus the "
             "host's and the idle SSD's static power over its compute time, as for the CPU and GPU")
    fig, axes = exp.figure("fig16", 11, 4.2, ncols=2)
    for key, label, m in (("nice_ns", "NICE", "o"), ("fsr_ns", "FSR-C", "^"), ("host_ns", "HOST-CPU", "s"),
                          ("gpu_ns", "HOST-GPU", "D"), ("deepdive_ns", "DeepDive", "v")):
        axes[0].plot(batches, [data[str(b)][key] / 1e6 for b in batches], marker=m, label=label)
    axes[0].set(title="Fig. 16(a): MobileNetV2 latency", xlabel="batch", ylabel="latency (ms)", xscale="log")
    axes[1].plot(batches, [b / data[str(b)]["nice_j"] for b in batches], marker="o", label="NICE")
    axes[1].plot(batches, [b / data[str(b)]["host_j"] for b in batches], marker="s", label="HOST-CPU")
    axes[1].plot(batches, [b / data[str(b)]["gpu_j"] for b in batches], marker="D", label="HOST-GPU")
    axes[1].plot(batches, [b / data[str(b)]["deepdive_j"] for b in batches], marker="v", label="DeepDive")
    axes[1].set(title="Fig. 16(b): MobileNetV2 images per joule", xlabel="batch", ylabel="images / J", xscale="log")
    for ax in axes:
        ax.legend(fontsize=8)
