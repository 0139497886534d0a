"""iSSD (Cho et al., ICS'13, "Active Disk Meets Flash") on nearflash: TPC-H lineitem as 150-byte records in flash
pages, Map/Reduce kernels whose partial results have a real byte encoding (what FMCs ship to controller DRAM),
seeded kernel inputs, and the paper's analytic performance/energy model. The Rust side lives in
``nearflash._native.issd`` (crate ``nearflash-issd``).

Submodules: :mod:`~nearflash.issd.lineitem` (generation, numpy decoding), :mod:`~nearflash.issd.kernels`
(specs, host runs, Map/Reduce steps), :mod:`~nearflash.issd.columnar` (lineitem in columnar pages), :mod:`~nearflash.issd.data` (text, points, pixels),
:mod:`~nearflash.issd.model` (Eq. 1-2, energy, partitioning, Fig. 7-10), :mod:`~nearflash.issd.agent` (the Agent
on a device and the Initiator's strategies), :mod:`~nearflash.issd.sim` (execution-driven studies beside Eq. 1),
and ``experiments`` (``nearflash experiment issd fig7|fig8|fig9|fig10|prototype``).
"""

from nearflash.issd import agent, columnar, data, kernels, lineitem, model, sim
from nearflash.issd.kernels import KERNEL_NAMES, run, spec

__all__ = ["KERNEL_NAMES", "agent", "columnar", "data", "kernels", "lineitem", "model", "run", "sim", "spec"]
