//! The flash array as state machines driven by events: what a die, its registers and its channel are doing, and
//! when each phase of a command ends. Which command a die gets next is the scheduler's choice (`ctrl::sched`); this
//! module only carries a command through its phases.
//!
//! - A read sends command/address cycles (on the channel under `data_first`/`mqsim_tsu`, else charged as latency on
//!   the die), senses its planes' pages (tR), then moves each page out over the channel (one transfer at a time per
//!   channel, in the order they were ready) and decodes it on the channel's ECC engine (pipelined with the bus).
//!   Without cache read the die holds its page register until the last page has left. With cache read, a read whose
//!   sensing ends while another read waits for the die moves its data to the cache register (`t_cache_xfer`, once
//!   the cache register is free) and frees the die, which senses the next page while the data drains (ONFI 31h).
//! - A multi-plane operation addresses the same page offset in several planes of one die: one tR (or tPROG) for all.
//! - A program moves its data in over the channel (the die waits for the channel), then programs (tPROG).
//! - An erase (tBERS) and an on-die copyback (tR + tPROG) occupy the die only.
//! - A program or erase in progress can be suspended (it stops `t_suspend` later, its progress kept), the die then
//!   takes reads, and resumed (`t_resume`, then the time it had left). Whether to suspend is the scheduler's choice.

use super::{EccModel, FastGeometry};
use crate::config::DeviceConfig;
use crate::engine::{EnergyAccount, EnergyLedger, GroupId, Resources, Schedule, Time};
use std::collections::VecDeque;

/// Array and bus timing, in ns.
#[derive(Debug, Clone)]
pub struct NandTiming {
    t_read: [u64; 4],
    t_prog: [u64; 4],
    pub t_erase: u64,
    pub t_cmd: u64,
    pub t_cache_xfer: u64,
    /// Change Read Column and tCCS before a data-out that starts inside a page (a column read).
    pub t_column_change: u64,
    /// ns per byte on the channel, as bytes/s.
    pub channel_bw: f64,
    pub t_decode: u64,
    pub t_soft_decode: u64,
    pub cache_read: bool,
    pub multi_plane: bool,
    /// `nand.channel_arbitration = data_first` or `mqsim_tsu`: read command cycles take the channel (MQSim's order).
    pub commands_on_bus: bool,
    /// `nand.channel_arbitration = mqsim_tsu`: commands are sent only on channel-idle events, after the waiting
    /// data-outs (MQSim's transaction scheduling unit).
    pub data_outs_first: bool,
}

impl NandTiming {
    pub fn from_config(cfg: &DeviceConfig) -> Self {
        let n = &cfg.nand;
        // Page types cycle within a block: SLC has one, MLC two (LSB, MSB), TLC three (LSB, CSB, MSB), QLC four
        // (the fourth takes the MSB latency: presets give at most three).
        let bits = cfg.bits_per_cell() as usize;
        let pick = |lsb: Option<crate::config::units::Nanos>,
                    csb: Option<crate::config::units::Nanos>,
                    msb: Option<crate::config::units::Nanos>,
                    d: u64| {
            let (l, c, m) = (lsb.map_or(d, |x| x.0), csb.map_or(d, |x| x.0), msb.map_or(d, |x| x.0));
            match bits {
                1 => [d; 4],
                2 => [l, m, m, m],
                3 => [l, c, m, m],
                _ => [l, c, m, m],
            }
        };
        NandTiming {
            t_read: pick(n.t_read_lsb, n.t_read_csb, n.t_read_msb, n.t_read.0),
            t_prog: pick(n.t_prog_lsb, n.t_prog_csb, n.t_prog_msb, n.t_prog.0),
            t_erase: n.t_erase.0,
            t_cmd: n.t_cmd.0,
            t_cache_xfer: n.t_cache_xfer.0,
            t_column_change: n.t_column_change.0,
            channel_bw: cfg.channel_bandwidth().0,
            t_decode: cfg.ecc.t_decode.0,
            t_soft_decode: cfg.ecc.t_soft_decode.0,
            cache_read: n.cache_read.0,
            multi_plane: n.multi_plane.0,
            commands_on_bus: matches!(n.channel_arbitration.0.as_str(), "data_first" | "mqsim_tsu"),
            data_outs_first: n.channel_arbitration.0 == "mqsim_tsu",
        }
    }

    #[inline]
    pub fn t_read(&self, page_type: usize) -> u64 {
        self.t_read[page_type.min(3)]
    }

    #[inline]
    pub fn t_prog(&self, page_type: usize) -> u64 {
        self.t_prog[page_type.min(3)]
    }

    /// Bus time for `bytes` of data.
    #[inline]
    pub fn xfer(&self, bytes: u64) -> u64 {
        if bytes == 0 {
            0
        } else {
            crate::engine::ceil_ns(crate::engine::u64_as_f64(bytes) * 1e9 / self.channel_bw)
        }
    }
}

