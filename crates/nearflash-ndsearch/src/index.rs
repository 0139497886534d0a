//! The vector index: stored vectors, a proximity graph (HNSW: layer 0 plus upper layers that only lead to a good
//! entry vertex; Vamana: one flat graph entered at the medoid) and the search over it. Adding runs in parallel on
//! rayon (per-vertex locks, as hnswlib); searching a batch runs one query per task, each thread reusing one
//! epoch-stamped visited array.

use std::cell::RefCell;
use std::sync::{Mutex, RwLock};

use rayon::prelude::*;

use crate::distance::{distance, normalize, Dtype, Metric, Rows, VecRef};
use crate::graph::Adjacency;
use crate::search::{run, BestFirst, Cand, EpochVisited, Visited};
use crate::NdError;

/// The graph family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Hnsw,
    Vamana,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Hnsw => "hnsw",
            Kind::Vamana => "vamana",
        }
    }
    pub fn parse(s: &str) -> Result<Kind, NdError> {
        match s {
            "hnsw" => Ok(Kind::Hnsw),
            "vamana" => Ok(Kind::Vamana),
            _ => Err(NdError::Argument(format!("kind {s:?} is not 'hnsw' or 'vamana'"))),
        }
    }
}

/// What an index is built with. `r` is HNSW's M (layer 0 keeps up to 2M) or Vamana's out-degree R.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    pub kind: Kind,
    pub metric: Metric,
    pub dtype: Dtype,
    pub dim: usize,
    pub r: usize,
    pub ef_construction: usize,
    /// Vamana's pruning factor (second pass); unused by HNSW.
    pub alpha: f32,
    pub seed: u64,
}

/// Largest supported dimension, degree and list size (the file format stores them as u32; beyond these a
/// graph index makes no sense and allocation sizes would overflow).
pub const MAX_DIM: usize = 65_536;
pub const MAX_R: usize = 1024;
pub const MAX_EF: usize = 1 << 20;

impl Params {
    pub fn validate(&self) -> Result<(), NdError> {
        let bad = |m: String| Err(NdError::Argument(m));
        if self.dim == 0 || self.dim > MAX_DIM {
            return bad(format!("dim must be in 1..={MAX_DIM}, not {}", self.dim));
        }
        let min_r = if self.kind == Kind::Hnsw { 2 } else { 1 };
        if self.r < min_r || self.r > MAX_R {
            return bad(format!("R must be in {min_r}..={MAX_R}, not {}", self.r));
        }
        if self.ef_construction == 0 || self.ef_construction > MAX_EF {
            return bad(format!("ef_construction must be in 1..={MAX_EF}, not {}", self.ef_construction));
        }
        if !(self.alpha.is_finite() && (1.0..=4.0).contains(&self.alpha)) {
            return bad(format!("alpha must be in [1, 4], not {}", self.alpha));
        }
        Ok(())
    }
    /// Capacity of a layer-0 row.
    pub fn layer0_cap(&self) -> usize {
        match self.kind {
            Kind::Hnsw => 2 * self.r,
            Kind::Vamana => self.r,
        }
    }
}

/// Per-vertex state behind the vertex's lock: HNSW's upper-layer rows (level 1 first).
pub(crate) type Upper = Mutex<Vec<Vec<u32>>>;

/// A graph index over vectors of one dtype and dimension.
#[derive(Debug)]
pub struct Index {
    pub(crate) p: Params,
    pub(crate) rows: Rows,
    pub(crate) layer0: Adjacency,
    pub(crate) upper: Vec<Upper>,
    /// (entry vertex, its level); None while empty.
    pub(crate) entry: RwLock<Option<(u32, usize)>>,
    /// External ids (labels) of the vertices; None while they are the vertex ids themselves (no `add_with_ids`,
    /// no removal), which costs no memory.
    pub(crate) labels: Option<Vec<i64>>,
    /// The label `add` gives the next vector (one past the largest ever used, so labels are never reused).
    pub(crate) next_label: i64,
    /// Bumped by every change of the vectors (add, remove): a deployment made before a change is stale.
    pub(crate) generation: u64,
}

