"""The iSSD on a device: attach the Agent (``nearflash_issd::agent``), put paged inputs on the device and run jobs
through the Initiator with a strategy:

* ``"in_storage"`` (pipelining): Map on the FMCs (``accelerate=True``: on their stream processors), Reduce on
  the SSD CPUs, the result streamed to the host;
* ``"conventional"``: NVMe reads and the kernel on the host CPUs;
* ``"static"`` (``fraction`` of the pages in storage, the rest on the host at the same time);
* ``"dynamic"`` (chunks of at least ``chunk_pages`` pages to whichever side is free next).

    dev = nearflash.Device(None, preset="issd", channels=8)
    agent.attach(dev)
    extents = agent.write_input(dev, 0, pages, 8192)
    out = agent.run(dev, kernels.spec("scan"), extents, 8192)          # in storage
    ref = agent.run(dev, kernels.spec("scan"), extents, 8192, "conventional")

Results are the kernel's output dict (see :mod:`nearflash.issd.kernels`) plus ``start_ns``, ``end_ns``,
``seconds``, ``bandwidth`` (input B/s), ``input_bytes``, ``device_bytes``, ``result_bytes``, ``device_jobs``.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, Iterator, Optional

import numpy as np

from nearflash._native import issd as _issd
from nearflash.device import _count, _real
from nearflash.errors import InvalidType, InvalidValue

STRATEGIES = ("in_storage", "conventional", "static", "dynamic")


def parameters() -> list[tuple[str, str, str, str]]:
    """(name, default, unit, source) of every Agent parameter."""
    return _issd.agent_parameters()


def attach(dev: Any, **params: Any) -> None:
    """Attaches the Agent to a :class:`nearflash.Device` (parameters override the preset's ``[ext.issd]``)."""
    dev.attach("issd", **params)


#: Who the Initiator's queue is reserved for on a :class:`nearflash.Device`, and its entries (the device's maximum
#: caps them; as deep as the Initiator makes its own queue on a bare device).
QUEUE_OWNER = "the iSSD Initiator"
QUEUE_DEPTH = 1024


@contextlib.contextmanager
def _initiator_queue(dev: Any) -> Iterator[tuple[Any, int]]:
    """(native device, queue id) for the Initiator, holding a :class:`nearflash.Device`'s lock: the Device reserves
    the queue so that its own block API and queues never collide with it. A bare native
    handle is driven on queue 1, as the caller who owns it decides."""
    if not hasattr(dev, "reserved_queue"):
        yield dev, 1
        return
    with dev.exclusive() as native:
        yield native, dev.reserved_queue(QUEUE_OWNER, QUEUE_DEPTH)


def write_input(dev: Any, slba: int, pages: np.ndarray, page_size: int) -> list[tuple[int, int]]:
    """Writes a paged input at ``slba`` and waits until it is on flash; returns its extents [(slba, nlb)]."""
    slba, page_size = _count("slba", slba, 0, 2**64 - 1), _count("page_size", page_size, 1, 2**32 - 1)
    data = np.ascontiguousarray(pages).reshape(-1).view(np.uint8)
    with _initiator_queue(dev) as (native, qid):
        return _issd.write_input(native, qid, slba, data, page_size)


def run(
    dev: Any,
    spec: dict | str,
    extents: list[tuple[int, int]],
    page_size: int,
    strategy: str = "in_storage",
    *,
    accelerate: bool = False,
    fraction: Optional[float] = None,
    chunk_pages: Optional[int] = None,
    agent_params: Optional[dict] = None,
) -> dict:
    """Runs a job with a strategy. The Initiator uses the parameters the attached Agent resolved (opcodes,
    per-kernel costs); ``agent_params`` apply only on a device without the Agent (conventional runs): given with the
    Agent attached, they are refused rather than ignored."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy {strategy!r}: one of {STRATEGIES}")
    page_size = _count("page_size", page_size, 1, 2**32 - 1)
    extents = [_extent(i, e) for i, e in enumerate(extents)]
    for i, (slba, nlb) in enumerate(extents):
        if slba + nlb > getattr(dev, "lbas", slba + nlb):
            raise InvalidValue(f"extents[{i}] = ({slba}, {nlb}) ends past the device's {dev.lbas} LBAs")
    if fraction is not None:
        fraction = _real("fraction", fraction)
    if chunk_pages is not None:
        chunk_pages = _count("chunk_pages", chunk_pages, 1, 2**32 - 1)
    s = spec if isinstance(spec, str) else json.dumps(spec)
    ap = None if agent_params is None else json.dumps(agent_params)
    with _initiator_queue(dev) as (native, qid):
        return _issd.run_job(native, qid, s, extents, page_size, strategy, accelerate, fraction, chunk_pages, ap)


def _extent(i: int, e: Any) -> tuple[int, int]:
    """Extent `i` of a job as (first LBA, blocks), or InvalidArgument naming it."""
    if not isinstance(e, (tuple, list)) or len(e) != 2:
        raise InvalidType(f"extents[{i}] must be a (first LBA, blocks) pair, got {e!r}")
    return _count(f"extents[{i}]'s first LBA", e[0], 0, 2**64 - 1), _count(f"extents[{i}]'s blocks", e[1], 1, 2**32 - 1)


def device(config: str = "iSSD-400", n_ch: int = 8, n_host_cpu: int = 8, seed: int = 1) -> tuple[Any, dict]:
    """A :class:`nearflash.Device` (in memory) set up as one of Fig. 7's systems, with the Agent attached; returns
    it and its setup (preset, overrides with their reasons, Agent parameters, the model's system)."""
    from nearflash.device import Device
    from nearflash.issd import sim

    n_ch, n_host_cpu = _count("n_ch", n_ch, 1, 2**16), _count("n_host_cpu", n_host_cpu, 1, 2**16)
    s = sim.setup(config, n_ch, n_host_cpu)
    dev = Device(None, preset=s["preset"], seed=seed, overrides={o["key"]: o["value"] for o in s["overrides"]})
    attach(dev, **s["agent"])
    return dev, s