/// Operation counters of the array.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct NandStats {
    /// Pages sensed (a two-plane read counts two).
    pub pages_read: u64,
    pub pages_programmed: u64,
    pub blocks_erased: u64,
    pub read_ops: u64,
    pub multi_plane_reads: u64,
    pub multi_plane_programs: u64,
    pub read_retries: u64,
    pub soft_decodes: u64,
    pub uncorrectable: u64,
    pub bytes_to_controller: u64,
    pub bytes_to_flash: u64,
    pub copybacks: u64,
}

struct Accounts {
    read: EnergyAccount,
    program: EnergyAccount,
    erase: EnergyAccount,
    bus: EnergyAccount,
    ecc: EnergyAccount,
}

struct Energies {
    read_page: f64,
    program_page: f64,
    erase_block: f64,
    bus_byte: f64,
    ecc_byte: f64,
}

/// What a command does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmdKind {
    Read,
    Program,
    Erase,
    /// On-die copy of page `page` to page `dst_page` (GC without the bus).
    Copyback,
}

/// A command the scheduler issues to a die.
#[derive(Debug, Clone, Copy)]
pub struct Command<'a> {
    pub kind: CmdKind,
    pub die: u32,
    /// Page offset within the block (the page type): sensed, programmed, or a copyback's source.
    pub page: u32,
    /// Planes the operation covers (a multi-plane read, program or erase).
    pub planes: u32,
    /// Reads: (transaction, bytes to move out) per page, in data-out order; others: one (transaction, bytes in).
    pub pages: &'a [(u32, u64)],
    /// A column read: each data-out starts after a Change Read Column.
    pub column: bool,
    /// A copyback's destination page offset.
    pub dst_page: u32,
    /// The class whose turn its transfers take on the channel (below `CHANNEL_CLASSES`; a multi-plane read's first
    /// page's).
    pub class: u8,
}

/// An event of the array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NandEv {
    /// The die's current phase ends (stale if the die's epoch moved on: a suspension cancelled it).
    Die { die: u32, epoch: u32 },
    /// The channel's transfer ends.
    Channel { ch: u32 },
}

/// What an event changed, for the scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NandOut {
    /// Transaction `txn`'s work on the array is done at `at` (a read's page decoded; a program or erase ended).
    Done { txn: u32, at: Time },
    /// The die can take a command (or, with an operation suspended, what the suspension allows).
    DieIdle(u32),
    /// The channel has nothing left to move (reported under `mqsim_tsu` only: the other disciplines do not react to
    /// it).
    ChannelIdle(u32),
    /// The die's operation is suspended: it can serve reads now.
    Suspended(u32),
    /// The die started (or resumed) the timed part of a program or erase: it may be suspended from now on.
    Working(u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Idle,
    /// The command's cycles or a program's data wait for the channel.
    WaitBus,
    /// The command's cycles or a program's data are on the channel (ends with the channel's event).
    Bus,
    /// Sensing (tR, after the command cycles when they are charged on the die).
    Sense,
    /// Sensed; waiting for the cache register to drain.
    WaitCache,
    /// Moving the sensed data to the cache register.
    CacheXfer,
    /// The page register holds data moving out.
    Hold,
    /// tPROG, tBERS or a copyback.
    Work,
    Suspending,
    Resuming,
}

/// A program or erase set aside for reads.
#[derive(Debug, Clone, Copy)]
struct Suspended {
    kind: CmdKind,
    txn: u32,
    /// Time (ns) the operation still needs when it resumes.
    left: u64,
    /// When the suspend command was sent.
    since: Time,
    /// Its suspensions so far (this one included).
    count: u32,
}

/// A die's state read on every phase of its commands, in one cache line: dies are visited in turn, so every visit
/// found its state gone from the cache, and spread over three lines and a vector's buffer it cost a miss in each.
/// What only programs, erases and suspensions use is apart (`DieCold`).
#[repr(align(64))]
struct Die {
    /// End of the current timed phase.
    end: Time,
    busy_from: Time,
    /// Since when the cache register holds data.
    cache_from: Time,
    epoch: u32,
    page: u32,
    planes: u32,
    /// The current command's pages (reads) or its one transaction (others), `npages` of them, unless `SPILLED`.
    pages: [(u32, u32); INLINE_PAGES],
    npages: u8,
    /// Data-outs from the page register not done yet.
    hold_left: u8,
    /// Data-outs from the cache register not done yet.
    cache_left: u8,
    phase: Phase,
    kind: CmdKind,
    column: bool,
    /// The class whose turn the current command's transfers take on the channel.
    class: u8,
    /// The kind of the operation suspended (`DieCold::suspended`), if any.
    suspended: Option<CmdKind>,
    /// Busy time (ns) not yet added to the die's timeline (`NandArray::untallied`): kept here, in the line the
    /// die's release touches anyway, instead of a cold `Timeline` per release.
    busy_untallied: u32,
}

