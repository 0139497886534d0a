//! The extension: Computational Programs and Subsystem Local Memory commands on any preset.
//!
//! Costs, all booked on the device's shared timelines and energy ledger:
//! - Load Program: the chunk crosses the link; when the last chunk arrives the firmware relocates and verifies the
//!   program (`verify_instructions_per_instruction` per eBPF instruction on a controller core).
//! - Execute Program: parameters cross the link; dispatch (`execute_dispatch_instructions`); then the program's
//!   counted eBPF instructions x `native_per_ebpf_instruction` on one controller core (the preset's CPI, clock and
//!   energy per instruction), overlapped with its memory ranges streaming once through controller DRAM.
//! - Memory Copy: real flash reads through the FTL into SLM (`ExecCtx::flash_read`: NAND, channels, ECC, DRAM).
//! - Memory Read/Write: controller DRAM and the link.
//!
//! A command that fails validation changes nothing. SLM, range sets and programs are volatile (controller DRAM).

use crate::fixed;
use crate::flash_reads::DeviceReads;
use crate::params::ProgramsParams;
use crate::program::reads::{ReadLimits, Reads};
use crate::program::{self, Fault, Program};
use crate::slm::{MemoryRange, Slm};
use crate::status::{self, Refusal};
use crate::wire::{self, Command, ExecuteProgram, LoadProgram, MemoryAccess, MemoryCopy, RangeSetManagement, SourceRange};
use nearflash_core::ext::Time;
use nearflash_core::ext::{AttachCtx, ClassId, DataBuf, ExecCtx, ExtCompletion, Extension, Level, ReadTo, UnitHandle};
use nearflash_core::nvme::{Sqe, Status};
use nearflash_core::SimError;
use serde::Serialize;
use std::collections::BTreeMap;

/// Name the extension registers under.
pub const NAME: &str = "programs";

/// Bytes of the Identify (resources) data structure.
pub const IDENTIFY_BYTES: usize = 128;

/// Names of the Identify data structure's little-endian u64 fields, in order.
pub const IDENTIFY_FIELDS: [&str; 15] = [
    "slm_bytes",
    "max_programs",
    "max_activated",
    "max_program_bytes",
    "max_range_sets",
    "max_ranges_per_set",
    "max_param_bytes",
    "controller_cores",
    "core_hz",
    "instruction_budget",
    "programs_loaded",
    "programs_active",
    "range_sets",
    "first_device_program",
    "device_programs",
];

/// One program slot.
#[derive(Debug)]
enum Slot {
    /// Chunks received so far (in order), of a program `psize` bytes long.
    Loading { ptype: u8, psize: u32, pid: u64, bytes: Vec<u8> },
    Loaded { program: Box<Program>, pid: u64, active: bool },
    /// A device-defined program (`fixed::PROGRAMS[index]`).
    Fixed { index: usize, active: bool },
}

/// Cumulative counters (reported under `extensions.programs`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Stats {
    pub loads: u64,
    pub activations: u64,
    pub executions: u64,
    pub faulted_runs: u64,
    pub instructions: u64,
    pub copy_bytes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// The last run: eBPF instructions, full 64-bit return value (DW0 carries its low half), modelled ns, fault.
    pub last_instructions: u64,
    pub last_result: u64,
    pub last_run_ns: u64,
    pub last_fault: Option<String>,
    /// Flash reads of programs (helpers), their bytes, those that met an uncorrectable page, and the last run's.
    pub flash_reads: u64,
    pub flash_read_bytes: u64,
    pub flash_read_errors: u64,
    pub last_flash_reads: u64,
}

/// The extension.
pub struct ProgramsFirmware {
    overrides: serde_json::Value,
    params: ProgramsParams,
    slm: Slm,
    slots: BTreeMap<u16, Slot>,
    stats: Stats,
    errors: BTreeMap<&'static str, u64>,
    sls_unit: Option<UnitHandle>,
    /// The flash class of programs' device work (Memory Copy, Execute Program), declared at attach.
    exec_class: Option<ClassId>,
}

