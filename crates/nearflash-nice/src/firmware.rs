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
//! Ops (all little-endian): 1 = CRC-32 (IEEE) of the file's bytes, 2 = sum of the file's bytes, on the A53;
//! 3 = NICE-K, on the declared FPGA unit `nice.knn`: the NICE_Write block is [3, width bits (16|32), dim (u16),
//! k (u16), 2 pad bytes, query as dim i32]; the file is an embedding matrix of that width. Result: op (u32), file
//! size (u64), inode (u32), value (u64: CRC, sum, or the number of neighbours), then for NICE-K the neighbours
//! nearest first as (squared L2 distance u64, vector index u32).
//! 7 = NICE-K over a batch of queries in one pass over the file (`OP_KNN_BATCH`): [7, width bits, dim (u16),
//! k (u16), queries (u16, 1..=`max_queries`), queries x dim i32]; value = the number of queries, then each query's
//! neighbours in turn (min(K, N) pairs each).
//! 6 = NICE-C (`OP_CNN`): a network (LeNet-5 or MobileNetV2) over the file's images with its weights from another
//! file, on the declared FPGA unit `nice.cnn`, in int8 (`quant.rs`) or f32 (`cnn_precision`); the result's tail is
//! one u16 class per image.
//!
//! The pages of an invocation are streamed by the firmware kernel (`sched.rs`): the R5 issues them and interrupts
//! wake the A53 (coroutine scheduling), or one A53 core issues them and spins (polling); with `shared_reads` the
//! kernel also serves ordinary Reads (`host_read.rs`) so that requests in flight share NAND reads.

use crate::chain::FileChain;
use crate::cnn::CnnParams;
use crate::cnn_net::Precision;
use crate::knn::KnnParams;
use crate::ops::{self, result_block, Job};
use crate::learner::{Learnt, Learner};
use crate::oob_list::{self, PageCache};
use crate::sched::{instructions_for, Fetcher, NiceParams, Sequencer, SharedPages};
use nearflash_core::config::ExtParams;
use nearflash_core::ext::OpClass;
use crate::source::BlockSource;
use nearflash_core::ext::Time;
use nearflash_core::ext::{ClassId, FlashEnd, UnitHandle, UnitSpec};
use nearflash_core::ext::{AttachCtx, DataBuf, ExecCtx, ExtCompletion, Extension, HostEvent, Intercept, Placement, ReadTo, Sqe, Status};
use nearflash_core::nvme::opcode;
use std::collections::{BTreeMap, BTreeSet};

pub const NAME: &str = "nice";
pub const OP_CRC32: u32 = 1;
pub const OP_SUM: u32 = 2;
pub const OP_KNN: u32 = 3;
/// Locate only: the result's value is the flash reads spent locating the file (head page + inode sector).
pub const OP_LOCATE: u32 = 4;
/// The FSR-ISC baseline (in-storage path walk from the root): bound at the hyper-address of LBA 0 (never a file's
/// first page), the block is [5, absolute path bytes, 0]; the result's value is the flash reads of the walk.
pub const OP_FSR: u32 = 5;
/// NICE-C (`cnn_net.rs`): the block is [6, network (0 LeNet-5, 1 MobileNetV2), 6 pad bytes, first sector of the
/// weights file (u64)]; the bound file holds u8 images in the network's CHW shape; the result's value is the image
/// count, followed by each image's class (u16).
pub const OP_CNN: u32 = 6;
/// NICE-K over a batch of queries sharing one pass over the file (`knn::knn_batch`).
pub const OP_KNN_BATCH: u32 = 7;
/// Metadata pages the firmware keeps in DRAM by default (the paper's FTL cache), assumed: 1024 x 4 KiB = 4 MiB of
/// the 8 GB DDR4.
pub const DEFAULT_FTL_CACHE_PAGES: usize = 1024;
/// Energy per NICE-K unit cycle, assumed: a few DSP48 MACs and a comparator chain at 16 nm, ~5 pJ per cycle.
const KNN_PJ_PER_CYCLE: f64 = 5.0;
/// Static power of the NICE-K IP core, assumed: a small PL region, 50 mW, for the whole core (its `query_units`
/// members share it, so a batch adds dynamic energy only).
const KNN_STATIC_MW: f64 = 50.0;
/// Energy per NICE-C PE per cycle, assumed: an 8-bit DSP48 MAC with its operand registers at 16 nm, ~2 pJ.
const CNN_PJ_PER_CYCLE: f64 = 2.0;
/// Static power of the NICE-C IP core, assumed: a PE array of 256 DSPs and its buffers, 150 mW.
const CNN_STATIC_MW: f64 = 150.0;
/// Energy per Cortex-R5 cycle, assumed: ~30 mW dynamic at 533 MHz (16 nm RPU), ~56 pJ per cycle.
const R5_PJ_PER_CYCLE: f64 = 56.0;

