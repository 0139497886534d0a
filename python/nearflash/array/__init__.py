"""Arrays of devices behind one shared host (issue 26, first slice): placement, the shared host model, the combiner
that replays every device's host-visible transfers on one array clock, and a striped scan on the host path.
docs/arrays.md describes the model, its saturation formula and what it leaves out."""

from nearflash.array.array import Array, DeviceSpec, RayExecutor, Shard, run_shard
from nearflash.array.host import ArrayReport, HostModel, ShardResult, Transfer, combine
from nearflash.array.placement import Extent, KeyRange, Striped

__all__ = ["Array", "ArrayReport", "DeviceSpec", "RayExecutor", "Extent", "HostModel", "KeyRange", "Shard", "ShardResult",
           "Striped", "Transfer", "combine", "run_shard"]
