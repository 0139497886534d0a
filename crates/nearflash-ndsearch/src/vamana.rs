//! Vamana (DiskANN) construction: the entry vertex is the medoid (the vector nearest the mean); every vertex, in a
//! seeded random order, is searched for from the medoid with list size L = `ef_construction`, and its row becomes
//! RobustPrune(expanded vertices + current row, alpha, R); each new neighbour links back, re-pruning a full row.
//! A first build makes two passes (alpha 1, then the configured alpha), as the DiskANN paper; later adds make one.
//! Inner product prunes with alpha 1 (its distances may be negative).
//! Vertices are inserted in parallel on rayon.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;

use crate::distance::{distance, Rows, VecRef};
use crate::graph::robust_prune;
use crate::index::Index;

fn sort_dedup(c: &mut Vec<(f32, u32)>) {
    c.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    c.dedup_by_key(|x| x.1);
}

impl Index {
    /// The vertex nearest the mean of all vectors.
    pub(crate) fn medoid(&self) -> u32 {
        let (n, dim) = (self.len(), self.p.dim);
        let mut mean = vec![0f64; dim];
        for i in 0..n {
            match self.rows.row(i, dim) {
                VecRef::F32(r) => mean.iter_mut().zip(r).for_each(|(m, &x)| *m += x as f64),
                VecRef::U8(r) => mean.iter_mut().zip(r).for_each(|(m, &x)| *m += x as f64),
                VecRef::I8(r) => mean.iter_mut().zip(r).for_each(|(m, &x)| *m += x as f64),
            }
        }
        let mean = Rows::F32(mean.iter().map(|m| (m / n as f64) as f32).collect());
        let as_f32 = |i: usize| -> Vec<f32> {
            match self.rows.row(i, dim) {
                VecRef::F32(r) => r.to_vec(),
                VecRef::U8(r) => r.iter().map(|&x| x as f32).collect(),
                VecRef::I8(r) => r.iter().map(|&x| x as f32).collect(),
            }
        };
        let m = mean.row(0, dim);
        (0..n)
            .into_par_iter()
            .map(|i| (distance(crate::Metric::L2, m, VecRef::F32(&as_f32(i))), i as u32))
            .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
            .map_or(0, |x| x.1)
    }

    fn vamana_insert(&self, v: u32, entry: u32, alpha: f32) {
        let (r, q) = (self.p.r, self.vector(v));
        let (_, expanded) = self.search_layer0(q, entry, self.p.ef_construction, true, 0);
        let mut cands: Vec<(f32, u32)> = expanded.iter().filter(|c| c.id != v).map(|c| (c.d, c.id)).collect();
        {
            let _g = self.upper[v as usize].lock().unwrap();
            self.layer0.for_each(v, |u| cands.push((self.dist_vv(v, u), u)));
        }
        sort_dedup(&mut cands);
        let chosen = robust_prune(&cands, alpha, r, |a, b| self.dist_vv(a, b));
        {
            let _g = self.upper[v as usize].lock().unwrap();
            self.layer0.set(v, &chosen);
        }
        for &u in &chosen {
            let _g = self.upper[u as usize].lock().unwrap();
            let row = self.layer0.neighbours(u);
            if row.contains(&v) || self.layer0.push(u, v) {
                continue;
            }
            let mut c: Vec<(f32, u32)> = row.iter().chain(std::iter::once(&v)).map(|&w| (self.dist_vv(u, w), w)).collect();
            sort_dedup(&mut c);
            self.layer0.set(u, &robust_prune(&c, alpha, r, |a, b| self.dist_vv(a, b)));
        }
    }

    /// Inserts `ids` (vectors and empty rows in place); `fresh` marks the first build (two passes).
    pub(crate) fn vamana_insert_all(&self, ids: &[u32], fresh: bool) {
        if ids.is_empty() {
            return;
        }
        let entry = if fresh {
            let m = self.medoid();
            *self.entry.write().unwrap() = Some((m, 0));
            m
        } else {
            self.entry.read().unwrap().map_or(0, |e| e.0)
        };
        let mut order = ids.to_vec();
        order.shuffle(&mut Xoshiro256PlusPlus::seed_from_u64(self.p.seed ^ ids[0] as u64));
        // Inner-product "distances" may be negative, where scaling by alpha > 1 prunes more instead of less:
        // IP graphs prune with alpha 1 (HNSW's heuristic).
        let alpha = if self.p.metric == crate::Metric::InnerProduct { 1.0 } else { self.p.alpha };
        let passes: &[f32] = if fresh { &[1.0, alpha] } else { &[alpha] };
        for &alpha in passes {
            if rayon::current_num_threads() <= 1 {
                order.iter().for_each(|&v| self.vamana_insert(v, entry, alpha));
            } else {
                order.par_iter().with_max_len(16).for_each(|&v| self.vamana_insert(v, entry, alpha));
            }
        }
    }
}
