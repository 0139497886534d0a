"""CPU + SSD, DiskANN-style: the graph and vectors on the SSD in DiskANN's sector layout (each node
``[vector | degree u32 | neighbour ids u32 x max degree]``, whole nodes packed into 4 KiB blocks), read through the
platform's host I/O path (NVMe Reads on a queue), with a DRAM cache of the nodes nearest the entry in BFS order
(DiskANN's ``num_nodes_to_cache``). The search is the host's best-first search (beam width 1, so its trace and
results are the in-memory search's): in each round every live query reads the blocks of the vertices whose
vectors it measures (no PQ: each distance needs the full vector), all rounds' reads in flight together up to
the queue depth (all queries advance in lock-step: the SSD's best case). The distances themselves are the host
search's; the reads are timing-only reads of the blocks written here.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from nearflash import _native
from nearflash.errors import InvalidArgument
from nearflash.ndsearch.index import Index, _int


@dataclass
class DiskResult:
    """A CPU + SSD batch: device time of the reads, I/Os and the DRAM cache's hits."""

    io_ns: int
    reads: int
    cache_hits: int
    rounds: int
    nodes_per_block: int

    def ios_per_query(self, nq: int) -> float:
        return self.reads / nq


def node_bytes(index: Index) -> int:
    """Bytes of one node in the sector layout: vector, degree, ``2 R`` neighbour slots (HNSW layer 0)."""
    itemsize = 4 if index.dtype == "float32" else 1
    return index.dim * itemsize + 4 + 4 * 2 * index.R


def write_layout(index: Index, base: np.ndarray, device, first_lba: int = 0) -> int:
    """Writes ``index``'s layer 0 and ``base`` (its vectors, in id order) to ``device`` in the sector layout from
    ``first_lba``; returns the nodes per block."""
    base = index._rows("base", base)
    if len(base) != index.ntotal:
        raise InvalidArgument(f"base has {len(base)} rows, the index {index.ntotal}")
    nb = node_bytes(index)
    block = device.lba_bytes
    npb = block // nb
    if npb == 0:
        raise InvalidArgument(f"a {nb}-byte node does not fit a {block}-byte block (DiskANN spans blocks; not here)")
    blocks = -(-index.ntotal // npb)
    if first_lba + blocks > device.lbas:
        raise InvalidArgument(f"the layout needs {blocks} blocks from {first_lba}, the device has {device.lbas}")
    offsets, nbrs = index.layer0_csr()
    slots = 2 * index.R
    buf = np.zeros((blocks * npb, nb), dtype=np.uint8)
    vb = base.view(np.uint8).reshape(len(base), -1)
    buf[: len(base), : vb.shape[1]] = vb
    deg = np.diff(offsets).astype("<u4")
    buf[: len(base), vb.shape[1]: vb.shape[1] + 4] = deg.view(np.uint8).reshape(-1, 4)
    ids = np.zeros((len(base), slots), dtype="<u4")
    for v in range(len(base)):
        row = nbrs[offsets[v]: offsets[v + 1]][:slots]
        ids[v, : len(row)] = row
    buf[: len(base), vb.shape[1] + 4: vb.shape[1] + 4 + 4 * slots] = ids.view(np.uint8).reshape(len(base), -1)
    data = np.zeros((blocks, block), dtype=np.uint8)
    data[:, : npb * nb] = buf.reshape(blocks, npb * nb)
    step = max(1, (1 << 20) // block)
    for b in range(0, blocks, step):
        device.write(first_lba + b, data[b: b + step].reshape(-1))
    device.flush()
    return npb


def hot_nodes(index: Index, entry: int, count: int) -> set[int]:
    """The ``count`` nodes nearest ``entry`` in BFS order (DiskANN caches these in DRAM)."""
    offsets, nbrs = index.layer0_csr()
    seen, order, todo = {entry}, [], deque([entry])
    while todo and len(order) < count:
        v = todo.popleft()
        order.append(v)
        for u in nbrs[offsets[v]: offsets[v + 1]]:
            if int(u) not in seen:
                seen.add(int(u))
                todo.append(int(u))
    return set(order)


def search_io(index: Index, q, k: int, ef: int, device, npb: int, cache_nodes: int, first_lba: int = 0,
              depth: int = 256, on_round=None) -> DiskResult:
    """The reads of a CPU + SSD batch search of ``q`` (see the module) with ``cache_nodes`` nodes around the most
    common entry vertex cached in DRAM: device time and counts. ``on_round(now_ns, reads, distances, hops, live)``,
    if given, hears of each round's reads once they are all in, with the host search's work in that round: the
    distances it measured, its expansions (one per query that measured any past its entry round) and the queries
    that measured any; an array's shard records them as host-link transfers and host CPU."""
    k, ef = _int("k", k, 1), _int("ef", ef, 1)
    cache_nodes = _int("cache_nodes", cache_nodes, 0)
    if k > index.ntotal:
        raise InvalidArgument(f"k={k} is larger than the index ({index.ntotal} vectors)")
    trace = _native.ndsearch.lockstep_trace(index._ix, index._rows("q", q), k, ef)
    entry = int(np.bincount(trace[0][1]).argmax())
    cache = hot_nodes(index, entry, cache_nodes) if cache_nodes else set()
    queue = device.queue(depth=depth)
    t0 = device.now_ns
    reads = hits = 0
    for r, (qs, vs) in enumerate(trace):
        blocks = set()
        for qi, v in zip(qs.tolist(), vs.tolist()):
            if v in cache:
                hits += 1
            else:
                blocks.add((qi, v // npb))  # a query reads each block once per round
        for _, b in blocks:
            if queue.in_flight == queue.depth:
                queue.wait()
            queue.submit_read(first_lba + b, 1, None)
        queue.wait_all()
        reads += len(blocks)
        if on_round is not None and blocks:
            live = len(np.unique(qs))
            on_round(device.now_ns, len(blocks), len(qs), live if r else 0, live)
    return DiskResult(device.now_ns - t0, reads, hits, len(trace), npb)
