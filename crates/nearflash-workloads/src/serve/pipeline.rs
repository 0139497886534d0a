//! Pace none: each connection is a closed-loop client whose reactions are paired with its completions in virtual
//! time, while its replies go out as soon as its requests are submitted.
//!
//! A command's data moves and its status is decided when it is submitted; only its completion time is left to the
//! event loop. So a request's reply need not wait for the loop: it is sent once the request is in the device, and the
//! client's next request (its reaction) arrives while the loop is still behind. A reaction takes the connection's
//! earliest completion that no reaction has taken yet (a slot) and is submitted at that completion's virtual time;
//! one that finds no slot waits in the connection's queue, its thread parked, until the loop reaches the next
//! completion of the connection, where the thread running the loop submits it (with its buffer) and wakes its thread
//! to send the reply. The loop runs as far as no reaction can still be owed before it: it holds at the
//! `reaction_lag`-th earliest slot that a reaction the client owes (a reply sent, no request since) could still take,
//! for `reaction_window` at most. A client keeping N requests in flight has its reactions already on their way (in
//! the socket, in nbdkit) when the loop reaches the completions they take: each arrival takes the completion the
//! loop is held at and moves it on to the next, so the device sees the client's depth N in virtual time, with no
//! round trip to the client per completion. A reaction waits in the queue only when the loop is held short of its
//! connection's completions (by another connection's owed reaction, `Pacing::queued_reactions`). A request that finds no reaction owed is new (the client deepened its queue): it is
//! submitted at the current clock and its reply held until its burst has arrived (`Shared::hold_for_burst`).
//!
//! `reaction_window` zero (`--serial`): a request runs the loop to its own completion before its reply, so requests
//! in flight are served one after the other in virtual time (the reactions start in the loop's past).

use super::*;
use std::sync::Arc;

/// A completion of a connection's request that no reaction has taken yet.
#[derive(Debug, Clone, Copy)]
pub(super) struct Slot {
    at: Time,
    /// When the loop reached it (a reaction owed for longer than `reaction_window` is not waited for).
    opened: Instant,
}

/// A request in the device, until its last command completes (its connection: its commands' tickets').
#[derive(Debug, Clone, Copy)]
pub(super) struct InDevice {
    pub left: u32,
    pub done: Time,
    pub submitted: Time,
}

/// A reaction waiting for a slot: its request's parameters, the client's buffer (raw: the thread that owns it is
/// parked in `Shared::io` until the request is submitted, and touches it no more until then) and that thread.
pub(super) struct Pending {
    io: RawIo,
    parker: Arc<Parker>,
}

/// The thread of a queued reaction, and the outcome the thread that submits it leaves there.
struct Parker {
    thread: std::thread::Thread,
    outcome: Mutex<Option<Result<Outcome>>>,
}