/// Fails the command at `done` with `r`, its reason going into the error log.
fn refuse(ctx: &mut ExecCtx<'_>, r: Refusal, done: Time) -> ExtCompletion {
    ExtCompletion::failed(ctx.explain(r.status, r.byte, r.why), done)
}

/// Command bytes of the fields the firmware checks, for the error log's parameter location.
const CDW2: u8 = 8;
const CDW10: u8 = 40;
const CDW11: u8 = 44;
const CDW12: u8 = 48;
const CDW14: u8 = 56;
const CDW15: u8 = 60;
/// Execute Program's data length (DPTR's lower dword, bytes 16..20).
const DLEN: u8 = 16;

impl ProgramsFirmware {
    pub fn new(overrides: serde_json::Value) -> Self {
        ProgramsFirmware {
            overrides,
            params: ProgramsParams::default(),
            slm: Slm::new(4096, 1, 1),
            slots: BTreeMap::new(),
            stats: Stats::default(),
            errors: BTreeMap::new(),
            sls_unit: None,
            exec_class: None,
        }
    }

    pub fn params(&self) -> &ProgramsParams {
        &self.params
    }

    /// The first device-defined program index.
    pub fn first_fixed_pind(&self) -> u16 {
        self.params.max_programs as u16 + 1
    }

    fn is_fixed(&self, pind: u16) -> bool {
        pind >= self.first_fixed_pind() && usize::from(pind - self.first_fixed_pind()) < fixed::PROGRAMS.len()
    }

    /// Checks program index `pind`, held at command byte `byte`.
    fn check_pind(&self, pind: u16, byte: u8) -> Result<(), Refusal> {
        if pind == 0 || (u64::from(pind) > self.params.max_programs && !self.is_fixed(pind)) {
            let first = self.first_fixed_pind();
            let last = first + fixed::PROGRAMS.len() as u16 - 1;
            let why = format!("PIND {pind}: expected 1..={} (downloadable) or {first}..={last} (device-defined)", self.params.max_programs);
            Err(Refusal::new(status::INVALID_PROGRAM_INDEX, Some(byte), why))
        } else {
            Ok(())
        }
    }

    fn activated(&self) -> usize {
        self.slots.values().filter(|s| matches!(s, Slot::Loaded { active: true, .. } | Slot::Fixed { active: true, .. })).count()
    }

