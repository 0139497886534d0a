"""Fig. 17: LeNet on NICE-C by batch size, against the host CPU reading the images (paper Sec. V-D: for LeNet the
raw-image transfer is over 90% of the CPU's and GPU's latency; NICE is 2x faster than FSR-C).

Same device, same run: an ext4 image holding Fashion-MNIST test images (Debian's dataset-fashion-mnist) in one file
per batch size, a file of test images for the accuracy, and the LeNet-5 weights file (`nearflash.nice.lenet`: the
shipped weights, every layer trained with candle by `nearflash nice train`) under /data/fashion/lenet (depth 4),
written through ordinary Writes.
* Accuracy: the float model (numpy, every test image) and the numpy int8 reference (`lenet.logits_int8`, the same
  images; activation scales calibrated on 1,000 training images, `lenet.calibrate`, stored in the weights file's
  NCQ1 section) beside NICE-C in storage over the accuracy file (10,000 test images; 512 with --quick), and how often the
  in-storage classes agree with the float model's; the paper gives no LeNet accuracy.
* NICE: NICE_Write (op 6, naming the weights file's first sector) + NICE_Read at the images file's hyper-address:
  the firmware locates both files from their OOB, streams them, and runs LeNet-5 on the NICE-C unit in its 8-bit
  datapath (`--set cnn_precision=f32`: the f32 path). Every class it returns is checked against the numpy
  reference of the same precision (int8: all equal; f32: equal wherever the top two logits are not a near-tie).
* FSR-C: NICE-C behind FSR-ISC's file locating: NICE's latency plus, for each of the two files, the firmware's path
  walk (op 5) minus NICE's locate (op 4), both measured on the same device.
* HOST-CPU: the host reads the images and the weights through the kernel (256 KiB Reads, up to 64 in flight) and
  runs LeNet on its CPU at the Fig. 14 rate (22.8 MAC/ns, assumed).
* HOST-GPU: the same reads, then the NX's GPU (`nearflash.nice.gpu`: LeNet's kernels in f32 as a roofline, kernel
  launches, unified-memory copies; preset `host.gpu_*`), its energy the GPU's active power plus static power.
Energy (joules per batch, the paper's power figures as parameters x busy time): NICE and the host's reads from the
device's energy ledger over each measurement window (device static power, NAND, link, controller, R5, NICE-C, and the
host's static power while it waits); the host's compute as its instructions (one per 4 MACs, NEON, assumed) x the
preset's 0.44 nJ per host instruction, plus the host's and the idle SSD's static power over the compute time."""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path

import numpy as np

from nearflash.experiment import Experiment, Options
from nearflash.nice import lenet, network_kernels
from nearflash.nice.experiments.common import (cnn_classes_match, cnn_precision, compare_headline,
                                               debugfs, device, fsr_locating_extra_ns, host_compute_j, host_gpu_j, invoke,
                                               make_image, measured)
from nearflash.nice.experiments.fig14 import HOST_MACS_PER_NS, _host_read_ns
from nearflash.nice.gpu import Gpu
from nearflash.nice.host import RESULT_HEADER
from nearflash.recssd.experiments.common import option

OP_CNN, NET_LENET = 6, 0
#: Paper Sec. V-D: FSR-C / NICE latency for LeNet, and the transfer's share of the CPU's latency (lower bound).
PAPER_FSR_RATIO = 2.0
PAPER_HOST_TRANSFER_SHARE = 0.9
#: Paper Sec. V-D: GPU / NICE latency for LeNet over batch sizes.
PAPER_GPU_RATIO = (2.4, 19.0)
DIR = "/data/fashion/lenet"


