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
use crate::ndp_wire::{request_slba, NdpConfig, WireLimits, HEADER_BYTES, PAIR_BYTES};
use crate::params::RecssdParams;
use crate::partition::SplitRequest;
use crate::sls::{add_row, bag_bounds, check_indices, embedding_bag_sum, RowSource};
use nearflash_core::ctrl::DataBuf;
use nearflash_core::engine::Time;
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
        let c = self.dev.core_mut();
        // Energy: one instruction per cycle (assumed IPC of 1 for this bookkeeping code).
        c.host.compute(&mut c.res, &mut c.ledger, ready, cycles, cycles, 1)
    }

    /// Summing `rows` rows already in the core's caches (rows just DMA'd in, partial sums).
    fn sum_cycles(&self, rows: usize, dim: usize) -> f64 {
        (rows * dim) as f64 / self.p.host_sum_floats_per_cycle
    }

    /// Gathering and summing `rows` rows held in host DRAM (the DRAM path's tables, the baseline's LRU, the static
    /// partition) at the SLS operator's DRAM rate.
    fn dram_rows_cycles(&self, rows: usize, dim: usize) -> f64 {
        (rows * dim * 4) as f64 / self.p.host_dram_sls_bandwidth * self.dev.core().host.cpu_hz()
    }
}

/// When to resume a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Resume at this time.
    At(Time),
    /// Finished at this time; the pooled result is ready.
    Done(Time),
}

