//! Running a loaded program: Anza's `solana-sbpf` interpreter (a maintained fork of rbpf) in its SBPF v3 mode,
//! whose encoding is standard eBPF's (pc-relative local calls, 64-bit immediate loads, the eBPF memory classes).
//! Its interpreter meters every executed instruction against a budget (`ContextObject::consume`): the count it
//! returns is what the cost model charges, and a run that exhausts the budget stops with a fault. The JIT is not
//! built, so counts never depend on the host.
//!
//! VM memory (every access is translated and bounds-checked; anything else is an access violation):
//!
//! | VM address          | what                                    | access     |
//! |---------------------|-----------------------------------------|------------|
//! | `1 << 32`           | the program's read-only data            | read       |
//! | `2 << 32`           | stack, 512 B per frame, 8 frames        | read/write |
//! | `3 << 32`           | the program's writable data (fresh)     | read/write |
//! | `4 << 32`           | the context (`struct nf_ctx`), params   | read       |
//! | `(5 + i) << 32`     | memory range `i` of the range set       | read/write |
//!
//! Helper calls (`call 1..3`, `reads`) reach a [`FlashIo`] given to the run: the VM stops in the call, the
//! helper maps the destination (a store into the program's memory, checked as any other), and the run goes on
//! with the result in r0.

use super::elf::{ProgramImage, DATA_VADDR, RODATA_VADDR};
use super::reads::{Call, FlashIo, HELPERS, NF_READ, NF_READ_START, NF_READ_WAIT};
use super::verify::{self, STACK_FRAME};
use solana_sbpf::ebpf;
use solana_sbpf::elf::Executable;
use solana_sbpf::error::{EbpfError, ProgramResult, StableResult};
use solana_sbpf::memory_region::{AccessType, HostBuffer, MemoryMapping, MemoryRegion};
use solana_sbpf::program::{BuiltinFunctionDefinition, BuiltinProgram, FunctionRegistry, SBPFVersion};
use solana_sbpf::verifier::RequisiteVerifier;
use solana_sbpf::vm::{CallFrame, Config, ContextObject, EbpfVm, ExecutionMode};
use std::ptr::NonNull;
use std::sync::Arc;

/// VM address of the context.
pub const CTX_VADDR: u64 = 4 << 32;
/// Most memory ranges a program sees (the context's fixed array).
pub const MAX_RANGES: usize = 16;
/// Call frames (eBPF's limit).
pub const MAX_CALL_DEPTH: usize = 8;
/// Most LBA ranges a run may read (the context's fixed array).
pub const MAX_EXTENTS: usize = 16;
/// Bytes of `struct nf_ctx` before its parameter data.
pub const CTX_BYTES: usize = 5 * 8 + MAX_RANGES * 16 + 16 + MAX_EXTENTS * 16;

/// VM address of memory range `i`.
pub fn range_vaddr(i: usize) -> u64 {
    (5 + i as u64) << 32
}

/// The instruction meter, the memory mapping and the helpers' reads of one run.
struct Meter {
    remaining: u64,
    budget: u64,
    mapping: MemoryMapping,
    /// The run's reads (`run_with`); valid only while `run_with` runs.
    io: Option<NonNull<dyn FlashIo>>,
    /// Why a helper stopped the run.
    fault: Option<Fault>,
}

/// The VM's error for a helper that stopped the run (the fault itself is in `Meter::fault`).
#[derive(Debug, thiserror::Error)]
#[error("a helper stopped the run")]
struct Stopped;

impl Meter {
    fn stop(&mut self, f: Fault) -> Result<u64, Stopped> {
        self.fault = Some(f);
        Err(Stopped)
    }

    /// Helper `id` with arguments r1-r4.
    fn helper(&mut self, id: u32, a: [u64; 4]) -> Result<u64, Stopped> {
        let executed = self.budget - self.remaining;
        let Some(mut io) = self.io else {
            return self.stop(Fault::Other(format!("helper {id} called where no flash is given to the run")));
        };
        let (call, dst) = match id {
            NF_READ | NF_READ_START => {
                let (lba, offset) = (a[0], a[1]);
                let dst: &mut [u8] = if a[3] == 0 {
                    &mut []
                } else {
                    match self.mapping.map(AccessType::Store, a[2], a[3]) {
                        // SAFETY: the mapping checked that `a[3]` bytes from `a[2]` lie in one writable region, whose
                        // host memory outlives the run; the VM is stopped in this call, so nothing else touches it.
                        StableResult::Ok(HostBuffer::Mutable(p)) => unsafe { &mut *p },
                        _ => return self.stop(Fault::OutOfRange(format!("helper {id}: {} bytes at {:#x} are not writable memory of the program", a[3], a[2]))),
                    }
                };
                (if id == NF_READ { Call::Read { lba, offset } } else { Call::Start { lba, offset } }, dst)
            }
            NF_READ_WAIT => (Call::Wait { tag: a[0] }, &mut [][..]),
            _ => return self.stop(Fault::Other(format!("unknown helper {id}"))),
        };
        // SAFETY: `io` points at the `FlashIo` borrowed by `run_with` for the whole run (see there).
        match unsafe { io.as_mut() }.call(executed, call, dst) {
            Ok(v) => Ok(v as u64),
            Err(f) => self.stop(f),
        }
    }
}

