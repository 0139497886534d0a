//! The assembled device: queue pairs, command execution through every layer, completions in virtual-time order,
//! firmware extensions, persistence and reports.
//!
//! The host's clock (`now`) only moves forward: commands are submitted at `now`, and `wait` moves it to the
//! next completion. A command's functional effects (data stored or read) happen when it is submitted; its timing is
//! a plan of steps (`timing`) that the device's event loop resolves as flash transactions complete, so its
//! completion is posted when the loop reaches it. The loop runs up to the host's clock, or up to the completion the
//! host waits for.

mod admin;
mod core;
pub mod ext;
mod exec;
mod forecast;
mod host_ctx;
mod inflight;
mod latency;
mod programming;
pub mod model_check;
mod repair;
mod report;
mod timing;

pub use self::core::DeviceCore;
pub use exec::{ExecCtx, FlashEnd, FlashRead, PageDone, PageRead, Placement, PhysAddr, ReadTo};
pub use ext::{AttachCtx, ExtCompletion, Extension, HostEvent, Intercept, Registration};
pub use host_ctx::HostCtx;
pub use report::{EnergyReport, FtlReport, Latency, OpClass, OpReport, QueueReport, Report, SchedReport, LATENCY_MAX_NS};

use crate::config::{ConfigTree, DeviceConfig};
use crate::engine::{rng_stream, At, Rng, Time};
use crate::nvme::DataBuf;
use ext::{AttachSnapshot, Declared};
use crate::error::{Result, SimError};
use crate::ftl::{FillPattern, Ftl, RecoveryReport};
use crate::image::{Durability, Image, Opened};
use crate::ctrl::sched::Priority;
use crate::nvme::{self, decode_io, Completion, ErrorLog, IoCommand, Namespace, QueueSet, Sqe, Status};
use report::Measurements;
use std::path::Path;

/// How a device is opened.
#[derive(Debug, Clone, Copy)]
pub struct DeviceOptions {
    /// Seed of every random stream (bit errors, extensions).
    pub seed: u64,
    /// Store sector data (false: timing-only, reads return zeroes).
    pub materialise: bool,
    pub durability: Durability,
    /// Bytes of sector data a device without an image directory may keep in host memory (None: the host's RAM);
    /// a write past it fails as a write to a full disk does (an I/O error, "storage full").
    pub memory_limit: Option<u64>,
}

impl Default for DeviceOptions {
    fn default() -> Self {
        DeviceOptions { seed: 1, materialise: true, durability: Durability::Process, memory_limit: None }
    }
}

/// Completion of a synchronous command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Done {
    pub status: Status,
    pub dw0: u32,
    /// Host-visible latency.
    pub latency_ns: u64,
    pub completed_at: Time,
    /// The command identifier it ran under (to find it in the error log).
    pub cid: u16,
}

struct InFlight {
    submitted: Time,
    class: OpClass,
    bytes: u64,
    /// Its queue's priority (for the per-priority figures).
    prio: Priority,
}

/// An attached extension with what it declared and its own random stream.
struct ExtSlot {
    ext: Box<dyn Extension>,
    declared: Declared,
    rng: Rng,
}

pub struct Device {
    pub(crate) core: DeviceCore,
    tree: ConfigTree,
    queues: QueueSet,
    ns: Namespace,
    image: Option<Image>,
    exts: Vec<ExtSlot>,
    vendor: Vec<Option<usize>>,
    seed: u64,
    now: Time,
    inflight: inflight::InFlightTable<InFlight>,
    meas: Measurements,
    window_start: Time,
    last_completion: Time,
    recovery: Option<RecoveryReport>,
    next_cid: u16,
    /// Ranges the Dataset Management command being executed deallocated (for observing extensions).
    last_trims: Vec<(u64, u32)>,
    /// Failed commands (Get Log Page 0x01 and 0xC1).
    errors: ErrorLog,
    /// Commands whose completion is not posted yet, per submission queue (indexed by its id: ids are small, and this
    /// is counted on every submission and posting and read on every posting event of a wait).
    unposted: Vec<u32>,
    /// Commands submitted while the event loop was ahead of the host's clock (`Report::sched`).
    late_submissions: u64,
}

/// Whether the earliest completion pending on a set of queues is still `earliest` after an event posted
/// completions, the earliest of them at `first`: yes when `first` is later. A completion queue's first entry
/// changes only to an entry posted before it (one posted at its time or later goes after it: `QueueSet::post`),
/// so every queue's first entry stays as early as it was or later than `first`, whichever queues the completions
/// went to. (At `first` itself an entry of a queue listed before `earliest`'s could win its tie: looked up again.)
#[inline]
fn posting_keeps_earliest(earliest: Option<Time>, first: Time) -> bool {
    earliest.is_some_and(|c| first > c)
}

impl Device {
    /// Creates a device image in `dir` from a configuration tree.
    pub fn create(dir: &Path, tree: ConfigTree, opts: DeviceOptions) -> Result<Device> {
        let cfg = DeviceConfig::from_tree(&tree)?;
        let (img, store) = Image::create(dir, &tree, opts.materialise, opts.durability)?;
        let ftl = Ftl::new(&cfg, store)?;
        let mut dev = Device::assemble(cfg, tree, ftl, Some(img), opts);
        dev.checkpoint()?;
        Ok(dev)
    }

