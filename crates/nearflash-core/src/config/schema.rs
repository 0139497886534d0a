//! Typed device configuration: what each layer of the model reads, and the checks that make a configuration valid.

use super::units::*;
use super::ConfigTree;
use crate::error::{Result, SimError};
use serde::Deserialize;

/// NAND array: geometry, array timing and the channel bus.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NandConfig {
    pub channels: Count,
    pub chips_per_channel: Count,
    pub dies_per_chip: Count,
    pub planes_per_die: Count,
    pub blocks_per_plane: Count,
    pub pages_per_block: Count,
    pub page_size: Bytes,
    pub oob_size: Bytes,
    /// slc | mlc | tlc | qlc: how many page types alternate within a block (for per-type latencies).
    pub cell_type: Choice,
    pub t_read: Nanos,
    pub t_prog: Nanos,
    pub t_erase: Nanos,
    #[serde(default)]
    pub t_read_lsb: Option<Nanos>,
    #[serde(default)]
    pub t_read_csb: Option<Nanos>,
    #[serde(default)]
    pub t_read_msb: Option<Nanos>,
    #[serde(default)]
    pub t_prog_lsb: Option<Nanos>,
    #[serde(default)]
    pub t_prog_csb: Option<Nanos>,
    #[serde(default)]
    pub t_prog_msb: Option<Nanos>,
    /// Transfers per second on the channel bus (ONFI/Toggle "MT/s").
    pub channel_rate: TransfersPerSec,
    /// Bus width in bits.
    pub channel_width: Count,
    /// Command and address cycles on the bus for one operation.
    pub t_cmd: Nanos,
    /// Page register to cache register move (tDCBSYR) when cache read is used.
    pub t_cache_xfer: Nanos,
    /// Change Read Column (ONFI 05h, column address, E0h) and tCCS before a data-out that starts inside a page: what
    /// a partial-page (column) read adds on the channel.
    pub t_column_change: Nanos,
    pub multi_plane: Flag,
    pub cache_read: Flag,
    /// interleave (a read's command cycles slip between data bursts, charged as latency) | data_first (MQSim: the
    /// command cycles are booked on the channel, so a new read waits until no data-out is in progress) | mqsim_tsu
    /// (MQSim's transaction scheduler: host reads wait in per-die queues and are issued on channel-idle events).
    pub channel_arbitration: Choice,
    /// Rated program/erase cycles, used by the wear term of the bit-error model.
    pub endurance: Count,
    /// Program/erase suspension for reads (and erase suspension for programs): none | program | erase | both.
    pub suspend: Choice,
    /// From the suspend command until the die takes the read (the step under way finishes; its progress counts).
    pub t_suspend_program: Nanos,
    /// Resuming a suspended program: the interrupted step is set up again before the time it had left.
    pub t_resume_program: Nanos,
    pub t_suspend_erase: Nanos,
    pub t_resume_erase: Nanos,
    /// A program (erase) is suspended only if at least this much of it is left.
    pub suspend_min_left_program: Nanos,
    pub suspend_min_left_erase: Nanos,
    /// Suspensions one program or erase may take before it runs to its end.
    pub max_suspensions: Count,
    /// With erase suspension, programs may suspend erases too (write-suspend-erase), not only reads.
    pub suspend_erase_for_writes: Flag,
}

/// Error-correction and the raw bit-error model.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EccConfig {
    pub codeword_size: Bytes,
    /// Bits per codeword the hard-decision decoder corrects.
    pub correctable_bits: Count,
    /// Hard-decision decode time per codeword (one decoder per channel, pipelined with the bus).
    pub t_decode: Nanos,
    /// Raw bit error rate of a fresh block.
    pub rber: Real,
    /// RBER multiplier reached at rated endurance: rber x (1 + wear_factor x pe / endurance).
    pub rber_wear_factor: Real,
    /// Read-retry attempts (each a full tR + transfer + decode) before soft decoding.
    pub read_retry_max: Count,
    /// Each retry (shifted read voltages) multiplies the remaining raw errors by this factor.
    pub retry_error_factor: Real,
    /// Bits per codeword the soft-decision decoder corrects.
    pub soft_correctable_bits: Count,
    pub t_soft_decode: Nanos,
}

