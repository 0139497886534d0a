"""nearflash's timing model beside MQSim (Tavakkol et al., FAST'18), configuration for configuration, in one run.

From a nearflash preset this script writes the equivalent MQSim SSD configuration and workload files, runs the same
workloads on both simulators and prints, side by side, IOPS, bandwidth, latency (MQSim reports mean, min and max;
nearflash also p50/p99) and each simulator's own speed (simulated I/Os per wall-clock second of the simulation phase).
Results go to ``out/bench/mqsim_compare.{json,md}``; the Markdown explains every parameter mapping that is not 1:1.

Not a test. MQSim is not part of nearflash: build it yourself (``git clone https://github.com/CMU-SAFARI/MQSim &&
make``) and pass the binary::

    .venv/bin/python benches/mqsim_compare.py --mqsim /path/to/MQSim [--preset cosmos-plus samsung-970pro] [--quick]

Without ``--mqsim`` only the nearflash side runs and the report says the comparison was skipped.

Besides the synthetic workloads, an MQSim ASCII trace (random 4 KiB reads arriving as a Poisson process) is replayed
open loop by MQSim's trace-based flow and by ``nearflash replay`` on the aligned device (``--no-trace`` skips it).

nearflash runs twice per workload: with the preset as it is, and "aligned": with the features MQSim does not model
(firmware path lengths, host driver stack, link latency, ECC decode time, cache read, DRAM staging) neutralised,
the few constants MQSim hard-codes (GC free-block floor, ONFI command cycles) copied, and MQSim's policies chosen
(its transaction scheduler, ``nand.channel_arbitration = mqsim_tsu``; its reads of a fresh device, which map a
never-written page when it is first read, ``ftl.unmapped_read = allocate``; its GC, served first and counting a block
free once erased, ``controller.gc_priority = urgent``, ``ftl.gc_free = erased``), so that the remaining differences are
differences of the timing models themselves.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional

import nearflash

OUT_DIR = Path(__file__).resolve().parent.parent / "out" / "bench"

# --- nearflash parameters in SI units ---------------------------------------------------------------------------

#: Unit strings of the preset files (crates/nearflash-core/src/config/units.rs) scaled to ns, B, B/s, T/s, Hz, 1.
_SCALE = {
    "ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9,
    "B": 1.0, "KiB": 1024.0, "MiB": 1048576.0, "GiB": 1073741824.0, "KB": 1e3, "MB": 1e6, "GB": 1e9,
    "B/s": 1.0, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "KiB/s": 1024.0, "MiB/s": 1048576.0, "GiB/s": 1073741824.0,
    "MT/s": 1e6, "GT/s": 1e9, "Hz": 1.0, "MHz": 1e6, "GHz": 1e9,
    "count": 1.0, "bits": 1.0, "ratio": 1.0, "fraction": 1.0, "%": 0.01,
    "cycles/instruction": 1.0, "instructions": 1.0,
}


def preset_values(preset: str, overrides: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """Every parameter of `preset` (after `overrides`) by dotted path: numbers in ns, B, B/s, T/s, Hz or plain
    ratios; flags as bool; choices as str. Parameters in units this script never reads are kept as strings."""
    out: dict[str, Any] = {}
    for path, value, unit, _ in nearflash.preset_params(preset, overrides or {}):
        if unit == "bool":
            out[path] = value.strip().lower() == "true"
        elif unit in ("enum", "text"):
            out[path] = value.strip().strip('"')
        elif unit in _SCALE:
            out[path] = float(value) * _SCALE[unit]
        else:
            out[path] = value
    return out


def link_payload_bandwidth(p: dict[str, Any]) -> float:
    """Host link payload bandwidth per direction, B/s (as `DeviceConfig::link_bandwidth` derives it)."""
    if "host.link_bandwidth" in p:
        return p["host.link_bandwidth"]
    if p["host.interface"] != "pcie":
        raise ValueError("MQSim's NVMe host interface needs host.interface = pcie")
    gt, coding = {1: (2.5, 0.8), 2: (5.0, 0.8), 3: (8.0, 128 / 130), 4: (16.0, 128 / 130), 5: (32.0, 128 / 130)}.get(
        int(p["host.pcie_gen"]), (64.0, 242 / 256)
    )
    return gt * 1e9 * coding / 8 * p["host.pcie_lanes"] * p["host.link_efficiency"]


# --- MQSim's hard-coded constants (read in MQSim at commit 7ec40e3) ----------------------------------------------

#: ONFI NVDDR2 timing defaults of ONFI_Channel_NVDDR2.h, ns.
ONFI = {"t_CS": 20, "t_WC": 25, "t_WB": 100, "t_RR": 20, "t_ADL": 70, "t_WPST": 6, "t_WPSTH": 15}
#: One-plane read command/address time on the channel: t_CS + 6 t_WC + t_WB + t_RR (ONFI_Channel_NVDDR2.cpp).
MQSIM_READ_CMD_NS = ONFI["t_CS"] + 6 * ONFI["t_WC"] + ONFI["t_WB"] + ONFI["t_RR"]
#: One-plane program command time: t_CS + 6 t_WC + t_ADL + t_WPST + t_WPSTH + t_WB.
MQSIM_PROGRAM_CMD_NS = ONFI["t_CS"] + 6 * ONFI["t_WC"] + ONFI["t_ADL"] + ONFI["t_WPST"] + ONFI["t_WPSTH"] + ONFI["t_WB"]
#: GC starts below max(GC_Exec_Threshold x blocks, 10) free blocks: SSD_Device.cpp passes
#: max_ongoing_gc_reqs_per_plane = 10 and GC_and_WL_Unit_Base raises the threshold to it. Writes to a plane are
#: refused while it has fewer than 10 free blocks, and GC is only triggered by a block allocation, so a plane that
#: starts below 10 never recovers: MQSim deadlocks. Its preconditioning leaves about threshold/2 - 3 free blocks
#: (Allocate_address_for_preconditioning fills blocks - threshold/2; three write frontiers are open), hence the
#: smallest threshold that runs is 26; we use 28.
MQSIM_GC_FLOOR = 10
MQSIM_GC_MIN = 28
#: PCIe TLP framing of PCIe_Link.h: 128 B max payload, 20 B header + 6 B DLLP + 2 B PHY per TLP.
TLP_PAYLOAD, TLP_OVERHEAD = 128, 28
#: Response-time log period, ns. MQSim's own IOPS and bandwidth divide by the simulated time in *whole seconds*
#: (integer division in IO_Flow_Base::Report_results_in_XML: infinite below 1 s, up to 2x high below 2 s), so the
#: end time is taken from the log instead. MQSim writes a line at the first completion more than one period after
#: the last line, holding the mean response time (whole us) of the requests completed since: with a 1 ns period
#: that is a line per completion (completions less than 1 ns apart share one, their mean), which gives the
#: response-time percentiles MQSim does not report, and the last line is the last completion.
LOG_PERIOD_NS = 1


def channel_encoding(bytes_per_s: float) -> tuple[int, int, float]:
    """MQSim moves X bytes in (X / width / 2) x 2 floor(1000 / rate) ns (NVDDR2DataOutTransferTime with integer
    t_RC = t_DSC), i.e. width / floor(1000 / rate) B/ns. Returns (width in bytes, rate in MT/s, relative error) of
    the closest encodable pair, preferring the narrowest bus."""
    target = bytes_per_s / 1e9
    best = None
    for width in range(1, 17):
        k = max(1, round(width / target))
        for kk in (k - 1, k, k + 1):
            if kk < 1:
                continue
            rate = 1000 // kk
            if rate < 1 or 1000 // rate != kk:
                continue
            err = abs(width / kk - target) / target
            if best is None or err < best[2] - 1e-12:
                best = (width, rate, err)
    assert best is not None
    return best


# --- the alignment: nearflash features MQSim lacks, neutralised ------------------------------------------------


@dataclass
class Setting:
    key: str
    value: Any
    reason: str


#: nearflash's channel arbitration in the aligned runs (set by --arbitration).
ARBITRATION = "mqsim_tsu"


def alignment(p: dict[str, Any]) -> list[Setting]:
    """nearflash overrides that make the device describable in MQSim; each with the reason."""
    gc = max(MQSIM_GC_MIN, int(p["ftl.gc_start_free_blocks"]))
    s = [
        Setting("controller.fw_read_instructions", 0, "MQSim charges no firmware execution time per command"),
        Setting("controller.fw_write_instructions", 0, "as above"),
        Setting("controller.fw_other_instructions", 0, "as above"),
        Setting("controller.fw_page_instructions", 0, "MQSim's TSU issues flash transactions without a CPU cost"),
        Setting("ftl.map_instructions", 0, "MQSim's mapping lookups take no time when the table is in DRAM"),
        Setting("host.kernel_submit", "0ns", "MQSim's synthetic generator submits without a host software stack"),
        Setting("host.kernel_complete", "0ns", "as above"),
        Setting("host.polled_submit", "0ns", "as above"),
        Setting("host.polled_complete", "0ns", "as above"),
        Setting("host.link_latency", "0ns", "MQSim's PCIe link charges serialisation time only, no flight latency"),
        Setting("ecc.t_decode", "0ns", "MQSim models no ECC decoder"),
        Setting("ecc.rber", 0, "MQSim models no bit errors"),
        Setting("nand.cache_read", False, "an MQSim die stays busy until its page register is read out"),
        Setting(
            "nand.t_cmd",
            f"{MQSIM_READ_CMD_NS}ns",
            f"MQSim's fixed NVDDR2 read command time (t_CS + 6 t_WC + t_WB + t_RR = {MQSIM_READ_CMD_NS} ns); its "
            f"program command takes {MQSIM_PROGRAM_CMD_NS} ns, nearflash uses one t_cmd for both",
        ),
        Setting(
            "controller.dram_bandwidth",
            "1000GB/s",
            "nearflash stages read data through controller DRAM (2 passes); MQSim moves read data from flash to the "
            "host without a DRAM model, so the DRAM is made free on both sides (MQSim's data-cache DRAM likewise)",
        ),
        Setting(
            "ftl.gc_start_free_blocks",
            gc,
            f"MQSim cannot run below {MQSIM_GC_MIN} free blocks per plane: it refuses writes to a plane with fewer than "
            f"{MQSIM_GC_FLOOR} free blocks and its preconditioning leaves about threshold/2 - 3, so a lower threshold "
            f"deadlocks it; it collects one victim per block allocation while below the threshold",
        ),
        Setting("ftl.gc_stop_free_blocks", gc, "MQSim has no separate stop threshold: it collects back to the start one"),
        Setting(
            "controller.gc_priority",
            "urgent",
            "MQSim's non-preemptible GC (Preemptible_GC_Enabled false: GC_is_in_urgent_mode always true) has its TSU "
            "serve a chip's GC transactions before its user transactions (TSU_OutOfOrder)",
        ),
        Setting(
            "ftl.gc_free",
            "erased",
            "MQSim returns a victim to its plane's free pool when its erase has ended (Add_erased_block_to_pool in "
            "GC_and_WL_Unit_Base::handle_transaction_serviced_signal_from_PHY); its GC threshold and write frontiers "
            "see erased blocks only",
        ),
        Setting(
            "ftl.unmapped_read",
            "allocate",
            "MQSim's page-level FTL gives a never-written logical page a physical page at its plane's write frontier "
            "when it is first read and reads it from flash (Address_Mapping_Unit_Page_Level::"
            "online_create_entry_for_reads); the aligned read workloads therefore run, as MQSim's, on a fresh device",
        ),
        Setting(
            "nand.channel_arbitration",
            ARBITRATION,
            "MQSim serves waiting data-outs before it sends a new command and books command cycles on the channel "
            "(NVM_PHY_ONFI_NVDDR2::Execute_simulator_event), and its scheduler sends a command only on a "
            "channel-idle event, when no data-out waits (TSU_Base::handle_channel_idle_signal); mqsim_tsu is that "
            "policy (--arbitration data_first books the command cycles only, interleave keeps nearflash's default)",
        ),
    ]
    return s


def aligned_overrides(p: dict[str, Any]) -> dict[str, Any]:
    return {a.key: a.value for a in alignment(p)}


# --- MQSim configuration ----------------------------------------------------------------------------------------


@dataclass
class Mapped:
    """One MQSim parameter: its value and, when it is not a 1:1 copy, how it was derived."""

    name: str
    value: Any
    note: str = ""


def _fmt_xml(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:.6f}"
    return str(v)


def mqsim_device(p: dict[str, Any], io_queue_depth: int, precondition: bool) -> tuple[list[Mapped], list[Mapped]]:
    """MQSim's Host_Parameter_Set and Device_Parameter_Set (with Flash_Parameter_Set) for nearflash values `p`;
    `precondition` turns MQSim's steady-state preconditioning on (write workloads)."""
    cell = p["nand.cell_type"].upper()
    if cell not in ("SLC", "MLC", "TLC"):
        raise ValueError(f"MQSim models SLC, MLC and TLC only, not {cell}")
    width, rate, err = channel_encoding(p["nand.channel_rate"] * p["nand.channel_width"] / 8)
    lanes = int(p["host.pcie_lanes"])
    payload = link_payload_bandwidth(p)
    lane_gbps = payload / lanes * (TLP_PAYLOAD + TLP_OVERHEAD) / TLP_PAYLOAD / 1e9
    blocks = int(p["nand.blocks_per_plane"])
    gc = int(p["ftl.gc_start_free_blocks"])
    t_read = p["nand.t_read"]
    read_lsb = p.get("nand.t_read_lsb", t_read)
    read_msb = p.get("nand.t_read_msb", t_read)
    read_csb = p.get("nand.t_read_csb", t_read)
    t_prog = p["nand.t_prog"]
    prog_lsb, prog_csb, prog_msb = (p.get(f"nand.t_prog_{k}", t_prog) for k in ("lsb", "csb", "msb"))
    demand = p["ftl.mapping"] == "demand"
    host = [
        Mapped(
            "PCIe_Lane_Bandwidth",
            round(lane_gbps, 6),
            f"GB/s per lane chosen so that MQSim's payload rate (128 B TLPs + 28 B framing) equals nearflash's "
            f"{payload / 1e9:.3f} GB/s (PCIe gen {int(p['host.pcie_gen'])} x{lanes} x link_efficiency "
            f"{p['host.link_efficiency']})",
        ),
        Mapped("PCIe_Lane_Count", lanes),
        Mapped("SATA_Processing_Delay", 400000, "unused with NVMe"),
        Mapped("Enable_ResponseTime_Logging", True, "its log's last time stamp is the simulated end time (see IOPS)"),
        Mapped("ResponseTime_Logging_Period_Length", LOG_PERIOD_NS, "ns"),
    ]
    flash = [
        Mapped("Flash_Technology", cell),
        Mapped("CMD_Suspension_Support", "NONE", "off in both: nand.suspend = none (the presets' default)"),
        Mapped("Page_Read_Latency_LSB", round(read_lsb)),
        Mapped("Page_Read_Latency_CSB", round(read_csb)),
        Mapped("Page_Read_Latency_MSB", round(read_msb)),
        Mapped("Page_Program_Latency_LSB", round(prog_lsb)),
        Mapped("Page_Program_Latency_CSB", round(prog_csb)),
        Mapped("Page_Program_Latency_MSB", round(prog_msb)),
        Mapped("Block_Erase_Latency", round(p["nand.t_erase"])),
        Mapped("Block_PE_Cycles_Limit", int(p["nand.endurance"])),
        Mapped("Suspend_Erase_Time", 700000, "unused: suspension off"),
        Mapped("Suspend_Program_Time", 100000, "unused: suspension off"),
        Mapped("Die_No_Per_Chip", int(p["nand.dies_per_chip"])),
        Mapped("Plane_No_Per_Die", int(p["nand.planes_per_die"])),
        Mapped("Block_No_Per_Plane", blocks),
        Mapped("Page_No_Per_Block", int(p["nand.pages_per_block"])),
        Mapped("Page_Capacity", int(p["nand.page_size"])),
        Mapped("Page_Metadat_Capacity", int(p["nand.oob_size"])),
    ]
    dev = [
        Mapped("Seed", 321),
        Mapped(
            "Enabled_Preconditioning",
            precondition,
            "on for write workloads (MQSim's analytic steady state; nearflash writes its fill); off for reads: MQSim "
            "serves a read of a never-written page from flash anyway (it maps the page on the fly), so reads need no "
            "fill, while its preconditioning of a 512 GiB device at 90% takes minutes (and stops on samsung-970pro); "
            "aligned nearflash reads a fresh device the same way (ftl.unmapped_read = allocate)",
        ),
        Mapped("Memory_Type", "FLASH"),
        Mapped("HostInterface_Type", "NVME"),
        Mapped("IO_Queue_Depth", io_queue_depth, "SQ/CQ capacity: nvme.max_queue_depth"),
        Mapped("Queue_Fetch_Size", io_queue_depth, "nearflash fetches every submitted SQE; no fetch window"),
        Mapped("Caching_Mechanism", "ADVANCED"),
        Mapped("Data_Cache_Sharing_Mode", "SHARED"),
        Mapped("Data_Cache_Capacity", int(p["ftl.write_buffer"]), "ftl.write_buffer"),
        Mapped("Data_Cache_DRAM_Row_Size", 8192),
        # Bandwidth = 2 x burst x rate (estimate_dram_access_time halves the burst count once more for DDR).
        Mapped("Data_Cache_DRAM_Data_Rate", 8000, "with 64 B bursts and zero tRCD/tCL/tRP: ~1 TB/s, as free as the aligned nearflash DRAM"),
        Mapped("Data_Cache_DRAM_Data_Busrt_Size", 64),
        Mapped("Data_Cache_DRAM_tRCD", 0),
        Mapped("Data_Cache_DRAM_tCL", 0),
        Mapped("Data_Cache_DRAM_tRP", 0),
        Mapped("Address_Mapping", "PAGE_LEVEL", "MQSim maps flash-page-sized LPAs; nearflash maps sectors (see below)"),
        Mapped("Ideal_Mapping_Table", not demand, "ftl.mapping = dram: the whole map is in DRAM"),
        Mapped("CMT_Capacity", int(p["ftl.cmt_size"]), "ftl.cmt_size (used only with ftl.mapping = demand)"),
        Mapped("CMT_Sharing_Mode", "SHARED"),
        Mapped("Plane_Allocation_Scheme", p["ftl.allocation"], "same letters, first varies fastest in both"),
        Mapped("Transaction_Scheduling_Policy", "OUT_OF_ORDER", "Sprinkler; nearflash's per-die queues with "
               "controller.flash_order = read_first, one queue priority in both"),
        Mapped("Overprovisioning_Ratio", round(p["ftl.over_provisioning"], 6), "both: fraction of physical pages hidden"),
        Mapped(
            "GC_Exec_Threshold",
            round((gc + 0.5) / blocks, 8),
            f"(gc_start_free_blocks + 0.5) / blocks_per_plane, which MQSim truncates back to {gc} blocks",
        ),
        Mapped("GC_Block_Selection_Policy", {"greedy": "GREEDY", "rga": "RGA", "random": "RANDOM", "fifo": "FIFO"}[p["ftl.gc_policy"]],
               f"ftl.gc_policy = {p['ftl.gc_policy']} (MQSim's RGA set size is log2(blocks per plane); ftl.gc_rga_d = "
               f"{p['ftl.gc_rga_d']})"),
        Mapped("Use_Copyback_for_GC", bool(p["ftl.gc_copyback"])),
        Mapped("Preemptible_GC_Enabled", False, "MQSim's GC first on its chip; aligned nearflash: controller.gc_priority "
               "= urgent (the preset run keeps equal; see Scheduling below)"),
        Mapped("GC_Hard_Threshold", 0.005, "unused: preemptible GC off"),
        Mapped("Dynamic_Wearleveling_Enabled", False, "nearflash has no wear-levelling policy"),
        Mapped("Static_Wearleveling_Enabled", False, "as above"),
        Mapped("Static_Wearleveling_Threshold", 100),
        Mapped("Preferred_suspend_erase_time_for_read", 700000, "unused: suspension off"),
        Mapped("Preferred_suspend_erase_time_for_write", 700000, "unused: suspension off"),
        Mapped("Preferred_suspend_write_time_for_read", 100000, "unused: suspension off"),
        Mapped("Flash_Channel_Count", int(p["nand.channels"])),
        Mapped(
            "Flash_Channel_Width",
            width,
            f"bytes; with Channel_Transfer_Rate {rate} MT/s MQSim moves {width}/floor(1000/{rate}) B/ns = "
            f"nearflash's {p['nand.channel_rate'] / 1e6:g} MT/s x {int(p['nand.channel_width'])} bit"
            + (f" (off by {err:.2%})" if err > 1e-9 else " exactly"),
        ),
        Mapped("Channel_Transfer_Rate", rate, "see Flash_Channel_Width: MQSim truncates 1000/rate to whole ns"),
        Mapped("Chip_No_Per_Channel", int(p["nand.chips_per_channel"])),
        Mapped("Flash_Comm_Protocol", "NVDDR2"),
    ]
    return host, dev + [Mapped("Flash_Parameter_Set", flash)]


