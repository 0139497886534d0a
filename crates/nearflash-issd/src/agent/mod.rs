//! The Agent: iSSD's device runtime as a nearflash firmware extension (paper §3.2, Fig. 5b). It declares one FMC
//! processor per flash channel (`issd.fmc`) and, unless disabled, one stream processor per channel (`issd.sp`); the
//! Reduce runs on the controller's cores (the `issd` preset's four 400 MHz cores are Table 2's SSD CPUs). It
//! claims three vendor I/O opcodes (defaults below, see [`params`]):
//!
//! | command | opcode | data | dwords | completes with |
//! |---|---|---|---|---|
//! | LOAD  | 0xB1 | descriptor, host to device ([`descriptor`]) | cdw10 slot, cdw11 descriptor bytes | dw0 = slot |
//! | RUN   | 0xB2 | result buffer, device to host (may be absent) | cdw10 slot | dw0 = result bytes |
//! | FETCH | 0xB6 | result buffer, device to host | cdw10 slot, cdw12/13 byte offset | dw0 = bytes copied |
//!
//! RUN executes the loaded job with the pipelining strategy ([`pipeline`]) and streams its result into the
//! buffer as the Reduce produces it (selections in `output_flush` batches, other results at the end); a result
//! longer than the buffer stays in DRAM for FETCH. The Initiator consumes each batch as it lands (the host's stage
//! (f), at the descriptor's host cycles per result byte); as the command is simulated in one step, the Agent books
//! that work on the host cores (`ExecCtx::host_compute`) and RUN completes when the last batch is consumed. The result is the kernel's encoded [`crate::Output`], or the
//! encoded merged [`crate::Partial`] when the descriptor asks for it (the device's share of a partitioned job).
//!
//! Errors complete with an NVMe status, never a panic: a malformed or unsuitable descriptor, a bad slot or a
//! wrong data direction -> Invalid Field; an extent beyond the namespace -> LBA Out of Range; a short data buffer
//! -> Data Transfer Error; RUN/FETCH of an empty slot -> Command Sequence Error; flash read failures -> their
//! status; a kernel rejecting the stored bytes -> [`pipeline::KERNEL_FAILED`] (SCT 1, SC 0xC0).

pub mod descriptor;
pub mod params;
pub mod pipeline;

pub use descriptor::{Extent, JobDescriptor, ResultKind};
pub use params::AgentParams;
pub use pipeline::{JobStats, KERNEL_FAILED};

use crate::costs::KernelCosts;
use crate::kernel::Kernel;
use crate::PageLayout;
use nearflash_core::ext::{AttachCtx, ClassId, DataBuf, ExecCtx, ExtCompletion, Extension, Level, UnitSpec};
use nearflash_core::ext::Time;
use nearflash_core::error::{Result as SimResult, SimError};
use nearflash_core::nvme::{Sqe, Status};
use pipeline::{AgentUnits, JobContext};
use serde::Serialize;

/// Extension name (`Device::attach`, reports, Python's `dev.attach("issd")`).
pub const NAME: &str = "issd";
/// Resource and energy-account names of the compute units.
pub const UNIT_FMC: &str = "issd.fmc";
pub const UNIT_SP: &str = "issd.sp";

/// A loaded job.
struct Job {
    desc: JobDescriptor,
    kernel: Box<dyn Kernel>,
    costs: KernelCosts,
    result: Option<Vec<u8>>,
}

/// Counters for reports.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AgentStats {
    pub loads: u64,
    pub runs: u64,
    pub fetches: u64,
    pub errors: u64,
    /// Sums over every job run.
    pub total: JobStats,
    /// The last job run.
    pub last: Option<JobStats>,
}

/// The iSSD firmware extension.
pub struct IssdExtension {
    overrides: serde_json::Value,
    params: AgentParams,
    units: Option<AgentUnits>,
    slots: Vec<Option<Job>>,
    stats: AgentStats,
    /// The flash class of the FMCs' reads (declared at attach).
    fmc_class: Option<ClassId>,
}

type Step = std::result::Result<(u32, Time), (Status, Time)>;

/// Bytes of the 64-byte command where its dwords start (the error log's Parameter Error Location).
const CDW10: u8 = 40;
const CDW11: u8 = 44;
const CDW12: u8 = 48;

impl IssdExtension {
    /// An Agent whose parameters are the preset's `[ext.issd]` section overridden by `overrides` (a JSON object,
    /// see [`AgentParams::apply_json`]); checked now against the defaults, applied when attached.
    pub fn new(overrides: serde_json::Value) -> crate::Result<Self> {
        let mut params = AgentParams::default();
        params.apply_json(&overrides)?;
        Ok(Self { overrides, params, units: None, slots: Vec::new(), stats: AgentStats::default(), fmc_class: None })
    }

    pub fn params(&self) -> &AgentParams {
        &self.params
    }

