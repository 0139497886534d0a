//! One table's SparseLengthsSum on one SLS worker, as resumable steps: each `resume` runs at the worker's virtual
//! time (the device clock), may reap the worker's completions, submit commands on its queue and charge host CPU
//! work, and says when to resume next. Three paths:
//!
//! * **DRAM**: rows summed from host memory; time = rows x row bytes / the DRAM SLS bandwidth.
//! * **Baseline** (a COTS SSD): each lookup probes the host LRU; a miss is one 4 KiB NVMe Read of the row's block
//!   (the artifact's `unvme_read_embedding`), at most `baseline_queue_depth` in flight (1 in the artifact: each
//!   read waits for the previous); the row fills the LRU and is summed on the host.
//! * **NDP** (RecSSD): lookups held in the static partition are summed on the host; the rest become NDP configs
//!   (pairs sorted by id, split so results fit 256 sectors and pairs the 1 MiB config buffer), each sent as a
//!   config Write and a result Read back to back; the returned partial sums are merged with the host's.

use super::caches::TableCaches;
use super::tables::DeviceTable;
use super::HostError;
use crate::ndp_command::{config_sqe, result_sqe};
use crate::layout::read_f32s;
use crate::ndp_wire::{request_slba, NdpConfig, WireLimits, HEADER_BYTES, PAIR_BYTES};
use crate::params::RecssdParams;
use crate::partition::SplitRequest;
use crate::sls::{add_row, bag_bounds, check_indices, embedding_bag_sum, RowSource};
use nearflash_core::nvme::DataBuf;
use nearflash_core::ext::Time;
use nearflash_core::nvme::{opcode, Sqe};
use nearflash_core::Device;
use serde::Serialize;
use std::collections::HashMap;

/// How a table's lookups are served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SlsPath {
    Dram,
    Baseline,
    Ndp,
}

impl std::str::FromStr for SlsPath {
    type Err = HostError;
    fn from_str(s: &str) -> Result<Self, HostError> {
        match s {
            "dram" => Ok(SlsPath::Dram),
            "baseline" | "ssd" => Ok(SlsPath::Baseline),
            "ndp" | "recssd" => Ok(SlsPath::Ndp),
            _ => Err(HostError::Invalid(format!("SLS path {s:?}: expected dram, baseline or ndp"))),
        }
    }
}

/// Host-side work counters.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct JobStats {
    pub lookups: u64,
    /// Baseline 4 KiB reads submitted.
    pub reads: u64,
    /// NDP requests (config + result pairs) submitted.
    pub ndp_requests: u64,
    pub ndp_pairs: u64,
    /// Host cycles charged for SLS work (not the dense part).
    pub host_cycles: f64,
}

/// What a job needs from its surroundings.
pub struct Env<'a> {
    pub dev: &'a mut Device,
    pub p: &'a RecssdParams,
    pub stats: &'a mut JobStats,
}

impl Env<'_> {
    /// Charges `cycles` of host work on one core from `ready`; returns when done.
    pub fn cpu(&mut self, ready: Time, cycles: f64) -> Time {
        if cycles <= 0.0 {
            return ready;
        }
        self.stats.host_cycles += cycles;
        // Energy: one instruction per cycle (assumed IPC of 1 for this bookkeeping code).
        self.dev.host().compute(ready, cycles, cycles, 1)
    }

    /// Summing `rows` rows already in the core's caches (rows just DMA'd in, partial sums).
    fn sum_cycles(&self, rows: usize, dim: usize) -> f64 {
        (rows * dim) as f64 / self.p.host_sum_floats_per_cycle
    }

    /// Gathering and summing `rows` rows held in host DRAM (the DRAM path's tables, the baseline's LRU, the static
    /// partition) at the SLS operator's DRAM rate.
    fn dram_rows_cycles(&self, rows: usize, dim: usize) -> f64 {
        (rows * dim * 4) as f64 / self.p.host_dram_sls_bandwidth * self.dev.config().host.cpu_freq.0
    }
}