impl Parker {
    fn take(&self) -> Option<Result<Outcome>> {
        self.outcome.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// `Io` with its buffer as a raw pointer.
enum RawIo {
    Read { lba: u64, out: *mut u8, len: usize },
    Write { lba: u64, data: *const u8, len: usize, fua: bool },
    Flush,
    Trim { lba: u64, blocks: u64, fua: bool },
    Zero { lba: u64, blocks: u64, deallocate: bool, fua: bool },
}

// SAFETY: the buffers a `RawIo` points to belong to a thread that stays parked in `Shared::io` (never touching them)
// until the request has been submitted under the device's lock and its outcome left in its `Parker`; a `Pending` is
// only used under that lock and dropped (never used) if the device closes first.
unsafe impl Send for Pending {}

impl RawIo {
    fn new(io: Io<'_>) -> RawIo {
        match io {
            Io::Read { lba, out } => RawIo::Read { lba, out: out.as_mut_ptr(), len: out.len() },
            Io::Write { lba, data, fua } => RawIo::Write { lba, data: data.as_ptr(), len: data.len(), fua },
            Io::Flush => RawIo::Flush,
            Io::Trim { lba, blocks, fua } => RawIo::Trim { lba, blocks, fua },
            Io::Zero { lba, blocks, deallocate, fua } => RawIo::Zero { lba, blocks, deallocate, fua },
        }
    }

    /// # Safety
    /// The buffer must still be the parked owner's, untouched by it until the returned `Io` is dropped.
    unsafe fn io<'a>(&self) -> Io<'a> {
        match *self {
            // SAFETY: by the caller's contract (see `unsafe impl Send for Pending`).
            RawIo::Read { lba, out, len } => Io::Read { lba, out: unsafe { std::slice::from_raw_parts_mut(out, len) } },
            RawIo::Write { lba, data, len, fua } => Io::Write { lba, data: unsafe { std::slice::from_raw_parts(data, len) }, fua },
            RawIo::Flush => Io::Flush,
            RawIo::Trim { lba, blocks, fua } => Io::Trim { lba, blocks, fua },
            RawIo::Zero { lba, blocks, deallocate, fua } => Io::Zero { lba, blocks, deallocate, fua },
        }
    }
}

/// The requests in the device, by request number: numbers are given out in order and a request leaves once its
/// last command is reaped, so a queue from the oldest request still there, with no hashing per request.
#[derive(Debug, Default)]
pub(super) struct Requests {
    /// Request `first + i` at `q[i]` (None: it has left).
    q: VecDeque<Option<InDevice>>,
    first: u64,
}

impl Requests {
    /// Request `n` (the next number given out: `State::next_request`) entered the device.
    pub(super) fn insert(&mut self, n: u64, r: InDevice) {
        if self.q.is_empty() {
            self.first = n;
        }
        debug_assert!(n >= self.first + self.q.len() as u64, "requests enter in order");
        // A number given out without entering (a request with no command, or one whose submission failed) stays
        // empty.
        while self.first + (self.q.len() as u64) < n {
            self.q.push_back(None);
        }
        self.q.push_back(Some(r));
    }

    /// A command of request `n` completed at `at`: the request, once it was its last (an unknown number: None).
    pub(super) fn command_done(&mut self, n: u64, at: Time) -> Option<InDevice> {
        let i = usize::try_from(n.checked_sub(self.first)?).ok()?;
        let slot = self.q.get_mut(i)?;
        let r = slot.as_mut()?;
        r.left -= 1;
        r.done = r.done.max(at);
        if r.left > 0 {
            return None;
        }
        let r = slot.take();
        while self.q.front().is_some_and(Option::is_none) {
            self.q.pop_front();
            self.first += 1;
        }
        r
    }
}

impl Conn {
    /// Its request `r` completed: its figures, and a slot (stamped with the wall-clock instant `now`) for the
    /// reaction to it.
    pub(super) fn request_done(&mut self, r: InDevice, now: Instant) {
        self.figures.record(r.submitted, r.done);
        self.in_device -= 1;
        self.slots.push_back(Slot { at: r.done, opened: now });
    }
}

impl Shared {
    /// Pace none: serves one request (the module's notes).
    pub(super) fn io_paired(&self, conn: u64, io: Io<'_>) -> Result<Outcome> {
        let mut st = self.lock()?;
        let serial = self.cfg.reaction_window.is_zero();
        let Some(c) = st.conns.get_mut(&conn) else {
            return Err(not_open(conn));
        };
        if c.owed == 0 {
            return self.io_new(st, conn, io);
        }
        c.owed -= 1;
        if let Some(slot) = c.slots.pop_front() {
            let qid = c.qid;
            let at = if serial { slot.at } else { slot.at.max(st.dev().loop_clock()) };
            let outcome = self.submit_on(&mut st, conn, qid, at, io);
            self.replied(&mut st, conn, &outcome);
            if !serial {
                self.advance(&mut st);
            }
            self.release(st);
            return outcome;
        }
        self.io_queue(st, conn, io)
    }

    /// `io_paired` of a new request (none owed: the client deepened its queue): submitted where the clock is; its
    /// reply waits for the rest of its burst. Apart from the steady state's path (cold: its code stays out of the
    /// lines a reaction's request runs through).
    #[cold]
    #[inline(never)]
    fn io_new<'a>(&'a self, mut st: MutexGuard<'a, State>, conn: u64, io: Io<'_>) -> Result<Outcome> {
        let serial = self.cfg.reaction_window.is_zero();
        let Some(c) = st.conns.get_mut(&conn) else {
            return Err(not_open(conn));
        };
        if c.released == c.burst {
            c.burst += 1;
        }
        let b = c.burst;
        c.last_new = Instant::now();
        c.held += 1;
        self.burst.notify_all();
        let at = st.dev().now().max(if serial { Time::ZERO } else { st.dev().loop_clock() });
        let outcome = self.submit_at(&mut st, conn, at, io);
        if !serial {
            self.advance(&mut st);
        }
        let mut st = self.hold_for_burst(st, conn, b)?;
        st.pacing.held_for_burst += 1;
        if let Some(c) = st.conns.get_mut(&conn) {
            c.held -= 1;
        }
        self.replied(&mut st, conn, &outcome);
        self.release(st);
        outcome
    }

    /// `io_paired` of a reaction that finds no completion of its connection to react to yet: it waits for the loop
    /// to reach one (cold, as `io_new`).
    #[cold]
    #[inline(never)]
    fn io_queue<'a>(&'a self, mut st: MutexGuard<'a, State>, conn: u64, io: Io<'_>) -> Result<Outcome> {
        let Some(c) = st.conns.get_mut(&conn) else {
            return Err(not_open(conn));
        };
        let parker = Arc::new(Parker { thread: std::thread::current(), outcome: Mutex::new(None) });
        c.queued.push_back(Pending { io: RawIo::new(io), parker: Arc::clone(&parker) });
        st.queued += 1;
        st.pacing.queued_reactions += 1;
        self.advance(&mut st);
        self.wait_for_submission(st, &parker)
    }