/// Flash translation layer policies.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FtlConfig {
    /// Logical block (LBA) size; also the mapping unit.
    pub sector_size: Bytes,
    /// Fraction of physical capacity hidden from the host.
    pub over_provisioning: Real,
    /// GC starts in a plane when its free blocks drop below this.
    pub gc_start_free_blocks: Count,
    /// GC in a plane stops once it has this many free blocks.
    pub gc_stop_free_blocks: Count,
    /// Below this many free blocks in its plane, GC's flash work is urgent (with `controller.gc_priority =
    /// background`: it stops yielding to host I/O).
    pub gc_hard_free_blocks: Count,
    /// Victim selection: greedy (fewest valid sectors) | rga (fewest valid of `gc_rga_d` random candidates,
    /// randomized greedy) | random | fifo (the block closed longest ago).
    pub gc_policy: Choice,
    /// Candidates per RGA victim choice (MQSim uses log2 of blocks per plane).
    pub gc_rga_d: Count,
    /// incremental (a few victim pages moved per host page written) | blocking (whole victims at once).
    pub gc_pacing: Choice,
    /// What GC's thresholds (`gc_start/stop/hard_free_blocks`) and a frontier opening a block count as free: issued
    /// (a victim is free once its moves and erase are issued; the frontier takes the least-worn free block) |
    /// erased (MQSim's: once its erase has ended; a frontier opens an erased block while its plane has one, else
    /// waits for the erase GC issued first).
    pub gc_free: Choice,
    /// GC moves pages whose every sector is current with the on-die copyback command (into an empty GC page)
    /// instead of through the controller; pages with stale sectors still pass the controller.
    pub gc_copyback: Flag,
    /// dram (whole map in controller DRAM) | demand (DFTL-style cached mapping table).
    pub mapping: Choice,
    /// Cached mapping table size for demand mapping.
    pub cmt_size: Bytes,
    /// Order in which consecutive page-sized logical groups are striped: a permutation of C, W, D, P
    /// (channel, way/chip, die, plane), first letter varies fastest.
    pub allocation: Choice,
    /// Write-back buffer in controller DRAM.
    pub write_buffer: Bytes,
    /// Firmware instructions for one mapping-table update or lookup (charged to the controller cores).
    pub map_instructions: Real,
    /// Blocks per plane set aside for firmware extensions' physical-address storage (the last blocks of each
    /// plane); the FTL never allocates, collects or maps them. Absent: none.
    pub ext_reserved_blocks: Option<Count>,
    /// zeroes (a read of a never-written sector returns zeroes from the mapping table, without flash) | allocate
    /// (MQSim's page-level FTL: the read gives the sector's page-sized group a page at its plane's host frontier
    /// and reads it from flash; see `Ftl::allocate_for_read`).
    pub unmapped_read: Choice,
}

/// Controller: embedded cores, DRAM and firmware costs.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControllerConfig {
    pub cores: Count,
    pub core_freq: Hertz,
    pub cpi: Real,
    /// Firmware path length for command fetch, decode and completion of a read.
    pub fw_read_instructions: Real,
    pub fw_write_instructions: Real,
    /// Flush, Dataset Management, admin commands.
    pub fw_other_instructions: Real,
    /// Per flash transaction issued (scheduling, queueing).
    pub fw_page_instructions: Real,
    pub dram_size: Bytes,
    pub dram_bandwidth: BytesPerSec,
    pub dram_latency: Nanos,
    /// The order of one class's flash transactions on a die: read_first (reads, then programs, then erases) | fifo.
    pub flash_order: Choice,
    /// GC's flash work beside host I/O: urgent (GC first, MQSim's non-preemptive GC) | equal (a class weighted as
    /// the medium-priority queues) | background (only while no host transaction waits, until the plane is below
    /// `ftl.gc_hard_free_blocks`).
    pub gc_priority: Choice,
}