/// When to resume a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Resume at this time.
    At(Time),
    /// Resume at the next completion on the job's queue, no earlier than this time. The caller finds that
    /// completion without running the device past another worker's next submission (`Device::next_completion_before`),
    /// so that submission never arrives in the scheduler's past.
    Wait(Time),
    /// Finished at this time; the pooled result is ready.
    Done(Time),
}

/// One table's SLS for one batch.
pub struct SlsJob {
    pub table: usize,
    work: Work,
    kind: Kind,
}

/// What every path shares: the request, the pooled result being built and the host work not yet paid.
struct Work {
    qid: u16,
    dim: usize,
    indices: Vec<u64>,
    bounds: Vec<usize>,
    out: Vec<f32>,
    cycles: f64,
}

enum Kind {
    Dram,
    Baseline(Baseline),
    Ndp(Ndp),
}

#[derive(Default)]
struct Baseline {
    pos: usize,
    /// The lookup at `pos` missed and waits for a queue slot (do not probe it again).
    pending_miss: bool,
    inflight: HashMap<u16, (u64, Box<[f32]>)>,
    waiting: HashMap<u64, Vec<u32>>,
    bag_of: Vec<u32>,
    /// When each read completed on the device (its completion's time), in completion order: when its page crossed
    /// the device's link, which an array's shared host replays read by read.
    done: Vec<Time>,
}

#[derive(Default)]
struct Ndp {
    stage: NdpStage,
    split: Option<SplitRequest>,
    chunks: Vec<Chunk>,
    next_chunk: usize,
    inflight: Option<InFlight>,
}

#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum NdpStage {
    #[default]
    Prepare,
    Submit,
    Wait,
    Merge,
}

struct Chunk {
    first_bag: usize,
    bags: usize,
    payload: Vec<u8>,
    pairs: usize,
    sectors: u32,
}

struct InFlight {
    config_cid: u16,
    result_cid: u16,
    config_done: bool,
    result_done: bool,
    result: Vec<u8>,
}

impl SlsJob {
    /// A job over `indices` grouped by `offsets` (PyTorch convention) for table `table`, on queue `qid`.
    pub fn new(
        path: SlsPath,
        table: &DeviceTable,
        indices: Vec<u64>,
        offsets: &[u64],
        qid: u16,
    ) -> Result<Self, HostError> {
        let bounds = bag_bounds(offsets, indices.len(), false).map_err(HostError::invalid)?;
        check_indices(&indices, table.layout.rows() as usize).map_err(HostError::invalid)?;
        let dim = table.layout.dim() as usize;
        let bags = bounds.len() - 1;
        let kind = match path {
            SlsPath::Dram => Kind::Dram,
            SlsPath::Baseline => {
                let bag_of = (0..bags).flat_map(|b| std::iter::repeat_n(b as u32, bounds[b + 1] - bounds[b])).collect();
                Kind::Baseline(Baseline { bag_of, ..Baseline::default() })
            }
            SlsPath::Ndp => Kind::Ndp(Ndp::default()),
        };
        let work = Work { qid, dim, indices, bounds, out: vec![0.0; bags * dim], cycles: 0.0 };
        Ok(Self { table: table.id as usize, work, kind })
    }

    /// The pooled vectors (`bags x dim`), once done.
    pub fn into_output(self) -> Vec<f32> {
        self.work.out
    }

    /// When each of the baseline's reads completed on the device, in completion order (empty on the other paths).
    pub fn read_completions(&self) -> &[Time] {
        match &self.kind {
            Kind::Baseline(b) => &b.done,
            _ => &[],
        }
    }

