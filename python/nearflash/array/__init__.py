"""Arrays of devices behind one shared host (issue 26): placement, the shared host model, the combiner that replays
every device's host-visible transfers on one array clock, a striped scan on both paths, and the scaling experiment
every system shares (:mod:`nearflash.array.scaling`). docs/arrays.md describes the model, its saturation formula and
what it leaves out."""

from nearflash.array.array import Array, DeviceSpec, RayExecutor, Resumable, Shard, run_shard
from nearflash.array.host import ArrayReport, HostModel, PathCost, ShardResult, Transfer, combine
from nearflash.array.placement import Extent, KeyRange, Replicated, Striped

__all__ = ["Array", "ArrayReport", "DeviceSpec", "RayExecutor", "Extent", "HostModel", "KeyRange", "PathCost",
           "Replicated", "Resumable", "Shard", "ShardResult", "Striped", "Transfer", "combine", "run_shard"]
