//! The NICE firmware extension (first step): hyper-addressing on the platform's extension API.
//!
//! The device advertises 2C logical blocks (C: the FTL's capacity). An ordinary Write or Read at LBA >= C is an
//! in-storage invocation on the file whose first data sector is LBA - C; no new commands:
//! * Write at C + head: `NICE_Write` — the first byte of the block is the op id (one byte, so that a client that
//!   can only write a fill pattern, `qemu-io write -P 1`, can invoke); the op is bound to the file until the next
//!   NICE_Write.
//! * Read at C + head: `NICE_Read` — the firmware streams the file's sectors from flash, runs the bound op and
//!   returns its result in the first bytes of the buffer (the rest is zero).
//!
//! The firmware learns the ext4 layout only from the writes it sees. `observe(HostEvent::Write)` carries no data,
//! so the written ranges are remembered and read back lazily from flash through `ExecCtx::flash_read` (charged in
//! virtual time) at the next invocation, as a real firmware re-reads its buffer or flash; the learner then handles
//! ext4's data-before-inode order (deferred list building, `learner.rs`).
//!
//! Ops: 1 = CRC-32 (IEEE) of the file's bytes, 2 = byte histogram sum check (sum of bytes, u64). Result layout:
//! op (u32), file size (u64), inode (u32), value (u64), all little-endian.

use crate::learner::Learner;
use crate::source::BlockSource;
use nearflash_core::engine::Time;
use nearflash_core::ext::{AttachCtx, DataBuf, ExecCtx, ExtCompletion, Extension, HostEvent, Intercept, Placement, Sqe, Status};
use nearflash_core::nvme::opcode;
use std::collections::BTreeMap;

pub const NAME: &str = "nice";
pub const OP_CRC32: u32 = 1;
pub const OP_SUM: u32 = 2;
/// Firmware instructions per sector fed to the learner (parsing metadata on the A53), assumed: a few hundred
/// instructions of bounded parsing per 4 KiB block.
const LEARN_INSTR_PER_SECTOR: f64 = 400.0;
/// Firmware instructions per invocation (decode hyper-address, hash-table lookup), assumed.
const INVOKE_INSTR: f64 = 2_000.0;
/// Firmware instructions per byte processed by the software ops on the A53 (CRC table walk), assumed.
const OP_INSTR_PER_BYTE: f64 = 2.0;
/// Bound on remembered dirty ranges before they are merged into one span.
const MAX_PENDING: usize = 4096;

pub struct NiceFirmware {
    capacity: u64,
    sector: u32,
    learner: Option<Learner>,
    pending: Vec<(u64, u64)>,
    ops: BTreeMap<u64, u32>,
    /// Every range ever written (merged; start -> end): what a reopened device re-learns from flash.
    written: BTreeMap<u64, u64>,
    invocations: u64,
    refused: u64,
    learnt_sectors: u64,
}

impl NiceFirmware {
    pub fn new() -> Self {
        NiceFirmware { capacity: 0, sector: 0, learner: None, pending: Vec::new(), ops: BTreeMap::new(), written: BTreeMap::new(), invocations: 0, refused: 0, learnt_sectors: 0 }
    }

    /// Feeds every remembered written range to the learner, reading it back from flash; returns when done.
    fn learn(&mut self, ctx: &mut ExecCtx<'_>, mut t: Time) -> Time {
        let Some(learner) = self.learner.as_mut() else { return t };
        let ss = self.sector as usize;
        for (slba, nlb) in std::mem::take(&mut self.pending) {
            for lba in slba..slba + nlb {
                let mut buf = vec![0u8; ss];
                let Ok(r) = ctx.flash_read(lba, 1, t, &mut buf) else { continue };
                t = ctx.firmware(r.done, LEARN_INSTR_PER_SECTOR);
                let mut src = FlashSource { ctx, t };
                let _ = learner.ingest(lba, &buf, &mut src);
                t = src.t;
                self.learnt_sectors += 1;
            }
        }
        t
    }

    /// Adds [a, b) to the merged set of written ranges.
    fn mark_written(&mut self, mut a: u64, mut b: u64) {
        let touching: Vec<(u64, u64)> = self.written.range(..=b).rev().take_while(|&(_, &e)| e >= a).map(|(&s, &e)| (s, e)).collect();
        for (s, e) in touching {
            self.written.remove(&s);
            a = a.min(s);
            b = b.max(e);
        }
        self.written.insert(a, b);
    }