    fn load(&mut self, ctx: &mut ExecCtx<'_>, l: LoadProgram, data: DataBuf<'_>) -> ExtCompletion {
        let t = ctx.start;
        if let Err(r) = self.check_pind(l.pind, CDW10) {
            return refuse(ctx, r, t);
        }
        if self.is_fixed(l.pind) {
            let why = format!("PIND {}: a device-defined program (downloadable ones are 1..={})", l.pind, self.params.max_programs);
            return refuse(ctx, Refusal::new(status::PROGRAM_INDEX_NOT_DOWNLOADABLE, Some(CDW10), why), t);
        }
        let active = matches!(self.slots.get(&l.pind), Some(Slot::Loaded { active: true, .. }));
        let in_use = |pind: u16| Refusal::new(status::PROGRAM_IN_USE, Some(CDW10), format!("PIND {pind}: the program is active (deactivate it first)"));
        if l.unload {
            return match self.slots.get(&l.pind) {
                None => refuse(ctx, Refusal::new(status::NO_PROGRAM, Some(CDW10), format!("PIND {}: no program is loaded there", l.pind)), t),
                Some(_) if active => refuse(ctx, in_use(l.pind), t),
                Some(_) => {
                    self.slots.remove(&l.pind);
                    ExtCompletion::ok(ctx.firmware(t, self.params.management_instructions))
                }
            };
        }
        if l.ptype != wire::PTYPE_EBPF_ELF {
            let why = format!("PTYPE (CDW10 bits 23:16) = {}: expected {} (eBPF ELF)", l.ptype, wire::PTYPE_EBPF_ELF);
            return refuse(ctx, Refusal::new(status::INVALID_PROGRAM_TYPE, Some(CDW10), why), t);
        }
        if l.psize == 0 || f64::from(l.psize) > self.params.max_program_bytes {
            let why = format!("PSIZE (CDW11) = {}: expected 1..={} bytes", l.psize, self.params.max_program_bytes);
            return refuse(ctx, Refusal::new(status::PROGRAM_TOO_BIG, Some(CDW11), why), t);
        }
        let chunk = match data {
            DataBuf::ToDevice(b) if b.len() >= l.numb as usize && l.numb > 0 => &b[..l.numb as usize],
            _ => return refuse(ctx, Refusal::field(CDW14, format!("NUMB (CDW14) = {}: expected 1 or more bytes, all in the data buffer", l.numb)), t),
        };
        if u64::from(l.loff) + u64::from(l.numb) > u64::from(l.psize) {
            let why = format!("LOFF (CDW15) {} + NUMB {}: past PSIZE {} (expected LOFF + NUMB <= PSIZE)", l.loff, l.numb, l.psize);
            return refuse(ctx, Refusal::field(CDW15, why), t);
        }
        if active {
            return refuse(ctx, in_use(l.pind), t);
        }
        let received = match self.slots.get(&l.pind) {
            Some(Slot::Loading { ptype, psize, pid, bytes }) if l.loff > 0 => {
                if (*ptype, *psize, *pid) != (l.ptype, l.psize, l.pid) {
                    let why = format!("PTYPE/PSIZE/PID ({}, {}, {}) differ from the download in progress at PIND {} ({ptype}, {psize}, {pid})", l.ptype, l.psize, l.pid, l.pind);
                    return refuse(ctx, Refusal::field(CDW10, why), t);
                }
                if bytes.len() != l.loff as usize {
                    let why = format!("LOFF (CDW15) = {}: expected {} (the bytes received so far)", l.loff, bytes.len());
                    return refuse(ctx, Refusal::field(CDW15, why), t);
                }
                bytes.len()
            }
            _ if l.loff > 0 => {
                let why = format!("LOFF (CDW15) = {}: expected 0 (no download in progress at PIND {})", l.loff, l.pind);
                return refuse(ctx, Refusal::field(CDW15, why), t);
            }
            _ => 0,
        };
        let arrived = ctx.from_host(t, u64::from(l.numb));
        let (mut bytes, previous) = match self.slots.remove(&l.pind) {
            Some(Slot::Loading { bytes, .. }) if received > 0 => (bytes, None),
            other => (Vec::with_capacity(l.psize as usize), other),
        };
        bytes.extend_from_slice(chunk);
        if bytes.len() < l.psize as usize {
            self.slots.insert(l.pind, Slot::Loading { ptype: l.ptype, psize: l.psize, pid: l.pid, bytes });
            return ExtCompletion::ok(ctx.dram(arrived, u64::from(l.numb)));
        }
        let max_insns = self.params.max_program_instructions as usize;
        match program::prepare(&bytes, self.params.max_program_bytes as usize, max_insns) {
            Ok(p) => {
                let work = self.params.verify_instructions_per_instruction * p.instructions() as f64;
                self.stats.loads += 1;
                self.slots.insert(l.pind, Slot::Loaded { program: Box::new(p), pid: l.pid, active: false });
                ExtCompletion::ok(ctx.firmware(arrived, work))
            }
            Err(why) => {
                // A one-command download that is refused leaves the slot as it was (a multi-command one has
                // replaced it with its first chunk, as FEMU/CEMU do).
                if let (0, Some(p @ Slot::Loaded { .. })) = (received, previous) {
                    self.slots.insert(l.pind, p);
                }
                self.stats.last_fault = Some(format!("load refused: {why}"));
                let work = self.params.verify_instructions_per_instruction * (bytes.len() / 8) as f64;
                let done = ctx.firmware(arrived, work);
                refuse(ctx, Refusal::new(status::INVALID_PROGRAM_DATA, None, format!("the program does not verify: {why}")), done)
            }
        }
    }

