//! The device's event loop and the steps of commands' timing plans (`engine::flow`): what a step does once its
//! inputs are known (a reservation, a flash transaction, a write-buffer admission, a completion), and the events
//! that resolve the steps that wait (the flash scheduler's and the write buffer's).

use super::core::DeviceCore;
use super::exec::ReadTo;
use crate::ctrl::sched::{ClassId, SchedEv, TxnReq};
use crate::engine::{At, Time};
use crate::nand::NandEv;
use crate::nvme::Status;

/// An event of the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ev {
    Sched(SchedEv),
    /// Step `0`'s data reaches the write buffer.
    Admit(u32),
}

impl From<SchedEv> for Ev {
    fn from(e: SchedEv) -> Self {
        Ev::Sched(e)
    }
}

impl From<NandEv> for Ev {
    fn from(e: NandEv) -> Self {
        Ev::Sched(SchedEv::Nand(e))
    }
}

/// A reservation on a timeline.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Booking {
    /// Firmware instructions on the first free controller core.
    Firmware(f64),
    /// Bytes through controller DRAM.
    Dram(u64),
    FromHost(u64),
    /// A page read for the host: its bytes cross controller DRAM twice (in and out), then the link.
    Deliver(u64),
}

/// A completion to post once the command's work is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Posting {
    pub sqid: u16,
    pub cid: u16,
    pub status: Status,
    pub dw0: u32,
}

/// What a step does.
#[derive(Debug, Default)]
pub(crate) enum Step {
    /// Ends when its inputs are known.
    #[default]
    Join,
    Book(Booking),
    /// A flash transaction; a program releases `release` write-buffer sectors when it ends (`counted`: the buffer
    /// already counts them as being released, by a `Releasing` step).
    Flash { req: TxnReq, release: u32, counted: bool },
    /// A program's data is in the controller and only the erase of its block keeps it waiting: the write buffer
    /// counts its `n` sectors as being released (so that waiting writes do not take it for stuck and pad pages).
    Releasing(u32),
    /// A flash transaction in the scheduler.
    InFlash { release: u32 },
    /// `n` sectors' admission to the write buffer, for a command of this class.
    Admit(u64, ClassId),
    /// Posts a command's completion (the CQE over the link, the driver's completion path).
    Complete(Posting),
    /// A one-page host read's delivery (`Booking::Deliver` of these bytes), then its completion.
    DeliverThenComplete(u64, Posting),
    /// An I/O command of this submission queue asks for a command slot (its doorbell rang: `nvme.fetch_window`).
    Fetch(u16),
    /// Waiting for a slot since the time given (the arbiter picks it when a command completes).
    Fetching(Time),
}

/// The bit of a scheduler's token that names a delivery entry (`DeviceCore::deliveries`), not a step.
pub(crate) const DELIVERY: u32 = 1 << 31;

/// Slots of resolved steps are reclaimed every this many events.
const RECLAIM_EVERY: u64 = 4096;

impl DeviceCore {
    /// Nothing starts before this: the host's clock, or the loop's when it ran ahead.
    #[inline]
    pub(crate) fn floor(&self) -> Time {
        self.host_now.max(self.events.clock())
    }

    /// `book` of `Booking::Firmware(n)`: when `after` is known (a host command's steps), the cores are booked
    /// without `run_booking`'s dispatch.
    #[inline]
    pub(crate) fn book_firmware(&mut self, n: f64, after: At) -> At {
        match self.flow.value(after) {
            Some(t) => {
                let ready = t.max(self.floor());
                At::at(self.ctrl.run(&mut self.res, &mut self.ledger, ready, n))
            }
            None => self.book(Booking::Firmware(n), after),
        }
    }