/// Firmware instructions per sector fed to the learner (parsing metadata on the A53), assumed: a few hundred
/// instructions of bounded parsing per 4 KiB block.
const LEARN_INSTR_PER_SECTOR: f64 = 400.0;
/// Firmware instructions per invocation (decode hyper-address, hash-table lookup), assumed.
const INVOKE_INSTR: f64 = 2_000.0;
/// Largest file an op processes, assumed: a 1 GiB staging buffer of the 8 GB DDR4 (a sparse file's size can exceed
/// its data by far; holes are materialised as zeros).
const MAX_ISC_BYTES: u64 = 1 << 30;
/// Byte of the command holding CDW10 (SLBA), for the error log.
const CDW10: Option<u8> = Some(40);
/// Why a hyper-addressed command with the wrong data direction is refused.
const WRONG_DIRECTION: &str = "at a hyper-address a Write carries a NICE_Write block to the device and a Read returns the result";

/// Bound on remembered dirty ranges before they are merged into one span.
const MAX_PENDING: usize = 4096;

pub struct NiceFirmware {
    capacity: u64,
    sector: u32,
    learner: Option<Learner>,
    pending: Vec<(u64, u64)>,
    /// The NICE_Write block bound to each file head (its defining bytes).
    ops: BTreeMap<u64, Vec<u8>>,
    knn_unit: Option<UnitHandle>,
    knn_params: KnnParams,
    cnn_unit: Option<UnitHandle>,
    cnn_params: CnnParams,
    /// NICE-C's arithmetic (`cnn_precision`).
    cnn_precision: Precision,
    /// Every range ever written (merged; start -> end): what a reopened device re-learns from flash.
    written: BTreeMap<u64, u64>,
    invocations: u64,
    refused: u64,
    learnt_sectors: u64,
    /// Each linked file's OOB list state (LPN list, vulnerable links) and partition, by head LBA.
    chains: BTreeMap<u64, (FileChain, u8)>,
    /// Head LBA of the linked file owning each data LBA (a host overwrite there relinks the file).
    owner: BTreeMap<u64, u64>,
    /// Files whose layout the learner reported and whose list is not written yet.
    unlinked: BTreeSet<(usize, u32)>,
    /// Head LBA of each linked file, by (partition, inode).
    by_inode: BTreeMap<(usize, u32), u64>,
    /// Files that could not be linked yet (a data page not written: a writer that puts inodes first); retried after
    /// the next writes.
    retry: BTreeSet<(usize, u32)>,
    cache: PageCache,
    stats: ListStats,
    params: NiceParams,
    r5_unit: Option<UnitHandle>,
    /// The flash class of ISC requests' work (`isc_priority`).
    isc_class: Option<ClassId>,
    /// Polling cores spinning on requests whose flash work had not ended when last looked at.
    spins: Vec<Spin>,
    /// Sectors read by requests in flight, shared with others (`shared_reads`).
    shared: SharedPages,
    sched: SchedStats,
}

/// Counters of the firmware kernel, reported.
#[derive(Debug, Clone, Copy, Default)]
struct SchedStats {
    isc_flash_sectors: u64,
    isc_shared_sectors: u64,
    host_reads: u64,
    host_flash_sectors: u64,
    host_shared_sectors: u64,
    /// A53 time spent spinning on flash and FPGA (polling only), ns.
    polling_ns: u64,
}

/// A polling A53 core spinning on a request: until `tail` after the request's flash work really ends (`end`);
/// booked until `until` so far.
#[derive(Debug, Clone, Copy)]
struct Spin {
    core: u32,
    end: FlashEnd,
    /// How long (ns) after `end` the core spins.
    tail: u64,
    until: Time,
}

/// Counters of the OOB list, reported.
#[derive(Debug, Clone, Copy, Default)]
struct ListStats {
    files_linked: u64,
    records_written: u64,
    located: u64,
    locate_reads: u64,
    locate_reads_max: u32,
    stream_page_reads: u64,
    link_mismatches: u64,
    rebuilds: u64,
    fsr_walks: u64,
    fsr_reads: u64,
}

