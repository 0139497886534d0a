"""The SDK's `Device` driven as a hostile user would: every wrong type or out-of-range value raises an error naming
the argument (InvalidType is also a TypeError, InvalidValue a ValueError), never an OverflowError from the binding;
and `bench` borrows its queues instead of taking over one whose commands are in flight."""

from __future__ import annotations

import numpy as np
import pytest

import nearflash
from nearflash.errors import InvalidArgument, InvalidType, InvalidValue

SMALL = {"channels": 2, "chips_per_channel": 1, "blocks_per_plane": 32, "pages_per_block": 32, "over_provisioning": "25%"}


@pytest.fixture
def dev():
    with nearflash.Device(overrides=SMALL) as d:
        yield d


@pytest.mark.parametrize("kwargs,name", [
    ({"bs": -4096}, "bs"), ({"iodepth": -1}, "iodepth"), ({"numjobs": -1}, "numjobs"), ({"ios": -1}, "ios"),
    ({"seed": -1}, "seed"), ({"numjobs": 10_000}, "numjobs"), ({"span": (-1, 8)}, "span's first LBA"),
    ({"span": (0, 0)}, "span's LBAs"), ({"iodepth": 2**40}, "iodepth"),
])
def test_bench_names_a_negative_or_oversized_count(dev, kwargs, name):
    with pytest.raises(InvalidValue, match=f"^{name} .* out of range"):
        dev.bench(**{"ios": 10, **kwargs})


@pytest.mark.parametrize("kwargs,name", [
    ({"bs": 4096.0}, "bs"), ({"numjobs": "2"}, "numjobs"), ({"rwmixread": "half"}, "rwmixread"), ({"rw": 3}, "rw"),
    ({"span": 5}, "span"), ({"span": (0, 1, 2)}, "span"),
])
def test_bench_names_an_argument_of_the_wrong_type(dev, kwargs, name):
    with pytest.raises(InvalidArgument, match=f"^{name} must be"):
        dev.bench(**{"ios": 10, **kwargs})


def test_precondition_names_its_arguments(dev):
    with pytest.raises(InvalidValue, match="^seed -1"):
        dev.precondition(0.1, seed=-1)
    with pytest.raises(InvalidType, match="^fraction must be a number"):
        dev.precondition("most")
    with pytest.raises(InvalidType, match="^overwrite must be a number"):
        dev.precondition(0.1, "random", None)
    assert dev.report().data["nand"]["pages_programmed"] == 0, "a refused request changes nothing"


@pytest.mark.parametrize("data", ["text" * 1024, [0] * 4096, None, 4096])
def test_write_of_something_that_is_not_bytes_names_data(dev, data):
    with pytest.raises(InvalidType, match="^data must be bytes") as e:
        dev.write(0, data)
    assert isinstance(e.value, TypeError)


def test_read_into_something_that_is_not_an_array_names_out(dev):
    with pytest.raises(InvalidType, match="^out must be bytes"):
        dev.read(0, 1, out="buffer")


def test_bench_refuses_a_queue_with_commands_in_flight_and_leaves_it_working(dev):
    q = dev.queue(4)  # queue 1, which bench's first job runs on
    cid = q.submit_write(0, bytes(range(256)) * 16)
    with pytest.raises(InvalidArgument, match=f"queue {q.qid} has commands in flight"):
        dev.bench(ios=10, numjobs=2)
    (c,) = q.wait_all()
    assert c.cid == cid and c.ok, "the command bench would have taken over completes"
    # Idle, the queue is borrowed and given back as it was: the Queue and the block API keep working after.
    assert dev.bench(ios=20, numjobs=dev._limit("max_queues"))["ios"] == 20
    q.submit_read(0, 1)
    assert [c.ok for c in q.wait_all()] == [True]
    dev.write(8, bytes(4096))
    assert bytes(dev.read(0, 1)) == bytes(range(256)) * 16


def test_an_unknown_parameter_is_named_with_its_preset(dev):
    with pytest.raises(KeyError, match="unknown parameter 'nand.bogus' of preset 'cosmos-plus'"):
        dev.param("nand.bogus")
    assert dev.param("channels").split()[0] == "2"


def test_a_closed_queue_is_refused_and_never_takes_the_completions_of_the_queue_now_at_its_id(dev):
    old = dev.queue(2)
    old.close()
    new = dev.queue(2)
    assert new.qid == old.qid
    cid = new.submit_read(0, 1)
    for call in (lambda: old.submit_read(0, 1), old.wait, old.reap, old.wait_all):
        with pytest.raises(InvalidArgument, match=f"queue {old.qid} is closed"):
            call()
    assert [c.cid for c in new.wait_all()] == [cid]


@pytest.mark.parametrize("call,name", [
    (lambda d: d.write_zeroes(0, 8, deallocate="no"), "deallocate"),
    (lambda d: d.write(0, bytes(4096), fua="yes"), "fua"),
    (lambda d: d.queue(2).submit_write(0, bytes(4096), fua=1), "fua"),
])
def test_a_flag_that_is_not_a_bool_is_refused_before_anything_is_written(dev, call, name):
    dev.write(0, np.full(8 * 4096, 7, np.uint8))
    with pytest.raises(InvalidType, match=f"^{name} must be True or False"):
        call(dev)
    assert (dev.read(0, 8) == 7).all(), "a truthy string once deallocated the blocks"


def test_attach_parameters_that_do_not_encode_name_the_call(dev):
    with pytest.raises(InvalidType, match=r"^attach\('nice'\): parameter values must be"):
        dev.attach("nice", lanes=object())


def test_an_image_whose_parent_directory_is_missing_is_refused_naming_path(tmp_path):
    # before, Device(path) created every missing directory above the image, hiding a mistyped path
    for path in (tmp_path / "missing" / "dev", str(tmp_path / "missing" / "deeper" / "dev")):
        with pytest.raises(InvalidValue, match=r"path .*parent directory .*missing.* does not exist"):
            nearflash.Device(path, preset="cosmos-plus")
    assert not (tmp_path / "missing").exists()
    with nearflash.Device(tmp_path / "dev", preset="cosmos-plus") as dev:
        assert dev.lbas > 0  # a new directory whose parent exists is created as before


def test_an_image_the_os_refuses_to_create_names_its_path(tmp_path):
    # found by the audit: `nearflash create /proc/x` said only "host I/O error: No such file or directory"
    (tmp_path / "file").write_text("x")
    with pytest.raises(OSError) as e:
        nearflash.Device(tmp_path / "file" / "dev", preset="cosmos-plus")
    assert e.value.filename == str(tmp_path / "file" / "dev") and str(tmp_path / "file" / "dev") in str(e.value)