    /// Submits a request of `conn` at virtual time `at` (serial: then runs the loop to its completion); its outcome
    /// as the reply gives it (pace none: `done` is the submission's time, the loop not having reached its
    /// completion; serial: the completion's).
    fn submit_at(&self, st: &mut State, conn: u64, at: Time, io: Io<'_>) -> Result<Outcome> {
        let qid = st.conns.get(&conn).map(|c| c.qid).ok_or_else(|| not_open(conn))?;
        self.submit_on(st, conn, qid, at, io)
    }

    /// `submit_at` where the caller has looked the connection's queue up (the steady state: one look-up fewer).
    fn submit_on(&self, st: &mut State, conn: u64, qid: u16, at: Time, io: Io<'_>) -> Result<Outcome> {
        st.dev().advance_to(at);
        let submitted = st.dev().now();
        let request = st.next_request;
        st.next_request += 1;
        let sub = submit(st, qid, conn, request, io)?;
        count(st, sub.kind, sub.bytes, sub.status);
        if let Some(c) = st.conns.get_mut(&conn) {
            c.in_device += 1;
        }
        let r = InDevice { left: sub.tickets.clone().count() as u32, done: submitted, submitted };
        if sub.tickets.is_empty() {
            if let Some(c) = st.conns.get_mut(&conn) {
                c.request_done(r, Instant::now());
            }
            return Ok(Outcome { status: sub.status, done: submitted });
        }
        st.requests.insert(request, r);
        if self.cfg.reaction_window.is_zero() {
            let taken = collect_at_once(st, sub.tickets)?;
            let done = taken.iter().map(|c| c.1).max().unwrap_or(submitted);
            return Ok(Outcome { status: sub.status, done });
        }
        Ok(Outcome { status: sub.status, done: submitted })
    }

    /// A reply of `conn` goes out: the client owes a reaction to it.
    fn replied(&self, st: &mut State, conn: u64, outcome: &Result<Outcome>) {
        st.pacing.replies += 1;
        if let (Some(c), Ok(_)) = (st.conns.get_mut(&conn), outcome) {
            c.owed += 1;
            c.distrust = c.distrust.saturating_sub(1);
        }
    }

    /// Runs the event loop as far as no owed reaction can still precede it: queued reactions take the slots as the
    /// loop opens them, and are submitted there; their threads are woken once the lock is released.
    fn advance(&self, st: &mut State) {
        let now = Instant::now();
        // Nothing in the loop queues a reaction: with none queued now, none will be (the steady state). Counted, so
        // that the steady state walks no connection for it.
        debug_assert_eq!(st.queued, st.conns.values().map(|c| c.queued.len()).sum::<usize>(), "reactions queued");
        let queued = st.queued > 0;
        loop {
            if queued {
                self.submit_queued(st);
            }
            let limit = self.hold_limit(st, now);
            if reap_one(st, limit, now).is_none() {
                return;
            }
        }
    }