    fn activation(&mut self, ctx: &mut ExecCtx<'_>, pind: u16, activate: bool) -> ExtCompletion {
        let t = ctx.start;
        if let Err(r) = self.check_pind(pind, CDW10) {
            return refuse(ctx, r, t);
        }
        let room = (self.activated() as u64) < self.params.max_activated;
        let max = self.params.max_activated;
        match self.slots.get_mut(&pind) {
            Some(Slot::Loaded { active, .. } | Slot::Fixed { active, .. }) => {
                if activate && !*active && !room {
                    let why = format!("PIND {pind}: {max} programs are active already, the most allowed (deactivate one first)");
                    return refuse(ctx, Refusal::new(status::MAX_PROGRAMS_ACTIVATED, Some(CDW10), why), t);
                }
                *active = activate;
                self.stats.activations += u64::from(activate);
                ExtCompletion::ok(ctx.firmware(t, self.params.management_instructions))
            }
            _ => refuse(ctx, Refusal::new(status::NO_PROGRAM, Some(CDW10), format!("PIND {pind}: no program is loaded there")), t),
        }
    }

    fn range_set(&mut self, ctx: &mut ExecCtx<'_>, r: RangeSetManagement, data: DataBuf<'_>) -> ExtCompletion {
        let t = ctx.start;
        match r {
            RangeSetManagement::Delete { rsid } => match self.slm.delete_set(rsid) {
                Ok(()) => ExtCompletion::ok(ctx.firmware(t, self.params.management_instructions)),
                Err(r) => refuse(ctx, r, t),
            },
            RangeSetManagement::Create { numr } => {
                if numr == 0 {
                    return refuse(ctx, Refusal::field(CDW11, format!("NUMR (CDW11) = 0: expected 1..={} ranges", self.slm.max_ranges())), t);
                }
                if usize::from(numr) > self.slm.max_ranges() {
                    let mut r = self.slm.too_many(usize::from(numr));
                    r.byte = Some(CDW11);
                    return refuse(ctx, r, t);
                }
                let DataBuf::ToDevice(b) = data else {
                    return refuse(ctx, Refusal::new(Status::INVALID_FIELD, None, "create carries its range descriptors to the device: no data given"), t);
                };
                let ranges = match MemoryRange::decode_all(b, usize::from(numr)) {
                    Ok(r) => r,
                    Err(r) => return refuse(ctx, r, t),
                };
                let bytes = (usize::from(numr) * wire::RANGE_DESCRIPTOR_BYTES) as u64;
                let arrived = ctx.from_host(t, bytes);
                match self.slm.create_set(ranges) {
                    Ok(rsid) => ExtCompletion { status: Status::SUCCESS, dw0: u32::from(rsid), done: ctx.firmware(arrived, self.params.management_instructions) },
                    Err(r) => refuse(ctx, r, arrived),
                }
            }
        }
    }

