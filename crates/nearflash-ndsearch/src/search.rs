//! Best-first graph search (HNSW's search-layer, Vamana's greedy search), split into the two halves SearSSD splits
//! it into: `expand` pops the nearest unexpanded candidate (the iteration's *entry vertex*) and lists its unvisited
//! neighbours; `apply` merges their distances into the candidate and result lists. The host search runs
//! expand -> distances -> apply in a loop; the lock-step batch search (`lockstep`) runs one expand per query per
//! iteration and computes the distances elsewhere — the same code, so the same results.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashSet};

/// A vertex with its distance to the query; ordered by distance, then id (a total order, so results are
/// deterministic even with equal distances).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cand {
    pub d: f32,
    pub id: u32,
}

impl Eq for Cand {}
impl Ord for Cand {
    fn cmp(&self, o: &Self) -> Ordering {
        self.d.total_cmp(&o.d).then(self.id.cmp(&o.id))
    }
}
impl PartialOrd for Cand {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// Marks vertices seen by one search.
pub trait Visited {
    /// Marks `v`; true if it was not marked before.
    fn insert(&mut self, v: u32) -> bool;
    fn clear(&mut self);
}

/// Epoch-stamped array over all vertices: clearing is O(1) (the epoch moves on; every 65,535th clear rewrites the
/// marks, as hnswlib's visited lists do), so one per thread is reused by every search it runs. Two bytes a vertex.
#[derive(Debug, Default)]
pub struct EpochVisited {
    marks: Vec<u16>,
    epoch: u16,
}

impl EpochVisited {
    pub fn new(n: usize) -> EpochVisited {
        EpochVisited { marks: vec![0; n], epoch: 1 }
    }
    /// Makes room for `n` vertices.
    pub fn ensure(&mut self, n: usize) {
        if self.marks.len() < n {
            self.marks.resize(n, 0);
        }
    }
}

impl Visited for EpochVisited {
    #[inline(always)]
    fn insert(&mut self, v: u32) -> bool {
        let m = &mut self.marks[v as usize];
        if *m == self.epoch {
            false
        } else {
            *m = self.epoch;
            true
        }
    }
    fn clear(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.marks.iter_mut().for_each(|m| *m = 0);
            self.epoch = 1;
        }
    }
}

/// A hash set: memory proportional to the vertices one query touches (for thousands of queries in flight).
#[derive(Debug, Default)]
pub struct SetVisited(pub HashSet<u32>);

impl Visited for SetVisited {
    fn insert(&mut self, v: u32) -> bool {
        self.0.insert(v)
    }
    fn clear(&mut self) {
        self.0.clear();
    }
}

/// The state of one query's best-first search with list size `ef`.
#[derive(Debug, Default)]
pub struct BestFirst {
    ef: usize,
    cand: BinaryHeap<Reverse<Cand>>,
    res: BinaryHeap<Cand>,
    done: bool,
    /// Vertices expanded so far, in order (Vamana's build prunes over them).
    pub expanded: Vec<Cand>,
    pub record_expanded: bool,
    /// The candidate most likely to be expanded next (for prefetching its row).
    pub next_hint: Option<u32>,
    /// Results the search must reach (`guarantee`): when the candidates run out first (a graph whose reachable
    /// part is smaller, e.g. one collapsed by duplicate vectors), unvisited vertices `reseed..vertices` are taken
    /// in id order as new entries.
    want: usize,
    vertices: u32,
    reseed: u32,
}

impl BestFirst {
    /// Starts from `entries` (whose distances the caller computed and marked visited).
    pub fn start(&mut self, ef: usize, entries: &[Cand]) {
        self.ef = ef.max(1);
        self.cand.clear();
        self.res.clear();
        self.expanded.clear();
        self.done = false;
        self.want = 0;
        for &c in entries {
            self.cand.push(Reverse(c));
            self.res.push(c);
            if self.res.len() > self.ef {
                self.res.pop();
            }
        }
    }

    pub fn is_done(&self) -> bool {
        self.done
    }

    /// After `start`: the search does not end with fewer than `min(want, vertices)` results while unvisited
    /// vertices remain among ids `0..vertices` (each such vertex becomes a new entry; normal searches never need one).
    pub fn guarantee(&mut self, want: usize, vertices: usize) {
        self.want = want.min(vertices);
        self.vertices = vertices.min(u32::MAX as usize) as u32;
        self.reseed = 0;
    }

