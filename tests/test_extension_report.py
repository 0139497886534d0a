"""`Device.extension_report(name)`: one extension's report without building the whole device report."""

import pytest

import nearflash
from nearflash.errors import InvalidArgument


def test_one_extensions_report_is_the_whole_reports_entry():
    with nearflash.Device(None, "cosmos-plus") as dev:
        dev.attach("programs")
        dev.write(0, bytes(4096))
        assert dev.extension_report("programs") == dev.report().extensions["programs"] != {}
        assert dev.extension_report("recssd") == {}  # none of that name attached
        for bad in (3, None, b"programs"):
            with pytest.raises(InvalidArgument, match="name"):
                dev.extension_report(bad)
