//! The lock-step batch search of SearSSD (NDSearch Algorithm 1): a batch of queries advances together, each live
//! query expanding exactly one entry vertex per iteration. An iteration's (query, vertex) pairs are what the
//! Allocator distributes over the LUNs and the SiN units measure; the gathered distances are applied per query in
//! the order the host search would apply them, so every query ends with exactly the host search's result (same
//! graph, entry vertex and `ef`). With speculation, distances of chosen second-order neighbours are computed one
//! iteration early and reused when the query reaches them; results do not change, only the trace.

use std::collections::HashMap;

use rayon::prelude::*;

use crate::allocate::Pair;
use crate::search::{BestFirst, Cand, SetVisited, Visited};
use crate::speculate::second_order;

/// Batch search settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockstepConfig {
    pub k: usize,
    pub ef: usize,
    /// Second-order neighbours speculated per query and iteration (0: off).
    pub speculate: usize,
    /// Vertices in the graph (ids `0..vertices`): a query whose reachable part holds fewer than `k` continues from
    /// unvisited vertices in id order, as the host search does (`BestFirst::guarantee`); 0: no such guarantee.
    pub vertices: usize,
}

/// What one iteration asked of the device.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Iteration {
    /// Queries still searching.
    pub live: usize,
    /// Pairs whose distances this iteration needs (not served from speculation).
    pub pairs: Vec<Pair>,
    /// Pairs computed speculatively for the next iteration.
    pub speculative: Vec<Pair>,
    /// Needed distances served by earlier speculation.
    pub reused: usize,
}

/// Results (nearest first, `k` per query) and the trace.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Lockstep {
    pub results: Vec<Vec<Cand>>,
    pub iterations: Vec<Iteration>,
}

impl Lockstep {
    /// Distances measured in all (needed + speculative).
    pub fn distances(&self) -> usize {
        self.iterations.iter().map(|i| i.pairs.len() + i.speculative.len()).sum()
    }
    /// Speculative distances that were used later.
    pub fn speculation_used(&self) -> usize {
        self.iterations.iter().map(|i| i.reused).sum()
    }
}

#[derive(Default)]
struct QueryState {
    search: BestFirst,
    visited: SetVisited,
    buf: Vec<u32>,
    spec: HashMap<u32, f32>,
    live: bool,
}

/// The batch search one iteration at a time, for firmware that measures an iteration's distances itself (page
/// reads, SiN units) between `generate` and `apply`. `lockstep_search` drives it with a distance closure.
pub struct LockstepRun {
    cfg: LockstepConfig,
    ef: usize,
    states: Vec<QueryState>,
    /// Speculative pairs of the iteration `generate` produced last, per query.
    pending_spec: Vec<Vec<Pair>>,
}

impl LockstepRun {
    /// Iteration 0: the entry vertices (`entries[q]` is query q's), measured by `dist(q, v)`.
    pub fn start(entries: &[u32], cfg: LockstepConfig, dist: impl Fn(u32, u32) -> f32 + Sync) -> (LockstepRun, Iteration) {
        let ef = cfg.ef.max(cfg.k);
        let mut states: Vec<QueryState> = entries.iter().map(|_| QueryState { live: true, ..Default::default() }).collect();
        states.par_iter_mut().zip(entries.par_iter()).enumerate().for_each(|(q, (s, &e))| {
            s.visited.insert(e);
            s.search.start(ef, &[Cand { d: dist(q as u32, e), id: e }]);
            s.search.guarantee(cfg.k, cfg.vertices);
        });
        let first = Iteration {
            live: entries.len(),
            pairs: entries.iter().enumerate().map(|(q, &v)| Pair { query: q as u32, vertex: v }).collect(),
            ..Default::default()
        };
        (LockstepRun { cfg, ef, states, pending_spec: Vec::new() }, first)
    }

    /// Vgenerate: each live query pops its entry vertex and lists unvisited neighbours (and speculation). `None`
    /// when every query has finished.
    pub fn generate(&mut self, neighbours: impl Fn(u32, &mut dyn FnMut(u32)) + Sync) -> Option<Iteration> {
        let speculate = self.cfg.speculate;
        let per_query: Vec<(Vec<Pair>, Vec<Pair>, usize)> = self
            .states
            .par_iter_mut()
            .enumerate()
            .map(|(q, s)| {
                if !s.live {
                    return (Vec::new(), Vec::new(), 0);
                }
                let QueryState { search, visited, buf, spec, live } = s;
                if search.expand(visited, &neighbours, buf).is_none() {
                    *live = false;
                    return (Vec::new(), Vec::new(), 0);
                }
                let q = q as u32;
                let need: Vec<Pair> =
                    buf.iter().filter(|v| !spec.contains_key(v)).map(|&v| Pair { query: q, vertex: v }).collect();
                let reused = buf.len() - need.len();
                let sp = second_order(buf, speculate, &neighbours, |w| visited.0.contains(&w) || spec.contains_key(&w));
                (need, sp.into_iter().map(|v| Pair { query: q, vertex: v }).collect(), reused)
            })
            .collect();
        let live = self.states.iter().filter(|s| s.live).count();
        if live == 0 {
            return None;
        }
        let mut it = Iteration { live, ..Default::default() };
        self.pending_spec = Vec::with_capacity(per_query.len());
        for (need, sp, reused) in per_query {
            it.pairs.extend(need);
            it.speculative.extend(sp.iter().copied());
            self.pending_spec.push(sp);
            it.reused += reused;
        }
        Some(it)
    }

    /// Search + gather: `dist(q, v)` gives the distances of the last generated iteration's pairs (needed and
    /// speculative), applied per query in the host search's order.
    pub fn apply(&mut self, dist: impl Fn(u32, u32) -> f32 + Sync) {
        let pending = std::mem::take(&mut self.pending_spec);
        self.states.par_iter_mut().enumerate().zip(pending.par_iter()).for_each(|((q, s), sp)| {
            if !s.live {
                return;
            }
            let q = q as u32;
            let found: Vec<Cand> =
                s.buf.iter().map(|&v| Cand { d: s.spec.remove(&v).unwrap_or_else(|| dist(q, v)), id: v }).collect();
            s.search.apply(found);
            for p in sp {
                s.spec.insert(p.vertex, dist(q, p.vertex));
            }
        });
    }

    /// List size in use (`max(ef, k)`).
    pub fn ef(&self) -> usize {
        self.ef
    }

    /// Each query's `k` nearest, nearest first.
    pub fn results(self) -> Vec<Vec<Cand>> {
        let k = self.cfg.k;
        self.states
            .into_iter()
            .map(|s| {
                let mut r = s.search.results();
                r.truncate(k);
                r
            })
            .collect()
    }
}

/// Runs the batch: `entries[q]` is query q's entry vertex; `neighbours` reads the graph; `dist(q, v)` measures
/// (the SiN units in the device, the host's kernels in a test).
pub fn lockstep_search(
    entries: &[u32],
    cfg: LockstepConfig,
    neighbours: impl Fn(u32, &mut dyn FnMut(u32)) + Sync,
    dist: impl Fn(u32, u32) -> f32 + Sync,
) -> Lockstep {
    let (mut run, first) = LockstepRun::start(entries, cfg, &dist);
    let mut out = Lockstep { iterations: vec![first], ..Default::default() };
    while let Some(it) = run.generate(&neighbours) {
        run.apply(&dist);
        out.iterations.push(it);
    }
    out.results = run.results();
    out
}
