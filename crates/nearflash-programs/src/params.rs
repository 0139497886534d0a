//! The extension's limits and costs, each with unit and source; a preset's `[ext.programs]` section and attach-time
//! JSON override them. The per-instruction time and energy are not here: they are the preset's controller values
//! (`controller.cpi`, `controller.core_freq`, `energy.core_per_instruction`), charged by the core.

use nearflash_core::config::{ExtParams, ParamError};

nearflash_core::ext_params! {
    /// Limits and costs of the Computational Programs + SLM extension (canonical units: bytes, counts, instructions).
    pub struct ProgramsParams {
        /// Subsystem Local Memory capacity (one memory namespace).
        slm_bytes: Bytes = 64, "MiB", "assumed: a share of controller DRAM set aside for programs; every preset's DRAM (512 MiB-4 GiB) holds it beside the mapping table";
        /// Program slots (Program Index 1..max_programs).
        max_programs: Int = 16 in 1..=65534, "count", "assumed: the same order as the 8-16 slots of the CSD implementations read (docs/programs.md)";
        /// Programs active at once.
        max_activated: Int = 8 in 1..=65535, "count", "assumed: half the program slots, so that the activation limit is reachable";
        /// Largest downloadable program (ELF object bytes).
        max_program_bytes: Bytes = 1, "MiB", "assumed: eBPF objects of a few KiB to a few hundred KiB";
        /// Largest program in eBPF instructions.
        max_program_instructions: Int = 65536 in 1..=65536, "count", "solana-sbpf ebpf::PROG_MAX_INSNS";
        /// Memory range sets held at once.
        max_range_sets: Int = 16 in 1..=65535, "count", "assumed: one stored set per program slot";
        /// Memory ranges per set (and per Execute Program with inline ranges); at most 16 (struct nf_ctx).
        max_ranges_per_set: Int = 16 in 1..=16, "count", "nearflash: struct nf_ctx holds 16 ranges";
        /// Parameter data an Execute Program may carry after its inline ranges.
        max_param_bytes: Bytes = 4, "KiB", "assumed: a page of parameters";
        /// eBPF instructions one run may execute before it is stopped (bounds every loop).
        instruction_budget: Int = 1000000000 in 1..=1000000000000, "count", "assumed: about one second of a 1 GHz controller core";
        /// Controller instructions per executed eBPF instruction.
        native_per_ebpf_instruction: Real = 1.0, "instructions", "assumed: eBPF's instructions map one to one onto a RISC core's ALU, load/store and branch instructions when compiled (the design goal of the eBPF ISA, RFC 9669)";
        /// Firmware instructions to dispatch one Execute Program (decode, map the ranges, start the program).
        execute_dispatch_instructions: Real = 2000, "instructions", "assumed: the order of a firmware command path (presets' fw_other_instructions)";
        /// Firmware instructions of a management command (activation, unload, range set, Identify).
        management_instructions: Real = 200, "instructions", "assumed: a table update and its checks, well below a read's firmware path (presets' fw_read_instructions)";
        /// Firmware instructions per eBPF instruction to relocate and verify a downloaded program.
        verify_instructions_per_instruction: Real = 50, "instructions", "assumed: a verifier visits each instruction a few times with a few dozen instructions of bookkeeping each";
        /// Level of the flash class (`programs.exec`) of Memory Copy's and Execute Program's flash reads.
        exec_class_level: Choice["urgent", "normal", "background"] = "normal", "choice", "assumed: a program's reads share the dies with host I/O; background lets the host's reads go first (issue 23)";
        /// Weight of that class among the normal level's (the host's medium-priority queues weigh 2).
        exec_class_weight: Int = 2 in 1..=256, "count", "assumed: an equal share with the host's medium-priority queues (MQSim's PRIORITY_OUT_OF_ORDER 4:2:1)";
        /// Clock of the fixed-function SLS unit (device-defined program `sls_f32`).
        sls_unit_clock: Frequency = 400, "MHz", "assumed: the clock of iSSD's per-channel stream processors (f_fmc = 400 MHz, iSSD Table 2), a fixed-function block beside the flash controllers";
        /// fp32 adds the SLS unit retires per cycle (lanes).
        sls_unit_lanes: Real = 4, "ops/cycle", "assumed: a 128-bit adder (4 fp32 lanes), the width of a Cortex-A9 NEON unit on RecSSD's Cosmos+ controller";
        /// Energy per SLS unit cycle.
        sls_unit_pj_per_cycle: Energy = 50, "pJ", "assumed: a quarter of the 192 pJ an embedded core spends per instruction (iSSD Fig. 10), for a datapath without fetch and decode";
        /// Flash reads (helpers `nf_read`, `nf_read_start`) one run may issue; past it the run stops with Insufficient Resources.
        read_budget: Int = 4096 in 0..=1000000000, "count", "assumed: bounds a run's flash work as instruction_budget bounds its compute; a B-tree lookup reads its depth (2-5 pages), a scan of 4096 leaf pages of 4 KiB reads 16 MiB";
        /// Largest single flash read of a program (bytes, across blocks).
        max_read_bytes: Bytes = 64, "KiB", "SQLite's largest page (65536 bytes), so that any B-tree page is one read";
        /// Logical blocks per flash read a Memory Copy issues (reads of one range are split into these).
        copy_chunk_blocks: Int = 256 in 1..=65536, "count", "assumed: 1 MiB of 4 KiB blocks, a firmware's maximum transfer per internal read";
    }
}

impl ProgramsParams {
    /// The preset section with `overrides` (a JSON object) applied, checked for consistency.
    pub fn resolve(section: Option<&toml::Table>, overrides: &serde_json::Value) -> Result<ProgramsParams, ParamError> {
        let mut p = ProgramsParams::from_section(section)?;
        p.apply_json_object(overrides, &[])?;
        // Device-defined programs take the indexes after the downloadable ones.
        let last = 65535 - crate::fixed::PROGRAMS.len() as u64;
        if p.max_programs > last {
            return Err(ParamError::Invalid {
                name: "max_programs".into(),
                why: format!("must be 1..={last} (the device-defined programs follow)"),
            });
        }
        if p.slm_bytes < 4096.0 || p.slm_bytes > (1u64 << 40) as f64 {
            return Err(ParamError::Invalid { name: "slm_bytes".into(), why: "must be 4 KiB..1 TiB".into() });
        }
        Ok(p)
    }
}

/// Host CPU cycles per eBPF instruction when the same program runs on the host (the host path of comparisons).
pub const HOST_CYCLES_PER_INSTRUCTION: (f64, &str) = (
    0.5,
    "assumed: an out-of-order host core retires about two simple integer instructions per cycle on scan loops (Skylake-class, 4-wide)",
);