    fn execute_program(&mut self, ctx: &mut ExecCtx<'_>, e: ExecuteProgram, data: DataBuf<'_>) -> ExtCompletion {
        let t = ctx.start;
        if let Err(r) = self.check_pind(e.pind, CDW2) {
            return refuse(ctx, r, t);
        }
        let program = match self.slots.get(&e.pind) {
            Some(Slot::Loaded { program, active: true, .. }) => Some(program),
            Some(Slot::Fixed { active: true, .. }) => None,
            Some(Slot::Loaded { .. } | Slot::Fixed { .. }) => {
                let why = format!("PIND {}: the program is loaded but not active (activate it first)", e.pind);
                return refuse(ctx, Refusal::new(status::PROGRAM_NOT_ACTIVATED, Some(CDW2), why), t);
            }
            _ => return refuse(ctx, Refusal::new(status::NO_PROGRAM, Some(CDW2), format!("PIND {}: no program is loaded there", e.pind)), t),
        };
        let payload: &[u8] = match data {
            DataBuf::ToDevice(b) if b.len() >= e.dlen as usize => &b[..e.dlen as usize],
            DataBuf::None if e.dlen == 0 => &[],
            _ => return refuse(ctx, Refusal::field(DLEN, format!("data length (bytes 16..20) = {}: expected the length of the data buffer", e.dlen)), t),
        };
        let (ranges, params) = if e.rsid != 0 {
            match self.slm.set(e.rsid, CDW2 + 2) {
                Ok(r) => (r.to_vec(), payload),
                Err(r) => return refuse(ctx, r, t),
            }
        } else {
            if e.numr as usize > self.slm.max_ranges() {
                let mut r = self.slm.too_many(e.numr as usize);
                r.byte = Some(12);
                return refuse(ctx, r, t);
            }
            let inline = match MemoryRange::decode_all(payload, e.numr as usize) {
                Ok(r) => r,
                Err(r) => return refuse(ctx, r, t),
            };
            if let Err(r) = self.slm.validate(&inline) {
                return refuse(ctx, r, t);
            }
            (inline, &payload[e.numr as usize * wire::RANGE_DESCRIPTOR_BYTES..])
        };
        if params.len() as f64 > self.params.max_param_bytes {
            let why = format!("{} bytes of parameter data: expected at most {}", params.len(), self.params.max_param_bytes);
            return refuse(ctx, Refusal::field(DLEN, why), t);
        }
        // Ranges of the NVM namespace name the blocks the program may read (`program::reads`); the others are SLM.
        let (flash, ranges): (Vec<MemoryRange>, Vec<MemoryRange>) = ranges.into_iter().partition(|r| r.nsid == wire::nsid::NVM);
        let extents = match Self::extents(&flash, ctx.lba_bytes(), ctx.lbas()) {
            Ok(x) => x,
            Err(r) => return refuse(ctx, r, t),
        };
        let arrived = if e.dlen > 0 { ctx.from_host(t, u64::from(e.dlen)) } else { t };
        let dispatched = ctx.firmware(arrived, self.params.execute_dispatch_instructions);
        let mut views = self.slm.views(&ranges);
        let Some(program) = program else {
            // A device-defined program: the fixed-function SLS unit.
            let unit = self.sls_unit.expect("declared at attach");
            let r = fixed::sls_f32(ctx, unit, self.params.sls_unit_lanes, &mut views, e.cparam1, dispatched);
            self.stats.executions += 1;
            self.stats.last_instructions = 0;
            return match r {
                Ok((bags, done)) => {
                    self.stats.last_result = bags;
                    self.stats.last_fault = None;
                    self.stats.last_run_ns = done - t;
                    ExtCompletion { status: Status::SUCCESS, dw0: bags as u32, done }
                }
                Err(fixed::Refused(why)) => {
                    self.stats.faulted_runs += 1;
                    ctx.explain(status::INVALID_PROGRAM_DATA, None, format!("device-defined program {} refused its input: {why}", e.pind));
                    self.stats.last_fault = Some(why);
                    ExtCompletion { status: status::INVALID_PROGRAM_DATA, dw0: 5, done: dispatched }
                }
            };
        };
        let program: &Program = program;
        let lba_bytes = ctx.lba_bytes();
        let limits = ReadLimits { extents: extents.clone(), budget: self.params.read_budget, max_bytes: self.params.max_read_bytes as u64 };
        let path = DeviceReads { ctx: &mut *ctx, native_per_ebpf: self.params.native_per_ebpf_instruction };
        let mut reads = Reads::new(path, limits, dispatched);
        let run = program.run_with(&mut views, params, (e.cparam1, e.cparam2), self.params.instruction_budget, (lba_bytes, &extents), Some(&mut reads));
        // The instructions in segments between helper calls, each from when the program could go on.
        let computed = reads.finish(run.instructions);
        let r = reads.stats;
        self.stats.flash_reads += r.reads;
        self.stats.flash_read_bytes += r.bytes;
        self.stats.flash_read_errors += r.failed;
        self.stats.last_flash_reads = r.reads;
        let bytes: u64 = ranges.iter().map(|r| u64::from(r.length)).sum();
        let streamed = if bytes > 0 { ctx.dram(dispatched, bytes) } else { dispatched };
        let done = computed.max(streamed);
        self.stats.executions += 1;
        self.stats.instructions += run.instructions;
        self.stats.last_instructions = run.instructions;
        self.stats.last_run_ns = done - t;
        match run.result {
            Ok(v) => {
                self.stats.last_result = v;
                self.stats.last_fault = None;
                ExtCompletion { status: Status::SUCCESS, dw0: v as u32, done }
            }
            Err(f) => {
                self.stats.faulted_runs += 1;
                self.stats.last_fault = Some(format!("{f:?}"));
                let s = match f {
                    Fault::OutOfRange(_) => status::INVALID_MEMORY_RANGE_SET,
                    Fault::ReadOutside(_) => Status::LBA_OUT_OF_RANGE,
                    Fault::Budget | Fault::ReadBudget(_) => status::INSUFFICIENT_RESOURCES,
                    _ => status::INVALID_PROGRAM_DATA,
                };
                let why = match f {
                    Fault::Budget => format!("the program ran past its budget of {} instructions", self.params.instruction_budget),
                    _ => format!("the program stopped after {} instructions: {f:?}", run.instructions),
                };
                ctx.explain(s, None, why);
                ExtCompletion { status: s, dw0: f.code(), done }
            }
        }
    }

