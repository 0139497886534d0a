"""CognitiveSSD over the firmware extension: what the device answers equals the host pipeline (hash codes, top-T
ids under both layouts, classes); hostile input is refused with a clear error and leaves the deployment intact."""

import numpy as np
import pytest

from nearflash import ConfigError, InvalidArgument, NvmeError
from nearflash.cognitive import CognitiveSSD, DlgIndex, encode_command

from cognitive_fixtures import fmnist, model, small_device  # noqa: F401  (fixtures)

DB = 300


@pytest.mark.parametrize("layout", ["two_hop", "plain"])
def test_device_answers_as_the_host_pipeline(fmnist, model, layout):
    db, _, qs, _ = fmnist
    ssd = CognitiveSSD(small_device())
    ssd.deploy(model, db[:DB], layout=layout, calibration=200)
    host = DlgIndex(db[:DB], model, calibration=200)
    q = qs[:40]  # two DLG_hashing sessions (32 + 8)
    assert (ssd.hash(q) == host.hash(q)).all()
    ids = ssd.search(q, 20)
    assert ids.shape == (40, 20) and ids.dtype == np.uint32
    assert all((a == b).all() for a, b in zip(ids, host.search(q, 20, layout).ids))
    assert ssd.last_latency_ns > 0
    assert (ssd.classify(q) == host.classify_int8(q)).all()
    stats = ssd.report()["stats"]
    assert stats["weight_pages_read"] > 0 and stats["graph_pages_read"] > 0 and stats["queries"] == 40
    ssd.device.verify()


def test_int8_classes_agree_with_the_float_model(fmnist, model):
    db, _, qs, q_labels = fmnist
    host = DlgIndex(db[:DB], model, calibration=200)
    i8, f = host.classify_int8(qs[:100]), host.classify(qs[:100])
    assert (i8 == f).mean() >= 0.95 and (i8 == q_labels[:100]).mean() > 0.7


@pytest.fixture(scope="module")
def deployed(fmnist, model):
    ssd = CognitiveSSD(small_device(reserved=2))
    ssd.deploy(model, fmnist[0][:DB], calibration=200)
    return ssd


@pytest.mark.parametrize(
    "images,match",
    [
        (np.zeros((2, 784), dtype=np.float32), "dtype"),
        (np.zeros((2, 783), dtype=np.uint8), "shape"),
        (np.zeros((0, 784), dtype=np.uint8), "shape"),
        (np.zeros((2, 27, 28), dtype=np.uint8), "shape"),
        ([[1, 2, 3]], "dtype|shape"),
    ],
)
def test_malformed_images(deployed, images, match):
    with pytest.raises(InvalidArgument, match=match):
        deployed.search(images, 10)
    with pytest.raises(InvalidArgument, match=match):
        deployed.hash(images)


@pytest.mark.parametrize("t", [0, -1, DB + 1, 1.5, True, "10", None])
def test_bad_t(fmnist, deployed, t):
    with pytest.raises(InvalidArgument, match="T"):
        deployed.search(fmnist[2][:1], t)


def test_a_database_that_does_not_fit_is_refused_and_the_deployment_stays(fmnist, model, deployed):
    db, _, qs, _ = fmnist
    before = deployed.search(qs[:3], 10)
    with pytest.raises(InvalidArgument, match="does not fit|graph pages"):
        deployed.deploy(model, db[:1500], calibration=200)
    assert (deployed.search(qs[:3], 10) == before).all()
    # the firmware refuses a payload on its own too: a damaged one is an NVMe error, nothing changes
    with pytest.raises(NvmeError):
        deployed._command("DLG_config", 0, 1, np.frombuffer(b"DLGM" + bytes(60), dtype=np.uint8).copy(), True)
    assert (deployed.search(qs[:3], 10) == before).all()


def test_physical_writes_into_ftl_blocks_are_denied(deployed):
    buf = np.full(16384, 0xAB, dtype=np.uint8)
    with pytest.raises(NvmeError) as e:
        deployed._command("SSD_write", 0, 0, buf, True)  # physical page 0: the FTL's
    assert (e.value.sct, e.value.sc) == (2, 0x86)
    with pytest.raises(InvalidArgument, match="DW12"):
        encode_command("DLG_index", 0, 8, 0)
    deployed.device.verify()


