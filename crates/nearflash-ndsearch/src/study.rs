//! One SearSSD batch on the host, end to end, as pure functions: reorder the index's layer 0 (degree-ascending
//! BFS, random BFS, or as built), lay it out as LUNCSR, run the lock-step batch search on it (entry vertices from
//! the index, mapped), allocate every iteration with or without dynamic allocating, and time it. The results are
//! the host search's (checked by `lockstep`'s tests); the figures are the trace's page accesses and the model's
//! time. The firmware extension runs the same steps with the device's clock.

use serde::Serialize;

use crate::allocate::{allocate, page_reads_per_query, LunWork, Pair};
use crate::baselines::{batch_energy_pj, BaselineParams, BatchWork, Design};
use crate::distance::Rows;
use crate::hosts::HostWork;
use crate::index::Index;
use crate::lockstep::{lockstep_search, Lockstep, LockstepConfig};
use crate::luncsr::{Geometry, LunCsr};
use crate::reorder::{bandwidth, degree_ascending_bfs, positions, random_bfs, relabel, Order};
use crate::timing::{batch_time, FlashTiming, IterationTime, SearssdParams};
use crate::NdError;

/// Vertex numbering on flash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reorder {
    None,
    DegreeBfs,
    RandomBfs(u64),
}

/// Where the distances are computed and whether page rows go out as multi-plane reads (Fig. 16's "mp").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    pub design: Design,
    pub multiplane: bool,
}

impl Default for Variant {
    fn default() -> Self {
        Variant { design: Design::SearSsd, multiplane: true }
    }
}

/// Without multi-plane reads every plane's page is its own read: each page group gets its own row.
fn single_plane(work: &mut [LunWork], planes: usize) {
    for w in work {
        for g in &mut w.pages {
            g.page = g.page * planes as u32 + g.plane;
        }
    }
}

/// What a batch did and took.
#[derive(Clone, Debug, Default, Serialize)]
pub struct BatchReport {
    pub queries: usize,
    pub iterations: usize,
    /// Lock-step sub-batches the queries ran in (`timing::sub_batch`).
    pub sub_batches: usize,
    /// Distances needed (trace length) and speculative distances computed.
    pub trace_length: usize,
    pub speculative: usize,
    pub speculation_used: usize,
    /// Page reads and the ratio to the trace length.
    pub page_reads: usize,
    pub page_access_ratio: f64,
    pub read_ops: usize,
    /// B(G, f) of the numbering used.
    pub bandwidth: f64,
    /// Time parts summed over iterations, and the pipelined total (ns).
    pub allocating_ns: f64,
    pub searching_ns: f64,
    pub gathering_ns: f64,
    pub sorting_ns: f64,
    pub total_ns: f64,
    pub qps: f64,
    /// Design timed (`baselines::Design::name`), bytes over NAND interfaces and the FPGA link, energy.
    pub design: &'static str,
    pub nand_io_bytes: f64,
    pub link_bytes: f64,
    pub energy_j: f64,
    pub queries_per_joule: f64,
    /// The host search's work on this batch (the same search: `hosts::costs` prices it on the paper's CPU/GPU).
    pub host_work: HostWork,
    /// Result ids (original numbering), `k` per query.
    #[serde(skip)]
    pub ids: Vec<Vec<u32>>,
    #[serde(skip)]
    pub distances: Vec<Vec<f32>>,
}

/// Runs one batch of prepared `queries` (the index's dtype) through the SearSSD model.
#[allow(clippy::too_many_arguments)]
pub fn run_batch(
    index: &Index,
    queries: Rows,
    k: usize,
    ef: usize,
    reorder: Reorder,
    dynamic: bool,
    geometry: Geometry,
    params: &SearssdParams,
    flash: &FlashTiming,
) -> Result<BatchReport, NdError> {
    run_batch_as(index, queries, k, ef, reorder, dynamic, geometry, params, flash, Variant::default(), &BaselineParams::default())
}

