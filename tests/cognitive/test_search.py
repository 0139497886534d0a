"""The DLG pipeline on a Fashion-MNIST subset: hashing, graph search under both layouts, brute force, bad input."""

import numpy as np
import pytest

from nearflash import InvalidArgument
from nearflash._native import cognitive as cog
from nearflash.cognitive import DlgIndex

from cognitive_fixtures import fmnist, index, model  # noqa: F401  (fixtures)


def precision(ids_list, labels, q_labels):
    return float(np.mean([(labels[ids] == q).mean() for ids, q in zip(ids_list, q_labels)]))


def test_graph_search_close_to_brute_force_and_two_hop_reads_fewer_pages(fmnist, index):
    _, db_labels, qs, q_labels = fmnist
    qs, q_labels = qs[:60], q_labels[:60]
    bf = precision(index.brute_force(qs, 100), db_labels, q_labels)
    plain = index.search(qs, 100, "plain")
    two = index.search(qs, 100, "two_hop")
    assert all(len(ids) == 100 and len(set(ids.tolist())) == 100 for ids in plain.ids + two.ids)
    p_plain, p_two = precision(plain.ids, db_labels, q_labels), precision(two.ids, db_labels, q_labels)
    assert bf > 0.7
    assert p_plain > bf - 0.03 and p_two > bf - 0.05, (bf, p_plain, p_two)
    pages_plain = np.mean([s["pages_read"] for s in plain.stats])
    pages_two = np.mean([s["pages_read"] for s in two.stats])
    assert pages_plain > 3 * pages_two, (pages_plain, pages_two)


def test_search_is_deterministic(fmnist, index):
    qs = fmnist[2][:5]
    a, b = index.search(qs, 50), index.search(qs, 50)
    assert all((x == y).all() for x, y in zip(a.ids, b.ids)) and a.stats == b.stats


@pytest.mark.parametrize("t", [0, -1, 2001, 1.5, True, "10"])
def test_bad_t(fmnist, index, t):
    with pytest.raises(InvalidArgument, match="T"):
        index.search(fmnist[2][:1], t)


@pytest.mark.parametrize(
    "images",
    [np.zeros((1, 783), np.uint8), np.zeros((1, 784), np.float32), np.zeros((0, 784), np.uint8), np.zeros((2, 27, 28), np.uint8)],
)
def test_bad_images(index, images):
    with pytest.raises(InvalidArgument, match="images"):
        index.search(images, 10)


def test_bad_layout_and_constructor(fmnist, index):
    with pytest.raises(InvalidArgument, match="layout"):
        index.search(fmnist[2][:1], 10, layout="three_hop")
    with pytest.raises(InvalidArgument, match="k"):
        DlgIndex(fmnist[0][:30], k=30)
    with pytest.raises(InvalidArgument, match="calibration"):
        DlgIndex(fmnist[0][:30], calibration=0)
    with pytest.raises(InvalidArgument, match="codes"):
        cog.Graph(np.array([1 << 50, 2, 3], np.uint64), 48, 1)
    with pytest.raises(InvalidArgument, match="T"):
        cog.brute_force(index.codes, 0, 0)


def test_threshold_beyond_buffer_is_refused(fmnist, index):
    # D_block = 200 ids per bucket and in the ring (V_final = 0: one bucket): a pool of T = 250 could be dropped
    small = {"d_block": 200, "weight_buffer": 0.5}
    with pytest.raises(InvalidArgument, match="InOut buffer"):
        index.search(fmnist[2][:1], 250, params=small)
    assert len(index.search(fmnist[2][:1], 200, params=small).ids[0]) == 200
    # the count rule's 4T = 600 held vertices do not fit the 400 slots either
    with pytest.raises(InvalidArgument, match="InOut buffer"):
        index.search(fmnist[2][:1], 150, params={**small, "termination": "count"})


def test_classify_and_hash_agree_with_model(fmnist, index, model):
    qs = fmnist[2][:20]
    assert (index.classify(qs) == model.classify(qs)).all()
    assert index.hash(qs.reshape(20, 28, 28)).tolist() == index.hash(qs).tolist()
