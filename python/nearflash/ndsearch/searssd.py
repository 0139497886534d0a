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
from nearflash.errors import InvalidType, InvalidValue, StaleDeployment
from nearflash.ndsearch.index import MAX_K, Index, _int

REORDERS = ("none", "degree", "random")
#: Where the distances are computed (``batch(design=...)``): SearSSD beside each LUN, DeepStore's chip-level
#: (DS-cp) and channel-level (DS-c) accelerators, or the SmartSSD's FPGA for everything (SmartSSD-only).
DESIGNS = ("searssd", "ds-cp", "ds-c", "smartssd-only")


def parameters() -> list[tuple[str, str, str, str]]:
    """(name, default, unit, source) of every SearSSD parameter."""
    return _native.ndsearch.searssd_parameters()


def baseline_parameters() -> list[tuple[str, str, str, str]]:
    """(name, default, unit, source) of every baseline (DeepStore, SmartSSD-only) and energy parameter."""
    return _native.ndsearch.baseline_parameters()


def host_parameters() -> list[tuple[str, str, str, str]]:
    """(name, default, unit, source) of the host CPU (2 x Xeon Gold 6254) and GPU (TITAN RTX) the comparisons are
    costed on (``batch(...)["hosts"]``)."""
    return _native.ndsearch.host_parameters()


def batch(index: Index, q, k: int = 10, ef: int = 64, reorder: str = "degree", dynamic: bool = True,
          params: dict | None = None, geometry: dict | None = None, seed: int = 0, design: str = "searssd",
          multiplane: bool = True, baseline: dict | None = None,
          hosts: dict | None = None) -> tuple[dict, np.ndarray, np.ndarray]:
    """Models one batch of queries ``q``: ``(report, D, I)``. ``params`` overrides SearSSD parameters (numbers in
    their declared units, e.g. ``{"speculate": 4, "ecc_fail_probability": 0.1}``); ``geometry`` overrides the
    flash geometry (``luns``, ``planes_per_lun``, ``blocks_per_plane``, ``pages_per_block``, ``page_bytes``).
    ``design`` (one of :data:`DESIGNS`) places the distances elsewhere on the same trace and allocation (the
    paper's baselines); ``multiplane=False`` reads every plane's page on its own (Fig. 16's bare machine);
    ``baseline`` overrides :func:`baseline_parameters`. The report's ``energy_j`` / ``queries_per_joule`` charge
    Table I powers x busy time plus page senses and bytes moved. ``report["host_work"]`` is the host search's
    counted work on this batch (distances, expansions) and ``report["hosts"]`` prices it on the paper's CPU and GPU
    (graph search and brute force, the faster chosen; ``hosts`` overrides :func:`host_parameters`): the
    deterministic baselines the comparisons divide by."""
    if not isinstance(index, Index):
        raise InvalidType(f"index must be a nearflash.ndsearch.Index, not {type(index).__name__}")
    if reorder not in REORDERS:
        raise InvalidValue(f"reorder must be one of {REORDERS}, not {reorder!r}")
    q = index._rows("q", q)
    k = _int("k", k, 1, MAX_K)
    if index.ntotal == 0:
        raise InvalidValue("the index is empty: add vectors before modelling a batch over it")
    ef = _int("ef", ef, 1, MAX_K)
    if params is not None and not isinstance(params, dict):
        raise InvalidType("params must be a dict of parameter name -> value")
    if geometry is not None and not isinstance(geometry, dict):
        raise InvalidType("geometry must be a dict")
    if design not in DESIGNS:
        raise InvalidValue(f"design must be one of {DESIGNS}, not {design!r}")
    if not isinstance(multiplane, (bool, np.bool_)):
        raise InvalidType(f"multiplane must be True or False, not {multiplane!r}")
    if baseline is not None and not isinstance(baseline, dict):
        raise InvalidType("baseline must be a dict of parameter name -> value")
    if hosts is not None and not isinstance(hosts, dict):
        raise InvalidType("hosts must be a dict of parameter name -> value")
    kk = min(k, index.ntotal)
    rep, d, i = _native.ndsearch.searssd_batch(index._ix, q, kk, ef, reorder, bool(dynamic),
                                               None if params is None else json.dumps(params), geometry,
                                               _int("seed", seed, 0), design, bool(multiplane),
                                               None if baseline is None else json.dumps(baseline),
                                               None if hosts is None else json.dumps(hosts))
    return (rep, *_pad(d, i, k))