    /// The next unvisited vertex in id order (marked visited), while results are short of `want`.
    fn reseed_vertex<V: Visited>(&mut self, visited: &mut V) -> Option<u32> {
        if self.res.len() >= self.want {
            return None;
        }
        while self.reseed < self.vertices {
            let v = self.reseed;
            self.reseed += 1;
            if visited.insert(v) {
                return Some(v);
            }
        }
        None
    }

    /// Pops the next entry vertex and writes its unvisited neighbours (marking them) into `out`; returns the
    /// entry vertex, or None when the search has converged (the nearest candidate is worse than the worst result
    /// of a full list) or has no candidates left. With no candidates left but fewer results than `guarantee`
    /// asks, `out` holds one unvisited vertex (a new entry) and that vertex is returned.
    #[inline(always)]
    pub fn expand<V: Visited>(
        &mut self,
        visited: &mut V,
        mut neighbours: impl FnMut(u32, &mut dyn FnMut(u32)),
        out: &mut Vec<u32>,
    ) -> Option<u32> {
        out.clear();
        let Some(Reverse(c)) = self.cand.pop() else {
            if let Some(v) = self.reseed_vertex(visited) {
                out.push(v);
                return Some(v);
            }
            self.done = true;
            return None;
        };
        if self.res.len() >= self.ef && self.res.peek().is_some_and(|w| c.d > w.d) {
            self.done = true;
            return None;
        }
        if self.record_expanded {
            self.expanded.push(c);
        }
        if let Some(Reverse(next)) = self.cand.peek() {
            self.next_hint = Some(next.id);
        }
        neighbours(c.id, &mut |u| {
            if visited.insert(u) {
                out.push(u);
            }
        });
        Some(c.id)
    }

    /// Merges the distances of the neighbours `expand` listed (in its order).
    #[inline(always)]
    pub fn apply(&mut self, found: impl IntoIterator<Item = Cand>) {
        for c in found {
            let full = self.res.len() >= self.ef;
            if !full || self.res.peek().is_some_and(|w| c < *w) {
                self.cand.push(Reverse(c));
                self.res.push(c);
                if self.res.len() > self.ef {
                    self.res.pop();
                }
            }
        }
    }

    /// The result list, nearest first.
    pub fn results(&self) -> Vec<Cand> {
        let mut r: Vec<Cand> = self.res.iter().copied().collect();
        r.sort_unstable();
        r
    }
}

/// Runs a best-first search to convergence: `dist(v)` measures vertex `v` against the query; `prefetch(v)` is
/// called for each unvisited neighbour one distance ahead of measuring it.
#[inline(always)]
pub fn run<V: Visited>(
    state: &mut BestFirst,
    visited: &mut V,
    buf: &mut Vec<u32>,
    mut neighbours: impl FnMut(u32, &mut dyn FnMut(u32)),
    mut dist: impl FnMut(u32) -> f32,
    mut prefetch: impl FnMut(u32),
    mut prefetch_row: impl FnMut(u32),
) {
    while state.expand(visited, &mut neighbours, buf).is_some() {
        if let Some(n) = state.next_hint.take() {
            prefetch_row(n);
        }
        // Software pipelining: the next vector streams in while this one is measured.
        if let Some(&u) = buf.first() {
            prefetch(u);
        }
        let found = (0..buf.len()).map(|i| {
            if let Some(&next) = buf.get(i + 1) {
                prefetch(next);
            }
            Cand { d: dist(buf[i]), id: buf[i] }
        });
        state.apply(found);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_on_a_path_finds_the_nearest_points() {
        // vertices 0..10 on a line (value = id), a path graph; query at 7.3
        let q = 7.3f32;
        let nb = |v: u32, f: &mut dyn FnMut(u32)| {
            if v > 0 {
                f(v - 1)
            }
            if v < 9 {
                f(v + 1)
            }
        };
        let mut st = BestFirst::default();
        let mut vis = EpochVisited::new(10);
        vis.insert(0);
        st.start(3, &[Cand { d: q, id: 0 }]);
        let mut buf = Vec::new();
        run(&mut st, &mut vis, &mut buf, nb, |v| (v as f32 - q).abs(), |_| {}, |_| {});
        let ids: Vec<u32> = st.results().iter().map(|c| c.id).collect();
        assert_eq!(ids, vec![7, 8, 6]);
    }

    #[test]
    fn epoch_visited_clears_in_constant_time() {
        let mut v = EpochVisited::new(4);
        assert!(v.insert(2));
        assert!(!v.insert(2));
        v.clear();
        assert!(v.insert(2));
    }
}
