//! The device shared by the concurrent requests of unmodified clients (the NBD export's plugin calls this from
//! nbdkit's worker threads): each request becomes its NVMe commands, submitted to the device's queue while other
//! requests are in flight, so the device sees the clients' queue depth. One lock guards the device; a request holds
//! it only to submit its commands and learn their completion times (the model books a command's work when it is
//! submitted), never while it waits.
//!
//! Two paces:
//!
//! - [`Pace::None`], as fast as the simulator runs; arrival order sets virtual time. Each connection is a
//!   closed-loop client: a request that follows a reply (a reaction) takes the earliest completion of the
//!   connection that no reaction has taken yet and is submitted at its virtual time; one that follows none is new
//!   (the client deepened its queue), submitted at the current clock, its reply held until the burst it belongs to
//!   has arrived (no new request on its connection for `burst_window`, or every worker thread of the connection
//!   holding one). A command's data and status are settled when it is submitted, so a reply goes out as soon as its
//!   request is in the device, and the loop pairs the client's reactions with its completions later, never running
//!   past a completion whose reaction the client still owes (for `reaction_window` at most; `reaction_lag` of
//!   them: 1, the default, exact). A client at queue depth N has its reactions on their way before the loop reaches
//!   the completions they take, so the device sees depth N in virtual time with no round trip to the client per
//!   completion (`pipeline`). With
//!   `reaction_window` zero (`--serial`) a request runs the loop to its own completion before its reply, so the
//!   reactions to earlier completions arrive in the loop's past (`late_submissions`) and requests in flight are
//!   served one after the other in virtual time. The depth the device served at is measured in virtual time
//!   ([`DepthMeter`]).
//! - [`Pace::Realtime`], as FEMU does: the virtual clock follows the wall clock, each request is submitted at its
//!   arrival's wall time, and its reply is held until the wall clock reaches its modelled completion; one that the
//!   simulator could not deliver by then (`late_threshold` or more after) is counted late.

use nearflash_core::device::Report;
use nearflash_core::engine::Time;
use nearflash_core::error::{Result, SimError};
use nearflash_core::nvme::{encode_dsm_ranges, opcode, DataBuf, Sqe, Status};
use nearflash_core::Device;
use serde::Serialize;
use std::cmp::Reverse;
use nearflash_core::engine::IntMap;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub mod cold;
mod depth;
mod pipeline;
pub use depth::DepthMeter;
use pipeline::{Pending, Slot};

/// How virtual time relates to the wall clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Pace {
    None,
    Realtime,
}

impl std::str::FromStr for Pace {
    type Err = SimError;
    fn from_str(s: &str) -> Result<Pace> {
        match s {
            "none" => Ok(Pace::None),
            "realtime" => Ok(Pace::Realtime),
            _ => Err(SimError::Config(format!("pace {s:?}: none or realtime"))),
        }
    }
}

/// Choices of a shared device.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub pace: Pace,
    /// Pace none: how long a new request's reply waits for the rest of its burst.
    pub burst_window: Duration,
    /// Worker threads per connection (nbdkit's `--threads`): a connection never holds more replies than this.
    pub threads: u32,
    /// Pace none: how long the event loop waits, at a completion whose reaction the client owes, for that reaction
    /// before it goes on without it (a reaction that comes later is submitted where the loop then is; default
    /// 100 ms). Zero (`nearflash serve --serial`): it never waits, and each request runs the loop to its own
    /// completion before its reply, so that requests in flight are served one after the other in virtual time.
    pub reaction_window: Duration,
    /// Pace none: how many completions may await their reactions before the loop holds (1, the default: exact;
    /// more: the reactions to the earlier ones submitted where the loop then is, up to that many completions
    /// later, so the depth seen falls: 31.9 / 31.1 / 29.1 / 25.0 of 32 at 1 / 2 / 4 / 8, `serve_lag_curve`). With
    /// replies sent at submission the client's reactions are on their way before the loop needs them, so more buys
    /// no speed.
    pub reaction_lag: u32,
    /// Realtime: a reply delivered this much or more after its modelled completion is late (FEMU: 20 us).
    pub late_threshold: Duration,
    /// I/O queues to spread connections over (at most the device's).
    pub max_queues: u16,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            pace: Pace::None,
            burst_window: Duration::from_millis(10),
            threads: 64,
            reaction_window: Duration::from_millis(100),
            reaction_lag: 1,
            late_threshold: Duration::from_micros(20),
            max_queues: 8,
        }
    }
}