    fn load(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>) -> Step {
        let t = ctx.start;
        let DataBuf::ToDevice(buf) = data else {
            return Err((ctx.explain(Status::INVALID_FIELD, None, "LOAD carries a descriptor from the host"), t));
        };
        let (slot, len) = (sqe.cdw10 as usize, sqe.cdw11 as usize);
        if slot >= self.slots.len() {
            return Err((ctx.explain(Status::INVALID_FIELD, Some(CDW10), self.no_slot(slot)), t));
        }
        if len == 0 || len > descriptor::MAX_DESCRIPTOR_BYTES {
            let why = format!("descriptor length {len} (CDW11) is not in 1..={}", descriptor::MAX_DESCRIPTOR_BYTES);
            return Err((ctx.explain(Status::INVALID_FIELD, Some(CDW11), why), t));
        }
        if buf.len() < len {
            return Err((Status::DATA_TRANSFER_ERROR, t));
        }
        let arrived = ctx.from_host(t, len as u64);
        let p = &self.params;
        let parsed = ctx.firmware(arrived, p.load_instructions + p.load_instructions_per_byte * len as f64);
        let invalid = |ctx: &mut ExecCtx<'_>, what: &str, e: String| {
            (ctx.explain(Status::INVALID_FIELD, None, format!("{what}: {e}")), parsed)
        };
        let desc = JobDescriptor::decode(&buf[..len]).map_err(|e| invalid(ctx, "descriptor", e.to_string()))?;
        let flash_page = u64::from(ctx.geometry().page_size);
        if desc.extents.iter().any(|e| e.slba + u64::from(e.nlb) > ctx.lbas()) {
            return Err((Status::LBA_OUT_OF_RANGE, parsed));
        }
        desc.check_device(ctx.lbas(), ctx.lba_bytes(), flash_page).map_err(|e| invalid(ctx, "descriptor", e.to_string()))?;
        if desc.accelerate && self.units.is_some_and(|u| u.sp.is_none()) {
            let why = "the job asks for the stream processor, and this device has none (ext.issd.stream_processors = 0)";
            return Err((ctx.explain(Status::INVALID_FIELD, None, why), parsed));
        }
        let layout = PageLayout::new(desc.page_size as usize).map_err(|e| invalid(ctx, "page layout", e.to_string()))?;
        let kernel = desc.spec.build(layout).map_err(|e| invalid(ctx, desc.spec.name(), e.to_string()))?;
        let costs = self.params.costs.of(&desc.spec).map_err(|e| invalid(ctx, "kernel costs", e.to_string()))?;
        self.slots[slot] = Some(Job { desc, kernel, costs, result: None });
        self.stats.loads += 1;
        Ok((slot as u32, parsed))
    }

    fn no_slot(&self, slot: usize) -> String {
        format!("slot {slot} (CDW10) does not exist: the Agent has {} slots", self.slots.len())
    }

    fn run(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>) -> Step {
        let t = ctx.start;
        let out: &mut [u8] = match data {
            DataBuf::FromDevice(b) => b,
            DataBuf::None => &mut [],
            DataBuf::ToDevice(_) => {
                return Err((ctx.explain(Status::INVALID_FIELD, None, "RUN returns its result to the host"), t))
            }
        };
        let units = self.units.ok_or((Status::INTERNAL_ERROR, t))?;
        let slot = sqe.cdw10 as usize;
        let why_empty = format!("slot {slot} holds no job: LOAD one first");
        let no_slot = self.no_slot(slot);
        let job = match self.slots.get_mut(slot) {
            None => return Err((ctx.explain(Status::INVALID_FIELD, Some(CDW10), no_slot), t)),
            Some(None) => return Err((ctx.explain(Status::SEQUENCE_ERROR, Some(CDW10), why_empty), t)),
            Some(Some(j)) => j,
        };
        let jc = JobContext { job: &job.desc, kernel: job.kernel.as_ref(), costs: job.costs, params: &self.params, units };
        let outcome = pipeline::run_job(ctx, &jc, t).map_err(|s| (s, t))?;
        let total = u32::try_from(outcome.result.len()).map_err(|_| (Status::INVALID_FIELD, outcome.done))?;
        // results are written to DRAM as produced; what fits the buffer is read out and sent at once, and the
        // Initiator consumes each batch as it lands (stage (f), booked here because RUN is simulated in one step)
        let (cpb, ipb) = (f64::from(job.desc.host_cpb), f64::from(job.desc.host_ipb));
        let cores = ctx.config().host.cpu_cores.0 as u32;
        let (mut sent, mut done) = (0usize, outcome.done);
        for &(ready, n) in &outcome.schedule {
            let written = pipeline::dram_bursts(ctx, ready, n);
            done = done.max(written);
            let k = (n as usize).min(out.len() - sent);
            if k > 0 {
                let read = pipeline::dram_bursts(ctx, written, k as u64);
                let landed = ctx.to_host(read, k as u64);
                let kb = k as f64;
                done = done.max(landed).max(ctx.host_compute(landed, kb * cpb, kb * ipb, cores));
                sent += k;
            }
        }
        out[..sent].copy_from_slice(&outcome.result[..sent]);
        job.result = Some(outcome.result);
        self.stats.runs += 1;
        add(&mut self.stats.total, &outcome.stats);
        self.stats.last = Some(outcome.stats);
        Ok((total, done))
    }

    fn fetch(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>) -> Step {
        let t = ctx.start;
        let DataBuf::FromDevice(out) = data else {
            return Err((ctx.explain(Status::INVALID_FIELD, None, "FETCH returns a result to the host"), t));
        };
        let slot = sqe.cdw10 as usize;
        let result = match self.slots.get(slot) {
            None => return Err((ctx.explain(Status::INVALID_FIELD, Some(CDW10), self.no_slot(slot)), t)),
            Some(Some(Job { result: Some(r), .. })) => r,
            Some(_) => {
                let why = format!("slot {slot} has no result: RUN its job first");
                return Err((ctx.explain(Status::SEQUENCE_ERROR, Some(CDW10), why), t));
            }
        };
        let offset = u64::from(sqe.cdw12) | (u64::from(sqe.cdw13) << 32);
        let Some(rest) = usize::try_from(offset).ok().and_then(|o| result.get(o..)) else {
            let why = format!("offset {offset} (CDW12-13) is past the {}-byte result", result.len());
            return Err((ctx.explain(Status::INVALID_FIELD, Some(CDW12), why), t));
        };
        let n = rest.len().min(out.len());
        out[..n].copy_from_slice(&rest[..n]);
        let read = pipeline::dram_bursts(ctx, t, n as u64);
        self.stats.fetches += 1;
        Ok((n as u32, ctx.to_host(read, n as u64)))
    }
}

