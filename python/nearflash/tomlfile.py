"""TOML files read with errors that name the file (scenarios of flows, sweep specifications)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nearflash.errors import InvalidArgument

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib


def read_toml(path: Path, what: str) -> dict[str, Any]:
    """The table in the TOML file at `path`; InvalidArgument naming `what` (e.g. "scenario file") and the file when
    it is missing, unreadable or not TOML."""
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise InvalidArgument(f"no {what} at {path}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidArgument(f"cannot read {path}: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise InvalidArgument(f"{path} is not valid TOML: {e}") from None
