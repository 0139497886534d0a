"""`nearflash nice train`: the candle LeNet-5 trainer writes NICE's weights file and its record, reproducibly."""

import json
from pathlib import Path

import numpy as np
import pytest

from nearflash.cli import main
from nearflash.nice import lenet
from nearflash.nice.train import BINARY

DATA = Path("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")


@pytest.mark.skipif(not DATA.exists(), reason="dataset-fashion-mnist not installed")
def test_train_small_is_reproducible_and_loads(tmp_path, capsys, candle_trainer):
    candle_trainer(BINARY, "NEARFLASH_NICE_TRAIN")
    outs = []
    for i in range(2):
        p = tmp_path / f"w{i}.f32"
        assert main(["nice", "train", "--out", str(p), "--epochs", "1", "--limit", "256"]) == 0
        summary = json.loads(capsys.readouterr().out)
        assert summary["train_images"] == 256 and summary["bytes"] == lenet.WEIGHT_BYTES
        # The crate's f32 kernels (NICE-C in storage) classify as candle did, up to near-ties.
        assert abs(summary["test_accuracy_nice_kernels"] - summary["test_accuracy"]) <= 0.005
        assert lenet.record(p) == summary
        outs.append(p)
    assert outs[0].read_bytes() == outs[1].read_bytes(), "same seed, same weights"
    a = lenet.load(outs[0])
    imgs, labels = lenet.images("test")[:256], lenet.labels("test")[:256]
    assert lenet.accuracy(a, imgs, labels) == pytest.approx(summary["test_accuracy"], abs=0.005)
    assert main(["nice", "train", "--out", str(tmp_path / "x"), "--epochs", "0"]) == 2
    assert "epochs" in capsys.readouterr().err
    assert main(["nice", "train", "--out", str(tmp_path / "x"), "--limit", "-3"]) == 2
    assert not (tmp_path / "x").exists()
    other = tmp_path / "other.f32"
    assert main(["nice", "train", "--out", str(other), "--epochs", "1", "--limit", "256", "--seed", "2"]) == 0
    assert not np.array_equal(lenet.load(other)[0][0], a[0][0]), "another seed, other weights"