const _: () = assert!(std::mem::size_of::<Die>() == 64, "a die's state is one cache line");

/// Pages of a command kept in the die's line: one page, or a two-plane read.
const INLINE_PAGES: usize = 2;
/// `Die::npages` when the command's pages are in `DieCold::pages` (more than `INLINE_PAGES`, or bytes beyond a
/// `u32`). A command has at most 64 pages (a read gathers one per plane, by a 64-bit mask; others have one).
const SPILLED: u8 = u8::MAX;

/// A die's state that reads do not touch.
#[derive(Default)]
struct DieCold {
    suspended: Option<Suspended>,
    /// A resuming operation's time left (ns).
    left: u64,
    /// Suspensions of the program or erase in progress (or suspended).
    suspensions: u32,
    /// The command's pages when `Die::npages` is `SPILLED`.
    pages: Vec<(u32, u64)>,
}

impl Die {
    fn new() -> Self {
        Die {
            end: Time::ZERO,
            busy_from: Time::ZERO,
            cache_from: Time::ZERO,
            epoch: 0,
            page: 0,
            planes: 0,
            pages: [(0, 0); INLINE_PAGES],
            npages: 0,
            hold_left: 0,
            cache_left: 0,
            phase: Phase::Idle,
            kind: CmdKind::Read,
            column: false,
            class: 0,
            suspended: None,
            busy_untallied: 0,
        }
    }

    /// Takes `pages` as the current command's, in the die's line when they fit.
    #[inline]
    fn set_pages(&mut self, cold: &mut DieCold, pages: &[(u32, u64)]) {
        debug_assert!(pages.len() <= 64, "a command has at most 64 pages");
        if let [(txn, bytes)] = *pages {
            if let Ok(b) = u32::try_from(bytes) {
                // One page (most commands) without the loop.
                self.pages[0] = (txn, b);
                self.npages = 1;
                return;
            }
        }
        if pages.len() <= INLINE_PAGES && pages.iter().all(|p| p.1 <= u64::from(u32::MAX)) {
            for (slot, &(txn, bytes)) in self.pages.iter_mut().zip(pages) {
                *slot = (txn, bytes as u32);
            }
            self.npages = pages.len() as u8;
        } else {
            cold.pages.clear();
            cold.pages.extend_from_slice(pages);
            self.npages = SPILLED;
        }
    }
}

/// The current command's pages of a die: (transaction, bytes).
#[inline]
fn die_pages<'a>(d: &'a Die, cold: &'a DieCold) -> impl Iterator<Item = (u32, u64)> + 'a {
    let spilled = d.npages == SPILLED;
    let inline = if spilled { &d.pages[..0] } else { &d.pages[..d.npages as usize] };
    let spilled: &[(u32, u64)] = if spilled { &cold.pages } else { &[] };
    inline.iter().map(|&(txn, bytes)| (txn, u64::from(bytes))).chain(spilled.iter().copied())
}

/// The first of them (a program's or an erase's one transaction).
#[inline]
fn first_page(d: &Die, cold: &DieCold) -> (u32, u64) {
    die_pages(d, cold).next().expect("a command has a page")
}

#[derive(Debug, Clone, Copy)]
enum Xfer {
    /// A read's command cycles.
    Cmd { die: u32 },
    /// A program's command cycles and data.
    In { die: u32 },
    /// A page moving out (from the cache register or the page register).
    Out { die: u32, txn: u32, bytes: u64, cache: bool },
}

/// Classes a channel tells apart (bits of a `u32` mask).
pub const CHANNEL_CLASSES: usize = 32;

/// How a channel picks its next transfer when transfers of more than one class wait for it: the controller's class
/// policy (`ctrl::sched`), which the array consults without knowing it.
pub trait ChannelGrants {
    /// The class whose first transfer in line channel `ch` sends next, among the classes in `waiting` (a mask of at
    /// least two); `first_in_line(mask)` is the class of the first transfer in line among the classes in `mask`.
    fn next_class(&mut self, ch: u32, waiting: u32, first_in_line: &dyn Fn(u32) -> u8) -> u8;
}

/// A channel: transfers wait in arrival order, each with its class; the next one is the first in line of the class
/// the grants choose (with one class waiting: the first in line).
#[derive(Default)]
struct Channel {
    busy: bool,
    start: Time,
    cur: Option<Xfer>,
    queue: VecDeque<(Xfer, u8)>,
    /// Transfers waiting per class, and the classes with any as a bit mask.
    waiting: [u16; CHANNEL_CLASSES],
    classes: u32,
    /// Busy time (ns) not yet added to the channel's timeline (`NandArray::untallied`): kept here, in the state a
    /// transfer's end touches anyway, instead of the timeline's line per transfer.
    busy_untallied: u64,
}