    /// Opens an existing image, recovering from an unclean shutdown if needed.
    pub fn open(dir: &Path, opts: DeviceOptions) -> Result<Device> {
        let (img, tree, store, opened) = Image::open(dir, opts.durability)?;
        let cfg = DeviceConfig::from_tree(&tree)?;
        let (ftl, recovery) = match opened {
            Opened::Clean(blocks, seq) => (Ftl::with_state(&cfg, store, blocks, seq)?, None),
            Opened::Unclean(ckpt) => {
                let (f, r) = Ftl::recover(&cfg, store, ckpt)?;
                (f, Some(r))
            }
        };
        let mut opts = opts;
        opts.materialise = img.materialised();
        let mut dev = Device::assemble(cfg, tree, ftl, Some(img), opts);
        if recovery.is_some() {
            dev.checkpoint()?;
        }
        dev.recovery = recovery;
        Ok(dev)
    }

    /// A device without an image directory (state and data in anonymous memory).
    pub fn memory(tree: ConfigTree, opts: DeviceOptions) -> Result<Device> {
        let cfg = DeviceConfig::from_tree(&tree)?;
        let store = Image::memory_store(&cfg, opts.materialise, opts.memory_limit)?;
        let ftl = Ftl::new(&cfg, store)?;
        Ok(Device::assemble(cfg, tree, ftl, None, opts))
    }

    fn assemble(cfg: DeviceConfig, tree: ConfigTree, ftl: Ftl, image: Option<Image>, opts: DeviceOptions) -> Device {
        let ns = Namespace {
            lbas: ftl.logical_sectors(),
            max_lbas: (cfg.nvme.mdts.0 / cfg.ftl.sector_size.0).max(1) as u32,
        };
        let queues = QueueSet::new(cfg.nvme.max_queues.0 as u16, cfg.nvme.max_queue_depth.0 as u32, 64);
        Device {
            core: DeviceCore::new(cfg, ftl, opts.seed),
            tree,
            queues,
            ns,
            image,
            exts: Vec::new(),
            vendor: vec![None; 128],
            seed: opts.seed,
            now: Time::ZERO,
            inflight: Default::default(),
            meas: Measurements::new(),
            window_start: Time::ZERO,
            last_completion: Time::ZERO,
            recovery: None,
            next_cid: 0,
            last_trims: Vec::new(),
            errors: ErrorLog::default(),
            unposted: Vec::new(),
            late_submissions: 0,
        }
    }

    pub fn config(&self) -> &DeviceConfig {
        &self.core.cfg
    }

    pub fn config_tree(&self) -> &ConfigTree {
        &self.tree
    }