    /// Submits each queued reaction that has a slot to take, and those that never will (more reactions queued than
    /// the connection has requests in the device: the client deepened its queue), at the clock.
    fn submit_queued(&self, st: &mut State) {
        let conns: Vec<u64> = st.conns.iter().filter(|(_, c)| !c.queued.is_empty()).map(|(id, _)| *id).collect();
        for id in conns {
            while let Some(c) = st.conns.get_mut(&id) {
                let at = match c.slots.front() {
                    Some(s) if !c.queued.is_empty() => Some(s.at),
                    _ if c.queued.len() > c.in_device => None,
                    _ => break,
                };
                if at.is_some() {
                    c.slots.pop_front();
                }
                let p = c.queued.pop_front().expect("not empty");
                st.queued -= 1;
                let clock = st.dev().loop_clock();
                let at = at.unwrap_or_else(|| st.dev().now()).max(clock);
                // SAFETY: `p`'s owner is parked in `wait_for_submission` until its outcome is set below.
                let outcome = self.submit_at(st, id, at, unsafe { p.io.io() });
                self.replied(st, id, &outcome);
                *p.parker.outcome.lock().unwrap_or_else(|e| e.into_inner()) = Some(outcome);
                st.to_wake.push(p.parker.thread.clone());
            }
        }
    }

    /// The virtual time the loop must not reach: the `reaction_lag`-th earliest slot that a reaction the client owes
    /// may still take (a connection's first `owed` + held-for-burst slots, opened less than `reaction_window` ago;
    /// one older marks the connection as answering only batches, `DISTRUST_REPLIES`).
    fn hold_limit(&self, st: &mut State, now: Instant) -> Time {
        let (window, lag) = (self.cfg.reaction_window, self.cfg.reaction_lag.max(1) as usize);
        if lag == 1 {
            return Self::earliest_owed_slot(st, now, window);
        }
        let mut holding: Vec<Time> = Vec::new();
        for c in st.conns.values_mut() {
            let owed = (c.owed + u64::from(c.held)) as usize;
            if c.distrust > 0 || owed == 0 {
                continue;
            }
            let mine = holding.len();
            for s in c.slots.iter().take(owed) {
                if now.saturating_duration_since(s.opened) >= window {
                    c.distrust = DISTRUST_REPLIES;
                    holding.truncate(mine);
                    break;
                }
                holding.push(s.at);
            }
        }
        if holding.len() < lag {
            return Time::MAX;
        }
        *holding.select_nth_unstable(lag - 1).1
    }

    /// `hold_limit` at lag 1 (the default), with no list: a connection's slots open in the loop's order (their
    /// times and the instants they opened never decrease), so its earliest owed slot is its first, and if any of its
    /// owed slots is older than the window, the first is.
    fn earliest_owed_slot(st: &mut State, now: Instant, window: Duration) -> Time {
        let mut limit = Time::MAX;
        for c in st.conns.values_mut() {
            if c.distrust > 0 || c.owed + u64::from(c.held) == 0 {
                continue;
            }
            let Some(first) = c.slots.front() else { continue };
            if now.saturating_duration_since(first.opened) >= window {
                c.distrust = DISTRUST_REPLIES;
            } else {
                limit = limit.min(first.at);
            }
        }
        limit
    }

    /// How long until a slot that holds the loop stops holding it (None: none holds it).
    fn hold_expiry(&self, st: &State, now: Instant) -> Option<Duration> {
        let window = self.cfg.reaction_window;
        st.conns
            .values()
            .filter(|c| c.distrust == 0)
            .flat_map(|c| c.slots.iter().take((c.owed + u64::from(c.held)) as usize))
            .map(|s| (s.opened + window).saturating_duration_since(now))
            .min()
    }