    /// A write's `bytes` from the host (`Booking::FromHost`), then through controller DRAM (`Booking::Dram`), once
    /// `after` is known; returns when they are in DRAM. When `after` is known (a host command's steps), both are
    /// booked without `run_booking`'s dispatch, as the two `book`s would.
    #[inline]
    pub(crate) fn book_data_in(&mut self, bytes: u64, after: At) -> At {
        match self.flow.value(after) {
            Some(t) => {
                // A booking moves neither clock: one floor for both.
                let floor = self.floor();
                let arrived = self.host.to_device(&mut self.res, &mut self.ledger, t.max(floor), bytes);
                At::at(self.ctrl.dram(&mut self.res, &mut self.ledger, arrived.max(floor), bytes))
            }
            None => {
                let arrived = self.book(Booking::FromHost(bytes), after);
                self.book(Booking::Dram(bytes), arrived)
            }
        }
    }

    /// A reservation once `after` is known (at once if it is).
    pub(crate) fn book(&mut self, b: Booking, after: At) -> At {
        match self.flow.value(after) {
            Some(t) => At::at(self.run_booking(b, t.max(self.floor()))),
            None => {
                let floor = self.floor();
                let at = self.flow.add1(Step::Book(b), floor, after);
                if let Some(f) = self.forecast.as_mut() {
                    let t = f.time_of(after, &self.flow, floor);
                    f.note(at, t);
                }
                at
            }
        }
    }

    /// A flash transaction entered once `after` is known; a program releases `release` buffer sectors.
    pub(crate) fn flash(&mut self, req: TxnReq, after: At, release: u32) -> At {
        let floor = self.floor();
        let at = self.flow.add1(Step::Flash { req, release, counted: false }, floor, after);
        if let Some(f) = self.forecast.as_mut() {
            let ready = f.time_of(after, &self.flow, floor).max(floor);
            f.enter(at, &req, ready, &self.nand.timing, &self.nand.geo);
        }
        at
    }

    /// `flash` of a read (nothing to release): when `after` is known and no step is ready, the transaction goes to
    /// the scheduler at once, as the next `drain` would send it first (nothing schedules an event or takes a step
    /// in between), without the ready queue's round trip.
    pub(crate) fn flash_read(&mut self, req: TxnReq, after: At) -> At {
        let floor = self.floor();
        // No payload: `Step::InFlash { release: 0 }` is what its end would read (`take_step` gives `Join`: 0).
        let Some((at, idx, start)) = self.flow.add_taken(floor, after) else {
            return self.flash(req, after, 0);
        };
        if let Some(f) = self.forecast.as_mut() {
            let ready = f.time_of(after, &self.flow, floor).max(floor);
            f.enter(at, &req, ready, &self.nand.timing, &self.nand.geo);
        }
        debug_assert!(idx < DELIVERY, "step indices below the delivery token's bit");
        self.sched.submit(req, idx, start, &mut self.events);
        at
    }

    /// `flash_read` of a timing-only host read's one page, whose data decodes, when the transaction goes to the
    /// scheduler at once: the delivery of its `bytes` and the completion `p` are kept apart (`deliveries`), and the
    /// transaction's end carries them out (`delivered`), as a flash step given them would (`deliver_pages`,
    /// `then_deliver`), without the step. False, with nothing done, when the transaction cannot go at once or the
    /// delivery is to be a step (`deliver_in_flash_step` off, or a forecast under way).
    pub(crate) fn flash_read_delivering(&mut self, req: TxnReq, after: At, bytes: u64, p: Posting) -> bool {
        if !self.deliver_in_flash_step || self.forecast.is_some() || self.flow.has_ready() {
            return false;
        }
        let Some(t) = self.flow.value(after) else { return false };
        // Where `flash_read`'s step would start.
        let start = t.max(self.floor());
        let entry = match self.free_deliveries.pop() {
            Some(i) => {
                self.deliveries[i as usize] = (bytes, p);
                i
            }
            None => {
                self.deliveries.push((bytes, p));
                (self.deliveries.len() - 1) as u32
            }
        };
        debug_assert!(entry < DELIVERY, "delivery entries below the token's bit");
        self.sched.submit(req, DELIVERY | entry, start, &mut self.events);
        self.posting_given = true;
        true
    }