    /// The host side of the model, for host libraries (host compute, host DRAM, the host's energy accounts).
    pub fn host(&mut self) -> HostCtx<'_> {
        HostCtx { core: &mut self.core, now: self.now }
    }

    /// When every resource is free of the work issued so far: runs the event loop to its end (the host's clock does
    /// not move).
    pub fn horizon(&mut self) -> Time {
        self.core.run_until(Time::MAX);
        self.collect_posted();
        self.core.res.horizon().max(self.core.events.clock())
    }

    /// Checks the FTL's invariants (valid counts match the mapping table; every entry's OOB names its LBA).
    pub fn check_consistency(&self) -> Result<()> {
        self.core.ftl.check_consistency()
    }

    /// The attached extension `name`, if it is a `T` (host libraries read their extension's resolved parameters).
    pub fn extension<T: Extension>(&self, name: &str) -> Option<&T> {
        let slot = self.exts.iter().find(|s| s.ext.name() == name)?;
        (&*slot.ext as &dyn std::any::Any).downcast_ref::<T>()
    }

    /// Names of the attached extensions, in attach order.
    pub fn extensions(&self) -> Vec<String> {
        self.exts.iter().map(|s| s.ext.name().to_string()).collect()
    }

    /// What recovery did when this device was opened after a crash.
    pub fn recovery(&self) -> Option<&RecoveryReport> {
        self.recovery.as_ref()
    }

    pub fn namespace(&self) -> Namespace {
        self.ns
    }

    pub fn lba_bytes(&self) -> u64 {
        self.core.cfg.ftl.sector_size.0
    }

    /// The host's virtual clock.
    pub fn now(&self) -> Time {
        self.now
    }

    /// How far the event loop has run: a command submitted at an earlier host time starts here, not at its
    /// submission (`Report::sched.late_submissions`).
    pub fn loop_clock(&self) -> Time {
        self.core.events.clock()
    }

    /// Commands failed since the device was opened. A command's status is decided when it is submitted (and
    /// recorded in the error log then), so a caller can learn it before the command completes: this count moves.
    pub fn errors_recorded(&self) -> u64 {
        self.errors.total()
    }

    /// The status command `cid` of queue `sqid` failed with, while the error log keeps its entry.
    pub fn failed_status(&self, sqid: u16, cid: u16) -> Option<nvme::Status> {
        self.errors.find(sqid, cid).map(|e| e.status)
    }

    /// Moves the host clock forward (think time); never backwards. The event loop runs up to it.
    pub fn advance_to(&mut self, t: Time) {
        self.core.run_until(t);
        self.collect_posted();
        if t > self.now {
            self.now = t;
            self.core.host_now = t;
            self.core.res.prune(t);
        }
    }

    /// Attaches a firmware extension. Refused (and nothing changed) if its opcodes or intercepts overlap an
    /// attached extension's, or if its attach fails. An image that holds state the extension saved is restored.
    pub fn attach(&mut self, mut ext: Box<dyn Extension>) -> Result<()> {
        let name = ext.name().to_string();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(SimError::Config(format!("extension name {name:?} must be non-empty ASCII letters, digits, _ or -")));
        }
        if self.exts.iter().any(|e| e.ext.name() == name) {
            return Err(SimError::Config(format!("extension {name} is already attached")));
        }
        let others: Vec<(String, Declared)> = self.exts.iter().map(|e| (e.ext.name().to_string(), e.declared.clone())).collect();
        let snapshot = AttachSnapshot::take(&self.core);
        let mut ctx = AttachCtx { core: &mut self.core, name: name.clone(), declared: Declared::default(), others: &others };
        let attached = ext.attach(&mut ctx);
        let declared = std::mem::take(&mut ctx.declared);
        let restored = match (&attached, self.image.as_ref().map(|i| i.read_ext_state(&name))) {
            (Ok(()), Some(Ok(Some(state)))) => ext.restore(&state),
            (Ok(()), Some(Err(e))) => Err(e),
            _ => Ok(()),
        };
        if let Err(e) = attached.and(restored) {
            snapshot.restore(&mut self.core);
            return Err(e);
        }
        let idx = self.exts.len();
        for &op in &declared.opcodes {
            self.vendor[usize::from(op - nvme::opcode::IO_VENDOR_FIRST)] = Some(idx);
        }
        if let Some(lbas) = declared.advertised_lbas {
            self.ns.lbas = lbas;
        }
        if declared.relocations {
            self.core.ftl.track_relocations(true);
        }
        let rng = rng_stream(self.seed, &format!("extension:{name}"));
        self.exts.push(ExtSlot { ext, declared, rng });
        Ok(())
    }

    /// Writes every extension's saved state into the image (a no-op for in-memory devices).
    fn save_extensions(&self) -> Result<()> {
        let Some(img) = &self.image else { return Ok(()) };
        for slot in &self.exts {
            if let Some(state) = slot.ext.save() {
                img.write_ext_state(slot.ext.name(), &state)?;
            }
        }
        Ok(())
    }

    /// Creates I/O queue pair `qid` with `depth` entries (through the admin queue, as a host driver does).
    pub fn create_queue_pair(&mut self, qid: u16, depth: u32) -> Result<()> {
        self.create_queue_pair_with(qid, depth, Priority::Medium)
    }

    /// As `create_queue_pair`, the submission queue of priority `prio` (Create I/O SQ's QPRIO): its commands' flash
    /// work is of that class in the flash scheduler (urgent strictly first, then high, medium and low 4:2:1).
    pub fn create_queue_pair_with(&mut self, qid: u16, depth: u32, prio: Priority) -> Result<()> {
        for sqe in [
            Sqe { opcode: nvme::opcode::ADMIN_CREATE_CQ, cdw10: u32::from(qid) | ((depth - 1) << 16), cdw11: 1, ..Sqe::default() },
            Sqe {
                opcode: nvme::opcode::ADMIN_CREATE_SQ,
                cdw10: u32::from(qid) | ((depth.max(1) - 1) << 16),
                cdw11: 1 | (prio.qprio() << 1) | (u32::from(qid) << 16),
                ..Sqe::default()
            },
        ] {
            let d = self.execute(0, sqe, DataBuf::None)?;
            if !d.status.is_success() {
                let what = format!("creating queue {qid} (depth {depth}) failed: {}", d.status);
                return Err(SimError::InvalidArgument(self.explained(&what, 0, d.cid)));
            }
        }
        Ok(())
    }

    /// Deletes I/O queue pair `qid` (its commands must have completed).
    pub fn delete_queue_pair(&mut self, qid: u16) -> Result<()> {
        for sqe in [
            Sqe { opcode: nvme::opcode::ADMIN_DELETE_SQ, cdw10: u32::from(qid), ..Sqe::default() },
            Sqe { opcode: nvme::opcode::ADMIN_DELETE_CQ, cdw10: u32::from(qid), ..Sqe::default() },
        ] {
            let d = self.execute(0, sqe, DataBuf::None)?;
            if !d.status.is_success() {
                let what = format!("deleting queue {qid} failed: {}", d.status);
                return Err(SimError::InvalidArgument(self.explained(&what, 0, d.cid)));
            }
        }
        Ok(())
    }

    pub fn has_queue(&self, qid: u16) -> bool {
        self.queues.sq_exists(qid)
    }

    /// The priority class (QPRIO) I/O submission queue `qid` was created with, or None if it does not exist.
    pub fn queue_priority(&self, qid: u16) -> Option<Priority> {
        self.queue_depth(qid).map(|_| self.queues.priority(qid))
    }

    /// Entries of I/O submission queue `qid` (it holds one fewer commands), or None if it does not exist.
    pub fn queue_depth(&self, qid: u16) -> Option<u32> {
        self.queues.sq_depth(qid).filter(|_| qid != 0)
    }

    /// Whether command `cid` of `sqid` was taken and its completion not reaped yet (a submit that returned a fault
    /// still completes, with Internal Error).
    pub fn is_in_flight(&self, sqid: u16, cid: u16) -> bool {
        self.inflight.contains(sqid, cid)
    }

    /// Whether queue `sqid` holds a command whose completion is not reaped yet (submitted, running or posted).
    pub fn has_commands_in_flight(&self, sqid: u16) -> bool {
        self.inflight.any_of(sqid)
    }

    /// Identifiers of the I/O queue pairs that exist (whoever created them), ascending.
    pub fn io_queue_ids(&self) -> Vec<u16> {
        self.queues.sq_ids().into_iter().filter(|&q| q != 0).collect()
    }

    /// A command identifier unused on `sqid`.
    pub fn next_cid(&mut self, sqid: u16) -> u16 {
        loop {
            self.next_cid = self.next_cid.wrapping_add(1);
            if !self.inflight.contains(sqid, self.next_cid) {
                return self.next_cid;
            }
        }
    }

    /// Submits `sqe` on `sqid` at the current host time. Errors are host-side misuse (no such queue, queue full,
    /// duplicate command id); everything the device rejects completes with an NVMe status instead.
    pub fn submit(&mut self, sqid: u16, sqe: Sqe, data: DataBuf<'_>) -> Result<()> {
        if !self.queues.sq_exists(sqid) {
            return Err(SimError::InvalidArgument(format!("submission queue {sqid} does not exist")));
        }
        if self.inflight.contains(sqid, sqe.cid) {
            return Err(SimError::InvalidArgument(format!("command id {} is already in flight on queue {sqid}", sqe.cid)));
        }
        self.queues.take_slot(sqid)?;
        if sqid != 0 && sqe.opcode == nvme::opcode::READ {
            // Its mapping entry (a cache miss on a large device) is on its way while the command is fetched.
            self.core.ftl.prefetch(sqe.slba());
        }
        let t0 = self.now;
        if self.core.events.clock() > t0 {
            self.late_submissions += 1;
        }
        let c = &mut self.core;
        let t_doorbell = c.host.submit_path(&mut c.res, t0);
        let rung = t_doorbell + 2 * c.host.link_latency;
        // The queue's priority: no command changes it (the admin queue's is fixed; an I/O command touches no queue).
        let prio = self.queues.priority(sqid);
        self.core.class = prio.class();
        self.core.read_posting = timing::Posting { sqid, cid: sqe.cid, status: Status::SUCCESS, dw0: 0 };
        // The admin queue is never held back (it takes no I/O command slot).
        let (class, bytes, status, dw0, done) = if sqid == 0 {
            let c = &mut self.core;
            let t_fetched = c.host.to_device(&mut c.res, &mut c.ledger, rung, nvme::SQE_BYTES as u64);
            let (s, dw0, t) = self.exec_admin(&sqe, data, t_fetched);
            (OpClass::Admin, 0, s, dw0, At::at(t))
        } else {
            let t_fetched = self.core.fetch_sqe(sqid, rung);
            self.exec_io(&sqe, data, t_fetched)
        };
        let detail = self.core.error_detail.take();
        if !status.is_success() {
            let lba = (sqid != 0 && matches!(sqe.opcode, nvme::opcode::READ | nvme::opcode::WRITE | nvme::opcode::WRITE_ZEROES))
                .then(|| sqe.slba());
            self.errors.record(sqid, sqe.cid, status, lba, detail);
        }
        self.inflight.insert(sqid, sqe.cid, InFlight { submitted: t0, class, bytes: if status.is_success() { bytes } else { 0 }, prio });
        let q = usize::from(sqid);
        if self.unposted.len() <= q {
            self.unposted.resize(q + 1, 0);
        }
        self.unposted[q] += 1;
        self.core.complete(timing::Posting { sqid, cid: sqe.cid, status, dw0 }, done);
        self.core.drain();
        self.core.prune_programs();
        self.collect_posted();
        // The command completes (Internal Error) so that the queue stays consistent, and the fault is the caller's
        // error: the simulation cannot be trusted past it.
        match self.core.fault.take() {
            Some(f) => Err(f),
            None => Ok(()),
        }
    }

    /// Queues the completions whose time the event loop now knows (inlined: after most events there are none).
    #[inline]
    fn collect_posted(&mut self) {
        if !self.core.posted.is_empty() {
            self.queue_posted();
        }
    }

    /// By index, then cleared: a `drain` iterator's set-up and drop cost more than the one completion an event
    /// usually posts. Returns the earliest time posted (`Time::MAX` if none).
    #[inline(never)]
    fn queue_posted(&mut self) -> Time {
        let mut first = Time::MAX;
        for i in 0..self.core.posted.len() {
            let (p, t) = self.core.posted[i];
            first = first.min(t);
            self.queues.post(p.sqid, t, p.cid, p.status, p.dw0, 0);
            if let Some(n) = self.unposted.get_mut(usize::from(p.sqid)) {
                *n -= 1;
            }
        }
        self.core.posted.clear();
        first
    }

    /// Runs the next event; the earliest time of the completions it posted, if it posted any (only then do the
    /// completion queues and the counts of commands not yet posted change).
    fn step_posting(&mut self) -> Option<Time> {
        self.core.step_event();
        if self.core.posted.is_empty() {
            return None;
        }
        Some(self.queue_posted())
    }

    /// A hint that `lba` will be accessed soon (brings its mapping entry into the host's cache); changes nothing.
    #[inline]
    pub fn prefetch(&self, lba: u64) {
        self.core.ftl.prefetch(lba);
    }

    /// A hint that `lba`'s stored data will be read soon (brings its OOB record and first bytes into the host's
    /// cache); changes nothing.
    #[inline]
    pub fn prefetch_data(&self, lba: u64) {
        self.core.ftl.prefetch_data(lba);
    }

    /// Time of the earliest pending completion on `sqid`'s completion queue. The event loop runs until it is
    /// known (a command of another queue submitted afterwards at an earlier host time arrives after the loop's
    /// clock: see `Report::sched.late_submissions`; `next_completion` looks at every queue and avoids that).
    pub fn next_completion_time(&mut self, sqid: u16) -> Option<Time> {
        self.next_completion_before(sqid, Time::MAX)
    }

    /// Time of the earliest completion on `sqid` that comes before `limit`, if one does. The event loop runs only
    /// up to `limit`: a host that will submit at `limit` (an open-loop arrival) finds the device where it was then,
    /// not past it.
    pub fn next_completion_before(&mut self, sqid: u16, limit: Time) -> Option<Time> {
        // Until every command of the queue has posted, an event before its earliest posted completion may post an
        // earlier one.
        let waiting = |d: &Self| d.unposted.get(usize::from(sqid)).is_some_and(|&n| n > 0);
        let (mut waiting_now, mut posted) = (waiting(self), self.queues.next_time(sqid));
        while waiting_now {
            match self.core.next_event() {
                Some(e) if e < limit && posted.is_none_or(|c| e < c) => {
                    if let Some(first) = self.step_posting() {
                        waiting_now = waiting(self);
                        if !posting_keeps_earliest(posted, first) {
                            posted = self.queues.next_time(sqid);
                        }
                    }
                }
                _ => break,
            }
        }
        self.queues.next_time(sqid).filter(|&t| t < limit)
    }

    /// The earliest pending completion of any I/O queue in `sqids`: (queue, time). The event loop runs only as
    /// far as needed, so submissions made at that time never arrive in its past.
    pub fn next_completion(&mut self, sqids: &[u16]) -> Option<(u16, Time)> {
        self.next_completion_before_any(sqids, Time::MAX)
    }

    /// As `next_completion`, among the completions before `limit` (the loop runs only up to it: a host that will
    /// submit at `limit` finds the device where it was then). At equal times, the first queue of `sqids` wins.
    pub fn next_completion_before_any(&mut self, sqids: &[u16], limit: Time) -> Option<(u16, Time)> {
        self.next_completion_known(sqids, limit).filter(|&(_, t)| t < limit)
    }

    /// The earliest pending completion of any queue in `sqids` once it is certain, running the event loop only
    /// before `limit`: it may lie at or past `limit` (the device has computed it, and no event before it can post
    /// an earlier one). None while that needs events at or past `limit`, or when nothing is pending. A host that
    /// follows the wall clock (NBD in real time) learns completions ahead without running the loop past the present.
    pub fn next_completion_known(&mut self, sqids: &[u16], limit: Time) -> Option<(u16, Time)> {
        let earliest = |d: &Self| sqids.iter().enumerate().filter_map(|(i, &q)| d.queues.next_time(q).map(|t| (t, i))).min();
        let waiting = |d: &Self| sqids.iter().any(|&q| d.unposted.get(usize::from(q)).is_some_and(|&n| n > 0));
        // Both change only when an event posts completions (about one event in three): looked up again only then,
        // and the earliest only when a completion posted may come before it (`posting_keeps_earliest`).
        let (mut waiting_now, mut posted) = (waiting(self), earliest(self));
        loop {
            match self.core.next_event() {
                Some(e) if waiting_now && posted.is_none_or(|(c, _)| e < c) => {
                    if e >= limit {
                        return None;
                    }
                    if let Some(first) = self.step_posting() {
                        waiting_now = waiting(self);
                        if !posting_keeps_earliest(posted.map(|(c, _)| c), first) {
                            posted = earliest(self);
                        }
                    }
                }
                _ => return posted.map(|(t, i)| (sqids[i], t)),
            }
        }
    }

    /// Time of the device's next event (None: nothing is under way).
    pub fn next_event_time(&self) -> Option<Time> {
        self.core.next_event()
    }

    /// Reaps a completion on `sqid` that happened at or before now.
    #[inline]
    pub fn reap(&mut self, sqid: u16) -> Option<Completion> {
        let c = self.queues.reap(sqid, self.now)?;
        self.account(sqid, &c);
        Some(c)
    }

    /// Reaps the earliest pending completion on `sqid` whenever it happens, without moving the host clock: a host
    /// whose reactions to completions are set by something else than this clock (an NBD client, whose requests
    /// arrive on their own) learns each completion's time, and the device can go on taking commands at `now`.
    pub fn reap_next(&mut self, sqid: u16) -> Option<Completion> {
        let t = self.next_completion_time(sqid)?;
        let c = self.queues.reap(sqid, t)?;
        self.account(sqid, &c);
        Some(c)
    }

    /// Waits for the next completion on `sqid`, moving the host clock to it.
    pub fn wait(&mut self, sqid: u16) -> Option<Completion> {
        let t = self.next_completion_time(sqid)?;
        self.advance_to(t);
        self.reap(sqid)
    }

    /// Inlined into `reap` (once per command; its call saved six registers).
    #[inline]
    fn account(&mut self, sqid: u16, c: &Completion) {
        if let Some(f) = self.inflight.remove(sqid, c.cqe.cid) {
            let ok = c.cqe.status().is_success();
            self.meas.record(f.class, sqid, f.prio, c.time - f.submitted, f.bytes, ok);
            self.last_completion = self.last_completion.max(c.time);
        }
    }

    /// Submits and waits for one command (the queue must have nothing else in flight).
    pub fn execute(&mut self, sqid: u16, mut sqe: Sqe, data: DataBuf<'_>) -> Result<Done> {
        if self.queues.outstanding(sqid) > 0 {
            return Err(SimError::InvalidArgument(format!(
                "queue {sqid} has commands in flight; use submit/wait for asynchronous I/O"
            )));
        }
        sqe.cid = self.next_cid(sqid);
        let t0 = self.now;
        if let Err(e) = self.submit(sqid, sqe, data) {
            if self.queues.outstanding(sqid) > 0 {
                self.wait(sqid); // a fault's completion, so that the queue is empty again
            }
            return Err(e);
        }
        let c = self.wait(sqid).ok_or_else(|| SimError::InvalidArgument("completion lost".into()))?;
        Ok(Done { status: c.cqe.status(), dw0: c.cqe.dw0, latency_ns: c.time - t0, completed_at: c.time, cid: c.cqe.cid })
    }

    fn exec_io(&mut self, sqe: &Sqe, data: DataBuf<'_>, t: At) -> (OpClass, u64, Status, u32, At) {
        // Intercepts never overlap (checked at attach), so at most one extension matches.
        if let Some(i) = self.exts.iter().position(|e| e.declared.intercepts.iter().any(|r| r.matches(sqe))) {
            return self.exec_ext(i, sqe, data, t);
        }
        let r = self.exec_standard(sqe, data, t);
        self.after_standard(sqe, r.2);
        r
    }

    /// Tells observing extensions about a standard write or trim that succeeded, and every tracking extension about
    /// sectors GC moved meanwhile.
    fn after_standard(&mut self, sqe: &Sqe, status: Status) {
        use nvme::opcode;
        if status.is_success() && self.exts.iter().any(|e| e.declared.observe) {
            let (slba, nlb) = (sqe.slba(), u64::from(sqe.nlb()));
            let event = match sqe.opcode {
                opcode::WRITE => Some(HostEvent::Write { slba, nlb }),
                opcode::WRITE_ZEROES if sqe.cdw12 & (1 << 25) != 0 => Some(HostEvent::Trim { slba, nlb }),
                opcode::WRITE_ZEROES => Some(HostEvent::Write { slba, nlb }),
                _ => None,
            };
            let mut events: Vec<HostEvent> = event.into_iter().collect();
            if sqe.opcode == opcode::DSM {
                events.extend(self.last_trims.drain(..).map(|(slba, nlb)| HostEvent::Trim { slba, nlb: u64::from(nlb) }));
            }
            for slot in self.exts.iter_mut().filter(|e| e.declared.observe) {
                for ev in &events {
                    slot.ext.observe(ev);
                }
            }
        }
        self.last_trims.clear();
        self.dispatch_relocations();
    }

    fn dispatch_relocations(&mut self) {
        if !self.exts.iter().any(|e| e.declared.relocations) {
            return;
        }
        let moves = self.core.ftl.take_relocations();
        if moves.is_empty() {
            return;
        }
        for slot in self.exts.iter_mut().filter(|e| e.declared.relocations) {
            slot.ext.on_relocate(&moves);
        }
    }

    fn exec_standard(&mut self, sqe: &Sqe, data: DataBuf<'_>, t: At) -> (OpClass, u64, Status, u32, At) {
        let cmd = match decode_io(sqe, &self.ns) {
            Ok(c) => c,
            Err(r) => {
                let done = self.fw(t, self.core.ctrl.fw_other);
                self.core.error_detail = Some(r.detail);
                return (OpClass::Admin, 0, r.status, 0, done);
            }
        };
        let lba = self.lba_bytes();
        match cmd {
            IoCommand::Read { slba, nlb, .. } => {
                let (s, done) = self.exec_read(slba, nlb, data, t);
                (OpClass::Read, u64::from(nlb) * lba, s, 0, done)
            }
            IoCommand::Write { slba, nlb, fua } => {
                let (s, done) = self.exec_write(slba, nlb, data, fua, t);
                (OpClass::Write, u64::from(nlb) * lba, s, 0, done)
            }
            IoCommand::Flush => {
                let fw = self.fw(t, self.core.ctrl.fw_other);
                let done = self.core.flush_buffer(fw);
                let durable = match &self.image {
                    Some(img) => img.flush(&self.core.ftl).and_then(|()| self.save_extensions()),
                    None => Ok(()),
                };
                let s = match durable {
                    Ok(()) => Status::SUCCESS,
                    Err(e) => self.core.refuse(Status::INTERNAL_ERROR, None, format!("writing the image to its files failed: {e}")),
                };
                (OpClass::Flush, 0, s, 0, done)
            }
            IoCommand::Dsm { ranges, deallocate } => {
                let (s, done) = self.exec_dsm(ranges, deallocate, data, t);
                (OpClass::Trim, 0, s, 0, done)
            }
            IoCommand::WriteZeroes { slba, nlb, deallocate } => {
                let fw = self.fw(t, self.core.ctrl.fw_other);
                let s = if deallocate {
                    self.trim_range(slba, nlb)
                } else {
                    let zeros = vec![0u8; (u64::from(nlb) * lba) as usize];
                    match self.core.write_lbas(slba, &zeros, None, fw) {
                        Ok(_) => Status::SUCCESS,
                        Err(s) => s,
                    }
                };
                (OpClass::Write, 0, s, 0, fw)
            }
            IoCommand::Vendor(op) => match self.vendor[usize::from(op - nvme::opcode::IO_VENDOR_FIRST)] {
                Some(i) => self.exec_ext(i, sqe, data, t),
                None => {
                    let done = self.fw(t, self.core.ctrl.fw_other);
                    let why = format!("vendor opcode {op:#04x}: no attached extension claims it");
                    (OpClass::Vendor, 0, self.core.refuse(Status::INVALID_OPCODE, Some(nvme::field::OPCODE), why), 0, done)
                }
            },
        }
    }

    /// Firmware instructions on a controller core once `ready` is known.
    fn fw(&mut self, ready: At, instructions: f64) -> At {
        self.core.book(timing::Booking::Firmware(instructions), ready)
    }

    fn exec_ext(&mut self, i: usize, sqe: &Sqe, data: DataBuf<'_>, t: At) -> (OpClass, u64, Status, u32, At) {
        let fw = self.fw(t, self.core.ctrl.fw_other);
        let start = self.core.wait_for(fw);
        let slot = &mut self.exts[i];
        self.core.forecast = Some(forecast::Forecast::new(std::mem::take(&mut self.core.horizons)));
        let class_before = self.core.class;
        let mut ctx = ExecCtx { core: &mut self.core, rng: &mut slot.rng, start, accounted_as: None, pending: Vec::new() };
        let r = slot.ext.execute(&mut ctx, sqe, data);
        let pending = std::mem::take(&mut ctx.pending);
        let (class, bytes) = ctx.accounted_as.unwrap_or((OpClass::Vendor, 0));
        if !r.status.is_success() && !ctx.is_explained() {
            let why = format!("extension {} failed opcode {:#04x} without giving a reason", slot.ext.name(), sqe.opcode);
            ctx.explain(r.status, None, why);
        }
        self.core.horizons = self.core.forecast.take().map(forecast::Forecast::into_horizons).unwrap_or_default();
        self.core.class = class_before;
        self.dispatch_relocations();
        let done = self.core.max_all(At::at(r.done.max(start)), &pending);
        (class, bytes, r.status, r.dw0, done)
    }

    fn exec_read(&mut self, slba: u64, nlb: u32, data: DataBuf<'_>, t: At) -> (Status, At) {
        let bytes = u64::from(nlb) * self.lba_bytes();
        let out: &mut [u8] = match data {
            DataBuf::FromDevice(b) if b.len() as u64 >= bytes => &mut b[..bytes as usize],
            DataBuf::None => &mut [],
            _ => return (self.short_buffer(bytes, "from"), self.fw(t, self.core.ctrl.fw_other)),
        };
        let c = &mut self.core;
        let fw_instructions = c.ctrl.fw_read + c.ctrl.map_instructions * f64::from(nlb);
        match c.read_command(slba, nlb, fw_instructions, t, out, self::core::OnMediaError::Fail) {
            (fw, Ok(r)) => (Status::SUCCESS, c.deliver_pages(fw, r.pages)),
            (fw, Err(s)) => (s, fw),
        }
    }

    fn exec_write(&mut self, slba: u64, nlb: u32, data: DataBuf<'_>, fua: bool, t: At) -> (Status, At) {
        let bytes = u64::from(nlb) * self.lba_bytes();
        let src: Option<&[u8]> = match data {
            DataBuf::ToDevice(b) if b.len() as u64 >= bytes => Some(&b[..bytes as usize]),
            DataBuf::None => None,
            _ => return (self.short_buffer(bytes, "to"), self.fw(t, self.core.ctrl.fw_other)),
        };
        let c = &mut self.core;
        let fw = c.book_firmware(c.ctrl.fw_write + c.ctrl.map_instructions * f64::from(nlb), t);
        let latency = c.host.link_latency;
        let in_dram = c.book_data_in(bytes, fw + latency);
        match c.write_sectors(slba, nlb, src, None, in_dram, true) {
            Ok(buffered) if fua => (Status::SUCCESS, c.flush_buffer(buffered)),
            Ok(buffered) => (Status::SUCCESS, buffered),
            Err(s) => (s, in_dram),
        }
    }

    fn exec_dsm(&mut self, ranges: u32, deallocate: bool, data: DataBuf<'_>, t: At) -> (Status, At) {
        let fw = self.fw(t, self.core.ctrl.fw_other);
        let arrived = self.core.book(timing::Booking::FromHost(u64::from(ranges) * 16), fw);
        let bytes: &[u8] = match &data {
            DataBuf::ToDevice(b) => b,
            _ => &[],
        };
        let list = match nvme::parse_dsm_ranges(bytes, ranges, &self.ns) {
            Ok(l) => l,
            Err(r) => {
                self.core.error_detail = Some(r.detail);
                return (r.status, arrived);
            }
        };
        if !deallocate {
            return (Status::SUCCESS, arrived); // attribute hints only
        }
        for (slba, n) in list {
            let s = self.trim_range(slba, n);
            if !s.is_success() {
                return (s, arrived);
            }
            self.last_trims.push((slba, n));
        }
        (Status::SUCCESS, arrived)
    }

    fn trim_range(&mut self, slba: u64, n: u32) -> Status {
        match self.core.ftl.trim(slba as u32, n) {
            Ok(()) => Status::SUCCESS,
            Err(SimError::InvalidArgument(e)) => self.core.refuse(Status::LBA_OUT_OF_RANGE, None, format!("deallocating LBAs {slba} + {n}: {e}")),
            Err(e) => self.core.refuse(Status::INTERNAL_ERROR, None, format!("deallocating LBAs {slba} + {n} failed: {e}")),
        }
    }

    /// Data Transfer Error: the command's data buffer cannot hold its `bytes` (`dir`: "to" or "from" the device).
    fn short_buffer(&mut self, bytes: u64, dir: &str) -> Status {
        let why = format!("the command moves {bytes} bytes {dir} the device: its data buffer is missing or shorter");
        self.core.refuse(Status::DATA_TRANSFER_ERROR, None, why)
    }

    /// Fills a fresh device to `fraction` of its capacity (untimed).
    pub fn precondition(&mut self, fraction: f64, pattern: FillPattern, overwrite: f64, seed: u64) -> Result<()> {
        self.core.ftl.precondition(fraction, pattern, overwrite, seed)?;
        self.checkpoint()
    }

    /// Injects raw bit errors into the stored copy of an LBA.
    pub fn inject_errors(&mut self, lba: u64, bits: u32) -> Result<()> {
        let lpn = u32::try_from(lba).map_err(|_| SimError::InvalidArgument(format!("LBA {lba} out of range")))?;
        self.core.ftl.inject_errors(lpn, bits)
    }

    /// Writes a checkpoint now (recovery will start from here), with every extension's saved state.
    pub fn checkpoint(&mut self) -> Result<()> {
        self.save_extensions()?;
        match &self.image {
            Some(img) => img.checkpoint(&mut self.core.ftl),
            None => Ok(()),
        }
    }

    /// Flushes, checkpoints and marks the image clean. (A device dropped without `close` stays marked unclean:
    /// the next open recovers, as after a crash.)
    pub fn close(mut self) -> Result<()> {
        let t = self.now;
        self.core.flush_buffer(At::at(t));
        self.core.drain();
        self.save_extensions()?;
        if let Some(img) = &self.image {
            img.close(&mut self.core.ftl)?;
        }
        Ok(())
    }

    /// Starts a new measurement window at the current time.
    pub fn reset_stats(&mut self) {
        self.meas = Measurements::new();
        self.window_start = self.now;
        self.last_completion = self.now;
        self.core.res.reset_stats();
        self.core.nand.reset_untallied();
        self.core.ledger.reset();
        self.core.nand.stats = Default::default();
        self.core.ftl.stats = Default::default();
        self.core.host.stats = Default::default();
        self.core.ctrl.stats = Default::default();
        self.core.sched.reset_stats();
        self.core.wbuf.overcommits = 0;
        self.late_submissions = 0;
        self.core.media_errors = 0;
        for e in &mut self.exts {
            e.ext.reset_stats();
        }
    }

    /// The measurements since the last reset.
    pub fn report(&self) -> Report {
        let window = self.last_completion.max(self.now).saturating_since(self.window_start);
        let c = &self.core;
        let (wmin, wmean, wmax) = c.ftl.blocks.wear();
        let cmt = c.ftl.cmt_stats();
        let dynamic = c.ledger.dynamic_joules();
        let statics = c.ledger.static_joules(window);
        let total = dynamic.values().sum::<f64>() + statics.values().sum::<f64>();
        Report {
            preset: self.tree.meta("name").unwrap_or("custom").to_string(),
            elapsed_ns: window,
            ops: self.meas.ops(window),
            host: c.host.stats.clone(),
            nand: c.nand.stats.clone(),
            ftl: FtlReport {
                stats: c.ftl.stats.clone(),
                waf: c.ftl.waf(),
                occupancy: c.ftl.occupancy(),
                erase_count_min: wmin,
                erase_count_mean: wmean,
                erase_count_max: wmax,
                cmt_hits: cmt.map(|s| s.hits),
                cmt_misses: cmt.map(|s| s.misses),
            },
            energy: EnergyReport { dynamic_j: dynamic, static_j: statics, total_j: total },
            utilisation: {
                let untallied = c.nand.untallied();
                let extra: Vec<_> = untallied.iter().map(|(g, busy, ops)| (*g, &busy[..], *ops)).collect();
                c.res.utilisation_plus(window, &extra)
            },
            sched: SchedReport {
                stats: c.sched.stats(),
                late_submissions: self.late_submissions,
                buffer_overcommits: c.wbuf.overcommits,
            },
            queues: self.meas.queues(window),
            priorities: self.meas.priorities(window),
            media_errors: c.media_errors,
            extensions: self.exts.iter().map(|e| (e.ext.name().to_string(), e.ext.report())).collect(),
        }
    }

    /// One attached extension's report (what [`Device::report`]'s `extensions[name]` holds), without building the
    /// rest: for a host library that reads its extension's result after every command. `None`: not attached.
    pub fn extension_report(&self, name: &str) -> Option<serde_json::Value> {
        self.exts.iter().find(|e| e.ext.name() == name).map(|e| e.ext.report())
    }
}

#[cfg(test)]
mod tests;
