"""Cognitive SSD on an Array: the database sharded over devices, each hashing and searching its shard with DLG-x,
the host ranking every shard's answers by Hamming distance. Checked against brute force over the whole database's
codes and against one device; bad input refused before any device works. (That worker processes give the same
report is checked for the sharded NDSearch and RecSSD, whose shards run the same way.)"""

import numpy as np
import pytest

import nearflash
from nearflash.array import DeviceSpec
from nearflash.cognitive import CognitiveSSD, DlgIndex, sharded
from nearflash.errors import InvalidArgument

from cognitive_fixtures import SMALL, fmnist, model  # noqa: F401 (fixtures)

DEVICE = {**SMALL, "ext_reserved_blocks": 8}


def array(n=3):
    return nearflash.Array(n, "cosmos-plus", overrides=DEVICE)


@pytest.fixture(scope="module")
def data(fmnist):  # noqa: F811
    db, _, qs, _ = fmnist
    return db[:600], qs[:24]


@pytest.fixture(scope="module")
def three(data):
    db, qs = data
    return sharded.search(array(), db, qs, t=10, calibration=300)


def test_merged_answers_reach_brute_force_over_the_whole_database(data, three, model):  # noqa: F811
    db, qs = data
    whole = DlgIndex(db, model, calibration=300)
    qcodes = whole.hash(qs)
    truth = np.sort(sharded.hamming(np.tile(whole.codes, (len(qs), 1)), qcodes), axis=1)
    # Ties at equal distance are interchangeable: compare the distances of the answers with the true 10 nearest.
    assert three.ids.shape == (24, 10)
    got = sharded.hamming(whole.codes[three.ids], qcodes)
    assert np.array_equal(got, three.distances)  # the host's distances are the real ones under one model
    hit = np.mean([np.sum(got[i] <= truth[i, 9]) / 10 for i in range(len(qs))])
    assert hit >= 0.9
    assert np.all(np.diff(three.distances, axis=1) >= 0)


def test_shards_hold_consecutive_ranges_and_the_host_pays_the_merge(three, data):
    db, qs = data
    assert [(s["first"], s["rows"]) for s in three.shards] == [(0, 200), (200, 200), (400, 200)]
    whole = three.report.whole
    assert whole["bytes"]["to_device"] == 3 * qs.nbytes
    assert whole["bytes"]["to_host"] == 3 * 24 * (8 + 4 * 10)
    cpu_ns = whole["utilisation"]["host_cpu"] * whole["elapsed_ns"] * whole["host"]["host.cpu_cores"]
    assert cpu_ns == pytest.approx(3 * 24 * 10 * whole["host"]["cpu.topk_merge_ns_per_candidate"], rel=1e-6)
    assert three.qps > 0


def test_one_device_answers_as_a_cognitive_ssd_does(data, model):  # noqa: F811
    db, qs = data
    res = sharded.search(array(1), db[:200], qs, t=5, calibration=100)
    with nearflash.Device(None, "cosmos-plus", **DEVICE) as dev:
        ssd = CognitiveSSD(dev)
        ssd.deploy(model, db[:200], calibration=100)
        ids = ssd.search(qs, 5)
    # Same candidates; the host re-ranks ties by id, the GSE may order equal distances otherwise.
    assert [sorted(a) for a in res.ids.tolist()] == [sorted(a) for a in ids.astype(np.int64).tolist()]


def test_t_beyond_a_shard_is_answered_from_all(data):
    db, qs = data
    res = sharded.search(array(3), db[:12], qs[:2], t=8, k=2, calibration=12)
    assert sorted(set(res.ids[0].tolist())) == sorted(res.ids[0].tolist()) and res.ids.max() < 12


