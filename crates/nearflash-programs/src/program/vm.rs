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

use super::elf::{ProgramImage, DATA_VADDR, RODATA_VADDR};
use super::verify::{self, STACK_FRAME};
use solana_sbpf::ebpf;
use solana_sbpf::elf::Executable;
use solana_sbpf::error::{EbpfError, ProgramResult};
use solana_sbpf::memory_region::{MemoryMapping, MemoryRegion};
use solana_sbpf::program::{BuiltinProgram, FunctionRegistry, SBPFVersion};
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
/// Bytes of `struct nf_ctx` before its parameter data.
pub const CTX_BYTES: usize = 5 * 8 + MAX_RANGES * 16;

/// VM address of memory range `i`.
pub fn range_vaddr(i: usize) -> u64 {
    (5 + i as u64) << 32
}

/// The instruction meter and the memory mapping of one run.
struct Meter {
    remaining: u64,
    mapping: MemoryMapping,
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
        let loader = Arc::new(BuiltinProgram::<Meter>::new_loader(config()));
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
    /// `budget` instructions.
    pub fn run(&self, ranges: &mut [&mut [u8]], params: &[u8], cparams: (u64, u64), budget: u64) -> RunOutcome {
        if ranges.len() > MAX_RANGES {
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
        let mut meter = Meter { remaining: budget, mapping };
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
                other => Fault::Other(other.to_string()),
            }),
        };
        RunOutcome { instructions: count, result }
    }
}