/// A client's request, in device blocks.
#[derive(Debug)]
pub enum Io<'a> {
    Read { lba: u64, out: &'a mut [u8] },
    Write { lba: u64, data: &'a [u8], fua: bool },
    Flush,
    Trim { lba: u64, blocks: u64, fua: bool },
    /// Write Zeroes; `deallocate`: the device may trim instead.
    Zero { lba: u64, blocks: u64, deallocate: bool, fua: bool },
}

/// Requests served, by kind (the status file's `requests`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Counts {
    pub connections: u64,
    pub open_connections: u64,
    pub read: u64,
    pub write: u64,
    pub fua_writes: u64,
    pub flush: u64,
    pub trim: u64,
    pub zero: u64,
    pub errors: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

/// The queue depth the device saw, and how well real time was kept.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Pacing {
    pub pace: Option<Pace>,
    /// The queue depth the device served at: the clients' commands in the device, time-weighted over the virtual
    /// time (`busy_ns`) with at least one there, each from the time it could start to its completion
    /// ([`DepthMeter`]).
    pub mean_queue_depth: f64,
    pub busy_ns: u64,
    /// Commands submitted in the event loop's past, which started at the loop's clock, after the client sent them
    /// (the device report's `sched.late_submissions`).
    pub late_submissions: u64,
    /// The commands in flight (submitted, not completed) when each command was submitted, itself included: the
    /// depth the clients asked for, whether or not the device served those commands together; averaged over
    /// `commands`, and the most.
    pub mean_in_flight_at_submission: f64,
    pub max_in_flight_at_submission: u64,
    pub commands: u64,
    /// Requests whose reply waited for the rest of their burst (pace none).
    pub held_for_burst: u64,
    /// Pace none: reactions that arrived before the loop reached a completion for them to take, and waited (the
    /// loop held short of their connection's completions by another connection's owed reaction).
    pub queued_reactions: u64,
    /// Realtime: replies delivered `late_threshold` or more after their modelled completion, and the worst delay.
    pub late: u64,
    pub late_threshold_us: f64,
    pub max_late_us: f64,
    /// Realtime: mean delay of all replies past their modelled completion.
    pub mean_late_us: f64,
    pub replies: u64,
    /// The connection that closed last, as the device saw it.
    pub last_connection: Option<ConnFigures>,
}

struct Conn {
    qid: u16,
    /// Pace none: completions of its requests that no reaction has taken yet (in completion order), its reactions
    /// waiting for a completion to take, the reactions the client owes (replies sent, less reactions arrived), and
    /// its requests in the device (`pipeline`).
    slots: VecDeque<Slot>,
    queued: VecDeque<Pending>,
    owed: u64,
    in_device: usize,
    /// Pace none: replies still to send before its open slots hold the loop again, after one went unanswered for
    /// `reaction_window` ([`DISTRUST_REPLIES`]).
    distrust: u32,
    /// The open burst of new requests: its number, its requests still in the plugin, and when its last request
    /// arrived. Bursts released so far: `released`.
    burst: u64,
    held: u32,
    last_new: Instant,
    released: u64,
    figures: ConnFigures,
}

/// Pace none: a connection that left a reply unanswered for `reaction_window` is taken for a client that answers a
/// batch of replies only once it has them all, for this many replies: its sent replies hold the loop no longer
/// (else each would hold it for the whole window). A client that answers each reply but was slow once is served
/// inexactly (its reactions submitted where the loop is) for as long.
const DISTRUST_REPLIES: u32 = 256;

/// One connection's requests as the device saw them (virtual time): a client's run, for comparison with what the
/// client measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ConnFigures {
    pub requests: u64,
    /// From its first request's submission to its last request's completion.
    pub first_submit_ns: u64,
    pub last_done_ns: u64,
    /// Mean of each request's time from submission to its last command's completion.
    pub mean_latency_us: f64,
    pub iops: f64,
    /// Its commands in the device, time-weighted from its first submission to its last completion (each command
    /// from the time it could start: `Pacing::mean_queue_depth`).
    pub mean_queue_depth: f64,
    #[serde(skip)]
    latency_sum_ns: u128,
    /// The commands' stays so far, and as they were at the last request's completion (what the depth is of).
    #[serde(skip)]
    stay_ns: u128,
    #[serde(skip)]
    stay_at_record_ns: u128,
}

impl ConnFigures {
    /// A request completed: only sums here (once per request, under the device's lock); the means are worked out
    /// when the figures are read (`finished`).
    fn record(&mut self, submitted: Time, done: Time) {
        if self.requests == 0 {
            self.first_submit_ns = submitted.as_ns();
        }
        self.requests += 1;
        self.last_done_ns = self.last_done_ns.max(done.as_ns());
        self.latency_sum_ns += u128::from(done - submitted);
        self.stay_at_record_ns = self.stay_ns;
    }

    /// The figures with their means, as of the last request's completion.
    fn finished(mut self) -> ConnFigures {
        if self.requests > 0 {
            self.mean_latency_us = self.latency_sum_ns as f64 / self.requests as f64 / 1e3;
            let span = (self.last_done_ns - self.first_submit_ns).max(1) as f64;
            self.iops = self.requests as f64 / span * 1e9;
            self.mean_queue_depth = self.stay_at_record_ns as f64 / span;
        }
        self
    }
}

