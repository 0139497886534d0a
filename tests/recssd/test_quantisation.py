"""Fig. 11a's quantisation: rows stored as fp16 or int8 on the device. Every SLS path (host DRAM, the conventional
SSD, RecSSD's NDP engine) sums the values the stored rows decode to, within the format's precision of numpy's fp32
sums; a bad precision is refused before anything is written."""

import numpy as np
import pytest

import nearflash
from nearflash.recssd import RecSSD, TableSpec, sls_reference

ROWS, DIM = 2000, 32


def _device():
    return nearflash.Device(None, preset="cosmos-plus", materialise=True, stack="polled")


def _bags(rng, bags=16, per_bag=25):
    idx = rng.integers(0, ROWS, bags * per_bag)
    return idx, np.arange(0, bags * per_bag, per_bag)


@pytest.mark.parametrize(("precision", "element_error"), [("fp32", 0.0), ("fp16", 2.0**-11), ("int8", 0.5 / 127)])
def test_stored_rows_sum_within_their_precision_on_every_path(precision, element_error):
    rng = np.random.default_rng(7)
    table = rng.uniform(-1, 1, (ROWS, DIM)).astype(np.float32)
    rs = RecSSD(_device(), [table], precision=precision, params={"ssd_cache": False})
    info = rs.tables[0]
    assert info["attribute_bytes"] == {"fp32": 4, "fp16": 2, "int8": 1}[precision]
    idx, off = _bags(rng)
    want = sls_reference(table, idx, off)
    dram = rs.sls(0, idx, off, "dram")
    for path in ("ndp", "baseline"):
        np.testing.assert_allclose(rs.sls(0, idx, off, path), dram, rtol=1e-5, atol=1e-5)
    # each of a bag's 25 rows is off by at most element_error x max|v| (fp16: relative to |v| <= 1)
    assert np.abs(dram - want).max() <= 25 * element_error * 1.01 + 1e-5
    if precision == "int8":
        assert info["int8_scale"] == pytest.approx(np.abs(table).max() / 127)
    if precision != "fp32":
        assert np.abs(dram - want).max() > 0, "the stored rows really are narrower"


def test_generated_rows_agree_between_host_and_firmware():
    for precision in ("fp16", "int8"):
        dev = nearflash.Device(None, preset="cosmos-plus", materialise=False, stack="polled")
        rs = RecSSD(dev, [TableSpec(100_000, 32, 20)], seed=3, precision=precision)
        rng = np.random.default_rng(1)
        idx = rng.integers(0, 100_000, 200)
        off = np.arange(0, 200, 20)
        np.testing.assert_allclose(rs.sls(0, idx, off, "ndp"), rs.sls(0, idx, off, "dram"), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("precision", ["fp64", "int4", "", None, 2])
def test_unknown_precisions_are_refused(precision):
    dev = _device()
    with pytest.raises(ValueError, match="precision"):
        RecSSD(dev, [np.zeros((10, 32), np.float32)], precision=precision)