/// One table's SLS for one batch.
pub struct SlsJob {
    pub table: usize,
    qid: u16,
    dim: usize,
    indices: Vec<u64>,
    bounds: Vec<usize>,
    out: Vec<f32>,
    cycles: f64,
    kind: Kind,
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
        let bounds = bag_bounds(offsets, indices.len(), false).map_err(|e| HostError::Invalid(e.to_string()))?;
        check_indices(&indices, table.layout.rows() as usize).map_err(|e| HostError::Invalid(e.to_string()))?;
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
        Ok(Self { table: table.id as usize, qid, dim, indices, bounds, out: vec![0.0; bags * dim], cycles: 0.0, kind })
    }

    /// The pooled vectors (`bags x dim`), once done.
    pub fn into_output(self) -> Vec<f32> {
        self.out
    }

    /// Runs the job at `now` (the device clock) until it must wait.
    pub fn resume(
        &mut self,
        env: &mut Env<'_>,
        table: &DeviceTable,
        caches: &mut TableCaches,
        now: Time,
    ) -> Result<Step, HostError> {
        match &mut self.kind {
            Kind::Dram => {
                env.stats.lookups += self.indices.len() as u64;
                let offsets: Vec<u64> = self.bounds[..self.bounds.len() - 1].iter().map(|&b| b as u64).collect();
                self.out = embedding_bag_sum(&table.rows, &self.indices, &offsets, None, false)
                    .map_err(|e| HostError::Invalid(e.to_string()))?;
                let cycles = env.dram_rows_cycles(self.indices.len(), self.dim);
                Ok(Step::Done(env.cpu(now, cycles)))
            }
            Kind::Baseline(_) => self.resume_baseline(env, table, caches, now),
            Kind::Ndp(_) => self.resume_ndp(env, table, caches, now),
        }
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

    fn resume_baseline(
        &mut self,
        env: &mut Env<'_>,
        table: &DeviceTable,
        caches: &mut TableCaches,
        now: Time,
    ) -> Result<Step, HostError> {
        let Kind::Baseline(mut b) = std::mem::replace(&mut self.kind, Kind::Dram) else { unreachable!() };
        let step = self.baseline_steps(&mut b, env, table, caches, now);
        self.kind = Kind::Baseline(b);
        step
    }

    fn baseline_steps(
        &mut self,
        b: &mut Baseline,
        env: &mut Env<'_>,
        table: &DeviceTable,
        caches: &mut TableCaches,
        now: Time,
    ) -> Result<Step, HostError> {
        let qd = env.p.baseline_queue_depth as usize;
        while let Some(c) = env.dev.reap(self.qid) {
            HostError::check(c.cqe.status(), c.cqe.dw0, &format!("baseline read of table {}", table.id))?;
            if let Some((row, values)) = b.inflight.remove(&c.cqe.cid) {
                for bag in b.waiting.remove(&row).unwrap_or_default() {
                    self.add(bag as usize, &values);
                    self.cycles += env.sum_cycles(1, self.dim);
                }
                if let Some(l) = caches.lru.as_mut() {
                    l.insert(row, values);
                }
            }
        }
        while b.pos < self.indices.len() && b.inflight.len() < qd {
            let (row, bag) = (self.indices[b.pos], b.bag_of[b.pos]);
            if !b.pending_miss {
                env.stats.lookups += 1;
                self.cycles += env.p.host_lookup_cycles;
                if let Some(values) = caches.lru.as_mut().and_then(|l| l.get(row)) {
                    let values = values.clone();
                    self.add(bag as usize, &values);
                    self.cycles += env.dram_rows_cycles(1, self.dim);
                    b.pos += 1;
                    continue;
                }
                if let Some(w) = b.waiting.get_mut(&row) {
                    w.push(bag); // already being read: share the read
                    b.pos += 1;
                    continue;
                }
                b.pending_miss = true;
            }
            let t = self.pay(env, now);
            if t > now {
                return Ok(Step::At(t));
            }
            let (cid, values) = read_row(env, table, row, self.qid)?;
            b.inflight.insert(cid, (row, values));
            b.waiting.insert(row, vec![bag]);
            b.pending_miss = false;
            b.pos += 1;
        }
        if b.pos == self.indices.len() && b.inflight.is_empty() {
            return Ok(Step::Done(self.pay(env, now)));
        }
        let next = env.dev.next_completion_time(self.qid).ok_or_else(|| {
            HostError::Invalid(format!("queue {} lost a completion of table {}", self.qid, table.id))
        })?;
        let t = self.pay(env, now);
        Ok(Step::At(next.max(t)))
    }

    fn resume_ndp(
        &mut self,
        env: &mut Env<'_>,
        table: &DeviceTable,
        caches: &mut TableCaches,
        now: Time,
    ) -> Result<Step, HostError> {
        let Kind::Ndp(mut n) = std::mem::replace(&mut self.kind, Kind::Dram) else { unreachable!() };
        let step = self.ndp_steps(&mut n, env, table, caches, now);
        self.kind = Kind::Ndp(n);
        step
    }

    fn ndp_steps(
        &mut self,
        n: &mut Ndp,
        env: &mut Env<'_>,
        table: &DeviceTable,
        caches: &mut TableCaches,
        now: Time,
    ) -> Result<Step, HostError> {
        loop {
            match n.stage {
                NdpStage::Prepare => {
                    env.stats.lookups += self.indices.len() as u64;
                    let offsets: Vec<u64> = self.bounds[..self.bounds.len() - 1].iter().map(|&b| b as u64).collect();
                    let (ndp_idx, ndp_off) = match caches.partition.as_mut() {
                        Some((part, _)) => {
                            self.cycles += env.p.host_lookup_cycles * self.indices.len() as f64;
                            let s = part.split(&self.indices, &offsets).map_err(|e| HostError::Invalid(e.to_string()))?;
                            let io = (s.ndp_indices.clone(), s.ndp_offsets.clone());
                            n.split = Some(s);
                            io
                        }
                        None => (self.indices.clone(), offsets),
                    };
                    n.chunks = chunk_requests(table, &ndp_idx, &ndp_off, env.dev.lba_bytes() as usize)?;
                    let pairs: usize = n.chunks.iter().map(|c| c.pairs).sum();
                    self.cycles += env.p.host_config_pair_cycles * pairs as f64;
                    n.stage = NdpStage::Submit;
                    let t = self.pay(env, now);
                    if t > now {
                        return Ok(Step::At(t));
                    }
                }
                NdpStage::Submit => {
                    let Some(chunk) = n.chunks.get(n.next_chunk) else {
                        n.stage = NdpStage::Merge;
                        continue;
                    };
                    if chunk.pairs == 0 {
                        n.next_chunk += 1; // every result of the chunk is zero (or held by the host)
                        continue;
                    }
                    let lba = env.dev.lba_bytes() as usize;
                    let rid = u64::from(self.qid) % table_modulus(env.p);
                    let slba = request_slba(table.layout.start_lba(), rid, table_modulus(env.p))
                        .map_err(|e| HostError::Invalid(e.to_string()))?;
                    let config_cid = env.dev.next_cid(self.qid);
                    let nlb = (chunk.payload.len() / lba) as u32;
                    env.dev.submit(self.qid, config_sqe(config_cid, slba, nlb), DataBuf::ToDevice(&chunk.payload))?;
                    let result_cid = env.dev.next_cid(self.qid);
                    let mut result = vec![0u8; chunk.sectors as usize * lba];
                    let sqe = result_sqe(result_cid, slba, chunk.sectors);
                    env.dev.submit(self.qid, sqe, DataBuf::FromDevice(&mut result))?;
                    env.stats.ndp_requests += 1;
                    env.stats.ndp_pairs += chunk.pairs as u64;
                    n.inflight = Some(InFlight { config_cid, result_cid, config_done: false, result_done: false, result });
                    n.stage = NdpStage::Wait;
                }
                NdpStage::Wait => {
                    let f = n.inflight.as_mut().expect("waiting on a submitted request");
                    while let Some(c) = env.dev.reap(self.qid) {
                        let what = if c.cqe.cid == f.config_cid { "NDP config" } else { "NDP result read" };
                        HostError::check(c.cqe.status(), c.cqe.dw0, &format!("{what} of table {}", table.id))?;
                        f.config_done |= c.cqe.cid == f.config_cid;
                        f.result_done |= c.cqe.cid == f.result_cid;
                    }
                    if !(f.config_done && f.result_done) {
                        let next = env.dev.next_completion_time(self.qid).ok_or_else(|| {
                            HostError::Invalid(format!("queue {} lost an NDP completion", self.qid))
                        })?;
                        return Ok(Step::At(next));
                    }
                    let f = n.inflight.take().expect("present");
                    let chunk = &n.chunks[n.next_chunk];
                    let floats = chunk.bags * self.dim;
                    let base = chunk.first_bag * self.dim;
                    for (o, b) in self.out[base..base + floats].iter_mut().zip(f.result.chunks_exact(4)) {
                        *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                    }
                    n.next_chunk += 1;
                    n.stage = NdpStage::Submit;
                }
                NdpStage::Merge => {
                    if let (Some(s), Some((_, rows))) = (n.split.as_ref(), caches.partition.as_ref()) {
                        let bags = self.bounds.len() - 1;
                        for bag in 0..bags {
                            let end = s.host_offsets.get(bag + 1).map_or(s.host_slots.len(), |&e| e as usize);
                            for &slot in &s.host_slots[s.host_offsets[bag] as usize..end] {
                                let slot = slot as usize;
                                let row = &rows[slot * self.dim..(slot + 1) * self.dim];
                                add_row(&mut self.out[bag * self.dim..(bag + 1) * self.dim], row);
                            }
                        }
                        // Host rows gathered from DRAM and summed, then the SSD's partial sums added in.
                        self.cycles += env.dram_rows_cycles(s.host_slots.len(), self.dim) + env.sum_cycles(bags, self.dim);
                    }
                    return Ok(Step::Done(self.pay(env, now)));
                }
            }
        }
    }
}

