//! MQSim's transaction scheduling as an event-driven issue queue (`nand.channel_arbitration = mqsim_tsu`, host
//! reads only).
//!
//! Under the other policies a read is booked on the array when it is submitted. MQSim decides later: a page read
//! waits in its die's queue, and which die gets the channel is decided when the channel frees, once everything
//! submitted up to that time is known. This module keeps those queues and replays MQSim's order on events:
//!
//! - a read arriving at an idle channel is sent at once (`TSU_OutOfOrder::Schedule`);
//! - when a channel frees (end of a command or a data-out), the sensed pages waiting for it go first, in order of
//!   sensing (end of `NVM_PHY_ONFI_NVDDR2::Execute_simulator_event`); only when none waits are the channel's dies
//!   walked round-robin from where the last walk stopped, and the first idle die with queued reads gets one command
//!   (`TSU_Base::handle_channel_idle_signal`);
//! - that command reads every queued page of the die at the first queued page's offset, one per plane
//!   (`TSU_Base::issue_command_to_chip`), whichever request it belongs to;
//! - a die is busy from its command until its last page has left it; a page sensed while the channel is busy waits
//!   (`handle_ready_signal_from_chip`).
//!
//! The decisions are committed to the same channel and die timelines as every other flash operation, so writes,
//! GC and extension reads (still booked when issued) and these reads never overlap. A die is MQSim's chip here:
//! MQSim lets one die of a chip work at a time, nearflash's presets have one die per chip.
//!
//! Events are processed in time order; the device runs them up to the host's clock and, when asked for a
//! completion, up to that completion (`Device::next_completion_time`). A read that arrives before the last
//! processed event (the host submitted after looking ahead) is queued at that event's time.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use super::{EccOutcome, NandArray};
use crate::engine::{EnergyLedger, Resources, Time};

/// One page read: `bytes` to move out of plane `plane` (within its die; `u32::MAX` if not known) at offset
/// `page`, with `senses` sensings left (1 + read retries).
#[derive(Clone, Copy, Debug)]
struct Txn {
    token: u64,
    page: u32,
    plane: u32,
    bytes: u64,
    senses: u32,
    soft: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// A page read reaches its die's queue.
    Arrive { die: u32, slot: usize },
    /// A command's cycles have left the channel.
    CmdEnd { die: u32 },
    /// The die has sensed its pages.
    Sensed { die: u32 },
    /// A page has left the die.
    OutEnd { die: u32 },
    /// A channel blocked by a booking of another kind of operation may be free again.
    Wake { channel: u32 },
}

#[derive(Default)]
struct Die {
    queue: VecDeque<Txn>,
    /// Pages read by the die's current command, in data-out order.
    active: VecDeque<Txn>,
    /// Pages of the current command still on the die.
    on_die: u32,
    busy: bool,
    /// The die's timeline is booked up to here for the current command.
    held_to: Time,
}

#[derive(Default)]
struct Channel {
    busy: bool,
    /// Sensed pages waiting for the channel: (die, page).
    waiting: VecDeque<(u32, Txn)>,
    /// Dies on the channel in round-robin order, and the next to look at.
    dies: Vec<u32>,
    turn: usize,
    /// A Wake event is pending.
    woken: bool,
}

/// The queues, channel states and pending events.
pub(super) struct Tsu {
    dies: Vec<Die>,
    channels: Vec<Channel>,
    events: BinaryHeap<Reverse<(Time, u64, Ev)>>,
    seq: u64,
    /// Page reads not yet at their die (indexed by `Ev::Arrive::slot`).
    arriving: Vec<Option<Txn>>,
    free_slots: Vec<usize>,
    next_token: u64,
    /// Time of the last processed event.
    horizon: Time,
    /// Finished page reads: (token, decode end).
    finished: Vec<(u64, Time)>,
}