impl NiceFirmware {
    pub fn new() -> Self {
        Self::with_cache(DEFAULT_FTL_CACHE_PAGES)
    }

    /// A firmware keeping `pages` metadata pages in its DRAM cache (0: every lookup reads flash).
    pub fn with_cache(pages: usize) -> Self {
        Self::with_params(NiceParams { ftl_cache_pages: pages as u64, ..NiceParams::default() })
    }

    /// A firmware with these parameters.
    pub fn with_params(params: NiceParams) -> Self {
        let pages = params.ftl_cache_pages as usize;
        let cnn_precision = Precision::parse(&params.cnn_precision).expect("cnn_precision is a choice of int8 or f32");
        NiceFirmware {
            shared: SharedPages::new(params.shared_buffer_pages as usize),
            params,
            r5_unit: None,
            isc_class: None,
            spins: Vec::new(),
            sched: SchedStats::default(),
            capacity: 0,
            sector: 0,
            learner: None,
            pending: Vec::new(),
            ops: BTreeMap::new(),
            knn_unit: None,
            knn_params: KnnParams::default(),
            cnn_unit: None,
            cnn_params: CnnParams::default(),
            cnn_precision,
            written: BTreeMap::new(),
            invocations: 0,
            refused: 0,
            learnt_sectors: 0,
            chains: BTreeMap::new(),
            owner: BTreeMap::new(),
            unlinked: BTreeSet::new(),
            by_inode: BTreeMap::new(),
            retry: BTreeSet::new(),
            cache: PageCache::new(pages),
            stats: ListStats::default(),
        }
    }

    /// Feeds every remembered written range to the learner, reading it back from flash; returns when done.
    fn learn(&mut self, ctx: &mut ExecCtx<'_>, mut t: Time) -> Time {
        let Some(learner) = self.learner.as_mut() else { return t };
        let ss = self.sector as usize;
        let pending = std::mem::take(&mut self.pending);
        if !pending.is_empty() {
            self.unlinked.append(&mut self.retry);
        }
        // A host write into a linked file's pages leaves copies without records: relink those files.
        for &(slba, nlb) in &pending {
            for (_, &head) in self.owner.range(slba..slba + nlb) {
                if let Some((c, p)) = self.chains.get(&head) {
                    self.unlinked.insert((usize::from(*p), c.inode));
                }
            }
        }
        let mut events = Vec::new();
        for (slba, nlb) in pending {
            for lba in slba..slba + nlb {
                // A merged span may cover blocks never written: there is nothing to learn there.
                if matches!(ctx.placement(lba), Ok(Placement::Unmapped) | Err(_)) {
                    continue;
                }
                let mut buf = vec![0u8; ss];
                let Ok(r) = ctx.flash_read(t, lba, 1, ReadTo::Dram, &mut buf) else { continue };
                t = ctx.firmware(r.done, LEARN_INSTR_PER_SECTOR);
                let mut src = FlashSource { ctx, t };
                if let Ok(ev) = learner.ingest(lba, &buf, &mut src) {
                    events.extend(ev);
                }
                t = src.t;
                self.learnt_sectors += 1;
            }
        }
        for e in events {
            match e {
                Learnt::Layout { partition, inode } | Learnt::Removed { partition, inode } => {
                    self.unlinked.insert((partition, inode));
                }
            }
        }
        self.link_pending(ctx, t)
    }