impl Channel {
    fn push(&mut self, x: Xfer, class: u8) {
        debug_assert!((class as usize) < CHANNEL_CLASSES);
        self.queue.push_back((x, class));
        self.waiting[class as usize] += 1;
        self.classes |= 1 << class;
    }

    /// Takes channel `ch`'s next transfer: the first in line of the class `grants` chooses.
    fn take(&mut self, ch: u32, grants: &mut impl ChannelGrants) -> Option<Xfer> {
        let i = if self.classes & self.classes.wrapping_sub(1) == 0 {
            0
        } else {
            let queue = &self.queue;
            let first_in_line = |m: u32| queue.iter().find(|q| m & 1 << q.1 != 0).expect("a class with work").1;
            let class = grants.next_class(ch, self.classes, &first_in_line);
            self.queue.iter().position(|q| q.1 == class).expect("a transfer of the chosen class")
        };
        // The first in line (most often, and always with one class waiting) without `remove`'s general shift.
        let (x, class) = if i == 0 { self.queue.pop_front()? } else { self.queue.remove(i)? };
        if self.queue.is_empty() {
            // Back to the ring's first slot (`clear` restarts it there): a queue that is seldom more than a few long
            // then reuses its first lines, where pushing on from the last slot walked the whole buffer, a line
            // missed every other push.
            self.queue.clear();
        }
        self.waiting[class as usize] -= 1;
        if self.waiting[class as usize] == 0 {
            self.classes &= !(1 << class);
        }
        Some(x)
    }
}

/// The flash array's state and the rules of its phases.
pub struct NandArray {
    pub geo: FastGeometry,
    pub timing: NandTiming,
    pub ecc: EccModel,
    channel_res: GroupId,
    die_res: GroupId,
    cache_res: GroupId,
    ecc_engine: GroupId,
    acc: Accounts,
    e: Energies,
    dies: Vec<Die>,
    cold: Vec<DieCold>,
    channels: Vec<Channel>,
    /// Die operations ended and not yet counted in the dies' timelines (their busy time is in `Die`).
    die_ops_untallied: u64,
    /// Transfers ended and not yet counted in the channels' timelines (their busy time is in `Channel`).
    channel_ops_untallied: u64,
    /// `timing.xfer` of the last size moved, and of a codeword (decoding starts with the first): most transfers are
    /// one size (a read's sectors, a page), and the division and roundings cost more than the look.
    xfer_last: (u64, u64),
    xfer_codeword: u64,
    pub stats: NandStats,
}

impl NandArray {
    pub fn new(cfg: &DeviceConfig, res: &mut Resources, ledger: &mut EnergyLedger) -> Self {
        let geo = FastGeometry::from_config(cfg);
        let en = &cfg.energy;
        let (timing, ecc) = (NandTiming::from_config(cfg), EccModel::from_config(cfg));
        NandArray {
            channel_res: res.add_group("channel", geo.channels),
            die_res: res.add_group("die", geo.dies()),
            cache_res: res.add_group("cache_register", geo.dies()),
            ecc_engine: res.add_group("ecc", geo.channels),
            acc: Accounts {
                read: ledger.account("nand_read"),
                program: ledger.account("nand_program"),
                erase: ledger.account("nand_erase"),
                bus: ledger.account("flash_bus"),
                ecc: ledger.account("ecc"),
            },
            e: Energies {
                read_page: en.nand_read_page.0,
                program_page: en.nand_program_page.0,
                erase_block: en.nand_erase_block.0,
                bus_byte: en.channel_per_byte.0,
                ecc_byte: en.ecc_per_byte.0,
            },
            xfer_last: (0, timing.xfer(0)),
            xfer_codeword: timing.xfer(u64::from(ecc.codeword_bytes)),
            timing,
            ecc,
            dies: (0..geo.dies()).map(|_| Die::new()).collect(),
            cold: (0..geo.dies()).map(|_| DieCold::default()).collect(),
            channels: (0..geo.channels).map(|_| Channel::default()).collect(),
            die_ops_untallied: 0,
            channel_ops_untallied: 0,
            geo,
            stats: NandStats::default(),
        }
    }

    /// Whether the die can take a command now.
    #[inline]
    pub fn die_idle(&self, die: u32) -> bool {
        self.dies[die as usize].phase == Phase::Idle
    }

