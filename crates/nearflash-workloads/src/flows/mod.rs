//! Flows: request streams run together against one device, each on its own submission queue, as MQSim's
//! `IO_Scenario` runs its flows (FAST'18). A flow replays a trace open loop (arrival times kept, scaled by
//! `time_scale`) or closed loop (a fixed number of requests in flight, times ignored), or issues a synthetic
//! fio-like job. One event loop serves every flow in virtual time: the next event is the earliest of the flows'
//! completions and open-loop arrivals (a completion first at equal times). A request that finds its queue full
//! waits on the host side (its end-to-end delay grows, its device response time does not).
//!
//! Trace replay (`nearflash replay`) is one flow. The run's results are one [`FlowReport`] per flow and the
//! device's [`Report`] over the run, as `bench` reports.

pub mod mapping;
pub mod source;
pub mod spec;
mod stats;

pub use mapping::{Cmd, Geometry, MapCounts, Mapping};
pub use source::{InMemory, Requests, Synthetic, SyntheticSpec, TraceFile};
pub use stats::{FlowReport, Latency, OpFigures};

use crate::trace::{Op, Request};
use nearflash_core::bench;
use nearflash_core::device::Report;
use nearflash_core::engine::Time;
use nearflash_core::error::{Result, SimError};
use nearflash_core::nvme::{encode_dsm_ranges, opcode, DataBuf, Sqe};
use nearflash_core::Device;
use serde::Serialize;
use stats::{FlowHead, FlowStats};
use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::time::Instant;

/// An NVMe submission queue's priority class (Create I/O SQ's QPRIO), MQSim's `Priority_Class`: the class of the
/// flow's commands' flash work in the device's scheduler (urgent strictly first, then high, medium, low by weight).
pub use nearflash_core::Priority;

/// How a flow's requests arrive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Timing {
    /// At their arrival times multiplied by `time_scale` (0.5: twice as fast as recorded).
    Open { time_scale: f64 },
    /// `iodepth` requests in flight, the next one issued when one completes (arrival times ignored).
    Closed { iodepth: u32 },
}

/// One flow of a run.
pub struct Flow {
    pub name: String,
    pub source: Box<dyn Requests>,
    /// "trace" or "synthetic" (for the report).
    pub kind: &'static str,
    /// Names the source in errors (a trace's path).
    pub origin: String,
    pub timing: Timing,
    pub mapping: Mapping,
    pub priority: Priority,
    /// Commands its submission queue holds (`None`: the device's maximum).
    pub queue_depth: Option<u32>,
}

/// Choices of a run.
#[derive(Default)]
pub struct Options {
    /// Move data (a pattern written, reads into a buffer); otherwise timing only.
    pub data: bool,
    /// Where to write one CSV line per completed request (`flow,request,line,op,offset,bytes,arrival_ns,
    /// submit_ns,complete_ns,device_ns,e2e_ns,ok`, times from the run's start).
    pub latencies: Option<Box<dyn Write + Send>>,
}

/// Header of the per-request latency file.
pub const LATENCY_HEADER: &str = "flow,request,line,op,offset,bytes,arrival_ns,submit_ns,complete_ns,device_ns,e2e_ns,ok";

/// What a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub flows: Vec<FlowReport>,
    /// The device over the run (from the first submission to the last completion).
    pub report: Report,
    /// Requests completed, all flows.
    pub requests: u64,
    pub wall_s: f64,
    /// Simulated requests per wall-clock second (the simulator's speed).
    pub sim_requests_per_s: f64,
}

/// Data of a run that moves data (empty for timing only): a pattern written, a sink read into.
struct Buffers {
    payload: Vec<u8>,
    sink: Vec<u8>,
}

/// A request between its arrival and its last command's completion.
struct Live {
    arrival: Time,
    enqueued: Option<Time>,
    left: u32,
    op: Op,
    offset: u64,
    bytes: u64,
    ok: bool,
    index: u64,
    line: u64,
}