    /// Drops the list state of `(partition, inode)` and writes the list of its current layout, if it is a complete
    /// regular file; returns when the records are written.
    fn link_pending(&mut self, ctx: &mut ExecCtx<'_>, mut t: Time) -> Time {
        let Some(learner) = self.learner.as_ref() else { return t };
        for key in std::mem::take(&mut self.unlinked) {
            if let Some(h) = self.by_inode.remove(&key) {
                if let Some((c, _)) = self.chains.remove(&h) {
                    for l in c.lpns {
                        if self.owner.get(&l) == Some(&h) {
                            self.owner.remove(&l);
                        }
                    }
                }
            }
            let Some(file) = learner.file(key.0, key.1) else { continue };
            if file.is_dir || !file.complete || file.lbas.is_empty() {
                continue;
            }
            // A file whose pages are not all stored yet is retried after the next writes; until then (and for an
            // inode number the 32-bit record cannot hold) invocations on it are refused.
            let Ok((chain, done)) = oob_list::link(ctx, file, t) else {
                self.retry.insert(key);
                continue;
            };
            t = done;
            self.stats.files_linked += 1;
            self.stats.records_written += chain.lpns.len() as u64;
            let head = chain.lpns[0];
            for &l in &chain.lpns {
                self.owner.insert(l, head);
            }
            // Another file that still claimed this head (its layout changed since) loses it.
            if let Some((old, p)) = self.chains.insert(head, (chain, file.partition as u8)) {
                self.by_inode.remove(&(usize::from(p), old.inode));
            }
            self.by_inode.insert(key, head);
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

    fn head(&self, ctx: &mut ExecCtx<'_>, sqe: &Sqe) -> Result<u64, Status> {
        let c = self.capacity;
        let Some(lba) = sqe.slba().checked_sub(c) else {
            return Err(ctx.explain(Status::INVALID_FIELD, CDW10, format!("SLBA {}: hyper-addresses are {c}..{}", sqe.slba(), 2 * c)));
        };
        let Some(file) = self.learner.as_ref().and_then(|l| l.file_at_head(lba)) else {
            let why = format!("SLBA {} = {c} + LBA {lba}: no file the firmware has learnt starts at LBA {lba} (the hyper-address is {c} + a file's first data block)", sqe.slba());
            return Err(ctx.explain(Status::INVALID_FIELD, CDW10, why));
        };
        if file.is_dir || !file.complete {
            let what = if file.is_dir { "a directory" } else { "a file whose metadata is not all written yet" };
            return Err(ctx.explain(Status::INVALID_FIELD, CDW10, format!("SLBA {} = {c} + LBA {lba}: LBA {lba} starts {what}, not a regular file", sqe.slba())));
        }
        Ok(lba)
    }

    fn run(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>) -> Result<Time, Status> {
        if sqe.slba().checked_add(u64::from(sqe.nlb())).is_none_or(|end| end > 2 * self.capacity) {
            let why = format!("SLBA {} + NLB {}: beyond the {} advertised blocks (hyper-addresses are {}..{})", sqe.slba(), sqe.nlb(), 2 * self.capacity, self.capacity, 2 * self.capacity);
            return Err(ctx.explain(Status::LBA_OUT_OF_RANGE, CDW10, why));
        }
        if let Some(class) = self.isc_class {
            ctx.use_class(class);
        }
        let t = ctx.firmware(ctx.start, INVOKE_INSTR);
        let t = self.learn(ctx, t);
        if sqe.slba() == self.capacity {
            return self.run_fsr(ctx, sqe, data, t);
        }
        let head = self.head(ctx, sqe)?;
        match (sqe.opcode, data) {
            (opcode::WRITE, DataBuf::ToDevice(src)) => {
                match Job::parse(src).map_err(|why| ctx.explain(Status::INVALID_FIELD, None, why))? {
                    Job::Fsr { .. } => {
                        let why = format!("op id (block byte 0) = {OP_FSR} (FSR) binds only at the hyper-address of LBA 0 (SLBA {})", self.capacity);
                        return Err(ctx.explain(Status::INVALID_FIELD, None, why));
                    }
                    // More queries than the unit's query buffer holds.
                    Job::Knn { queries, .. } if crate::knn::check_batch(queries.len(), &self.knn_params).is_err() => {
                        let why = format!("NICE-K batch query count (block bytes 6..8) = {}: expected 1..={} (the query buffer, max_queries)", queries.len(), self.knn_params.max_queries);
                        return Err(ctx.explain(Status::INVALID_FIELD, None, why));
                    }
                    _ => self.ops.insert(head, src[..Job::block_len(src)].to_vec()),
                };
                Ok(ctx.from_host(t, src.len() as u64))
            }
            (opcode::READ, data @ (DataBuf::FromDevice(_) | DataBuf::None)) => {
                // A timing-only Read (no host buffer) runs the op all the same; its result is dropped.
                let mut scratch = Vec::new();
                let out: &mut [u8] = match data {
                    DataBuf::FromDevice(b) => b,
                    _ => {
                        scratch.resize(sqe.nlb() as usize * self.sector as usize, 0);
                        &mut scratch
                    }
                };
                let Some(block) = self.ops.get(&head) else {
                    return Err(ctx.explain(Status::SEQUENCE_ERROR, None, format!("NICE_Read of the file at LBA {head} before a NICE_Write bound an op to it")));
                };
                let (op, job) = (u32::from(block[0]), Job::parse(block).map_err(|_| Status::INTERNAL_ERROR)?);
                // Two flash reads at most: the head page (its OOB names the inode) and the inode's sector.
                let (found, t) = self.locate_checked(ctx, head, t)?;
                let mut tail = Vec::new();
                let (value, done) = if job == Job::Locate {
                    (u64::from(found.flash_reads), t)
                } else {
                    let p = &self.params;
                    let polling_core = (self.invocations % u64::from(ctx.controller_cores().max(1))) as u32;
                    let seq = match self.r5_unit {
                        Some(unit) if p.coroutines() => Sequencer::R5 { unit, cores: p.r5_cores as u32, cycles: p.r5_page_cycles },
                        _ => Sequencer::A53 { core: polling_core, instructions: ctx.config().controller.fw_page_instructions.0 },
                    };
                    let (bytes, mut read_done, mut issued_until, mut read) = self.load(ctx, head, &found, t, seq)?;
                    // NICE-C also streams its weights file (located the same way), issued with the input's pages.
                    let weights = match job {
                        Job::Cnn { weights_head, .. } => {
                            let (wf, wt) = self.locate_checked(ctx, weights_head, t)?;
                            let (w, wd, wi, wr) = self.load(ctx, weights_head, &wf, wt, seq)?;
                            (read_done, issued_until) = (read_done.max(wd), issued_until.max(wi));
                            read.extend(wr);
                            Some(w)
                        }
                        _ => None,
                    };
                    // The real end of the request's reads (their returned times are unloaded forecasts).
                    let end = ctx.flash_end();
                    let (coroutines, interrupts) = (self.params.coroutines(), self.params.interrupts());
                    // The R5's "transfers done": a task-queue message waking the coroutine (interrupts), or seen by
                    // the core that polls (below).
                    let resumed = if coroutines && interrupts { ctx.firmware(read_done, self.params.handoff_instructions) } else { read_done };
                    let units = ops::Units { knn: self.knn_unit, knn_params: &self.knn_params, cnn: self.cnn_unit, cnn_params: &self.cnn_params, cnn_precision: self.cnn_precision };
                    let (value, mut done) = ops::compute(units, ctx, &job, (&bytes, weights.as_deref()), out.len(), (t, resumed), &mut tail)?;
                    let on_fpga = matches!(job, Job::Knn { .. } | Job::Cnn { .. });
                    // Who waits. Polling wake-up: one A53 core spins until the data (and, for an FPGA op, the
                    // accelerator's status register) says done, from the hand-off to the R5 (coroutines) or from its
                    // last own page transaction (run to completion). Interrupts: coroutines wait on no core; run to
                    // completion spins on its transfers only and sleeps through the accelerator.
                    let spin_until = match (interrupts, coroutines) {
                        (true, true) => None,
                        (true, false) => Some(read_done),
                        (false, _) => Some(if on_fpga { done } else { read_done }),
                    };
                    if let Some(until) = spin_until {
                        let from = if coroutines { t } else { issued_until };
                        let spin = until.saturating_since(from);
                        let spun = ctx.firmware_on(from, polling_core, instructions_for(ctx, spin));
                        self.sched.polling_ns += spin;
                        done = done.max(spun);
                        self.spins.push(Spin { core: polling_core, end, tail: until.saturating_since(read_done), until: spun });
                    }
                    if interrupts && on_fpga {
                        // The FPGA's completion interrupt wakes the coroutine (any core) or the sleeping core.
                        done = if coroutines {
                            ctx.firmware(done, self.params.irq_wake_instructions)
                        } else {
                            ctx.firmware_on(done, polling_core, self.params.irq_wake_instructions)
                        };
                    }
                    // What follows the data (the hand-off, the accelerator, the interrupt) follows its real landing,
                    // which queued work may delay past the forecast; the request's pages are held until then.
                    let tail = done.saturating_since(read_done);
                    ctx.complete_after(end, tail);
                    if self.params.shared_reads {
                        self.shared.hold_all(read, done, Some((end, tail)));
                    }
                    (value, done)
                };
                let file = ops::Found { size: found.size, inode: found.inode, generation: found.generation };
                let res = result_block(op, file, value, &tail);
                out.fill(0);
                let n = res.len().min(out.len());
                out[..n].copy_from_slice(&res[..n]);
                Ok(ctx.to_host(done, out.len() as u64))
            }
            _ => Err(ctx.explain(Status::INVALID_FIELD, Some(0), WRONG_DIRECTION)),
        }
    }

    /// Locates the file whose first sector is `head` from its OOB (two flash reads at most) and checks that the
    /// inode on flash is the file its list was written for.
    fn locate_checked(&mut self, ctx: &mut ExecCtx<'_>, head: u64, t: Time) -> Result<(oob_list::Located, Time), Status> {
        if !self.chains.contains_key(&head) {
            let why = format!("the file at LBA {head} has no OOB list yet: some of its pages are not written, or its inode number does not fit the 32-bit record");
            return Err(ctx.explain(Status::INVALID_FIELD, None, why));
        }
        let learner = self.learner.as_ref().ok_or(Status::INTERNAL_ERROR)?;
        let (found, t) = oob_list::locate(ctx, learner, &mut self.cache, head, t)?;
        self.stats.located += 1;
        self.stats.locate_reads += u64::from(found.flash_reads);
        self.stats.locate_reads_max = self.stats.locate_reads_max.max(found.flash_reads);
        let (chain, _) = self.chains.get(&head).ok_or(Status::INVALID_FIELD)?;
        if chain.lpns != found.lbas || chain.inode != found.inode {
            // The inode on flash is not the file the list was written for (changed under the firmware).
            let why = format!("the file at LBA {head} changed under the firmware: inode {} on flash is not inode {} its list was written for", found.inode, chain.inode);
            return Err(ctx.explain(Status::INVALID_FIELD, None, why));
        }
        Ok((found, t))
    }

    /// Streams a located file by its OOB list through the kernel's sequencer and the shared buffer: (its bytes, when
    /// the last page landed, when the last page was issued, the sectors read from NAND for others to share).
    #[allow(clippy::type_complexity)]
    fn load(&mut self, ctx: &mut ExecCtx<'_>, head: u64, found: &oob_list::Located, t: Time, seq: Sequencer) -> Result<(Vec<u8>, Time, Time, Vec<(u64, Time, Vec<u8>)>), Status> {
        if found.size > MAX_ISC_BYTES {
            let why = format!("the file at LBA {head} holds {} bytes: ops take files of up to {MAX_ISC_BYTES} bytes (the staging buffer)", found.size);
            return Err(ctx.explain(Status::INVALID_FIELD, None, why));
        }
        let (chain, partition) = self.chains.get_mut(&head).ok_or(Status::INVALID_FIELD)?;
        let shared = self.params.shared_reads.then_some(&mut self.shared);
        let mut fetch = Fetcher::new(seq, shared, t);
        let (pages, read_done, st) = oob_list::stream(ctx, chain, *partition, t, &mut fetch)?;
        self.stats.stream_page_reads += st.page_reads;
        self.stats.link_mismatches += st.mismatches;
        self.stats.rebuilds += u64::from(st.rebuilt);
        self.sched.isc_flash_sectors += fetch.read.len() as u64;
        self.sched.isc_shared_sectors += fetch.shared_hits;
        let issued = fetch.last_issue();
        Ok((found.assemble(&pages, self.sector as usize), read_done, issued, std::mem::take(&mut fetch.read)))
    }

    /// Polling cores still spinning when this command arrives: a spin was booked until its request's forecast end;
    /// a request whose flash work has not really ended by now (the loop is at the host's clock) holds its core from
    /// now until at least what follows its data, and one that ended later than forecast held it until then.
    fn extend_spins(&mut self, ctx: &mut ExecCtx<'_>) {
        let now = ctx.start;
        let mut spins = std::mem::take(&mut self.spins);
        spins.retain_mut(|s| {
            let ended = ctx.ended(s.end);
            let target = ended.unwrap_or(now) + s.tail;
            let from = s.until.max(now);
            if target > from {
                let span = target - from;
                s.until = ctx.firmware_on(from, s.core, instructions_for(ctx, span));
                self.sched.polling_ns += span;
            }
            ended.is_none()
        });
        self.spins = spins;
    }

    /// An ordinary Read served by the firmware kernel (shared reads on).
    fn host_read(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>) -> Result<Time, Status> {
        ctx.account_as(OpClass::Read, u64::from(sqe.nlb()) * ctx.lba_bytes());
        match crate::host_read::serve(ctx, sqe, data, &mut self.shared) {
            Ok(s) => {
                self.sched.host_reads += 1;
                self.sched.host_flash_sectors += s.flash_sectors;
                self.sched.host_shared_sectors += s.shared_sectors;
                Ok(s.done)
            }
            Err((st, _)) => Err(st),
        }
    }

    /// FSR-ISC: the mailbox at the hyper-address of LBA 0. Write binds a path; Read walks it from the root inode
    /// in storage, reading each directory level's blocks through the metadata cache, and returns (5, size, inode,
    /// flash reads) with the levels walked (u32) after them.
    fn run_fsr(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>, t: Time) -> Result<Time, Status> {
        const MAILBOX: u64 = u64::MAX;
        match (sqe.opcode, data) {
            (opcode::WRITE, DataBuf::ToDevice(src)) => {
                match Job::parse(src) {
                    Ok(Job::Fsr { .. }) => self.ops.insert(MAILBOX, src[..Job::block_len(src)].to_vec()),
                    Ok(_) => {
                        let why = format!("op id (block byte 0) = {}: the hyper-address of LBA 0 takes only op {OP_FSR} (FSR: [5, absolute path, 0])", src[0]);
                        return Err(ctx.explain(Status::INVALID_FIELD, None, why));
                    }
                    Err(why) => return Err(ctx.explain(Status::INVALID_FIELD, None, why)),
                };
                Ok(ctx.from_host(t, src.len() as u64))
            }
            (opcode::READ, DataBuf::FromDevice(out)) => {
                let Some(Ok(Job::Fsr { path })) = self.ops.get(&MAILBOX).map(|b| Job::parse(b)) else {
                    return Err(ctx.explain(Status::SEQUENCE_ERROR, None, "FSR Read before a NICE_Write bound a path at the hyper-address of LBA 0"));
                };
                let learner = self.learner.as_ref().ok_or(Status::INTERNAL_ERROR)?;
                let (r, done) = crate::fsr::walk(ctx, learner, &mut self.cache, &path, t)?;
                self.stats.fsr_walks += 1;
                self.stats.fsr_reads += u64::from(r.flash_reads);
                let file = ops::Found { size: r.size, inode: r.inode, generation: r.generation };
                let res = result_block(OP_FSR, file, u64::from(r.flash_reads), &r.levels.to_le_bytes());
                out.fill(0);
                let n = res.len().min(out.len());
                out[..n].copy_from_slice(&res[..n]);
                Ok(ctx.to_host(done, out.len() as u64))
            }
            _ => Err(ctx.explain(Status::INVALID_FIELD, Some(0), WRONG_DIRECTION)),
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
        let r = self.ctx.flash_read(self.t, lba, 1, ReadTo::Dram, &mut buf).ok()?;
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
        // With shared reads the firmware kernel serves ordinary Reads too (it must see both to share a NAND read).
        let first_read = if self.params.shared_reads { 0 } else { self.capacity };
        ctx.intercept(Intercept::LbaFrom { opcode: opcode::READ, first_lba: first_read })?;
        ctx.intercept(Intercept::LbaFrom { opcode: opcode::WRITE, first_lba: self.capacity })?;
        self.cnn_unit = Some(ctx.add_units(&UnitSpec {
            name: "nice.cnn".into(),
            count: 1,
            freq_hz: self.cnn_params.clock,
            pj_per_cycle: CNN_PJ_PER_CYCLE * self.cnn_params.pe_count,
            static_mw: CNN_STATIC_MW,
        })?);
        self.r5_unit = Some(ctx.add_units(&UnitSpec {
            name: "nice.r5".into(),
            count: self.params.r5_cores as u32,
            freq_hz: self.params.r5_clock,
            pj_per_cycle: R5_PJ_PER_CYCLE,
            static_mw: 0.0,
        })?);
        ctx.observe();
        let (level, weight) = self.params.isc_class();
        self.isc_class = Some(ctx.flash_class("isc", level, weight)?);
        self.knn_unit = Some(ctx.add_units(&UnitSpec {
            name: "nice.knn".into(),
            count: self.knn_params.query_units as u32,
            freq_hz: self.knn_params.clock,
            pj_per_cycle: KNN_PJ_PER_CYCLE,
            static_mw: KNN_STATIC_MW / self.knn_params.query_units,
        })?);
        self.learner = Some(Learner::new(self.capacity, self.sector).map_err(|e| nearflash_core::SimError::Config(format!("nice: {e}")))?);
        Ok(())
    }

    fn execute(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>) -> ExtCompletion {
        self.extend_spins(ctx);
        if sqe.opcode == opcode::READ && sqe.slba() < self.capacity {
            return match self.host_read(ctx, sqe, data) {
                Ok(done) => ExtCompletion::ok(done),
                Err(s) => ExtCompletion::failed(s, ctx.start),
            };
        }
        self.invocations += 1;
        match self.run(ctx, sqe, data) {
            Ok(done) => ExtCompletion::ok(done),
            Err(s) => {
                self.refused += 1;
                // A failure from below (the file's pages, its OOB records or its metadata on flash) that no check
                // of the firmware explained: say what the status means here.
                if !ctx.is_explained() {
                    let why = match s {
                        Status::INVALID_FIELD => "the file's metadata or OOB records on flash are damaged or do not match the file",
                        _ => "reading the file from flash failed",
                    };
                    ctx.explain(s, None, why);
                }
                ExtCompletion::failed(s, ctx.start)
            }
        }
    }

    fn observe(&mut self, event: &HostEvent) {
        let (HostEvent::Write { slba, nlb } | HostEvent::Trim { slba, nlb }) = *event;
        self.cache.invalidate(slba, slba + nlb);
        self.shared.invalidate(slba, slba + nlb);
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
        let ops: Vec<(u64, &Vec<u8>)> = self.ops.iter().map(|(&h, b)| (h, b)).collect();
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
        let written = pairs("written")?;
        if written.iter().any(|&(a, b)| a >= b || b > self.capacity) {
            return Err(bad("a written range is out of bounds"));
        }
        let mut ops = BTreeMap::new();
        for e in v["ops"].as_array().ok_or_else(|| bad("ops is not a list"))? {
            let head = e[0].as_u64().ok_or_else(|| bad("an op's head is not an integer"))?;
            let block: Option<Vec<u8>> = e[1].as_array().and_then(|a| a.iter().map(|x| x.as_u64().and_then(|x| u8::try_from(x).ok())).collect());
            let block = block.filter(|b| Job::parse(b).is_ok()).ok_or_else(|| bad("an op block does not parse"))?;
            ops.insert(head, block);
        }
        self.ops = ops;
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
            "files_linked": self.stats.files_linked,
            "oob_records_written": self.stats.records_written,
            "located": self.stats.located,
            "locate_flash_reads": self.stats.locate_reads,
            "locate_flash_reads_max": self.stats.locate_reads_max,
            "stream_page_reads": self.stats.stream_page_reads,
            "link_mismatches": self.stats.link_mismatches,
            "list_rebuilds": self.stats.rebuilds,
            "fsr_walks": self.stats.fsr_walks,
            "fsr_flash_reads": self.stats.fsr_reads,
            "ftl_cache_hits": self.cache.hits,
            "ftl_cache_misses": self.cache.misses,
            "scheduling": self.params.scheduling,
            "shared_reads": self.params.shared_reads,
            "isc_flash_sectors": self.sched.isc_flash_sectors,
            "isc_shared_sectors": self.sched.isc_shared_sectors,
            "host_reads_served": self.sched.host_reads,
            "host_flash_sectors": self.sched.host_flash_sectors,
            "host_shared_sectors": self.sched.host_shared_sectors,
            "polling_ns": self.sched.polling_ns,
        })
    }
}

inventory::submit! {
    nearflash_core::ext::Registration {
        name: NAME,
        about: "NICE (Wang et al.): hyper-addressed in-storage computing on files of a real ext4 file system",
        build: |overrides, cfg| {
            let bad = |e: nearflash_core::config::ParamError| nearflash_core::SimError::Config(format!("nice: {e}"));
            // Resolved against the device's preset now, so that bad overrides fail before anything is attached.
            let mut p = NiceParams::from_section(cfg.ext.get(NAME).and_then(|v| v.as_table())).map_err(bad)?;
            p.apply_json_object(overrides, &[]).map_err(bad)?;
            Ok(Box::new(NiceFirmware::with_params(p)))
        },
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
        f.ops.insert(7, vec![OP_SUM as u8]);
        let saved = f.save().unwrap();
        let mut g = NiceFirmware::new();
        g.capacity = 1000;
        g.restore(&saved).unwrap();
        assert_eq!((g.written, g.ops.clone()), (f.written.clone(), f.ops.clone()));
        assert_eq!(g.pending, vec![(5, 35), (100, 10)], "a reopened device re-learns what was written");
        for bad in [&b"{}"[..], b"not json", br#"{"version":1,"ops":[[1,[9]]],"written":[]}"#, br#"{"version":1,"ops":[],"written":[[5,2000]]}"#] {
            assert!(NiceFirmware::new().restore(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
