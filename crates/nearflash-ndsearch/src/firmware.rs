//! SearSSD's firmware on the emulated device (extension `ndsearch`): the graph's LUNCSR arrays in controller DRAM,
//! its vectors programmed by physical address into the extension-reserved blocks (multi-plane mapping of
//! `luncsr`), and the lock-step batch search run through the device's clock:
//!
//! - `DEPLOY` (0xD8, data to the device: a `deploy` blob): checks the whole blob and the reserved area's room, then
//!   erases the previous deployment's blocks and programs the vertex pages; the LUN array comes from the mapping,
//!   the BLK array from the reserved blocks used.
//! - `SEARCH` (0xD9, data to the device: k u32 | ef u32 | nq u32 | entries[nq] u32 | queries, the index's dtype):
//!   per batch of `batch` queries and per iteration, the Vgenerator + Allocator run on the controller logic
//!   (`vgen` unit, 800 MHz), each page read is a `<Search Page>` command to the LUN's SiN unit: the page is sensed,
//!   the unit's MAC group measures the page's pairs on the page register's real data, and only the
//!   (query, vertex, distance) tuples cross the channel; the tuples go over the private PCIe 3.0 x4 link (`link`
//!   unit) to the FPGA's bitonic sorter (`fpga` unit), which returns the top lists. The Allocator of the next
//!   iteration starts when the tuples are in and waits for the sort (NDSearch's pipelining). dw0 = batches.
//! - `RESULTS` (0xDA, data to the host): the last search's `k` (id u32, distance f32) per query, nearest first.
//!
//! Distances are applied exactly as `lockstep::LockstepRun` applies them, so results equal the host search's.

use std::collections::HashMap;

use nearflash_core::ext::{UnitHandle, UnitSpec};
use nearflash_core::ext::Time;
use nearflash_core::ext::{AttachCtx, DataBuf, ExecCtx, ExtCompletion, Extension, Sqe, Status};
use nearflash_core::ext::Geometry as NandGeometry;
use nearflash_core::config::ExtParams;
use nearflash_core::SimError;
use serde::Serialize;

use crate::allocate::{allocate, Pair};
use crate::command::SearchPage;
use crate::deploy::{decode, decode_with, Deployment};
use crate::distance::{distance, Dtype, Metric, VecRef};
use crate::lockstep::{LockstepConfig, LockstepRun};
use crate::luncsr::{Geometry, LunCsr};
use crate::reorder::positions;
use crate::timing::{bitonic_ops, SearssdParams};

pub const NAME: &str = "ndsearch";
pub const OP_DEPLOY: u8 = 0xD8;
pub const OP_SEARCH: u8 = 0xD9;
pub const OP_RESULTS: u8 = 0xDA;

/// Counters over the measurement window.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Stats {
    pub deploys: u64,
    pub pages_programmed: u64,
    pub searches: u64,
    pub queries: u64,
    pub batches: u64,
    pub iterations: u64,
    /// Distances measured (needed + speculative) and `<Search Page>` commands (one per page read).
    pub distances: u64,
    pub search_page_commands: u64,
    /// Multi-plane read operations (one per page row of a LUN in an iteration).
    pub multi_plane_reads: u64,
    /// Pages whose hard decode beside the plane failed and were soft-decoded by the FTL.
    pub soft_decodes: u64,
    pub shared_pages: u64,
    pub tuple_bytes: u64,
    pub rejected: u64,
    /// Busy time of each stage summed over iterations (ns).
    pub allocating_ns: u64,
    pub searching_ns: u64,
    pub sorting_ns: u64,
}

struct Deployed {
    metric: Metric,
    dtype: Dtype,
    dim: usize,
    order: Vec<u32>,
    pos: Vec<u32>,
    layout: LunCsr,
    /// The deploy blob without its vectors (saved with the image).
    state: Vec<u8>,
}

struct Units {
    sin: UnitHandle,
    vgen: UnitHandle,
    fpga: UnitHandle,
    link: UnitHandle,
}

