//! The flash transaction scheduler: every flash operation of the device waits here, in its die's queues by class
//! and kind, until its die can take it; which one goes next is decided by the classes' levels and weights
//! (`classes`), the order within a class (`controller.flash_order`), the channel discipline
//! (`nand.channel_arbitration`) and, when on, program/erase suspension (`suspend`).
//!
//! - `interleave` / `data_first`: a die takes its next transaction as soon as it is idle (data-outs and data-ins
//!   then queue for the channel in the order they are ready).
//! - `mqsim_tsu`: MQSim's transaction scheduling unit. A transaction reaching an idle channel is sent at once; when a
//!   channel frees, the pages waiting for it go out first (the array's queue), and only then are the channel's dies
//!   walked round-robin from where the last walk stopped, the first idle die with work getting one command; a die
//!   freed while its channel is idle is served directly. A read command gathers every queued read of the die at the
//!   first read's page offset, one per plane, whichever request each belongs to (`TSU_Base::issue_command_to_chip`).
//!
//! Reads gather that way under every discipline (with `nand.multi_plane`). A read retry goes back to the head of its
//! queue; a soft decode follows the last sensing on the channel's ECC engine.

pub mod classes;
pub mod suspend;

pub use classes::{ClassId, ClassSpec, ClassTable, Level, Priority, GC, GC_URGENT};

use crate::engine::{EnergyAccount, EnergyLedger, Resources, Schedule, Time};
use crate::nand::{ChannelGrants, CmdKind, Command, NandArray, NandEv, NandOut};
use classes::{Turns, MAX_CLASSES};
use serde::Serialize;
use suspend::{Rules, SuspendStats};

/// The order of a class's transactions on a die (`controller.flash_order`).
pub use crate::config::FlashOrder as Order;

/// Kinds as queue indexes: reads, programs (and copybacks), erases.
const KINDS: usize = 3;
const READ: usize = 0;
const PROGRAM: usize = 1;
const ERASE: usize = 2;
const ALL_KINDS: u8 = 0b111;
/// Every class but GC's.
const NOT_GC: u32 = !(1 << GC.0 | 1 << GC_URGENT.0);

fn kind_index(k: CmdKind) -> usize {
    match k {
        CmdKind::Read => READ,
        CmdKind::Program | CmdKind::Copyback => PROGRAM,
        CmdKind::Erase => ERASE,
    }
}

/// A flash transaction as asked for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TxnReq {
    pub kind: CmdKind,
    pub die: u32,
    /// Page offset within its block (a copyback's source).
    pub page: u32,
    /// Plane within the die, for gathering reads into multi-plane commands; `u32::MAX`: not known.
    pub plane: u32,
    /// Planes the operation covers (a multi-plane program or erase).
    pub planes: u32,
    /// Bytes to move out (reads) or in (programs).
    pub bytes: u64,
    /// A column read (each data-out after a Change Read Column).
    pub column: bool,
    /// Sensings (1 + read retries).
    pub senses: u32,
    /// A soft decode follows the last sensing.
    pub soft: bool,
    /// The data is beyond every decoder (counted; the read's time is spent all the same).
    pub uncorrectable: bool,
    pub class: ClassId,
    /// A copyback's destination page offset.
    pub dst_page: u32,
}

impl TxnReq {
    /// A read of `bytes` from plane `plane` (of its die) at page offset `page`.
    pub fn read(die: u32, page: u32, plane: u32, bytes: u64, class: ClassId) -> Self {
        TxnReq {
            kind: CmdKind::Read,
            die,
            page,
            plane,
            planes: 1,
            bytes,
            column: false,
            senses: 1,
            soft: false,
            uncorrectable: false,
            class,
            dst_page: 0,
        }
    }

    /// A program of `planes` pages at offset `page`, `bytes` moved in all together.
    pub fn program(die: u32, page: u32, planes: u32, bytes: u64, class: ClassId) -> Self {
        TxnReq { kind: CmdKind::Program, planes, bytes, ..Self::read(die, page, u32::MAX, 0, class) }
    }

    /// An erase of `blocks` blocks (distinct planes) of `die`.
    pub fn erase(die: u32, blocks: u32, class: ClassId) -> Self {
        TxnReq { kind: CmdKind::Erase, planes: blocks, ..Self::read(die, 0, u32::MAX, 0, class) }
    }

