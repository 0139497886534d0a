"""nearflash: a software computational-storage SSD.

Real data is stored and really processed; the device (flash array, controller, accelerators, host link) is modelled
in virtual time, so every run reports how fast, how much data moved and how much energy, for the in-storage path and
the conventional host path side by side.
"""

from nearflash import _native
from nearflash._native import ConfigError, HostIoError, ImageError, InvalidArgument, NearflashError

__version__ = _native.__version__

__all__ = [
    "ConfigError",
    "HostIoError",
    "ImageError",
    "InvalidArgument",
    "NearflashError",
    "__version__",
]