struct FlowRun {
    flow: Flow,
    qid: u16,
    capacity: u32,
    /// The next open-loop request, read ahead to know its arrival time.
    next: Option<Request>,
    exhausted: bool,
    pending: VecDeque<(usize, Cmd)>,
    reqs: Vec<Option<Live>>,
    free: Vec<usize>,
    cids: HashMap<u16, (usize, Time)>,
    outstanding: u32,
    taken: u64,
    stats: FlowStats,
}

/// The queue of a flow: created with its priority class.
fn open_queue(dev: &mut Device, qid: u16, depth: u32, priority: Priority) -> Result<()> {
    if dev.has_queue(qid) {
        dev.delete_queue_pair(qid)?;
    }
    dev.create_queue_pair_with(qid, depth, priority)
}

fn in_flow(flow: &str, e: impl std::fmt::Display) -> SimError {
    SimError::InvalidArgument(format!("flow {flow:?}: {e}"))
}

impl Flow {
    /// The commands of request `r` (in `cmds`, cleared first), or the error naming the flow, file and line.
    fn commands(&self, r: &Request, g: Geometry, cmds: &mut Vec<Cmd>, counts: &mut MapCounts) -> Result<()> {
        cmds.clear();
        if r.op != Op::Flush && r.len == 0 {
            return Err(in_flow(&self.name, format!("{}:{}: a request of 0 bytes", self.origin, r.line)));
        }
        self.mapping.map(r, g, cmds, counts).map_err(|e| in_flow(&self.name, format!("{}:{}: {e}", self.origin, r.line)))
    }

    /// Reads every request of the flow's source apart from the run and maps it: a malformed line or a request
    /// that does not fit refuses the run before anything is submitted (a run stopped midway would have changed the
    /// device, an image's data included).
    fn check_requests(&self, g: Geometry) -> Result<()> {
        let Some(dry) = self.source.dry_run() else { return Ok(()) };
        let mut dry = dry.map_err(|e| in_flow(&self.name, e))?;
        let (mut cmds, mut counts) = (Vec::new(), MapCounts::default());
        while let Some(r) = dry.next_request() {
            self.commands(&r.map_err(|e| in_flow(&self.name, e))?, g, &mut cmds, &mut counts)?;
        }
        Ok(())
    }
}

impl FlowRun {
    /// Reads the flow's next request into `next` (open loop); false at the end.
    fn peek(&mut self) -> Result<bool> {
        if self.next.is_none() && !self.exhausted {
            match self.flow.source.next_request() {
                Some(Ok(r)) => self.next = Some(r),
                Some(Err(e)) => return Err(in_flow(&self.flow.name, e)),
                None => self.exhausted = true,
            }
        }
        Ok(self.next.is_some())
    }

    /// Takes the next request, arriving at `now`, into the flow's pending commands.
    fn take(&mut self, now: Time, g: Geometry, cmds: &mut Vec<Cmd>) -> Result<()> {
        if !self.peek()? {
            return Ok(());
        }
        let r = self.next.take().expect("peeked");
        self.flow.commands(&r, g, cmds, &mut self.stats.mapping)?;
        let live = Live {
            arrival: now,
            enqueued: None,
            left: cmds.len() as u32,
            op: r.op,
            offset: r.offset,
            bytes: r.len,
            ok: true,
            index: self.taken,
            line: r.line,
        };
        let slot = match self.free.pop() {
            Some(s) => {
                self.reqs[s] = Some(live);
                s
            }
            None => {
                self.reqs.push(Some(live));
                self.reqs.len() - 1
            }
        };
        self.pending.extend(cmds.drain(..).map(|c| (slot, c)));
        self.taken += 1;
        self.outstanding += 1;
        self.stats.arrived(now);
        Ok(())
    }

