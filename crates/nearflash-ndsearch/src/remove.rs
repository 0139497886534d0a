//! Removing vectors by label (FAISS's `remove_ids`): the removed vertices leave the graph for good, as in
//! FreshDiskANN's delete consolidation rather than hnswlib's tombstones, so the search, the lock-step batch search
//! and the SearSSD layout never see them. Every row (on every level) that pointed at a removed vertex is rebuilt
//! from its live neighbours plus the removed neighbours' live neighbours, pruned as the build prunes (the
//! neighbour heuristic, `robust_prune`, to the row's capacity); then the survivors are renumbered in their old
//! order, keeping their labels, and a removed entry vertex is replaced (HNSW: the highest-level survivor, lowest id
//! first; Vamana: the survivors' medoid).

use std::collections::HashSet;
use std::sync::{Mutex, RwLock};

use rayon::prelude::*;

use crate::graph::{robust_prune, Adjacency};
use crate::index::{Index, Kind};
use crate::Metric;

impl Index {
    /// Removes the vectors whose labels are in `ids` (labels not in the index are ignored, as FAISS does) and
    /// repairs the graph; returns how many were removed.
    pub fn remove_ids(&mut self, ids: &[i64]) -> usize {
        let want: HashSet<i64> = ids.iter().copied().collect();
        let n = self.len();
        let dead: Vec<bool> = (0..n as u32).map(|v| want.contains(&self.label(v))).collect();
        let removed = dead.iter().filter(|&&d| d).count();
        if removed == 0 {
            return 0;
        }
        self.generation += 1;
        let alpha = match (self.p.kind, self.p.metric) {
            (Kind::Hnsw, _) | (_, Metric::InnerProduct) => 1.0,
            (Kind::Vamana, _) => self.p.alpha,
        };
        // Level 0, then every upper level.
        let cap0 = self.layer0.capacity();
        let rows0: Vec<(u32, Vec<u32>)> = (0..n as u32)
            .into_par_iter()
            .filter(|&v| !dead[v as usize])
            .filter_map(|v| self.repaired(v, &self.layer0.neighbours(v), |d, f| self.layer0.for_each(d, f), &dead, alpha, cap0).map(|r| (v, r)))
            .collect();
        rows0.into_iter().for_each(|(v, r)| self.layer0.set(v, &r));
        let top = self.upper.iter().map(|u| u.lock().unwrap().len()).max().unwrap_or(0);
        for lev in 1..=top {
            let row = |v: u32| -> Option<Vec<u32>> { self.upper[v as usize].lock().unwrap().get(lev - 1).cloned() };
            let fixed: Vec<(u32, Vec<u32>)> = (0..n as u32)
                .into_par_iter()
                .filter(|&v| !dead[v as usize])
                .filter_map(|v| {
                    let r = row(v)?;
                    let nb = |d: u32, f: &mut dyn FnMut(u32)| row(d).unwrap_or_default().into_iter().for_each(f);
                    self.repaired(v, &r, nb, &dead, 1.0, self.p.r).map(|r| (v, r))
                })
                .collect();
            for (v, r) in fixed {
                self.upper[v as usize].lock().unwrap()[lev - 1] = r;
            }
        }
        self.compact(&dead);
        crate::graph::release_freed_memory();
        removed
    }

    /// `v`'s new row where `row` points at a removed vertex (None: `row` is unchanged): its live neighbours and
    /// the removed neighbours' live neighbours, pruned to `cap`.
    fn repaired(
        &self,
        v: u32,
        row: &[u32],
        neighbours: impl Fn(u32, &mut dyn FnMut(u32)),
        dead: &[bool],
        alpha: f32,
        cap: usize,
    ) -> Option<Vec<u32>> {
        if !row.iter().any(|&u| dead[u as usize]) {
            return None;
        }
        let mut cand: Vec<u32> = row.iter().copied().filter(|&u| !dead[u as usize]).collect();
        for &d in row.iter().filter(|&&u| dead[u as usize]) {
            neighbours(d, &mut |w| {
                if w != v && !dead[w as usize] {
                    cand.push(w)
                }
            });
        }
        cand.sort_unstable();
        cand.dedup();
        let mut scored: Vec<(f32, u32)> = cand.into_iter().map(|u| (self.dist_vv(v, u), u)).collect();
        scored.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        Some(robust_prune(&scored, alpha, cap, |a, b| self.dist_vv(a, b)))
    }

    /// Drops the removed vertices and renumbers the survivors in their old order.
    fn compact(&mut self, dead: &[bool]) {
        let n = dead.len();
        let mut new_id = vec![u32::MAX; n];
        let mut live = 0u32;
        for (v, d) in dead.iter().enumerate() {
            if !d {
                new_id[v] = live;
                live += 1;
            }
        }
        let map = |row: &[u32]| -> Vec<u32> { row.iter().map(|&u| new_id[u as usize]).collect() };
        let mut layer0 = Adjacency::new(self.layer0.capacity());
        layer0.resize(live as usize);
        let mut upper = Vec::with_capacity(live as usize);
        let mut labels = Vec::with_capacity(live as usize);
        for v in (0..n as u32).filter(|&v| !dead[v as usize]) {
            layer0.set(new_id[v as usize], &map(&self.layer0.neighbours(v)));
            let levels: Vec<Vec<u32>> = self.upper[v as usize].lock().unwrap().iter().map(|r| map(r)).collect();
            upper.push(Mutex::new(levels));
            labels.push(self.label(v));
        }
        self.rows = self.rows.select(self.p.dim, |i| !dead[i]);
        self.layer0 = layer0;
        self.upper = upper;
        self.labels = Some(labels);
        let old = *self.entry.read().unwrap();
        let entry = match old {
            _ if live == 0 => None,
            Some((e, lev)) if !dead[e as usize] => Some((new_id[e as usize], lev)),
            _ if self.p.kind == Kind::Vamana => Some((self.medoid(), 0)),
            _ => self
                .upper
                .iter()
                .enumerate()
                .map(|(v, u)| (u.lock().unwrap().len(), std::cmp::Reverse(v)))
                .max()
                .map(|(lev, std::cmp::Reverse(v))| (v as u32, lev)),
        };
        self.entry = RwLock::new(entry);
    }
}
