//! fio-like synthetic workloads run against a device in virtual time: sequential or random, read, write or mixed,
//! a block size, a queue depth per job and a number of jobs (one queue pair each). Reports the device's virtual-time
//! figures and the simulator's own speed (simulated I/Os per wall-clock second).

use crate::nvme::DataBuf;
use crate::ctrl::sched::Priority;
use crate::device::{Device, Report};
use crate::engine::rng_stream;
use crate::error::{Result, SimError};
use crate::nvme::{opcode, Sqe};
use rand::Rng as _;
use std::time::Instant;

/// Access pattern, fio's `rw=`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pattern {
    Read,
    Write,
    RandRead,
    RandWrite,
    /// Random mixed; the fraction of reads.
    RandRw(f64),
}

impl std::str::FromStr for Pattern {
    type Err = SimError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "read" | "seqread" => Ok(Pattern::Read),
            "write" | "seqwrite" => Ok(Pattern::Write),
            "randread" => Ok(Pattern::RandRead),
            "randwrite" => Ok(Pattern::RandWrite),
            "randrw" => Ok(Pattern::RandRw(0.5)),
            _ => Err(SimError::Config(format!(
                "unknown pattern {s:?}: expected read, write, randread, randwrite or randrw"
            ))),
        }
    }
}

impl Pattern {
    pub fn is_random(self) -> bool {
        !matches!(self, Pattern::Read | Pattern::Write)
    }

    pub fn reads(self) -> bool {
        matches!(self, Pattern::Read | Pattern::RandRead | Pattern::RandRw(_))
    }
}

#[derive(Debug, Clone)]
pub struct Workload {
    pub pattern: Pattern,
    /// Bytes per I/O (a multiple of the LBA size).
    pub block_size: u64,
    pub queue_depth: u32,
    pub jobs: u32,
    /// I/Os in total over all jobs.
    pub ios: u64,
    /// LBA range used: `[start, start + lbas)`; `None` = the whole namespace.
    pub span: Option<(u64, u64)>,
    pub seed: u64,
    /// Move real data (write a pattern, read into a buffer) rather than timing only.
    pub data: bool,
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            pattern: Pattern::RandRead,
            block_size: 4096,
            queue_depth: 32,
            jobs: 1,
            ios: 100_000,
            span: None,
            seed: 1,
            data: false,
        }
    }
}

/// Result of a run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BenchResult {
    pub report: Report,
    pub ios: u64,
    pub wall_s: f64,
    /// Simulated I/Os per wall-clock second (the simulator's speed).
    pub sim_ios_per_s: f64,
}

/// The I/Os of one job, fio-like: their first LBAs and directions, drawn from the job's own random stream in I/O
/// order (a sequential job streams through its slice and wraps around). Shared by `bench` and the flows of trace
/// replay, so that a synthetic flow issues what the same `bench` job would.
pub struct AddressStream {
    pattern: Pattern,
    /// Blocks per I/O.
    nlb: u64,
    first: u64,
    len: u64,
    cursor: u64,
    rng: crate::engine::Rng,
}

impl AddressStream {
    /// I/Os of `nlb` blocks inside LBAs `[first, first + len)` (at least one I/O fits), drawn from `rng`.
    pub fn new(pattern: Pattern, nlb: u64, first: u64, len: u64, rng: crate::engine::Rng) -> AddressStream {
        AddressStream { pattern, nlb, first, len, cursor: 0, rng }
    }

    /// The next I/O: (first LBA, read?).
    pub fn next_io(&mut self) -> (u64, bool) {
        let slots = self.len / self.nlb;
        let slba = if self.pattern.is_random() {
            self.first + self.rng.gen_range(0..slots) * self.nlb
        } else {
            let s = self.first + (self.cursor % slots) * self.nlb;
            self.cursor += 1;
            s
        };
        let read = match self.pattern {
            Pattern::Read | Pattern::RandRead => true,
            Pattern::Write | Pattern::RandWrite => false,
            Pattern::RandRw(f) => self.rng.gen::<f64>() < f,
        };
        (slba, read)
    }
}

struct Job {
    qid: u16,
    issued: u64,
    quota: u64,
    /// The next I/Os, drawn ahead (see `issue`).
    ahead: Ahead,
    stream: AddressStream,
}

/// I/Os drawn ahead of a job's next (`issue`).
const AHEAD: usize = 2;