    /// Runs the job at `now` (the device clock) until it must wait.
    pub fn resume(
        &mut self,
        env: &mut Env<'_>,
        table: &DeviceTable,
        caches: &mut TableCaches,
        now: Time,
    ) -> Result<Step, HostError> {
        let w = &mut self.work;
        match &mut self.kind {
            Kind::Dram => {
                env.stats.lookups += w.indices.len() as u64;
                w.out = embedding_bag_sum(&table.rows, &w.indices, &w.offsets(), None, false)
                    .map_err(HostError::invalid)?;
                let cycles = env.dram_rows_cycles(w.indices.len(), w.dim);
                Ok(Step::Done(env.cpu(now, cycles)))
            }
            Kind::Baseline(b) => b.steps(w, env, table, caches, now),
            Kind::Ndp(n) => n.steps(w, env, table, caches, now),
        }
    }
}

impl Work {
    /// The bags' start offsets (PyTorch convention).
    fn offsets(&self) -> Vec<u64> {
        self.bounds[..self.bounds.len() - 1].iter().map(|&b| b as u64).collect()
    }

    fn add(&mut self, bag: usize, row: &[f32]) {
        add_row(&mut self.out[bag * self.dim..(bag + 1) * self.dim], row);
    }

    /// Pays the host work accumulated so far from `now`; returns when it is done.
    fn pay(&mut self, env: &mut Env<'_>, now: Time) -> Time {
        let t = env.cpu(now, self.cycles);
        self.cycles = 0.0;
        t
    }
}

impl Baseline {
    /// The baseline path: LRU probes, then 4 KiB reads of the missing rows' blocks, summed as they complete.
    fn steps(
        &mut self,
        w: &mut Work,
        env: &mut Env<'_>,
        table: &DeviceTable,
        caches: &mut TableCaches,
        now: Time,
    ) -> Result<Step, HostError> {
        let qd = env.p.baseline_queue_depth as usize;
        while let Some(c) = env.dev.reap(w.qid) {
            HostError::check_on(env.dev, w.qid, c.cqe.cid, c.cqe.status(), c.cqe.dw0, &format!("baseline read of table {}", table.id))?;
            if let Some((row, values)) = self.inflight.remove(&c.cqe.cid) {
                self.done.push(c.time);
                for bag in self.waiting.remove(&row).unwrap_or_default() {
                    w.add(bag as usize, &values);
                    w.cycles += env.sum_cycles(1, w.dim);
                }
                if let Some(l) = caches.lru.as_mut() {
                    l.insert(row, values);
                }
            }
        }
        while self.pos < w.indices.len() && self.inflight.len() < qd {
            let (row, bag) = (w.indices[self.pos], self.bag_of[self.pos]);
            if !self.pending_miss {
                env.stats.lookups += 1;
                w.cycles += env.p.host_lookup_cycles;
                if let Some(values) = caches.lru.as_mut().and_then(|l| l.get(row)) {
                    let values = values.clone();
                    w.add(bag as usize, &values);
                    w.cycles += env.dram_rows_cycles(1, w.dim);
                    self.pos += 1;
                    continue;
                }
                if let Some(waiters) = self.waiting.get_mut(&row) {
                    waiters.push(bag); // already being read: share the read
                    self.pos += 1;
                    continue;
                }
                self.pending_miss = true;
            }
            let t = w.pay(env, now);
            if t > now {
                return Ok(Step::At(t));
            }
            let (cid, values) = read_row(env, table, row, w.qid)?;
            self.inflight.insert(cid, (row, values));
            self.waiting.insert(row, vec![bag]);
            self.pending_miss = false;
            self.pos += 1;
        }
        if self.pos == w.indices.len() && self.inflight.is_empty() {
            return Ok(Step::Done(w.pay(env, now)));
        }
        Ok(Step::Wait(w.pay(env, now)))
    }
}