/// The SearSSD firmware.
pub struct SearSsd {
    overrides: serde_json::Value,
    p: SearssdParams,
    units: Option<Units>,
    deployed: Option<Deployed>,
    results: Vec<u8>,
    stats: Stats,
    /// The device's flash geometry and reserved blocks per plane (known at attach).
    nand: Option<NandGeometry>,
    reserved: usize,
}

impl SearSsd {
    pub fn new(overrides: serde_json::Value) -> SearSsd {
        SearSsd { overrides, p: SearssdParams::default(), units: None, deployed: None, results: Vec::new(), stats: Stats::default(), nand: None, reserved: 0 }
    }

    /// Number of deployed vectors (0: none).
    pub fn deployed_len(&self) -> usize {
        self.deployed.as_ref().map_or(0, |d| d.order.len())
    }
}

/// The LUNCSR geometry of the device: one LUN per die.
fn device_geometry(g: &NandGeometry) -> Geometry {
    Geometry {
        luns: g.dies() as usize,
        planes_per_lun: (g.planes() / g.dies()) as usize,
        blocks_per_plane: g.blocks_per_plane as usize,
        pages_per_block: g.pages_per_block as usize,
        page_bytes: g.page_size as usize,
    }
}

/// Lays the deployment out on the `reserved` blocks per plane: BLK array entries are the reserved blocks' indices
/// in their plane.
fn layout_for(g: &NandGeometry, reserved: usize, d: &Deployment) -> Result<LunCsr, Status> {
    let g = device_geometry(g);
    let mut l = LunCsr::build(&d.graph, d.vector_bytes(), g).map_err(|_| Status::CAPACITY_EXCEEDED)?;
    if l.blocks_used > reserved {
        return Err(Status::CAPACITY_EXCEEDED);
    }
    for (i, b) in l.blk.iter_mut().enumerate() {
        *b = (g.blocks_per_plane - reserved + i % l.blocks_used) as u32;
    }
    Ok(l)
}

/// Physical page of the page row `page` of (`lun`, `plane`), from the BLK array (no FTL translation).
fn ppn_of(g: &NandGeometry, l: &LunCsr, lun: u32, plane: u32, page: u32) -> u64 {
    let ppb = l.geometry.pages_per_block as u32;
    let planes = l.geometry.planes_per_lun;
    let idx = (lun as usize * planes + plane as usize) * l.blocks_used + (page / ppb) as usize;
    let global_plane = lun * planes as u32 + plane;
    g.block_first_ppn(g.block_id(global_plane, l.blk[idx])) + u64::from(page % ppb)
}

/// A deployment without its vectors (from `save`) as the firmware's state.
fn deployed_from(g: &NandGeometry, reserved: usize, state: &[u8]) -> Result<Deployed, Status> {
    let d = decode_with(state, false).map_err(|_| Status::INVALID_FIELD)?;
    let layout = layout_for(g, reserved, &d)?;
    let pos = positions(&d.order);
    Ok(Deployed { metric: d.metric, dtype: d.dtype, dim: d.dim, order: d.order, pos, layout, state: state.to_vec() })
}