struct State {
    /// `None` once closed.
    dev: Option<Device>,
    conns: IntMap<u64, Conn>,
    /// Pace none: reactions queued, over all connections (`Conn::queued`).
    queued: usize,
    /// I/O queues created so far and how many connections use each.
    queues: Vec<(u16, u32)>,
    counts: Counts,
    /// Completion times of commands reaped (for the commands in flight at each submission).
    in_device: BinaryHeap<Reverse<Time>>,
    in_flight_sum: u128,
    in_flight_n: u64,
    depth: DepthMeter,
    pacing: Pacing,
    /// Commands submitted and not yet reaped, by (queue, command id); the completions reaped, by ticket, until their
    /// request takes them (status, time). Whichever waiting request runs the event loop reaps for all.
    tickets: TicketTable,
    next_ticket: u64,
    done: IntMap<u64, (Status, Time)>,
    /// Whether completions are kept in `done` for their requests to take (all but pace none's pipeline, where a
    /// request's reply does not wait for its completion).
    keep_done: bool,
    /// Pace none: requests with commands not yet reaped.
    requests: pipeline::Requests,
    next_request: u64,
    /// The served queues (their ids, for the event loop's look-ups).
    qids: Vec<u16>,
    /// The thread that runs the event loop while the others wait (realtime: with the wall clock; pace none: to let
    /// it run past a reply whose reaction did not come), and the threads waiting, by ticket.
    driver: Option<std::thread::Thread>,
    waiters: IntMap<u64, std::thread::Thread>,
    /// Threads whose completions were reaped, woken once the device's lock is released (woken while it is held,
    /// each would first wait for the lock: a second sleep and wake-up per reply).
    to_wake: Vec<std::thread::Thread>,
}

impl State {
    /// The device (`Shared::lock` has checked that it is open).
    fn dev(&mut self) -> &mut Device {
        self.dev.as_mut().expect("the device is open")
    }
}

/// A device served to concurrent clients.
pub struct Shared {
    state: Mutex<State>,
    burst: Condvar,
    cfg: ServeConfig,
    /// Realtime: how the virtual clock follows the wall clock.
    clock: RealClock,
    /// Realtime: how late replies were (apart from the device's lock: a reply never waits for it once woken).
    lateness: Mutex<Lateness>,
    next_conn: std::sync::atomic::AtomicU64,
}

/// The virtual clock in real time: virtual time `virt0` at wall time `wall0`, then one virtual ns per wall ns.
#[derive(Debug, Clone, Copy)]
pub struct RealClock {
    pub wall0: Instant,
    pub virt0: Time,
}

impl RealClock {
    /// The virtual time of wall time `t` (before `wall0`: `virt0`).
    pub fn virt(&self, t: Instant) -> Time {
        self.virt0 + t.saturating_duration_since(self.wall0).as_nanos() as u64
    }

    /// The wall time of virtual time `v` (a reply's release for a completion at `v`; before `virt0`: `wall0`).
    pub fn wall(&self, v: Time) -> Instant {
        self.wall0 + Duration::from_nanos(v.saturating_since(self.virt0))
    }
}

/// Realtime: replies delivered past their modelled completion.
#[derive(Debug, Clone, Default)]
struct Lateness {
    replies: u64,
    late: u64,
    max_ns: u128,
    sum_ns: u128,
}

impl Lateness {
    fn record(&mut self, late: Duration, threshold: Duration) {
        self.replies += 1;
        self.late += u64::from(late >= threshold);
        self.max_ns = self.max_ns.max(late.as_nanos());
        self.sum_ns += late.as_nanos();
    }

    /// Into the status file's figures.
    fn report(&self, p: &mut Pacing) {
        p.replies += self.replies;
        p.late = self.late;
        p.max_late_us = self.max_ns as f64 / 1e3;
        p.mean_late_us = if self.replies == 0 { 0.0 } else { self.sum_ns as f64 / self.replies as f64 / 1e3 };
    }
}

/// What a request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub status: Status,
    /// Virtual time of its (last) completion.
    pub done: Time,
}

fn poisoned<T>(_: T) -> SimError {
    SimError::Fault("a request panicked while it held the device".into())
}