    fn head(&self, sqe: &Sqe) -> Result<u64, Status> {
        let lba = sqe.slba().checked_sub(self.capacity).ok_or(Status::INVALID_FIELD)?;
        let file = self.learner.as_ref().and_then(|l| l.file_at_head(lba)).ok_or(Status::INVALID_FIELD)?;
        if file.is_dir || !file.complete {
            return Err(Status::INVALID_FIELD);
        }
        Ok(lba)
    }

    fn run(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>) -> Result<Time, Status> {
        if sqe.slba().checked_add(u64::from(sqe.nlb())).is_none_or(|end| end > 2 * self.capacity) {
            return Err(Status::LBA_OUT_OF_RANGE);
        }
        let t = ctx.firmware(ctx.start, INVOKE_INSTR);
        let t = self.learn(ctx, t);
        let head = self.head(sqe)?;
        match (sqe.opcode, data) {
            (opcode::WRITE, DataBuf::ToDevice(src)) => {
                let op = u32::from(*src.first().ok_or(Status::INVALID_FIELD)?);
                if !matches!(op, OP_CRC32 | OP_SUM) {
                    return Err(Status::INVALID_FIELD);
                }
                self.ops.insert(head, op);
                Ok(ctx.from_host(t, src.len() as u64))
            }
            (opcode::READ, DataBuf::FromDevice(out)) => {
                let op = *self.ops.get(&head).ok_or(Status::SEQUENCE_ERROR)?;
                let file = self.learner.as_ref().and_then(|l| l.file_at_head(head)).cloned().ok_or(Status::INVALID_FIELD)?;
                let ss = self.sector as usize;
                let mut bytes = vec![0u8; file.lbas.len() * ss];
                let mut done = t;
                for (i, &lba) in file.lbas.iter().enumerate() {
                    let r = ctx.flash_read(lba, 1, t, &mut bytes[i * ss..(i + 1) * ss])?;
                    done = done.max(r.done);
                }
                bytes.truncate(file.size.min(bytes.len() as u64) as usize);
                let value = match op {
                    OP_CRC32 => u64::from(crc32fast::hash(&bytes)),
                    _ => bytes.iter().map(|&b| u64::from(b)).sum(),
                };
                let done = ctx.firmware(done, OP_INSTR_PER_BYTE * bytes.len() as f64);
                out.fill(0);
                let mut res = Vec::with_capacity(24);
                res.extend_from_slice(&op.to_le_bytes());
                res.extend_from_slice(&file.size.to_le_bytes());
                res.extend_from_slice(&file.inode.to_le_bytes());
                res.extend_from_slice(&value.to_le_bytes());
                let n = res.len().min(out.len());
                out[..n].copy_from_slice(&res[..n]);
                Ok(ctx.to_host(done, out.len() as u64))
            }
            _ => Err(Status::INVALID_FIELD),
        }
    }
}

impl Default for NiceFirmware {
    fn default() -> Self {
        Self::new()
    }
}

/// The learner's re-reads of sectors outside the current write, from flash through the FTL (timed).
struct FlashSource<'a, 'b> {
    ctx: &'a mut ExecCtx<'b>,
    t: Time,
}

impl BlockSource for FlashSource<'_, '_> {
    fn sector_size(&self) -> u32 {
        self.ctx.lba_bytes() as u32
    }
    fn read(&mut self, lba: u64) -> Option<Vec<u8>> {
        if !matches!(self.ctx.placement(lba), Ok(Placement::Flash { .. } | Placement::Buffered)) {
            return None;
        }
        let mut buf = vec![0u8; self.ctx.lba_bytes() as usize];
        let r = self.ctx.flash_read(lba, 1, self.t, &mut buf).ok()?;
        self.t = r.done;
        Some(buf)
    }
}

impl Extension for NiceFirmware {
    fn name(&self) -> &str {
        NAME
    }

    fn attach(&mut self, ctx: &mut AttachCtx<'_>) -> nearflash_core::Result<()> {
        self.capacity = ctx.lbas();
        self.sector = ctx.geometry().sector_size;
        ctx.advertise_lbas(2 * self.capacity)?;
        for op in [opcode::READ, opcode::WRITE] {
            ctx.intercept(Intercept::LbaFrom { opcode: op, first_lba: self.capacity })?;
        }
        ctx.observe();
        self.learner = Some(Learner::new(self.capacity, self.sector).map_err(|e| nearflash_core::SimError::Config(format!("nice: {e}")))?);
        Ok(())
    }

