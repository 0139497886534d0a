"""Exceptions: simulator faults come from the native module; NVMe error completions raise `NvmeError`."""

from __future__ import annotations

from nearflash._native import ConfigError, HostIoError, ImageError, InvalidArgument, NearflashError, SimulatorFault

#: (status code type, status code) -> name, from the NVMe base specification.
STATUS_NAMES = {
    (0, 0x00): "Successful Completion",
    (0, 0x01): "Invalid Command Opcode",
    (0, 0x02): "Invalid Field in Command",
    (0, 0x03): "Command ID Conflict",
    (0, 0x04): "Data Transfer Error",
    (0, 0x06): "Internal Error",
    (0, 0x0B): "Invalid Namespace or Format",
    (0, 0x0C): "Command Sequence Error",
    (0, 0x80): "LBA Out of Range",
    (0, 0x81): "Capacity Exceeded",
    (1, 0x00): "Completion Queue Invalid",
    (1, 0x01): "Invalid Queue Identifier",
    (1, 0x02): "Invalid Queue Size",
    (1, 0x09): "Invalid Log Page",
    (1, 0x0C): "Invalid Queue Deletion",
    (2, 0x80): "Write Fault",
    (2, 0x81): "Unrecovered Read Error",
    (2, 0x86): "Access Denied",
}


class InvalidValue(InvalidArgument, ValueError):
    """An argument of the right type whose value is not allowed: also a `ValueError`, as Python and FAISS raise."""


class InvalidType(InvalidArgument, TypeError):
    """An argument of a type the call does not take: also a `TypeError`."""


class StaleDeployment(NearflashError, RuntimeError):
    """A deployment on a device no longer matches its index (vectors were added or removed since it was made):
    deploy the index again."""


def status_name(sct: int, sc: int) -> str:
    return STATUS_NAMES.get((sct, sc), f"Status SCT {sct:#x} SC {sc:#04x}")


class NvmeError(NearflashError):
    """A command completed with an NVMe error status."""

    def __init__(self, sct: int, sc: int, command: str = ""):
        self.sct = sct
        self.sc = sc
        self.status = status_name(sct, sc)
        where = f"{command}: " if command else ""
        super().__init__(f"{where}{self.status} (SCT {sct:#x}, SC {sc:#04x})")


def check(sct: int, sc: int, command: str = "") -> None:
    """Raises `NvmeError` unless the status is success."""
    if (sct, sc) != (0, 0):
        raise NvmeError(sct, sc, command)


__all__ = [
    "ConfigError",
    "HostIoError",
    "ImageError",
    "InvalidArgument",
    "InvalidType",
    "InvalidValue",
    "NearflashError",
    "NvmeError",
    "SimulatorFault",
    "StaleDeployment",
    "check",
    "status_name",
]