/// Host side: link, driver stack and CPU.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    /// pcie | sata
    pub interface: Choice,
    pub pcie_gen: Count,
    pub pcie_lanes: Count,
    pub sata_gen: Count,
    /// Payload efficiency of the link protocol (TLP/FIS headers, flow control).
    pub link_efficiency: Real,
    /// If set, replaces the bandwidth derived from generation and lanes (the iSSD study sweeps r_host directly).
    #[serde(default)]
    pub link_bandwidth: Option<BytesPerSec>,
    /// One-way latency of a link transaction (doorbell write, SQE fetch, completion post).
    pub link_latency: Nanos,
    /// kernel (interrupt-driven block layer) | polled (user-space polled driver)
    pub stack: Choice,
    pub kernel_submit: Nanos,
    pub kernel_complete: Nanos,
    pub polled_submit: Nanos,
    pub polled_complete: Nanos,
    pub cpu_cores: Count,
    pub cpu_freq: Hertz,
    pub dram_bandwidth: BytesPerSec,
    /// An integrated GPU sharing the host DRAM (optional; NICE's Jetson NX): CUDA cores, clock, floating-point
    /// operations per core per cycle (2 = one FMA), the fractions of peak compute and DRAM bandwidth its kernels
    /// reach, the cost of one kernel launch and of one copy call. Read by experiments' GPU baselines only.
    #[serde(default)]
    pub gpu_cores: Option<Count>,
    #[serde(default)]
    pub gpu_freq: Option<Hertz>,
    #[serde(default)]
    pub gpu_ops_per_core_cycle: Option<Real>,
    #[serde(default)]
    pub gpu_compute_efficiency: Option<Real>,
    #[serde(default)]
    pub gpu_memory_efficiency: Option<Real>,
    #[serde(default)]
    pub gpu_launch: Option<Nanos>,
    #[serde(default)]
    pub gpu_copy_call: Option<Nanos>,
}

/// Per-event energies and static powers.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnergyConfig {
    pub nand_read_page: PicoJoules,
    pub nand_program_page: PicoJoules,
    pub nand_erase_block: PicoJoules,
    /// Energy of resuming a suspended program (erase): the interrupted step repeated.
    pub nand_resume_program: PicoJoules,
    pub nand_resume_erase: PicoJoules,
    pub channel_per_byte: PjPerByte,
    pub ecc_per_byte: PjPerByte,
    pub ssd_dram_per_byte: PjPerByte,
    pub host_link_per_byte: PjPerByte,
    pub core_per_instruction: PicoJoules,
    pub ssd_static: MilliWatts,
    pub host_cpu_per_instruction: PicoJoules,
    pub host_dram_per_byte: PjPerByte,
    pub host_dram_static: MilliWatts,
    pub host_chipset_static: MilliWatts,
    pub host_io_static: MilliWatts,
    /// Power of the host's integrated GPU while a kernel or copy runs (optional, with `host.gpu_*`).
    #[serde(default)]
    pub host_gpu_active: Option<MilliWatts>,
}

/// NVMe interface limits.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvmeConfig {
    pub max_queues: Count,
    pub max_queue_depth: Count,
    /// Maximum data transfer size of one command.
    pub mdts: Bytes,
    /// Submission-queue arbitration (NVMe base specification 2.0, 3.4.4; CC.AMS): round_robin | weighted (weighted
    /// round robin with urgent priority class).
    pub arbitration: Choice,
    /// Commands fetched from one queue per turn (Set Features 01h, Arbitration Burst: 2^AB).
    pub arbitration_burst: Count,
    /// Commands the high, medium and low classes fetch per round under `weighted` (Set Features 01h: HPW, MPW and
    /// LPW, 0's based, + 1).
    pub weight_high: Count,
    pub weight_medium: Count,
    pub weight_low: Count,
    /// I/O commands the controller holds fetched and not yet completed; arbitration picks the next command when one
    /// ends. 0: no limit (each command is fetched when its doorbell rings, so arbitration never has to choose).
    pub fetch_window: Count,
}

/// The whole device.
#[derive(Debug, Clone, Deserialize)]
pub struct DeviceConfig {
    #[serde(default)]
    pub meta: Meta,
    pub nand: NandConfig,
    pub ecc: EccConfig,
    pub ftl: FtlConfig,
    pub controller: ControllerConfig,
    pub host: HostConfig,
    pub energy: EnergyConfig,
    pub nvme: NvmeConfig,
    /// Extension sections, typed by each extension.
    #[serde(default)]
    pub ext: toml::Table,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Meta {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub description: String,
}

/// How the host software stack completes I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostStack {
    Kernel,
    Polled,
}

/// How GC picks its victim among the full blocks of a plane that have something to reclaim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VictimPolicy {
    /// Fewest valid sectors.
    Greedy,
    /// Fewest valid sectors among this many random candidates (Van Houdt's randomized greedy).
    Rga(u32),
    Random,
    /// The block that was closed longest ago (lowest sequence number of its first page).
    Fifo,
}

