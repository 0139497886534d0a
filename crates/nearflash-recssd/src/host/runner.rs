//! Inference batches through the SLS paths and the dense part, in virtual time (paper §4.2 "Multi-threading and
//! Pipelining", §6.2-6.4).
//!
//! * **Sequential** (the paper's naive configuration): one SLS worker runs every table of a batch in turn, then
//!   the dense part runs, then the next batch starts.
//! * **Pipelined**: a pool of SLS workers, one I/O queue pair each (the paper matches workers to the driver's
//!   queues), each taking whole batches; a batch whose tables are done goes to the dense stage (one run
//!   instance, `host_mlp_cores` cores), which works batches in the order they arrive while the workers go on.
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
use nearflash_core::engine::Time;
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
    batch: Option<usize>,
    table: usize,
    job: Option<SlsJob>,
    outputs: Vec<Vec<f32>>,
    taken: Time,
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
    /// time; returns the pooled vectors and advances the device clock to the end.
    pub fn sls(
        &mut self,
        dev: &mut Device,
        table: usize,
        indices: Vec<u64>,
        offsets: &[u64],
        path: SlsPath,
    ) -> Result<(Vec<f32>, JobStats), HostError> {
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
                Step::Done(at) => {
                    env.dev.advance_to(at);
                    return Ok((job.into_output(), stats));
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
        let n_workers = if opts.pipelined { self.queues.len() } else { 1 };
        let t0 = dev.now();
        let mut workers: Vec<Worker> = self.queues[..n_workers]
            .iter()
            .map(|&qid| Worker { qid, batch: None, table: 0, job: None, outputs: Vec::new(), taken: t0 })
            .collect();
        let mut wake: BinaryHeap<Reverse<(Time, usize)>> = (0..n_workers).map(|w| Reverse((t0, w))).collect();
        let mut result = RunResult { batches: vec![BatchTiming::default(); batches.len()], started: t0, ..Default::default() };
        if opts.keep_outputs {
            result.outputs = vec![Vec::new(); batches.len()];
        }
        let mut next_batch = 0usize;
        let mut dense_free = t0;
        let (flops_per_cycle, cores) = (self.params.host_mlp_flops_per_cycle, self.params.host_mlp_cores as u32);
        while let Some(Reverse((t, w))) = wake.pop() {
            dev.advance_to(t);
            let wk = &mut workers[w];
            if wk.batch.is_none() {
                if next_batch == batches.len() {
                    continue; // nothing left: the worker retires
                }
                *wk = Worker { qid: wk.qid, batch: Some(next_batch), table: 0, job: None, outputs: Vec::new(), taken: t };
                next_batch += 1;
            }
            let b = wk.batch.expect("set above");
            loop {
                if wk.job.is_none() {
                    if wk.table == self.tables.len() {
                        // SLS of the batch done at t: the dense stage takes it when free.
                        let cycles = dense_flops[b] / flops_per_cycle;
                        let c = dev.core_mut();
                        let done = c.host.compute(&mut c.res, &mut c.ledger, t.max(dense_free), cycles, dense_flops[b], cores);
                        dense_free = done;
                        result.mlp_cycles += cycles;
                        result.batches[b] = BatchTiming { taken: wk.taken, sls_done: t, done };
                        if opts.keep_outputs {
                            result.outputs[b] = std::mem::take(&mut wk.outputs);
                        }
                        wk.batch = None;
                        wake.push(Reverse((if opts.pipelined { t } else { done }, w)));
                        break;
                    }
                    let (idx, offs) = &batches[b].tables[wk.table];
                    let table = &self.tables.tables[wk.table];
                    wk.job = Some(SlsJob::new(opts.path, table, idx.clone(), offs, wk.qid)?);
                }
                let job = wk.job.as_mut().expect("set above");
                let table = &self.tables.tables[job.table];
                let mut env = Env { dev, p: &self.params, stats: &mut result.stats };
                match job.resume(&mut env, table, &mut self.caches[table.id as usize], t)? {
                    Step::At(at) => {
                        wake.push(Reverse((at, w)));
                        break;
                    }
                    Step::Done(at) => {
                        let out = wk.job.take().expect("running").into_output();
                        if opts.keep_outputs {
                            wk.outputs.push(out);
                        }
                        wk.table += 1;
                        if at > t {
                            wake.push(Reverse((at, w)));
                            break;
                        }
                    }
                }
            }
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