/// A job's I/Os drawn ahead, first in line first: at most `AHEAD`, in an array (a `VecDeque`'s ring arithmetic on
/// every push, pop and look was about 30 instructions a read).
#[derive(Default)]
struct Ahead {
    ios: [(u64, bool); AHEAD],
    len: usize,
}

impl Ahead {
    #[inline]
    fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn front(&self) -> Option<&(u64, bool)> {
        self.ios[..self.len].first()
    }

    #[inline]
    fn pop_front(&mut self) -> Option<(u64, bool)> {
        let first = *self.front()?;
        self.ios.copy_within(1.., 0);
        self.len -= 1;
        Some(first)
    }

    /// Appends `io` (the caller keeps at most `AHEAD`).
    #[inline]
    fn push_back(&mut self, io: (u64, bool)) {
        self.ios[self.len] = io;
        self.len += 1;
    }
}

/// Runs `w` on `dev` (which keeps its state; statistics are reset first). `progress(done, total)` is called now
/// and then; an error from it stops the run (after the commands in flight complete) and is returned.
pub fn run(dev: &mut Device, w: &Workload, progress: Option<&mut dyn FnMut(u64, u64) -> Result<()>>) -> Result<BenchResult> {
    let lba = dev.lba_bytes();
    if w.block_size == 0 || !w.block_size.is_multiple_of(lba) {
        return Err(SimError::Config(format!("block size {} is not a multiple of the {lba} B LBA", w.block_size)));
    }
    let nlb = w.block_size / lba;
    if nlb > u64::from(dev.namespace().max_lbas) {
        return Err(SimError::Config(format!("block size {} exceeds the device's MDTS", w.block_size)));
    }
    if w.queue_depth == 0 || w.jobs == 0 || w.ios == 0 {
        return Err(SimError::Config("queue depth, jobs and I/O count must be positive".into()));
    }
    if let Pattern::RandRw(f) = w.pattern {
        if !(0.0..=1.0).contains(&f) {
            return Err(SimError::Config(format!("read fraction {f} of randrw must be in [0, 1]")));
        }
    }
    let (start, len) = w.span.unwrap_or((0, dev.namespace().lbas));
    if start.checked_add(len).is_none_or(|end| end > dev.namespace().lbas) || len < nlb * u64::from(w.jobs) {
        return Err(SimError::Config(format!("span {start}+{len} does not fit {} jobs of {nlb}-block I/Os", w.jobs)));
    }
    if dev.config().nvme.max_queue_depth.0 <= u64::from(w.queue_depth) {
        let most = dev.config().nvme.max_queue_depth.0.saturating_sub(1);
        return Err(SimError::Config(format!("queue depth {} exceeds the device's maximum of {most}", w.queue_depth)));
    }
    let max_queues = dev.config().nvme.max_queues.0;
    if u64::from(w.jobs) > max_queues {
        return Err(SimError::Config(format!("{} jobs need as many I/O queues; the device has {max_queues}", w.jobs)));
    }
    // Job j runs on queue 1 + j.
    let qids: Vec<u16> = (1..=w.jobs as u16).collect();
    let before = borrow_queues(dev, &qids, &format!("the workload's {} jobs", w.jobs))?;
    let result = drive(dev, w, nlb, (start, len), &qids, progress);
    let restored = give_back(dev, &qids, &before);
    result.and_then(|r| restored.map(|()| r))
}

/// Borrows queues `qids` for a run (of `users`, named in the error): one with commands in flight is refused (taking
/// it over would lose their completions); returns their depths (None: absent) for `give_back` when the run ends.
pub fn borrow_queues(dev: &Device, qids: &[u16], users: &str) -> Result<Vec<Option<(u32, Priority)>>> {
    if let Some(busy) = qids.iter().find(|&&q| dev.has_commands_in_flight(q)) {
        let last = qids.last().copied().unwrap_or(1);
        return Err(SimError::InvalidArgument(format!(
            "queue {busy} has commands in flight: {users} run on queues 1..={last}; reap them first"
        )));
    }
    Ok(qids.iter().map(|&q| dev.queue_depth(q).zip(dev.queue_priority(q))).collect())
}

/// Puts queues `qids` back as they were before a run: absent, or at depth and priority `before[i]`.
pub fn give_back(dev: &mut Device, qids: &[u16], before: &[Option<(u32, Priority)>]) -> Result<()> {
    for (&qid, &was) in qids.iter().zip(before) {
        let now = dev.queue_depth(qid).zip(dev.queue_priority(qid));
        if now != was {
            if now.is_some() {
                dev.delete_queue_pair(qid)?;
            }
            if let Some((depth, prio)) = was {
                dev.create_queue_pair_with(qid, depth, prio)?;
            }
        }
    }
    Ok(())
}

