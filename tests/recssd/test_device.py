"""RecSSD on an emulated device, through the Python API: the NDP path, the baseline path and the DRAM path agree
with the numpy reference on random and adversarial bags; EmbeddingBag takes numpy, lists and tensors; bad NDP
commands complete with clear NVMe statuses; the models run end to end with real outputs."""

import struct

import numpy as np
import pytest

import nearflash
from nearflash import InvalidArgument
from nearflash._native import recssd as rs
from nearflash.recssd import SPECS, EmbeddingBag, RecSSD, TableSpec, build_model, sls_reference, uniform_batch

from test_sls import ADVERSARIAL, _bags

ROWS = 1000


@pytest.fixture(scope="module")
def stored(small_config):
    """Two stored tables (dim 32 packed: 128 rows per page; dim 64: 64 rows per page) on a data-keeping device."""
    dev = nearflash.Device(None, preset="cosmos-plus", stack="polled", **small_config)
    rng = np.random.default_rng(3)
    tables = [rng.standard_normal((ROWS, 32), dtype=np.float32), rng.standard_normal((ROWS, 64), dtype=np.float32)]
    return RecSSD(dev, tables), tables


@pytest.fixture(scope="module")
def small_config():
    from conftest import SMALL

    return dict(SMALL)


@pytest.mark.parametrize("case", sorted(ADVERSARIAL))
@pytest.mark.parametrize("path", ["ndp", "baseline", "dram"])
def test_paths_match_the_numpy_reference_on_adversarial_bags(stored, case, path):
    system, tables = stored
    idx, off = _bags(ADVERSARIAL[case])
    for t, table in enumerate(tables):
        got = system.sls(t, idx, off, path)
        np.testing.assert_allclose(got, sls_reference(table, idx, off), rtol=1e-5, atol=1e-4)


def test_random_bags_and_static_partition(stored):
    system, tables = stored
    rng = np.random.default_rng(11)
    lengths = rng.integers(0, 40, size=50)
    idx = rng.integers(0, ROWS, size=int(lengths.sum()))
    off = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    want = sls_reference(tables[0], idx, off)
    before = system.firmware_report()["stats"]["requests"]
    np.testing.assert_allclose(system.sls(0, idx, off, "ndp"), want, rtol=1e-5, atol=1e-4)
    assert system.firmware_report()["stats"]["requests"] == before + 1
    # Hot rows in host DRAM: the SSD returns partial sums, the host adds its rows.
    system.set_partitions([idx[:300], np.arange(10)])
    try:
        np.testing.assert_allclose(system.sls(0, idx, off, "ndp"), want, rtol=1e-5, atol=1e-4)
    finally:
        system.clear_partitions()


class _FakeTensor:
    """Duck-typed stand-in for a torch tensor (the API calls detach().cpu().numpy())."""

    def __init__(self, a):
        self.a = np.asarray(a)

    def detach(self):
        return self

    def cpu(self):
        return self

    def numpy(self):
        return self.a