fn add(total: &mut JobStats, s: &JobStats) {
    total.input_bytes += s.input_bytes;
    total.fmc_pages += s.fmc_pages;
    total.cpu_pages += s.cpu_pages;
    total.flash_reads += s.flash_reads;
    total.partial_bytes += s.partial_bytes;
    total.result_bytes += s.result_bytes;
}

impl Extension for IssdExtension {
    fn name(&self) -> &str {
        NAME
    }

    fn attach(&mut self, ctx: &mut AttachCtx<'_>) -> SimResult<()> {
        let config = |e: crate::IssdError| SimError::Config(e.to_string());
        let mut params = AgentParams::from_section(ctx.section(NAME)).map_err(config)?;
        params.apply_json(&self.overrides).map_err(config)?;
        let channels = ctx.config().nand.channels.0 as u32;
        let fmc = ctx.add_units(&UnitSpec {
            name: UNIT_FMC.into(),
            count: channels,
            freq_hz: params.f_fmc,
            pj_per_cycle: params.e_proc_inst / params.fmc_cpi,
            static_mw: 0.0,
        })?;
        let sp = if params.stream_processors {
            // per-op energies are charged as the ops happen (see pipeline), not per cycle
            let spec = UnitSpec { name: UNIT_SP.into(), count: channels, freq_hz: params.f_fmc, pj_per_cycle: 0.0, static_mw: 0.0 };
            Some(ctx.add_units(&spec)?)
        } else {
            None
        };
        for op in [params.opcode_load, params.opcode_run, params.opcode_fetch] {
            ctx.claim_opcode(op)?;
        }
        self.slots = (0..params.job_slots as usize).map(|_| None).collect();
        self.units = Some(AgentUnits { fmc, sp });
        let level: Level = params.fmc_class_level.parse().map_err(|e| SimError::Config(format!("{NAME}: fmc_class_level: {e}")))?;
        self.fmc_class = Some(ctx.flash_class("fmc", level, params.fmc_class_weight as u32)?);
        self.params = params;
        Ok(())
    }

    fn execute(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>) -> ExtCompletion {
        let p = &self.params;
        let op = sqe.opcode;
        let step = if op == p.opcode_load {
            self.load(ctx, sqe, data)
        } else if op == p.opcode_run {
            if let Some(class) = self.fmc_class {
                ctx.use_class(class);
            }
            self.run(ctx, sqe, data)
        } else if op == p.opcode_fetch {
            self.fetch(ctx, sqe, data)
        } else {
            Err((Status::INVALID_OPCODE, ctx.start))
        };
        match step {
            Ok((dw0, done)) => ExtCompletion { status: Status::SUCCESS, dw0, done },
            Err((status, done)) => {
                self.stats.errors += 1;
                ExtCompletion { status, dw0: 0, done }
            }
        }
    }

    fn report(&self) -> serde_json::Value {
        serde_json::to_value(&self.stats).unwrap_or(serde_json::Value::Null)
    }
}

inventory::submit! {
    nearflash_core::ext::Registration {
        name: NAME,
        about: "iSSD (ICS'13): scan/filter/aggregate and Map kernels on per-channel FMCs and stream processors",
        build: |overrides, cfg| {
            let config = |e: crate::IssdError| SimError::Config(e.to_string());
            // Resolved against the device's preset now, so that bad overrides fail before anything is attached.
            let section = cfg.ext.get(NAME).and_then(|v| v.as_table());
            AgentParams::from_section(section).map_err(config)?.apply_json(overrides).map_err(config)?;
            Ok(Box::new(IssdExtension::new(overrides.clone()).map_err(config)?))
        },
    }
}