    /// An on-die copyback of page offset `page` to `dst_page`.
    pub fn copyback(die: u32, page: u32, dst_page: u32, class: ClassId) -> Self {
        TxnReq { kind: CmdKind::Copyback, dst_page, ..Self::read(die, page, u32::MAX, 0, class) }
    }
}

/// An event of the scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedEv {
    /// A transaction reaches its die's queue.
    Arrive(u32),
    Nand(NandEv),
}

impl From<NandEv> for SchedEv {
    fn from(e: NandEv) -> Self {
        SchedEv::Nand(e)
    }
}

/// One cache line each (60 bytes): in a vector of 8-byte alignment most transactions straddled two lines, and each
/// is read long after its last visit (on its arrival, its issue and its end).
#[derive(Debug, Clone, Copy)]
#[repr(align(64))]
struct Txn {
    req: TxnReq,
    /// The caller's name for it (reported with its completion).
    token: u32,
    seq: u64,
    arrived: Time,
}

/// No transaction (the end of a queue).
const NIL: u32 = u32::MAX;

/// A queue of transactions linked through `Scheduler::link`: its first and last (`NIL` when empty). Intrusive
/// rather than a `VecDeque` per queue: a die's queues are in its record, not in buffers of their own to miss on.
#[derive(Clone, Copy, Debug)]
struct Fifo {
    head: u32,
    tail: u32,
}

impl Fifo {
    const EMPTY: Fifo = Fifo { head: NIL, tail: NIL };

    #[inline]
    fn is_empty(&self) -> bool {
        self.head == NIL
    }

    #[inline]
    fn front(&self) -> Option<u32> {
        (self.head != NIL).then_some(self.head)
    }

    #[inline]
    fn push_back(&mut self, link: &mut [u32], id: u32) {
        link[id as usize] = NIL;
        match self.tail {
            NIL => self.head = id,
            t => link[t as usize] = id,
        }
        self.tail = id;
    }

    #[inline]
    fn push_front(&mut self, link: &mut [u32], id: u32) {
        link[id as usize] = self.head;
        if self.head == NIL {
            self.tail = id;
        }
        self.head = id;
    }

    #[inline]
    fn pop_front(&mut self, link: &[u32]) -> Option<u32> {
        let id = self.front()?;
        self.head = link[id as usize];
        if self.head == NIL {
            self.tail = NIL;
        }
        Some(id)
    }

    /// Unlinks `id`, which follows `prev` in the queue (`NIL`: `id` is its first).
    #[inline]
    fn unlink(&mut self, link: &mut [u32], prev: u32, id: u32) {
        let next = link[id as usize];
        match prev {
            NIL => self.head = next,
            p => link[p as usize] = next,
        }
        if self.tail == id {
            self.tail = prev;
        }
    }
}

/// One die's queues: its masks and turns first, then its queues by kind, so that the read queues of the four host
/// classes are in the record's first cache line with the masks (the only line a read's arrival, pick and issue
/// touch).
#[repr(C, align(64))]
struct DieQueues {
    /// Per kind, the classes with a non-empty queue.
    with_work: [u32; KINDS],
    turns: Turns,
    /// While an operation is suspended: the transactions that arrived before it stopped (sequence numbers below).
    serve_before: u64,
    /// `[queue(class, kind)]`.
    q: [Fifo; MAX_CLASSES * KINDS],
}

/// A die's queue of `class`'s transactions of `kind`: by kind, then class.
#[inline]
fn queue(class: usize, kind: usize) -> usize {
    kind * MAX_CLASSES + class
}

impl Default for DieQueues {
    fn default() -> Self {
        DieQueues { with_work: [0; KINDS], turns: Turns::default(), serve_before: 0, q: [Fifo::EMPTY; MAX_CLASSES * KINDS] }
    }
}

const _: () = assert!(std::mem::size_of::<Txn>() == 64, "a transaction is one cache line");

struct ChannelTurn {
    dies: Vec<u32>,
    turn: usize,
    /// The normal level's turns among the transfers waiting for the channel.
    grants: Turns,
}

/// The class policy as the channels consult it: the table, and each channel's turns.
struct Grants<'a> {
    classes: &'a ClassTable,
    channels: &'a mut [ChannelTurn],
}

impl ChannelGrants for Grants<'_> {
    fn next_class(&mut self, ch: u32, waiting: u32, first_in_line: &dyn Fn(u32) -> u8) -> u8 {
        let turns = &mut self.channels[ch as usize].grants;
        self.classes.choose(waiting, turns, |m| ClassId(first_in_line(m))).0
    }
}