impl SearSsd {
    fn deploy(&mut self, ctx: &mut ExecCtx<'_>, blob: &[u8]) -> Result<Time, Status> {
        let geo = self.nand.clone().expect("attached");
        let d = decode(blob).map_err(|e| ctx.explain(Status::INVALID_FIELD, None, format!("DEPLOY: the index does not decode: {e}")))?;
        let layout = layout_for(&geo, self.reserved, &d).map_err(|s| {
            let why = format!("DEPLOY: {} vectors and their graph do not fit the {} reserved blocks per plane", d.order.len(), self.reserved);
            ctx.explain(s, None, why)
        })?;
        let mut t = ctx.from_host(ctx.start, blob.len() as u64);
        // The previous deployment's blocks are erased only now that the new one is known to fit.
        if let Some(old) = self.deployed.take() {
            let planes = old.layout.geometry.planes_per_lun;
            let mut done = t;
            for (i, &b) in old.layout.blk.iter().enumerate() {
                let global_plane = (i / old.layout.blocks_used) as u32;
                debug_assert!((global_plane as usize) < old.layout.geometry.luns * planes);
                done = done.max(ctx.erase_block(t, geo.block_id(global_plane, b))?);
            }
            t = done;
        }
        let vb = layout.vector_bytes;
        let mut done = ctx.dram(t, (blob.len() - d.vectors.len()) as u64);
        let mut page = vec![0u8; layout.geometry.page_bytes];
        for (slot, chunk) in d.vectors.chunks(layout.vpp * vb).enumerate() {
            page.fill(0);
            page[..chunk.len()].copy_from_slice(chunk);
            let s = layout.slot((slot * layout.vpp) as u32);
            let ppn = ppn_of(&geo, &layout, s.lun, s.plane, s.page);
            done = done.max(ctx.program_page(t, ppn, &page, &[])?);
            self.stats.pages_programmed += 1;
        }
        let state = blob[..blob.len() - d.vectors.len()].to_vec();
        let pos = positions(&d.order);
        self.deployed = Some(Deployed { metric: d.metric, dtype: d.dtype, dim: d.dim, order: d.order, pos, layout, state });
        self.stats.deploys += 1;
        Ok(done)
    }

    fn search(&mut self, ctx: &mut ExecCtx<'_>, req: &[u8]) -> Result<(u32, Time), Status> {
        let Some(dep) = self.deployed.as_ref() else {
            return Err(ctx.explain(Status::SEQUENCE_ERROR, None, "SEARCH before any DEPLOY: no index on the device"));
        };
        let word = |i: usize| req.get(i * 4..i * 4 + 4).map(|b| u32::from_le_bytes(b.try_into().unwrap()) as usize);
        let (Some(k), Some(ef), Some(nq)) = (word(0), word(1), word(2)) else {
            return Err(ctx.explain(Status::INVALID_FIELD, None, format!("SEARCH request of {} bytes: shorter than its 12-byte header", req.len())));
        };
        let n = dep.order.len();
        let vb = dep.dim * dep.dtype.bytes();
        let bad = if k == 0 || k > n {
            Some(format!("k = {k}: expected 1..={n} (the deployed vectors)"))
        } else if ef == 0 || ef > crate::index::MAX_EF {
            Some(format!("ef = {ef}: expected 1..={}", crate::index::MAX_EF))
        } else if nq == 0 {
            Some("no queries (nq = 0)".to_string())
        } else if req.len() as u128 != 12 + nq as u128 * (4 + vb as u128) {
            Some(format!("{} bytes: {nq} queries of {} dims ({vb} B each) with entry points take {}", req.len(), dep.dim, 12 + nq as u128 * (4 + vb as u128)))
        } else {
            None
        };
        if let Some(why) = bad {
            return Err(ctx.explain(Status::INVALID_FIELD, None, format!("SEARCH: {why}")));
        }
        let entries: Vec<u32> = (0..nq).map(|i| word(3 + i).unwrap() as u32).collect();
        let queries = &req[12 + 4 * nq..];
        if let Some(e) = entries.iter().find(|&&e| e as usize >= n) {
            return Err(ctx.explain(Status::INVALID_FIELD, None, format!("SEARCH: entry point {e} is not one of the {n} vertices")));
        }
        if dep.dtype == Dtype::F32 && queries.chunks_exact(4).any(|c| !f32::from_le_bytes(c.try_into().unwrap()).is_finite()) {
            return Err(ctx.explain(Status::INVALID_FIELD, None, "SEARCH: a query holds NaN or infinity"));
        }
        let mut t = ctx.from_host(ctx.start, req.len() as u64);
        let mut results = Vec::with_capacity(nq * k * 8);
        let batch = crate::timing::sub_batch(&self.p, vb, dep.layout.max_degree());
        let mut batches = 0u32;
        for b0 in (0..nq).step_by(batch) {
            let b1 = (b0 + batch).min(nq);
            let (res, done) = self.batch(ctx, &entries[b0..b1], &queries[b0 * vb..b1 * vb], k, ef, t)?;
            for r in res {
                for i in 0..k {
                    let (id, d) = r.get(i).map_or((u32::MAX, f32::INFINITY), |c| (c.id, c.d));
                    results.extend_from_slice(&id.to_le_bytes());
                    results.extend_from_slice(&d.to_le_bytes());
                }
            }
            t = done;
            batches += 1;
        }
        self.results = results;
        self.stats.searches += 1;
        self.stats.queries += nq as u64;
        self.stats.batches += u64::from(batches);
        Ok((batches, t))
    }

