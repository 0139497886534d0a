//! The Agent's hardware and firmware parameters: the per-channel FMC processors and stream processors (clock, CPI,
//! per-event energies of Fig. 10), the FMC read-ahead, how results stream to the host, the descriptor parse cost
//! and the vendor opcodes. Kernel cycles per byte live in [`crate::costs`].
//!
//! Values come from, in order: the defaults below; the preset's `[ext.issd]` section (`{ value, unit, source }`
//! per key, as every preset value); the JSON object given at attach time (plain numbers in the unit listed
//! below, booleans for switches, and `"costs": {"<kernel>": {"cpb_fmc": ..}}` for per-kernel cycle overrides).
//! The Reduce runs on the controller's cores, which the `issd` preset sizes as Table 2's embedded SSD CPUs.

use crate::costs::CostTable;
use crate::error::{invalid, Result};
use nearflash_core::config::{ExtParams, ParamError};

fn param_error(e: ParamError) -> crate::error::IssdError {
    invalid(format!("iSSD agent {e}"))
}

nearflash_core::ext_params! {
    /// Agent parameters in canonical units: Hz, pJ, bytes, counts, plain ratios; switches as `bool`.
    pub struct AgentParams {
        /// FMC processor clock (iSSD-400: 400 MHz, iSSD-800: 800 MHz; the stream processor runs at the same clock).
        f_fmc: Frequency = 400, "MHz", "iSSD Table 2: f_fmc 400 or 800 MHz; iSSD-XL's clock is not given, Table 2's base clock assumed";
        /// Cycles per instruction of the FMC processor (IPB = CPB / CPI on it).
        fmc_cpi: Real = 1.0, "cycles/instruction", "assumed: single-issue in-order core without caches (Sec. 3.1; Sec. 5.2 counts an FMC as 400 MHz x 1 instruction/cycle)";
        /// Whether every FMC has a reconfigurable stream processor (jobs choose to use it).
        stream_processors: Bool = true, "bool", "iSSD Sec. 3.1, Fig. 4: one stream processor per FMC";
        /// FMC processor energy per instruction.
        e_proc_inst: Energy = 192.0, "pJ", "iSSD Fig. 10: E_proc 192 pJ/inst [36], 45 nm";
        /// FMC scratchpad SRAM read energy.
        e_proc_sram: Energy = 89.3, "pJ", "iSSD Fig. 10: processor SRAM 89.3 pJ/read [37]";
        /// Scratchpad (or stream SRAM) reads per input byte.
        sram_reads_per_byte: Real = 0.25, "ratio", "assumed: 32-bit input words read once each (the model's SRAM_READS_PER_BYTE)";
        /// Stream-processor ALU op, multiply, register access and stream-SRAM read energies.
        e_stream_alu: Energy = 2.11, "pJ", "iSSD Fig. 10: stream ALU 2.11 pJ/op [27]";
        e_stream_mul: Energy = 67.6, "pJ", "iSSD Fig. 10: MUL 67.6 pJ/op [27]";
        e_stream_reg: Energy = 4.23, "pJ", "iSSD Fig. 10: register 4.23 pJ/access [27]";
        e_stream_sram: Energy = 21.1, "pJ", "iSSD Fig. 10: stream SRAM 21.1 pJ/read [37]";
        /// Flash pages an FMC may have requested but not yet finished mapping (its staging buffers).
        fmc_read_ahead: Int = 16 in 1..=4096, "count", "assumed: 128 KiB of staging per channel; 4 ways x 2 planes need about 8 reads queued for cache reads to keep the channel busy";
        /// Result bytes gathered in DRAM before the Agent pushes them to the host (streamed results).
        output_flush: Bytes = 16, "KiB", "assumed: the Initiator fetches matched items periodically (Sec. 4.3); a 16 KiB DRAM output buffer flushed when full";
        /// Whether the SSD CPUs pay the FTL's per-block lookup (`ftl.map_instructions`) for every block a job reads.
        ftl_lookups: Bool = true, "bool", "the preset's FTL: every read translates its blocks on the SSD CPUs (Eq. 1 has no such term; the model setups turn it off)";
        /// Job descriptors the Agent holds at once.
        job_slots: Int = 8 in 1..=1024, "count", "assumed: a few concurrent jobs";
        /// Level of the FMC scans' flash class (`issd.fmc`).
        fmc_class_level: Choice["urgent", "normal", "background"] = "normal", "choice", "assumed: the FMCs' reads share the dies with host I/O (the paper runs jobs alone); background lets host reads go first";
        /// Weight of that class among the normal level's (the host's medium-priority queues weigh 2).
        fmc_class_weight: Int = 2 in 1..=256, "count", "assumed: an equal share with the host's medium-priority queues (MQSim's PRIORITY_OUT_OF_ORDER 4:2:1)";
        /// SSD CPU instructions to accept a descriptor: fixed part and per byte of its kernel spec.
        load_instructions: Real = 2000.0, "instructions", "assumed: header checks, extent validation and slot bookkeeping";
        load_instructions_per_byte: Real = 20.0, "instructions/B", "assumed: parsing the kernel spec text on an embedded core";
        /// Vendor opcodes: load a job (host to device), run it (device to host), fetch more of its result.
        opcode_load: Opcode = 0xB1, "opcode", "assumed: vendor I/O opcode with data direction bits 01 (host to controller), free beside the other extensions' (docs/architecture.md)";
        opcode_run: Opcode = 0xB2, "opcode", "assumed: vendor I/O opcode with data direction bits 10 (controller to host), free beside the other extensions'";
        opcode_fetch: Opcode = 0xB6, "opcode", "assumed: vendor I/O opcode with data direction bits 10 (controller to host), free beside the other extensions'";
    }
    extra {
        /// Per-kernel cycles per byte (defaults: Table 2 / Table 1, see [`crate::costs`]).
        costs: CostTable = CostTable::default();
    }
}