    /// The admission of `n` sectors to the write buffer once their data is in DRAM (`after`).
    pub(crate) fn admit(&mut self, n: u64, after: At) -> At {
        let floor = self.floor();
        self.flow.add1(Step::Admit(n, self.class), floor, after)
    }

    /// `admit` for a host Write's command (`Device::exec_write`): when its data's arrival is known and no step is
    /// ready, the admission's event is scheduled at once, as the next `drain` would schedule it first (the step
    /// would be the ready queue's first), without the queue's round trip. Nothing between here and that drain
    /// (the end of the submission) takes a step or schedules an event: the FTL's write and GC only add steps.
    pub(crate) fn admit_at_once(&mut self, n: u64, after: At) -> At {
        let floor = self.floor();
        match self.flow.add_taken_with(Step::Admit(n, self.class), floor, after) {
            Some((at, idx, start)) => {
                self.events.push_ordered(start.max(floor), Ev::Admit(idx));
                at
            }
            None => self.admit(n, after),
        }
    }

    /// The SQE of a command of `sqid` crosses the link once its doorbell's write reached the controller (`rung`) and
    /// a command slot is free; returns when the controller has it. With no slot limit (the default) the fetch is
    /// booked at once, as it always was.
    pub(crate) fn fetch_sqe(&mut self, sqid: u16, rung: Time) -> At {
        let sqe = crate::nvme::SQE_BYTES as u64;
        if self.fetcher.is_unlimited() {
            return At::at(self.host.to_device(&mut self.res, &mut self.ledger, rung, sqe));
        }
        let floor = self.floor();
        let slot = self.flow.add1(Step::Fetch(sqid), floor, At::at(rung));
        self.drain();
        self.book(Booking::FromHost(sqe), slot)
    }

    /// Posts the completion `p` once `done` is known. Inlined into the submission (once per command).
    #[inline]
    pub(crate) fn complete(&mut self, p: Posting, done: At) {
        // A one-page read's transaction carries its completion with its delivery (`flash_read_delivering`,
        // `deliver_pages`).
        if std::mem::take(&mut self.posting_given) {
            debug_assert!(p == self.read_posting, "the completion given is this command's");
            return;
        }
        // A read's last step is its delivery: the completion rides on it (one step less per read).
        if let Some(step) = self.flow.unwatched_mut(done) {
            if let Step::Book(Booking::Deliver(bytes)) = *step {
                *step = Step::DeliverThenComplete(bytes, p);
                return;
            }
        }
        // Else it rides on that step, with no node of its own until then (a write's admission: posted at once where
        // it would be taken first, `let_in`).
        if self.completions_ride && self.flow.add_rider(Step::Complete(p), done) {
            return;
        }
        let floor = self.floor();
        self.flow.add1(Step::Complete(p), floor, done);
    }

    /// Books the completion entry over the link and the driver's completion path; returns when the host sees it.
    fn post(&mut self, p: Posting, ready: Time) -> Time {
        let t_cqe = self.host.to_host(&mut self.res, &mut self.ledger, ready, crate::nvme::CQE_BYTES as u64) + self.host.link_latency;
        self.posted_at(p, ready, t_cqe)
    }

    /// A one-page read's delivery of `bytes` from `ready` (`Booking::Deliver`), then its completion `p` (`post`):
    /// the data and the completion entry booked on the link up in one go (`HostModel::to_host_then`), as the two
    /// bookings one after the other would (nothing books between them); returns when the host sees it.
    fn deliver_then_post(&mut self, bytes: u64, p: Posting, ready: Time) -> Time {
        let in_dram = self.through_dram(ready, bytes, ReadTo::Dram);
        let (delivered, cqe) = self.host.to_host_then(&mut self.res, &mut self.ledger, in_dram, bytes, crate::nvme::CQE_BYTES as u64);
        self.posted_at(p, delivered, cqe + self.host.link_latency)
    }