    /// The dies' and the channels' use not yet in their timelines: per group, each member's busy time (ns) and the
    /// operations.
    pub fn untallied(&self) -> [(GroupId, Vec<u64>, u64); 2] {
        [
            (self.die_res, self.dies.iter().map(|d| u64::from(d.busy_untallied)).collect(), self.die_ops_untallied),
            (self.channel_res, self.channels.iter().map(|c| c.busy_untallied).collect(), self.channel_ops_untallied),
        ]
    }

    /// Forgets the dies' and the channels' use not yet in their timelines (with `Resources::reset_stats`).
    pub fn reset_untallied(&mut self) {
        self.dies.iter_mut().for_each(|d| d.busy_untallied = 0);
        self.die_ops_untallied = 0;
        self.channels.iter_mut().for_each(|c| c.busy_untallied = 0);
        self.channel_ops_untallied = 0;
    }

    /// Whether the channel is moving something.
    #[inline]
    pub fn channel_busy(&self, ch: u32) -> bool {
        self.channels[ch as usize].busy
    }

    /// The kind of operation suspended on the die, if any.
    #[inline]
    pub fn suspended(&self, die: u32) -> Option<CmdKind> {
        self.dies[die as usize].suspended
    }

    /// The program or erase the die is working on (not suspended, past its data-in): (kind, time left at `now`,
    /// suspensions so far).
    pub fn working(&self, die: u32, now: Time) -> Option<(CmdKind, u64, u32)> {
        let d = &self.dies[die as usize];
        (d.phase == Phase::Work && matches!(d.kind, CmdKind::Program | CmdKind::Erase))
            .then(|| (d.kind, d.end.saturating_since(now), self.cold[die as usize].suspensions))
    }

    /// Issues `cmd` to its die, which must be idle; its phases follow as events. `grants`: what each channel sends
    /// next when transfers of several classes wait.
    #[inline]
    pub fn issue(&mut self, cmd: Command<'_>, now: Time, grants: &mut impl ChannelGrants, ledger: &mut EnergyLedger, ev: &mut impl Schedule<NandEv>) {
        let t = &self.timing;
        let die = cmd.die;
        let planes = u64::from(cmd.planes);
        let d = &mut self.dies[die as usize];
        debug_assert_eq!(d.phase, Phase::Idle, "die {die} is not idle");
        if d.suspended.is_none() {
            d.busy_from = now;
        }
        d.kind = cmd.kind;
        d.page = cmd.page;
        d.planes = cmd.planes;
        d.column = cmd.column;
        let class = cmd.class;
        d.class = class;
        let cold = &mut self.cold[die as usize];
        d.set_pages(cold, cmd.pages);
        match cmd.kind {
            CmdKind::Read => {
                self.stats.read_ops += 1;
                self.stats.pages_read += planes;
                self.stats.multi_plane_reads += u64::from(planes > 1);
                ledger.charge(self.acc.read, self.e.read_page * planes as f64);
                if t.commands_on_bus {
                    d.phase = Phase::WaitBus;
                    // The die's channel only where the command takes it (a division: not on every read).
                    let ch = self.geo.channel_of_die(die);
                    self.channels[ch as usize].push(Xfer::Cmd { die }, class);
                    self.start_channel(ch, now, grants, ledger, ev);
                } else {
                    let tr = t.t_read(self.geo.page_type(cmd.page));
                    self.timed(die, Phase::Sense, now + t.t_cmd * planes + tr, ev);
                }
            }
            CmdKind::Program => {
                d.phase = Phase::WaitBus;
                cold.suspensions = 0;
                let ch = self.geo.channel_of_die(die);
                self.channels[ch as usize].push(Xfer::In { die }, class);
                self.start_channel(ch, now, grants, ledger, ev);
            }
            CmdKind::Erase => {
                cold.suspensions = 0;
                self.stats.blocks_erased += planes;
                ledger.charge(self.acc.erase, self.e.erase_block * planes as f64);
                self.timed(die, Phase::Work, now + t.t_cmd * planes + t.t_erase, ev);
            }
            CmdKind::Copyback => {
                let dur = 2 * t.t_cmd + t.t_read(self.geo.page_type(cmd.page)) + t.t_prog(self.geo.page_type(cmd.dst_page));
                cold.suspensions = 0;
                self.stats.copybacks += 1;
                self.stats.pages_read += 1;
                self.stats.pages_programmed += 1;
                ledger.charge(self.acc.read, self.e.read_page);
                ledger.charge(self.acc.program, self.e.program_page);
                self.timed(die, Phase::Work, now + dur, ev);
            }
        }
    }