def test_embedding_bag_like_torch(stored):
    system, tables = stored
    bag = system.embedding_bag(1, path="ndp")
    assert isinstance(bag, EmbeddingBag) and bag.embedding_dim == 64
    two_d = np.array([[1, 2, 3], [4, 5, 6]])
    want = sls_reference(tables[1], two_d.reshape(-1), np.array([0, 3]))
    np.testing.assert_allclose(bag(two_d), want, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(bag(_FakeTensor([1, 2, 3, 4, 5, 6]), _FakeTensor([0, 3])), want, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(bag.forward([1, 2, 3, 4, 5, 6], [0, 3]), want, rtol=1e-5, atol=1e-4)
    with pytest.raises(ValueError):
        bag([1, 2])
    with pytest.raises(ValueError):
        bag(two_d, [0, 3])
    with pytest.raises(NotImplementedError):
        bag([1, 2], [0], per_sample_weights=[1.0, 2.0])
    with pytest.raises(InvalidArgument, match="outside the table"):
        bag([ROWS], [0])


def test_torch_tensors_when_torch_is_installed(stored):
    torch = pytest.importorskip("torch")
    system, tables = stored
    out = system.embedding_bag(0)(torch.tensor([5, 6, 7]), torch.tensor([0, 1]))
    ref = torch.nn.EmbeddingBag.from_pretrained(torch.from_numpy(tables[0]), mode="sum")
    np.testing.assert_allclose(out, ref(torch.tensor([5, 6, 7]), torch.tensor([0, 1])).numpy(), rtol=1e-5, atol=1e-4)


def _sqe(opcode, cid, slba, nlb, ndp=True):
    cdw12 = (nlb - 1) | ((1 << 16) if ndp else 0)
    b = bytearray(64)
    struct.pack_into("<BBHI", b, 0, opcode, 0, cid, 1)
    struct.pack_into("<III", b, 40, slba & 0xFFFFFFFF, slba >> 32, cdw12)
    return bytes(b)


def _execute(dev, q, sqe, data, to_device):
    dev.native.submit_raw(q, sqe, data, to_device)
    c = dev.native.wait(q)
    return c[1], c[2], rs.describe_fault(c[3])


def test_bad_ndp_commands_complete_with_clear_statuses(small_config):
    dev = nearflash.Device(None, preset="cosmos-plus", **small_config)
    system = RecSSD(dev, [np.ones((ROWS, 32), np.float32)])
    start = system.tables[0]["start_lba"]
    q = dev.queue(depth=8).qid

    def config(pairs, results=2, dim=32):
        words = [4, dim, results, len(pairs), 0] + [w for p in pairs for w in p]
        raw = np.zeros(4096, np.uint8)
        raw[: 4 * len(words)] = np.frombuffer(struct.pack(f"<{len(words)}I", *words), np.uint8)
        return raw

    write, read = 0x01, 0x02
    cases = [
        (config([(0, 5), (1, 2)]), (0, 0x02, "not sorted")),  # pairs must be sorted by input id
        (config([(0, ROWS)]), (0, 0x02, "outside the table")),
        (config([(0, 1)], results=9000), (0, 0x02, "256-sector")),
        (config([(0, 1)], dim=16), (0, 0x02, "embedding length")),
        (config([(3, 1)]), (0, 0x02, "resultEmbeddings")),
    ]
    for payload, (sct, sc, words) in cases:
        got = _execute(dev, q, _sqe(write, 1, start + 1, 1), payload, True)
        assert got[:2] == (sct, sc) and words in got[2], got
    out = np.zeros(4096, np.uint8)
    sct, sc, why = _execute(dev, q, _sqe(read, 2, start + 9, 1), out, False)
    assert (sct, sc) == (0, 0x0C) and "without a configured request" in why
    sct, sc, why = _execute(dev, q, _sqe(write, 3, start + 5000, 1), config([(0, 1)]), True)
    assert (sct, sc) == (0, 0x80) and "no registered table" in why
    # A good request round-trips through raw commands: sum of rows 1 and 2 of an all-ones table.
    assert _execute(dev, q, _sqe(write, 4, start + 5, 1), config([(0, 1), (0, 2)], results=1), True)[:2] == (0, 0)
    assert _execute(dev, q, _sqe(read, 5, start + 5, 1), out, False)[:2] == (0, 0)
    assert np.frombuffer(out.tobytes()[:128], np.float32).tolist() == [2.0] * 32


def test_stored_tables_need_a_device_that_keeps_data(small_config):
    dev = nearflash.Device(None, preset="cosmos-plus", materialise=False, **small_config)
    with pytest.raises(InvalidArgument, match="keeps data"):
        RecSSD(dev, [np.ones((100, 32), np.float32)])


@pytest.mark.parametrize("name", ["RM3", "WND", "NCF", "DIEN"])
def test_models_run_end_to_end_with_equal_outputs_on_every_path(name):
    spec = SPECS[name]
    dev = nearflash.Device(None, preset="cosmos-plus", materialise=False, stack="polled")
    system = RecSSD(dev, list(spec.tables), seed=4)
    model = build_model(name, seed=4)
    batches = [uniform_batch(spec, 2, seed=s) for s in range(2)]
    results = {p: system.run(model, batches, p, pipelined=(p == "ndp"), outputs=True) for p in ("dram", "baseline", "ndp")}
    for p in ("baseline", "ndp"):
        for a, b in zip(results[p].outputs, results["dram"].outputs):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert all(np.all(r.latency_ns > 0) for r in results.values())
    assert results["dram"].mean_latency_ns < results["baseline"].mean_latency_ns
    assert results["ndp"].stats["stats"]["ndp_requests"] > 0
    assert results["baseline"].stats["stats"]["reads"] > 0


def test_generated_tables_match_the_generator(small_config):
    dev = nearflash.Device(None, preset="cosmos-plus", materialise=False, **small_config)
    system = RecSSD(dev, [TableSpec(5000, 16, 4)], seed=9)
    ids, off = np.array([4999, 0, 17, 17]), np.array([0, 2])
    from nearflash.recssd import GeneratedEmbeddings

    want = GeneratedEmbeddings([TableSpec(5000, 16, 4)], seed=9)(0, ids, off)
    for path in ("ndp", "baseline", "dram"):
        np.testing.assert_array_equal(system.sls(0, ids, off, path), want)


def test_every_parameter_is_documented():
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "recssd.md").read_text()
    missing = [name for name, *_ in rs.parameter_docs() if f"`{name}`" not in doc]
    assert not missing, f"docs/recssd.md lacks {missing}"


def test_a_refused_table_registration_raises_the_device_reason(small_config):
    from nearflash.errors import NvmeError

    dev = nearflash.Device(None, preset="cosmos-plus", **small_config)
    first = RecSSD(dev, [np.ones((100, 32), np.float32), np.full((100, 32), 2.0, np.float32)])
    assert [t["start_lba"] for t in first.tables] == [0, 1000]
    # A second library on the same device lays out a table over the first one's table 1: the firmware refuses
    # to register it and says which tables overlap where.
    with pytest.raises(NvmeError, match=r"registering table 0 \(table LBAs 0\.\.\d+ overlap table 1 at LBAs 1000\.\.\d+\)") as e:
        RecSSD(dev, [np.ones((40_000, 32), np.float32)])
    assert e.value.status == "Invalid Field in Command"
    assert dev.error_log()[0]["reason"] in str(e.value)


def test_a_system_can_be_dropped_on_another_thread(small_config):
    """The host library's state may be freed by whichever thread drops the last reference (a worker pool, the
    garbage collector running in a sweep's thread): it was an `unsendable` class, and freeing it off its creating
    thread raised an unraisable RuntimeError that failed an unrelated test under pytest-xdist."""
    import gc
    import sys
    import threading

    seen = []
    hook, sys.unraisablehook = sys.unraisablehook, seen.append
    try:
        dev = nearflash.Device(None, preset="cosmos-plus", **small_config)
        holder = [RecSSD(dev, [np.ones((ROWS, 32), np.float32)])]
        t = threading.Thread(target=lambda: (holder.clear(), gc.collect()))
        t.start()
        t.join()
    finally:
        sys.unraisablehook = hook
    assert not holder and not seen, [str(u.exc_value) for u in seen]