impl Tsu {
    pub(super) fn new(dies: u32, channels: u32, channel_of_die: impl Fn(u32) -> u32) -> Self {
        let mut ch: Vec<Channel> = (0..channels).map(|_| Channel::default()).collect();
        for d in 0..dies {
            ch[channel_of_die(d) as usize].dies.push(d);
        }
        Tsu {
            dies: (0..dies).map(|_| Die::default()).collect(),
            channels: ch,
            events: BinaryHeap::new(),
            seq: 0,
            arriving: Vec::new(),
            free_slots: Vec::new(),
            next_token: 0,
            horizon: 0,
            finished: Vec::new(),
        }
    }

    fn push(&mut self, at: Time, ev: Ev) {
        self.seq += 1;
        self.events.push(Reverse((at, self.seq, ev)));
    }
}

impl NandArray {
    /// Whether host reads go through the event-driven issue queue (`mqsim_tsu`).
    pub fn defers_reads(&self) -> bool {
        self.tsu.is_some()
    }

    /// Queues a read of `bytes` from `plane` (of the die's planes; `u32::MAX` if not known) at offset `page` of
    /// `die`, arriving at `ready`; returns the token under which its decode end is reported
    /// ([`take_finished_reads`](Self::take_finished_reads)). Panics without `mqsim_tsu`.
    pub fn queue_read(&mut self, ready: Time, die: u32, page: u32, plane: u32, bytes: u64, outcome: EccOutcome) -> u64 {
        let multi = self.timing.multi_plane;
        let tsu = self.tsu.as_mut().expect("queue_read needs nand.channel_arbitration = mqsim_tsu");
        let token = tsu.next_token;
        tsu.next_token += 1;
        let txn = Txn {
            token,
            page,
            plane: if multi { plane } else { u32::MAX },
            bytes,
            senses: 1 + outcome.retries(),
            soft: outcome.soft_decoded(),
        };
        let slot = match tsu.free_slots.pop() {
            Some(s) => {
                tsu.arriving[s] = Some(txn);
                s
            }
            None => {
                tsu.arriving.push(Some(txn));
                tsu.arriving.len() - 1
            }
        };
        let at = ready.max(tsu.horizon);
        tsu.push(at, Ev::Arrive { die, slot });
        self.stats.read_retries += u64::from(outcome.retries());
        self.stats.soft_decodes += u64::from(outcome.soft_decoded());
        self.stats.uncorrectable += u64::from(!outcome.is_ok());
        token
    }

    /// Time of the next event of the issue queue, if any.
    pub fn next_read_event(&self) -> Option<Time> {
        self.tsu.as_ref().and_then(|t| t.events.peek().map(|Reverse((at, ..))| *at))
    }

    /// Reads whose data is decoded since the last call: (token, decode end).
    pub fn take_finished_reads(&mut self) -> Vec<(u64, Time)> {
        self.tsu.as_mut().map(|t| std::mem::take(&mut t.finished)).unwrap_or_default()
    }

    /// Processes the next event of the issue queue; false if there was none.
    pub fn step_reads(&mut self, res: &mut Resources, ledger: &mut EnergyLedger) -> bool {
        let Some(tsu) = self.tsu.as_mut() else { return false };
        let Some(Reverse((now, _, ev))) = tsu.events.pop() else { return false };
        tsu.horizon = now;
        match ev {
            Ev::Arrive { die, slot } => {
                let txn = tsu.arriving[slot].take().expect("arrival slot holds its read");
                tsu.free_slots.push(slot);
                tsu.dies[die as usize].queue.push_back(txn);
                let ch = self.geo.channel_of_die(die);
                if !self.tsu.as_ref().is_some_and(|t| t.channels[ch as usize].busy) {
                    self.tsu_issue(res, ledger, ch, now);
                }
            }
            Ev::CmdEnd { die } => {
                let ch = self.geo.channel_of_die(die);
                tsu.channels[ch as usize].busy = false;
                self.tsu_channel_free(res, ledger, ch, now);
            }
            Ev::Sensed { die } => {
                let ch = self.geo.channel_of_die(die);
                let d = &mut tsu.dies[die as usize];
                let pages: Vec<Txn> = d.active.drain(..).collect();
                tsu.channels[ch as usize].waiting.extend(pages.into_iter().map(|p| (die, p)));
                if !tsu.channels[ch as usize].busy {
                    self.tsu_channel_free(res, ledger, ch, now);
                }
            }
            Ev::OutEnd { die } => {
                let ch = self.geo.channel_of_die(die);
                tsu.channels[ch as usize].busy = false;
                let d = &mut tsu.dies[die as usize];
                d.on_die -= 1;
                if d.on_die == 0 {
                    d.busy = false;
                }
                self.tsu_channel_free(res, ledger, ch, now);
            }
            Ev::Wake { channel } => {
                tsu.channels[channel as usize].woken = false;
                if !tsu.channels[channel as usize].busy {
                    self.tsu_channel_free(res, ledger, channel, now);
                }
            }
        }
        true
    }

