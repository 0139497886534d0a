//! Inference batches through the SLS paths and the dense part, in virtual time (paper §4.2 "Multi-threading and
//! Pipelining", §6.2-6.4).
//!
//! * **Sequential** (the paper's naive configuration): one SLS worker runs every table of a batch in turn, then
//!   the dense part runs, then the next batch starts.
//! * **Pipelined**: a pool of SLS workers, one I/O queue pair each (the paper matches workers to the driver's
//!   queues), shares a batch's tables (each worker takes the next table); once all of a batch's tables are
//!   done it goes to the dense stage (one run instance, `host_mlp_cores` cores), and when the dense stage has
//!   taken it the workers start the next batch, so SLS of batch b + 1 overlaps the dense part of batch b (one
//!   batch in each stage, as a two-stage pipeline with a one-batch hand-off).
//!
//! A batch's latency runs from the start of its SLS to the end of its dense part (the paper reports direct
//! request latencies, §5).
//!
//! The loop always resumes the worker with the earliest clock and moves the device clock there first, so every
//! command is submitted at its worker's time and the device sees a single, monotonic host timeline. Host-only
//! work (cache probes, sums, config building) may be charged ahead of the device clock on the host CPU model.

use super::caches::TableCaches;
use super::jobs::{Env, JobStats, SlsJob, SlsPath, Step};
use super::tables::DeviceTables;
use super::HostError;
use crate::params::RecssdParams;
use crate::ssd_cache::CacheStats;
use nearflash_core::ext::Time;
use nearflash_core::Device;
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// One batch's inputs: per table, EmbeddingBag (indices, offsets).
#[derive(Debug, Clone, Default)]
pub struct Batch {
    pub tables: Vec<(Vec<u64>, Vec<u64>)>,
}

/// How to run.
#[derive(Debug, Clone, Copy)]
pub struct RunOptions {
    pub path: SlsPath,
    /// A pool of `sls_workers` workers feeding the dense stage; else one worker, batch after batch.
    pub pipelined: bool,
    /// Return every batch's pooled vectors.
    pub keep_outputs: bool,
}

/// When a batch was taken by a worker, when its SLS ended, when its dense part ended.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct BatchTiming {
    pub taken: Time,
    pub sls_done: Time,
    pub done: Time,
}

/// What a run measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunResult {
    pub batches: Vec<BatchTiming>,
    /// Per batch, per table, `bags x dim` pooled vectors (when kept).
    #[serde(skip)]
    pub outputs: Vec<Vec<Vec<f32>>>,
    pub stats: JobStats,
    /// Baseline host LRU and RecSSD partition counters over the run, all tables.
    pub lru: CacheStats,
    pub partition: CacheStats,
    pub mlp_cycles: f64,
    pub started: Time,
    pub finished: Time,
}

/// The host library's state on one device: its tables, host caches and worker queues.
pub struct RecHost {
    pub tables: DeviceTables,
    pub caches: Vec<TableCaches>,
    pub params: RecssdParams,
    queues: Vec<u16>,
}

struct Worker {
    qid: u16,
    job: Option<SlsJob>,
}

impl RecHost {
    /// Creates `sls_workers` I/O queue pairs (highest free ids first, leaving low ids to the SDK).
    pub fn new(dev: &mut Device, tables: DeviceTables, params: RecssdParams) -> Result<Self, HostError> {
        let want = params.sls_workers as usize;
        let depth = (params.baseline_queue_depth as u32).max(2) + 2;
        let max = dev.config().nvme.max_queues.0 as u16;
        let mut queues = Vec::with_capacity(want);
        for qid in (1..max).rev() {
            if queues.len() == want {
                break;
            }
            if !dev.has_queue(qid) {
                dev.create_queue_pair(qid, depth)?;
                queues.push(qid);
            }
        }
        if queues.len() < want {
            return Err(HostError::Invalid(format!(
                "{want} SLS workers need {want} free I/O queues; the device has {} free",
                queues.len()
            )));
        }
        let caches = tables.tables.iter().map(|_| TableCaches::new(params.host_lru_rows as usize)).collect();
        Ok(Self { tables, caches, params, queues })
    }

    /// Installs each table's static partition from its profile ids (the artifact profiles the evaluation trace).
    pub fn set_partitions(&mut self, profiles: &[Vec<u64>]) -> Result<(), HostError> {
        if profiles.len() != self.tables.len() {
            return Err(HostError::Invalid(format!("{} profiles for {} tables", profiles.len(), self.tables.len())));
        }
        let cap = self.params.host_partition_rows as usize;
        for ((c, t), prof) in self.caches.iter_mut().zip(&self.tables.tables).zip(profiles) {
            c.set_partition(prof, cap, &t.rows);
        }
        Ok(())
    }