/// The VM's entry for helper `ID`.
struct Helper<const ID: u32>;

impl<const ID: u32> BuiltinFunctionDefinition<Meter> for Helper<ID> {
    type Error = Stopped;
    fn rust(m: &mut Meter, a: u64, b: u64, c: u64, d: u64, _e: u64) -> Result<u64, Stopped> {
        m.helper(ID, [a, b, c, d])
    }
}

/// The VM's key of helper `id` (its name's hash: the loader's registry is keyed so).
pub(crate) fn helper_key(id: u32) -> Option<u32> {
    HELPERS.iter().find(|h| h.0 == id).map(|h| ebpf::hash_symbol_name(h.1.as_bytes()))
}

impl ContextObject for Meter {
    fn consume(&mut self, amount: u64) {
        self.remaining = self.remaining.saturating_sub(amount);
    }
    fn get_remaining(&self) -> u64 {
        self.remaining
    }
    fn active_mapping_ptr(&mut self) -> NonNull<MemoryMapping> {
        NonNull::from(&mut self.mapping)
    }
}

/// Why a run stopped early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// A load or store outside the program's memory (its range set, context, data, stack).
    OutOfRange(String),
    /// A flash read outside the LBA ranges named at Execute.
    ReadOutside(String),
    /// The run's read budget (reads per execution) ran out.
    ReadBudget(u64),
    /// The instruction budget ran out (an unbounded or too long loop).
    Budget,
    /// Division by zero or signed overflow (eBPF would return 0; stopping is this implementation's choice).
    Arithmetic,
    /// More than `MAX_CALL_DEPTH` nested calls.
    CallDepth,
    Other(String),
}

impl Fault {
    /// A code for the completion's DW0 (docs/programs.md).
    pub fn code(&self) -> u32 {
        match self {
            Fault::OutOfRange(_) => 1,
            Fault::Budget => 2,
            Fault::Arithmetic => 3,
            Fault::CallDepth => 4,
            Fault::Other(_) => 5,
            Fault::ReadOutside(_) => 6,
            Fault::ReadBudget(_) => 7,
        }
    }
}

/// What a finished (or stopped) run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    /// eBPF instructions executed (counted by the interpreter).
    pub instructions: u64,
    pub result: Result<u64, Fault>,
}

/// A verified program, ready to run any number of times.
pub struct Program {
    image: ProgramImage,
    exe: Executable<Meter>,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program").field("entry", &self.image.entry_name).field("insns", &self.instructions()).finish()
    }
}

fn config() -> Config {
    Config {
        max_call_depth: MAX_CALL_DEPTH,
        stack_frame_size: STACK_FRAME as usize,
        enable_instruction_meter: true,
        enabled_sbpf_versions: SBPFVersion::V3..=SBPFVersion::V3,
        ..Config::default()
    }
}

impl Program {
    /// Verifies (nearflash's pass, then the VM's) and prepares `image`.
    pub fn new(image: ProgramImage, max_insns: usize) -> Result<Program, String> {
        verify::verify(&image.text, image.entry_pc, max_insns.min(ebpf::PROG_MAX_INSNS)).map_err(|e| e.to_string())?;
        let mut loader = BuiltinProgram::<Meter>::new_loader(config());
        let entries = [
            (Helper::<NF_READ>::vm as _, Helper::<NF_READ>::codegen as _),
            (Helper::<NF_READ_START>::vm as _, Helper::<NF_READ_START>::codegen as _),
            (Helper::<NF_READ_WAIT>::vm as _, Helper::<NF_READ_WAIT>::codegen as _),
        ];
        for ((_, name), entry) in HELPERS.iter().zip(entries) {
            loader.register_function(name, entry).map_err(|e| e.to_string())?;
        }
        let loader = Arc::new(loader);
        let mut image = image;
        verify::bind_helpers(&mut image.text, helper_key);
        let mut functions = FunctionRegistry::<usize>::default();
        functions
            .register_function(image.entry_pc as u32, *b"entrypoint", image.entry_pc)
            .map_err(|e| e.to_string())?;
        let exe = Executable::from_text_bytes(&image.text, loader, SBPFVersion::V3, functions).map_err(|e| e.to_string())?;
        exe.verify::<RequisiteVerifier>().map_err(|e| e.to_string())?;
        Ok(Program { image, exe })
    }