    /// The channel is free at `now`: a waiting page goes out first, else a command is sent.
    fn tsu_channel_free(&mut self, res: &mut Resources, ledger: &mut EnergyLedger, ch: u32, now: Time) {
        let tsu = self.tsu.as_mut().expect("mqsim_tsu");
        let Some(&(die, txn)) = tsu.channels[ch as usize].waiting.front() else {
            self.tsu_issue(res, ledger, ch, now);
            return;
        };
        let x = self.timing.xfer(txn.bytes);
        let chr = res.member(self.channel, ch);
        let xs = res.timeline(chr).find(now, x);
        if xs > now {
            self.tsu_wake(ch, xs);
            return;
        }
        let tsu = self.tsu.as_mut().expect("mqsim_tsu");
        tsu.channels[ch as usize].waiting.pop_front();
        tsu.channels[ch as usize].busy = true;
        let d = &mut tsu.dies[die as usize];
        let held = d.held_to;
        d.held_to = xs + x;
        let dr = res.member(self.die, die);
        res.timeline_mut(dr).commit(held, xs + x);
        res.timeline_mut(chr).commit(xs, xs + x);
        tsu.push(xs + x, Ev::OutEnd { die });
        ledger.charge(self.acc.bus, self.e.bus_byte * txn.bytes as f64);
        ledger.charge(self.acc.ecc, self.e.ecc_byte * txn.bytes as f64);
        self.stats.bytes_to_controller += txn.bytes;
        let mut done = self.decode(res, die, xs, xs + x, txn.bytes);
        let tsu = self.tsu.as_mut().expect("mqsim_tsu");
        if txn.senses > 1 {
            // A read retry: the page is read again before anything else on the die.
            tsu.dies[die as usize].queue.push_front(Txn { senses: txn.senses - 1, ..txn });
            return;
        }
        if txn.soft {
            let e = res.member(self.ecc_engine, ch);
            done = res.reserve(e, done, self.timing.t_soft_decode) + self.timing.t_soft_decode;
        }
        self.tsu.as_mut().expect("mqsim_tsu").finished.push((txn.token, done));
    }

    fn tsu_wake(&mut self, ch: u32, at: Time) {
        let tsu = self.tsu.as_mut().expect("mqsim_tsu");
        if !tsu.channels[ch as usize].woken {
            tsu.channels[ch as usize].woken = true;
            tsu.push(at, Ev::Wake { channel: ch });
        }
    }