    /// The `(first LBA, blocks)` of the NVM-namespace ranges of an Execute Program: whole blocks inside the
    /// namespace (`lbas` blocks of `lba_bytes`), else Invalid Memory Range Set.
    fn extents(flash: &[MemoryRange], lba_bytes: u64, lbas: u64) -> Result<Vec<(u64, u64)>, Refusal> {
        flash
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let (slba, nlb) = (r.sb / lba_bytes, u64::from(r.length) / lba_bytes);
                if r.sb % lba_bytes != 0 || u64::from(r.length) % lba_bytes != 0 || nlb == 0 || slba.saturating_add(nlb) > lbas {
                    let why = format!(
                        "NVM range {i}: {} bytes from byte {}: expected whole {lba_bytes}-byte blocks inside the namespace's {lbas}",
                        r.length, r.sb
                    );
                    return Err(Refusal::new(status::INVALID_MEMORY_RANGE_SET, None, why));
                }
                Ok((slba, nlb))
            })
            .collect()
    }

    fn memory_copy(&mut self, ctx: &mut ExecCtx<'_>, c: MemoryCopy, data: DataBuf<'_>) -> ExtCompletion {
        let t = ctx.start;
        let DataBuf::ToDevice(b) = data else {
            return refuse(ctx, Refusal::new(Status::INVALID_FIELD, None, "Memory Copy carries its source ranges to the device: no data given"), t);
        };
        let sources = match SourceRange::decode_all(b, c.ranges as usize) {
            Ok(s) => s,
            Err(r) => return refuse(ctx, r, t),
        };
        let lba = ctx.lba_bytes();
        let mut total = 0u64;
        for (i, s) in sources.iter().enumerate() {
            if s.nsid != wire::nsid::NVM {
                let why = format!("source range {i}: NSID {} is not the NVM namespace ({})", s.nsid, wire::nsid::NVM);
                return refuse(ctx, Refusal::new(Status::INVALID_NAMESPACE, None, why), t);
            }
            match s.slba.checked_add(u64::from(s.nlb)) {
                Some(end) if end <= ctx.lbas() => {}
                _ => {
                    let why = format!("source range {i}: {} blocks from LBA {}: beyond the namespace's {} blocks", s.nlb, s.slba, ctx.lbas());
                    return refuse(ctx, Refusal::new(Status::LBA_OUT_OF_RANGE, None, why), t);
                }
            }
            total += u64::from(s.nlb) * lba;
        }
        let span = match self.slm.span(c.sdaddr, total, "SDADDR (CDW10-11)", CDW10) {
            Ok(s) => s,
            Err(r) => return refuse(ctx, r, t),
        };
        let arrived = ctx.from_host(t, (sources.len() * wire::RANGE_DESCRIPTOR_BYTES) as u64);
        let mut done = arrived;
        let mut at = span.start;
        let chunk = self.params.copy_chunk_blocks;
        for s in sources {
            let mut lba_at = s.slba;
            let end = s.slba + u64::from(s.nlb);
            while lba_at < end {
                let n = (end - lba_at).min(chunk);
                let len = (n * lba) as usize;
                // written into SLM (controller DRAM) once; Execute Program books its own read of it
                match ctx.flash_read(arrived, lba_at, n as u32, ReadTo::DramKept, self.slm.bytes_mut(at..at + len)) {
                    Ok(r) => done = done.max(r.done),
                    Err(st) => return refuse(ctx, Refusal::new(st, None, format!("LBAs {lba_at}..{} could not be read from flash", lba_at + n)), done),
                }
                at += len;
                lba_at += n;
            }
        }
        self.stats.copy_bytes += total;
        ExtCompletion::ok(done)
    }

    fn memory_io(&mut self, ctx: &mut ExecCtx<'_>, a: MemoryAccess, data: DataBuf<'_>, read: bool) -> ExtCompletion {
        let t = ctx.start;
        let span = match self.slm.span(a.sb, u64::from(a.length), "SB (CDW10-11)", CDW10) {
            Ok(s) => s,
            Err(r) => return refuse(ctx, r, t),
        };
        let len = u64::from(a.length);
        match (data, read) {
            (DataBuf::FromDevice(out), true) if out.len() >= span.len() => {
                out[..span.len()].copy_from_slice(self.slm.bytes(span));
                self.stats.read_bytes += len;
                let from_dram = ctx.dram(t, len);
                ExtCompletion::ok(ctx.to_host(from_dram, len))
            }
            (DataBuf::ToDevice(src), false) if src.len() >= span.len() => {
                let n = span.len();
                self.slm.bytes_mut(span).copy_from_slice(&src[..n]);
                self.stats.write_bytes += len;
                let arrived = ctx.from_host(t, len);
                ExtCompletion::ok(ctx.dram(arrived, len))
            }
            _ => {
                let dir = if read { "from" } else { "to" };
                refuse(ctx, Refusal::field(CDW12, format!("length (CDW12) = {len}: the data buffer {dir} the device must hold that many bytes")), t)
            }
        }
    }

    /// The resources data structure (little-endian u64 fields; docs/programs.md "Identify").
    pub fn identify_data(&self, cores: u32, core_hz: f64) -> [u8; IDENTIFY_BYTES] {
        let p = &self.params;
        let fields = [
            self.slm.capacity(),
            p.max_programs,
            p.max_activated,
            p.max_program_bytes as u64,
            p.max_range_sets,
            p.max_ranges_per_set,
            p.max_param_bytes as u64,
            u64::from(cores),
            core_hz as u64,
            p.instruction_budget,
            self.slots.values().filter(|s| matches!(s, Slot::Loaded { .. } | Slot::Fixed { .. })).count() as u64,
            self.activated() as u64,
            self.slm.sets() as u64,
            u64::from(self.first_fixed_pind()),
            fixed::PROGRAMS.len() as u64,
        ];
        let mut out = [0u8; IDENTIFY_BYTES];
        for (i, v) in fields.iter().enumerate() {
            out[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
        out
    }

    fn identify(&mut self, ctx: &mut ExecCtx<'_>, data: DataBuf<'_>) -> ExtCompletion {
        let t = ctx.start;
        let bad = Refusal::new(Status::INVALID_FIELD, None, format!("Identify Resources returns {IDENTIFY_BYTES} bytes: the data buffer from the device must hold them"));
        let out = match data {
            DataBuf::FromDevice(out) if out.len() >= IDENTIFY_BYTES => out,
            _ => return refuse(ctx, bad, t),
        };
        let d = self.identify_data(ctx.controller_cores(), ctx.config().controller.core_freq.0);
        out[..IDENTIFY_BYTES].copy_from_slice(&d);
        let done = ctx.firmware(t, self.params.management_instructions);
        ExtCompletion::ok(ctx.to_host(done, IDENTIFY_BYTES as u64))
    }
}

impl Extension for ProgramsFirmware {
    fn name(&self) -> &str {
        NAME
    }

    fn attach(&mut self, ctx: &mut AttachCtx<'_>) -> nearflash_core::Result<()> {
        let p = ProgramsParams::resolve(ctx.section(NAME), &self.overrides)
            .map_err(|e| SimError::Config(format!("{NAME}: {e}")))?;
        let dram = ctx.config().controller.dram_size.0 as f64;
        if p.slm_bytes > dram {
            return Err(SimError::Config(format!("{NAME}: slm_bytes {} exceeds the controller DRAM ({dram} B)", p.slm_bytes)));
        }
        for op in wire::opcode::ALL {
            ctx.claim_opcode(op)?;
        }
        self.slm = Slm::new(p.slm_bytes as u64, p.max_range_sets as usize, p.max_ranges_per_set as usize);
        self.sls_unit = Some(ctx.add_units(&fixed::unit_spec(p.sls_unit_clock, p.sls_unit_pj_per_cycle))?);
        let level: Level = p.exec_class_level.parse().map_err(|e| SimError::Config(format!("{NAME}: exec_class_level: {e}")))?;
        self.exec_class = Some(ctx.flash_class("exec", level, p.exec_class_weight as u32)?);
        self.params = p;
        let first = self.first_fixed_pind();
        for index in 0..fixed::PROGRAMS.len() {
            self.slots.insert(first + index as u16, Slot::Fixed { index, active: false });
        }
        Ok(())
    }

    fn execute(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>) -> ExtCompletion {
        let c = match Command::decode(sqe) {
            Ok(c) => c,
            Err(r) => {
                *self.errors.entry(status::name(r.status)).or_default() += 1;
                let t = ctx.start;
                return refuse(ctx, r, t);
            }
        };
        if let (Command::Execute(_) | Command::Copy(_), Some(class)) = (&c, self.exec_class) {
            ctx.use_class(class);
        }
        let done = match c {
            Command::Load(l) => self.load(ctx, l, data),
            Command::Activation(a) => self.activation(ctx, a.pind, a.activate),
            Command::RangeSet(r) => self.range_set(ctx, r, data),
            Command::Execute(e) => self.execute_program(ctx, e, data),
            Command::Copy(c) => self.memory_copy(ctx, c, data),
            Command::Read(a) => self.memory_io(ctx, a, data, true),
            Command::Write(a) => self.memory_io(ctx, a, data, false),
            Command::Identify => self.identify(ctx, data),
        };
        if !done.status.is_success() {
            *self.errors.entry(status::name(done.status)).or_default() += 1;
        }
        done
    }

    fn report(&self) -> serde_json::Value {
        serde_json::json!({
            "stats": self.stats,
            "errors": self.errors,
            "programs": self.slots.iter().map(|(pind, s)| match s {
                Slot::Loading { psize, bytes, .. } => serde_json::json!({"pind": pind, "state": "loading", "received": bytes.len(), "size": psize}),
                Slot::Loaded { program, active, pid } => serde_json::json!({
                    "pind": pind, "state": if *active { "active" } else { "loaded" }, "entry": program.entry_name(),
                    "instructions": program.instructions(), "pid": pid,
                }),
                Slot::Fixed { index, active } => serde_json::json!({
                    "pind": pind, "state": if *active { "active" } else { "loaded" }, "device_defined": fixed::PROGRAMS[*index].0,
                    "about": fixed::PROGRAMS[*index].1,
                }),
            }).collect::<Vec<_>>(),
            "range_sets": self.slm.sets(),
            "slm_bytes": self.slm.capacity(),
        })
    }

    fn reset_stats(&mut self) {
        self.stats = Stats::default();
        self.errors.clear();
    }
}

inventory::submit! {
    nearflash_core::ext::Registration {
        name: NAME,
        about: "NVMe Computational Programs 1.0 + Subsystem Local Memory 1.0: eBPF programs (clang -target bpf) with counted instructions",
        build: |overrides, cfg| {
            ProgramsParams::resolve(cfg.ext.get(NAME).and_then(|v| v.as_table()), overrides)
                .map_err(|e| SimError::Config(format!("{NAME}: {e}")))?;
            Ok(Box::new(ProgramsFirmware::new(overrides.clone())))
        },
    }
}