def run_fig17(exp: Experiment, opts: Options) -> None:
    batches = option(opts, "batches", [1, 16, 64], [1, 4, 16, 64, 256])
    rate = option(opts, "host_macs_per_ns", HOST_MACS_PER_NS, HOST_MACS_PER_NS)
    n_acc = option(opts, "accuracy_images", 512, 10000)
    precision = cnn_precision(opts)
    wts = lenet.load()
    all_imgs, all_labels = lenet.images("test"), lenet.labels("test")
    if not 1 <= n_acc <= len(all_imgs):
        raise ValueError(f"accuracy_images: {n_acc}; 1..{len(all_imgs)} test images")
    imgs, labels = all_imgs[: max(batches)], all_labels[: max(batches)]
    scales = lenet.calibrate(wts)  # activation scales from 1,000 training images, in the weights file's NCQ1 section
    int8 = lambda w, x: lenet.logits_int8(w, x, scales)  # noqa: E731
    forward = int8 if precision == "int8" else lenet.logits
    ref = forward(wts, imgs)
    chunked = lambda f: np.concatenate([f(wts, all_imgs[i : min(i + 1000, n_acc)]) for i in range(0, n_acc, 1000)])  # noqa: E731
    acc_ref, acc_float = chunked(forward), chunked(lenet.logits)
    n_float = len(all_imgs) if not opts.quick else n_acc  # --quick: the accuracy file's images only
    float_acc = lenet.accuracy(wts, all_imgs[:n_float], all_labels[:n_float])
    int8_acc = lenet.accuracy(wts, all_imgs[:n_float], all_labels[:n_float], int8)
    rows, data = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        d = root / DIR.lstrip("/")
        d.mkdir(parents=True)
        wfile = lenet.weights_file(wts, scales)
        (d / "weights.bin").write_bytes(wfile)
        for b in batches:
            (d / f"images_{b}.bin").write_bytes(imgs[:b].tobytes())
        (d / "accuracy.bin").write_bytes(all_imgs[:n_acc].tobytes())
        image = make_image(root, 16 + -(-n_acc * lenet.IMAGE_BYTES // 2**20))
        img = Path(tmp) / "fs.img"
        head = lambda p: int(debugfs(img, [f"blocks {p}"])[0].split()[0])  # noqa: E731
        w_head = head(f"{DIR}/weights.bin")
        dev = device(image, 1024, exp, cnn_precision=precision)
        queue = dev.queue(depth=64)
        gpu, kernels = Gpu.from_device(dev), network_kernels("lenet5")
        block = bytes([OP_CNN, NET_LENET]) + bytes(6) + struct.pack("<Q", w_head)
        extra_fsr = fsr_locating_extra_ns(dev, [f"{DIR}/weights.bin", f"{DIR}/images_{batches[0]}.bin"], head)
        for b in exp.steps(batches):
            h = head(f"{DIR}/images_{b}.bin")
            invoke(dev, h, block)  # warm: learning and linking are paid once, before measuring
            (r, t_w, t_r), nice_j = measured(dev, lambda: invoke(dev, h, block))
            got = np.frombuffer(r["raw"], dtype="<u2", count=r["value"], offset=RESULT_HEADER)
            assert r["value"] == b and cnn_classes_match(got, ref[:b], precision), f"NICE-C differs from numpy at batch {b}"
            nice_ns = t_w + t_r
            sectors = -(-b * lenet.IMAGE_BYTES // 4096) + -(-len(wfile) // 4096)
            read_ns, read_j = measured(dev, lambda: _host_read_ns(dev, queue, h, -(-b * lenet.IMAGE_BYTES // 4096))
                                      + _host_read_ns(dev, queue, w_head, -(-len(wfile) // 4096)))
            compute_ns = b * lenet.MACS_PER_IMAGE / rate
            host_ns = read_ns + compute_ns
            host_j = read_j + host_compute_j(dev, b * lenet.MACS_PER_IMAGE, compute_ns)
            g = gpu.cnn(kernels, b, lenet.IMAGE_BYTES)
            gpu_ns, gpu_j = read_ns + g["total_ns"], read_j + host_gpu_j(dev, gpu, g["total_ns"])
            fsr_ns = nice_ns + extra_fsr
            acc = float((got == labels[:b]).mean())
            data[str(b)] = {"nice_ns": nice_ns, "fsr_ns": fsr_ns, "host_ns": host_ns, "host_read_ns": read_ns,
                            "host_compute_ns": compute_ns, "nice_j": nice_j, "host_j": host_j, "accuracy": acc,
                            "sectors": sectors, "gpu_ns": gpu_ns, "gpu_j": gpu_j, "gpu_copy_ns": g["copy_ns"],
                            "gpu_compute_ns": g["compute_ns"]}
            rows.append([b, nice_ns / 1e3, fsr_ns / 1e3, host_ns / 1e3, gpu_ns / 1e3, read_ns / host_ns,
                         read_ns / gpu_ns, host_ns / nice_ns, gpu_ns / nice_ns, nice_j * 1e3, host_j * 1e3,
                         gpu_j * 1e3, acc])
        # Accuracy through the in-storage path: every class NICE-C returns for the accuracy file.
        r, _, _ = invoke(dev, head(f"{DIR}/accuracy.bin"), block, -(-(RESULT_HEADER + 2 * n_acc) // dev.lba_bytes))
        assert r["value"] == n_acc, f"NICE-C classified {r['value']} of {n_acc} images"
        got_acc = np.frombuffer(r["raw"], dtype="<u2", count=n_acc, offset=RESULT_HEADER)
        nice_acc = float((got_acc == all_labels[:n_acc]).mean())
        same = float((got_acc == acc_ref.argmax(1)).mean())
        agree = float((got_acc == acc_float.argmax(1)).mean())
        assert cnn_classes_match(got_acc, acc_ref, precision), "NICE-C differs from numpy on the accuracy file"
        dev.close()
    trained = lenet.record()
    exp.record("accuracy", {"float_numpy": float_acc, "int8_numpy": int8_acc, "float_images": n_float,
                            "trainer_record": trained, "precision": precision, "in_storage": nice_acc,
                            "in_storage_images": n_acc, "in_storage_equals_numpy_reference": same,
                            "in_storage_agrees_with_float": agree})
    exp.compare(f"LeNet-5 test accuracy, float (numpy, {n_float} test images)", float_acc * 100, None, "%",
                "paper: no LeNet accuracy given")
    exp.compare(f"LeNet-5 test accuracy, int8 (numpy reference, {n_float} test images)", int8_acc * 100, None, "%")
    exp.compare(f"LeNet-5 test accuracy, NICE-C in storage, {precision} ({n_acc} test images)", nice_acc * 100, None, "%")
    exp.compare(f"in-storage classes equal to the numpy {precision} reference's", same * 100, None, "%")
    exp.compare("in-storage classes equal to the float model's", agree * 100, None, "%")
    exp.table("LeNet-5 on Fashion-MNIST test images: latency per batch (us), energy per batch (mJ)",
              ["batch", "NICE", "FSR-C", "HOST-CPU", "HOST-GPU", "CPU transfer share", "GPU transfer share",
               "CPU/NICE", "GPU/NICE", "NICE mJ", "CPU mJ", "GPU mJ", "accuracy"], rows)
    exp.record("points", data)
    big = data[str(max(batches))]
    exp.compare("FSR-C / NICE latency, largest batch", big["fsr_ns"] / big["nice_ns"], PAPER_FSR_RATIO, "x")
    exp.compare("FSR-C / NICE latency, batch 1", data[str(batches[0])]["fsr_ns"] / data[str(batches[0])]["nice_ns"],
                PAPER_FSR_RATIO, "x")
    exp.compare("host transfer share of CPU latency, largest batch", big["host_read_ns"] / big["host_ns"],
                PAPER_HOST_TRANSFER_SHARE, "", "paper: 'over 90%'", better="higher")
    exp.compare("CPU / NICE latency, largest batch", big["host_ns"] / big["nice_ns"], None, "x")
    exp.compare("CPU / NICE energy, largest batch", big["host_j"] / big["nice_j"], None, "x")
    pts = [data[str(b)] for b in batches]
    gpu_r = [p["gpu_ns"] / p["nice_ns"] for p in pts]
    exp.compare("GPU / NICE latency, smallest over batches", min(gpu_r), PAPER_GPU_RATIO[0], "x")
    exp.compare("GPU / NICE latency, largest over batches", max(gpu_r), PAPER_GPU_RATIO[1], "x")
    exp.compare("host transfer share of GPU latency, largest batch", big["host_read_ns"] / big["gpu_ns"],
                PAPER_HOST_TRANSFER_SHARE, "", "paper: 'over 90%' for CPU and GPU", better="higher")
    exp.compare("GPU / NICE energy, largest batch", big["gpu_j"] / big["nice_j"], None, "x")
    compare_headline(exp, [p["host_ns"] / p["nice_ns"] for p in pts], gpu_r)
    exp.note(f"weights: LeNet-5 trained on the 60,000 Fashion-MNIST training images with candle ({trained['trainer']}, "
             f"seed {trained['seed']}, {trained['epochs']} epochs, {trained['optimizer']}; `nearflash nice train`), "
             "shipped as nearflash/nice/lenet5_fashion.f32; NICE-C computes in f32 in storage (its timing charges "
             "8-bit elements), so every in-storage class equals numpy's wherever the top two logits are not a near-tie")
    exp.note("FSR-C = NICE + (FSR-ISC path walk - NICE locate) for the images and the weights file at depth 4, "
             "metadata cached; the paper's 2x also reflects its FSR's heavier per-level cost (Fig. 12 notes)")
    exp.note(f"HOST-GPU: the host's reads as HOST-CPU, then {len(kernels) + 1} kernels per batch on the roofline GPU "
             "model (nearflash.nice.gpu, preset host.gpu_*) plus the unified-memory copies")
    exp.note("no DeepDive model: the paper gives only its 0.34 W and 'very high' latency (docs/nice.md)")
    fig, axes = exp.figure("fig17", 11, 4.2, ncols=2)
    for key, label, m in (("nice_ns", "NICE", "o"), ("fsr_ns", "FSR-C", "^"), ("host_ns", "HOST-CPU", "s"),
                          ("gpu_ns", "HOST-GPU", "D")):
        axes[0].plot(batches, [data[str(b)][key] / 1e3 for b in batches], marker=m, label=label)
    axes[0].set(title="Fig. 17(a): LeNet latency", xlabel="batch", ylabel="latency (us)", xscale="log", yscale="log")
    axes[1].plot(batches, [b / data[str(b)]["nice_j"] for b in batches], marker="o", label="NICE")
    axes[1].plot(batches, [b / data[str(b)]["host_j"] for b in batches], marker="s", label="HOST-CPU")
    axes[1].plot(batches, [b / data[str(b)]["gpu_j"] for b in batches], marker="D", label="HOST-GPU")
    axes[1].set(title="Fig. 17(b): LeNet images per joule", xlabel="batch", ylabel="images / J", xscale="log",
                yscale="log")
    for ax in axes:
        ax.legend(fontsize=8)
