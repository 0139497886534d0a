"""Fashion-MNIST (Debian's ``dataset-fashion-mnist``) and the shipped hashing model."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np

from nearflash import _native
from nearflash.errors import InvalidArgument

_cog = _native.cognitive

SHIPPED_MODEL = Path(__file__).with_name("fashion_hash48.safetensors")


def shipped_model_path() -> Path:
    """The model trained by ``nearflash cognitive train`` (seed 1, 48 bits) that ships with the package."""
    return SHIPPED_MODEL


def load_model(path: Optional[str | Path] = None) -> "_native.cognitive.Model":
    """A safetensors hashing model (default: the shipped one)."""
    p = Path(path) if path is not None else SHIPPED_MODEL
    if not p.exists():
        raise InvalidArgument(f"model: {p} does not exist")
    st = p.stat()
    key = (str(p.resolve()), st.st_mtime_ns, st.st_size)
    if key not in _MODELS:  # loaded once per file version: the shards of an array share it (and its int8 model)
        _MODELS.clear()
        _MODELS[key] = _cog.Model.load(str(p))
    return _MODELS[key]


#: The last model loaded, by (resolved path, mtime, size).
_MODELS: dict[tuple[str, int, int], "_native.cognitive.Model"] = {}


def fashion_mnist(part: str, limit: Optional[int] = None, directory: Optional[str] = None) -> tuple[np.ndarray, np.ndarray]:
    """(images uint8 (n, 784), labels uint8 (n,)) of ``part`` ("train": the database, "test": the queries)."""
    if limit is not None and (not isinstance(limit, int) or limit <= 0):
        raise InvalidArgument(f"limit: {limit!r}; a positive int or None")
    return _cog.load_fashion_mnist(part, directory, limit)