fn table_modulus(p: &RecssdParams) -> u64 {
    p.request_modulus as u64
}

/// Submits a one-block Read of `row`'s block; returns its command id and the row's values (functional effects
/// happen at submission; the values are used once the read completes).
fn read_row(env: &mut Env<'_>, t: &DeviceTable, row: u64, qid: u16) -> Result<(u16, Box<[f32]>), HostError> {
    let loc = t.layout.locate(row).map_err(|e| HostError::Invalid(e.to_string()))?;
    let cid = env.dev.next_cid(qid);
    let sqe = Sqe::rw(opcode::READ, cid, loc.lba, 1);
    let dim = t.layout.dim() as usize;
    env.stats.reads += 1;
    if t.stored {
        let mut block = vec![0u8; env.dev.lba_bytes() as usize];
        env.dev.submit(qid, sqe, DataBuf::FromDevice(&mut block))?;
        let at = loc.byte_in_lba as usize;
        let values = block[at..at + dim * 4].chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        Ok((cid, values.collect()))
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
    let bounds = bag_bounds(offsets, indices.len(), false).map_err(|e| HostError::Invalid(e.to_string()))?;
    let bags = bounds.len() - 1;
    let row_bytes = table.layout.row_bytes() as usize;
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
            .map_err(|e| HostError::Invalid(e.to_string()))?;
        let mut payload = cfg.encode().map_err(|e| HostError::Invalid(e.to_string()))?;
        payload.resize(payload.len().div_ceil(lba_bytes) * lba_bytes, 0);
        let sectors = cfg.result_sectors(lba_bytes) as u32;
        chunks.push(Chunk { first_bag: first, bags: last - first, payload, pairs: ids.len(), sectors });
        first = last;
    }
    Ok(chunks)
}
