"""The SDK's Device: data round trips, queues, errors, reports, persistence."""

from __future__ import annotations

import numpy as np
import pytest

import nearflash
from nearflash import Device, NvmeError


def pattern(nbytes: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)


def test_write_read_round_trip_in_memory(small):
    with Device(None, **small) as dev:
        data = pattern(dev.lba_bytes * 37, 1)
        dev.write(123, data)
        assert np.array_equal(dev.read(123, 37), data)
        dev.flush()
        out = np.zeros(dev.lba_bytes * 37, dtype=np.uint8)
        assert dev.read(123, 37, out=out) is out
        assert np.array_equal(out, data)
        # Unwritten blocks read as zeroes (deallocated).
        assert not dev.read(10_000, 2).any()


def test_large_transfers_are_split_at_mdts(small):
    with Device(None, **small) as dev:
        n = dev.native.max_lbas_per_command * 2 + 3
        data = pattern(dev.lba_bytes * n, 2)
        dev.write(0, data)
        assert np.array_equal(dev.read(0, n), data)


def test_any_buffer_type_is_accepted(small):
    with Device(None, **small) as dev:
        raw = bytes(range(256)) * (dev.lba_bytes // 256)
        dev.write(5, raw)
        dev.write(6, bytearray(raw))
        dev.write(7, np.frombuffer(raw, dtype=np.uint32))
        got = dev.read(5, 3)
        assert bytes(got) == raw * 3


def test_trim_deallocates(small):
    with Device(None, **small) as dev:
        dev.write(0, pattern(dev.lba_bytes * 8, 3))
        dev.trim(2, 4)
        got = dev.read(0, 8).reshape(8, -1)
        assert not got[2:6].any() and got[0].any() and got[7].any()


def test_out_of_range_raises_an_nvme_error(small):
    with Device(None, **small) as dev:
        with pytest.raises(NvmeError) as e:
            dev.read(dev.lbas - 1, 2)
        assert e.value.status == "LBA Out of Range" and (e.value.sct, e.value.sc) == (0, 0x80)
        with pytest.raises(nearflash.InvalidArgument):
            dev.write(0, b"\x00" * 100)  # not a whole block


def test_bad_overrides_are_config_errors():
    with pytest.raises(nearflash.ConfigError, match="unknown parameter"):
        Device(None, channelz=4)
    with pytest.raises(nearflash.ConfigError, match="the parameter is time"):
        Device(None, t_read="5MB/s")
    with pytest.raises(nearflash.ConfigError, match="over_provisioning"):
        Device(None, over_provisioning="0%")


def test_channel_arbitration_values_are_named_in_errors(small):
    with pytest.raises(nearflash.ConfigError, match="expected interleave, data_first or mqsim_tsu"):
        Device(None, channel_arbitration="fifo")
    with pytest.raises(nearflash.ConfigError, match="nand.cache_read = false"):
        Device(None, channel_arbitration="mqsim_tsu")
    with Device(None, channel_arbitration="mqsim_tsu", cache_read=False, **small) as dev:
        dev.write(0, b"\x5a" * dev.lba_bytes * 8)
        assert bytes(dev.read(0, 8)) == b"\x5a" * dev.lba_bytes * 8


def test_unmapped_read_allocate_reads_zeroes_from_flash_and_keeps_written_data(small):
    with pytest.raises(nearflash.ConfigError, match="ftl.unmapped_read .*expected zeroes or allocate"):
        Device(None, unmapped_read="random")
    with Device(None, unmapped_read="allocate", **small) as dev:
        lb = dev.lba_bytes
        assert bytes(dev.read(64, 4)) == b"\0" * 4 * lb, "a never-written LBA still reads as zeroes"
        dev.write(65, b"\x7e" * lb)
        assert bytes(dev.read(64, 4)) == b"\0" * lb + b"\x7e" * lb + b"\0" * 2 * lb
        r = dev.report()
        assert r.nand["pages_read"] >= 1 and r.ftl["read_allocated_pages"] >= 1
    with Device(None, **small) as dev:
        dev.read(64, 4)
        assert dev.report().nand["pages_read"] == 0 and "read_allocated_pages" not in dev.report().ftl


def test_gc_free_erased_keeps_every_write_through_gc(tiny):
    with pytest.raises(nearflash.ConfigError, match="ftl.gc_free .*expected issued or erased"):
        Device(None, gc_free="erase")
    # MQSim's GC rules: a block is free once its erase has ended, GC's transactions first. Three passes over the
    # tiny device's LBAs (35% spare) make GC open blocks whose erase is still owed; every LBA reads back its last
    # write.
    with Device(None, gc_free="erased", gc_priority="urgent", **tiny) as dev:
        lb, n = dev.lba_bytes, dev.lbas
        rng = np.random.default_rng(3)
        last = {}
        for i in range(3 * n):
            lba = int(rng.integers(0, n))
            dev.write(lba, bytes([i % 251 + 1]) * lb)
            last[lba] = i % 251 + 1
        dev.flush()
        r = dev.report()
        assert r.ftl["gc_runs"] > 0 and r.ftl["blocks_erased"] > 0
        for lba, v in last.items():
            assert bytes(dev.read(lba, 1)) == bytes([v]) * lb, lba


def test_async_queue_completes_in_virtual_time_order(small):
    with Device(None, materialise=False, **small) as dev:
        dev.precondition(1.0)
        q = dev.queue(depth=32)
        cids = [q.submit_read(lba * 4, 4) for lba in range(32)]
        assert q.in_flight == 32
        assert q.reap() == [], "nothing has completed at submission time"
        done = q.wait_all()
        assert sorted(c.cid for c in done) == sorted(cids)
        times = [c.time_ns for c in done]
        assert times == sorted(times) and dev.now_ns == times[-1]
        r = dev.report()
        assert r.op("read").count == 32 and r.link_bytes["to_host"] >= 32 * 4 * dev.lba_bytes


def test_queue_full_is_reported(small):
    with Device(None, materialise=False, **small) as dev:
        q = dev.queue(depth=4)
        for i in range(4):
            q.submit_read(i, 1)
        with pytest.raises(nearflash.InvalidArgument, match="full"):
            q.submit_read(9, 1)


def test_uncorrectable_errors_never_return_data(small):
    with Device(None, **small) as dev:
        data = pattern(dev.lba_bytes * 4, 4)
        dev.write(40, data)
        dev.flush()
        dev.inject_errors(41, 30)  # correctable
        assert np.array_equal(dev.read(40, 4), data)
        dev.inject_errors(42, 1_000_000)
        out = np.full(dev.lba_bytes * 4, 0xAB, dtype=np.uint8)
        with pytest.raises(NvmeError, match="Unrecovered Read Error"):
            dev.read(40, 4, out=out)
        assert (out == 0xAB).all()
        assert dev.smart()["media_errors"] == 1


def test_report_has_every_section(small):
    with Device(None, materialise=False, **small) as dev:
        dev.precondition(0.5)
        r = dev.bench("randread", ios=2000, iodepth=8, span=(0, dev.lbas // 2))["report"]
        assert r.op("read").iops > 0 and r.op("read").p99_us >= r.op("read").p50_us
        assert r.nand["pages_read"] == 2000
        assert {"channel", "die", "core", "link_up", "host_cpu"} <= set(r.utilisation)
        assert r.total_energy_j > 0 and any(k.startswith("nand_read") for k in r.energy_j)
        assert "read" in r.summary()
        # The same report is available over NVMe (vendor log page).
        import json

        assert json.loads(dev.native.stats_log())["ops"]["read"]["count"] >= 2000


def test_identical_inputs_give_identical_numbers(small):
    def run() -> dict:
        with Device(None, materialise=False, seed=7, **small) as dev:
            dev.precondition(0.8, "random", overwrite=0.5, seed=3)
            r = dev.bench("randrw", ios=3000, iodepth=16, span=(0, int(dev.lbas * 0.8)), seed=5)
            return r["report"].data

    assert run() == run()


def test_image_persists_and_is_sparse(tmp_path, small):
    p = tmp_path / "dev"
    data = pattern(4096 * 16, 5)
    with Device(p, **small) as dev:
        lb = dev.lba_bytes
        dev.write(1000, data)
        ident = dev.identify()
    assert ident["lba_bytes"] == lb and ident["model"] == "nearflash cosmos-plus"
    used = sum(f.stat().st_blocks * 512 for f in p.iterdir())
    assert used < 8 << 20
    with Device(p) as dev:
        assert dev.recovery is None
        assert np.array_equal(dev.read(1000, 16), data)
        with pytest.raises(nearflash.ImageError, match="another process"):
            Device(p)


def test_presets_listing():
    names = nearflash.presets()
    assert {"cosmos-plus", "samsung-970pro", "issd", "searssd", "nice-zu7eg"} <= set(names)
    params = nearflash.preset_params("cosmos-plus", {"channels": 16})
    row = next(r for r in params if r[0] == "nand.channels")
    assert row[1:] == ("16", "count", "override")
    assert all(r[3] for r in params), "every parameter has a source"


def test_single_queue_devices_share_their_queue():
    # The iSSD presets model SATA: one I/O queue of 32 entries.
    with Device(None, preset="issd-prototype", channels=2, materialise=True) as dev:
        data = pattern(dev.lba_bytes * 2, 6)
        dev.write(0, data)
        q = dev.queue(depth=16)
        q.submit_read(0, 2)
        with pytest.raises(nearflash.InvalidArgument, match="in flight"):
            dev.read(0, 2)
        q.wait_all()
        assert np.array_equal(dev.read(0, 2), data), "the idle user queue serves synchronous calls"
        with pytest.raises(nearflash.InvalidArgument, match="all in use"):
            dev.queue(depth=4)
        with pytest.raises(nearflash.InvalidArgument, match="maximum"):
            Device(None, preset="issd-prototype", channels=2).queue(depth=64)


def test_one_extensions_report_equals_its_part_of_the_whole_report():
    import json

    with Device(None, "cosmos-plus", channels=2, chips_per_channel=1, blocks_per_plane=64, over_provisioning=25) as dev:
        assert dev.native.extension_report_json("programs") is None  # not attached
        dev.attach("programs")
        dev.write(0, np.arange(8192, dtype=np.uint8))
        one = json.loads(dev.native.extension_report_json("programs"))
        assert one == dev.report().extensions["programs"] and "stats" in one
        assert dev.native.extension_report_json("nope") is None