impl Shared {
    pub fn new(dev: Device, cfg: ServeConfig) -> Result<Shared> {
        if cfg.threads == 0 {
            return Err(SimError::Config("threads must be at least 1".into()));
        }
        let max_queues = (dev.config().nvme.max_queues.0.min(u64::from(u16::MAX)) as u16).min(cfg.max_queues).max(1);
        let virt0 = dev.now();
        let mut pacing = Pacing { pace: Some(cfg.pace), ..Pacing::default() };
        pacing.late_threshold_us = cfg.late_threshold.as_secs_f64() * 1e6;
        Ok(Shared {
            state: Mutex::new(State {
                dev: Some(dev),
                conns: IntMap::default(),
                queued: 0,
                queues: Vec::new(),
                counts: Counts::default(),
                in_device: BinaryHeap::new(),
                in_flight_sum: 0,
                in_flight_n: 0,
                depth: DepthMeter::default(),
                pacing,
                tickets: TicketTable::default(),
                next_ticket: 0,
                done: IntMap::default(),
                keep_done: cfg.pace == Pace::Realtime || cfg.reaction_window.is_zero(),
                requests: pipeline::Requests::default(),
                next_request: 0,
                qids: Vec::new(),
                driver: None,
                waiters: IntMap::default(),
                to_wake: Vec::new(),
            }),
            burst: Condvar::new(),
            cfg: ServeConfig { max_queues, ..cfg },
            clock: RealClock { wall0: Instant::now(), virt0 },
            lateness: Mutex::new(Lateness::default()),
            next_conn: AtomicU64::new(1),
        })
    }