/// Per class: transactions issued and the time they waited in their queues.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ClassStats {
    pub transactions: u64,
    pub wait_ns: u64,
}

/// What the scheduler counted, reported per class and for suspension.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SchedStats {
    /// By class name.
    pub classes: std::collections::BTreeMap<String, ClassStats>,
    pub suspension: SuspendStats,
}

/// The scheduler's configuration.
#[derive(Debug, Clone)]
pub struct SchedConfig {
    pub order: Order,
    /// MQSim's issue discipline (`nand.channel_arbitration = mqsim_tsu`).
    pub tsu: bool,
    pub multi_plane: bool,
    pub suspend: Option<Rules>,
}

pub struct Scheduler {
    pub classes: ClassTable,
    cfg: SchedConfig,
    txns: Vec<Txn>,
    /// Per transaction, the next in its die's queue (`NIL`: the last).
    link: Vec<u32>,
    free: Vec<u32>,
    dies: Vec<DieQueues>,
    channels: Vec<ChannelTurn>,
    channel_of_die: Vec<u32>,
    seq: u64,
    /// The command being built.
    pages: Vec<(u32, u64)>,
    outs: Vec<NandOut>,
    /// Dies freed in the batch of outputs being handled (`mqsim_tsu`).
    freed: Vec<u32>,
    resume_energy: EnergyAccount,
    per_class: Vec<ClassStats>,
    suspension: SuspendStats,
}

impl Scheduler {
    pub fn new(cfg: SchedConfig, classes: ClassTable, nand: &NandArray, ledger: &mut EnergyLedger) -> Self {
        let geo = &nand.geo;
        let mut channels: Vec<ChannelTurn> = (0..geo.channels).map(|_| ChannelTurn { dies: Vec::new(), turn: 0, grants: Turns::default() }).collect();
        for d in 0..geo.dies() {
            channels[geo.channel_of_die(d) as usize].dies.push(d);
        }
        let mut s = Scheduler {
            txns: Vec::new(),
            link: Vec::new(),
            free: Vec::new(),
            dies: (0..geo.dies()).map(|_| DieQueues::default()).collect(),
            channels,
            channel_of_die: (0..geo.dies()).map(|d| geo.channel_of_die(d)).collect(),
            seq: 0,
            pages: Vec::new(),
            outs: Vec::new(),
            freed: Vec::new(),
            resume_energy: ledger.account("nand_resume"),
            per_class: Vec::new(),
            suspension: SuspendStats::default(),
            classes,
            cfg,
        };
        s.reclass();
        s
    }

    /// Declares a class (an extension's device-internal work).
    pub fn declare(&mut self, spec: ClassSpec) -> crate::error::Result<ClassId> {
        let c = self.classes.declare(spec)?;
        self.reclass();
        Ok(c)
    }

    fn reclass(&mut self) {
        self.per_class.resize_with(self.classes.len(), ClassStats::default);
    }

    /// Transactions waiting or in progress.
    pub fn in_flight(&self) -> usize {
        self.txns.len() - self.free.len()
    }

    /// Counters since the last reset.
    pub fn stats(&self) -> SchedStats {
        SchedStats {
            classes: self
                .classes
                .iter()
                .zip(&self.per_class)
                .filter(|(_, s)| s.transactions > 0)
                .map(|((_, spec), s)| (spec.name.clone(), s.clone()))
                .collect(),
            suspension: self.suspension.clone(),
        }
    }

    pub fn reset_stats(&mut self) {
        self.per_class.iter_mut().for_each(|s| *s = ClassStats::default());
        self.suspension = SuspendStats::default();
    }

    /// Enters `req` into its die's queues at `ready`; its completion is reported under `token`.
    pub fn submit(&mut self, req: TxnReq, token: u32, ready: Time, q: &mut impl Schedule<SchedEv>) {
        debug_assert!((req.class.0 as usize) < self.classes.len(), "unknown class");
        let txn = Txn { req, token, seq: 0, arrived: ready };
        let id = match self.free.pop() {
            Some(i) => {
                self.txns[i as usize] = txn;
                i
            }
            None => {
                self.txns.push(txn);
                self.link.push(NIL);
                (self.txns.len() - 1) as u32
            }
        };
        // Arrivals come mostly in time order (`EventQueue::push_ordered`).
        q.at_ordered(ready, SchedEv::Arrive(id));
    }