def device_xml(host: list[Mapped], dev: list[Mapped]) -> str:
    root = ET.Element("Execution_Parameter_Set")
    for tag, items in (("Host_Parameter_Set", host), ("Device_Parameter_Set", dev)):
        sec = ET.SubElement(root, tag)
        for m in items:
            e = ET.SubElement(sec, m.name)
            if isinstance(m.value, list):
                for sub in m.value:
                    ET.SubElement(e, sub.name).text = _fmt_xml(sub.value)
            else:
                e.text = _fmt_xml(m.value)
    ET.indent(root)
    return '<?xml version="1.0" encoding="us-ascii"?>\n' + ET.tostring(root, encoding="unicode")


# --- workloads --------------------------------------------------------------------------------------------------


@dataclass
class Workload:
    name: str
    rw: str  # nearflash bench pattern: randread, read, randwrite
    bs: int
    qd: int
    ios: int
    #: Fraction of the logical space filled before the run, and how.
    fill: float
    fill_pattern: str = "sequential"
    #: Fraction of the logical space the run touches (from LBA 0).
    span: float = 1.0
    note: str = ""

    @property
    def reads(self) -> bool:
        return "read" in self.rw


def workloads(quick: bool) -> list[Workload]:
    k = 10 if quick else 1
    return [
        Workload("4K randread QD64", "randread", 4096, 64, 400_000 // k, 0.9, span=0.9),
        Workload("128K seqread QD32", "read", 131072, 32, 60_000 // k, 0.9, span=0.9),
        Workload(
            "4K randwrite QD32 (GC steady state)", "randwrite", 4096, 32, 1_000_000 // k, 0.9, "random",
            note="MQSim programs a whole flash page per 4 KiB write (page-level LPAs, update reads); nearflash packs sectors",
        ),
        Workload(
            "page-size randwrite QD32 (GC steady state)", "randwrite", 0, 32, 250_000 // k, 0.9, "random",
            note="one flash page per write: both simulators map and program it the same way",
        ),
        Workload(
            "128K seqwrite QD32 (GC steady state)", "write", 131072, 32, 100_000 // k, 0.9, "random",
            note="whole pages in logical order over a device filled at random: GC finds the victims the random fill left",
        ),
    ]


#: Overrides of both simulators' device for the write workloads (`--write-device`): MQSim's analytic
#: preconditioning of a 512 GiB device at 90% takes 3.5-7 minutes and 4.6 GB per run, so the writes run on a device
#: with a quarter of the pages per block (same geometry otherwise: channels, dies, planes, blocks, page size, OP, GC
#: thresholds), which keeps the whole write comparison to a few minutes. MQSim (7ec40e3) survives it for the
#: sequential writes only: for the random ones its preconditioning stops ("It is not possible to assign PPA to all
#: LPAs in Allocate_address_for_preconditioning!"); `--write-device` with nothing after it runs them on the preset's
#: own size, which MQSim completes for page-size writes (docs/validation.md).
WRITE_DEVICE = {"nand.pages_per_block": 64}


def resolve(w: Workload, p: dict[str, Any]) -> Workload:
    """Fills in a page-sized block size."""
    if w.bs == 0:
        return Workload(**{**asdict(w), "bs": int(p["nand.page_size"])})
    return w


#: MQSim's workload seed in the first (or only) run; `--sweep-seeds` runs use the following ones.
MQSIM_SEED = 798


def flow_head(p: dict[str, Any]) -> list[tuple[str, Any]]:
    """The parameters every MQSim flow starts with: its class, caching mode, and the whole array as its resources."""
    ids = lambda n: ",".join(str(i) for i in range(int(n)))  # noqa: E731
    return [
        ("Priority_Class", "HIGH"),
        ("Device_Level_Data_Caching_Mode", "WRITE_CACHE"),
        ("Channel_IDs", ids(p["nand.channels"])),
        ("Chip_IDs", ids(p["nand.chips_per_channel"])),
        ("Die_IDs", ids(p["nand.dies_per_chip"])),
        ("Plane_IDs", ids(p["nand.planes_per_die"])),
    ]


def scenario_xml(tag: str, flow: list[tuple[str, Any]]) -> str:
    """An MQSim workload file of one scenario with one flow (`tag`: its parameter set)."""
    root = ET.Element("MQSim_IO_Scenarios")
    f = ET.SubElement(ET.SubElement(root, "IO_Scenario"), tag)
    for k, v in flow:
        ET.SubElement(f, k).text = str(v)
    ET.indent(root)
    return '<?xml version="1.0" encoding="us-ascii"?>\n' + ET.tostring(root, encoding="unicode")


def workload_xml(w: Workload, p: dict[str, Any], seed: int = MQSIM_SEED) -> str:
    sectors = w.bs // 512
    flow = flow_head(p) + [
        ("Initial_Occupancy_Percentage", max(1, round(w.fill * 100))),
        ("Working_Set_Percentage", max(1, round(w.span * 100))),
        ("Synthetic_Generator_Type", "QUEUE_DEPTH"),
        ("Read_Percentage", 100 if w.reads else 0),
        ("Address_Distribution", "RANDOM_UNIFORM" if w.rw.startswith("rand") else "STREAMING"),
        ("Percentage_of_Hot_Region", 0),
        ("Generated_Aligned_Addresses", "true"),
        ("Address_Alignment_Unit", sectors),
        ("Request_Size_Distribution", "FIXED"),
        ("Average_Request_Size", sectors),
        ("Variance_Request_Size", 0),
        ("Seed", seed),
        ("Average_No_of_Reqs_in_Queue", w.qd),
        ("Intensity", 32768),
        ("Stop_Time", 0),
        ("Total_Requests_To_Generate", w.ios),
    ]
    return scenario_xml("IO_Flow_Parameter_Set_Synthetic", flow)


# --- running ----------------------------------------------------------------------------------------------------


def prepared_device(preset: str, overrides: dict[str, Any], w: Workload, data: bool = False, seed: int = 1):
    """A fresh in-memory device preconditioned for `w` (not at all for a read workload on a device whose reads of
    never-written LBAs allocate pages, as MQSim's read workloads run); returns it, the LBA span `w` runs over, and the
    seconds spent."""
    dev = nearflash.Device(None, preset=preset, materialise=data, seed=seed, overrides=overrides)
    t = time.perf_counter()
    if not (w.reads and overrides.get("ftl.unmapped_read") == "allocate"):
        dev.precondition(w.fill, w.fill_pattern, 1.0, seed)
    nlb = w.bs // dev.lba_bytes
    return dev, int(dev.lbas * w.span) // nlb * nlb, time.perf_counter() - t


def bench_nearflash(dev: nearflash.Device, w: Workload, span: int, data: bool = False, seed: int = 1) -> dict[str, Any]:
    """Runs `w` over LBAs [0, span); the wall time is the workload loop only."""
    r = dev.bench(w.rw, w.bs, w.qd, 1, w.ios, (0, span), seed, data)
    rep = r["report"]
    op = rep.op("read" if w.reads else "write")
    lat = op.latency_us
    return {
        "iops": op.iops,
        "bandwidth_MBps": op.bandwidth_mb_s,
        "mean_us": lat["mean_us"],
        "p50_us": lat["p50_us"],
        "p99_us": lat["p99_us"],
        "min_us": lat["min_us"],
        "max_us": lat["max_us"],
        "ios": r["ios"],
        "sim_wall_s": r["wall_s"],
        "sim_ios_per_s": r["sim_ios_per_s"],
        "waf": rep.waf,
        "utilisation": {k: round(v, 3) for k, v in rep.utilisation.items()},
        "nand": rep.nand,
        "ftl": {k: v for k, v in rep.ftl.items() if isinstance(v, (int, float))},
    }


def run_nearflash(preset: str, overrides: dict[str, Any], w: Workload, data: bool = False, seed: int = 1) -> dict[str, Any]:
    dev, span, pre_s = prepared_device(preset, overrides, w, data, seed)
    return {**bench_nearflash(dev, w, span, data, seed), "precondition_s": pre_s}


def run_mqsim(binary: Path, dev_xml: str, wl_xml: str, workdir: Path, timeout: float) -> dict[str, Any]:
    """Runs MQSim once in `workdir`. Its simulation-phase speed is timed from its progress lines (printed at every 5%
    of serviced requests): the requests between the 5% and the 100% line over the wall time between them."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "ssdconfig.xml").write_text(dev_xml)
    (workdir / "workload.xml").write_text(wl_xml)
    for stale in ("workload_scenario_1.xml", "workload.IO_Flow.No_0.log"):
        (workdir / stale).unlink(missing_ok=True)
    t0 = time.perf_counter()
    marks: dict[int, float] = {}
    proc = subprocess.Popen(
        [str(binary), "-i", "ssdconfig.xml", "-w", "workload.xml"],
        cwd=workdir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    log = []
    assert proc.stdout is not None
    for line in proc.stdout:
        now = time.perf_counter()
        log.append(line)
        if "% progress in" in line:
            marks.setdefault(int(line.split("]")[-1].split("%")[0]), now)
        if now - t0 > timeout:
            proc.kill()
            raise TimeoutError(f"MQSim ran over {timeout:.0f} s")
    proc.wait()
    total_s = time.perf_counter() - t0
    out = workdir / "workload_scenario_1.xml"
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"MQSim failed (exit {proc.returncode}) in {workdir}:\n" + "".join(log[-20:]))
    root = ET.parse(out).getroot()
    flow = root.find("Host/Host.IO_Flow")
    if flow is None:
        raise RuntimeError(f"no Host.IO_Flow in {out}")
    a = {e.tag: e.text for e in flow}
    requests = float(a["Request_Count"])
    end_s, samples = response_log(workdir / "workload.IO_Flow.No_0.log")
    lo = min((k for k in marks if k >= 5), default=None)
    hi = max(marks, default=None)
    speed = None
    if lo is not None and hi is not None and hi > lo and marks[hi] > marks[lo]:
        speed = requests * (hi - lo) / 100 / (marks[hi] - marks[lo])
    ftl = root.find(".//SSDDevice.FTL")
    return {
        "iops": requests / end_s,
        "bandwidth_MBps": float(a["Bytes_Transferred"]) / end_s / 1e6,
        "mean_us": float(a["Device_Response_Time"]),
        "min_us": float(a["Min_Device_Response_Time"]),
        "max_us": float(a["Max_Device_Response_Time"]),
        "p50_us": percentile(samples, 0.50),
        "p99_us": percentile(samples, 0.99),
        "log_lines": len(samples),
        "mqsim_reported_iops": a["IOPS"],
        "ios": requests,
        "simulated_s": end_s,
        "sim_ios_per_s": speed,
        "process_wall_s": total_s,
        "ftl": {k: float(v) for k, v in (ftl.attrib.items() if ftl is not None else []) if k != "Name"},
    }


def response_log(log: Path) -> tuple[float, list[int]]:
    """MQSim's response-time log (see LOG_PERIOD_NS): the last time stamp in seconds, and the response times (us)
    of its lines."""
    last = None
    samples: list[int] = []
    with open(log) as f:
        next(f)  # header
        for line in f:
            if line.strip():
                last = line
                samples.append(int(line.split()[1]))
    if last is None:
        raise RuntimeError(f"{log} has no samples: the run was shorter than one logging period")
    return float(last.split()[0]) * 1e-6, samples


def percentile(values: list[int], q: float) -> Optional[float]:
    """Nearest-rank `q` quantile (the smallest value with at least a fraction q of the values at or below it)."""
    if not values:
        return None
    v = sorted(values)
    return float(v[min(len(v), max(1, math.ceil(q * len(v)))) - 1])


def median_by(runs: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """The run whose `key` is the median (the other figures are deterministic)."""
    vals = sorted((r for r in runs if r.get(key) is not None), key=lambda r: r[key])
    if not vals:
        return runs[0]
    med = dict(vals[len(vals) // 2])
    med[f"{key}_runs"] = [r[key] for r in runs]
    return med


# --- an MQSim trace, replayed by both ----------------------------------------------------------------------------


@dataclass
class TraceRun:
    """Random 4 KiB reads arriving as a Poisson process at `rate` per second (open loop), over the first `span` of
    the logical space: written as an MQSim ASCII trace, replayed by MQSim (a trace-based flow) and by
    `nearflash replay` (aligned device, fresh, as the read workloads run)."""

    name: str
    rate: float
    requests: int
    span: float = 0.9
    seed: int = 5


def trace_runs(quick: bool) -> list[TraceRun]:
    k = 5 if quick else 1
    return [TraceRun("4K random reads at 100k/s", 100_000, 200_000 // k),
            TraceRun("4K random reads at 200k/s", 200_000, 200_000 // k)]


def write_mqsim_trace(t: TraceRun, p: dict[str, Any], path: Path) -> None:
    """MQSim's ASCII trace (ns, device, start sector, sectors, type 1 = read), aligned to 4 KiB."""
    import random

    rng = random.Random(t.seed)
    slots = int(p["nand.channels"] * p["nand.chips_per_channel"] * p["nand.dies_per_chip"] * p["nand.planes_per_die"]
                * p["nand.blocks_per_plane"] * p["nand.pages_per_block"] * p["nand.page_size"]
                * (1 - p["ftl.over_provisioning"]) * t.span) // 4096
    now = 0.0
    with open(path, "w") as f:
        for _ in range(t.requests):
            now += rng.expovariate(t.rate) * 1e9
            f.write(f"{int(now)} 0 {rng.randrange(slots) * 8} 8 1\n")


def trace_workload_xml(path: Path, p: dict[str, Any]) -> str:
    flow = flow_head(p) + [
        ("Initial_Occupancy_Percentage", 90),
        ("File_Path", str(path)),
        ("Percentage_To_Be_Executed", 100),
        ("Relay_Count", 1),
        ("Time_Unit", "NANOSECOND"),
    ]
    return scenario_xml("IO_Flow_Parameter_Set_Trace_Based", flow)


def replay_nearflash(preset: str, ov: dict[str, Any], path: Path) -> dict[str, Any]:
    """`nearflash replay` of an MQSim trace on a fresh aligned device (reads of never-written pages map them, as in
    MQSim); IOPS over the first arrival to the last completion, device response time from submission."""
    from nearflash.flows import DeviceSetup, replay

    r = replay(path, DeviceSetup(preset=preset, overrides=ov, fill="none"))
    f = r["flow"]
    lat = f["all"]["device_response_time"]
    return {
        "iops": f["all"]["iops"], "bandwidth_MBps": f["all"]["bandwidth_mb_s"], "mean_us": lat["mean_us"],
        "p50_us": lat["p50_us"], "p99_us": lat["p99_us"], "min_us": lat["min_us"], "max_us": lat["max_us"],
        "ios": f["all"]["requests"], "sim_wall_s": r["wall_s"], "sim_ios_per_s": r["sim_requests_per_s"],
    }


def compare_traces(preset: str, aligned: dict[str, Any], ov: dict[str, Any], mqsim: Optional[Path], quick: bool,
                   timeout: float, keep: Optional[Path]) -> list[dict[str, Any]]:
    dxml = device_xml(*mqsim_device(aligned, int(aligned["nvme.max_queue_depth"]), precondition=False))
    rows = []
    for t in trace_runs(quick):
        work = Path(tempfile.mkdtemp(prefix="mqsim-trace-")) if keep is None else keep / f"{preset}/trace-{int(t.rate)}"
        work.mkdir(parents=True, exist_ok=True)
        path = work / "reads.trace"
        write_mqsim_trace(t, aligned, path)
        row: dict[str, Any] = {"trace": asdict(t), "nearflash": replay_nearflash(preset, ov, path)}
        if mqsim is not None:
            try:
                row["MQSim"] = run_mqsim(mqsim, dxml, trace_workload_xml(path, aligned), work / "mqsim", timeout)
                row["ratios"] = ratios(row["nearflash"], row["MQSim"])
            except (RuntimeError, TimeoutError) as e:
                row["mqsim_error"] = str(e).strip().splitlines()[-1]
        n, m = row["nearflash"], row.get("MQSim")
        print(f"    trace {t.name}: nearflash {n['iops']:>10,.0f} IOPS mean {n['mean_us']:.1f} us"
              + (f" | MQSim {m['iops']:>10,.0f} IOPS mean {m['mean_us']:.1f} us" if m else ""), flush=True)
        rows.append(row)
    return rows


# --- report -----------------------------------------------------------------------------------------------------


def _g(v: Any, digits: int = 4) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if v != 0 and (abs(v) >= 1e6 or abs(v) < 1e-2):
            return f"{v:.3g}"
        return f"{v:,.{digits}g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def markdown(result: dict[str, Any]) -> str:
    lines = ["# nearflash vs MQSim, same device, same workloads, same run", ""]
    lines += [f"Run {result['when']} on `{result['host']}`; MQSim: {result['mqsim'] or 'not given (comparison skipped)'}.", ""]
    for pr in result["presets"]:
        lines += [f"## {pr['preset']}", ""]
        lines += ["| workload | simulator | IOPS | MB/s | mean us | p50 us | p99 us | min us | max us | sim I/Os per wall s |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for w in pr["workloads"]:
            for label in ("nearflash (preset)", "nearflash (aligned)", "MQSim"):
                r = w["results"].get(label)
                if r is None:
                    continue
                lines.append(
                    f"| {w['workload']['name']} | {label} | {_g(r['iops'])} | {_g(r['bandwidth_MBps'])} | {_g(r['mean_us'])} | "
                    f"{_g(r.get('p50_us'))} | {_g(r.get('p99_us'))} | {_g(r['min_us'])} | {_g(r['max_us'])} | {_g(r['sim_ios_per_s'])} |"
                )
            if "ratios" in w:
                q = w["ratios"]
                lines.append(
                    f"| | aligned / MQSim | {_g(q['iops'], 3)} | {_g(q['bandwidth'], 3)} | {_g(q['mean_latency'], 3)} | "
                    f"{_g(q.get('p50_latency'), 3)} | {_g(q.get('p99_latency'), 3)} | | | "
                    f"{_g(q['sim_speed'], 3)} |"
                )
        lines.append("")
        for w in pr["workloads"]:
            if w["workload"].get("note"):
                lines.append(f"- *{w['workload']['name']}*: {w['workload']['note']}.")
            if w.get("device_overrides"):
                lines.append(f"- *{w['workload']['name']}*: both simulators on the preset with {w['device_overrides']} "
                             "(a smaller device, so that MQSim's preconditioning takes seconds, not minutes).")
            if w.get("mqsim_error"):
                lines.append(f"- *{w['workload']['name']}*: MQSim aborted: `{w['mqsim_error']}`.")
        if pr.get("qd_sweep"):
            lines += ["", "### 4K random reads by queue depth (aligned nearflash vs MQSim)", "",
                      "| QD | IOPS nearflash / MQSim | mean us | p50 us | p99 us | ratios IOPS / p50 / p99 |",
                      "|---|---|---|---|---|---|"]
            for row in pr["qd_sweep"]:
                n, m = row["nearflash"], row.get("MQSim") or {}
                q = ratios(n, m) if m else {}
                pair = lambda k: f"{_g(n.get(k))} / {_g(m.get(k))}"  # noqa: E731
                lines.append(
                    f"| {row['qd']} | {pair('iops')} | {pair('mean_us')} | {pair('p50_us')} | {pair('p99_us')} | "
                    f"{_g(q.get('iops'), 3)} / {_g(q.get('p50_latency'), 3)} / {_g(q.get('p99_latency'), 3)} |"
                )
        if pr.get("qd_sweep_seeds"):
            lines += seed_spread(pr["qd_sweep_seeds"])
        if pr.get("traces"):
            lines += ["", "### An MQSim trace replayed: `nearflash replay` (aligned) vs MQSim's trace-based flow", "",
                      "| trace | requests | IOPS nearflash / MQSim | mean us | p50 us | p99 us | ratios IOPS / mean / p50 / p99 |",
                      "|---|---|---|---|---|---|---|"]
            for row in pr["traces"]:
                n, m = row["nearflash"], row.get("MQSim") or {}
                q = row.get("ratios", {})
                pair = lambda k: f"{_g(n.get(k))} / {_g(m.get(k))}"  # noqa: E731
                lines.append(
                    f"| {row['trace']['name']} | {row['trace']['requests']:,} | {pair('iops')} | {pair('mean_us')} | "
                    f"{pair('p50_us')} | {pair('p99_us')} | {_g(q.get('iops'), 3)} / {_g(q.get('mean_latency'), 3)} / "
                    f"{_g(q.get('p50_latency'), 3)} / {_g(q.get('p99_latency'), 3)} |")
        lines += ["", "### nearflash overrides for the aligned run", "", "| parameter | value | why |", "|---|---|---|"]
        lines += [f"| `{s['key']}` | {s['value']} | {s['reason']} |" for s in pr["alignment"]]
        lines += ["", "### MQSim parameters derived from the preset (those that are not plain copies)", "",
                  "| MQSim parameter | value | derivation |", "|---|---|---|"]
        for m in pr["mqsim_params"]:
            if m["note"]:
                lines.append(f"| `{m['name']}` | {m['value']} | {m['note']} |")
        lines.append("")
    lines += ["## Model differences that remain", ""] + [f"- {d}" for d in MODEL_DIFFERENCES] + [""]
    return "\n".join(lines)


def seed_spread(sweeps: list[list[dict[str, Any]]]) -> list[str]:
    """Markdown: per depth, the lowest and highest ratio over the seeds' sweeps, and each seed's p99s."""
    lines = ["", f"### The sweep over {len(sweeps)} address seeds (ratio nearflash / MQSim, lowest-highest)", "",
             "| QD | IOPS | p50 | p99 | nearflash p99 us by seed | MQSim p99 us by seed |", "|---|---|---|---|---|---|"]
    for i, row in enumerate(sweeps[0]):
        pairs = [(s[i]["nearflash"], s[i]["MQSim"]) for s in sweeps if s[i].get("MQSim")]
        if not pairs:
            continue
        span = lambda k: f"{min(n[k] / m[k] for n, m in pairs):.3f}-{max(n[k] / m[k] for n, m in pairs):.3f}"  # noqa: E731
        p99s = lambda j: ", ".join(_g(p[j]["p99_us"]) for p in pairs)  # noqa: E731
        lines.append(f"| {row['qd']} | {span('iops')} | {span('p50_us')} | {span('p99_us')} | {p99s(0)} | {p99s(1)} |")
    return lines


MODEL_DIFFERENCES = [
    "Mapping granularity: MQSim's page-level FTL maps flash-page-sized logical pages; a write smaller than a page "
    "programs a whole page and, when other sectors of that logical page are valid, first reads them (update read). "
    "nearflash maps 4 KiB sectors and packs sectors of different LBAs into one page. On a 16 KiB-page device a 4 KiB "
    "random write therefore costs MQSim one page program and nearflash a quarter of one (before GC).",
    "Preconditioning: MQSim places the preconditioned pages analytically (Van Houdt's mean-field steady state of "
    "greedy GC); nearflash writes them (sequential fill, plus one capacity of random overwrites for write workloads). "
    "Read workloads run on a fresh device in MQSim and in aligned nearflash (ftl.unmapped_read = allocate: a read of "
    "a never-written page maps it at its plane's write frontier, so a plane's reads find LSB and MSB pages in "
    "arrival order); the preset run reads a sequentially filled device.",
    "Scheduling: both queue transactions per die and issue them on die- and channel-idle events (aligned nearflash "
    "follows MQSim's TSU order, nand.channel_arbitration = mqsim_tsu). Under GC: MQSim's non-preemptive TSU serves a "
    "chip's GC transactions before its user transactions and counts a block free once its erase has ended, as "
    "aligned nearflash does (controller.gc_priority = urgent, ftl.gc_free = erased); the preset run's GC is a class "
    "of equal weight that takes turns with host I/O on each die and counts a victim free once its erase is issued.",
    "Command cycles: MQSim books its command/address cycles on the channel; nearflash charges them as latency on "
    "the die (read) or books them with the data (program).",
    "Write buffer: MQSim's data cache acknowledges a write once it is in DRAM but throttles write-back to one page per "
    "plane in flight (back-pressure buffer); nearflash acknowledges once buffered and blocks only when the whole "
    "buffer waits for programs.",
    "Latency statistics: MQSim reports mean, minimum and maximum device response time (whole microseconds); its "
    "p50 and p99 here come from its response-time log written at every completion (LOG_PERIOD_NS). MQSim's IOPS divide all generated requests by the simulated time of the last "
    "event; nearflash's by the window from the first submission to the last completion.",
    "GC granularity: MQSim enqueues one victim's moves per block allocation below its threshold; nearflash (incremental "
    "pacing) moves a few victim pages per host page written below its threshold, until its stop threshold is reached.",
]


# --- main -------------------------------------------------------------------------------------------------------


def mqsim_runs(binary: Path, dxml: str, wxml: str, repeats: int, timeout: float, keep: Optional[Path], tag: str) -> dict[str, Any]:
    runs = []
    for i in range(repeats):
        wd = Path(tempfile.mkdtemp(prefix="mqsim-")) if keep is None else keep / f"{tag}-{i}"
        runs.append(run_mqsim(binary, dxml, wxml, wd, timeout))
    return median_by(runs, "sim_ios_per_s")


def nearflash_runs(preset: str, overrides: dict[str, Any], w: Workload, repeats: int) -> dict[str, Any]:
    """The first run on a fresh device gives the timing figures (deterministic); the speed is the median of
    `repeats` runs on that device. Each run draws new addresses (seed = run number): rewriting the previous run's
    addresses would find its blocks wholly stale and leave GC steady state."""
    dev, span, pre_s = prepared_device(preset, overrides, w)
    runs = [bench_nearflash(dev, w, span, seed=1 + i) for i in range(max(1, repeats))]
    speeds = [r["sim_ios_per_s"] for r in runs]
    return {**runs[0], "sim_ios_per_s": statistics.median(speeds), "sim_ios_per_s_runs": speeds, "precondition_s": pre_s}


def ratios(a: dict[str, Any], m: dict[str, Any]) -> dict[str, Optional[float]]:
    rel = lambda k: a[k] / m[k] if m.get(k) and a.get(k) is not None else None  # noqa: E731
    return {
        "iops": a["iops"] / m["iops"],
        "bandwidth": a["bandwidth_MBps"] / m["bandwidth_MBps"],
        "mean_latency": rel("mean_us"),
        "p50_latency": rel("p50_us"),
        "p99_latency": rel("p99_us"),
        "sim_speed": a["sim_ios_per_s"] / m["sim_ios_per_s"] if m.get("sim_ios_per_s") else None,
    }


def qd_sweep(preset: str, ov: dict[str, Any], aligned: dict[str, Any], mqsim: Optional[Path], quick: bool,
             timeout: float, keep: Optional[Path], seed: int = 1) -> list[dict[str, Any]]:
    """4 KiB random reads at several queue depths on aligned nearflash and on MQSim, each depth on a fresh device
    (MQSim runs each depth as a new process; aligned nearflash maps pages as the reads arrive, as MQSim does).
    `seed` n draws nearflash's addresses with seed n and MQSim's with workload Seed MQSIM_SEED + n - 1."""
    k = 4 if quick else 1
    dxml = device_xml(*mqsim_device(aligned, int(aligned["nvme.max_queue_depth"]), precondition=False))
    rows = []
    for qd in SWEEP_QDS:
        w = Workload(f"4K randread QD{qd}", "randread", 4096, qd, sweep_reads(qd) // k, 0.9, span=0.9)
        dev, span, _ = prepared_device(preset, ov, w)
        row: dict[str, Any] = {"qd": qd, "ios": w.ios, "seed": seed, "nearflash": bench_nearflash(dev, w, span, seed=seed)}
        del dev
        if mqsim is not None:
            try:
                wxml = workload_xml(w, aligned, MQSIM_SEED + seed - 1)
                tag = f"{preset}/sweep-qd{qd}" + (f"-seed{seed}" if seed != 1 else "")
                row["MQSim"] = mqsim_runs(mqsim, dxml, wxml, 1, timeout, keep, tag)
            except (RuntimeError, TimeoutError) as e:
                row["mqsim_error"] = str(e).strip().splitlines()[-1]
        n, m = row["nearflash"], row.get("MQSim")
        print(f"    QD{qd:<4} seed {seed} nearflash {n['iops']:>10,.0f} IOPS {n['mean_us']:>8.1f} us p50 {_g(n['p50_us'])} p99 {_g(n['p99_us'])}"
              + (f" | MQSim {m['iops']:>10,.0f} IOPS {m['mean_us']:>8.1f} us p50 {_g(m['p50_us'])} p99 {_g(m['p99_us'])}"
                 if m else ""), flush=True)
        rows.append(row)
    return rows


SWEEP_QDS = (1, 4, 16, 64, 256)


def sweep_reads(qd: int) -> int:
    """Reads per depth of the sweep (a quarter with --quick). The tail of a closed loop over a few dies moves with
    slow swings of the per-die queue lengths, so a percentile needs many more reads than its rank suggests: on
    samsung-970pro with 16 one-die channels and equal read times, five seeds of 64,000 reads at QD 256 gave p99s
    from 2,265 to 3,650 us (nearflash) and 2,349 to 3,289 us (MQSim); at these sizes five seeds of the real device
    spread 2,918-3,138 and 2,770-2,959 us (docs/validation.md, `--sweep-seeds 5`)."""
    return max(100_000, 4000 * qd)


def compare_preset(preset: str, mqsim: Optional[Path], quick: bool, repeats: int, mqsim_repeats: int,
                   only: Optional[list[str]], sweep: bool, timeout: float, keep: Optional[Path],
                   sweep_seeds: int = 1, traces: bool = True,
                   write_device: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    write_device = WRITE_DEVICE if write_device is None else write_device
    base = preset_values(preset)
    ov = aligned_overrides(base)
    aligned = preset_values(preset, ov)
    qd_cap = int(aligned["nvme.max_queue_depth"])
    host, dev = mqsim_device(aligned, qd_cap, precondition=True)
    flat = host + [m for m in dev if not isinstance(m.value, list)] + next(m.value for m in dev if isinstance(m.value, list))
    out: dict[str, Any] = {"preset": preset, "alignment": [asdict(a) for a in alignment(base)],
                           "mqsim_params": [asdict(m) for m in flat], "workloads": []}
    for w in workloads(quick):
        w = resolve(w, aligned)
        if only and not any(o.lower() in w.name.lower() for o in only):
            continue
        # Write workloads run on the smaller device of `write_device` in all three runs (see WRITE_DEVICE).
        dev_ov = {} if w.reads else dict(write_device)
        w_ov, w_aligned = {**ov, **dev_ov}, preset_values(preset, {**ov, **dev_ov}) if dev_ov else aligned
        print(f"[{preset}] {w.name}: {w.ios} I/Os" + (f" on {dev_ov}" if dev_ov else ""), flush=True)
        dxml = device_xml(*mqsim_device(w_aligned, qd_cap, precondition=not w.reads))
        wxml = workload_xml(w, w_aligned)
        entry: dict[str, Any] = {"workload": asdict(w), "device_overrides": dev_ov, "results": {},
                                 "mqsim_ssdconfig_xml": dxml, "mqsim_workload_xml": wxml}
        entry["results"]["nearflash (preset)"] = run_nearflash(preset, dev_ov, w)
        entry["results"]["nearflash (aligned)"] = nearflash_runs(preset, w_ov, w, repeats)
        if mqsim is not None:
            try:
                m = mqsim_runs(mqsim, dxml, wxml, mqsim_repeats, timeout, keep, f"{preset}/{w.rw}-{w.bs}")
                entry["results"]["MQSim"] = m
                entry["ratios"] = ratios(entry["results"]["nearflash (aligned)"], m)
            except (RuntimeError, TimeoutError) as e:
                entry["mqsim_error"] = str(e).strip().splitlines()[-1]
                print(f"    MQSim failed: {entry['mqsim_error']}", flush=True)
        for label, r in entry["results"].items():
            print(f"    {label:20} IOPS {r['iops']:>11,.0f}  {r['bandwidth_MBps']:>8.1f} MB/s  mean {r['mean_us']:>9.1f} us  "
                  f"p50 {_g(r.get('p50_us'))} p99 {_g(r.get('p99_us'))} max {r['max_us']:>10.1f} us  "
                  f"speed {_g(r['sim_ios_per_s'])} I/O/s", flush=True)
        out["workloads"].append(entry)
    if traces:
        print(f"[{preset}] MQSim traces replayed", flush=True)
        out["traces"] = compare_traces(preset, aligned, ov, mqsim, quick, timeout, keep)
    if sweep:
        print(f"[{preset}] queue-depth sweep, 4K random reads", flush=True)
        out["qd_sweep"] = qd_sweep(preset, ov, aligned, mqsim, quick, timeout, keep)
        if sweep_seeds > 1:
            out["qd_sweep_seeds"] = [out["qd_sweep"]] + [
                qd_sweep(preset, ov, aligned, mqsim, quick, timeout, keep, seed) for seed in range(2, sweep_seeds + 1)
            ]
    return out


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mqsim", type=Path, help="path to a built MQSim binary (the comparison is skipped without it)")
    ap.add_argument("--preset", nargs="+", default=["cosmos-plus"], help="nearflash presets (cosmos-plus, samsung-970pro)")
    ap.add_argument("--quick", action="store_true", help="a tenth of the I/Os")
    ap.add_argument("--repeats", type=int, default=3, help="aligned nearflash runs per workload (the median speed is kept)")
    ap.add_argument("--mqsim-repeats", type=int, default=1,
                    help="MQSim runs per workload (its timing figures are deterministic; benches/simspeed.py is the speed benchmark)")
    ap.add_argument("--only", nargs="*", help="run workloads whose name contains one of these words")
    ap.add_argument("--no-sweep", action="store_true", help="skip the queue-depth sweep of 4K random reads")
    ap.add_argument("--no-trace", action="store_true", help="skip the MQSim traces replayed by both simulators")
    ap.add_argument("--sweep-seeds", type=int, default=1,
                    help="run the sweep with this many address seeds (nearflash 1..N, MQSim's Seed 798..) and report "
                         "each depth's spread of ratios; the tables use seed 1")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds one MQSim run may take")
    ap.add_argument("--keep", type=Path, help="keep MQSim's input and output files under this folder")
    ap.add_argument("--out", type=Path, default=OUT_DIR)
    ap.add_argument("--write-device", nargs="*", metavar="KEY=VALUE",
                    help=f"overrides of both simulators' device for the write workloads (default {WRITE_DEVICE}; "
                         "none given: the preset's own size)")
    ap.add_argument("--arbitration", choices=["mqsim_tsu", "data_first", "interleave"], default="mqsim_tsu",
                    help="nearflash's nand.channel_arbitration in the aligned runs (mqsim_tsu is MQSim's policy)")
    args = ap.parse_args(argv)
    write_device = WRITE_DEVICE
    if args.write_device is not None:
        bad = [kv for kv in args.write_device if "=" not in kv or not kv.split("=", 1)[0]]
        if bad:
            ap.error(f"--write-device takes KEY=VALUE pairs, got {bad}")
        write_device = dict(kv.split("=", 1) for kv in args.write_device)
    global ARBITRATION
    ARBITRATION = args.arbitration
    mqsim = args.mqsim.resolve() if args.mqsim else None
    if mqsim is not None and not (mqsim.is_file() and os.access(mqsim, os.X_OK)):
        ap.error(f"--mqsim {mqsim} is not an executable file")
    if mqsim is None:
        print("no --mqsim given: running nearflash only, the comparison with MQSim is skipped", flush=True)
    result: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
        "host": os.uname().nodename,
        "load_average": os.getloadavg(),
        "mqsim": str(mqsim) if mqsim else None,
        "repeats": {"nearflash": args.repeats, "mqsim": args.mqsim_repeats},
        "arbitration": args.arbitration,
        "presets": [],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    for p in args.preset:
        result["presets"].append(
            compare_preset(p, mqsim, args.quick, args.repeats, args.mqsim_repeats, args.only, not args.no_sweep,
                           args.timeout, args.keep, args.sweep_seeds, not args.no_trace, write_device)
        )
        # Written after every preset, so that a long run leaves what it has measured.
        (args.out / "mqsim_compare.json").write_text(json.dumps(result, indent=1, default=str))
        (args.out / "mqsim_compare.md").write_text(markdown(result))
    print(f"wrote {args.out / 'mqsim_compare.json'} and {args.out / 'mqsim_compare.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