    fn lock(&self) -> Result<MutexGuard<'_, State>> {
        let st = self.state.lock().map_err(poisoned)?;
        if st.dev.is_none() {
            return Err(SimError::InvalidArgument("the device is closed".into()));
        }
        Ok(st)
    }

    /// A new connection: its id, and the queue it submits to (created on first use, shared beyond
    /// `max_queues`).
    pub fn connect(&self) -> Result<u64> {
        let mut st = self.lock()?;
        let id = self.next_conn.fetch_add(1, Ordering::Relaxed);
        let qid = match st.queues.iter().position(|&(_, users)| users == 0) {
            Some(i) => i,
            None if st.queues.len() < usize::from(self.cfg.max_queues) => {
                let qid = st.queues.len() as u16 + 1;
                let dev = st.dev();
                let depth = u32::try_from(dev.config().nvme.max_queue_depth.0).unwrap_or(u32::MAX).max(2);
                if dev.has_queue(qid) {
                    dev.delete_queue_pair(qid)?;
                }
                dev.create_queue_pair(qid, depth)?;
                st.queues.push((qid, 0));
                st.qids.push(qid);
                st.queues.len() - 1
            }
            None => (id % st.queues.len() as u64) as usize,
        };
        st.queues[qid].1 += 1;
        let qid = st.queues[qid].0;
        st.conns.insert(
            id,
            Conn {
                qid,
                slots: VecDeque::new(),
                queued: VecDeque::new(),
                owed: 0,
                in_device: 0,
                distrust: 0,
                burst: 0,
                held: 0,
                last_new: Instant::now(),
                released: 0,
                figures: ConnFigures::default(),
            },
        );
        st.counts.connections += 1;
        st.counts.open_connections += 1;
        Ok(id)
    }

    /// The connection is gone: its client saw every reply, so (pace none) the loop runs on to the completions of its
    /// requests still in the device, as far as other connections' reactions allow, and the clock moves to the last.
    pub fn disconnect(&self, conn: u64) {
        let Ok(mut st) = self.state.lock() else { return };
        if self.cfg.pace == Pace::None && st.dev.is_some() {
            self.finish_connection(&mut st, conn);
        }
        self.fail_queued(&mut st, Some(conn));
        if let Some(c) = st.conns.remove(&conn) {
            if let Some(q) = st.queues.iter_mut().find(|q| q.0 == c.qid) {
                q.1 -= 1;
            }
            st.counts.open_connections -= 1;
            if c.figures.requests > 0 {
                st.pacing.last_connection = Some(c.figures.finished());
            }
        }
        self.release(st);
    }

    /// Serves one request of connection `conn`; returns when its reply may be sent.
    pub fn io(&self, conn: u64, io: Io<'_>) -> Result<Outcome> {
        if self.cfg.pace == Pace::None {
            return self.io_paired(conn, io);
        }
        let mut st = self.lock()?;
        let Some(c) = st.conns.get(&conn) else {
            return Err(not_open(conn));
        };
        let qid = c.qid;
        // Once it holds the device: the loop may have been run up to the present while it waited for the lock.
        let t = self.clock.virt(Instant::now());
        st.dev().advance_to(t);
        let submitted = st.dev().now();
        let request = st.next_request;
        st.next_request += 1;
        let sub = submit(&mut st, qid, conn, request, io)?;
        if let Some(d) = &st.driver {
            d.unpark(); // its next event may now be earlier
        }
        let (mut st, taken) = self.collect(st, sub.tickets, |s, st| {
            let present = s.clock.virt(Instant::now());
            let now = Instant::now();
            while reap_one(st, present.saturating_add_ns(1), now).is_some() {}
            st.dev().next_event_time().map(|e| s.clock.wall(e).saturating_duration_since(Instant::now()))
        })?;
        let status = taken.iter().map(|c| c.0).find(|s| !s.is_success()).unwrap_or(Status::SUCCESS);
        let done = taken.iter().map(|c| c.1).max().unwrap_or(submitted);
        count(&mut st, sub.kind, sub.bytes, status);
        if let Some(c) = st.conns.get_mut(&conn) {
            c.figures.record(submitted, done);
        }
        self.release(st);
        let target = self.clock.wall(done);
        wait_until(target);
        let late = Instant::now().saturating_duration_since(target);
        self.lateness.lock().map_err(poisoned)?.record(late, self.cfg.late_threshold);
        Ok(Outcome { status, done })
    }

    /// Realtime: waits (the device unlocked) until the completions of `tickets` are known. One waiting thread at a
    /// time runs the event loop with the wall clock (the driver): `reap` reaps what is certain, has the threads of the
    /// requests it completes woken (once the lock is released), and says how long the driver may sleep (None: until
    /// woken); a request submitted meanwhile wakes the driver. A driver whose own completions are known hands its part
    /// to the oldest waiting request's thread.
    fn collect<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        tickets: std::ops::Range<u64>,
        reap: impl Fn(&Self, &mut State) -> Option<Duration>,
    ) -> Result<(MutexGuard<'a, State>, Vec<Taken>)> {
        let me = std::thread::current();
        let known = |st: &State| tickets.clone().all(|t| st.done.contains_key(&t));
        loop {
            let sleep = reap(self, &mut st);
            let is_driver = st.driver.as_ref().is_some_and(|d| d.id() == me.id());
            if known(&st) {
                for t in tickets.clone() {
                    st.waiters.remove(&t);
                }
                if is_driver {
                    st.driver = None;
                    // Realtime: to the oldest request waiting: the likeliest to complete next, so that its reply,
                    // learnt by its own thread as the driver, needs no second wake-up.
                    if let Some((_, next)) = st.waiters.iter().min_by_key(|(t, _)| **t) {
                        let next = next.clone();
                        st.to_wake.push(next);
                    }
                }
                let taken = tickets.map(|t| st.done.remove(&t).expect("known")).collect();
                return Ok((st, taken));
            }
            for t in tickets.clone() {
                st.waiters.entry(t).or_insert_with(|| me.clone());
            }
            let oldest = st.waiters.keys().min().is_none_or(|t| tickets.contains(t));
            let wake = if is_driver || st.driver.is_none() && oldest {
                st.driver = Some(me.clone());
                sleep
            } else {
                None
            };
            self.release(st);
            fine_timer_slack();
            std::thread::park_timeout(wake.unwrap_or(Duration::from_millis(10)));
            st = self.lock()?;
        }
    }

    /// Unlocks the device, then wakes the threads whose completions were reaped.
    fn release(&self, mut st: MutexGuard<'_, State>) {
        let woken = std::mem::take(&mut st.to_wake);
        drop(st);
        for t in woken {
            t.unpark();
        }
    }

    /// Waits (the device unlocked) until burst `b` of the connection is released: no new request for
    /// `burst_window`, or every worker thread of the connection holding one. The thread that sees it first releases
    /// the whole burst: its requests' replies go together, before any of their reactions arrive.
    fn hold_for_burst<'a>(&'a self, mut st: MutexGuard<'a, State>, conn: u64, b: u64) -> Result<MutexGuard<'a, State>> {
        loop {
            let closed = st.dev.is_none();
            let Some(c) = st.conns.get_mut(&conn) else { return Ok(st) };
            if c.released >= b {
                return Ok(st);
            }
            let quiet = c.last_new.elapsed();
            if quiet >= self.cfg.burst_window || c.held >= self.cfg.threads || closed {
                c.released = c.burst;
                self.burst.notify_all();
                return Ok(st);
            }
            st = self.burst.wait_timeout(st, self.cfg.burst_window - quiet).map_err(poisoned)?.0;
        }
    }

    /// How virtual time relates to the wall clock here.
    pub fn pace(&self) -> Pace {
        self.cfg.pace
    }

    /// Runs `f` on the device (status reports, shutdown).
    pub fn with_device<T>(&self, f: impl FnOnce(&mut Device) -> T) -> Result<T> {
        let mut st = self.lock()?;
        Ok(f(st.dev()))
    }

    /// The figures of the status file: requests served, pacing, the device's clock and report.
    pub fn snapshot(&self) -> Result<(Counts, Pacing, Time, Report)> {
        let st = self.lock()?;
        let mut p = st.pacing.clone();
        self.lateness.lock().map_err(poisoned)?.report(&mut p);
        p.mean_in_flight_at_submission = if st.in_flight_n == 0 { 0.0 } else { st.in_flight_sum as f64 / st.in_flight_n as f64 };
        p.commands = st.in_flight_n;
        (p.mean_queue_depth, p.busy_ns) = st.depth.mean();
        let dev = st.dev.as_ref().expect("the device is open");
        let report = dev.report();
        p.late_submissions = report.sched.late_submissions;
        Ok((st.counts.clone(), p, dev.now(), report))
    }

    /// Takes the device out (to close it: flush, checkpoint); requests after this fail, held ones are let go.
    pub fn take(&self) -> Option<Device> {
        let mut st = self.state.lock().ok()?;
        let dev = st.dev.take();
        self.fail_queued(&mut st, None);
        self.burst.notify_all();
        self.release(st);
        dev
    }
}