impl AgentParams {
    /// Defaults overridden by a preset's `[ext.issd]` section.
    pub fn from_section(section: Option<&toml::Table>) -> Result<Self> {
        let p = <Self as ExtParams>::from_section(section).map_err(param_error)?;
        p.validate()?;
        Ok(p)
    }

    /// Applies a JSON object of overrides: plain numbers in each parameter's unit, booleans for switches, and
    /// `costs` (per-kernel cycles-per-byte fields).
    pub fn apply_json(&mut self, obj: &serde_json::Value) -> Result<()> {
        if let Some(costs) = obj.get("costs") {
            self.apply_costs(costs)?;
        }
        self.apply_json_object(obj, &["costs"]).map_err(param_error)?;
        self.validate()
    }

    fn apply_costs(&mut self, v: &serde_json::Value) -> Result<()> {
        let kernels = v.as_object().ok_or_else(|| invalid("costs must map kernel names to objects"))?;
        for (kernel, fields) in kernels {
            let fields = fields.as_object().ok_or_else(|| invalid(format!("costs.{kernel} must be an object")))?;
            let kv = fields
                .iter()
                .map(|(f, x)| x.as_f64().map(|x| (f.clone(), x)).ok_or_else(|| invalid(format!("costs.{kernel}.{f} must be a number"))))
                .collect::<Result<Vec<_>>>()?;
            self.costs.set_fields(kernel, &kv)?;
        }
        Ok(())
    }

    fn validate(&self) -> Result<()> {
        if !(self.f_fmc > 0.0 && self.fmc_cpi > 0.0) {
            return Err(invalid("iSSD agent: f_fmc and fmc_cpi must be positive"));
        }
        if self.output_flush < 1.0 {
            return Err(invalid("iSSD agent: output_flush must be at least 1 byte"));
        }
        let ops = [self.opcode_load, self.opcode_run, self.opcode_fetch];
        if ops[0] == ops[1] || ops[1] == ops[2] || ops[0] == ops[2] {
            return Err(invalid("iSSD agent: the three opcodes must differ"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_paper_values() {
        let p = AgentParams::default();
        assert_eq!(p.f_fmc, 400e6);
        assert_eq!(p.e_proc_inst, 192.0);
        assert_eq!(p.output_flush, 16384.0);
        assert_eq!((p.opcode_load, p.opcode_run, p.opcode_fetch), (0xB1, 0xB2, 0xB6));
        assert!(p.stream_processors);
        assert_eq!(AgentParams::DOCS.len(), 21);
        assert!(AgentParams::DOCS.iter().all(|d| !d.3.is_empty()));
    }

    #[test]
    fn section_then_json_override_the_defaults() {
        let section: toml::Table =
            toml::from_str(r#"f_fmc = { value = 0.8, unit = "GHz", source = "x" }"#).unwrap();
        let mut p = AgentParams::from_section(Some(&section)).unwrap();
        assert_eq!(p.f_fmc, 800e6);
        p.apply_json(&serde_json::json!({"f_fmc": 400, "stream_processors": false, "costs": {"scan": {"cpb_fmc": 5.0}}}))
            .unwrap();
        assert_eq!((p.f_fmc, p.stream_processors), (400e6, false));
        assert_eq!(p.costs.get("scan").unwrap().cpb_fmc, 5.0);
    }

    #[test]
    fn bad_parameters_are_errors() {
        let mut p = AgentParams::default();
        assert!(p.apply_json(&serde_json::json!({"f_gpu": 1})).is_err());
        assert!(p.apply_json(&serde_json::json!({"f_fmc": "fast"})).is_err());
        assert!(p.apply_json(&serde_json::json!({"opcode_run": 0x10})).is_err());
        assert!(p.apply_json(&serde_json::json!({"opcode_run": 0xB1})).is_err());
        assert!(p.apply_json(&serde_json::json!([1])).is_err());
        let wrong_unit: toml::Table = toml::from_str(r#"f_fmc = { value = 1, unit = "us", source = "x" }"#).unwrap();
        assert!(AgentParams::from_section(Some(&wrong_unit)).is_err());
        let flat: toml::Table = toml::from_str("f_fmc = 4").unwrap();
        assert!(AgentParams::from_section(Some(&flat)).is_err());
    }
}
