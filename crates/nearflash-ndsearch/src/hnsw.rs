//! HNSW construction (Malkov & Yashunin; the insertion hnswlib performs): each vertex draws a level from a
//! seeded hash of its id (geometric with factor 1/ln M), descends greedily through the levels above its own, then on
//! each of its levels searches with `ef_construction`, keeps M diverse neighbours (the heuristic, `robust_prune` with
//! alpha 1) and links back, re-pruning a neighbour whose row is full (2M on layer 0, M above). Vertices are
//! inserted in parallel on rayon.

use rayon::prelude::*;

use crate::distance::VecRef;
use crate::graph::robust_prune;
use crate::index::Index;
use crate::search::{BestFirst, Cand, SetVisited, Visited};

/// Levels above 0 are capped (a level this high would need ~M^16 vertices).
const MAX_LEVEL: usize = 16;

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Index {
    /// The level of vertex `v`: floor(-ln(U) / ln(M)), U uniform in (0, 1] from a hash of (seed, v).
    pub(crate) fn hnsw_level(&self, v: u32) -> usize {
        let h = mix(self.p.seed ^ mix(v as u64 + 0x9e37_79b9_7f4a_7c15));
        let u = ((h >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        let mult = 1.0 / (self.p.r as f64).ln();
        ((-u.ln() * mult) as usize).min(MAX_LEVEL)
    }

    /// Best-first search on upper level `lev` (rows read under the vertex's lock; upper levels are small).
    fn search_upper(&self, q: VecRef<'_>, entry: Cand, ef: usize, lev: usize) -> Vec<Cand> {
        let mut st = BestFirst::default();
        let mut vis = SetVisited::default();
        vis.insert(entry.id);
        st.start(ef, &[entry]);
        let mut buf = Vec::new();
        let nb = |v: u32, f: &mut dyn FnMut(u32)| {
            let g = self.upper[v as usize].lock().unwrap();
            g[lev - 1].iter().for_each(|&u| f(u));
        };
        crate::search::run(&mut st, &mut vis, &mut buf, nb, |u| self.dist_q(q, u), |_| {}, |_| {});
        st.results()
    }

    /// Links `v` to the diverse nearest of `found` on `lev`, and back.
    fn connect(&self, v: u32, found: &[Cand], lev: usize) {
        let m = self.p.r;
        let sorted: Vec<(f32, u32)> = found.iter().filter(|c| c.id != v).map(|c| (c.d, c.id)).collect();
        let chosen = robust_prune(&sorted, 1.0, m, |a, b| self.dist_vv(a, b));
        let cap = if lev == 0 { self.layer0.capacity() } else { m };
        {
            let mut g = self.upper[v as usize].lock().unwrap();
            if lev == 0 {
                self.layer0.set(v, &chosen);
            } else {
                g[lev - 1] = chosen.clone();
            }
        }
        for &u in &chosen {
            let mut g = self.upper[u as usize].lock().unwrap();
            let row: Vec<u32> = if lev == 0 { self.layer0.neighbours(u) } else { g[lev - 1].clone() };
            if row.contains(&v) {
                continue;
            }
            if row.len() < cap {
                if lev == 0 {
                    self.layer0.push(u, v);
                } else {
                    g[lev - 1].push(v);
                }
                continue;
            }
            let mut cands: Vec<(f32, u32)> =
                row.iter().chain(std::iter::once(&v)).map(|&w| (self.dist_vv(u, w), w)).collect();
            cands.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let kept = robust_prune(&cands, 1.0, cap, |a, b| self.dist_vv(a, b));
            if lev == 0 {
                self.layer0.set(u, &kept);
            } else {
                g[lev - 1] = kept;
            }
        }
    }

    fn hnsw_insert(&self, v: u32) {
        let level = self.upper[v as usize].lock().unwrap().len();
        let q = self.vector(v);
        let Some((ep, top)) = *self.entry.read().unwrap() else { return };
        let mut cur = Cand { d: self.dist_q(q, ep), id: ep };
        for lev in (level + 1..=top).rev() {
            cur = self.greedy(q, cur, lev, &mut 0);
        }
        let ef = self.p.ef_construction;
        for lev in (0..=level.min(top)).rev() {
            let found =
                if lev == 0 { self.search_layer0(q, cur.id, ef, false, 0).0 } else { self.search_upper(q, cur, ef, lev) };
            self.connect(v, &found, lev);
            if let Some(&best) = found.iter().find(|c| c.id != v) {
                cur = best;
            }
        }
        if level > top {
            let mut e = self.entry.write().unwrap();
            if e.is_none_or(|(_, t)| level > t) {
                *e = Some((v, level));
            }
        }
    }

    /// Inserts `ids` (vectors and empty rows already in place).
    pub(crate) fn hnsw_insert_all(&self, ids: &[u32]) {
        let mut rest = ids;
        if self.entry.read().unwrap().is_none() {
            let Some((&first, tail)) = ids.split_first() else { return };
            let level = self.upper[first as usize].lock().unwrap().len();
            *self.entry.write().unwrap() = Some((first, level));
            rest = tail;
        }
        if rayon::current_num_threads() <= 1 {
            rest.iter().for_each(|&v| self.hnsw_insert(v));
        } else {
            rest.par_iter().with_max_len(16).for_each(|&v| self.hnsw_insert(v));
        }
    }
}
