"""Exceptions: simulator faults come from the native module; NVMe error completions raise `NvmeError`."""

from __future__ import annotations

from typing import Optional

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
    """A command completed with an NVMe error status.

    Fields: ``sct`` and ``sc`` (status code type and status code), ``status`` (the status's name), ``command``
    (what the host library was doing), ``reason`` (the device's own words for the failure, from its error log; None
    where it gave none) and ``dw0`` (the completion's command-specific dword, e.g. a firmware's fault code)."""

    def __init__(self, sct: int, sc: int, command: str = "", reason: Optional[str] = None, dw0: int = 0):
        self.sct = sct
        self.sc = sc
        self.status = status_name(sct, sc)
        self.command = command
        self.reason = reason
        self.dw0 = dw0
        where = f"{command} ({reason})" if reason else command
        where = f"{where}: " if where else ""
        super().__init__(f"{where}{self.status} (SCT {sct:#x}, SC {sc:#04x})")


def check(sct: int, sc: int, command: str = "", reason: Optional[str] = None) -> None:
    """Raises `NvmeError` unless the status is success."""
    if (sct, sc) != (0, 0):
        raise NvmeError(sct, sc, command, reason)


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