def _pad(d: np.ndarray, i: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``k`` columns: ids -1 and distances +inf beyond the index's vectors (as ``Index.search`` and FAISS)."""
    extra = k - d.shape[1]
    if extra <= 0:
        return d, i
    return (np.hstack([d, np.full((len(d), extra), np.inf, np.float32)]),
            np.hstack([i, np.full((len(i), extra), -1, np.int64)]))


class Deployment:
    """An index deployed onto a device's SearSSD firmware (extension ``ndsearch``): layer 0 as LUNCSR in the
    controller's DRAM, the vectors programmed by physical address into the extension-reserved blocks. ``search``
    has the host ``Index.search``'s call shape and returns exactly its ids and distances (same graph, entry vertex
    and ``ef``); the entry vertices come from the host index's upper layers (HNSW) or medoid (Vamana), layer 0 is
    searched inside the SSD in lock-step batches of the firmware's ``batch`` parameter."""

    def __init__(self, index: Index, device, reorder: str = "degree", seed: int = 0):
        from nearflash.device import Device

        if not isinstance(index, Index):
            raise InvalidType(f"index must be a nearflash.ndsearch.Index, not {type(index).__name__}")
        if not isinstance(device, Device):
            raise InvalidType(f"device must be a nearflash.Device, not {type(device).__name__}")
        if reorder not in REORDERS:
            raise InvalidValue(f"reorder must be one of {REORDERS}, not {reorder!r}")
        if index.ntotal == 0:
            raise InvalidValue("the index is empty: add vectors before deploying it")
        self.index = index
        self.device = device
        self.reorder = reorder
        self.vectors, self.deploy_ns = _native.ndsearch.device_deploy(
            device.native, device.sync_qid, index._ix, reorder, _int("seed", seed, 0))
        #: The index's generation when deployed: an add or remove since makes this deployment stale.
        self.generation = index.generation
        self.last_latency_ns = 0
        self.last_batches = 0

    @property
    def stale(self) -> bool:
        """True once the index has changed (vectors added or removed) since it was deployed."""
        return self.index.generation != self.generation

    def search(self, q, k: int, ef: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest deployed vectors of each row of ``q`` (list size ``ef``, default ``max(k, 64)``):
        ``(D, I)`` as the host search returns them. The device time of the search is ``last_latency_ns``."""
        if self.stale:
            raise StaleDeployment(
                f"the index changed since it was deployed (generation {self.generation}, now "
                f"{self.index.generation}: vectors added or removed); deploy it again")
        q = self.index._rows("q", q)
        k = _int("k", k, 1, MAX_K)
        ef = max(k, 64) if ef is None else _int("ef", ef, 1, MAX_K)
        if q.shape[0] == 0:
            raise InvalidValue("q must hold at least one row")
        D, I, self.last_latency_ns, self.last_batches = _native.ndsearch.device_search(
            self.device.native, self.device.sync_qid, self.index._ix, q, min(k, self.index.ntotal), ef)
        return _pad(D, I, k)

    def __repr__(self) -> str:
        return f"Deployment({self.vectors} vectors, reorder={self.reorder!r}, on {self.device!r})"


def deploy(index: Index, device, reorder: str = "degree", seed: int = 0) -> Deployment:
    """Deploys ``index`` onto ``device`` (which must have the ``ndsearch`` extension attached and
    ``ftl.ext_reserved_blocks`` large enough); see :class:`Deployment`."""
    return Deployment(index, device, reorder, seed)
