"""Issue 9, items 1, 2, 5, 6, 7: lengths a command cannot express, partial writes before a range error, panics and
aborts from host-given lengths, and arguments that were accepted or failed obscurely. Each call must raise a clear
error naming the argument, and change nothing."""

from __future__ import annotations

import numpy as np
import pytest

import nearflash
from nearflash import Device, NvmeError

from conftest import SMALL, TINY
from helpers import pattern


@pytest.fixture
def dev():
    with Device(None, **SMALL) as d:
        yield d


def unchanged(dev: Device, lba: int, n: int) -> bool:
    return not dev.read(lba, n).any()


# --- item 1: queue lengths ------------------------------------------------------------------------------------------
def test_queue_write_longer_than_a_command_can_express_is_refused(dev):
    q = dev.queue(4)
    data = pattern(0, 65537, dev.lba_bytes)
    with pytest.raises(nearflash.InvalidArgument, match="65537"):
        q.submit_write(0, data)
    assert q.in_flight == 0 and unchanged(dev, 0, 2)


def test_queue_read_longer_than_a_command_can_express_is_refused(dev):
    q = dev.queue(4)
    out = np.zeros(65537 * dev.lba_bytes, dtype=np.uint8)
    with pytest.raises(nearflash.InvalidArgument, match="nblocks"):
        q.submit_read(0, 65537, out)


@pytest.mark.parametrize("n", [0, -1])
def test_queue_zero_or_negative_blocks_are_refused(dev, n):
    q = dev.queue(4)
    with pytest.raises(nearflash.InvalidArgument, match="nblocks"):
        q.submit_write(0, nblocks=n)
    with pytest.raises(nearflash.InvalidArgument, match="nblocks"):
        q.submit_read(0, n)
    assert q.in_flight == 0


def test_queue_nblocks_must_match_the_data(dev):
    q = dev.queue(4)
    with pytest.raises(nearflash.InvalidArgument, match="nblocks"):
        q.submit_write(0, pattern(0, 2, dev.lba_bytes), nblocks=1)
    with pytest.raises(nearflash.InvalidArgument, match="multiple"):
        q.submit_write(0, np.zeros(dev.lba_bytes + 1, dtype=np.uint8))
    assert unchanged(dev, 0, 2)


def test_native_submit_refuses_a_buffer_of_another_length(dev):
    q = dev.sync_qid
    with pytest.raises(nearflash.InvalidArgument, match="data"):
        dev.native.submit_write(q, 1, 0, 1, pattern(0, 2, dev.lba_bytes), False)
    with pytest.raises(nearflash.InvalidArgument, match="nlb"):
        dev.native.submit_write(q, 1, 0, 65537, pattern(0, 65537, dev.lba_bytes), False)


# --- item 2: validate the whole request first ------------------------------------------------------------------------
def test_write_past_the_end_changes_nothing(dev):
    lb, n = dev.lba_bytes, dev.lbas
    with pytest.raises(NvmeError, match="LBA Out of Range"):
        dev.write(n - 300, pattern(n - 300, 301, lb))
    assert unchanged(dev, n - 300, 300)
    with pytest.raises(NvmeError, match="LBA Out of Range"):
        dev.write(0, np.zeros((n + 1) * lb, dtype=np.uint8) + 1)
    assert unchanged(dev, 0, 2560)


@pytest.mark.parametrize("lba", [-1, 1.5, "3"])
def test_bad_lba_is_refused(dev, lba):
    with pytest.raises(nearflash.InvalidArgument, match="lba"):
        dev.write(lba, pattern(0, 1, dev.lba_bytes))
    with pytest.raises(nearflash.InvalidArgument, match="lba"):
        dev.read(lba, 1)


# --- item 5: panics ----------------------------------------------------------------------------------------------------
def test_read_into_a_read_only_array_is_an_error_not_a_panic(dev):
    out = np.zeros(dev.lba_bytes, dtype=np.uint8)
    out.flags.writeable = False
    with pytest.raises(nearflash.InvalidArgument, match="writable"):
        dev.read(0, 1, out=out)
    q = dev.queue(4)
    with pytest.raises(nearflash.InvalidArgument, match="writable"):
        q.submit_read(0, 1, out)


# --- item 6: lengths from the host are bounded -------------------------------------------------------------------------
def test_huge_log_page_is_refused_not_an_abort(dev):
    with pytest.raises(nearflash.InvalidArgument, match="bytes"):
        dev.native.log_page(2, 2**40)


@pytest.mark.parametrize("lid, nbytes, word", [(2, -1, "bytes"), (2, 0, "bytes"), (-1, 512, "id"), (256, 512, "id")])
def test_negative_or_out_of_range_log_page_arguments_are_named(dev, lid, nbytes, word):
    with pytest.raises(nearflash.InvalidArgument, match=f"log page {word}"):
        dev.native.log_page(lid, nbytes)


# --- item 7: clear errors ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [0, -5])
def test_trim_of_no_blocks_names_the_argument(dev, n):
    with pytest.raises(nearflash.InvalidArgument, match="nblocks"):
        dev.trim(0, n)