/// How GC work is spread over host writes (see `ftl::gc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GcPacing {
    Incremental,
    Blocking,
}

/// What GC's thresholds and a frontier's open count as a free block (`ftl.gc_free`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GcFree {
    /// A victim's block is free once GC has issued its moves and erase.
    Issued,
    /// A block is free once its erase has ended (MQSim's block pool).
    Erased,
}

/// What a read of a never-written sector does (`ftl.unmapped_read`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnmappedRead {
    /// Zeroes from the mapping table, no flash access.
    Zeroes,
    /// A page is allocated for the sector's group and read from flash (MQSim).
    Allocate,
}

/// The order of a class's flash transactions on a die (`controller.flash_order`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlashOrder {
    /// Reads, then programs, then erases (read-priority scheduling).
    ReadFirst,
    /// Arrival order.
    Fifo,
}

/// GC's flash work beside host I/O (`controller.gc_priority`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GcPriority {
    Urgent,
    Equal,
    Background,
}

/// Demand-paged or fully cached mapping table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MappingMode {
    Dram,
    Demand,
}

impl DeviceConfig {
    pub fn from_tree(tree: &ConfigTree) -> Result<Self> {
        let cfg: DeviceConfig = toml::Value::Table(tree.root.clone())
            .try_into()
            .map_err(|e: toml::de::Error| SimError::Config(format!("preset does not fit the schema: {e}")))?;
        cfg.validate()?;
        Ok(cfg)
    }

    pub fn bits_per_cell(&self) -> u32 {
        match self.nand.cell_type.0.as_str() {
            "mlc" => 2,
            "tlc" => 3,
            "qlc" => 4,
            _ => 1,
        }
    }

    pub fn host_stack(&self) -> HostStack {
        if self.host.stack.0 == "polled" {
            HostStack::Polled
        } else {
            HostStack::Kernel
        }
    }

    pub fn victim_policy(&self) -> VictimPolicy {
        match self.ftl.gc_policy.0.as_str() {
            "rga" => VictimPolicy::Rga(self.ftl.gc_rga_d.0.min(u64::from(u32::MAX)) as u32),
            "random" => VictimPolicy::Random,
            "fifo" => VictimPolicy::Fifo,
            _ => VictimPolicy::Greedy,
        }
    }

    pub fn gc_pacing(&self) -> GcPacing {
        if self.ftl.gc_pacing.0 == "blocking" {
            GcPacing::Blocking
        } else {
            GcPacing::Incremental
        }
    }

    pub fn gc_free(&self) -> GcFree {
        if self.ftl.gc_free.0 == "erased" {
            GcFree::Erased
        } else {
            GcFree::Issued
        }
    }

    pub fn unmapped_read(&self) -> UnmappedRead {
        if self.ftl.unmapped_read.0 == "allocate" {
            UnmappedRead::Allocate
        } else {
            UnmappedRead::Zeroes
        }
    }

    pub fn flash_order(&self) -> FlashOrder {
        if self.controller.flash_order.0 == "fifo" {
            FlashOrder::Fifo
        } else {
            FlashOrder::ReadFirst
        }
    }

    /// The high, medium and low queues' weights (`nvme.weight_*`, checked to 1..=256): submission-queue arbitration's
    /// and the flash classes' alike.
    pub fn priority_weights(&self) -> [u32; 3] {
        let n = &self.nvme;
        [n.weight_high, n.weight_medium, n.weight_low].map(|w| w.0.min(256) as u32)
    }

    pub fn gc_priority(&self) -> GcPriority {
        match self.controller.gc_priority.0.as_str() {
            "urgent" => GcPriority::Urgent,
            "background" => GcPriority::Background,
            _ => GcPriority::Equal,
        }
    }

    pub fn mapping_mode(&self) -> MappingMode {
        if self.ftl.mapping.0 == "demand" {
            MappingMode::Demand
        } else {
            MappingMode::Dram
        }
    }

    /// Channel bus bandwidth in bytes per second.
    pub fn channel_bandwidth(&self) -> BytesPerSec {
        BytesPerSec(self.nand.channel_rate.0 * self.nand.channel_width.0 as f64 / 8.0)
    }

