//! NICE's lightweight firmware kernel (paper Sec. IV-C, Fig. 7) in virtual time: who issues an ISC request's flash
//! transfers, who waits for its accelerator, in what order its pages are issued, and which NAND reads it shares.
//!
//! * **Coroutine scheduling** (`scheduling = "coroutine"`, the paper's NICE): the A53 master decodes the request and
//!   locates the file, then hands the flash-transfer stage to the Cortex-R5 (a declared unit `nice.r5`, one member
//!   per R5 core, `r5_page_cycles` per page transaction) and yields; the R5 wakes the A53 through its task queue
//!   (`handoff_instructions`), the A53 starts the FPGA and yields again, and the FPGA's interrupt wakes it
//!   (`irq_wake_instructions`) to post the completion. The A53 cores stay free for ordinary I/O in between.
//! * **No scheduling** (`"polling"`, the baseline of Fig. 13): the request runs to completion on one A53 core
//!   (round-robin over the cores), which issues every page transaction itself (`fw_page_instructions` each, one
//!   after another) and then spins on the flash and the FPGA until the result is there: the core is booked for the
//!   whole span, so ordinary I/O loses it.
//! * **Wake-up** (`wake`, a separate choice): with interrupts the R5's "transfers done" costs the A53
//!   `handoff_instructions` and the FPGA's completion `irq_wake_instructions`, and no core waits; with polling one
//!   A53 core spins (booked, `polling_ns`) until the data and the accelerator are done. Coroutines with polling
//!   spin from the hand-off to the R5; run to completion with interrupts spins on the transfers it issued and
//!   sleeps through the accelerator, the interrupt waking that core.
//! * **ISC priority** (`isc_priority`): the flash work of ISC requests (locating, streaming, learning) is a flash
//!   class of its own, `nice.isc`, above the host queues' (the urgent level: an ISC read goes before any queued host
//!   read on its die), equal to them (the normal level, weighted as the medium-priority queues: they take turns), or
//!   below (the background level: it issues only while no host read waits on the die). Ordinary Reads the kernel
//!   serves keep their queue's class.
//! * **Shared reads** (`shared_reads`): pages read for one request stay in the firmware's buffer until that request
//!   completes; another request (ISC or ordinary Read) that needs the same LBA while it is held takes it from DRAM
//!   instead of reading the NAND again. The buffer holds `shared_buffer_pages` sectors at most (oldest dropped) and
//!   a host write to an LBA drops its copy. "Until it completes" follows the holder's real flash ends
//!   (`ExecCtx::flash_end`): a copy is held while the holder's reads have not really landed, then for what the
//!   holder does after them; a request that takes a copy completes no earlier than the copy really landed.

use nearflash_core::ext::Time;
use nearflash_core::ext::{ExecCtx, FlashEnd, Level, ReadTo, Status, UnitHandle};
use std::collections::BTreeMap;

