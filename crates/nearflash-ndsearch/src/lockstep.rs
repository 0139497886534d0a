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

/// Runs the batch: `entries[q]` is query q's entry vertex; `neighbours` reads the graph; `dist(q, v)` measures
/// (the SiN units in the device, the host's kernels in a test).
pub fn lockstep_search(
    entries: &[u32],
    cfg: LockstepConfig,
    neighbours: impl Fn(u32, &mut dyn FnMut(u32)) + Sync,
    dist: impl Fn(u32, u32) -> f32 + Sync,
) -> Lockstep {
    let ef = cfg.ef.max(cfg.k);
    let mut states: Vec<QueryState> = entries.iter().map(|_| QueryState { live: true, ..Default::default() }).collect();
    let mut out = Lockstep::default();
    // Iteration 0 measures the entry vertices.
    out.iterations.push(Iteration {
        live: entries.len(),
        pairs: entries.iter().enumerate().map(|(q, &v)| Pair { query: q as u32, vertex: v }).collect(),
        ..Default::default()
    });
    states.par_iter_mut().zip(entries.par_iter()).enumerate().for_each(|(q, (s, &e))| {
        s.visited.insert(e);
        s.search.start(ef, &[Cand { d: dist(q as u32, e), id: e }]);
    });
    loop {
        // Vgenerate: each live query pops its entry vertex and lists unvisited neighbours (and speculation).
        let per_query: Vec<(Vec<Pair>, Vec<Pair>, usize)> = states
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
                let sp = second_order(buf, cfg.speculate, &neighbours, |w| visited.0.contains(&w) || spec.contains_key(&w));
                (need, sp.into_iter().map(|v| Pair { query: q, vertex: v }).collect(), reused)
            })
            .collect();
        let live = states.iter().filter(|s| s.live).count();
        if live == 0 {
            break;
        }
        // Search + gather: measure the pairs, then apply per query in the host search's order.
        states.par_iter_mut().enumerate().zip(per_query.par_iter()).for_each(|((q, s), (_, sp, _))| {
            if !s.live {
                return;
            }
            let q = q as u32;
            let found: Vec<Cand> = s
                .buf
                .iter()
                .map(|&v| Cand { d: s.spec.remove(&v).unwrap_or_else(|| dist(q, v)), id: v })
                .collect();
            s.search.apply(found);
            for p in sp {
                s.spec.insert(p.vertex, dist(q, p.vertex));
            }
        });
        let mut it = Iteration { live, ..Default::default() };
        for (need, sp, reused) in per_query {
            it.pairs.extend(need);
            it.speculative.extend(sp);
            it.reused += reused;
        }
        out.iterations.push(it);
    }
    out.results = states
        .into_iter()
        .map(|s| {
            let mut r = s.search.results();
            r.truncate(cfg.k);
            r
        })
        .collect();
    out
}