    pub fn instructions(&self) -> usize {
        self.image.text.len() / 8
    }

    pub fn entry_name(&self) -> &str {
        &self.image.entry_name
    }

    /// Runs once over `ranges` (mapped in order) with `params` and the two command parameters, stopping after
    /// `budget` instructions; no flash is given (a helper call stops the run).
    pub fn run(&self, ranges: &mut [&mut [u8]], params: &[u8], cparams: (u64, u64), budget: u64) -> RunOutcome {
        self.run_with(ranges, params, cparams, budget, (0, &[]), None)
    }

    /// As `run`, with `flash`: the bytes per logical block and the LBA ranges the run may read (`(first LBA,
    /// blocks)`, listed in the context), and `io` serving the program's helper calls.
    pub fn run_with(
        &self,
        ranges: &mut [&mut [u8]],
        params: &[u8],
        cparams: (u64, u64),
        budget: u64,
        flash: (u64, &[(u64, u64)]),
        io: Option<&mut dyn FlashIo>,
    ) -> RunOutcome {
        let (lba_bytes, extents) = flash;
        if ranges.len() > MAX_RANGES || extents.len() > MAX_EXTENTS {
            return RunOutcome { instructions: 0, result: Err(Fault::Other("too many ranges".into())) };
        }
        let mut ctx = vec![0u8; CTX_BYTES + params.len()];
        let mut put = |at: usize, v: u64| ctx[at..at + 8].copy_from_slice(&v.to_le_bytes());
        put(0, ranges.len() as u64);
        put(8, cparams.0);
        put(16, cparams.1);
        put(24, if params.is_empty() { 0 } else { CTX_VADDR + CTX_BYTES as u64 });
        put(32, params.len() as u64);
        for (i, r) in ranges.iter().enumerate() {
            put(40 + 16 * i, range_vaddr(i));
            put(48 + 16 * i, r.len() as u64);
        }
        let at = 40 + 16 * MAX_RANGES;
        put(at, lba_bytes);
        put(at + 8, extents.len() as u64);
        for (i, &(slba, nlb)) in extents.iter().enumerate() {
            put(at + 16 + 16 * i, slba);
            put(at + 24 + 16 * i, nlb);
        }
        ctx[CTX_BYTES..].copy_from_slice(params);
        let cfg = self.exe.get_config();
        let mut stack = vec![0u8; cfg.stack_size()];
        let mut data = self.image.data.clone();
        let mut regions = vec![
            MemoryRegion::new(self.image.rodata.as_slice() as *const [u8], RODATA_VADDR),
            MemoryRegion::new(stack.as_mut_slice() as *mut [u8], ebpf::MM_STACK_START),
            MemoryRegion::new(data.as_mut_slice() as *mut [u8], DATA_VADDR),
            MemoryRegion::new(ctx.as_slice() as *const [u8], CTX_VADDR),
        ];
        for (i, r) in ranges.iter_mut().enumerate() {
            regions.push(MemoryRegion::new(&mut **r as *mut [u8], range_vaddr(i)));
        }
        // SAFETY: every region's host memory (the image, `stack`, `data`, `ctx`, the caller's ranges, which are
        // disjoint borrows) outlives `meter`, which is dropped at the end of this function, and is not touched
        // through any other path while the VM runs.
        let mapping = match unsafe { MemoryMapping::new(regions, cfg, SBPFVersion::V3) } {
            Ok(m) => m,
            Err(e) => return RunOutcome { instructions: 0, result: Err(Fault::Other(e.to_string())) },
        };
        // SAFETY (of the lifetime erased here): `meter`, the only holder of the pointer, is dropped before this
        // function returns, so the pointer never outlives the `io` borrow.
        let io = io.map(|io| unsafe { std::mem::transmute::<NonNull<dyn FlashIo + '_>, NonNull<dyn FlashIo + 'static>>(NonNull::from(io)) });
        let mut meter = Meter { remaining: budget, budget, mapping, io, fault: None };
        let loader = self.exe.get_loader().clone();
        let mut vm = EbpfVm::new(loader, SBPFVersion::V3, &mut meter, stack.len());
        vm.registers[1] = CTX_VADDR;
        let mut frames = vec![CallFrame::default(); cfg.max_call_depth];
        let (count, result) = vm.execute_program(&self.exe, &mut ExecutionMode::Interpreted, &mut frames);
        let result = match result {
            ProgramResult::Ok(v) => Ok(v),
            ProgramResult::Err(e) => Err(match e {
                EbpfError::AccessViolation(..) | EbpfError::StackAccessViolation(..) => Fault::OutOfRange(e.to_string()),
                EbpfError::ExceededMaxInstructions => Fault::Budget,
                EbpfError::DivideByZero | EbpfError::DivideOverflow => Fault::Arithmetic,
                EbpfError::CallDepthExceeded => Fault::CallDepth,
                EbpfError::SyscallError(_) => meter.fault.take().unwrap_or_else(|| Fault::Other("a helper failed".into())),
                other => Fault::Other(other.to_string()),
            }),
        };
        RunOutcome { instructions: count, result }
    }
}

