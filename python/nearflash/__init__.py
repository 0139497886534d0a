"""nearflash: a software computational-storage SSD.

Real data is stored and really processed; the device (flash array, controller, accelerators, host link) is modelled
in virtual time, so every run reports how fast, how much data moved and how much energy, for the in-storage path and
the conventional host path side by side.
"""

from nearflash import _native
from nearflash.array import Array
from nearflash.device import Completion, Device, Queue, preset_description, preset_params, presets
from nearflash.errors import (
    ConfigError,
    HostIoError,
    ImageError,
    InvalidArgument,
    NearflashError,
    NvmeError,
    SimulatorFault,
    status_name,
)
from nearflash.flows import DeviceSetup, load_scenario, replay, run_flows
from nearflash.report import OpStats, Report
from nearflash.sweeps import sweep
from nearflash.traces import TraceOptions, convert_trace, read_trace

__version__ = _native.__version__

__all__ = [
    "Array",
    "Completion",
    "ConfigError",
    "Device",
    "DeviceSetup",
    "HostIoError",
    "ImageError",
    "InvalidArgument",
    "NearflashError",
    "NvmeError",
    "OpStats",
    "Queue",
    "Report",
    "SimulatorFault",
    "TraceOptions",
    "__version__",
    "convert_trace",
    "load_scenario",
    "preset_description",
    "preset_params",
    "presets",
    "read_trace",
    "replay",
    "run_flows",
    "status_name",
    "sweep",
]
