"""The FAISS-shaped graph index: ``Index(dim, metric, kind="hnsw"|"vamana", R=..., ef_construction=...)``,
``add(x)``, ``search(q, k, ef=...) -> (D, I)``, ``save(path)`` / ``Index.load(path)``. Graph build and search run
in Rust (``nearflash._native.ndsearch``) on all cores unless ``threads`` says otherwise; this module checks and
converts arguments so that mistakes raise an exception naming the argument."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from nearflash import _native
from nearflash.errors import InvalidArgument

_N = _native.ndsearch
METRICS = ("l2", "ip", "cosine")
KINDS = ("hnsw", "vamana")
DTYPES = ("float32", "uint8", "int8")


def _int(name: str, value, lo: int, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InvalidArgument(f"{name} must be an integer, not {type(value).__name__}")
    if value < lo or (hi is not None and value > hi):
        raise InvalidArgument(f"{name} must be in {lo}..{hi if hi is not None else ''}, not {value}")
    return int(value)


class Index:
    """A graph vector index. ``R`` is HNSW's M (layer 0 keeps up to 2M neighbours) or Vamana's out-degree; ``alpha``
    is Vamana's pruning factor. Distances are squared L2, ``1 - dot`` (ip) or ``1 - cos`` (cosine); smaller is
    nearer. Building with ``threads=1`` (and a fixed seed) gives the same graph every time."""

    def __init__(
        self,
        dim: int,
        metric: str = "l2",
        kind: str = "hnsw",
        R: int = 16,
        ef_construction: int = 200,
        dtype: str = "float32",
        alpha: float = 1.2,
        seed: int = 0,
        _native_index=None,
    ):
        if _native_index is not None:
            self._ix = _native_index
            return
        dim = _int("dim", dim, 1)
        if metric not in METRICS:
            raise InvalidArgument(f"metric must be one of {METRICS}, not {metric!r}")
        if kind not in KINDS:
            raise InvalidArgument(f"kind must be one of {KINDS}, not {kind!r}")
        dtype = np.dtype(dtype).name if isinstance(dtype, (type, np.dtype)) else dtype
        if dtype not in DTYPES:
            raise InvalidArgument(f"dtype must be one of {DTYPES}, not {dtype!r}")
        self._ix = _N.Index(
            dim, metric, kind, _int("R", R, 1), _int("ef_construction", ef_construction, 1), dtype, float(alpha),
            _int("seed", seed, 0, 2**64 - 1),
        )

    # ---- properties ----
    @property
    def dim(self) -> int:
        return self._ix.dim

    @property
    def d(self) -> int:
        """FAISS's name for ``dim``."""
        return self._ix.dim

    @property
    def ntotal(self) -> int:
        return self._ix.ntotal

    def __len__(self) -> int:
        return self._ix.ntotal

    metric = property(lambda self: self._ix.metric)
    kind = property(lambda self: self._ix.kind)
    dtype = property(lambda self: self._ix.dtype)
    R = property(lambda self: self._ix.R)
    ef_construction = property(lambda self: self._ix.ef_construction)
    alpha = property(lambda self: self._ix.alpha)
    seed = property(lambda self: self._ix.seed)

    def __repr__(self) -> str:
        return (f"Index(dim={self.dim}, metric={self.metric!r}, kind={self.kind!r}, R={self.R}, "
                f"ef_construction={self.ef_construction}, dtype={self.dtype!r}, ntotal={self.ntotal})")

    # ---- data ----
    def _rows(self, name: str, x) -> np.ndarray:
        if not isinstance(x, np.ndarray):
            try:
                x = np.asarray(x)
            except Exception as e:  # noqa: BLE001 - any conversion failure is the caller's argument
                raise InvalidArgument(f"{name} must be a 2-D array: {e}") from None
        if x.ndim != 2:
            raise InvalidArgument(f"{name} must be 2-D (n x {self.dim}), not of shape {x.shape}")
        if x.shape[1] != self.dim:
            raise InvalidArgument(f"{name} has {x.shape[1]} columns, the index has dim {self.dim}")
        if self.dtype == "float32":
            if x.dtype.kind not in "fiu":
                raise InvalidArgument(f"{name} must hold real numbers, not {x.dtype}")
            x = np.ascontiguousarray(x, dtype=np.float32)
            if not np.isfinite(x).all():
                bad = int(np.argmax(~np.isfinite(x).all(axis=1)))
                raise InvalidArgument(f"{name} row {bad} holds a NaN or infinite value")
            return x
        if x.dtype != np.dtype(self.dtype):
            raise InvalidArgument(f"{name} must have dtype {self.dtype} (the index's), not {x.dtype}")
        return np.ascontiguousarray(x)

    def add(self, x, threads: int | None = None) -> None:
        """Adds the rows of ``x`` (ids continue from ``ntotal``)."""
        self._ix.add(self._rows("x", x), threads)

    def search(self, q, k: int, ef: int | None = None, threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest stored vectors of each row of ``q`` with search list size ``ef`` (default
        ``max(k, 64)``): ``(D, I)``, float32 distances and int64 ids, nq x k, nearest first."""
        q = self._rows("q", q)
        k = _int("k", k, 1)
        if k > self.ntotal:
            raise InvalidArgument(f"k={k} is larger than the index ({self.ntotal} vectors)")
        ef = max(k, 64) if ef is None else _int("ef", ef, 1)
        if threads is not None:
            threads = _int("threads", threads, 1, 1024)
        return self._ix.search(q, k, ef, threads)

    def deploy(self, device, reorder: str = "degree", seed: int = 0):
        """Deploys the index onto ``device``'s SearSSD firmware; returns a ``searssd.Deployment`` whose ``search``
        has this method's call shape and returns the same ids and distances."""
        from nearflash.ndsearch.searssd import deploy

        return deploy(self, device, reorder, seed)

    def save(self, path: str | os.PathLike) -> None:
        """Writes the index (header, version, checksum) to ``path``."""
        self._ix.save(Path(path))

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Index":
        """Reads an index written by :meth:`save`; a damaged file raises ``ImageError``."""
        return cls(0, _native_index=_N.Index.load(Path(path)))

    def layer0_csr(self) -> tuple[np.ndarray, np.ndarray]:
        """Layer 0 as CSR ``(offsets, neighbours)``: the graph SearSSD lays out on flash."""
        return self._ix.layer0_csr()