def test_the_host_path_hashes_each_query_once_and_searches_every_shard_over_pages_it_reads(data, model):  # noqa: F811
    db, qs = data[0][:300], data[1][:12]
    host_three = sharded.search(array(), db, qs, t=10, calibration=60, path="host")
    whole = DlgIndex(db, model, calibration=60)
    qcodes = whole.hash(qs)
    truth = np.sort(sharded.hamming(np.tile(whole.codes, (len(qs), 1)), qcodes), axis=1)
    got = sharded.hamming(whole.codes[host_three.ids], qcodes)
    assert np.array_equal(got, host_three.distances)
    assert np.mean([np.sum(got[i] <= truth[i, 9]) / 10 for i in range(len(qs))]) >= 0.9
    w, shards = host_three.report.whole, host_three.shards
    # Nothing goes to the drives; every page a shard's searches read comes to the host, 16 KiB each.
    assert w["bytes"]["to_device"] == 0
    assert w["bytes"]["to_host"] == 16384 * sum(s["pages_read"] for s in shards) > 0
    assert all(0 < s["pages_read"] <= len(qs) * s["pages"] for s in shards)
    # Each query is hashed once for the whole array (shard q mod 3 pays it), not once per shard.
    assert [s["hashed"] for s in shards] == [4, 4, 4]
    c = sharded.HostCosts.of(whole)
    cpu_ns = w["utilisation"]["host_cpu"] * w["elapsed_ns"] * w["host"]["host.cpu_cores"]
    steps = sum(s["neighbour_steps"] for s in shards)
    expected = len(qs) * c.hash_ns_per_query + steps * c.step_ns + 3 * 12 * 10 * w["host"]["cpu.topk_merge_ns_per_candidate"]
    assert cpu_ns == pytest.approx(expected, rel=1e-3)
    assert c.hash_ns_per_query == pytest.approx(whole.net.macs() * 0.688)  # B-CPU's host_mac_time


def test_the_host_path_refuses_an_unknown_path(data):
    db, qs = data
    with pytest.raises(InvalidArgument, match="path"):
        sharded.search(array(), db, qs, path="gpu")


@pytest.mark.parametrize("call, match", [
    (lambda d, q: sharded.search(nearflash.Array([DeviceSpec("cosmos-plus", overrides=DEVICE),
                                                  DeviceSpec("searssd")]), d, q), "mixes"),
    (lambda d, q: sharded.search(array(), d, q, t=0), "t"),
    (lambda d, q: sharded.search(array(), d, q, t=601), "t"),
    (lambda d, q: sharded.search(array(), d, q, t=2.5), "t"),
    (lambda d, q: sharded.search(array(), d.astype(np.float32), q), "dtype"),
    (lambda d, q: sharded.search(array(), d, q[:, :100]), "shape"),
    (lambda d, q: sharded.search(array(), d[:5], q), "every shard"),
    (lambda d, q: sharded.search(array(), d, q, layout="flat"), "layout"),
    (lambda d, q: sharded.search(array(), d, q, method="C"), "method"),
    (lambda d, q: sharded.search(array(), d, q, calibration=0), "calibration"),
    (lambda d, q: sharded.search([1, 2], d, q), "Array"),
])
def test_bad_arguments_are_refused(data, call, match):
    db, qs = data
    with pytest.raises((InvalidArgument, TypeError, ValueError), match=match):
        call(db, qs)


def test_calibration_images_must_be_images(data, model):  # noqa: F811
    db, _ = data
    with pytest.raises(InvalidArgument, match="calibration"):
        DlgIndex(db[:50], model, calibration=np.zeros((3, 5), np.uint8))
    with pytest.raises(InvalidArgument, match="calibration"):
        DlgIndex(db[:50], model, calibration=True)


def test_the_shards_of_one_array_calibrate_the_int8_model_once(data):
    db, _ = data
    calibration = db[:60]
    shards = [DlgIndex(db[i:i + 100], calibration=calibration, k=5) for i in (0, 100, 200)]
    assert all(s.qmodel is shards[0].qmodel for s in shards)  # one model, one quantisation, for every shard
    assert DlgIndex(db[:100], calibration=db[:50], k=5).qmodel is not shards[0].qmodel  # other images: its own
    assert np.array_equal(shards[0].hash(db[:8]), DlgIndex(db[:100], calibration=calibration.copy(), k=5).hash(db[:8]))