    /// `post` once its completion entry reached the host at `t_cqe` (the entry was sent at `ready`).
    #[inline]
    fn posted_at(&mut self, p: Posting, ready: Time, t_cqe: Time) -> Time {
        let t_app = self.host.complete_path(&mut self.res, t_cqe);
        self.posted.push((p, t_app));
        if p.sqid != 0 {
            // Its slot is free once the controller sent the CQE: the arbiter picks the command fetched into it.
            if let Some(idx) = self.fetcher.release(ready) {
                let Step::Fetching(asked) = self.flow.take_step(idx) else { unreachable!("a fetch waits for its slot") };
                self.flow.resolve(idx, asked.max(ready));
            }
        }
        t_app
    }

    /// The latest of `floor` and `times` (a step only when some are not known). Inlined for the answers that need
    /// no look (a write's completion waits for its admission alone: no mapping reads).
    #[inline]
    pub(crate) fn max_all(&mut self, floor: At, times: &[At]) -> At {
        if times.is_empty() {
            return floor;
        }
        if floor == At::ZERO && times.len() == 1 {
            return times[0];
        }
        self.max_all_looked(floor, times)
    }

    /// `max_all` of `floor` and at least one time more.
    fn max_all_looked(&mut self, floor: At, times: &[At]) -> At {
        let all = || std::iter::once(floor).chain(times.iter().copied());
        let forecast = self.forecast.as_ref().map(|f| all().map(|a| f.time_of(a, &self.flow, Time::ZERO)).max().unwrap_or(Time::ZERO));
        let at = self.flow.max_all(Time::ZERO, all());
        if let (Some(f), Some(t)) = (self.forecast.as_mut(), forecast) {
            f.note(at, t);
        }
        at
    }

    fn run_booking(&mut self, b: Booking, ready: Time) -> Time {
        let (res, led) = (&mut self.res, &mut self.ledger);
        match b {
            Booking::Firmware(n) => self.ctrl.run(res, led, ready, n),
            Booking::Dram(bytes) => self.ctrl.dram(res, led, ready, bytes),
            Booking::FromHost(bytes) => self.host.to_device(res, led, ready, bytes),
            Booking::Deliver(bytes) => {
                let in_dram = self.through_dram(ready, bytes, ReadTo::Dram);
                self.host.to_host(&mut self.res, &mut self.ledger, in_dram, bytes)
            }
        }
    }

    /// Runs every step whose inputs are known (inlined: after most events none is, and the call cost more than the
    /// look).
    #[inline]
    pub(crate) fn drain(&mut self) {
        if self.flow.has_ready() {
            self.drain_ready();
        }
    }

    /// `drain` with a step ready.
    #[inline(never)]
    fn drain_ready(&mut self) {
        while let Some((_, idx, ready)) = self.flow.pop_ready() {
            let ready = ready.max(self.floor());
            match self.flow.take_step(idx) {
                Step::Join => self.flow.resolve(idx, ready),
                Step::Book(b) => {
                    let end = self.run_booking(b, ready);
                    self.flow.resolve(idx, end);
                }
                Step::Releasing(n) => {
                    self.wbuf.releasing(u64::from(n));
                    self.flow.resolve(idx, ready);
                }
                Step::Flash { req, release, counted } => {
                    // With nothing to release (reads, GC's and the FTL's flash work) the payload `take_step` left,
                    // `Join`, is what the transaction's end reads as `InFlash { release: 0 }` (`step_event`).
                    if release > 0 {
                        if !counted {
                            self.wbuf.releasing(u64::from(release));
                        }
                        *self.flow.step_mut(idx) = Step::InFlash { release };
                    }
                    debug_assert!(idx < DELIVERY, "step indices below the delivery token's bit");
                    self.sched.submit(req, idx, ready, &mut self.events);
                }
                Step::Admit(n, class) => {
                    *self.flow.step_mut(idx) = Step::Admit(n, class);
                    self.events.push_ordered(ready, Ev::Admit(idx));
                }
                Step::Complete(p) => {
                    let t = self.post(p, ready);
                    self.flow.resolve(idx, t);
                }
                Step::DeliverThenComplete(bytes, p) => {
                    let t = self.deliver_then_post(bytes, p, ready);
                    self.flow.resolve(idx, t);
                }
                Step::Fetch(sqid) => match self.fetcher.request(sqid, idx, ready) {
                    Some(t) => self.flow.resolve(idx, t),
                    None => *self.flow.step_mut(idx) = Step::Fetching(ready),
                },
                Step::InFlash { .. } | Step::Fetching(_) => unreachable!("a waiting step is resolved by its event"),
            }
        }
    }