    /// Submits pending commands while the queue has room.
    fn submit(&mut self, dev: &mut Device, bufs: &mut Buffers, lba: u64) -> Result<()> {
        while self.stats.in_device < self.capacity {
            let Some((slot, cmd)) = self.pending.pop_front() else { break };
            let now = dev.now();
            let cid = dev.next_cid(self.qid);
            let bytes = (u64::from(cmd.nlb) * lba) as usize;
            let ranges;
            let (sqe, data) = match cmd.op {
                Op::Read | Op::Write => {
                    let op = if cmd.op == Op::Read { opcode::READ } else { opcode::WRITE };
                    let sqe = Sqe::rw(op, cid, cmd.slba, cmd.nlb);
                    let data = match (bufs.payload.len() >= bytes, cmd.op) {
                        (false, _) => DataBuf::None,
                        (true, Op::Read) => DataBuf::FromDevice(&mut bufs.sink[..bytes]),
                        (true, _) => DataBuf::ToDevice(&bufs.payload[..bytes]),
                    };
                    (sqe, data)
                }
                Op::Flush => (Sqe { opcode: opcode::FLUSH, nsid: 1, cid, ..Sqe::default() }, DataBuf::None),
                Op::Trim => {
                    ranges = encode_dsm_ranges(&[(cmd.slba, cmd.nlb)]);
                    let sqe = Sqe { opcode: opcode::DSM, nsid: 1, cid, cdw10: 0, cdw11: 1 << 2, ..Sqe::default() };
                    (sqe, DataBuf::ToDevice(&ranges))
                }
            };
            dev.submit(self.qid, sqe, data)?;
            self.cids.insert(cid, (slot, now));
            self.stats.submitted();
            let live = self.reqs[slot].as_mut().expect("a pending command's request is live");
            live.enqueued.get_or_insert(now);
        }
        Ok(())
    }

    /// A completion of this flow's queue; returns the request it finished, if it did.
    fn complete(&mut self, cid: u16, ok: bool, t: Time, t0: Time, latencies: &mut Option<Box<dyn Write + Send>>) -> Result<bool> {
        let (slot, submitted) = self.cids.remove(&cid).ok_or_else(|| SimError::Fault(format!("completion of unknown command {cid}")))?;
        self.stats.command_done(t - submitted);
        let live = self.reqs[slot].as_mut().expect("a command's request is live");
        live.left -= 1;
        live.ok &= ok;
        if live.left > 0 {
            return Ok(false);
        }
        let live = self.reqs[slot].take().expect("live");
        self.free.push(slot);
        self.outstanding -= 1;
        let enq = live.enqueued.unwrap_or(live.arrival);
        self.stats.request_done(live.op, live.bytes, live.ok, t, t - enq, t - live.arrival);
        if let Some(w) = latencies {
            writeln!(
                w,
                "{},{},{},{},{},{},{},{},{},{},{},{}",
                self.flow.name,
                live.index,
                live.line,
                live.op.name(),
                live.offset,
                live.bytes,
                live.arrival - t0,
                enq - t0,
                t - t0,
                t - enq,
                t - live.arrival,
                u8::from(live.ok)
            )
            .map_err(SimError::Io)?;
        }
        Ok(true)
    }

    fn head(&self) -> FlowHead {
        FlowHead {
            name: self.flow.name.clone(),
            source: self.flow.kind,
            timing: match self.flow.timing {
                Timing::Open { .. } => "open",
                Timing::Closed { .. } => "closed",
            },
            priority: self.flow.priority.name(),
            qid: self.qid,
        }
    }

    fn idle(&self) -> bool {
        self.exhausted && self.next.is_none() && self.outstanding == 0
    }
}