nearflash_core::ext_params! {
    /// The NICE firmware's parameters (`--ext 'nice:{...}'`, or a preset's `[ext.nice]` section).
    pub struct NiceParams {
        /// Metadata pages kept in DRAM (the paper's "FTL cache"; 0: every lookup reads flash).
        ftl_cache_pages: Int = 1024 in 0..=1048576, "count", "assumed: 1024 x 4 KiB = 4 MiB of the 8 GB DDR4 (NICE Sec. IV-E gives no size)";
        /// How ISC requests share the controller: coroutines (A53 + R5 + interrupts) or run-to-completion polling.
        scheduling: Choice["coroutine", "polling"] = "coroutine", "choice", "NICE Sec. IV-C and Fig. 7 (coroutine-based scheduling); polling is Fig. 13's 'without scheduling'";
        /// Requests that need the same LBA at the same time share its NAND read.
        shared_reads: Bool = true, "bool", "NICE Sec. IV-C: 'the two coroutines can share the data read from NAND flash'";
        /// Sectors the shared-read buffer holds at most.
        shared_buffer_pages: Int = 16384 in 0..=1048576, "count", "assumed: 64 MiB of the 8 GB DDR4 (NICE Sec. IV-E)";
        /// Cortex-R5 cores running the flash-transfer stage.
        r5_cores: Int = 2 in 1..=2, "count", "Xilinx DS891: the ZU7EG's RPU is a dual-core Cortex-R5F";
        /// Cortex-R5 clock.
        r5_clock: Frequency = 533 in 1..=2000, "MHz", "Xilinx DS925: RPU at 533 MHz in the -1 speed grade (the lowest; NICE gives no clock)";
        /// R5 cycles to set up and complete one page transaction (command, DMA descriptor, ECC status).
        r5_page_cycles: Real = 800, "cycles", "assumed: the A53's 800 fw_page_instructions at ~1 cycle each on the single-issue R5 with tightly-coupled memory";
        /// A53 instructions to take the R5's 'transfer done' message and resume the request's coroutine.
        handoff_instructions: Real = 600, "instructions", "assumed: an inter-processor-interrupt handler, a task-queue pop and a context switch";
        /// A53 instructions to take the FPGA's completion interrupt and resume the coroutine.
        irq_wake_instructions: Real = 1200, "instructions", "assumed: GIC interrupt entry/exit, status-register read, a context switch";
        /// How a waiting request learns that its transfers and its accelerator are done: interrupts (the R5's
        /// task-queue message, the FPGA's completion interrupt) or one A53 core polling their status; "auto" is
        /// interrupts with coroutines and polling with run-to-completion (Fig. 13's two firmwares).
        wake: Choice["auto", "interrupt", "polling"] = "auto", "choice", "NICE Sec. IV-C: 'an interrupt-based wake-up mechanism to release computing resources in the main A53 processor'; polling is the alternative it argues against";
        /// The flash class of ISC requests' work relative to the host queues' (medium priority): above (urgent
        /// level), equal (normal level, weighted as the medium queues) or below (background level).
        isc_priority: Choice["above", "equal", "below"] = "above", "choice", "NICE Sec. IV-C: 'For incoming ISC requests, we prioritize their' processing (the slave coroutines' run queues); equal and below are Fig. 13's other settings of the switch (issue 23)";
        /// The arithmetic of NICE-C's op 6: the FPGA's 8-bit datapath (`quant.rs`) or f32 (for comparison).
        cnn_precision: Choice["int8", "f32"] = "int8", "choice", "assumed: NICE gives no NICE-C precision; 8-bit quantised inference, the element width the NICE-C timing charges (element_bytes = 1)";
    }
}

impl NiceParams {
    pub fn coroutines(&self) -> bool {
        self.scheduling == "coroutine"
    }

    /// The level and weight of the ISC flash class (`isc_priority`).
    pub fn isc_class(&self) -> (Level, u32) {
        match self.isc_priority.as_str() {
            "above" => (Level::Urgent, 1),
            "below" => (Level::Background, 1),
            _ => (Level::Normal, MEDIUM_QUEUE_WEIGHT),
        }
    }

    /// Whether waits end by interrupt (else an A53 core polls).
    pub fn interrupts(&self) -> bool {
        match self.wake.as_str() {
            "interrupt" => true,
            "polling" => false,
            _ => self.coroutines(),
        }
    }
}

/// The weight of the medium-priority host queues' flash class (the core's 4:2:1, MQSim's `PRIORITY_OUT_OF_ORDER`):
/// an ISC class "equal" to the host's takes turns with it one for one.
const MEDIUM_QUEUE_WEIGHT: u32 = 2;

/// The real end of a holder's flash work and what the holder does after it (ns) before it completes.
pub type HolderEnd = (FlashEnd, u64);

/// One sector held in the shared-read buffer.
#[derive(Debug, Clone)]
struct Held {
    /// When its read lands in DRAM.
    landed: Time,
    /// Until when the request that read it holds it (as forecast).
    release: Time,
    /// The holder's real flash end: held while it has not ended, then for the holder's tail after it.
    holder: Option<HolderEnd>,
    /// Its bytes (None: read for timing only; such a copy serves only other timing-only requests).
    bytes: Option<Vec<u8>>,
}

/// Sectors read by requests in flight, which others may share (paper Sec. IV-C).
#[derive(Debug, Clone, Default)]
pub struct SharedPages {
    capacity: usize,
    held: BTreeMap<u64, Held>,
}

impl SharedPages {
    pub fn new(capacity: usize) -> Self {
        SharedPages { capacity, ..Default::default() }
    }