    /// Time of the next event.
    #[inline]
    pub(crate) fn next_event(&self) -> Option<Time> {
        self.events.peek_time()
    }

    /// Processes the next event and every step it makes runnable; false if there was none.
    pub(crate) fn step_event(&mut self) -> bool {
        let Some((now, e)) = self.events.pop() else { return false };
        match e {
            Ev::Sched(se) => {
                self.sched.handle(se, now, &mut self.nand, &mut self.res, &mut self.ledger, &mut self.events, &mut self.txn_done);
                // By index: what runs below adds nothing to `txn_done`.
                let n = self.txn_done.len();
                let mut released = false;
                for i in 0..n {
                    let (token, at) = self.txn_done[i];
                    if token & DELIVERY != 0 {
                        self.delivered(token & !DELIVERY, at, i + 1 == n);
                        continue;
                    }
                    match self.flow.take_step(token) {
                        Step::InFlash { release } if release > 0 => {
                            self.flow.resolve(token, at);
                            self.released(u64::from(release), now);
                            released = true;
                        }
                        Step::DeliverThenComplete(bytes, p) => self.then_deliver(token, at, bytes, p, i + 1 == n),
                        step => {
                            debug_assert!(matches!(step, Step::Join | Step::InFlash { .. }), "a transaction's step: {step:?}");
                            self.flow.resolve(token, at)
                        }
                    }
                }
                self.txn_done.clear();
                if released {
                    self.unstick_after_release(now);
                }
            }
            Ev::Admit(idx) => {
                let Step::Admit(n, class) = *self.flow.step_mut(idx) else { unreachable!("an admission's step") };
                if self.wbuf.offer(idx, n, class) {
                    self.let_in(idx, now);
                } else if self.wbuf.stuck() {
                    self.unstick(now);
                }
            }
        }
        self.drain();
        if self.events.processed().is_multiple_of(RECLAIM_EVERY) {
            self.flow.reclaim(self.events.clock());
        }
        true
    }

    /// A one-page read's flash step `idx` that delivers its data itself (`deliver_pages`) ended at `at`; `bytes` and
    /// `p`, its payload, are the delivery and the completion. Where a step waiting for the flash step alone would
    /// have been made ready, and taken by the next `drain` before anything else when no step is ready and no other
    /// transaction's end comes before that drain (`last`), the delivery is run at once; otherwise the step goes to
    /// the ready queue in that step's place. Either way the same bookings at the same times in the same order.
    fn then_deliver(&mut self, idx: u32, at: Time, bytes: u64, p: Posting, last: bool) {
        if !last || self.flow.has_ready() {
            *self.flow.step_mut(idx) = Step::DeliverThenComplete(bytes, p);
            self.flow.requeue(idx, at);
            return;
        }
        let ready = at.max(self.floor());
        let end = self.deliver_then_post(bytes, p, ready);
        self.flow.resolve(idx, end);
    }