/// Runs `flows` together on `dev` (its statistics are reset first; its state is kept), flow i on I/O queue 1 + i:
/// borrowed (one with commands in flight is refused) and given back as it was. `progress(done, total)`
/// is called now and then (parts per million of the flows' sources); an error from it stops the run (after the
/// commands in flight complete) and is returned.
pub fn run(
    dev: &mut Device,
    flows: Vec<Flow>,
    opts: Options,
    progress: Option<&mut dyn FnMut(u64, u64) -> Result<()>>,
) -> Result<RunResult> {
    if flows.is_empty() {
        return Err(SimError::Config("a run needs at least one flow".into()));
    }
    let max_queues = dev.config().nvme.max_queues.0;
    if flows.len() as u64 > max_queues {
        return Err(SimError::Config(format!("{} flows, but the device has {max_queues} I/O queues (one per flow)", flows.len())));
    }
    let ns = dev.namespace();
    let lba = dev.lba_bytes();
    let g = Geometry { lba_bytes: lba, lbas: ns.lbas, max_nlb: ns.max_lbas };
    let max_depth = u32::try_from(dev.config().nvme.max_queue_depth.0).unwrap_or(u32::MAX).max(2) - 1;
    // Every flow, and every request of a trace, is checked before any queue is touched: a refused run changes
    // nothing.
    let mut names = std::collections::HashSet::new();
    for f in &flows {
        if !names.insert(f.name.clone()) {
            return Err(SimError::Config(format!("two flows are named {:?}", f.name)));
        }
        if let Timing::Open { time_scale } = f.timing {
            if !(time_scale.is_finite() && time_scale > 0.0) {
                return Err(in_flow(&f.name, format!("time scale {time_scale} must be a positive number")));
            }
        }
        if let Timing::Closed { iodepth: 0 } = f.timing {
            return Err(in_flow(&f.name, "iodepth must be at least 1"));
        }
        f.mapping.check(g).map_err(|e| in_flow(&f.name, e))?;
        f.check_requests(g)?;
        match f.queue_depth {
            Some(0) => return Err(in_flow(&f.name, "queue depth must be at least 1")),
            Some(d) if d > max_depth => {
                return Err(in_flow(&f.name, format!("queue depth {d} exceeds the device's maximum of {max_depth}")))
            }
            _ => {}
        }
    }
    // Flow i runs on queue 1 + i, borrowed and given back as it was (as `bench` borrows its jobs' queues).
    let qids: Vec<u16> = (1..=flows.len() as u16).collect();
    let before = bench::borrow_queues(dev, &qids, &format!("the {} flows", flows.len()))?;
    let result = run_on_queues(dev, flows, &qids, g, max_depth, opts, progress);
    let restored = bench::give_back(dev, &qids, &before);
    result.and_then(|r| restored.map(|()| r))
}

/// Runs validated flows, flow i on queue `qids[i]`.
fn run_on_queues(
    dev: &mut Device,
    flows: Vec<Flow>,
    qids: &[u16],
    g: Geometry,
    max_depth: u32,
    mut opts: Options,
    mut progress: Option<&mut dyn FnMut(u64, u64) -> Result<()>>,
) -> Result<RunResult> {
    let mut runs = Vec::with_capacity(flows.len());
    for (flow, &qid) in flows.into_iter().zip(qids) {
        let capacity = flow.queue_depth.unwrap_or(max_depth);
        open_queue(dev, qid, capacity + 1, flow.priority).map_err(|e| in_flow(&flow.name, e))?;
        runs.push(FlowRun {
            flow,
            qid,
            capacity,
            next: None,
            exhausted: false,
            pending: VecDeque::new(),
            reqs: Vec::new(),
            free: Vec::new(),
            cids: HashMap::new(),
            outstanding: 0,
            taken: 0,
            stats: FlowStats::new(),
        });
    }
    let (lba, most_lbas) = (g.lba_bytes, g.max_nlb);
    let most = if opts.data { u64::from(most_lbas) * lba } else { 0 };
    let mut bufs = Buffers { payload: (0..most).map(|i| (i * 131 % 251) as u8).collect(), sink: vec![0; most as usize] };
    if let Some(w) = &mut opts.latencies {
        writeln!(w, "{LATENCY_HEADER}").map_err(SimError::Io)?;
    }
    dev.reset_stats();
    let t0 = dev.now();
    let wall = Instant::now();
    let r = event_loop(dev, &mut runs, g, t0, &mut bufs, &mut opts, &mut progress);
    if r.is_err() {
        // Leave no command in flight: the device stays usable after a failed run.
        for f in &runs {
            while dev.next_completion_time(f.qid).is_some() {
                dev.wait(f.qid);
            }
        }
    }
    let requests = r?;
    if let Some(w) = &mut opts.latencies {
        w.flush().map_err(SimError::Io)?;
    }
    let wall_s = wall.elapsed().as_secs_f64();
    let flows = runs.iter().map(|f| f.stats.report(f.head(), f.flow.source.trace_stats())).collect();
    Ok(RunResult { flows, report: dev.report(), requests, wall_s, sim_requests_per_s: requests as f64 / wall_s.max(1e-9) })
}