/// Sleeps until `target`: to 100 us before it (the thread's timer slack set to 1 ns first: Linux lets a sleep
/// overshoot by the slack, 50 us by default), then yields until it is reached. Measured on the loaded 2-core machine
/// (docs/nbd.md), this last stretch of yields keeps replies closer to their time than sleeping all the way (a woken
/// thread waits for a CPU: 5 ms reads were 0.28 ms late on average sleeping to the target, 0.18 ms with the yields).
fn wait_until(target: Instant) {
    fine_timer_slack();
    loop {
        let now = Instant::now();
        if now >= target {
            return;
        }
        let left = target - now;
        if left > Duration::from_micros(200) {
            std::thread::sleep(left - Duration::from_micros(100));
        } else {
            std::thread::yield_now();
        }
    }
}

/// Pace none: marks the calling thread, and the threads it creates from now on (Linux threads inherit their
/// creator's policy), as batch work for the kernel's scheduler (elsewhere nothing). The NBD plugin calls it when a
/// connection opens, on the connection's thread, before nbdkit starts the connection's worker threads, so that no
/// request pays for a per-thread check (a thread-local flag read per request was a cache miss each: a library's
/// thread-locals are reached through `__tls_get_addr`). A request's thread woken to send its reply then waits for
/// the waking thread to park or use its time slice instead of taking its CPU at once: the waker parks right after
/// (its own request waits), so preempting it only adds a switch back to it (fio at iodepth 32, `reaction_lag` 4,
/// load 15 on 2 cores: the server's CPU time per request 19.6 us instead of 23, medians of six 3 s runs each).
/// Realtime keeps the default policy: there a woken reply is due.
pub fn batch_scheduling() {
    #[cfg(target_os = "linux")]
    // SAFETY: sched_setscheduler on the calling thread (pid 0) with a valid parameter; SCHED_BATCH needs no
    // privilege and changes only how this thread (and those it creates) is preempted.
    unsafe {
        let param = libc::sched_param { sched_priority: 0 };
        libc::sched_setscheduler(0, libc::SCHED_BATCH, &param);
    }
}

/// Sets this thread's timer slack to 1 ns, once per thread (Linux; elsewhere nothing). Realtime only, on the
/// waiting paths.
fn fine_timer_slack() {
    thread_local!(static DONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) });
    DONE.with(|done| {
        if !done.get() {
            #[cfg(target_os = "linux")]
            // SAFETY: PR_SET_TIMERSLACK takes an integer and changes only this thread's timer slack.
            unsafe {
                libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
            }
            done.set(true);
        }
    });
}

/// What a request was, for the counts.
#[derive(Clone, Copy)]
enum Kind {
    Read,
    Write { fua: bool },
    Flush,
    Trim,
    Zero,
}

/// A command's completion: its status and time.
type Taken = (Status, Time);

/// A request's commands as submitted: what it was, their tickets (consecutive: a request's commands are submitted
/// together under the device's lock, so a range, with nothing allocated per request), and its status (a command's
/// status is decided when it is submitted: the first failure's, else success).
struct Submitted {
    kind: Kind,
    bytes: u64,
    tickets: std::ops::Range<u64>,
    status: Status,
}

/// A command submitted and not yet reaped: its ticket, its request and connection, and the virtual time it could
/// start (the host clock, or the loop's if that was past it).
#[derive(Debug, Clone, Copy)]
struct Ticket {
    ticket: u64,
    request: u64,
    conn: u64,
    start: Time,
}

/// The commands submitted and not yet reaped, by (queue, command id). Command ids are given out in sequence
/// (`Device::next_cid`), so those in flight together sit in neighbouring slots of a small ring indexed by the id's
/// low bits: an insert and a removal touch one slot, with no hashing, and the commands in flight share a few cache
/// lines (a hash map spread them over its table: two cold lines per look-up in the server, where the kernel's socket
/// work evicts them between requests). An id whose slot is taken (a command in flight for `RING` ids or more, or
/// the same id on another queue) goes to a map beside it.
#[derive(Default)]
struct TicketTable {
    ring: Vec<Option<(u16, u16, Ticket)>>,
    overflow: IntMap<(u16, u16), Ticket>,
    in_ring: usize,
}

