"""The iSSD host library driven as a hostile user would: a negative, oversized or mistyped argument raises an error
naming it (never the binding's OverflowError "can't convert negative int to unsigned"), before anything reaches
the device."""

from __future__ import annotations

import numpy as np
import pytest

import nearflash
from nearflash.errors import InvalidArgument, InvalidType, InvalidValue
from nearflash.issd import agent, kernels

PAGE = 8192


@pytest.fixture(scope="module")
def setup():
    dev, _ = agent.device("iSSD-400", n_ch=2, n_host_cpu=2)
    pages = np.zeros((2, PAGE), np.uint8)
    return dev, agent.write_input(dev, 0, pages, PAGE), pages


@pytest.mark.parametrize("slba,page_size,name", [(-1, PAGE, "slba"), (0, -1, "page_size"), (0, 0, "page_size"),
                                                 (0, 2**40, "page_size")])
def test_write_input_names_a_bad_count(setup, slba, page_size, name):
    dev, _, pages = setup
    with pytest.raises(InvalidValue, match=f"^{name} "):
        agent.write_input(dev, slba, pages, page_size)


@pytest.mark.parametrize("extents,what,err", [
    ([(-1, 8)], r"extents\[0\]'s first LBA -1", InvalidValue),
    ([(0, 8), (0, 0)], r"extents\[1\]'s blocks 0", InvalidValue),
    ([(0, 2**32)], r"extents\[0\]'s blocks", InvalidValue),
    ([(0, 8, 1)], r"extents\[0\] must be a \(first LBA, blocks\) pair", InvalidType),
    ([8], r"extents\[0\] must be", InvalidType),
    ([(0, 8.0)], r"extents\[0\]'s blocks must be an integer", InvalidType),
    ([(2**40, 8)], r"extents\[0\] = \(1099511627776, 8\) ends past the device's", InvalidValue),
])
def test_run_names_the_bad_extent(setup, extents, what, err):
    dev, _, _ = setup
    with pytest.raises(err, match=what):
        agent.run(dev, kernels.spec("scan"), extents, PAGE)


@pytest.mark.parametrize("kwargs,what,err", [
    ({"page_size": -1}, "page_size -1", InvalidValue),
    ({"strategy": "dynamic", "chunk_pages": -1}, "chunk_pages -1", InvalidValue),
    ({"strategy": "dynamic", "chunk_pages": 1.5}, "chunk_pages must be an integer", InvalidType),
    ({"strategy": "static", "fraction": "half"}, "fraction must be a number", InvalidType),
])
def test_run_names_a_bad_option(setup, kwargs, what, err):
    dev, ext, _ = setup
    with pytest.raises(err, match=f"^{what}"):
        agent.run(dev, kernels.spec("scan"), ext, **{"page_size": PAGE, **kwargs})


@pytest.mark.parametrize("kwargs,name", [({"n_ch": -1}, "n_ch"), ({"n_ch": 0}, "n_ch"), ({"n_host_cpu": -2}, "n_host_cpu"),
                                         ({"seed": -1}, "seed")])
def test_device_names_a_bad_count(kwargs, name):
    with pytest.raises(InvalidValue, match=f"^{name} "):
        agent.device("iSSD-400", **kwargs)


def test_agent_params_with_the_agent_attached_are_refused_not_ignored(setup):
    dev, ext, _ = setup
    with pytest.raises(InvalidArgument, match="agent_params apply only on a device without the Agent"):
        agent.run(dev, kernels.spec("scan"), ext, PAGE, "conventional", agent_params={"bogus": 1})


def test_agent_params_without_the_agent_refuse_an_unknown_name():
    dev = nearflash.Device(None, preset="issd", channels=2, chips_per_channel=1)
    ext = agent.write_input(dev, 0, np.zeros((2, PAGE), np.uint8), PAGE)
    with pytest.raises(InvalidArgument, match="bogus"):
        agent.run(dev, kernels.spec("scan"), ext, PAGE, "conventional", agent_params={"bogus": 1})


def test_an_initiator_argument_error_says_invalid_argument_once(setup):
    dev, _, pages = setup
    with pytest.raises(InvalidArgument) as e:
        agent.write_input(dev, 0, pages, 100)
    assert str(e.value).count("invalid argument") == 1, str(e.value)