/// `run_batch` with the distances placed as `variant.design` says (the same trace and allocation; see
/// `baselines`), with or without multi-plane reads, and the baselines' parameters `baseline`.
#[allow(clippy::too_many_arguments)]
pub fn run_batch_as(
    index: &Index,
    queries: Rows,
    k: usize,
    ef: usize,
    reorder: Reorder,
    dynamic: bool,
    geometry: Geometry,
    params: &SearssdParams,
    flash: &FlashTiming,
    variant: Variant,
    baseline: &BaselineParams,
) -> Result<BatchReport, NdError> {
    let mut queries = queries;
    let nq = index.prepare(&mut queries, "q")?;
    if k == 0 || k > index.len() {
        return Err(NdError::Argument(format!("k must be in 1..={}, not {k}", index.len())));
    }
    let dim = index.params().dim;
    let order: Order = match reorder {
        Reorder::None => (0..index.len() as u32).collect(),
        Reorder::DegreeBfs => degree_ascending_bfs(index.layer0()),
        Reorder::RandomBfs(s) => random_bfs(index.layer0(), s),
    };
    let pos = positions(&order);
    let graph = relabel(index.layer0(), &order);
    let vec_bytes = dim * index.params().dtype.bytes();
    let layout = LunCsr::build(&graph, vec_bytes, geometry)?;
    // The search runs on original ids (ties between equal distances break by id, as on the host) over the
    // LUNCSR arrays; pairs are mapped to storage positions for the Allocator.
    let counted: Vec<(u32, usize)> =
        (0..nq).map(|i| index.entry_counted(queries.row(i, dim)).expect("k <= len implies a non-empty index")).collect();
    let entries: Vec<u32> = counted.iter().map(|e| e.0).collect();
    let cfg = LockstepConfig { k, ef, speculate: params.speculate as usize, vertices: index.len() };
    // Sub-batches as the firmware runs them (`timing::sub_batch`), one after another; their iterations are
    // concatenated, `starts` marks where each begins.
    let per = crate::timing::sub_batch(params, vec_bytes, layout.max_degree());
    let mut ls = Lockstep::default();
    let mut starts = Vec::new();
    for c0 in (0..nq).step_by(per) {
        let c1 = (c0 + per).min(nq);
        let part = lockstep_search(
            &entries[c0..c1],
            cfg,
            |v, f| layout.neighbours_of(pos[v as usize]).iter().for_each(|&u| f(order[u as usize])),
            |q, v| index.distance_to(queries.row(c0 + q as usize, dim), v),
        );
        starts.push(ls.iterations.len());
        for mut it in part.iterations {
            for p in it.pairs.iter_mut().chain(it.speculative.iter_mut()) {
                p.query += c0 as u32;
                p.vertex = pos[p.vertex as usize];
            }
            ls.iterations.push(it);
        }
        ls.results.extend(part.results);
    }
    let ends: Vec<usize> = starts.iter().skip(1).copied().chain(std::iter::once(ls.iterations.len())).collect();
    let mut rep = BatchReport {
        queries: nq, iterations: ls.iterations.len(), bandwidth: bandwidth(&graph, None), ..Default::default() };
    let mut times: Vec<IterationTime> = Vec::with_capacity(ls.iterations.len());
    for it in &ls.iterations {
        // With `speculate_overlap` the speculative pages are read apart, in the LUNs' idle window (below).
        let overlap = params.speculate_overlap && variant.design == Design::SearSsd && dynamic && !it.speculative.is_empty();
        let all: Vec<Pair> =
            if overlap { it.pairs.clone() } else { it.pairs.iter().chain(&it.speculative).copied().collect() };
        let mut work = allocate(&all, &layout);
        if !variant.multiplane {
            single_plane(&mut work, geometry.planes_per_lun);
        }
        let mut new_per_query = vec![0usize; nq];
        it.pairs.iter().for_each(|p| new_per_query[p.query as usize] += 1);
        let live: Vec<usize> = new_per_query.into_iter().filter(|&m| m > 0).collect();
        let mut t = crate::baselines::iteration_time(
            variant.design, params, baseline, flash, &work, it.live, &live, dim, ef.max(k), geometry.luns, geometry.page_bytes);
        if !dynamic {
            t.page_reads = page_reads_per_query(&all, &layout);
        }
        if overlap {
            // The LUNs idle while the tuples are gathered and applied and the next iteration is allocated (taken
            // as long as this one's); speculative reads fill that window and only what overruns it costs time.
            let ts = crate::timing::iteration_time(params, flash, &allocate(&it.speculative, &layout), it.live, &[], dim, ef.max(k));
            t.searching += (ts.searching - (t.gathering + t.allocating)).max(0.0);
            t.page_reads += ts.page_reads;
            t.read_ops += ts.read_ops;
            t.nand_io_bytes += ts.nand_io_bytes;
        }
        rep.trace_length += it.pairs.len();
        rep.speculative += it.speculative.len();
        rep.page_reads += t.page_reads;
        times.push(t);
    }
    if !dynamic {
        // Without dynamic allocating each query's page reads go out on their own: searching scales with them.
        for (t, it) in times.iter_mut().zip(&ls.iterations) {
            let shared = allocate(&it.pairs.iter().chain(&it.speculative).copied().collect::<Vec<_>>(), &layout)
                .iter()
                .map(|w| w.pages.len())
                .sum::<usize>()
                .max(1);
            let more = t.page_reads as f64 / shared as f64;
            t.searching *= more;
            t.read_ops = (t.read_ops as f64 * more).round() as usize;
            if variant.design != Design::SearSsd {
                // pages cross the NAND interfaces (and the link) once per read
                t.nand_io_bytes *= more;
                t.link_bytes *= more;
            }
        }
    }
    rep.speculation_used = ls.speculation_used();
    rep.page_access_ratio = if rep.trace_length > 0 { rep.page_reads as f64 / (rep.trace_length + rep.speculative) as f64 } else { 0.0 };
    for t in &times {
        rep.allocating_ns += t.allocating;
        rep.searching_ns += t.searching;
        rep.gathering_ns += t.gathering;
        rep.sorting_ns += t.sorting;
        rep.read_ops += t.read_ops;
        rep.nand_io_bytes += t.nand_io_bytes;
        rep.link_bytes += t.link_bytes;
    }
    // Each sub-batch ends with the FPGA's sort of its final lists (when it sorts once per batch).
    let mut final_ns = 0.0;
    for &a in starts.iter().filter(|_| variant.design != Design::SmartSsdOnly) {
        // (SmartSSD-only's FPGA holds the lists and merges them every iteration: nothing is left to sort.)
        let (ns, bytes) = crate::timing::final_sort(params, ls.iterations[a].live, ef.max(k), k);
        final_ns += ns;
        rep.link_bytes += bytes;
    }
    rep.sorting_ns += final_ns;
    rep.total_ns = starts.iter().zip(&ends).map(|(&a, &b)| batch_time(&times[a..b])).sum::<f64>() + final_ns;
    rep.sub_batches = starts.len();
    rep.qps = if rep.total_ns > 0.0 { nq as f64 / (rep.total_ns * 1e-9) } else { 0.0 };
    rep.design = variant.design.name();
    let work = BatchWork {
        allocating_ns: rep.allocating_ns,
        sorting_ns: rep.sorting_ns,
        total_ns: rep.total_ns,
        page_reads: rep.page_reads,
        pairs: rep.trace_length + rep.speculative,
        dim,
        planes: geometry.luns * geometry.planes_per_lun,
        nand_io_bytes: rep.nand_io_bytes,
        link_bytes: rep.link_bytes,
    };
    let pj = batch_energy_pj(variant.design, params, baseline, &work);
    rep.energy_j = pj * 1e-12;
    rep.queries_per_joule = if rep.energy_j > 0.0 { nq as f64 / rep.energy_j } else { 0.0 };
    rep.host_work = HostWork {
        queries: nq,
        distances: ls.iterations.iter().map(|it| it.pairs.len() + it.reused).sum(),
        upper_distances: counted.iter().map(|e| e.1).sum(),
        hops: ls.iterations.iter().enumerate().filter(|(i, _)| !starts.contains(i)).map(|(_, it)| it.live).sum(),
        max_hops: starts.iter().zip(&ends).map(|(a, b)| b - a - 1).max().unwrap_or(0),
        dim,
        n: index.len(),
        row_cap: index.layer0().capacity(),
        k,
        ef: ef.max(k),
    };
    rep.ids = ls.results.iter().map(|r| r.iter().map(|c| c.id).collect()).collect();
    rep.distances = ls.results.iter().map(|r| r.iter().map(|c| c.d).collect()).collect();
    Ok(rep)
}