impl TicketTable {
    const RING: usize = 256;

    fn insert(&mut self, qid: u16, cid: u16, t: Ticket) {
        if self.ring.is_empty() {
            self.ring.resize(Self::RING, None);
        }
        let slot = &mut self.ring[usize::from(cid) % Self::RING];
        match slot {
            None => {
                *slot = Some((qid, cid, t));
                self.in_ring += 1;
            }
            Some(_) => {
                self.overflow.insert((qid, cid), t);
            }
        }
    }

    fn remove(&mut self, qid: u16, cid: u16) -> Option<Ticket> {
        if let Some(slot) = self.ring.get_mut(usize::from(cid) % Self::RING) {
            if slot.is_some_and(|(q, c, _)| (q, c) == (qid, cid)) {
                self.in_ring -= 1;
                return slot.take().map(|(_, _, t)| t);
            }
        }
        if self.overflow.is_empty() {
            return None;
        }
        self.overflow.remove(&(qid, cid))
    }

    fn len(&self) -> usize {
        self.in_ring + self.overflow.len()
    }
}

/// Submits a request's commands at the device's clock; their completions are learnt later (`collect`).
fn submit(st: &mut State, qid: u16, conn: u64, request: u64, io: Io<'_>) -> Result<Submitted> {
    let lba_bytes = st.dev().lba_bytes();
    let max = u64::from(st.dev().namespace().max_lbas).max(1);
    let first = st.next_ticket;
    let mut status = Status::SUCCESS;
    let mut go = |st: &mut State, sqe: Sqe, data: DataBuf<'_>| -> Result<()> {
        let mut sqe = sqe;
        let dev = st.dev();
        sqe.cid = dev.next_cid(qid);
        let now = dev.now();
        let start = now.max(dev.loop_clock());
        let failed = dev.errors_recorded();
        dev.submit(qid, sqe, data)?;
        if dev.errors_recorded() != failed && status.is_success() {
            status = dev.failed_status(qid, sqe.cid).unwrap_or(Status::INTERNAL_ERROR);
        }
        let ticket = st.next_ticket;
        st.next_ticket += 1;
        st.tickets.insert(qid, sqe.cid, Ticket { ticket, request, conn, start });
        st.depth.enter(ticket, start);
        // Commands in flight: those reaped that complete after now, and those not yet reaped (this one and this
        // request's others included).
        while st.in_device.peek().is_some_and(|Reverse(t)| *t <= now) {
            st.in_device.pop();
        }
        let in_flight = (st.in_device.len() + st.tickets.len()) as u64;
        st.in_flight_sum += u128::from(in_flight);
        st.in_flight_n += 1;
        st.pacing.max_in_flight_at_submission = st.pacing.max_in_flight_at_submission.max(in_flight);
        Ok(())
    };
    let (kind, bytes) = match io {
        Io::Read { lba, out } => {
            let blocks = out.len() as u64 / lba_bytes;
            for (i, chunk) in out.chunks_mut((max * lba_bytes) as usize).enumerate() {
                let n = (chunk.len() as u64 / lba_bytes) as u32;
                go(st, Sqe::rw(opcode::READ, 0, lba + i as u64 * max, n), DataBuf::FromDevice(chunk))?;
            }
            (Kind::Read, blocks * lba_bytes)
        }
        Io::Write { lba, data, fua } => {
            for (i, chunk) in data.chunks((max * lba_bytes) as usize).enumerate() {
                let n = (chunk.len() as u64 / lba_bytes) as u32;
                let mut sqe = Sqe::rw(opcode::WRITE, 0, lba + i as u64 * max, n);
                if fua {
                    sqe.cdw12 |= 1 << 30;
                }
                go(st, sqe, DataBuf::ToDevice(chunk))?;
            }
            (Kind::Write { fua }, data.len() as u64)
        }
        Io::Flush => {
            go(st, Sqe { opcode: opcode::FLUSH, nsid: 1, ..Sqe::default() }, DataBuf::None)?;
            (Kind::Flush, 0)
        }
        Io::Trim { lba, blocks, fua } => {
            let mut ranges = Vec::new();
            let (mut s, mut left) = (lba, blocks);
            while left > 0 {
                let n = left.min(u64::from(u32::MAX));
                ranges.push((s, n as u32));
                s += n;
                left -= n;
            }
            for group in ranges.chunks(256) {
                let bytes = encode_dsm_ranges(group);
                let sqe = Sqe { opcode: opcode::DSM, nsid: 1, cdw10: group.len() as u32 - 1, cdw11: 1 << 2, ..Sqe::default() };
                go(st, sqe, DataBuf::ToDevice(&bytes))?;
            }
            if fua {
                go(st, Sqe { opcode: opcode::FLUSH, nsid: 1, ..Sqe::default() }, DataBuf::None)?;
            }
            (Kind::Trim, 0)
        }
        Io::Zero { lba, blocks, deallocate, fua } => {
            let (mut s, mut left) = (lba, blocks);
            while left > 0 {
                let n = left.min(1 << 16);
                let mut sqe = Sqe::rw(opcode::WRITE_ZEROES, 0, s, n as u32);
                if deallocate {
                    sqe.cdw12 |= 1 << 25;
                }
                go(st, sqe, DataBuf::None)?;
                s += n;
                left -= n;
            }
            if fua {
                go(st, Sqe { opcode: opcode::FLUSH, nsid: 1, ..Sqe::default() }, DataBuf::None)?;
            }
            (Kind::Zero, blocks * lba_bytes)
        }
    };
    Ok(Submitted { kind, bytes, tickets: first..st.next_ticket, status })
}

