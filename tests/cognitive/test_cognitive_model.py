"""The shipped hashing model: float reference, int8 executor (>= 99% equal bits), classification, damaged files."""

import numpy as np
import pytest

from nearflash import InvalidArgument
from nearflash._native import cognitive as cog
from nearflash.cognitive import load_model, shipped_model_path

from cognitive_fixtures import fmnist, index, model  # noqa: F401  (fixtures)


def test_shipped_model_shape_and_record(model):
    assert model.bits == 48
    assert model.input_bytes == 784
    md = model.metadata
    assert md["seed"] == "1" and float(md["test_accuracy"]) > 0.85
    kinds = [layer["type"] for layer in model.layers()["body"]]
    assert kinds[0] == "conv" and kinds[-1] == "fc"


def test_int8_matches_float(fmnist, model):
    db, _, qs, _ = fmnist
    q8 = model.quantise(db[:300])
    f_codes, i_codes = model.hash(qs), q8.hash(qs)
    equal = 1 - np.unpackbits((f_codes ^ i_codes).view(np.uint8)).sum() / (len(qs) * 48)
    assert equal >= 0.99, equal
    f, i = model.forward(qs[:50]), q8.forward(qs[:50])
    scale = np.abs(f).max()
    assert np.abs(f - i).max() < 0.05 * scale  # within int8 quantisation tolerance of the layer's range


def test_classifies_fashion_mnist(fmnist, model):
    _, _, qs, q_labels = fmnist
    assert (model.classify(qs) == q_labels).mean() > 0.8


def test_damaged_model_files(tmp_path):
    data = shipped_model_path().read_bytes()
    for i, bad in enumerate([data[:100], b"\0" * 64, data[:-10], data[:8] + b"{not json" + data[17:]]):
        p = tmp_path / f"bad{i}.safetensors"
        p.write_bytes(bad)
        with pytest.raises(InvalidArgument):
            load_model(p)
    with pytest.raises(InvalidArgument, match="does not exist"):
        load_model(tmp_path / "missing.safetensors")


def test_wrong_image_shapes(model):
    with pytest.raises(InvalidArgument, match="784"):
        model.hash(np.zeros((2, 783), np.uint8))
    with pytest.raises(TypeError):
        model.hash(np.zeros((2, 784), np.float32))
    with pytest.raises(InvalidArgument, match="calibration|image"):
        model.quantise(np.zeros((0, 784), np.uint8))


def test_random_networks_and_timing():
    alex = cog.Model.random("hash_alexnet", 48, 1)
    assert alex.bits == 48 and alex.input_bytes == 3 * 227 * 227
    layers = cog.npe_timing("hash_alexnet", 48)
    convs = [layer for layer in layers if layer["layer"].startswith("conv")]
    assert all(layer["compute_bound"] for layer in convs)  # Eq. 4: output width >= 4
    with pytest.raises(InvalidArgument, match="network"):
        cog.npe_timing("vgg", 48)
    with pytest.raises(InvalidArgument, match="bits"):
        cog.Model.random("fashion", 65, 1)
    with pytest.raises(InvalidArgument, match="unknown parameter"):
        cog.npe_timing("fashion", 48, {"n_pes": 1})