    /// Suspends the die's program or erase (`working` says it has one): it stops `t_suspend` from now, keeping its
    /// progress, and the die reports `Suspended` then.
    pub fn suspend(&mut self, die: u32, now: Time, t_suspend: u64, ev: &mut impl Schedule<NandEv>) {
        let d = &mut self.dies[die as usize];
        debug_assert!(d.phase == Phase::Work && d.suspended.is_none(), "die {die} has nothing to suspend");
        let cold = &mut self.cold[die as usize];
        let txn = first_page(d, cold).0;
        cold.suspensions += 1;
        cold.suspended = Some(Suspended { kind: d.kind, txn, left: d.end.saturating_since(now + t_suspend), since: now, count: cold.suspensions });
        d.suspended = Some(d.kind);
        self.timed(die, Phase::Suspending, now + t_suspend, ev);
    }

    /// Resumes the die's suspended operation (the die must be idle): `t_resume`, then the time it had left.
    /// Returns how long it was suspended (from the suspend command to the end of the resume).
    pub fn resume(&mut self, die: u32, now: Time, t_resume: u64, ev: &mut impl Schedule<NandEv>) -> u64 {
        let d = &mut self.dies[die as usize];
        debug_assert_eq!(d.phase, Phase::Idle);
        let cold = &mut self.cold[die as usize];
        let s = cold.suspended.take().expect("a suspended operation to resume");
        d.suspended = None;
        d.kind = s.kind;
        cold.suspensions = s.count;
        d.set_pages(cold, &[(s.txn, 0)]);
        cold.left = s.left;
        self.timed(die, Phase::Resuming, now + t_resume, ev);
        now + t_resume - s.since
    }

    #[inline]
    fn timed(&mut self, die: u32, phase: Phase, end: Time, ev: &mut impl Schedule<NandEv>) {
        let d = &mut self.dies[die as usize];
        d.phase = phase;
        d.epoch = d.epoch.wrapping_add(1);
        d.end = end;
        ev.at(end, NandEv::Die { die, epoch: d.epoch });
    }

    /// Starts the channel's next transfer if it is free.
    fn start_channel(&mut self, ch: u32, now: Time, grants: &mut impl ChannelGrants, ledger: &mut EnergyLedger, ev: &mut impl Schedule<NandEv>) {
        let c = &mut self.channels[ch as usize];
        if c.busy {
            return;
        }
        let Some(x) = c.take(ch, grants) else { return };
        self.begin(ch, x, now, ledger, ev);
    }

    /// Starts transfer `x` on channel `ch`, which is free.
    #[inline]
    fn begin(&mut self, ch: u32, x: Xfer, now: Time, ledger: &mut EnergyLedger, ev: &mut impl Schedule<NandEv>) {
        let dur = match x {
            Xfer::Cmd { die } => {
                self.dies[die as usize].phase = Phase::Bus;
                self.timing.t_cmd * u64::from(self.dies[die as usize].planes)
            }
            Xfer::In { die } => {
                let d = &mut self.dies[die as usize];
                d.phase = Phase::Bus;
                let (planes, bytes) = (u64::from(d.planes), first_page(d, &self.cold[die as usize]).1);
                self.stats.pages_programmed += planes;
                self.stats.multi_plane_programs += u64::from(planes > 1);
                self.stats.bytes_to_flash += bytes;
                ledger.charge(self.acc.program, self.e.program_page * planes as f64);
                ledger.charge(self.acc.bus, self.e.bus_byte * crate::engine::u64_as_f64(bytes));
                self.timing.t_cmd * planes + self.xfer(bytes)
            }
            Xfer::Out { die, bytes, .. } => {
                let setup = if self.dies[die as usize].column { self.timing.t_column_change } else { 0 };
                setup + self.xfer(bytes)
            }
        };
        let c = &mut self.channels[ch as usize];
        c.busy = true;
        c.start = now;
        c.cur = Some(x);
        ev.at(now + dur, NandEv::Channel { ch });
    }

