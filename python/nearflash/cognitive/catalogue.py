"""The host's record of a Cognitive SSD deployment (the DLG library's catalogue): what was deployed (digests of the
model and the database, the layout and seeds), the device's digest of the two DLG_config payloads, and the
database's hash codes. With it, a host that restarts takes up the deployment the device still holds
(``CognitiveSSD.resume``) instead of hashing the database, building the graph and programming it again."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np

#: Bumped when the record's contents change meaning.
VERSION = 1


def fingerprint(model_file: bytes, database: np.ndarray, setup: dict[str, Any]) -> str:
    """SHA-256 over the model file's bytes, the database's shape and bytes, and the deployment's settings."""
    h = hashlib.sha256()
    h.update(model_file)
    db = np.ascontiguousarray(database)
    h.update(repr((db.dtype.str, db.shape, sorted(setup.items()))).encode())
    h.update(db.tobytes())
    return h.hexdigest()


@dataclass
class Catalogue:
    fingerprint: str
    digest: str
    codes: np.ndarray

    @classmethod
    def of(cls, ssd: Any, model_file: bytes, database: np.ndarray, setup: dict[str, Any]) -> "Catalogue":
        """The record of what `ssd` just deployed (the model read from a file of bytes `model_file`)."""
        digest = ssd.deployment
        if digest is None:
            raise ValueError("ssd: the device reports no complete deployment")
        return cls(fingerprint(model_file, database, setup), digest, np.asarray(ssd.index.codes, np.uint64))

    def matches(self, model_file: bytes, database: np.ndarray, setup: dict[str, Any]) -> bool:
        return len(self.codes) == len(database) and self.fingerprint == fingerprint(model_file, database, setup)

    def save(self, path: Path) -> None:
        """Writes it atomically (a temporary file renamed over `path`)."""
        path = Path(path)
        meta = json.dumps({"version": VERSION, "fingerprint": self.fingerprint, "digest": self.digest})
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, meta=np.frombuffer(meta.encode(), np.uint8), codes=self.codes)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    @classmethod
    def load(cls, path: Path) -> Optional["Catalogue"]:
        """The record at `path`, or None if there is none or it is damaged or of another version (the caller then
        deploys again and writes a new one)."""
        try:
            with np.load(Path(path), allow_pickle=False) as z:
                meta = json.loads(bytes(z["meta"]).decode())
                codes = np.asarray(z["codes"], np.uint64)
            if meta.get("version") != VERSION or codes.ndim != 1:
                return None
            return cls(str(meta["fingerprint"]), str(meta["digest"]), codes)
        except (OSError, ValueError, KeyError, TypeError, EOFError, UnicodeDecodeError, zipfile.BadZipFile):
            return None