    /// One lock-step batch from `ready`: (results per query, when the last sort is done).
    #[allow(clippy::type_complexity)]
    fn batch(
        &mut self,
        ctx: &mut ExecCtx<'_>,
        entries: &[u32],
        queries: &[u8],
        k: usize,
        ef: usize,
        ready: Time,
    ) -> Result<(Vec<Vec<crate::search::Cand>>, Time), Status> {
        let dep = self.deployed.take().expect("checked by search");
        let r = self.batch_on(ctx, &dep, entries, queries, k, ef, ready);
        self.deployed = Some(dep);
        r
    }

    #[allow(clippy::type_complexity, clippy::too_many_arguments)]
    fn batch_on(
        &mut self,
        ctx: &mut ExecCtx<'_>,
        dep: &Deployed,
        entries: &[u32],
        queries: &[u8],
        k: usize,
        ef: usize,
        ready: Time,
    ) -> Result<(Vec<Vec<crate::search::Cand>>, Time), Status> {
        let cfg = LockstepConfig { k, ef, speculate: self.p.speculate as usize, vertices: dep.order.len() };
        let first: Vec<Pair> = entries.iter().enumerate().map(|(q, &v)| Pair { query: q as u32, vertex: v }).collect();
        let mut clock = Clock { gathered: ready, sorted: ready };
        let ef_list = ef.max(k);
        let d0 = self.measure(ctx, dep, &first, &[], entries.len(), queries, ef_list, &mut clock)?;
        let (mut run, _) = LockstepRun::start(entries, cfg, |q, v| d0[&(q, v)]);
        let (order, pos, layout) = (&dep.order, &dep.pos, &dep.layout);
        let neighbours = |v: u32, f: &mut dyn FnMut(u32)| layout.neighbours_of(pos[v as usize]).iter().for_each(|&u| f(order[u as usize]));
        let mut iterations = 1u64;
        while let Some(it) = run.generate(neighbours) {
            let d = self.measure(ctx, dep, &it.pairs, &it.speculative, it.live, queries, ef_list, &mut clock)?;
            run.apply(|q, v| d[&(q, v)]);
            iterations += 1;
        }
        self.stats.iterations += iterations;
        if !self.p.sort_per_iteration {
            // The final lists over the private link, one bitonic sort each on the FPGA, the top k back.
            let units = self.units.as_ref().expect("attached");
            let nq = entries.len();
            let p = &self.p;
            let lists = ctx.compute(clock.gathered, units.link, 0, (nq * ef_list) as f64 * p.tuple_bytes);
            let sorted = ctx.compute(lists, units.fpga, 0, nq as f64 * bitonic_ops(ef_list, 0) / p.sort_lanes as f64);
            let back = ctx.compute(sorted, units.link, 0, (nq * k) as f64 * 8.0);
            self.stats.sorting_ns += back.saturating_since(clock.gathered);
            clock.sorted = back;
        }
        Ok((run.results(), clock.sorted))
    }