    /// Host link payload bandwidth in bytes per second, per direction.
    pub fn link_bandwidth(&self) -> BytesPerSec {
        if let Some(b) = self.host.link_bandwidth {
            return b;
        }
        let raw = if self.host.interface.0 == "sata" {
            // SATA 1/2/3: 1.5/3/6 Gb/s line rate, 8b/10b coding.
            let gbps = 1.5 * f64::from(1u32 << (self.host.sata_gen.0.clamp(1, 3) - 1));
            gbps * 1e9 * 0.8 / 8.0
        } else {
            // PCIe 1..6 per-lane line rate (GT/s) and line coding.
            let (gt, coding) = match self.host.pcie_gen.0 {
                1 => (2.5, 0.8),
                2 => (5.0, 0.8),
                3 => (8.0, 128.0 / 130.0),
                4 => (16.0, 128.0 / 130.0),
                5 => (32.0, 128.0 / 130.0),
                _ => (64.0, 242.0 / 256.0),
            };
            gt * 1e9 * coding / 8.0 * self.host.pcie_lanes.0 as f64
        };
        BytesPerSec(raw * self.host.link_efficiency.0)
    }

    fn validate(&self) -> Result<()> {
        let n = &self.nand;
        let bad = |m: String| Err(SimError::Config(m));
        for (name, v) in [
            ("nand.channels", n.channels.0),
            ("nand.chips_per_channel", n.chips_per_channel.0),
            ("nand.dies_per_chip", n.dies_per_chip.0),
            ("nand.planes_per_die", n.planes_per_die.0),
            ("nand.blocks_per_plane", n.blocks_per_plane.0),
            ("nand.pages_per_block", n.pages_per_block.0),
            ("controller.cores", self.controller.cores.0),
            ("host.cpu_cores", self.host.cpu_cores.0),
            ("nvme.max_queues", self.nvme.max_queues.0),
            ("nvme.max_queue_depth", self.nvme.max_queue_depth.0),
        ] {
            if v == 0 {
                return bad(format!("{name} must be at least 1"));
            }
        }
        if !matches!(n.cell_type.0.as_str(), "slc" | "mlc" | "tlc" | "qlc") {
            return bad(format!("nand.cell_type {:?}: expected slc, mlc, tlc or qlc", n.cell_type.0));
        }
        let sector = self.ftl.sector_size.0;
        if sector < 512 || !sector.is_power_of_two() {
            return bad(format!("ftl.sector_size {sector} B must be a power of two of at least 512 B"));
        }
        if n.page_size.0 == 0 || !n.page_size.0.is_multiple_of(sector) {
            return bad(format!("nand.page_size {} B must be a multiple of ftl.sector_size {sector} B", n.page_size.0));
        }
        let spp = n.page_size.0 / sector;
        if spp > 32 {
            return bad(format!("a page holds {spp} sectors; at most 32 are supported"));
        }
        if n.pages_per_block.0 > u64::from(u16::MAX) {
            return bad("nand.pages_per_block must be below 65536".into());
        }
        if n.channel_rate.0 <= 0.0 || n.channel_width.0 == 0 {
            return bad("nand.channel_rate and nand.channel_width must be positive".into());
        }
        let f = &self.ftl;
        let op = f.over_provisioning.0;
        if !(0.0..0.9).contains(&op) {
            return bad(format!("ftl.over_provisioning {op} must be in [0, 0.9)"));
        }
        if f.gc_stop_free_blocks.0 < f.gc_start_free_blocks.0 || f.gc_start_free_blocks.0 < 1 {
            return bad("ftl.gc_start_free_blocks must be >= 1 and <= ftl.gc_stop_free_blocks".into());
        }
        // Each plane keeps a host frontier, a GC frontier and the GC reserve; the hidden capacity must cover them
        // or GC cannot make progress at 100% logical fill.
        let reserved = self.reserved_blocks_per_plane();
        if reserved >= n.blocks_per_plane.0 {
            return bad(format!(
                "ftl.ext_reserved_blocks {reserved} must be below nand.blocks_per_plane {}",
                n.blocks_per_plane.0
            ));
        }
        let blocks = n.blocks_per_plane.0 - reserved;
        let hidden = blocks as f64 * op;
        let need = (f.gc_stop_free_blocks.0 + 2) as f64;
        if hidden < need {
            return bad(format!(
                "ftl.over_provisioning {op} hides {hidden:.1} blocks per plane; GC needs at least {need} \
                 (gc_stop_free_blocks + 2 open blocks): raise over_provisioning or blocks_per_plane"
            ));
        }
        if blocks <= need as u64 + 1 {
            return bad(format!(
                "{blocks} blocks per plane for the FTL (nand.blocks_per_plane less ftl.ext_reserved_blocks) are too \
                 few for the GC reserve"
            ));
        }
        if !matches!(n.channel_arbitration.0.as_str(), "interleave" | "data_first" | "mqsim_tsu") {
            return bad(format!(
                "nand.channel_arbitration {:?}: expected interleave, data_first or mqsim_tsu",
                n.channel_arbitration.0
            ));
        }
        if !matches!(n.suspend.0.as_str(), "none" | "program" | "erase" | "both") {
            return bad(format!("nand.suspend {:?}: expected none, program, erase or both", n.suspend.0));
        }
        if n.suspend.0 != "none" && n.max_suspensions.0 < 1 {
            return bad("nand.max_suspensions must be at least 1 when nand.suspend is on".into());
        }
        if n.channel_arbitration.0 == "mqsim_tsu" && n.cache_read.0 {
            return bad(
                "nand.channel_arbitration mqsim_tsu models MQSim's scheduler, which has no cache read: set \
                 nand.cache_read = false"
                    .into(),
            );
        }
        if n.channel_arbitration.0 == "mqsim_tsu" && n.dies_per_chip.0 != 1 {
            return bad(format!(
                "nand.channel_arbitration mqsim_tsu issues per die as MQSim issues per chip, which MQSim lets work one \
                 die at a time: nand.dies_per_chip must be 1 (is {}; count the dies as nand.chips_per_channel)",
                n.dies_per_chip.0
            ));
        }
        if !matches!(f.gc_policy.0.as_str(), "greedy" | "rga" | "random" | "fifo") {
            return bad(format!("ftl.gc_policy {:?}: expected greedy, rga, random or fifo", f.gc_policy.0));
        }
        if f.gc_rga_d.0 < 1 {
            return bad("ftl.gc_rga_d must be at least 1".into());
        }
        if !matches!(f.gc_pacing.0.as_str(), "incremental" | "blocking") {
            return bad(format!("ftl.gc_pacing {:?}: expected incremental or blocking", f.gc_pacing.0));
        }
        if !matches!(f.gc_free.0.as_str(), "issued" | "erased") {
            return bad(format!("ftl.gc_free {:?}: expected issued or erased", f.gc_free.0));
        }
        if !matches!(f.unmapped_read.0.as_str(), "zeroes" | "allocate") {
            return bad(format!("ftl.unmapped_read {:?}: expected zeroes or allocate", f.unmapped_read.0));
        }
        if f.gc_hard_free_blocks.0 < 1 {
            return bad("ftl.gc_hard_free_blocks must be at least 1".into());
        }
        let c = &self.controller;
        if !matches!(c.flash_order.0.as_str(), "read_first" | "fifo") {
            return bad(format!("controller.flash_order {:?}: expected read_first or fifo", c.flash_order.0));
        }
        if !matches!(c.gc_priority.0.as_str(), "urgent" | "equal" | "background") {
            return bad(format!("controller.gc_priority {:?}: expected urgent, equal or background", c.gc_priority.0));
        }
        if !matches!(f.mapping.0.as_str(), "dram" | "demand") {
            return bad(format!("ftl.mapping {:?}: expected dram or demand", f.mapping.0));
        }
        let mut letters: Vec<char> = f.allocation.0.chars().collect();
        letters.sort_unstable();
        if letters != ['C', 'D', 'P', 'W'] {
            return bad(format!("ftl.allocation {:?} must be a permutation of C, W, D, P", f.allocation.0));
        }
        if self.physical_sectors() >= u64::from(u32::MAX) {
            return bad("the device has more physical sectors than 32-bit mapping entries can address".into());
        }
        if !matches!(self.host.interface.0.as_str(), "pcie" | "sata") {
            return bad(format!("host.interface {:?}: expected pcie or sata", self.host.interface.0));
        }
        if !matches!(self.host.stack.0.as_str(), "kernel" | "polled") {
            return bad(format!("host.stack {:?}: expected kernel or polled", self.host.stack.0));
        }
        if self.controller.core_freq.0 <= 0.0 || self.host.cpu_freq.0 <= 0.0 {
            return bad("controller.core_freq and host.cpu_freq must be positive".into());
        }
        if self.controller.dram_bandwidth.0 <= 0.0 || self.host.dram_bandwidth.0 <= 0.0 {
            return bad("DRAM bandwidths must be positive".into());
        }
        let h = &self.host;
        let gpu_positive = [h.gpu_cores.map(|v| v.0 as f64), h.gpu_freq.map(|v| v.0), h.gpu_ops_per_core_cycle.map(|v| v.0)];
        let gpu_fractions = [h.gpu_compute_efficiency.map(|v| v.0), h.gpu_memory_efficiency.map(|v| v.0)];
        // Written so that NaN fails too.
        let positive = |v: &f64| v.partial_cmp(&0.0) == Some(std::cmp::Ordering::Greater);
        if !gpu_positive.iter().flatten().all(positive) || !gpu_fractions.iter().flatten().all(|v| positive(v) && *v <= 1.0) {
            return bad("host.gpu_cores, gpu_freq and gpu_ops_per_core_cycle must be positive, gpu_*_efficiency in (0, 1]".into());
        }
        if self.energy.host_gpu_active.is_some_and(|p| p.0.is_nan() || p.0 < 0.0) {
            return bad("energy.host_gpu_active must not be negative".into());
        }
        if self.link_bandwidth().0 <= 0.0 {
            return bad("the host link bandwidth must be positive".into());
        }
        if self.ecc.codeword_size.0 == 0 || self.ecc.codeword_size.0 > n.page_size.0 {
            return bad("ecc.codeword_size must be positive and not larger than a page".into());
        }
        let multi_plane_page = n.page_size.0 * n.planes_per_die.0;
        if self.ftl.write_buffer.0 < multi_plane_page {
            return bad(format!(
                "ftl.write_buffer {} B: must hold at least one multi-plane page, nand.page_size x nand.planes_per_die = {multi_plane_page} B",
                self.ftl.write_buffer.0
            ));
        }
        if self.nvme.mdts.0 < sector {
            return bad("nvme.mdts must be at least one sector".into());
        }
        let nv = &self.nvme;
        if !matches!(nv.arbitration.0.as_str(), "round_robin" | "weighted") {
            return bad(format!("nvme.arbitration {:?}: expected round_robin or weighted", nv.arbitration.0));
        }
        if !nv.arbitration_burst.0.is_power_of_two() || nv.arbitration_burst.0 > 128 {
            return bad(format!("nvme.arbitration_burst {}: a power of two from 1 to 128 (2^AB, AB < 7)", nv.arbitration_burst.0));
        }
        for (name, w) in [("weight_high", nv.weight_high.0), ("weight_medium", nv.weight_medium.0), ("weight_low", nv.weight_low.0)] {
            if !(1..=256).contains(&w) {
                return bad(format!("nvme.{name} {w}: from 1 to 256 (an 8-bit 0's based weight + 1)"));
            }
        }
        Ok(())
    }