def test_bad_construction(fmnist, model):
    with pytest.raises(InvalidArgument, match="method"):
        CognitiveSSD(small_device(), method="C")
    with pytest.raises(InvalidArgument, match="device"):
        CognitiveSSD("not a device")
    with pytest.raises((ConfigError, InvalidArgument), match="ext_reserved_blocks"):
        CognitiveSSD(small_device(reserved=0))
    ssd = CognitiveSSD(small_device())
    with pytest.raises(InvalidArgument, match="deploy"):
        ssd.search(fmnist[2][:1], 5)
    with pytest.raises(InvalidArgument, match="layout"):
        ssd.deploy(model, fmnist[0][:DB], layout="three_hop")
    with pytest.raises(InvalidArgument, match="database"):
        ssd.deploy(model, None)


def safetensors_model(network: dict, seed: int = 1) -> bytes:
    """A safetensors model file of `network` (the layer list JSON) with random float weights, written by hand so that
    layer lists the trainer would never make can be tried."""
    import json
    import struct

    rng = np.random.default_rng(seed)
    tensors, blobs, off = {}, [], 0
    for layer in network["body"] + [network["classifier"]]:
        if layer["type"] == "conv":
            shapes = [[layer["out_ch"], layer["in_ch"], layer["kernel"], layer["kernel"]], [layer["out_ch"]]]
        elif layer["type"] == "fc":
            shapes = [[layer["outputs"], layer["inputs"]], [layer["outputs"]]]
        else:
            continue
        for suffix, shape in zip(("weight", "bias"), shapes):
            b = (rng.standard_normal(int(np.prod(shape))).astype("<f4") * 0.1).tobytes()
            tensors[f"{layer['name']}.{suffix}"] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(b)]}
            blobs.append(b)
            off += len(b)
    header = json.dumps({"__metadata__": {"network": json.dumps(network)}, **tensors}).encode()
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header + b"".join(blobs)


def net_with(first: dict, flat: int) -> dict:
    return {"input": [1, 28, 28], "body": [first, {"type": "relu"}, {"type": "flatten"},
                                           {"type": "fc", "name": "hash", "inputs": flat, "outputs": 48}],
            "classifier": {"type": "fc", "name": "cls", "inputs": 48, "outputs": 10}}


def test_a_model_the_compiler_cannot_map_is_refused_naming_the_layer(fmnist, deployed, tmp_path):
    """A 17x17 kernel does not fit DLG-x's 4-bit kernel field: deploy names the layer; nothing on the device changes.
    A layer kind DLG-x has no unit for is refused when the model is read, naming it."""
    from nearflash.cognitive import load_model

    qs = fmnist[2]
    before = deployed.search(qs[:3], 10)
    big = tmp_path / "k17.safetensors"
    big.write_bytes(safetensors_model(net_with({"type": "conv", "name": "wide", "in_ch": 1, "out_ch": 4, "kernel": 17,
                                                "stride": 1, "pad": 0}, 4 * 12 * 12)))
    with pytest.raises(InvalidArgument, match=r"wide.*kernel and stride up to 15"):
        deployed.deploy(str(big), fmnist[0][:DB], calibration=50)
    lstm = tmp_path / "lstm.safetensors"
    net = net_with({"type": "conv", "name": "c", "in_ch": 1, "out_ch": 4, "kernel": 5, "stride": 1, "pad": 0}, 4 * 24 * 24)
    net["body"].insert(1, {"type": "lstm", "name": "rnn", "hidden": 8})
    lstm.write_bytes(safetensors_model(net))
    with pytest.raises(InvalidArgument, match="lstm"):
        load_model(str(lstm))
    assert (deployed.search(qs[:3], 10) == before).all()
    deployed.device.verify()


def test_index_without_a_hashing_session_is_a_sequence_error(fmnist, deployed):
    before = deployed.search(fmnist[2][:3], 10)
    with pytest.raises(NvmeError) as e:
        deployed._command("DLG_index", 0x7777, 10, np.zeros(40, dtype=np.uint8), False)  # no DLG_hashing at 0x7777
    assert (e.value.sct, e.value.sc) == (0, 0x0C)
    assert "DLG_index (index without hashing session)" in str(e.value), "the device's reason, read from its error log"
    with pytest.raises(NvmeError) as e:
        deployed._command("DLG_analysis", 0x7777, 1, np.zeros(8, dtype=np.uint8), False)
    assert (e.value.sct, e.value.sc) == (0, 0x0C)
    assert (deployed.search(fmnist[2][:3], 10) == before).all()
    deployed.device.verify()