    /// One iteration's distances (original ids), timed: allocating, `<Search Page>` reads with MACs beside the
    /// planes, tuples to the controller and over the FPGA link, the bitonic sort.
    #[allow(clippy::too_many_arguments)]
    fn measure(
        &mut self,
        ctx: &mut ExecCtx<'_>,
        dep: &Deployed,
        pairs: &[Pair],
        speculative: &[Pair],
        live: usize,
        queries: &[u8],
        ef: usize,
        clock: &mut Clock,
    ) -> Result<HashMap<(u32, u32), f32>, Status> {
        let p = &self.p;
        let units = self.units.as_ref().expect("attached");
        let l = &dep.layout;
        let all: Vec<Pair> =
            pairs.iter().chain(speculative).map(|q| Pair { query: q.query, vertex: dep.pos[q.vertex as usize] }).collect();
        let alloc_cycles = live as f64 * p.qpt_cycles + all.len() as f64 * (p.vgen_cycles_per_pair + p.alloc_cycles_per_pair);
        let allocated = ctx.compute(clock.gathered, units.vgen, 0, alloc_cycles);
        let start = allocated.max(clock.sorted);
        self.stats.allocating_ns += allocated.saturating_since(clock.gathered);
        let vb = l.vector_bytes;
        let mac_cycles = (dep.dim as f64 / p.mac_lanes as f64).ceil() / p.macs_per_group as f64;
        let dim_code = SearchPage::dim_code(dep.dim).map_err(|_| Status::INVALID_FIELD)?;
        let planes = l.geometry.planes_per_lun as u32;
        let ppb = l.geometry.pages_per_block as u32;
        let mut out = HashMap::with_capacity(all.len());
        let mut bufs: Vec<Vec<u8>> = vec![vec![0u8; l.geometry.page_bytes]; planes as usize];
        let mut scratch_q: Vec<f32> = Vec::new();
        let mut scratch_v: Vec<f32> = Vec::new();
        let mut gathered = start;
        let geo = self.nand.as_ref().expect("attached");
        let c = &ctx.config().controller;
        let soft_instructions = ctx.config().ecc.t_soft_decode.0 as f64 * c.core_freq.0 / c.cpi.0 / 1e9;
        for w in allocate(&all, l) {
            // One multi-plane read per page row of the LUN: the row's planes are sensed together.
            for row in w.pages.chunk_by(|a, b| a.page == b.page) {
                let mut ppns = Vec::with_capacity(row.len());
                let mut xfer = Vec::with_capacity(row.len());
                let mut cmds = Vec::with_capacity(row.len());
                for g in row {
                    ppns.push(ppn_of(geo, l, w.lun, g.plane, g.page));
                    // The Allocator's command to the LUN, encoded as the paper gives it and decoded by its Acc CTR.
                    let blk = l.physical(g.pairs[0].vertex).2;
                    let r = SearchPage::row_address(blk, g.plane, g.page % ppb, planes, ppb).map_err(|_| Status::INTERNAL_ERROR)?;
                    let cmd = SearchPage { metric: dep.metric, row: r, dim_code, dtype: dep.dtype, shared: g.shared() };
                    cmds.push(SearchPage::decode(cmd.encode().map_err(|_| Status::INTERNAL_ERROR)?).map_err(|_| Status::INTERNAL_ERROR)?);
                    xfer.push(((g.pairs.len() as f64 * p.tuple_bytes) as u64).min(l.geometry.page_bytes as u64));
                }
                let reads = ctx.sense_planes_into(start, &ppns, &xfer, &mut bufs[..row.len()])?;
                for (((g, cmd), page), read) in row.iter().zip(&cmds).zip(&bufs).zip(&reads) {
                    let member = w.lun * planes + g.plane;
                    // Hard-decision LDPC beside the plane fails with `ecc_fail_probability`; the page then goes to
                    // the FTL's soft decoder on a controller core (NDSearch Sec. IV-C.5, VII-B) before the MACs.
                    let mut ready = read.done;
                    if p.ecc_fail_probability > 0.0 && rand::Rng::gen_bool(ctx.rng(), p.ecc_fail_probability) {
                        ready = ctx.firmware(ready, soft_instructions);
                        self.stats.soft_decodes += 1;
                    }
                    let done = ctx.compute(ready, units.sin, member, g.pairs.len() as f64 * mac_cycles);
                    gathered = gathered.max(done);
                    for pr in &g.pairs {
                        let off = (pr.vertex as usize % l.vpp) * vb;
                        let q = &queries[pr.query as usize * vb..(pr.query as usize + 1) * vb];
                        let d = measure_one(cmd.metric, cmd.dtype, q, &page[off..off + vb], &mut scratch_q, &mut scratch_v);
                        out.insert((pr.query, dep.order[pr.vertex as usize]), d);
                    }
                    self.stats.search_page_commands += 1;
                    self.stats.shared_pages += u64::from(cmd.shared);
                }
                self.stats.multi_plane_reads += 1;
                self.stats.tuple_bytes += xfer.iter().sum::<u64>();
            }
        }
        self.stats.distances += all.len() as u64;
        self.stats.searching_ns += gathered.saturating_since(start);
        if !p.sort_per_iteration {
            // The controller applies the tuples to the queries' lists (Reduce/Apply); the FPGA sorts at the end.
            let applied = ctx.compute(gathered, units.vgen, 0, pairs.len() as f64 * p.apply_cycles_per_pair);
            clock.gathered = applied;
            clock.sorted = applied;
            return Ok(out);
        }
        // Tuples over the private link, the sorter merges each query's list with its new candidates, lists back.
        let mut per_query: HashMap<u32, usize> = HashMap::new();
        pairs.iter().for_each(|q| *per_query.entry(q.query).or_default() += 1);
        let sort_cycles: f64 = per_query.values().map(|&m| bitonic_ops(ef, m)).sum::<f64>() / p.sort_lanes as f64;
        let tuples_in = ctx.compute(gathered, units.link, 0, all.len() as f64 * p.tuple_bytes);
        let sorted = ctx.compute(tuples_in, units.fpga, 0, sort_cycles);
        let back = ctx.compute(sorted, units.link, 0, (live * ef) as f64 * 8.0);
        self.stats.sorting_ns += back.saturating_since(gathered);
        clock.gathered = gathered;
        clock.sorted = back;
        Ok(out)
    }
}