    /// Walks the channel's dies round-robin from its turn and sends one command to the first idle die with queued
    /// reads: every queued page at the offset of the die's first, one per plane.
    fn tsu_issue(&mut self, res: &mut Resources, ledger: &mut EnergyLedger, ch: u32, now: Time) {
        let chr = res.member(self.channel, ch);
        let n = self.tsu.as_ref().expect("mqsim_tsu").channels[ch as usize].dies.len();
        for _ in 0..n {
            let tsu = self.tsu.as_mut().expect("mqsim_tsu");
            let c = &mut tsu.channels[ch as usize];
            let die = c.dies[c.turn];
            c.turn = (c.turn + 1) % n;
            let d = &tsu.dies[die as usize];
            if d.busy || d.queue.is_empty() {
                continue;
            }
            // Gather the command's pages.
            let first = d.queue[0];
            let mut picked: Vec<usize> = vec![0];
            let mut planes = if first.plane == u32::MAX { u64::MAX } else { 1u64 << first.plane.min(63) };
            if first.plane != u32::MAX {
                for (i, t) in d.queue.iter().enumerate().skip(1) {
                    if t.plane != u32::MAX && t.page == first.page && planes & (1 << t.plane.min(63)) == 0 {
                        planes |= 1 << t.plane.min(63);
                        picked.push(i);
                    }
                }
            }
            let k = picked.len() as u64;
            let cmd = self.timing.t_cmd * k;
            let t_r = self.timing.t_read(self.geo.page_type(first.page));
            if !res.timeline(chr).is_free(now, now + cmd.max(1)) {
                let at = res.timeline(chr).find(now, cmd.max(1));
                self.tsu_wake(ch, at);
                return;
            }
            let dr = res.member(self.die, die);
            if !res.timeline(dr).is_free(now, now + cmd + t_r) {
                let at = res.timeline(dr).find(now, cmd + t_r);
                self.tsu_wake(ch, at);
                continue;
            }
            let tsu = self.tsu.as_mut().expect("mqsim_tsu");
            let d = &mut tsu.dies[die as usize];
            for &i in picked.iter().rev() {
                let t = d.queue.remove(i).expect("picked index is in the queue");
                d.active.push_front(t);
            }
            d.busy = true;
            d.on_die = k as u32;
            d.held_to = now + cmd + t_r;
            tsu.channels[ch as usize].busy = true;
            res.timeline_mut(chr).commit(now, now + cmd);
            res.timeline_mut(dr).commit(now, now + cmd + t_r);
            tsu.push(now + cmd, Ev::CmdEnd { die });
            tsu.push(now + cmd + t_r, Ev::Sensed { die });
            self.stats.read_ops += 1;
            self.stats.pages_read += k;
            self.stats.multi_plane_reads += u64::from(k > 1);
            ledger.charge(self.acc.read, self.e.read_page * k as f64);
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::setup;
    use super::*;

    /// Queues `reads` (ready, die, page, plane) of `bytes` each under `mqsim_tsu`, runs every event and returns
    /// each read's decode end, with the array.
    fn run(reads: &[(Time, u32, u32, u32)], bytes: u64) -> (Vec<Time>, NandArray) {
        let (mut n, mut res, mut led) = setup(&[("cache_read", "false"), ("t_decode", "0us"), ("channel_arbitration", "mqsim_tsu")]);
        let tokens: Vec<u64> =
            reads.iter().map(|&(at, die, page, plane)| n.queue_read(at, die, page, plane, bytes, EccOutcome::Corrected)).collect();
        while n.step_reads(&mut res, &mut led) {}
        let fin: std::collections::HashMap<u64, Time> = n.take_finished_reads().into_iter().collect();
        (tokens.iter().map(|t| fin[t]).collect(), n)
    }

    #[test]
    fn a_read_queued_on_its_die_is_sent_after_pages_sensed_while_it_waited() {
        // Channel 0 holds dies 0 and 8. Read 1 occupies die 0 until D1 = c + tR + x; read 2 for die 0 arrives
        // meanwhile and waits in the die's queue; read 3 for die 8 arrives later, at x/2, and its page is sensed
        // during read 1's data-out. MQSim decides read 2's command when the channel frees at D1: read 3's waiting
        // page goes out first, then read 2's command.
        let policy = [("cache_read", "false"), ("t_decode", "0us"), ("channel_arbitration", "mqsim_tsu")];
        let (mut n, mut res, mut led) = setup(&policy);
        let t = n.timing.clone();
        let (c, tr, x) = (t.t_cmd, t.t_read(0), t.xfer(4096));
        assert!(x / 2 > c && c > 0);
        let reads = [(0, 0, 0, 0), (1000, 0, 0, 1), (x / 2, 8, 0, 0)];
        let d1 = c + tr + x;
        let (done, _) = run(&reads, 4096);
        assert_eq!(done[0], d1);
        assert_eq!(done[2], d1 + x, "read 3's page waited for read 1's data-out only");
        assert_eq!(done[1], d1 + x + c + tr + x, "read 2's command after read 3's data-out");
        // Booked at submission (the synchronous path), read 2 took the channel at D1, before read 3's data-out.
        let booked: Vec<Time> =
            reads.iter().map(|&(at, die, page, _)| n.read(&mut res, &mut led, at, die, page, &[4096], EccOutcome::Corrected)).collect();
        assert_eq!(booked[1], d1 + c + tr + x);
        assert_ne!(booked[1], done[1]);
    }

    #[test]
    fn a_freed_channel_serves_its_dies_round_robin_not_in_arrival_order() {
        // Dies 0, 8 and 16 share channel 0. Read 1 (die 8) takes the channel at 0; reads for die 0 (at 1 ns) and die
        // 16 (at 2 ns) arrive while its command is on the bus. When the command ends the walk resumes after die
        // 8: die 16 is sent before die 0, though it arrived later.
        let (done, n) = run(&[(0, 8, 0, 0), (1, 0, 0, 0), (2, 16, 0, 0)], 4096);
        let t = &n.timing;
        let (c, tr, x) = (t.t_cmd, t.t_read(0), t.xfer(4096));
        assert_eq!(done[0], c + tr + x);
        assert_eq!(done[2], c + tr + 2 * x, "die 16: command at c, page waits for read 1's data-out");
        assert_eq!(done[1], c + tr + 3 * x, "die 0: command at 2c, page after die 16's");
        assert_eq!(n.stats.read_ops, 3);
    }

    #[test]
    fn one_command_reads_every_queued_page_of_the_die_at_the_first_pages_offset() {
        // Die 0 is busy with page 0; then page 2 plane 0, page 4 plane 1 and page 2 plane 1 queue behind it. The
        // next command reads page 2 on both planes (one tR, two data-outs); page 4 follows with a command of its own.
        let (done, n) = run(&[(0, 0, 0, 0), (10, 0, 2, 0), (20, 0, 4, 1), (30, 0, 2, 1)], 16384);
        let t = &n.timing;
        let (c, x) = (t.t_cmd, t.xfer(16384));
        let tr = |p: u32| t.t_read(n.geo.page_type(p));
        assert_eq!(done[0], c + tr(0) + x);
        assert_eq!(done[1], done[0] + 2 * c + tr(2) + x, "two-plane command: two command times, one tR");
        assert_eq!(done[3], done[1] + x, "the second plane's data-out follows");
        assert_eq!(done[2], done[3] + c + tr(4) + x);
        assert_eq!((n.stats.read_ops, n.stats.multi_plane_reads, n.stats.pages_read), (3, 1, 4));
    }

    #[test]
    fn reads_wait_for_flash_work_booked_on_the_timelines() {
        // A program booked on die 0 (synchronous path) holds the die: a queued read is sent when it ends.
        let (mut n, mut res, mut led) = setup(&[("cache_read", "false"), ("t_decode", "0us"), ("channel_arbitration", "mqsim_tsu")]);
        let p = n.program(&mut res, &mut led, 0, 0, 0, 1, 16384);
        let tok = n.queue_read(0, 0, 2, 0, 4096, EccOutcome::Corrected);
        while n.step_reads(&mut res, &mut led) {}
        let fin = n.take_finished_reads();
        let t = &n.timing;
        assert_eq!(fin, vec![(tok, p + t.t_cmd + t.t_read(n.geo.page_type(2)) + t.xfer(4096))]);
    }
}
