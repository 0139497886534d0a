"""The DLG pipeline on the host: int8 hashing (DLG-x's arithmetic, run by numpy/BLAS: :mod:`host_int8`, equal bit
for bit to the crate's executor that the firmware runs), the K-NN hash graph, and the GSE search under the plain or
two-hop page layout (the firmware's Rust code behind ``DLG_index``). This class is the host side of a deployment and
the B-CPU baseline's functional core."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from nearflash import _native
from nearflash.cognitive.data import load_model
from nearflash.cognitive.host_int8 import Int8Network
from nearflash.errors import InvalidArgument

_cog = _native.cognitive
LAYOUTS = ("plain", "two_hop")


def parameters() -> list[tuple[str, str, str, str]]:
    """Every modelled parameter: (name, default, unit, source)."""
    return _cog.parameters()


def _images(images: Any, pixels: int, what: str = "images") -> np.ndarray:
    a = np.asarray(images)
    if a.dtype != np.uint8:
        raise InvalidArgument(f"{what}: dtype {a.dtype}; uint8 pixels (0-255) expected")
    if a.ndim == 3 and a.shape[1] * a.shape[2] == pixels:
        a = a.reshape(a.shape[0], pixels)
    elif a.ndim == 1 and a.size == pixels:
        a = a.reshape(1, pixels)
    if a.ndim != 2 or a.shape[1] != pixels or a.shape[0] == 0:
        raise InvalidArgument(f"{what}: shape {a.shape}; (n, {pixels}) or (n, 28, 28) with n >= 1 expected")
    return np.ascontiguousarray(a)


@dataclass
class SearchResult:
    """Top-T ids per query and what the GSE did (flash pages read, vertices evaluated) per query."""

    ids: list[np.ndarray]
    stats: list[dict[str, int]] = field(default_factory=list)


#: The int8 models calibrated in this process: (model, digest of the calibration images, int8 model), newest last.
_QUANTISED: list[tuple[Any, bytes, Any]] = []


def quantised(model: Any, calibration: np.ndarray) -> Any:
    """``model.quantise(calibration)``, computed once per process for the same model and calibration images: the
    shards of one array all calibrate on the database's first images (:mod:`nearflash.cognitive.sharded`)."""
    import hashlib

    calib = np.ascontiguousarray(calibration)
    key = hashlib.sha256(str(calib.shape).encode() + calib.tobytes()).digest()
    for m, k, q in _QUANTISED:
        if m is model and k == key:
            return q
    q = model.quantise(calib)
    _QUANTISED.append((model, key, q))
    del _QUANTISED[:-4]
    return q


class DlgIndex:
    """A database hashed by the int8 model and indexed by a K-NN graph (K = 25 by default). The int8 scales are
    calibrated on the database's first ``calibration`` images, or on the images ``calibration`` holds (shards of one
    database pass the same ones, so that a query hashes to the same code on every shard)."""

    def __init__(
        self,
        database: Any,
        model: Optional[Any] = None,
        *,
        calibration: int = 1000,
        k: int = 25,
        seed: int = 1,
        codes: Optional[np.ndarray] = None,
    ) -> None:
        self.model = model if model is not None else load_model()
        pixels = self.model.input_bytes
        db = _images(database, pixels, "database")
        if isinstance(calibration, np.ndarray):  # the images themselves (shards of one database share them)
            calib = _images(calibration, pixels, "calibration")
        elif isinstance(calibration, int) and not isinstance(calibration, bool) and calibration > 0:
            calib = db[:calibration]
        else:
            raise InvalidArgument(f"calibration: {calibration!r}; a positive number of images or uint8 images")
        if not isinstance(k, int) or not 1 <= k < len(db):
            raise InvalidArgument(f"k: {k!r}; 1 to {len(db) - 1} (database size - 1)")
        self.bits = self.model.bits
        self.qmodel = quantised(self.model, calib)
        self.net = Int8Network(self.qmodel)
        if codes is None:
            self.codes = self.net.hash(db)
        else:  # kept from an earlier hashing of this database by this model (a deployment's record)
            self.codes = np.ascontiguousarray(codes, dtype=np.uint64)
            if self.codes.shape != (len(db),):
                raise InvalidArgument(f"codes: shape {self.codes.shape}; one per database image, ({len(db)},)")
        self.k, self.seed = k, seed
        self._graph: Optional[Any] = None

    @property
    def graph(self) -> Any:
        """The K-NN graph over the codes (built on first use)."""
        if self._graph is None:
            self._graph = _cog.Graph(self.codes, self.bits, self.k, self.seed)
        return self._graph

    def __len__(self) -> int:
        return len(self.codes)

    def hash(self, images: Any) -> np.ndarray:
        """Int8 hash codes (uint64, ``bits`` low bits used), as ``DLG_hashing`` returns them."""
        return self.net.hash(_images(images, self.model.input_bytes))

    def classify(self, images: Any) -> np.ndarray:
        """Class of each image (``DLG_analysis``)."""
        return self.model.classify(_images(images, self.model.input_bytes))

    def classify_int8(self, images: Any) -> np.ndarray:
        """Class of each image by the int8 body and the float classifier head: what ``DLG_analysis`` computes."""
        return self.qmodel.classify(_images(images, self.model.input_bytes), self.model)

    def search(self, images: Any, t: int, layout: str = "two_hop", params: Optional[dict[str, float]] = None) -> SearchResult:
        """Top-``t`` database ids per image by graph search (``DLG_index``)."""
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or not 1 <= t <= len(self):
            raise InvalidArgument(f"T: {t!r}; an int from 1 to {len(self)} (the database size)")
        if layout not in LAYOUTS:
            raise InvalidArgument(f"layout: {layout!r}; one of {', '.join(LAYOUTS)}")
        out = SearchResult(ids=[])
        for i, code in enumerate(self.hash(images)):
            ids, st = self.graph.search(int(code), int(t), layout, self.seed + i, params)
            out.ids.append(ids)
            out.stats.append(st)
        return out

    def brute_force(self, images: Any, t: int) -> list[np.ndarray]:
        """Top-``t`` ids per image by exhaustive Hamming distance (ties by id)."""
        return [_cog.brute_force(self.codes, int(c), int(t)) for c in self.hash(images)]