    /// A held copy of `lba` that a request issued at `t` may use: (when it is in DRAM as forecast, its bytes if
    /// wanted, the holder's real flash end to wait for). `Some((landed, None, _))` only when `want_bytes` is false.
    /// `ended` says when a holder's flash work really ended (`ExecCtx::ended`).
    pub fn take(&mut self, lba: u64, t: Time, want_bytes: bool, ended: impl Fn(FlashEnd) -> Option<Time>) -> Option<(Time, Option<Vec<u8>>, Option<FlashEnd>)> {
        let h = self.held.get(&lba)?;
        if Self::released(h, &ended) < t || (want_bytes && h.bytes.is_none()) {
            return None;
        }
        Some((h.landed, if want_bytes { h.bytes.clone() } else { None }, h.holder.map(|(e, _)| e)))
    }

    /// When a held copy is released: its holder's forecast completion, or the holder's tail after its real flash
    /// end (never while that end is not reached).
    fn released(h: &Held, ended: &impl Fn(FlashEnd) -> Option<Time>) -> Time {
        match h.holder {
            None => h.release,
            Some((end, tail)) => ended(end).map_or(Time::MAX, |t| h.release.max(t + tail)),
        }
    }

    /// Holds `lba` (landed at `landed`) until `release` (as forecast; `holder`: until the holder's real end); a copy
    /// already held longer is kept.
    pub fn hold(&mut self, lba: u64, landed: Time, release: Time, bytes: Option<Vec<u8>>, holder: Option<HolderEnd>) {
        if self.capacity == 0 {
            return;
        }
        if let Some(h) = self.held.get(&lba) {
            if h.release >= release && h.holder.is_none() && (h.bytes.is_some() || bytes.is_none()) {
                return;
            }
        }
        self.held.insert(lba, Held { landed, release, bytes, holder });
        if self.held.len() > self.capacity {
            // Drop the copies released first (the buffer is a bounded pool of DRAM pages).
            let mut by_release: Vec<(Time, u64)> = self.held.iter().map(|(&l, h)| (h.release, l)).collect();
            by_release.sort_unstable();
            let excess = self.held.len() - self.capacity / 2;
            for &(_, l) in by_release.iter().take(excess) {
                self.held.remove(&l);
            }
        }
    }

    /// Holds every (LBA, landed, bytes) a request read until `release` (its completion; `holder`: its real end).
    pub fn hold_all(&mut self, read: Vec<(u64, Time, Vec<u8>)>, release: Time, holder: Option<HolderEnd>) {
        for (lba, landed, bytes) in read {
            self.hold(lba, landed, release, Some(bytes), holder);
        }
    }

    /// Drops copies released before `now` (no request issued later can use them).
    pub fn prune(&mut self, now: Time, ended: impl Fn(FlashEnd) -> Option<Time>) {
        if self.held.len() > 1024 {
            self.held.retain(|_, h| Self::released(h, &ended) >= now);
        }
    }

    /// The host wrote [a, b): held copies there are stale.
    pub fn invalidate(&mut self, a: u64, b: u64) {
        let stale: Vec<u64> = self.held.range(a..b).map(|(&l, _)| l).collect();
        for l in stale {
            self.held.remove(&l);
        }
    }

    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }
}

/// Who issues an ISC request's page transactions.
#[derive(Debug, Clone, Copy)]
pub enum Sequencer {
    /// The R5 cores (coroutine scheduling): `cycles` per page on unit `r5`, members round-robin.
    R5 { unit: UnitHandle, cores: u32, cycles: f64 },
    /// The A53 core running the request to completion: `instructions` per page on `core`, one after another.
    A53 { core: u32, instructions: f64 },
}

/// Reads an ISC request's sectors: through the shared buffer, issued by its sequencer. Keeps what it read, which
/// the request holds for others when it completes (`SharedPages::hold_all`).
pub struct Fetcher<'s> {
    pub seq: Sequencer,
    pub shared: Option<&'s mut SharedPages>,
    issued: u64,
    last_issue: Time,
    /// (LBA, landed, bytes) of every sector this request read from the NAND.
    pub read: Vec<(u64, Time, Vec<u8>)>,
    pub shared_hits: u64,
}

impl<'s> Fetcher<'s> {
    pub fn new(seq: Sequencer, shared: Option<&'s mut SharedPages>, t: Time) -> Self {
        Fetcher { seq, shared, issued: 0, last_issue: t, read: Vec::new(), shared_hits: 0 }
    }