/// Reaps the earliest completion of the served queues once it is certain, running the event loop only before
/// `limit` (so never past a later submission's time); wakes the thread waiting for it. None if there was none;
/// else the completion time of the request it completed (pace none), or `Time::MAX` if it completed none. `now`:
/// the wall-clock instant a slot it opens is stamped with (read once by the caller, not once per completion).
fn reap_one(st: &mut State, limit: Time, now: Instant) -> Option<Time> {
    let qids = std::mem::take(&mut st.qids);
    let next = st.dev().next_completion_known(&qids, limit);
    st.qids = qids;
    let (q, _) = next?;
    let c = st.dev().reap_next(q)?;
    let mut completed = Time::MAX;
    if let Some(Ticket { ticket, request, conn, start }) = st.tickets.remove(q, c.cqe.cid) {
        if st.keep_done {
            keep_done(st, ticket, (c.cqe.status(), c.time));
        }
        st.in_device.push(Reverse(c.time));
        st.depth.leave(ticket, start, c.time);
        // Pace none: a request whose last command completed opens a slot for a reaction (`pipeline`).
        let finished = st.requests.command_done(request, c.time);
        if let Some(conn) = st.conns.get_mut(&conn) {
            conn.figures.stay_ns += u128::from(c.time.saturating_since(start));
            if let Some(r) = finished {
                conn.request_done(r, now);
            }
        }
        if let Some(r) = finished {
            completed = r.done;
        }
        if !st.waiters.is_empty() {
            wake_waiter(st, ticket);
        }
    }
    Some(completed)
}

/// The refusal of a request on a connection that is not (or no longer) open.
fn not_open(conn: u64) -> SimError {
    SimError::InvalidArgument(format!("connection {conn} is not open"))
}

/// `reap_one`'s rare parts, out of the lines of its steady path (pace none keeps no completion and has no thread
/// waiting for one: a completion only opens a slot): a completion kept for its request, and the thread waiting for it
/// woken once the lock is released.
#[cold]
#[inline(never)]
fn keep_done(st: &mut State, ticket: u64, taken: Taken) {
    st.done.insert(ticket, taken);
}

#[cold]
#[inline(never)]
fn wake_waiter(st: &mut State, ticket: u64) {
    if let Some(t) = st.waiters.remove(&ticket) {
        st.to_wake.push(t);
    }
}

/// Pace none without a reaction window: the completions of `tickets`, the event loop run until they are known (past
/// the submission time of the requests that follow: the module's notes).
fn collect_at_once(st: &mut State, tickets: std::ops::Range<u64>) -> Result<Vec<Taken>> {
    let now = Instant::now();
    while !tickets.clone().all(|t| st.done.contains_key(&t)) {
        if reap_one(st, Time::MAX, now).is_none() {
            return Err(SimError::Fault("a submitted command has no completion".into()));
        }
    }
    Ok(tickets.map(|t| st.done.remove(&t).expect("known")).collect())
}

/// Counts a request's outcome.
fn count(st: &mut State, kind: Kind, bytes: u64, status: Status) {
    let n = &mut st.counts;
    if status.is_success() {
        match kind {
            Kind::Read => (n.read, n.bytes_read) = (n.read + 1, n.bytes_read + bytes),
            Kind::Write { fua } => {
                (n.write, n.bytes_written) = (n.write + 1, n.bytes_written + bytes);
                n.fua_writes += u64::from(fua);
            }
            Kind::Flush => n.flush += 1,
            Kind::Trim => n.trim += 1,
            Kind::Zero => (n.zero, n.bytes_written) = (n.zero + 1, n.bytes_written + bytes),
        }
    } else {
        n.errors += 1;
    }
}

#[cfg(test)]
mod tests;