/// Runs the validated workload `w` with job j on queue `qids[j]`.
fn drive(
    dev: &mut Device,
    w: &Workload,
    nlb: u64,
    (start, len): (u64, u64),
    qids: &[u16],
    mut progress: Option<&mut dyn FnMut(u64, u64) -> Result<()>>,
) -> Result<BenchResult> {
    let mut jobs = Vec::new();
    for (j, &qid) in (0..w.jobs).zip(qids) {
        if dev.has_queue(qid) {
            dev.delete_queue_pair(qid)?;
        }
        dev.create_queue_pair(qid, w.queue_depth + 1)?;
        // Sequential jobs each stream through their own slice of the span.
        let slice = len / u64::from(w.jobs) / nlb * nlb;
        let first = start + u64::from(j) * slice;
        let (first, len) = if w.pattern.is_random() { (start, len) } else { (first, slice) };
        jobs.push(Job {
            qid,
            issued: 0,
            quota: w.ios / u64::from(w.jobs) + u64::from(u64::from(j) < w.ios % u64::from(w.jobs)),
            ahead: Default::default(),
            stream: AddressStream::new(w.pattern, nlb, first, len, rng_stream(w.seed, &format!("bench-job-{j}"))),
        });
    }
    let payload: Vec<u8> = (0..w.block_size).map(|i| (i * 131 % 251) as u8).collect();
    let mut sink = vec![0u8; if w.data { w.block_size as usize } else { 0 }];
    dev.reset_stats();
    let wall = Instant::now();
    let total: u64 = jobs.iter().map(|j| j.quota).sum();
    for job in &mut jobs {
        for _ in 0..w.queue_depth {
            issue(dev, job, w, nlb, &payload, &mut sink)?;
        }
    }
    let mut done = 0u64;
    let every = (total / 100).max(1);
    let qids: Vec<u16> = jobs.iter().map(|j| j.qid).collect();
    while done < total {
        // The job whose next completion comes first.
        let (qid, t) = dev
            .next_completion(&qids)
            .ok_or_else(|| SimError::InvalidArgument("workload stalled: no completion pending".into()))?;
        let j = usize::from(qid - 1);
        // `wait(qid)` without looking for the completion again: `next_completion` has made its time certain.
        dev.advance_to(t);
        dev.reap(qid);
        done += 1;
        issue(dev, &mut jobs[j], w, nlb, &payload, &mut sink)?;
        if done.is_multiple_of(every) {
            if let Some(p) = progress.as_deref_mut() {
                if let Err(e) = p(done, total) {
                    for jb in &jobs {
                        while dev.next_completion_time(jb.qid).is_some() {
                            dev.wait(jb.qid);
                        }
                    }
                    return Err(e);
                }
            }
        }
    }
    let wall_s = wall.elapsed().as_secs_f64();
    Ok(BenchResult { report: dev.report(), ios: total, wall_s, sim_ios_per_s: total as f64 / wall_s.max(1e-9) })
}

fn issue(dev: &mut Device, job: &mut Job, w: &Workload, nlb: u64, payload: &[u8], sink: &mut [u8]) -> Result<()> {
    if job.issued >= job.quota {
        return Ok(());
    }
    job.issued += 1;
    let (slba, read) = job.ahead.pop_front().unwrap_or_else(|| job.stream.next_io());
    // The following I/Os are drawn now (the stream's order is unchanged) so that what they will touch is on its way
    // into the cache while this one is simulated: the mapping entry two I/Os ahead, and the stored data of the next
    // one (whose mapping entry was requested one I/O ago).
    while job.ahead.len() < AHEAD && job.issued + (job.ahead.len() as u64) < job.quota {
        let next = job.stream.next_io();
        dev.prefetch(next.0);
        job.ahead.push_back(next);
    }
    if let Some(&(next, true)) = job.ahead.front() {
        if w.data {
            dev.prefetch_data(next);
        }
    }
    let op = if read { opcode::READ } else { opcode::WRITE };
    let mut sqe = Sqe::rw(op, 0, slba, nlb as u32);
    sqe.cid = dev.next_cid(job.qid);
    let data = match (w.data, read) {
        (false, _) => DataBuf::None,
        (true, true) => DataBuf::FromDevice(sink),
        (true, false) => DataBuf::ToDevice(payload),
    };
    dev.submit(job.qid, sqe, data)
}
