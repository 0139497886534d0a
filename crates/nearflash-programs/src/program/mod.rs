//! Programs: loading eBPF ELF objects, nearflash's verifier pass, and running them with counted instructions.

pub mod elf;
pub mod reads;
pub mod verify;
pub mod vm;

pub use elf::{load, LoadError, ProgramImage};
pub use vm::{Fault, Program, RunOutcome};

/// Loads, relocates and verifies an eBPF ELF object.
pub fn prepare(elf_bytes: &[u8], max_bytes: usize, max_insns: usize) -> Result<Program, String> {
    let image = load(elf_bytes, max_bytes).map_err(|e| e.to_string())?;
    Program::new(image, max_insns)
}