    /// Drops the partitions.
    pub fn clear_partitions(&mut self) {
        self.caches.iter_mut().for_each(|c| c.partition = None);
    }

    /// Empties the host LRUs.
    pub fn reset_lru(&mut self) {
        self.caches.iter_mut().for_each(TableCaches::reset_lru);
    }

    /// Disables (0) or resizes the host LRUs, emptying them.
    pub fn set_lru_rows(&mut self, rows: usize) {
        self.caches.iter_mut().for_each(|c| c.lru = crate::host_cache::HostLru::new(rows).ok());
    }

    /// The worker queue ids.
    pub fn queues(&self) -> &[u16] {
        &self.queues
    }

    /// One EmbeddingBag call on `table` through `path`, on the first worker queue, from the device's current
    /// time; returns the pooled vectors, the work counters and when each baseline read completed on the device (its
    /// completion's time, in completion order; empty on the other paths), and advances the device clock to the end.
    pub fn sls(
        &mut self,
        dev: &mut Device,
        table: usize,
        indices: Vec<u64>,
        offsets: &[u64],
        path: SlsPath,
    ) -> Result<(Vec<f32>, JobStats, Vec<Time>), HostError> {
        let t = self.tables.tables.get(table).ok_or_else(|| HostError::Invalid(format!("no table {table}")))?;
        let mut job = SlsJob::new(path, t, indices, offsets, self.queues[0])?;
        let mut stats = JobStats::default();
        let mut env = Env { dev, p: &self.params, stats: &mut stats };
        let mut now = env.dev.now();
        loop {
            match job.resume(&mut env, t, &mut self.caches[table], now)? {
                Step::At(at) => {
                    env.dev.advance_to(at);
                    now = at;
                }
                Step::Wait(not_before) => {
                    let qid = self.queues[0];
                    let next = env.dev.next_completion_time(qid).ok_or_else(|| lost(qid))?;
                    now = next.max(not_before);
                    env.dev.advance_to(now);
                }
                Step::Done(at) => {
                    env.dev.advance_to(at);
                    let done = job.read_completions().to_vec();
                    return Ok((job.into_output(), stats, done));
                }
            }
        }
    }

