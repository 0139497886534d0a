//! Standard computational programs on nearflash: the NVMe Computational Programs command set 1.0 and the
//! Subsystem Local Memory command set 1.0, as one firmware extension every preset can attach.
//!
//! A user writes an in-storage function in C, compiles it with `clang -O2 -target bpf -c`, downloads it (Load
//! Program), activates it, fills Subsystem Local Memory from flash (Memory Copy, real reads through the FTL) or
//! from the host (Memory Write), names the memory it may touch (a memory range set) and runs it (Execute Program);
//! results come back with Memory Read. Programs run in an eBPF interpreter that counts every instruction; the
//! count is charged on the preset's controller cores (CPI, clock, energy per instruction).
//!
//! Modules: [`wire`] (command layouts), [`status`], [`slm`] (memory namespace, range sets), [`program`] (ELF
//! loading, verifier, VM), [`params`], [`firmware`] (the extension).

pub mod firmware;
pub mod fixed;
pub mod flash_reads;
pub mod host;
pub mod params;
pub mod program;
pub mod slm;
pub mod status;
pub mod wire;

pub use firmware::{ProgramsFirmware, NAME};
pub use params::ProgramsParams;