    fn execute(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>) -> ExtCompletion {
        self.invocations += 1;
        match self.run(ctx, sqe, data) {
            Ok(done) => ExtCompletion::ok(done),
            Err(s) => {
                self.refused += 1;
                ExtCompletion::failed(s, ctx.start)
            }
        }
    }

    fn observe(&mut self, event: &HostEvent) {
        if let HostEvent::Write { slba, nlb } = *event {
            self.mark_written(slba, slba + nlb);
            if self.pending.len() >= MAX_PENDING {
                let lo = self.pending.iter().map(|p| p.0).min().unwrap_or(slba).min(slba);
                let hi = self.pending.iter().map(|p| p.0 + p.1).max().unwrap_or(0).max(slba + nlb);
                self.pending = vec![(lo, hi - lo)];
            } else {
                self.pending.push((slba, nlb));
            }
        }
    }

    /// The ops bound to files and the written ranges; the layout itself is re-learnt from flash after a reopen, as a
    /// firmware rebuilding its tables at power-on would.
    fn save(&self) -> Option<Vec<u8>> {
        let ops: Vec<(u64, u32)> = self.ops.iter().map(|(&h, &o)| (h, o)).collect();
        let written: Vec<(u64, u64)> = self.written.iter().map(|(&a, &b)| (a, b)).collect();
        serde_json::to_vec(&serde_json::json!({ "version": 1, "ops": ops, "written": written })).ok()
    }

    fn restore(&mut self, state: &[u8]) -> nearflash_core::Result<()> {
        let bad = |why: &str| nearflash_core::SimError::Config(format!("nice: saved state: {why}"));
        let v: serde_json::Value = serde_json::from_slice(state).map_err(|e| bad(&e.to_string()))?;
        if v["version"] != 1 {
            return Err(bad("unknown version"));
        }
        let pairs = |key: &str| -> nearflash_core::Result<Vec<(u64, u64)>> {
            let arr = v[key].as_array().ok_or_else(|| bad(&format!("{key} is not a list")))?;
            arr.iter()
                .map(|p| match (p[0].as_u64(), p[1].as_u64()) {
                    (Some(a), Some(b)) => Ok((a, b)),
                    _ => Err(bad(&format!("{key} entry {p} is not a pair of integers"))),
                })
                .collect()
        };
        let (ops, written) = (pairs("ops")?, pairs("written")?);
        if written.iter().any(|&(a, b)| a >= b || b > self.capacity) || ops.iter().any(|&(_, o)| !matches!(o as u32, OP_CRC32 | OP_SUM) || o > 255) {
            return Err(bad("a range or op id is out of bounds"));
        }
        self.ops = ops.into_iter().map(|(h, o)| (h, o as u32)).collect();
        self.written.clear();
        for (a, b) in written {
            self.mark_written(a, b);
        }
        self.pending = self.written.iter().map(|(&a, &b)| (a, b - a)).collect();
        Ok(())
    }

    fn report(&self) -> serde_json::Value {
        serde_json::json!({
            "capacity_lbas": self.capacity,
            "invocations": self.invocations,
            "refused": self.refused,
            "learnt_sectors": self.learnt_sectors,
            "files": self.learner.as_ref().map_or(0, |l| l.files().count()),
        })
    }
}

inventory::submit! {
    nearflash_core::ext::Registration {
        name: NAME,
        about: "NICE (Wang et al.): hyper-addressed in-storage computing on files of a real ext4 file system",
        build: |_overrides, _cfg| Ok(Box::new(NiceFirmware::new())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_ranges_merge_and_a_damaged_state_is_refused() {
        let mut f = NiceFirmware::new();
        f.capacity = 1000;
        for (a, b) in [(10, 20), (30, 40), (20, 30), (100, 110), (5, 12)] {
            f.mark_written(a, b);
        }
        assert_eq!(f.written.iter().map(|(&a, &b)| (a, b)).collect::<Vec<_>>(), vec![(5, 40), (100, 110)]);
        f.ops.insert(7, OP_SUM);
        let saved = f.save().unwrap();
        let mut g = NiceFirmware::new();
        g.capacity = 1000;
        g.restore(&saved).unwrap();
        assert_eq!((g.written, g.ops.clone()), (f.written.clone(), f.ops.clone()));
        assert_eq!(g.pending, vec![(5, 35), (100, 10)], "a reopened device re-learns what was written");
        for bad in [&b"{}"[..], b"not json", br#"{"version":1,"ops":[[1,9]],"written":[]}"#, br#"{"version":1,"ops":[],"written":[[5,2000]]}"#] {
            assert!(NiceFirmware::new().restore(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
