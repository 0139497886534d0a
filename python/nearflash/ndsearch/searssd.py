"""SearSSD (NDSearch's modified SSD) modelled on the host, one lock-step batch at a time: the index's layer 0 is
reordered (degree-ascending BFS, random BFS or as built), laid out as LUNCSR over SearSSD's 256 LUNs, searched in
lock-step (one entry vertex per query per iteration) with or without batch-wise dynamic allocating and
speculation, and timed with SearSSD's parameters (:func:`parameters`). The ids and distances are exactly the host
search's; the report gives the trace's page accesses, B(G, f) and the modelled time. This is the pure-function
half of the firmware extension (which runs the same steps on the emulated device)."""

from __future__ import annotations

import json

import numpy as np

from nearflash import _native
from nearflash.errors import InvalidArgument
from nearflash.ndsearch.index import Index, _int

REORDERS = ("none", "degree", "random")


def parameters() -> list[tuple[str, str, str, str]]:
    """(name, default, unit, source) of every SearSSD parameter."""
    return _native.ndsearch.searssd_parameters()


def batch(index: Index, q, k: int = 10, ef: int = 64, reorder: str = "degree", dynamic: bool = True,
          params: dict | None = None, geometry: dict | None = None, seed: int = 0) -> tuple[dict, np.ndarray, np.ndarray]:
    """Models one batch of queries ``q``: ``(report, D, I)``. ``params`` overrides SearSSD parameters (numbers in
    their declared units, e.g. ``{"speculate": 4, "ecc_fail_probability": 0.1}``); ``geometry`` overrides the
    flash geometry (``luns``, ``planes_per_lun``, ``blocks_per_plane``, ``pages_per_block``, ``page_bytes``)."""
    if not isinstance(index, Index):
        raise InvalidArgument(f"index must be a nearflash.ndsearch.Index, not {type(index).__name__}")
    if reorder not in REORDERS:
        raise InvalidArgument(f"reorder must be one of {REORDERS}, not {reorder!r}")
    q = index._rows("q", q)
    k = _int("k", k, 1)
    if k > index.ntotal:
        raise InvalidArgument(f"k={k} is larger than the index ({index.ntotal} vectors)")
    ef = _int("ef", ef, 1)
    if params is not None and not isinstance(params, dict):
        raise InvalidArgument("params must be a dict of parameter name -> value")
    if geometry is not None and not isinstance(geometry, dict):
        raise InvalidArgument("geometry must be a dict")
    return _native.ndsearch.searssd_batch(index._ix, q, k, ef, reorder, bool(dynamic),
                                          None if params is None else json.dumps(params), geometry,
                                          _int("seed", seed, 0))