    /// Reads sector `lba` into `out` (issued no earlier than `ready`); returns when it is in controller DRAM.
    pub fn read(&mut self, ctx: &mut ExecCtx<'_>, lba: u64, ready: Time, out: &mut [u8]) -> Result<Time, Status> {
        let shared = self.shared.as_deref_mut().and_then(|s| s.take(lba, ready, true, |h| ctx.ended(h)));
        if let Some((landed, Some(bytes), holder)) = shared {
            out.copy_from_slice(&bytes);
            self.shared_hits += 1;
            if let Some(h) = holder {
                ctx.complete_after(h, 0);
            }
            return Ok(ctx.dram(landed.max(ready), out.len() as u64));
        }
        let issued = match self.seq {
            Sequencer::R5 { unit, cores, cycles } => ctx.compute(ready, unit, (self.issued % u64::from(cores)) as u32, cycles),
            Sequencer::A53 { core, instructions } => ctx.firmware_on(ready, core, instructions),
        };
        self.issued += 1;
        self.last_issue = self.last_issue.max(issued);
        let r = ctx.flash_read_self_sequenced(issued, lba, 1, ReadTo::Dram, out)?;
        self.read.push((lba, r.done, out.to_vec()));
        Ok(r.done)
    }

    /// When the last page transaction was issued (a polling core spins from then on).
    pub fn last_issue(&self) -> Time {
        self.last_issue
    }
}

/// Firmware instructions that take `ns` of one controller core (to book a busy-wait span).
pub fn instructions_for(ctx: &ExecCtx<'_>, ns: u64) -> f64 {
    let c = &ctx.config().controller;
    ns as f64 * c.core_freq.0 / 1e9 / c.cpi.0.max(1e-9)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nearflash_core::config::ExtParams;

    #[test]
    fn defaults_parse_and_bad_values_are_refused() {
        let p = NiceParams::default();
        assert!(p.coroutines() && p.shared_reads);
        assert_eq!(p.r5_clock, 533e6);
        let mut q = p.clone();
        q.apply_json_object(&serde_json::json!({"scheduling": "polling", "shared_reads": false}), &[]).unwrap();
        assert!(!q.coroutines() && !q.shared_reads);
        assert_eq!(p.isc_class(), (Level::Urgent, 1), "the paper prioritises ISC requests");
        for (setting, level) in [("equal", Level::Normal), ("below", Level::Background)] {
            q.apply_json_object(&serde_json::json!({ "isc_priority": setting }), &[]).unwrap();
            assert_eq!(q.isc_class().0, level);
        }
        for bad in [serde_json::json!({"scheduling": "fifo"}), serde_json::json!({"r5_cores": 3}), serde_json::json!({"nope": 1}), serde_json::json!({"shared_buffer_pages": -1}), serde_json::json!({"isc_priority": "top"}), serde_json::json!([1])] {
            assert!(NiceParams::default().apply_json_object(&bad, &[]).is_err(), "{bad}");
        }
        let sec: toml::Table = toml::from_str(&NiceParams::section_toml()).unwrap();
        assert_eq!(NiceParams::from_section(Some(&sec)).unwrap(), NiceParams::default());
    }

    #[test]
    fn held_sectors_are_shared_only_while_held_and_not_after_a_write() {
        let mut s = SharedPages::new(8);
        let never = |_| None;
        s.hold(5, Time::from_ns(100), Time::from_ns(1000), Some(vec![7; 4]), None);
        s.hold(6, Time::from_ns(100), Time::from_ns(1000), None, None);
        assert_eq!(s.take(5, Time::from_ns(500), true, never), Some((Time::from_ns(100), Some(vec![7; 4]), None)));
        assert_eq!(s.take(6, Time::from_ns(500), true, never), None, "a timing-only copy has no bytes to give");
        assert_eq!(s.take(6, Time::from_ns(500), false, never), Some((Time::from_ns(100), None, None)));
        assert_eq!(s.take(5, Time::from_ns(1001), true, never), None, "released");
        s.invalidate(5, 6);
        assert_eq!(s.take(5, Time::from_ns(500), false, never), None, "the host wrote it");
        for l in 10..30 {
            s.hold(l, Time::ZERO, Time::from_ns(l), None, None);
        }
        assert!(s.len() <= 8, "bounded: {}", s.len());
        assert!(s.take(29, Time::ZERO, false, never).is_some(), "the copies released last are kept");
        assert_eq!(SharedPages::new(0).len(), 0);
    }
}
