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