/// When the current iteration's tuples reached the controller and when its sort is done.
struct Clock {
    gathered: Time,
    sorted: Time,
}

/// The SiN MAC group's distance between a query and a stored vector (both as stored bytes), the host's kernels.
fn measure_one(metric: Metric, dtype: Dtype, q: &[u8], v: &[u8], sq: &mut Vec<f32>, sv: &mut Vec<f32>) -> f32 {
    match dtype {
        Dtype::F32 => {
            let f = |b: &[u8], s: &mut Vec<f32>| {
                s.clear();
                s.extend(b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())));
            };
            f(q, sq);
            f(v, sv);
            distance(metric, VecRef::F32(sq), VecRef::F32(sv))
        }
        Dtype::U8 => distance(metric, VecRef::U8(q), VecRef::U8(v)),
        Dtype::I8 => {
            // SAFETY: i8 and u8 have the same size and alignment.
            let c = |b: &[u8]| unsafe { std::slice::from_raw_parts(b.as_ptr() as *const i8, b.len()) };
            distance(metric, VecRef::I8(c(q)), VecRef::I8(c(v)))
        }
    }
}

impl Extension for SearSsd {
    fn name(&self) -> &str {
        NAME
    }

    fn attach(&mut self, ctx: &mut AttachCtx<'_>) -> nearflash_core::Result<()> {
        let mut p = SearssdParams::from_section(ctx.section(NAME)).map_err(|e| SimError::Config(format!("{NAME}: {e}")))?;
        p.apply_json_object(&self.overrides, &[]).map_err(|e| SimError::Config(format!("{NAME}: {e}")))?;
        for op in [OP_DEPLOY, OP_SEARCH, OP_RESULTS] {
            ctx.claim_opcode(op)?;
        }
        let g = ctx.geometry().clone();
        let members = g.planes();
        self.reserved = ctx.reserved_blocks_per_plane() as usize;
        // Table I powers charged per busy cycle: energy = power x busy time (pJ per cycle = mW x 1e9 / Hz).
        let pj = |mw: f64, hz: f64| mw * 1e9 / hz;
        let sin_mw = (p.p_mac + p.p_query_queue + p.p_vaddr_queue + p.p_output_buffer + p.p_ldpc) / f64::from(members);
        let sin = ctx.add_units(&UnitSpec {
            name: "ndsearch.sin".into(),
            count: members,
            freq_hz: p.logic_clock,
            pj_per_cycle: pj(sin_mw, p.logic_clock),
            static_mw: 0.0,
        })?;
        let vgen = ctx.add_units(&UnitSpec {
            name: "ndsearch.vgen_alloc".into(),
            count: 1,
            freq_hz: p.logic_clock,
            pj_per_cycle: pj(p.p_vgen_buffer + p.p_alloc_buffer + p.p_control, p.logic_clock),
            static_mw: 0.0,
        })?;
        let fpga = ctx.add_units(&UnitSpec {
            name: "ndsearch.fpga_sort".into(),
            count: 1,
            freq_hz: p.fpga_clock,
            pj_per_cycle: pj(p.p_fpga, p.fpga_clock),
            static_mw: 0.0,
        })?;
        // The private link as a unit moving one byte per cycle at its rate.
        let link = ctx.add_units(&UnitSpec {
            name: "ndsearch.fpga_link".into(),
            count: 1,
            freq_hz: p.fpga_link,
            pj_per_cycle: 0.0,
            static_mw: 0.0,
        })?;
        self.units = Some(Units { sin, vgen, fpga, link });
        self.nand = Some(g);
        self.p = p;
        Ok(())
    }

