"""Errors keep their kind from the Rust core to Python: one exception class per kind, host I/O errors are also
`OSError`s (with errno), and a host library's failed command raises `NvmeError` with its status, not a generic
argument error."""

import errno

import pytest

import nearflash
from nearflash import errors
from nearflash.issd import agent, kernels, lineitem


def test_hierarchy():
    for name in ["ConfigError", "ImageError", "HostIoError", "InvalidArgument", "SimulatorFault", "NvmeError"]:
        cls = getattr(errors, name)
        assert issubclass(cls, errors.NearflashError), name
    assert issubclass(errors.HostIoError, OSError)
    assert not issubclass(errors.InvalidArgument, OSError)


def test_host_io_error_is_an_oserror_with_errno(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(OSError) as e:
        nearflash.Device(blocker / "dev", preset="cosmos-plus", channels=2)
    assert isinstance(e.value, errors.NearflashError)
    assert e.value.errno in (errno.ENOTDIR, errno.EEXIST)


def test_config_errors_stay_config_errors():
    with pytest.raises(errors.ConfigError):
        nearflash.Device(None, preset="cosmos-plus", over_provisioning="95%")


def test_a_host_librarys_failed_command_raises_nvme_error():
    # The Agent is not attached: its Load command completes with Invalid Command Opcode.
    with nearflash.Device(None, preset="issd", channels=2, chips_per_channel=1) as dev:
        pages = lineitem.generate(rows=500, page_size=8192)
        extents = agent.write_input(dev, 0, pages, 8192)
        with pytest.raises(errors.NvmeError) as e:
            agent.run(dev, kernels.spec("scan"), extents, 8192, "in_storage")
        assert (e.value.sct, e.value.sc) == (0, 0x01)
        assert "Invalid Command Opcode" in str(e.value)
        # the status and the device's reason are fields, whichever language the host library is written in
        assert e.value.status == "Invalid Command Opcode" and e.value.command == "load"
        assert "no attached extension claims it" in e.value.reason and e.value.reason in str(e.value)