impl Ndp {
    /// The NDP path: the static partition's split, then one config Write and result Read per chunk, merged.
    fn steps(
        &mut self,
        w: &mut Work,
        env: &mut Env<'_>,
        table: &DeviceTable,
        caches: &mut TableCaches,
        now: Time,
    ) -> Result<Step, HostError> {
        loop {
            match self.stage {
                NdpStage::Prepare => {
                    env.stats.lookups += w.indices.len() as u64;
                    let offsets = w.offsets();
                    let (ndp_idx, ndp_off) = match caches.partition.as_mut() {
                        Some((part, _)) => {
                            w.cycles += env.p.host_lookup_cycles * w.indices.len() as f64;
                            let s = part.split(&w.indices, &offsets).map_err(HostError::invalid)?;
                            let io = (s.ndp_indices.clone(), s.ndp_offsets.clone());
                            self.split = Some(s);
                            io
                        }
                        None => (w.indices.clone(), offsets),
                    };
                    self.chunks = chunk_requests(table, &ndp_idx, &ndp_off, env.dev.lba_bytes() as usize)?;
                    let pairs: usize = self.chunks.iter().map(|c| c.pairs).sum();
                    w.cycles += env.p.host_config_pair_cycles * pairs as f64;
                    self.stage = NdpStage::Submit;
                    let t = w.pay(env, now);
                    if t > now {
                        return Ok(Step::At(t));
                    }
                }
                NdpStage::Submit => {
                    let Some(chunk) = self.chunks.get(self.next_chunk) else {
                        self.stage = NdpStage::Merge;
                        continue;
                    };
                    if chunk.pairs == 0 {
                        self.next_chunk += 1; // every result of the chunk is zero (or held by the host)
                        continue;
                    }
                    let lba = env.dev.lba_bytes() as usize;
                    let rid = u64::from(w.qid) % table_modulus(env.p);
                    let slba = request_slba(table.layout.start_lba(), rid, table_modulus(env.p))
                        .map_err(HostError::invalid)?;
                    let config_cid = env.dev.next_cid(w.qid);
                    let nlb = (chunk.payload.len() / lba) as u32;
                    env.dev.submit(w.qid, config_sqe(config_cid, slba, nlb), DataBuf::ToDevice(&chunk.payload))?;
                    let result_cid = env.dev.next_cid(w.qid);
                    let mut result = vec![0u8; chunk.sectors as usize * lba];
                    let sqe = result_sqe(result_cid, slba, chunk.sectors);
                    env.dev.submit(w.qid, sqe, DataBuf::FromDevice(&mut result))?;
                    env.stats.ndp_requests += 1;
                    env.stats.ndp_pairs += chunk.pairs as u64;
                    self.inflight = Some(InFlight { config_cid, result_cid, config_done: false, result_done: false, result });
                    self.stage = NdpStage::Wait;
                }
                NdpStage::Wait => {
                    let f = self.inflight.as_mut().expect("waiting on a submitted request");
                    while let Some(c) = env.dev.reap(w.qid) {
                        let what = if c.cqe.cid == f.config_cid { "NDP config" } else { "NDP result read" };
                        HostError::check_on(env.dev, w.qid, c.cqe.cid, c.cqe.status(), c.cqe.dw0, &format!("{what} of table {}", table.id))?;
                        f.config_done |= c.cqe.cid == f.config_cid;
                        f.result_done |= c.cqe.cid == f.result_cid;
                    }
                    if !(f.config_done && f.result_done) {
                        return Ok(Step::Wait(now));
                    }
                    let f = self.inflight.take().expect("present");
                    let chunk = &self.chunks[self.next_chunk];
                    let floats = chunk.bags * w.dim;
                    let base = chunk.first_bag * w.dim;
                    read_f32s(&f.result, &mut w.out[base..base + floats]);
                    self.next_chunk += 1;
                    self.stage = NdpStage::Submit;
                }
                NdpStage::Merge => {
                    if let (Some(s), Some((_, rows))) = (self.split.as_ref(), caches.partition.as_ref()) {
                        let bags = w.bounds.len() - 1;
                        for bag in 0..bags {
                            let end = s.host_offsets.get(bag + 1).map_or(s.host_slots.len(), |&e| e as usize);
                            for &slot in &s.host_slots[s.host_offsets[bag] as usize..end] {
                                let slot = slot as usize;
                                w.add(bag, &rows[slot * w.dim..(slot + 1) * w.dim]);
                            }
                        }
                        // Host rows gathered from DRAM and summed, then the SSD's partial sums added in.
                        w.cycles += env.dram_rows_cycles(s.host_slots.len(), w.dim) + env.sum_cycles(bags, w.dim);
                    }
                    return Ok(Step::Done(w.pay(env, now)));
                }
            }
        }
    }
}

