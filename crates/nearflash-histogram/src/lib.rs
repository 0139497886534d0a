//! An in-storage byte histogram: the worked example of `docs/architecture.md`'s "Add a system in an hour".
//!
//! One vendor command, HISTOGRAM (opcode 0xA0 unless the `opcode` parameter moves it): CDW10-11 the first LBA,
//! CDW12 the number of blocks (1 to `max_blocks`), a 1024-byte buffer to the host. The firmware reads the blocks
//! through the FTL into controller DRAM, counts every byte value on a controller core, and returns the 256 counts
//! as little-endian u32; DW0 is the number of blocks counted.

use nearflash_core::config::ExtParams;
use nearflash_core::ext::{
    AttachCtx, DataBuf, ExecCtx, ExtCompletion, Extension, ReadTo, Registration, Sqe, Status, Time,
};

pub const NAME: &str = "histogram";
/// Bytes HISTOGRAM returns: 256 counts of 4 bytes.
pub const RESULT_BYTES: usize = 256 * 4;

nearflash_core::ext_params! {
    /// The histogram firmware's parameters.
    pub struct HistogramParams {
        /// Vendor I/O opcode of HISTOGRAM.
        opcode: Opcode = 0xA0, "opcode", "assumed: a vendor opcode no other extension claims (docs/architecture.md)";
        /// Firmware instructions per byte counted on a controller core.
        instructions_per_byte: Real = 3, "instructions/B", "assumed: a load, an indexed add and a loop step per byte";
        /// Most blocks one command counts.
        max_blocks: Int = 256 in 1..=65536, "count", "assumed: 1 MiB of 4 KiB blocks, a host Read's usual MDTS";
    }
}

/// Defaults, then the preset's `[ext.histogram]`, then the JSON overrides (`Device.attach("histogram", **params)`).
fn resolve(section: Option<&toml::Table>, overrides: &serde_json::Value) -> nearflash_core::Result<HistogramParams> {
    let mut p = HistogramParams::from_section(section)?;
    p.apply_json_object(overrides, &[])?;
    Ok(p)
}

inventory::submit! {
    Registration {
        name: NAME,
        about: "in-storage byte histogram (the walk-through's worked example)",
        build: |overrides, cfg| {
            resolve(cfg.ext.get(NAME).and_then(|v| v.as_table()), overrides)?; // bad parameters fail here
            Ok(Box::new(Histogram { overrides: overrides.clone(), p: HistogramParams::default() }))
        },
    }
}

pub struct Histogram {
    overrides: serde_json::Value,
    pub p: HistogramParams,
}

impl Histogram {
    /// Counts the bytes of the blocks CDW10-12 name into `data`; (blocks counted, when the counts reach the host).
    fn count(&self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>) -> Result<(u32, Time), Status> {
        let out = match data {
            DataBuf::FromDevice(out) if out.len() == RESULT_BYTES => out,
            _ => return Err(ctx.explain(Status::INVALID_FIELD, None, format!("HISTOGRAM returns {RESULT_BYTES} bytes to the host"))),
        };
        let (slba, nlb) = (u64::from(sqe.cdw10) | u64::from(sqe.cdw11) << 32, sqe.cdw12);
        if nlb == 0 || u64::from(nlb) > self.p.max_blocks {
            let why = format!("{nlb} blocks: HISTOGRAM counts 1 to {} (parameter max_blocks)", self.p.max_blocks);
            return Err(ctx.explain(Status::INVALID_FIELD, Some(48), why));
        }
        let mut bytes = vec![0u8; (u64::from(nlb) * ctx.lba_bytes()) as usize];
        let read = ctx.flash_read(ctx.start, slba, nlb, ReadTo::Dram, &mut bytes)?;
        let mut counts = [0u32; 256];
        for &b in &bytes {
            counts[usize::from(b)] += 1;
        }
        let counted = ctx.firmware(read.done, bytes.len() as f64 * self.p.instructions_per_byte);
        for (o, c) in out.chunks_exact_mut(4).zip(counts) {
            o.copy_from_slice(&c.to_le_bytes());
        }
        Ok((nlb, ctx.to_host(counted, RESULT_BYTES as u64)))
    }
}

impl Extension for Histogram {
    fn name(&self) -> &str {
        NAME
    }

    fn attach(&mut self, ctx: &mut AttachCtx<'_>) -> nearflash_core::Result<()> {
        self.p = resolve(ctx.section(NAME), &self.overrides)?;
        ctx.claim_opcode(self.p.opcode)
    }

    fn execute(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>) -> ExtCompletion {
        match self.count(ctx, sqe, data) {
            Ok((blocks, done)) => ExtCompletion { status: Status::SUCCESS, dw0: blocks, done },
            Err(status) => ExtCompletion::failed(status, ctx.start),
        }
    }

    /// The resolved parameters the host library needs (the opcode may come from the preset or the overrides).
    fn report(&self) -> serde_json::Value {
        serde_json::json!({ "opcode": self.p.opcode, "max_blocks": self.p.max_blocks })
    }
}