    /// Runs `batches` (whose dense parts take `dense_flops[b]` FLOPs) from the device's current time.
    pub fn run(
        &mut self,
        dev: &mut Device,
        batches: &[Batch],
        dense_flops: &[f64],
        opts: &RunOptions,
    ) -> Result<RunResult, HostError> {
        if dense_flops.len() != batches.len() {
            return Err(HostError::Invalid(format!("{} FLOP counts for {} batches", dense_flops.len(), batches.len())));
        }
        if let Some(b) = batches.iter().position(|b| b.tables.len() != self.tables.len()) {
            return Err(HostError::Invalid(format!(
                "batch {b} has {} tables, the model {}",
                batches[b].tables.len(),
                self.tables.len()
            )));
        }
        self.caches.iter_mut().for_each(TableCaches::reset_stats);
        let n_tables = self.tables.len();
        let n_workers = if opts.pipelined { self.queues.len() } else { 1 };
        let t0 = dev.now();
        let mut workers: Vec<Worker> = self.queues[..n_workers].iter().map(|&qid| Worker { qid, job: None }).collect();
        let mut wake: BinaryHeap<Reverse<(Time, usize)>> = (0..n_workers).map(|w| Reverse((t0, w))).collect();
        let mut result = RunResult { batches: vec![BatchTiming::default(); batches.len()], started: t0, ..Default::default() };
        let mut outputs: Vec<Vec<Vec<f32>>> = if opts.keep_outputs { vec![vec![Vec::new(); n_tables]; batches.len()] } else { Vec::new() };
        // The batch in the SLS stage: its next table to hand out and its tables not finished yet.
        let mut current = 0usize;
        let mut start = t0;
        let mut next_table = 0usize;
        let mut unfinished = n_tables;
        let mut idle: Vec<usize> = Vec::new();
        let mut dense_free = t0;
        let (flops_per_cycle, cores) = (self.params.host_mlp_flops_per_cycle, self.params.host_mlp_cores as u32);
        if batches.is_empty() {
            wake.clear();
        }
        // Workers waiting for a completion on their queue, and the time each resumes no earlier than.
        let mut waiting: Vec<(usize, Time)> = Vec::new();
        loop {
            wake_first_completion(dev, &workers, &mut waiting, &mut wake)?;
            let Some(Reverse((t, w))) = wake.pop() else { break };
            if t < start {
                wake.push(Reverse((start, w)));
                continue;
            }
            dev.advance_to(t);
            let mut now = t;
            loop {
                if workers[w].job.is_none() {
                    if current == batches.len() {
                        break; // all batches done: the worker retires
                    }
                    if next_table == n_tables {
                        idle.push(w); // nothing left in this batch: wait for the next one
                        break;
                    }
                    let (idx, offs) = &batches[current].tables[next_table];
                    let job = SlsJob::new(opts.path, &self.tables.tables[next_table], idx.clone(), offs, workers[w].qid)?;
                    workers[w].job = Some(job);
                    next_table += 1;
                }
                let job = workers[w].job.as_mut().expect("set above");
                let table = &self.tables.tables[job.table];
                let mut env = Env { dev, p: &self.params, stats: &mut result.stats };
                match job.resume(&mut env, table, &mut self.caches[table.id as usize], now)? {
                    Step::At(at) => {
                        wake.push(Reverse((at, w)));
                        break;
                    }
                    Step::Wait(not_before) => {
                        waiting.push((w, not_before));
                        break;
                    }
                    Step::Done(at) => {
                        let job = workers[w].job.take().expect("running");
                        let t_id = job.table;
                        let out = job.into_output();
                        if opts.keep_outputs {
                            outputs[current][t_id] = out;
                        }
                        unfinished -= 1;
                        if unfinished == 0 {
                            // The batch's SLS is done at `at`: the dense stage takes it when free.
                            let cycles = dense_flops[current] / flops_per_cycle;
                            let dense_start = at.max(dense_free);
                            let done = dev.host().compute(dense_start, cycles, dense_flops[current], cores);
                            dense_free = done;
                            result.mlp_cycles += cycles;
                            result.batches[current] = BatchTiming { taken: start, sls_done: at, done };
                            current += 1;
                            next_table = 0;
                            unfinished = n_tables;
                            // Pipelined: the next batch's SLS starts once this batch has entered the dense
                            // stage (a one-batch hand-off, so latencies stay bounded); else after its dense part.
                            start = if opts.pipelined { dense_start } else { done };
                            for i in idle.drain(..) {
                                wake.push(Reverse((start, i)));
                            }
                            wake.push(Reverse((start, w)));
                            break;
                        }
                        if at > now {
                            wake.push(Reverse((at, w)));
                            break;
                        }
                        now = at;
                    }
                }
            }
        }
        if opts.keep_outputs {
            result.outputs = outputs;
        }
        for c in &self.caches {
            let (l, p) = (c.lru_stats(), c.partition_stats());
            result.lru.hits += l.hits;
            result.lru.misses += l.misses;
            result.partition.hits += p.hits;
            result.partition.misses += p.misses;
        }
        result.finished = result.batches.iter().map(|b| b.done).max().unwrap_or(t0);
        dev.advance_to(result.finished);
        Ok(result)
    }
}

fn lost(qid: u16) -> HostError {
    HostError::Invalid(format!("queue {qid} lost a completion"))
}

/// Moves the waiting worker whose queue completes first onto the wake heap, finding that completion without
/// running the device's event loop past the earliest timed wake (a worker that will submit then) or past the
/// completion itself, so no worker's submission arrives in the scheduler's past.
fn wake_first_completion(
    dev: &mut Device,
    workers: &[Worker],
    waiting: &mut Vec<(usize, Time)>,
    wake: &mut BinaryHeap<Reverse<(Time, usize)>>,
) -> Result<(), HostError> {
    if waiting.is_empty() {
        return Ok(());
    }
    let limit = wake.peek().map_or(Time::MAX, |r| r.0 .0);
    let qids: Vec<u16> = waiting.iter().map(|&(w, _)| workers[w].qid).collect();
    match dev.next_completion_before_any(&qids, limit) {
        Some((qid, c)) => {
            let i = qids.iter().position(|&q| q == qid).expect("one of the waiting queues");
            let (w, not_before) = waiting.swap_remove(i);
            wake.push(Reverse((c.max(not_before), w)));
        }
        None if wake.is_empty() => return Err(lost(qids[0])),
        None => {}
    }
    Ok(())
}
