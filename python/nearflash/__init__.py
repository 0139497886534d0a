"""nearflash: a software computational-storage SSD.

Real data is stored and really processed; the device (flash array, controller, accelerators, host link) is modelled
in virtual time, so every run reports how fast, how much data moved and how much energy, for the in-storage path and
the conventional host path side by side.
"""

from nearflash import _native
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
from nearflash.report import OpStats, Report
from nearflash.sweeps import sweep

__version__ = _native.__version__

__all__ = [
    "Completion",
    "ConfigError",
    "Device",
    "HostIoError",
    "ImageError",
    "InvalidArgument",
    "NearflashError",
    "NvmeError",
    "OpStats",
    "Queue",
    "Report",
    "SimulatorFault",
    "__version__",
    "preset_description",
    "preset_params",
    "presets",
    "status_name",
    "sweep",
]
