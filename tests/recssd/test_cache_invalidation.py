"""Issue 9, item 8: RecSSD's SSD embedding cache must not serve rows the host has since overwritten or trimmed
through ordinary commands. The firmware drops them (`RecssdFirmware::invalidate_lbas`, unit-tested in the crate)
from the extension API's `observe` hook, called for completed standard writes and trims."""

import numpy as np
import pytest

import nearflash
from nearflash.recssd import RecSSD, sls_reference

from conftest import SMALL


@pytest.mark.parametrize("how", ["write", "trim", "write_zeroes"])
def test_ssd_cache_drops_rows_the_host_overwrote(how):
    dev = nearflash.Device(None, preset="cosmos-plus", stack="polled", **SMALL)
    rng = np.random.default_rng(5)
    table = rng.standard_normal((1000, 32), dtype=np.float32)
    system = RecSSD(dev, [table])
    idx, off = np.arange(64), np.array([0])
    np.testing.assert_allclose(system.sls(0, idx, off, "ndp"), sls_reference(table, idx, off), rtol=1e-5, atol=1e-4)
    assert system.firmware_report()["ssd_cache"]["fills"] >= 64, "the first lookup fills the cache"
    start = system.tables[0]["start_lba"]
    new = table.copy()
    if how == "write":
        new[:128] += 1000.0  # the first 16 KiB page: 128 rows of 128 B
        dev.write(start, new[:128].tobytes())
    else:
        new[:128] = 0.0
        if how == "trim":
            dev.trim(start, 16384 // dev.lba_bytes)
        else:
            dev.write_zeroes(start, 16384 // dev.lba_bytes)
    np.testing.assert_allclose(system.sls(0, idx, off, "ndp"), sls_reference(new, idx, off), rtol=1e-5, atol=1e-3)
    assert system.firmware_report()["stats"]["cache_rows_invalidated"] >= 64
