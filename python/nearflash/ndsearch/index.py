"""The FAISS-shaped graph index: ``Index(dim, metric, kind="hnsw"|"vamana", R=..., ef_construction=...)``,
``add(x)``, ``add_with_ids(x, ids)``, ``search(q, k, ef=...) -> (D, I)``, ``remove_ids(ids)``, ``save(path)`` /
``Index.load(path)``, pickling. Graph build and search run in Rust (``nearflash._native.ndsearch``) on all cores
unless ``threads`` says otherwise; this module checks and converts arguments so that mistakes raise an exception
naming the argument: ``InvalidType`` (a ``TypeError``) for a wrong type, ``InvalidValue`` (a ``ValueError``) for a
value outside what is allowed, both ``InvalidArgument``s.

FAISS's conventions hold where FAISS has them: metric names ``"L2"``/``"IP"`` and the values of
``faiss.METRIC_L2`` (1) / ``faiss.METRIC_INNER_PRODUCT`` (0) are accepted; ``k`` larger than the index is padded
with id -1 and distance +inf; ids are int64 labels (``add`` numbers on from the largest label given so far, so a
label is never reused; ``remove_ids`` keeps the survivors' labels, as ``IndexIDMap`` does, where a plain FAISS
``IndexFlat`` renumbers them). One difference: distances are always "smaller is nearer" - squared L2, ``1 - dot``
for inner product (FAISS returns the dot product itself, larger first) and ``1 - cos``."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from nearflash import _native
from nearflash.errors import InvalidArgument, InvalidType, InvalidValue

_N = _native.ndsearch
METRICS = ("l2", "ip", "cosine")
KINDS = ("hnsw", "vamana")
#: Largest ``k`` and ``ef`` (the native index's list-size bound).
MAX_K = 1 << 20
DTYPES = ("float32", "uint8", "int8")
#: FAISS's metric constants (``faiss.METRIC_INNER_PRODUCT``, ``faiss.METRIC_L2``) and names, as this index names them.
FAISS_METRICS = {0: "ip", 1: "l2"}
METRIC_NAMES = {"l2": "l2", "ip": "ip", "cosine": "cosine", "inner_product": "ip", "metric_l2": "l2",
                "metric_inner_product": "ip"}


def _int(name: str, value, lo: int, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InvalidType(f"{name} must be an integer, not {type(value).__name__}")
    if value < lo or (hi is not None and value > hi):
        raise InvalidValue(f"{name} must be in {lo}..{hi if hi is not None else ''}, not {value}")
    return int(value)


def metric_name(metric) -> str:
    """This index's name of ``metric``: ``"l2"``, ``"ip"``, ``"cosine"`` in any case, FAISS's ``"L2"``/``"IP"``/
    ``"INNER_PRODUCT"``, or the values of ``faiss.METRIC_L2`` (1) and ``faiss.METRIC_INNER_PRODUCT`` (0)."""
    if isinstance(metric, (int, np.integer)) and not isinstance(metric, bool):
        if int(metric) not in FAISS_METRICS:
            raise InvalidValue(f"metric {int(metric)} is not faiss.METRIC_INNER_PRODUCT (0) or faiss.METRIC_L2 (1)")
        return FAISS_METRICS[int(metric)]
    if not isinstance(metric, str):
        raise InvalidType(f"metric must be a name or a faiss.METRIC_* value, not {type(metric).__name__}")
    if metric.lower() not in METRIC_NAMES:
        raise InvalidValue(f"metric must be one of {METRICS} (or FAISS's 'L2', 'IP', METRIC_L2, "
                           f"METRIC_INNER_PRODUCT), not {metric!r}")
    return METRIC_NAMES[metric.lower()]


def _native_call(f, *args):
    """Calls the native index, raising its argument errors as `InvalidValue` (a ValueError)."""
    try:
        return f(*args)
    except InvalidArgument as e:
        if isinstance(e, (ValueError, TypeError)):
            raise
        raise InvalidValue(str(e)) from None


def _from_bytes(raw: bytes) -> "Index":
    """An index from its file image (``pickle`` calls this)."""
    return Index(0, _native_index=_N.Index.from_bytes(raw))


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
        metric = metric_name(metric)
        if not isinstance(kind, str):
            raise InvalidType(f"kind must be a name, not {type(kind).__name__}")
        if kind not in KINDS:
            raise InvalidValue(f"kind must be one of {KINDS}, not {kind!r}")
        try:
            dtype = np.dtype(dtype).name if isinstance(dtype, (type, np.dtype)) else dtype
        except TypeError:
            raise InvalidType(f"dtype must be one of {DTYPES}, not {dtype!r}") from None
        if not isinstance(dtype, str):
            raise InvalidType(f"dtype must be one of {DTYPES}, not {type(dtype).__name__}")
        if dtype not in DTYPES:
            raise InvalidValue(f"dtype must be one of {DTYPES}, not {dtype!r}")
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating)):
            raise InvalidType(f"alpha must be a number, not {type(alpha).__name__}")
        self._ix = _native_call(
            _N.Index, dim, metric, kind, _int("R", R, 1), _int("ef_construction", ef_construction, 1), dtype,
            float(alpha), _int("seed", seed, 0, 2**64 - 1),
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

    @property
    def metric_type(self) -> int | None:
        """FAISS's constant for the metric (``faiss.METRIC_L2`` = 1, ``METRIC_INNER_PRODUCT`` = 0; cosine: None)."""
        return {v: k for k, v in FAISS_METRICS.items()}.get(self.metric)

    @property
    def is_trained(self) -> bool:
        """Always True: a graph index needs no training (FAISS's attribute)."""
        return True

    @property
    def generation(self) -> int:
        """Changes of the stored vectors so far (adds and removals); a deployment remembers the one it was made at."""
        return self._ix.generation

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

    def __reduce__(self):
        return (_from_bytes, (self._ix.to_bytes(),))

    # ---- data ----
    def _rows(self, name: str, x) -> np.ndarray:
        if not isinstance(x, np.ndarray):
            try:
                x = np.asarray(x)
            except Exception as e:  # noqa: BLE001 - any conversion failure is the caller's argument
                raise InvalidType(f"{name} must be a 2-D array: {e}") from None
        if x.ndim != 2:
            raise InvalidValue(f"{name} must be 2-D (n x {self.dim}), not of shape {x.shape}")
        if x.shape[1] != self.dim:
            raise InvalidValue(f"{name} has {x.shape[1]} columns, the index has dim {self.dim}")
        if self.dtype == "float32":
            if x.dtype.kind not in "fiu":
                raise InvalidType(f"{name} must hold real numbers, not {x.dtype}")
            x = np.ascontiguousarray(x, dtype=np.float32)
            if not np.isfinite(x).all():
                bad = int(np.argmax(~np.isfinite(x).all(axis=1)))
                raise InvalidValue(f"{name} row {bad} holds a NaN or infinite value")
            return x
        if x.dtype != np.dtype(self.dtype):
            raise InvalidType(f"{name} must have dtype {self.dtype} (the index's), not {x.dtype}")
        return np.ascontiguousarray(x)

    def _ids(self, ids, n: int | None = None) -> np.ndarray:
        """``ids`` as a 1-D int64 array (of length ``n`` where given)."""
        if not isinstance(ids, np.ndarray):
            try:
                ids = np.asarray(ids)
            except Exception as e:  # noqa: BLE001
                raise InvalidType(f"ids must be a 1-D array of integers: {e}") from None
        if ids.dtype.kind not in "iu" or ids.dtype == np.bool_:
            raise InvalidType(f"ids must hold integers, not {ids.dtype}")
        if ids.ndim != 1:
            raise InvalidValue(f"ids must be 1-D, not of shape {ids.shape}")
        if n is not None and len(ids) != n:
            raise InvalidValue(f"ids has {len(ids)} entries for {n} vectors")
        if ids.dtype == np.uint64 and len(ids) and ids.max() > np.iinfo(np.int64).max:
            raise InvalidValue("ids must fit in int64")
        return np.ascontiguousarray(ids, dtype=np.int64)

    def add(self, x, threads: int | None = None) -> None:
        """Adds the rows of ``x``; their ids continue from the largest id given so far (``ntotal`` onwards while no
        vector was removed or added with ids)."""
        x = self._rows("x", x)
        _native_call(self._ix.add, x, self._threads(threads))

    def add_with_ids(self, x, ids, threads: int | None = None) -> None:
        """Adds the rows of ``x`` under the int64 ids ``ids`` (one per row, each >= 0, none already in the index,
        no repeats); a refused call adds nothing."""
        x = self._rows("x", x)
        ids = self._ids(ids, len(x))
        _native_call(self._ix.add_with_ids, x, ids, self._threads(threads))

    def remove_ids(self, ids) -> int:
        """Removes the vectors with these ids (ids not in the index are ignored) and repairs the graph around them;
        returns how many were removed. Deployments made before become stale."""
        return int(_native_call(self._ix.remove_ids, self._ids(ids)))

    @staticmethod
    def _threads(threads):
        return None if threads is None else _int("threads", threads, 1, 1024)

    def search(self, q, k: int, ef: int | None = None, threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest stored vectors of each row of ``q`` with search list size ``ef`` (default
        ``max(k, 64)``): ``(D, I)``, float32 distances and int64 ids, nq x k, nearest first; beyond the vectors
        the index holds, ids are -1 and distances +inf (as FAISS)."""
        q = self._rows("q", q)
        k = _int("k", k, 1, MAX_K)
        ef = max(k, 64) if ef is None else _int("ef", ef, 1, MAX_K)
        return _native_call(self._ix.search, q, k, ef, self._threads(threads))

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

    def memory_bytes(self) -> int:
        """Bytes this index holds on the heap (vectors, graph rows, per-vertex state, labels)."""
        return self._ix.memory_bytes()

    def layer0_csr(self) -> tuple[np.ndarray, np.ndarray]:
        """Layer 0 as CSR ``(offsets, neighbours)``: the graph SearSSD lays out on flash."""
        return self._ix.layer0_csr()