/// How much of a row to prefetch ahead of measuring it: 24 cache lines, a whole 384-d float32 row. Measured
/// (docs/ndsearch.md, CPU-time QPS, interleaved runs): on fortunes-minilm (384-d) 1536 bytes searched 1.1-1.3x
/// faster than 128 (the old value), where the distance kernel stalled on the row's later lines; on Fashion-MNIST
/// (784-d, 3136-byte rows) 1536 was neutral and the whole row ~10% slower (too many requests in flight).
const PREFETCH_BYTES: usize = 1536;

thread_local! {
    static SCRATCH: RefCell<(EpochVisited, BestFirst, Vec<u32>)> = RefCell::default();
}

impl Index {
    pub fn new(p: Params) -> Result<Index, NdError> {
        p.validate()?;
        Ok(Index {
            layer0: Adjacency::new(p.layer0_cap()),
            rows: Rows::empty(p.dtype),
            upper: Vec::new(),
            entry: RwLock::new(None),
            labels: None,
            next_label: 0,
            generation: 0,
            p,
        })
    }
    /// The external id (label) of vertex `v`.
    #[inline]
    pub fn label(&self, v: u32) -> i64 {
        self.labels.as_ref().map_or(v as i64, |l| l[v as usize])
    }
    /// Changes of the stored vectors so far (adds and removals).
    pub fn generation(&self) -> u64 {
        self.generation
    }
    /// Bytes the index holds on the heap: vectors, layer-0 rows, per-vertex upper-level state and rows, labels
    /// (not the per-thread search scratch, `n` bytes x 2 per searching thread).
    pub fn memory_bytes(&self) -> usize {
        let upper: usize = self
            .upper
            .iter()
            .map(|u| {
                let g = u.lock().unwrap();
                g.capacity() * std::mem::size_of::<Vec<u32>>() + g.iter().map(|r| r.capacity() * 4).sum::<usize>()
            })
            .sum();
        self.rows.heap_bytes()
            + self.layer0.heap_bytes()
            + self.upper.capacity() * std::mem::size_of::<Upper>()
            + upper
            + self.labels.as_ref().map_or(0, |l| l.capacity() * 8)
    }
    pub fn params(&self) -> &Params {
        &self.p
    }
    pub fn len(&self) -> usize {
        self.upper.len()
    }
    pub fn is_empty(&self) -> bool {
        self.upper.is_empty()
    }
    /// The layer-0 graph (the graph SearSSD lays out on flash).
    pub fn layer0(&self) -> &Adjacency {
        &self.layer0
    }
    /// The vertex every layer-0 search starts from for `query` (HNSW: the end of the greedy upper-layer descent;
    /// Vamana: the medoid).
    pub fn entry_for(&self, query: VecRef<'_>) -> Option<u32> {
        self.entry_counted(query).map(|(e, _)| e)
    }
    /// `entry_for` and the distances the descent measured (the host's work above layer 0).
    pub fn entry_counted(&self, query: VecRef<'_>) -> Option<(u32, usize)> {
        let (ep, top) = (*self.entry.read().unwrap())?;
        let mut cur = Cand { d: self.dist_q(query, ep), id: ep };
        let mut measured = 1;
        for lev in (1..=top).rev() {
            cur = self.greedy(query, cur, lev, &mut measured);
        }
        Some((cur.id, measured))
    }
    pub fn rows(&self) -> &Rows {
        &self.rows
    }
    /// Vector `v`.
    pub fn vector(&self, v: u32) -> VecRef<'_> {
        self.rows.row(v as usize, self.p.dim)
    }

    /// Distance of a prepared query (see `prepare`) to vertex `v`.
    #[inline(always)]
    pub fn distance_to(&self, q: VecRef<'_>, v: u32) -> f32 {
        self.dist_q(q, v)
    }
    #[inline(always)]
    pub(crate) fn dist_q(&self, q: VecRef<'_>, v: u32) -> f32 {
        distance(self.p.metric, q, self.rows.row(v as usize, self.p.dim))
    }
    #[inline(always)]
    pub(crate) fn dist_vv(&self, a: u32, b: u32) -> f32 {
        let d = self.p.dim;
        distance(self.p.metric, self.rows.row(a as usize, d), self.rows.row(b as usize, d))
    }
    #[inline(always)]
    fn prefetch(&self, v: u32) {
        #[cfg(target_arch = "x86_64")]
        {
            let p = self.rows.row_ptr(v as usize, self.p.dim);
            let bytes = self.p.dim * self.p.dtype.bytes();
            // The whole row, one request per cache line: rows are several lines long and not in cache, and the
            // requests overlap (memory-level parallelism) where the hardware prefetcher would ramp up line by line.
            for off in (0..bytes.min(PREFETCH_BYTES)).step_by(64) {
                // SAFETY: prefetch never faults, whatever the address.
                unsafe {
                    std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.wrapping_add(off) as *const i8)
                };
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = v;
    }

    /// Checks a batch of rows against the index's dtype and dim and rejects NaN/inf; f32 cosine rows are
    /// normalised. Returns the number of rows.
    pub fn prepare(&self, rows: &mut Rows, what: &str) -> Result<usize, NdError> {
        if rows.dtype() != self.p.dtype {
            return Err(NdError::Argument(format!(
                "{what} has dtype {}, the index stores {}",
                rows.dtype().name(),
                self.p.dtype.name()
            )));
        }
        if !rows.len().is_multiple_of(self.p.dim) {
            return Err(NdError::Argument(format!("{what} length {} is not a multiple of dim {}", rows.len(), self.p.dim)));
        }
        if let Rows::F32(v) = rows {
            if let Some(i) = v.iter().position(|x| !x.is_finite()) {
                return Err(NdError::Argument(format!("{what} row {} holds a NaN or infinite value", i / self.p.dim)));
            }
            if self.p.metric == Metric::Cosine {
                v.chunks_exact_mut(self.p.dim).for_each(normalize);
            }
        }
        Ok(rows.len() / self.p.dim)
    }

    /// Adds vectors (row-major, the index's dtype) and links them into the graph, on rayon's current pool. They
    /// get the labels `next_label..` (the vertex ids, unless vectors were removed or added with ids before).
    pub fn add(&mut self, rows: Rows) -> Result<(), NdError> {
        self.add_with_ids(rows, None)
    }

    /// `add` with the labels `ids` (one per row, each >= 0, none already in the index, no repeats); `None`: the
    /// next labels. A refused call changes nothing.
    pub fn add_with_ids(&mut self, mut rows: Rows, ids: Option<&[i64]>) -> Result<(), NdError> {
        let n_new = self.prepare(&mut rows, "x")?;
        let first = self.len();
        if first + n_new > u32::MAX as usize - 1 {
            return Err(NdError::Argument(format!("the index holds at most {} vectors", u32::MAX - 1)));
        }
        if let Some(ids) = ids {
            self.check_new_ids(ids, n_new)?;
        }
        if n_new == 0 {
            return Ok(());
        }
        match ids {
            Some(ids) => {
                let labels = self.labels.get_or_insert_with(|| (0..first as i64).collect());
                labels.extend_from_slice(ids);
                self.next_label = self.next_label.max(ids.iter().max().map_or(0, |&m| m + 1));
            }
            None => {
                if let Some(l) = &mut self.labels {
                    l.extend(self.next_label..self.next_label + n_new as i64);
                }
                self.next_label += n_new as i64;
            }
        }
        self.generation += 1;
        self.rows.extend(rows);
        let n = first + n_new;
        self.layer0.resize(n);
        crate::graph::reserve_gently(&mut self.upper, n_new);
        let ids: Vec<u32> = (first as u32..n as u32).collect();
        match self.p.kind {
            Kind::Hnsw => {
                let levels: Vec<usize> = ids.iter().map(|&v| self.hnsw_level(v)).collect();
                self.upper.extend(levels.into_iter().map(|l| Mutex::new(vec![Vec::new(); l])));
                self.hnsw_insert_all(&ids);
            }
            Kind::Vamana => {
                self.upper.resize_with(n, || Mutex::new(Vec::new()));
                self.vamana_insert_all(&ids, first == 0);
            }
        }
        crate::graph::release_freed_memory();
        Ok(())
    }

    fn check_new_ids(&self, ids: &[i64], n_new: usize) -> Result<(), NdError> {
        let bad = |m: String| Err(NdError::Argument(m));
        if ids.len() != n_new {
            return bad(format!("ids has {} entries for {n_new} vectors", ids.len()));
        }
        if let Some(&i) = ids.iter().find(|&&i| i < 0) {
            return bad(format!("ids must be >= 0 (-1 marks a missing result), not {i}"));
        }
        let mut seen: std::collections::HashSet<i64> = std::collections::HashSet::with_capacity(ids.len());
        if let Some(&i) = ids.iter().find(|&&i| !seen.insert(i)) {
            return bad(format!("id {i} appears twice in ids"));
        }
        if let Some(v) = (0..self.len() as u32).find(|&v| seen.contains(&self.label(v))) {
            return bad(format!("id {} is already in the index", self.label(v)));
        }
        Ok(())
    }

    /// Best-first search on layer 0 from `entry` with list size `ef`; results nearest first, at least
    /// `min(want, len)` of them (`BestFirst::guarantee`; the build asks for none).
    pub(crate) fn search_layer0(&self, q: VecRef<'_>, entry: u32, ef: usize, record: bool, want: usize) -> (Vec<Cand>, Vec<Cand>) {
        SCRATCH.with(|s| {
            let (vis, st, buf) = &mut *s.borrow_mut();
            vis.ensure(self.len());
            vis.clear();
            vis.insert(entry);
            st.record_expanded = record;
            st.start(ef, &[Cand { d: self.dist_q(q, entry), id: entry }]);
            st.guarantee(want, self.len());
            let adj = &self.layer0;
            run(st, vis, buf, |v, f| adj.for_each(v, f), |u| self.dist_q(q, u), |u| self.prefetch(u), |v| adj.prefetch(v));
            (st.results(), std::mem::take(&mut st.expanded))
        })
    }

    /// Greedy walk on upper level `lev` (HNSW): moves to a nearer neighbour until none is nearer; adds the
    /// distances it measures to `measured`.
    pub(crate) fn greedy(&self, q: VecRef<'_>, mut cur: Cand, lev: usize, measured: &mut usize) -> Cand {
        loop {
            let start = cur;
            // Measured under the lock: upper rows are short, and nothing writes them while searching.
            let row = &self.upper[start.id as usize].lock().unwrap()[lev - 1];
            *measured += row.len();
            for &u in row {
                let c = Cand { d: self.dist_q(q, u), id: u };
                if c < cur {
                    cur = c;
                }
            }
            if cur == start {
                return cur;
            }
        }
    }

    /// The `k` nearest neighbours of one prepared query with list size `max(ef, k)`.
    pub fn search_one(&self, q: VecRef<'_>, k: usize, ef: usize) -> Vec<Cand> {
        let Some(entry) = self.entry_for(q) else { return Vec::new() };
        let mut r = self.search_layer0(q, entry, ef.max(k), false, k).0;
        r.truncate(k);
        r
    }

    /// Searches a batch of rows (the index's dtype); returns distances and labels, `k` per query, nearest first,
    /// padded with +inf / -1 beyond the vectors the index holds (as FAISS). Runs on rayon's current pool.
    pub fn search(&self, mut queries: Rows, k: usize, ef: usize) -> Result<(Vec<f32>, Vec<i64>), NdError> {
        let nq = self.prepare(&mut queries, "q")?;
        if k == 0 || k > MAX_EF {
            return Err(NdError::Argument(format!("k must be in 1..={MAX_EF}, not {k}")));
        }
        if ef == 0 || ef > MAX_EF {
            return Err(NdError::Argument(format!("ef must be in 1..={MAX_EF}, not {ef}")));
        }
        let mut dist = vec![f32::INFINITY; nq * k];
        let mut ids = vec![-1i64; nq * k];
        let dim = self.p.dim;
        let one = |(i, (d, id)): (usize, (&mut [f32], &mut [i64]))| {
            for (j, c) in self.search_one(queries.row(i, dim), k, ef).into_iter().enumerate() {
                d[j] = c.d;
                id[j] = self.label(c.id);
            }
        };
        if rayon::current_num_threads() <= 1 {
            dist.chunks_mut(k).zip(ids.chunks_mut(k)).enumerate().for_each(one);
        } else {
            dist.par_chunks_mut(k).zip(ids.par_chunks_mut(k)).enumerate().with_max_len(8).for_each(one);
        }
        Ok((dist, ids))
    }
}