    /// Advances the array by one of its events; what changed goes to `out`. `read_waits(die)` says whether another
    /// read waits for the die (a read whose sensing ends then uses the cache register).
    /// (The array's state is split from the resources, grants and ledger it books into: each is its own borrow.)
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn on_event(
        &mut self,
        e: NandEv,
        now: Time,
        res: &mut Resources,
        ledger: &mut EnergyLedger,
        grants: &mut impl ChannelGrants,
        read_waits: impl Fn(u32) -> bool,
        ev: &mut impl Schedule<NandEv>,
        out: &mut Vec<NandOut>,
    ) {
        match e {
            NandEv::Channel { ch } => self.channel_done(ch, now, res, grants, ledger, ev, out),
            NandEv::Die { die, epoch } => {
                if self.dies[die as usize].epoch != epoch {
                    return; // cancelled by a suspension
                }
                self.die_phase_done(die, now, res, grants, ledger, read_waits, ev, out);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn channel_done(
        &mut self,
        ch: u32,
        now: Time,
        res: &mut Resources,
        grants: &mut impl ChannelGrants,
        ledger: &mut EnergyLedger,
        ev: &mut impl Schedule<NandEv>,
        out: &mut Vec<NandOut>,
    ) {
        let c = &mut self.channels[ch as usize];
        let x = c.cur.take().expect("a transfer in progress");
        c.busy = false;
        let start = c.start;
        c.busy_untallied += now - start;
        self.channel_ops_untallied += 1;
        match x {
            Xfer::Cmd { die } => {
                let tr = self.timing.t_read(self.geo.page_type(self.dies[die as usize].page));
                self.timed(die, Phase::Sense, now + tr, ev);
            }
            Xfer::In { die } => {
                let d = &self.dies[die as usize];
                let tp = self.timing.t_prog(self.geo.page_type(d.page));
                self.timed(die, Phase::Work, now + tp, ev);
                out.push(NandOut::Working(die));
            }
            Xfer::Out { die, txn, bytes, cache } => {
                self.stats.bytes_to_controller += bytes;
                ledger.charge(self.acc.bus, self.e.bus_byte * crate::engine::u64_as_f64(bytes));
                ledger.charge(self.acc.ecc, self.e.ecc_byte * crate::engine::u64_as_f64(bytes));
                let setup = if self.dies[die as usize].column { self.timing.t_column_change } else { 0 };
                let at = self.decode(res, ch, start + setup, now, bytes);
                out.push(NandOut::Done { txn, at });
                let d = &mut self.dies[die as usize];
                if cache {
                    d.cache_left -= 1;
                    if d.cache_left == 0 {
                        let r = res.member(self.cache_res, die);
                        res.tally(r, now - self.dies[die as usize].cache_from, 1);
                        if self.dies[die as usize].phase == Phase::WaitCache {
                            self.timed(die, Phase::CacheXfer, now + self.timing.t_cache_xfer, ev);
                        }
                    }
                } else {
                    d.hold_left -= 1;
                    if d.hold_left == 0 && d.phase == Phase::Hold {
                        self.die_free(die, now, res, out);
                    }
                }
            }
        }
        // The next transfer in line, if any (most often none), on the channel just freed (`start_channel` without
        // its look at whether the channel is busy).
        if !self.channels[ch as usize].queue.is_empty() {
            if let Some(x) = self.channels[ch as usize].take(ch, grants) {
                self.begin(ch, x, now, ledger, ev);
            }
        }
        if self.timing.data_outs_first && !self.channels[ch as usize].busy {
            out.push(NandOut::ChannelIdle(ch));
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn die_phase_done(
        &mut self,
        die: u32,
        now: Time,
        res: &mut Resources,
        grants: &mut impl ChannelGrants,
        ledger: &mut EnergyLedger,
        read_waits: impl Fn(u32) -> bool,
        ev: &mut impl Schedule<NandEv>,
        out: &mut Vec<NandOut>,
    ) {
        let ch = self.geo.channel_of_die(die);
        let phase = self.dies[die as usize].phase;
        match phase {
            Phase::Sense => {
                let (d, cold) = (&self.dies[die as usize], &self.cold[die as usize]);
                // Pages that move nothing (a sense for computation beside the die) are done when sensed. One page
                // (most reads) without the iterator over the inline and spilled pages.
                let moving = if d.npages == 1 {
                    let (txn, bytes) = d.pages[0];
                    if bytes == 0 {
                        out.push(NandOut::Done { txn, at: now });
                    }
                    u8::from(bytes != 0)
                } else {
                    let mut moving = 0;
                    for (txn, bytes) in die_pages(d, cold) {
                        if bytes == 0 {
                            out.push(NandOut::Done { txn, at: now });
                        } else {
                            moving += 1;
                        }
                    }
                    moving
                };
                if moving == 0 {
                    self.die_free(die, now, res, out);
                } else if self.timing.cache_read && d.suspended.is_none() && read_waits(die) {
                    if d.cache_left == 0 {
                        self.timed(die, Phase::CacheXfer, now + self.timing.t_cache_xfer, ev);
                    } else {
                        self.dies[die as usize].phase = Phase::WaitCache;
                    }
                } else {
                    let d = &mut self.dies[die as usize];
                    d.phase = Phase::Hold;
                    d.hold_left = moving;
                    let c = &self.channels[ch as usize];
                    if moving == 1 && d.npages == 1 && !c.busy && c.queue.is_empty() {
                        // Its one data-out reaches a free channel with nothing in line: queued, it would be taken
                        // at once (the only transfer waiting, whatever the grants), so it starts without the queue.
                        let (txn, bytes) = d.pages[0];
                        self.begin(ch, Xfer::Out { die, txn, bytes: u64::from(bytes), cache: false }, now, ledger, ev);
                    } else {
                        self.queue_outs(die, ch, false);
                        self.start_channel(ch, now, grants, ledger, ev);
                    }
                }
            }
            Phase::CacheXfer => {
                let d = &mut self.dies[die as usize];
                d.cache_left = die_pages(d, &self.cold[die as usize]).filter(|p| p.1 > 0).count() as u8;
                d.cache_from = now;
                let c = &self.channels[ch as usize];
                if d.cache_left == 1 && d.npages == 1 && !c.busy && c.queue.is_empty() {
                    // As after a sensing (`Phase::Sense`): the only transfer in line starts without the queue.
                    let (txn, bytes) = d.pages[0];
                    self.die_free(die, now, res, out);
                    self.begin(ch, Xfer::Out { die, txn, bytes: u64::from(bytes), cache: true }, now, ledger, ev);
                } else {
                    self.queue_outs(die, ch, true);
                    self.die_free(die, now, res, out);
                    self.start_channel(ch, now, grants, ledger, ev);
                }
            }
            Phase::Work => {
                let txn = first_page(&self.dies[die as usize], &self.cold[die as usize]).0;
                out.push(NandOut::Done { txn, at: now });
                self.die_free(die, now, res, out);
            }
            Phase::Suspending => {
                self.dies[die as usize].phase = Phase::Idle;
                out.push(NandOut::Suspended(die));
            }
            Phase::Resuming => {
                let left = self.cold[die as usize].left;
                self.timed(die, Phase::Work, now + left, ev);
                out.push(NandOut::Working(die));
            }
            Phase::Idle | Phase::WaitBus | Phase::Bus | Phase::WaitCache | Phase::Hold => {
                unreachable!("die {die}: no timed phase {phase:?} ends by itself")
            }
        }
    }

    /// Queues the current command's data-outs on the die's channel.
    #[inline(always)]
    fn queue_outs(&mut self, die: u32, ch: u32, cache: bool) {
        let ch = ch as usize;
        let (d, cold) = (&self.dies[die as usize], &self.cold[die as usize]);
        if d.npages == 1 {
            // One page (most commands) without the iterator over the inline and spilled pages.
            let (txn, bytes) = d.pages[0];
            if bytes > 0 {
                self.channels[ch].push(Xfer::Out { die, txn, bytes: u64::from(bytes), cache }, d.class);
            }
            return;
        }
        for (txn, bytes) in die_pages(d, cold).filter(|p| p.1 > 0) {
            self.channels[ch].push(Xfer::Out { die, txn, bytes, cache }, d.class);
        }
    }

    #[inline(always)]
    fn die_free(&mut self, die: u32, now: Time, res: &mut Resources, out: &mut Vec<NandOut>) {
        let d = &mut self.dies[die as usize];
        d.phase = Phase::Idle;
        if d.suspended.is_none() {
            let busy = now - d.busy_from;
            self.die_ops_untallied += 1;
            match u32::try_from(busy).ok().and_then(|b| d.busy_untallied.checked_add(b)) {
                Some(sum) => d.busy_untallied = sum,
                None => {
                    let r = res.member(self.die_res, die);
                    res.tally(r, busy + u64::from(std::mem::take(&mut d.busy_untallied)), 0);
                }
            }
        }
        out.push(NandOut::DieIdle(die));
    }

    /// `timing.xfer(bytes)`.
    #[inline]
    fn xfer(&mut self, bytes: u64) -> u64 {
        if bytes == self.xfer_last.0 {
            return self.xfer_last.1;
        }
        let ns = self.timing.xfer(bytes);
        self.xfer_last = (bytes, ns);
        ns
    }

    /// Decoding pipelined with the transfer: the engine starts once the first codeword has arrived and cannot
    /// finish before one decode time after the last byte. Inlined into a transfer's end, its one caller.
    #[inline]
    fn decode(&mut self, res: &mut Resources, ch: u32, xfer_start: Time, xfer_end: Time, bytes: u64) -> Time {
        let t_decode = self.timing.t_decode;
        if t_decode == 0 || bytes == 0 {
            return xfer_end;
        }
        let cws = self.ecc.codewords(bytes);
        let cw = u64::from(self.ecc.codeword_bytes);
        let first = xfer_start + if bytes >= cw { self.xfer_codeword } else { self.xfer(bytes) };
        let busy = cws * t_decode;
        let e = res.member(self.ecc_engine, ch);
        let s = res.reserve_inline(e, first, busy);
        (s + busy).max(xfer_end + t_decode)
    }

    /// A soft-decision decode of a page of `die` whose hard decode ended at `at`; returns its end.
    pub fn soft_decode(&mut self, res: &mut Resources, die: u32, at: Time) -> Time {
        let e = res.member(self.ecc_engine, self.geo.channel_of_die(die));
        self.stats.soft_decodes += 1;
        res.reserve(e, at, self.timing.t_soft_decode) + self.timing.t_soft_decode
    }

}