#[cfg(test)]
mod tests {
    use super::super::elf::{load, minimal_object};
    use super::super::reads::{ReadLimits, ReadPath, Reads};
    use super::*;
    use nearflash_core::ext::Time;

    fn insn(opc: u8, dst: u8, src: u8, off: i16, imm: i32) -> [u8; 8] {
        let mut b = [opc, dst | (src << 4), 0, 0, 0, 0, 0, 0];
        b[2..4].copy_from_slice(&off.to_le_bytes());
        b[4..8].copy_from_slice(&imm.to_le_bytes());
        b
    }

    /// Blocks of 64 bytes, each byte its block number; 10 ns per read.
    struct Blocks;

    impl ReadPath for Blocks {
        fn lba_bytes(&self) -> u64 {
            64
        }
        fn compute(&mut self, ready: Time, n: u64) -> Time {
            ready + n
        }
        fn read(&mut self, ready: Time, slba: u64, _nlb: u32, out: &mut [u8]) -> Result<(Time, Option<u32>), Fault> {
            out.fill(slba as u8);
            Ok((ready + 10, Some(0)))
        }
    }

    /// nf_read(cparam1, 0, r10 + `dst_off` or the absolute address `abs`, `len`); returns r0, or the byte read.
    fn reader(dst: Option<i32>, len: i64, ret_byte: bool) -> Program {
        let mut t = vec![insn(0x79, 6, 1, 8, 0), insn(0xbf, 1, 6, 0, 0), insn(0xb7, 2, 0, 0, 0)];
        match dst {
            Some(off) => t.extend([insn(0xbf, 3, 10, 0, 0), insn(0x07, 3, 0, 0, off)]),
            None => t.push(insn(0xb7, 3, 0, 0, 64)), // address 64: no memory there
        }
        let lo = len as u64 as u32 as i32;
        let hi = (len as u64 >> 32) as u32 as i32;
        t.extend([insn(0x18, 4, 0, 0, lo), insn(0, 0, 0, 0, hi), insn(0x85, 0, 0, 0, 1)]);
        if ret_byte {
            t.push(insn(0x71, 0, 10, -8, 0));
        }
        t.push(insn(0x95, 0, 0, 0, 0));
        Program::new(load(&minimal_object(&t.concat(), &[], &[]), 1 << 16).unwrap(), 1000).unwrap()
    }

    fn run(p: &Program, lba: u64, io: bool) -> (RunOutcome, u64) {
        let extents = [(4u64, 4u64)];
        let mut reads = Reads::new(Blocks, ReadLimits { extents: extents.to_vec(), budget: 8, max_bytes: 256 }, Time::ZERO);
        let io: Option<&mut dyn FlashIo> = if io { Some(&mut reads) } else { None };
        let out = p.run_with(&mut [], &[], (lba, 0), 1000, (64, &extents), io);
        let t = reads.finish(out.instructions);
        (out, t.as_ns())
    }

    #[test]
    fn a_helper_read_lands_in_the_program_memory_and_its_time_is_the_runs() {
        let (out, t) = run(&reader(Some(-8), 8, true), 6, true);
        assert_eq!(out.result, Ok(6), "the byte read from block 6, in the stack");
        assert!(t >= out.instructions + 10, "instructions and the read: {t}");
        assert_eq!(run(&reader(Some(-8), 8, false), 6, true).0.result, Ok(0), "r0: the read's result");
    }

    #[test]
    fn helper_misuse_stops_the_run_with_its_fault() {
        assert!(matches!(run(&reader(None, 8, false), 5, true).0.result, Err(Fault::OutOfRange(_))), "dst not memory");
        assert!(matches!(run(&reader(Some(-8), 4096, false), 5, true).0.result, Err(Fault::OutOfRange(_))), "past the stack");
        assert!(matches!(run(&reader(Some(-8), -1, false), 5, true).0.result, Err(Fault::OutOfRange(_))), "len 2^64 - 1");
        assert!(matches!(run(&reader(Some(-8), 8, false), 9, true).0.result, Err(Fault::ReadOutside(_))), "block 9");
        assert!(matches!(run(&reader(Some(-8), 8, false), 5, false).0.result, Err(Fault::Other(_))), "no flash given");
    }
}