fn table_modulus(p: &RecssdParams) -> u64 {
    p.request_modulus
}

/// Submits a one-block Read of `row`'s block; returns its command id and the row's values (functional effects
/// happen at submission; the values are used once the read completes).
fn read_row(env: &mut Env<'_>, t: &DeviceTable, row: u64, qid: u16) -> Result<(u16, Box<[f32]>), HostError> {
    let loc = t.layout.locate(row).map_err(HostError::invalid)?;
    let cid = env.dev.next_cid(qid);
    let sqe = Sqe::rw(opcode::READ, cid, loc.lba, 1);
    let dim = t.layout.dim() as usize;
    env.stats.reads += 1;
    if t.stored {
        let mut block = vec![0u8; env.dev.lba_bytes() as usize];
        env.dev.submit(qid, sqe, DataBuf::FromDevice(&mut block))?;
        let at = loc.byte_in_lba as usize;
        let mut values = vec![0.0f32; dim];
        let format = t.layout.format().map_err(HostError::invalid)?;
        format.decode_row(&block[at..at + t.layout.row_bytes() as usize], &mut values);
        Ok((cid, values.into()))
    } else {
        env.dev.submit(qid, sqe, DataBuf::None)?;
        let mut scratch = vec![0.0f32; dim];
        Ok((cid, t.rows.row(row as usize, &mut scratch).into()))
    }
}

/// Splits a request into NDP configs whose results fit the result scratchpad and whose pairs fit the config
/// buffer, cutting at bag boundaries; payloads are padded to whole blocks.
fn chunk_requests(
    table: &DeviceTable,
    indices: &[u64],
    offsets: &[u64],
    lba_bytes: usize,
) -> Result<Vec<Chunk>, HostError> {
    let limits = WireLimits::default();
    let bounds = bag_bounds(offsets, indices.len(), false).map_err(HostError::invalid)?;
    let bags = bounds.len() - 1;
    let row_bytes = table.layout.dim() as usize * 4; // results are fp32 sums
    let max_bags = (limits.max_result_sectors * limits.result_sector_bytes / row_bytes).max(1);
    let max_pairs = (limits.config_buffer_bytes - HEADER_BYTES) / PAIR_BYTES;
    let mut chunks = Vec::new();
    let mut first = 0usize;
    while first < bags {
        let mut last = first;
        while last < bags && last - first < max_bags && bounds[last + 1] - bounds[first] <= max_pairs {
            last += 1;
        }
        if last == first {
            return Err(HostError::Invalid(format!(
                "bag {first} of table {} has {} ids; one NDP config holds at most {max_pairs}",
                table.id,
                bounds[first + 1] - bounds[first]
            )));
        }
        let ids: Vec<u32> = indices[bounds[first]..bounds[last]]
            .iter()
            .map(|&i| u32::try_from(i).map_err(|_| HostError::Invalid(format!("row id {i} does not fit the wire's u32"))))
            .collect::<Result<_, _>>()?;
        let offs: Vec<u32> = (first..last).map(|b| (bounds[b] - bounds[first]) as u32).collect();
        let cfg = NdpConfig::from_bags(table.id, table.layout.dim(), &ids, &offs)
            .map_err(HostError::invalid)?
            .with_attribute_size(table.layout.attribute_bytes());
        let mut payload = cfg.encode().map_err(HostError::invalid)?;
        payload.resize(payload.len().div_ceil(lba_bytes) * lba_bytes, 0);
        let sectors = cfg.result_sectors(lba_bytes) as u32;
        chunks.push(Chunk { first_bag: first, bags: last - first, payload, pairs: ids.len(), sectors });
        first = last;
    }
    Ok(chunks)
}