@pytest.mark.parametrize("n", [0, -1, 2.5])
def test_read_of_no_blocks_names_the_argument(dev, n):
    with pytest.raises(nearflash.InvalidArgument, match="nblocks"):
        dev.read(0, n)


# --- item 7: the command line names the argument and its range ---------------------------------------------------
@pytest.mark.parametrize(
    "args, needle",
    [
        (["--iodepth", "-5"], "--iodepth"),
        (["--ios", "-5"], "--ios"),
        (["--seed", "-1"], "--seed"),
        (["--rwmixread", "2"], "--rwmixread"),
        (["--rwmixread", "nan"], "--rwmixread"),
        (["--set", "foo"], "key=value"),
    ],
)
def test_bench_arguments_are_checked_without_a_traceback(args, needle):
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "nearflash.cli", "bench", "--ios", "10", *args],
                       capture_output=True, text=True)
    assert p.returncode == 2 and needle in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_experiment_set_keys_nobody_reads_are_reported(tmp_path, monkeypatch, capsys):
    import nearflash.experiment as experiment
    from nearflash import cli

    def run(exp, opts):
        opts.extra.get("pages", 8)

    monkeypatch.setattr(experiment, "load_experiments", lambda system: {"fake": ("A fake experiment", run)})
    out = str(tmp_path / "out")
    assert cli.main(["experiment", "demo", "fake", "--out", out, "--set", "pages=4"]) == 0
    assert cli.main(["experiment", "demo", "fake", "--out", out, "--set", "pgaes=4"]) == 2
    err = capsys.readouterr().err
    assert "--set pgaes" in err and "options it reads: pages" in err, err


@pytest.mark.parametrize("value", [2**40, 1.5])
def test_count_parameters_must_be_whole_numbers_a_u32_holds(value):
    with pytest.raises(nearflash.ConfigError, match=r"(?s)whole number.*nand\.channels"):
        Device(None, **{**TINY, "channels": value}, materialise=False)


# --- found in the rel3 audit -------------------------------------------------------------------------------------------
def test_queue_read_into_a_non_contiguous_array_is_refused_not_read_into_a_copy(dev):
    dev.write(0, pattern(0, 1, dev.lba_bytes))
    q = dev.queue(4)
    strided = np.zeros(2 * dev.lba_bytes, dtype=np.uint8)[::2]
    with pytest.raises(nearflash.InvalidArgument, match="contiguous"):
        q.submit_read(0, 1, strided)
    with pytest.raises(nearflash.InvalidArgument, match="contiguous"):
        q.submit_read(0, 2, np.zeros(dev.lba_bytes, dtype=np.uint8))
    assert q.in_flight == 0
    out = bytearray(dev.lba_bytes)  # any writable buffer the data can land in still works
    q.submit_read(0, 1, out)
    q.wait_all()
    assert bytes(out) == pattern(0, 1, dev.lba_bytes).tobytes()


@pytest.mark.parametrize(
    "call, needle",
    [
        (lambda d: d.queue(0), "depth"),
        (lambda d: d.queue(-1), "depth"),
        (lambda d: d.queue(1.5), "depth"),
        (lambda d: d.queue(4, qid=-1), "qid"),
        (lambda d: d.queue(4, qid=2**40), "qid"),
        (lambda d: d.inject_errors(-1, 3), "lba"),
        (lambda d: d.inject_errors(0, 2**40), "bits"),
        (lambda d: d.advance(-1), "ns"),
        (lambda d: d.advance(2**70), "ns"),
        (lambda d: d.native.advance(2**64 - 1), "overflows"),
    ],
)
def test_counts_name_the_argument_instead_of_an_integer_conversion_error(dev, call, needle):
    dev.advance(1)  # the clock is past 0, so that the largest u64 overflows it
    with pytest.raises(nearflash.InvalidArgument, match=needle):
        call(dev)


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"rw": "randrw", "rwmixread": float("nan")}, "read fraction"),
        ({"rw": "randrw", "rwmixread": 1.5}, "read fraction"),
        ({"span": (2**64 - 1, 10)}, "span"),
        ({"span": (2**63, 2**63)}, "span"),
    ],
)
def test_bench_from_python_refuses_what_the_cli_refuses(kwargs, needle):
    with Device(None, **TINY, materialise=False) as d:
        with pytest.raises(nearflash.ConfigError, match=needle):
            d.bench(ios=10, **kwargs)


def test_bench_progress_exceptions_stop_the_run_and_are_raised():
    with Device(None, **TINY, materialise=False) as d:
        with pytest.raises(TypeError, match="progress"):
            d.bench(ios=10, progress=3)
        calls = []

        def interrupt(done, total):
            calls.append(done)
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            d.bench(rw="read", iodepth=1, ios=10_000, progress=interrupt)
        assert len(calls) == 1
        assert d.bench(ios=100)["ios"] == 100  # the device is usable afterwards


def test_precondition_bounds_its_arguments():
    with Device(None, **TINY, materialise=False) as d:
        for args in [(float("nan"),), (1.5,), (0.5, "random", float("nan")), (0.5, "random", 1e12)]:
            with pytest.raises(nearflash.ConfigError, match="precondition"):
                d.precondition(*args)
        d.precondition(0.5, "random", 1.0)