    /// The transaction of delivery entry `entry` (`flash_read_delivering`) ended at `at`: its delivery and completion
    /// run at once, or go to the ready queue as a step, as `then_deliver` does for a flash step that carries them.
    /// Out of line: inlined, the event loop it sits in cost a GC-steady write ~40 instructions more.
    #[inline(never)]
    fn delivered(&mut self, entry: u32, at: Time, last: bool) {
        let (bytes, p) = self.deliveries[entry as usize];
        self.free_deliveries.push(entry);
        if !last || self.flow.has_ready() {
            self.flow.add_ready(Step::DeliverThenComplete(bytes, p), at);
            return;
        }
        let ready = at.max(self.floor());
        self.deliver_then_post(bytes, p, ready);
    }

    /// A program released `n` buffer sectors at `now`: waiting admissions that fit are let in.
    fn released(&mut self, n: u64, now: Time) {
        let mut admitted = std::mem::take(&mut self.admitted);
        self.wbuf.release(n, &mut admitted, &self.sched.classes);
        for &a in &admitted {
            self.let_in(a, now);
        }
        admitted.clear();
        self.admitted = admitted;
    }

    /// Admission step `idx` let its sectors in at `now`. A completion riding on it (`complete`) that the next drain
    /// would take first (no step is ready: `Flow::resolve_taking_rider`) is posted at once: what runs before that
    /// drain (the rest of the event's releases and admissions) only resolves steps, which books nothing, or books a
    /// read's delivery at once only where no step is ready, which it then would have been after this posting too.
    /// Not with a fetch window, where a posting may release a fetch step into the ready queue, which the drain would
    /// have put behind the steps made ready in between.
    fn let_in(&mut self, idx: u32, now: Time) {
        if !self.fetcher.is_unlimited() {
            self.flow.resolve(idx, now);
            return;
        }
        if let Some((step, start)) = self.flow.resolve_taking_rider(idx, now) {
            let Step::Complete(p) = step else { unreachable!("only completions ride on a step") };
            let ready = start.max(self.floor());
            self.post(p, ready);
        }
    }

    /// Programs released room at `now`. When that leaves writes waiting and no program under way once the steps it
    /// made ready have run (the last program ended and its room went to writes whose pages are not full), no
    /// later release will come, and no later arrival need come either (every queued command may be one of the
    /// waiting writes): the buffer is stuck now, as when a refused arrival finds it so.
    fn unstick_after_release(&mut self, now: Time) {
        self.drain();
        if self.wbuf.stuck() {
            self.unstick(now);
        }
    }

    /// Admissions wait and no program under way will make room: the buffer holds only sectors of pages that are
    /// not full, or of full pages whose programs wait for writes queued behind. Program the pages not full
    /// (padded); while no program is under way, let the next waiting write in over capacity (its page's program
    /// may then go), so that the device never waits for an event that will not come.
    fn unstick(&mut self, now: Time) {
        let (ftl, mut sink) = self.ftl_and_sink();
        ftl.flush(now, &mut sink);
        self.drain();
        while self.wbuf.stuck() {
            let a = self.wbuf.force_head(&self.sched.classes).expect("a stuck buffer has a waiting write");
            self.let_in(a, now);
            self.drain();
        }
    }

    /// Runs events up to and including time `t`.
    pub(crate) fn run_until(&mut self, t: Time) {
        self.drain();
        while self.events.peek_time().is_some_and(|e| e <= t) {
            self.step_event();
        }
    }

    /// Runs the loop until `at` is known (a blocking call: the loop may run ahead of the host's clock); returns it.
    pub(crate) fn wait_for(&mut self, at: At) -> Time {
        self.drain();
        loop {
            if let Some(t) = self.flow.value(at) {
                return t;
            }
            if !self.step_event() {
                // Nothing left can resolve it: a step waits for itself (a bug); fail loudly rather than hang.
                self.fault.get_or_insert(crate::error::SimError::Fault("a timing step can never complete".into()));
                return self.floor();
            }
        }
    }
}