    /// Waits (the device unlocked) until a queued reaction has been submitted. One waiting thread at a time (the
    /// driver) sleeps only until the loop's hold expires, then runs the loop on; the others sleep until woken.
    fn wait_for_submission<'a>(&'a self, mut st: MutexGuard<'a, State>, parker: &Parker) -> Result<Outcome> {
        let me = std::thread::current();
        loop {
            if let Some(outcome) = parker.take() {
                if st.driver.as_ref().is_some_and(|d| d.id() == me.id()) {
                    st.driver = None;
                    // Another queued thread takes over the wait for the hold's expiry.
                    if let Some(t) = st.conns.values().flat_map(|c| c.queued.front()).map(|p| p.parker.thread.clone()).next() {
                        st.to_wake.push(t);
                    }
                }
                self.release(st);
                return outcome;
            }
            let expiry = if st.driver.is_none() || st.driver.as_ref().is_some_and(|d| d.id() == me.id()) {
                self.hold_expiry(&st, Instant::now())
            } else {
                None
            };
            if expiry.is_some() {
                st.driver = Some(me.clone());
            }
            self.release(st);
            match expiry {
                Some(d) => std::thread::park_timeout(d + Duration::from_micros(1)),
                None => std::thread::park(),
            }
            if parker.outcome.lock().unwrap_or_else(|e| e.into_inner()).is_some() && expiry.is_none() {
                return parker.take().expect("set");
            }
            st = self.state.lock().map_err(poisoned)?;
            if st.dev.is_some() {
                self.advance(&mut st);
            }
        }
    }

    /// Pace none, a connection closing: its slots hold the loop no more, and the loop runs on to its requests'
    /// completions (as far as other connections allow); the clock moves to the last of them.
    pub(super) fn finish_connection(&self, st: &mut State, conn: u64) {
        let Some(c) = st.conns.get_mut(&conn) else { return };
        c.owed = 0;
        c.distrust = DISTRUST_REPLIES;
        if !self.cfg.reaction_window.is_zero() {
            self.advance(st);
        }
        let Some(c) = st.conns.get(&conn) else { return };
        if c.in_device == 0 {
            if let Some(last) = c.slots.iter().map(|s| s.at).max() {
                st.dev().advance_to(last);
            }
        }
    }

    /// The device closed (`conn` None) or a connection did: their queued reactions fail (their threads woken once
    /// the lock is released), so that no buffer of theirs stays behind.
    pub(super) fn fail_queued(&self, st: &mut State, conn: Option<u64>) {
        let why = if conn.is_some() { "the connection closed" } else { "the device is closed" };
        for (_, c) in st.conns.iter_mut().filter(|(id, _)| conn.is_none_or(|k| k == **id)) {
            st.queued -= c.queued.len();
            for p in c.queued.drain(..) {
                *p.parker.outcome.lock().unwrap_or_else(|e| e.into_inner()) = Some(Err(SimError::InvalidArgument(why.into())));
                st.to_wake.push(p.parker.thread.clone());
            }
        }
    }
}

#[cfg(test)]
mod requests_tests {
    use super::*;

    fn r(left: u32) -> InDevice {
        InDevice { left, done: Time::ZERO, submitted: Time::ZERO }
    }

    /// Requests leave in any order, each once its last command is reaped, at its latest command's completion;
    /// numbers given out without entering (no command, a failed submission) and unknown numbers change nothing.
    #[test]
    fn requests_leave_in_any_order_at_their_last_command() {
        let mut q = Requests::default();
        q.insert(5, r(1));
        q.insert(6, r(2));
        q.insert(9, r(1)); // 7 and 8 never entered
        assert!(q.command_done(7, Time::from_ns(1)).is_none());
        assert!(q.command_done(4, Time::from_ns(1)).is_none());
        assert!(q.command_done(6, Time::from_ns(30)).is_none()); // one of its two commands
        assert_eq!(q.command_done(9, Time::from_ns(20)).map(|r| r.done), Some(Time::from_ns(20)));
        assert!(q.command_done(9, Time::from_ns(21)).is_none()); // already left
        assert_eq!(q.q.len(), 5); // 5 still there: nothing before it left
        assert_eq!(q.command_done(5, Time::from_ns(10)).map(|r| r.done), Some(Time::from_ns(10)));
        assert_eq!((q.first, q.q.len()), (6, 4));
        assert_eq!(q.command_done(6, Time::from_ns(25)).map(|r| r.done), Some(Time::from_ns(30)));
        assert!(q.q.is_empty());
        q.insert(12, r(1)); // empty again: starts at the next number
        assert_eq!(q.command_done(12, Time::from_ns(40)).map(|r| r.done), Some(Time::from_ns(40)));
        assert!(q.q.is_empty());
    }
}