    fn execute(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>) -> ExtCompletion {
        let r = match (sqe.opcode, data) {
            (OP_DEPLOY, DataBuf::ToDevice(blob)) => self.deploy(ctx, blob).map(|t| (self.deployed_len() as u32, t)),
            (OP_SEARCH, DataBuf::ToDevice(req)) => self.search(ctx, req),
            (OP_RESULTS, DataBuf::FromDevice(out)) => {
                if self.results.is_empty() {
                    Err(ctx.explain(Status::SEQUENCE_ERROR, None, "RESULTS before a SEARCH: no results to return"))
                } else if out.len() != self.results.len() {
                    let why = format!("RESULTS into {} bytes: the last SEARCH returned {}", out.len(), self.results.len());
                    Err(ctx.explain(Status::INVALID_FIELD, None, why))
                } else {
                    out.copy_from_slice(&self.results);
                    Ok((0, ctx.to_host(ctx.start, out.len() as u64)))
                }
            }
            _ => Err(ctx.explain(Status::INVALID_FIELD, None, "wrong data direction: DEPLOY and SEARCH carry data to the device, RESULTS from it")),
        };
        match r {
            Ok((dw0, done)) => ExtCompletion { status: Status::SUCCESS, dw0, done },
            Err(s) => {
                self.stats.rejected += 1;
                ExtCompletion::failed(s, ctx.start)
            }
        }
    }

    fn save(&self) -> Option<Vec<u8>> {
        self.deployed.as_ref().map(|d| d.state.clone())
    }

    fn restore(&mut self, state: &[u8]) -> nearflash_core::Result<()> {
        let geo = self.nand.as_ref().ok_or_else(|| SimError::Image(format!("{NAME}: restore before attach")))?;
        let d = deployed_from(geo, self.reserved, state)
            .map_err(|s| SimError::Image(format!("{NAME}: saved deployment refused ({s})")))?;
        self.deployed = Some(d);
        Ok(())
    }

    fn report(&self) -> serde_json::Value {
        serde_json::json!({
            "stats": self.stats,
            "deployed_vectors": self.deployed_len(),
            "parameters": { "batch": self.p.batch, "speculate": self.p.speculate, "logic_clock_hz": self.p.logic_clock },
        })
    }

    fn reset_stats(&mut self) {
        self.stats = Stats::default();
    }
}

inventory::submit! {
    nearflash_core::ext::Registration {
        name: NAME,
        about: "NDSearch SearSSD (ISCA'24): graph ANNS with search units beside every LUN, FPGA top-k",
        build: |overrides, cfg| {
            let mut p = SearssdParams::from_section(cfg.ext.get(NAME).and_then(|v| v.as_table()))
                .map_err(|e| SimError::Config(format!("{NAME}: {e}")))?;
            p.apply_json_object(overrides, &[]).map_err(|e| SimError::Config(format!("{NAME}: {e}")))?;
            Ok(Box::new(SearSsd::new(overrides.clone())))
        },
    }
}