    /// Handles one of its events; completed transactions go to `done` as (token, time).
    #[allow(clippy::too_many_arguments)]
    pub fn handle<Q: Schedule<SchedEv> + Schedule<NandEv>>(
        &mut self,
        e: SchedEv,
        now: Time,
        nand: &mut NandArray,
        res: &mut Resources,
        ledger: &mut EnergyLedger,
        q: &mut Q,
        done: &mut Vec<(u32, Time)>,
    ) {
        match e {
            SchedEv::Arrive(id) => self.arrive(id, now, nand, ledger, q),
            SchedEv::Nand(ne) => {
                self.outs.clear();
                let dies = &self.dies;
                let mut grants = Grants { classes: &self.classes, channels: &mut self.channels };
                nand.on_event(ne, now, res, ledger, &mut grants, |die| dies[die as usize].with_work[READ] != 0, q, &mut self.outs);
                self.react(now, nand, res, ledger, q, done);
            }
        }
    }

    fn arrive<Q: Schedule<NandEv>>(&mut self, id: u32, now: Time, nand: &mut NandArray, ledger: &mut EnergyLedger, q: &mut Q) {
        self.seq += 1;
        let t = &mut self.txns[id as usize];
        t.seq = self.seq;
        t.arrived = now;
        nand.stats.read_retries += u64::from(t.req.senses - 1);
        nand.stats.uncorrectable += u64::from(t.req.uncorrectable);
        let (die, kind, class) = (t.req.die, kind_index(t.req.kind), t.req.class.0 as usize);
        let dq = &mut self.dies[die as usize];
        if !self.cfg.tsu && dq.with_work == [0; KINDS] && nand.die_idle(die) && nand.suspended(die).is_none() {
            // An idle die with nothing queued: `pick` would take this transaction, its only one, charging its
            // class's turn as `pick` does (the normal level's turns; the others decide by age, which changes nothing).
            if self.classes.top(1 << class).0 == Level::Normal {
                dq.turns.next(1 << class, &self.classes);
            }
            self.issue(die, id, u32::MAX, u64::MAX, now, nand, ledger, q);
            self.maybe_suspend(die, now, nand, q);
            return;
        }
        dq.q[queue(class, kind)].push_back(&mut self.link, id);
        dq.with_work[kind] |= 1 << class;
        let ch = self.channel_of_die[die as usize];
        if self.cfg.tsu {
            if !nand.channel_busy(ch) {
                self.walk(ch, now, nand, ledger, q);
            }
        } else {
            self.try_issue(die, now, nand, ledger, q);
        }
        self.maybe_suspend(die, now, nand, q);
    }