    /// Total dies (LUNs).
    pub fn dies(&self) -> u64 {
        self.nand.channels.0 * self.nand.chips_per_channel.0 * self.nand.dies_per_chip.0
    }

    pub fn planes(&self) -> u64 {
        self.dies() * self.nand.planes_per_die.0
    }

    pub fn sectors_per_page(&self) -> u64 {
        self.nand.page_size.0 / self.ftl.sector_size.0
    }

    pub fn physical_pages(&self) -> u64 {
        self.planes() * self.nand.blocks_per_plane.0 * self.nand.pages_per_block.0
    }

    pub fn physical_sectors(&self) -> u64 {
        self.physical_pages() * self.sectors_per_page()
    }

    /// Blocks per plane reserved for extensions (`ftl.ext_reserved_blocks`).
    pub fn reserved_blocks_per_plane(&self) -> u64 {
        self.ftl.ext_reserved_blocks.map_or(0, |c| c.0)
    }

    /// Logical sectors exported to the host: a whole number of page groups per plane, from the blocks the FTL owns.
    pub fn logical_sectors(&self) -> u64 {
        let spp = self.sectors_per_page();
        let per_plane_groups = ((self.nand.blocks_per_plane.0 - self.reserved_blocks_per_plane()) as f64
            * self.nand.pages_per_block.0 as f64
            * (1.0 - self.ftl.over_provisioning.0))
            .floor() as u64;
        per_plane_groups * self.planes() * spp
    }

    pub fn logical_bytes(&self) -> u64 {
        self.logical_sectors() * self.ftl.sector_size.0
    }
}
