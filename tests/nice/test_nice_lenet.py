"""NICE-C in storage (op 6): LeNet-5 over a file of Fashion-MNIST images with its weights in another file of the same
ext4 image; the classes equal the numpy reference, and wrong invocations are refused with nothing returned."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from nearflash.errors import NvmeError
from nearflash.nice import lenet
from nearflash.nice.experiments.common import cap, debugfs, device, invoke

pytestmark = pytest.mark.skipif(shutil.which("mke2fs") is None or not Path("/usr/share/datasets/fashion-mnist").exists(),
                                reason="needs Debian's e2fsprogs and dataset-fashion-mnist (scripts/env.sh)")
OP_LENET = 6


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lenet")
    root = tmp / "root"
    root.mkdir()
    wts = lenet.load()
    imgs = lenet.images("test")[:24]
    (root / "w.bin").write_bytes(lenet.weight_bytes(wts))
    (root / "imgs.bin").write_bytes(imgs.tobytes())
    (root / "odd.bin").write_bytes(bytes(range(250)) * 4)
    img = tmp / "fs.img"
    subprocess.run(["mke2fs", "-q", "-F", "-t", "ext4", "-b", "4096", "-d", str(root), str(img), "8M"], check=True)
    heads = {p: int(debugfs(img, [f"blocks /{p}"])[0].split()[0]) for p in ("w.bin", "imgs.bin", "odd.bin")}
    dev = device(img.read_bytes(), 1024)
    return dev, heads, wts, imgs


def block(weights_head: int) -> bytes:
    return bytes([OP_LENET, 0]) + bytes(6) + struct.pack("<Q", weights_head)


def test_in_storage_lenet_equals_numpy(setup):
    dev, heads, wts, imgs = setup
    r, _, t_read = invoke(dev, heads["imgs.bin"], block(heads["w.bin"]))
    assert (r["op"], r["value"], r["size"]) == (OP_LENET, len(imgs), imgs.nbytes)
    got = np.frombuffer(r["raw"], dtype="<u2", count=len(imgs), offset=24)
    ref = lenet.logits(wts, imgs)
    top2 = np.sort(ref, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 1e-4 * np.abs(top2).max()
    assert clear.sum() >= len(imgs) - 1
    assert np.array_equal(got[clear], ref.argmax(1)[clear])
    assert t_read > 0
    assert dev.report().extensions["nice"]["isc_flash_sectors"] > 0


def test_host_library_runs_lenet_by_path(setup):
    from nearflash.nice.host import NiceHost

    dev, _, wts, imgs = setup
    h = NiceHost(dev)
    h.open("/imgs.bin")
    h.open("/w.bin")
    h.nice_write("/imgs.bin", "cnn", weights="/w.bin", net="lenet5")
    r = h.nice_read("/imgs.bin")
    ref = lenet.logits(wts, imgs)
    top2 = np.sort(ref, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 1e-4 * np.abs(top2).max()
    assert np.array_equal(r["classes"][clear], ref.argmax(1)[clear])
    from nearflash._native import InvalidArgument
    with pytest.raises(InvalidArgument):
        h.nice_write("/imgs.bin", "cnn", weights="/w.bin", net="resnet")
    with pytest.raises(InvalidArgument):
        h.nice_write("/imgs.bin", "cnn", weights="/not-open.bin")
    with pytest.raises(InvalidArgument):
        h.nice_write("/imgs.bin", "cnn", weights=None)


@pytest.mark.parametrize("case", ["weights not a file head", "weights of the wrong size", "images not 28x28",
                                  "truncated block", "unknown network"])
def test_wrong_lenet_invocations_are_refused(setup, case):
    dev, heads, _, _ = setup
    bs = dev.lba_bytes
    target, blk = {
        "weights not a file head": (heads["imgs.bin"], block(heads["w.bin"] + 1)),
        "weights of the wrong size": (heads["imgs.bin"], block(heads["imgs.bin"])),
        "images not 28x28": (heads["odd.bin"], block(heads["w.bin"])),
        "truncated block": (heads["imgs.bin"], bytes([OP_LENET, 0, 0])),
        "unknown network": (heads["imgs.bin"], bytes([OP_LENET, 7]) + bytes(6) + struct.pack("<Q", heads["w.bin"])),
    }[case]
    if case == "unknown network":
        # Refused at NICE_Write already: nothing is bound.
        with pytest.raises(NvmeError):
            dev.write(cap(dev) + target, np.frombuffer(blk + bytes(bs - len(blk)), dtype=np.uint8))
        return
    # A one-byte-short block is padded with zeros by the write (weights head 0: no file's head).
    with pytest.raises(NvmeError):
        invoke(dev, target, blk)
    before = bytes(dev.read(0, 4))
    with pytest.raises(NvmeError):
        dev.read(cap(dev) + target, 1)
    assert bytes(dev.read(0, 4)) == before and bs == 4096


def test_the_shipped_weights_are_trained_and_their_record_holds():
    wts = lenet.load()
    rec = lenet.record()
    assert rec["network"] == "lenet5" and rec["train_images"] == 60000 and rec["bytes"] == lenet.WEIGHT_BYTES
    assert rec["trainer"].startswith("nearflash-nice-train")
    n = 2000
    acc = lenet.accuracy(wts, lenet.images("test")[:n], lenet.labels("test")[:n])
    # Trained, not fitted: far above the ridge-fitted last layer's ~70%, near the record's full-test figure.
    assert acc > 0.85 and abs(acc - rec["test_accuracy"]) < 0.03, (acc, rec["test_accuracy"])
    assert rec["test_accuracy_nice_kernels"] == pytest.approx(rec["test_accuracy"], abs=0.002)
    with pytest.raises(ValueError, match="bytes"):
        lenet.load(__file__)  # not a weights file