    #[allow(clippy::too_many_arguments)]
    /// Reacts to the array's outputs of the event just handled (`self.outs`, which nothing here adds to).
    fn react<Q: Schedule<NandEv>>(
        &mut self,
        now: Time,
        nand: &mut NandArray,
        res: &mut Resources,
        ledger: &mut EnergyLedger,
        q: &mut Q,
        done: &mut Vec<(u32, Time)>,
    ) {
        let tsu = self.cfg.tsu;
        if tsu {
            self.freed.clear();
        }
        let mut walked = u64::MAX;
        for i in 0..self.outs.len() {
            match self.outs[i] {
                NandOut::Done { txn, at } => self.finish(txn, at, now, nand, res, ledger, q, done),
                NandOut::DieIdle(die) if tsu => self.freed.push(die),
                NandOut::DieIdle(die) => self.try_issue(die, now, nand, ledger, q),
                // Reported under mqsim_tsu only.
                NandOut::ChannelIdle(ch) => {
                    walked = u64::from(ch);
                    self.walk(ch, now, nand, ledger, q);
                }
                NandOut::Suspended(die) => {
                    self.dies[die as usize].serve_before = self.seq + 1;
                    self.try_issue(die, now, nand, ledger, q);
                }
                NandOut::Working(die) => self.maybe_suspend(die, now, nand, q),
            }
        }
        if tsu {
            // mqsim_tsu: a die freed by a transfer is served by the channel's walk; one freed otherwise (a program or
            // erase ending) is served directly if its channel is idle (`TSU_Base::handle_chip_idle_signal`).
            let freed = std::mem::take(&mut self.freed);
            for &die in &freed {
                if u64::from(self.channel_of_die[die as usize]) != walked {
                    self.try_issue(die, now, nand, ledger, q);
                }
            }
            self.freed = freed;
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn finish<Q: Schedule<NandEv>>(
        &mut self,
        id: u32,
        at: Time,
        now: Time,
        nand: &mut NandArray,
        res: &mut Resources,
        ledger: &mut EnergyLedger,
        q: &mut Q,
        done: &mut Vec<(u32, Time)>,
    ) {
        let t = &mut self.txns[id as usize];
        if t.req.kind == CmdKind::Read && t.req.senses > 1 {
            // A read retry: the page is read again before anything else of its class on the die.
            t.req.senses -= 1;
            let (die, class) = (t.req.die, t.req.class.0 as usize);
            let dq = &mut self.dies[die as usize];
            dq.q[queue(class, READ)].push_front(&mut self.link, id);
            dq.with_work[READ] |= 1 << class;
            self.try_issue(die, now, nand, ledger, q);
            return;
        }
        let at = if t.req.soft { nand.soft_decode(res, t.req.die, at) } else { at };
        done.push((t.token, at));
        self.free.push(id);
    }

    /// `mqsim_tsu`: walks the channel's dies round-robin from its turn; each idle die with work gets a command,
    /// until one takes the channel.
    fn walk<Q: Schedule<NandEv>>(&mut self, ch: u32, now: Time, nand: &mut NandArray, ledger: &mut EnergyLedger, q: &mut Q) {
        let n = self.channels[ch as usize].dies.len();
        for _ in 0..n {
            if nand.channel_busy(ch) {
                break;
            }
            let c = &mut self.channels[ch as usize];
            let die = c.dies[c.turn];
            c.turn = (c.turn + 1) % n;
            self.try_issue(die, now, nand, ledger, q);
        }
    }

    /// Gives the die its next command if it is idle and something may go; with an operation suspended and nothing
    /// left that the suspension serves, resumes it.
    fn try_issue<Q: Schedule<NandEv>>(&mut self, die: u32, now: Time, nand: &mut NandArray, ledger: &mut EnergyLedger, q: &mut Q) {
        if !nand.die_idle(die) || (self.cfg.tsu && nand.channel_busy(self.channel_of_die[die as usize])) {
            return;
        }
        // While an operation is suspended the die serves only what may suspend it, and only what waited when it
        // stopped: reads (programs too for a suspended erase with write-suspend-erase), not GC's.
        let suspended = nand.suspended(die);
        if suspended.is_none() && self.dies[die as usize].with_work == [0; KINDS] {
            return; // nothing to pick (`pick` would find no class with work)
        }
        if suspended.is_none() {
            let w = &self.dies[die as usize].with_work;
            let reads = w[READ];
            if w[PROGRAM] | w[ERASE] == 0 && reads.is_power_of_two() {
                let id = self.take_lone_class_read(die, reads);
                self.issue(die, id, u32::MAX, u64::MAX, now, nand, ledger, q);
                return;
            }
        }
        let (allowed, classes, before) = match suspended {
            None => (ALL_KINDS, u32::MAX, u64::MAX),
            Some(kind) => {
                let programs = kind == CmdKind::Erase && self.cfg.suspend.is_some_and(|r| r.programs_suspend_erases);
                let kinds = if programs { 1 << READ | 1 << PROGRAM } else { 1 << READ };
                (kinds, NOT_GC, self.dies[die as usize].serve_before)
            }
        };
        match self.pick(die, allowed, classes, before) {
            Some(id) => self.issue(die, id, classes, before, now, nand, ledger, q),
            None => {
                if let Some(kind) = suspended {
                    let rule = self.cfg.suspend.as_ref().and_then(|r| r.rule(kind)).copied().expect("suspended by a rule");
                    let took = nand.resume(die, now, rule.t_resume, q);
                    self.suspension.kind_mut(kind).suspended_ns += took;
                    ledger.charge(self.resume_energy, rule.energy_resume);
                }
            }
        }
    }

    /// With suspension on: suspends the die's program or erase if a queued transaction may suspend it.
    #[inline]
    fn maybe_suspend<Q: Schedule<NandEv>>(&mut self, die: u32, now: Time, nand: &mut NandArray, q: &mut Q) {
        if self.cfg.suspend.is_some() {
            self.suspend_if_asked(die, now, nand, q);
        }
    }

    /// `maybe_suspend` with suspension on.
    #[inline(never)]
    fn suspend_if_asked<Q: Schedule<NandEv>>(&mut self, die: u32, now: Time, nand: &mut NandArray, q: &mut Q) {
        let Some(rules) = self.cfg.suspend else { return };
        let Some((working, left, n)) = nand.working(die, now) else { return };
        if nand.suspended(die).is_some() {
            return;
        }
        // GC's own reads and programs never suspend: they gain no latency anyone waits for.
        let w = &self.dies[die as usize].with_work;
        let wants = if w[READ] & NOT_GC != 0 {
            CmdKind::Read
        } else if w[PROGRAM] & NOT_GC != 0 {
            CmdKind::Program
        } else {
            return;
        };
        if rules.allows(wants, working, left, n) {
            let rule = rules.rule(working).expect("allowed by a rule");
            nand.suspend(die, now, rule.t_suspend, q);
            self.suspension.suspended(working, n + 1);
        }
    }

    /// The transaction to serve next among `allowed` kinds of the classes in mask `classes` (while suspended: only
    /// those with sequence numbers below `before`), taken from its queue. The highest level with work wins; within it, `read_first` serves the
    /// first kind any of its classes has, the classes taking turns (normal level) or the oldest first (others);
    /// `fifo` lets the classes take turns and each serve its oldest transaction.
    fn pick(&mut self, die: u32, allowed: u8, classes: u32, before: u64) -> Option<u32> {
        let dq = &self.dies[die as usize];
        let head_seq = |class: usize, kind: usize| dq.q[queue(class, kind)].front().map(|id| self.txns[id as usize].seq);
        let mut by_kind = [0u32; KINDS];
        for (k, m) in by_kind.iter_mut().enumerate() {
            if allowed & (1 << k) == 0 {
                continue;
            }
            *m = dq.with_work[k] & classes;
            if before != u64::MAX {
                let mut rest = *m;
                while rest != 0 {
                    let c = rest.trailing_zeros() as usize;
                    rest &= rest - 1;
                    if head_seq(c, k).is_none_or(|s| s >= before) {
                        *m &= !(1 << c);
                    }
                }
            }
        }
        let any = by_kind[READ] | by_kind[PROGRAM] | by_kind[ERASE];
        if any == 0 {
            return None;
        }
        let (lv, level) = self.classes.top(any);
        // The oldest head of `kind` (None: any kind) among the classes in `mask`, and that kind.
        let oldest = |mask: u32, kind: Option<usize>| -> Option<(usize, usize)> {
            let mut best: Option<(u64, usize, usize)> = None;
            let mut rest = mask;
            while rest != 0 {
                let c = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                for k in (0..KINDS).filter(|&k| kind.is_none_or(|x| x == k) && by_kind[k] & (1 << c) != 0) {
                    let s = head_seq(c, k).unwrap_or(u64::MAX);
                    if best.is_none_or(|b| s < b.0) {
                        best = Some((s, c, k));
                    }
                }
            }
            best.map(|(_, c, k)| (c, k))
        };
        let mut turns = dq.turns;
        let (class, kind) = match self.cfg.order {
            Order::ReadFirst => {
                let k = (0..KINDS).find(|&k| by_kind[k] & level != 0)?;
                let cands = by_kind[k] & level;
                if lv == Level::Normal {
                    (turns.next(cands, &self.classes).0 as usize, k)
                } else {
                    oldest(cands, Some(k))?
                }
            }
            Order::Fifo => {
                let cands = any & level;
                if lv == Level::Normal {
                    let c = turns.next(cands, &self.classes).0 as usize;
                    oldest(1 << c, None)?
                } else {
                    oldest(cands, None)?
                }
            }
        };
        self.dies[die as usize].turns = turns;
        let qi = queue(class, kind);
        let dq = &mut self.dies[die as usize];
        let id = dq.q[qi].pop_front(&self.link)?;
        if dq.q[qi].is_empty() {
            dq.with_work[kind] &= !(1 << class);
        }
        Some(id)
    }

    /// `pick` when only reads of one class (`reads`, its bit) are queued on the die and none is suspended
    /// (a die under host reads, nearly always): that class's first read, its turn charged as `pick` charges it
    /// (the normal level's turns; the other levels choose by age, which with one class changes nothing), and the
    /// same answer under either `controller.flash_order` (one kind, one class), without `pick`'s walk over kinds
    /// and classes.
    #[inline]
    fn take_lone_class_read(&mut self, die: u32, reads: u32) -> u32 {
        let class = reads.trailing_zeros() as usize;
        let dq = &mut self.dies[die as usize];
        if self.classes.top(reads).0 == Level::Normal {
            dq.turns.next(reads, &self.classes);
        }
        let qi = queue(class, READ);
        let id = dq.q[qi].pop_front(&self.link).expect("a class with work has a queued transaction");
        if dq.q[qi].is_empty() {
            dq.with_work[READ] &= !reads;
        }
        id
    }

    /// Issues transaction `id` (taken from its queue) to `die`; a read gathers the die's other queued reads at its page
    /// offset, one per plane.
    #[allow(clippy::too_many_arguments)]
    fn issue<Q: Schedule<NandEv>>(
        &mut self,
        die: u32,
        id: u32,
        classes: u32,
        before: u64,
        now: Time,
        nand: &mut NandArray,
        ledger: &mut EnergyLedger,
        q: &mut Q,
    ) {
        let first = self.txns[id as usize];
        self.account(id, now);
        let gathers = first.req.kind == CmdKind::Read && self.cfg.multi_plane && first.req.plane != u32::MAX && !first.req.column;
        if !gathers || self.dies[die as usize].with_work[READ] & classes == 0 {
            // Nothing to gather (most reads: their die had nothing queued): the command is this transaction alone,
            // without the list.
            let planes = if gathers { 1 } else { first.req.planes };
            self.issue_pages(die, &first, planes, &[(id, first.req.bytes)], now, nand, ledger, q);
            return;
        }
        let mut pages = std::mem::take(&mut self.pages);
        pages.clear();
        pages.push((id, first.req.bytes));
        // A read: the die's other queued reads at its page offset, one per plane.
        let ppd = nand.geo.planes_per_die;
        let mut mask = 1u64 << first.req.plane.min(63);
        // Only the classes with queued reads (the bits of `with_work`), in class order.
        let mut with_reads = self.dies[die as usize].with_work[READ] & classes;
        'classes: while with_reads != 0 {
            let class = with_reads.trailing_zeros() as usize;
            with_reads &= with_reads - 1;
            let qi = queue(class, READ);
            let (mut prev, mut other) = (NIL, self.dies[die as usize].q[qi].head);
            while other != NIL {
                if pages.len() as u32 >= ppd {
                    break 'classes;
                }
                let r = self.txns[other as usize];
                let next = self.link[other as usize];
                let plane_bit = 1u64 << r.req.plane.min(63);
                if r.req.page == first.req.page && r.req.plane != u32::MAX && !r.req.column && mask & plane_bit == 0 && r.seq < before {
                    mask |= plane_bit;
                    self.dies[die as usize].q[qi].unlink(&mut self.link, prev, other);
                    pages.push((other, r.req.bytes));
                    self.account(other, now);
                } else {
                    prev = other;
                }
                other = next;
            }
            if self.dies[die as usize].q[qi].is_empty() {
                self.dies[die as usize].with_work[READ] &= !(1 << class);
            }
        }
        let planes = pages.len() as u32;
        self.issue_pages(die, &first, planes, &pages, now, nand, ledger, q);
        self.pages = pages;
    }

    /// Sends the command of `first` (its kind, page and class) over `planes` planes, for `pages`, to `die`.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn issue_pages<Q: Schedule<NandEv>>(
        &mut self,
        die: u32,
        first: &Txn,
        planes: u32,
        pages: &[(u32, u64)],
        now: Time,
        nand: &mut NandArray,
        ledger: &mut EnergyLedger,
        q: &mut Q,
    ) {
        let cmd = Command {
            kind: first.req.kind,
            die,
            page: first.req.page,
            planes,
            pages,
            column: first.req.column,
            dst_page: first.req.dst_page,
            class: self.classes.on_channel(first.req.class).0,
        };
        let mut grants = Grants { classes: &self.classes, channels: &mut self.channels };
        nand.issue(cmd, now, &mut grants, ledger, q);
        if first.req.kind == CmdKind::Erase {
            self.maybe_suspend(die, now, nand, q);
        }
    }

    fn account(&mut self, id: u32, now: Time) {
        let t = &self.txns[id as usize];
        let s = &mut self.per_class[t.req.class.0 as usize];
        s.transactions += 1;
        s.wait_ns += now.saturating_since(t.arrived);
    }
}

#[cfg(test)]
mod tests;