/// Total progress over the flows, in parts per million.
fn progress_ppm(runs: &[FlowRun]) -> u64 {
    let sum: f64 = runs
        .iter()
        .map(|f| {
            let (d, t) = f.flow.source.progress();
            if f.idle() || t == 0 { 1.0 } else { (d as f64 / t as f64).min(1.0) }
        })
        .sum();
    (sum / runs.len() as f64 * 1e6) as u64
}

/// Keeps the earlier of `best` and `c`.
fn earliest<T: PartialOrd + Copy>(best: &mut Option<T>, c: T) {
    if best.is_none_or(|b| c < b) {
        *best = Some(c);
    }
}

fn event_loop(
    dev: &mut Device,
    runs: &mut [FlowRun],
    g: Geometry,
    t0: Time,
    bufs: &mut Buffers,
    opts: &mut Options,
    progress: &mut Option<&mut dyn FnMut(u64, u64) -> Result<()>>,
) -> Result<u64> {
    let qids: Vec<u16> = runs.iter().map(|f| f.qid).collect();
    let qids = &qids[..];
    let mut cmds = Vec::new();
    let mut done = 0u64;
    let mut events = 0u64;
    loop {
        for f in runs.iter_mut() {
            if let Timing::Closed { iodepth } = f.flow.timing {
                while f.outstanding < iodepth && f.peek()? {
                    f.take(dev.now(), g, &mut cmds)?;
                }
            }
            f.submit(dev, bufs, g.lba_bytes)?;
        }
        // The earliest event: (time, arrival?, flow); a completion goes before an arrival at the same time.
        // Arrivals first: completions are then looked for only before the earliest, so that the device's array is
        // not run past the moment that request arrives (it is submitted then).
        let mut best: Option<(Time, bool, usize)> = None;
        for (i, f) in runs.iter_mut().enumerate() {
            if let Timing::Open { time_scale } = f.flow.timing {
                if f.peek()? {
                    let next = f.next.as_ref().expect("peeked");
                    let scaled = t0.as_ns() as f64 + next.time_ns as f64 * time_scale;
                    if scaled > source::MAX_ARRIVAL_NS {
                        return Err(in_flow(&f.flow.name, format!(
                            "line {}: arrival at {} ns x time scale {time_scale:e} is past the simulated clock's 2^63 ns",
                            next.line, next.time_ns
                        )));
                    }
                    let t = Time::from_ns(scaled as u64).max(dev.now());
                    earliest(&mut best, (t, true, i));
                }
            }
        }
        // Every queue's completions at once: the loop runs only as far as the earliest, so that the closed-loop
        // request that follows it is not submitted in the loop's past.
        let limit = best.map_or(Time::MAX, |(t, _, _)| t.saturating_add_ns(1));
        if let Some((qid, t)) = dev.next_completion_before_any(qids, limit) {
            let i = runs.iter().position(|f| f.qid == qid).expect("a flow's queue");
            earliest(&mut best, (t, false, i));
        }
        let Some((t, arrival, i)) = best else {
            if runs.iter().all(FlowRun::idle) {
                break;
            }
            return Err(SimError::Fault("flows stalled: requests wait but no completion is pending".into()));
        };
        let f = &mut runs[i];
        if arrival {
            dev.advance_to(t);
            f.take(t, g, &mut cmds)?;
        } else {
            let c = dev.wait(f.qid).ok_or_else(|| SimError::Fault("a pending completion vanished".into()))?;
            if f.complete(c.cqe.cid, c.cqe.status().is_success(), c.time, t0, &mut opts.latencies)? {
                done += 1;
            }
        }
        events += 1;
        if events.is_multiple_of(4096) {
            if let Some(p) = progress.as_deref_mut() {
                p(progress_ppm(runs), 1_000_000)?;
            }
        }
    }
    if let Some(p) = progress.as_deref_mut() {
        p(1_000_000, 1_000_000)?;
    }
    Ok(done)
}

#[cfg(test)]
mod tests;
