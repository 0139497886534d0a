//! Embedding-id traces of the RecSSD evaluation (paper §5 "Input traces", §6.1 Fig. 8).
//!
//! * **Locality traces**: DLRM's synthetic generator driven by a stack-distance distribution, as instrumented by
//!   the RecSSD artifact (RecSSD-RecInfra `models/input/gen_dist.py` + `data_generator/dlrm_data_caffe2.py`):
//!   1,000 Exponential(1.0) samples are binned into a 50-bin *density* histogram; `floor(K x total density)` is
//!   added to bin 0 (bin 0 = a new, never-recently-seen line); the normalised cumulative sum is the stack-distance
//!   CDF. Each access draws a bin `b` and re-touches the line at LRU stack depth `b x lookups_per_sample`, or, for
//!   `b = 0`, the least-recently-used line. Lines are `table_rows / 128` cache lines and the emitted row id is
//!   `line x 128` (the artifact's `mem_ref`), so a trace touches 7,812 rows of a 1M-row table; with 128-byte rows
//!   (dim 32, fp32) and 16 KiB pages every touched row sits on its own flash page - the paper's "one vector per
//!   page" assumption. The artifact generates `2N` accesses and keeps the last `N` (warm-up).
//!   Paper vs artifact: the paper quotes K = 0, 1, 2 -> 13%, 54%, 72% unique accesses; the artifact's formula gives
//!   13%, 55%, 70.5% averaged over seeds, each seed within about +-3 points (the 1,000 samples set the bin width,
//!   hence bin 0's mass and the truncated `K x total`). We follow the artifact and report the new-reference
//!   fraction each trace actually has. One profile (one seed) serves all tables of a call, as the artifact copies
//!   one `dist.log` to every table; each table draws its own accesses.
//! * **Uniform traces**: ids uniform over the table, distinct within a bag and sorted (DLRM `random`, `np.unique`).
//! * **SEQ / STR microbenchmarks** (RecSSD-UNVMeDriver `test/unvme/unvme_embed_test.c`): ids start at 65 and grow
//!   by 1 (SEQ) or by a stride of one flash page worth of rows (STR, 64 rows of dim 64) across the whole batch.

use crate::seeds::stream_rng;
use rand::Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// Exponential samples drawn to shape the distribution [artifact `gen_dist.py`: `nsamples = 1000`].
pub const ARTIFACT_SAMPLES: usize = 1000;
/// Histogram bins = number of stack-distance classes [artifact `gen_dist.py`: `nbins = 50`].
pub const ARTIFACT_BINS: usize = 50;
/// Scale (mean) of the exponential [artifact `gen_dist.py`: `scale = 1.0`].
pub const ARTIFACT_SCALE: f64 = 1.0;
/// Rows per cache line of the id space; ids are `line x 128` [artifact `cacheline_size = 128`].
pub const ARTIFACT_LINE_ROWS: u64 = 128;
/// First id of the SEQ/STR microbenchmarks [artifact `unvme_embed_test.c`: `int id = 65`].
pub const MICROBENCH_FIRST_ID: u64 = 65;

/// Errors of trace generation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// A distribution parameter is out of range.
    #[error("invalid locality parameter: {0}")]
    InvalidParameter(String),
    /// A CDF given by the caller is not a CDF.
    #[error("invalid stack-distance CDF: {0}")]
    InvalidCdf(String),
    /// The table has fewer lines than the deepest stack distance the profile can draw.
    #[error(
        "table of {rows} rows has {lines} lines of {line_rows} rows, but stack distances reach {depth} lines \
         (max bin {max_bin} x {lookups} lookups per sample); use a bigger table or smaller line_rows"
    )]
    StackDeeperThanTable { rows: u64, line_rows: u64, lines: u64, max_bin: usize, lookups: usize, depth: u64 },
    /// A generated id would fall outside the table.
    #[error("pattern needs id {id} but the table has {rows} rows")]
    IdBeyondTable { id: u64, rows: u64 },
    /// A bag asks for more distinct ids than the table has.
    #[error("{lookups} distinct ids per bag requested from a table of {rows} rows")]
    BagLargerThanTable { lookups: usize, rows: u64 },
}

/// Parameters of the exponential stack-distance distribution.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LocalityParams {
    /// Locality knob K (>= 0): mass added to "new reference"; larger K = fewer reuses.
    pub k: f64,
    /// Exponential samples in the histogram.
    pub samples: usize,
    /// Histogram bins (stack-distance classes).
    pub bins: usize,
    /// Exponential scale.
    pub scale: f64,
}

impl LocalityParams {
    /// The artifact's settings for a given K.
    pub fn artifact(k: f64) -> Self {
        Self { k, samples: ARTIFACT_SAMPLES, bins: ARTIFACT_BINS, scale: ARTIFACT_SCALE }
    }
}

/// A stack-distance CDF over bins `0..=max_bin` (bin 0 = new reference).
#[derive(Debug, Clone, PartialEq)]
pub struct StackDistanceProfile {
    cdf: Vec<f64>,
}

impl StackDistanceProfile {
    /// Builds the artifact's distribution from `params`, drawing the exponential samples from stream 0 of `seed`.
    pub fn exponential(params: &LocalityParams, seed: u64) -> Result<Self, TraceError> {
        if !(params.k.is_finite() && params.k >= 0.0) {
            return Err(TraceError::InvalidParameter(format!("k = {} must be finite and >= 0", params.k)));
        }
        if params.samples == 0 || params.bins < 2 {
            return Err(TraceError::InvalidParameter(format!(
                "need samples >= 1 and bins >= 2 (got {} samples, {} bins)",
                params.samples, params.bins
            )));
        }
        if !(params.scale.is_finite() && params.scale > 0.0) {
            return Err(TraceError::InvalidParameter(format!("scale = {} must be > 0", params.scale)));
        }
        let mut rng = stream_rng(seed, 0);
        // Inverse-transform sampling of Exponential(scale); 1 - u lies in (0, 1].
        let samples: Vec<f64> = (0..params.samples).map(|_| -params.scale * (1.0 - rng.gen::<f64>()).ln()).collect();
        let density = density_histogram(&samples, params.bins);
        let total: f64 = density.iter().sum();
        let mut mass = density;
        // Python `int()` truncation of K x total, as in the artifact.
        mass[0] += (params.k * total).floor();
        Self::from_masses(&mass)
    }

    /// A profile from non-negative bin masses (normalised here).
    pub fn from_masses(mass: &[f64]) -> Result<Self, TraceError> {
        if mass.len() < 2 || mass.iter().any(|m| !(m.is_finite() && *m >= 0.0)) {
            return Err(TraceError::InvalidCdf("need >= 2 finite, non-negative bin masses".into()));
        }
        let total: f64 = mass.iter().sum();
        if total <= 0.0 {
            return Err(TraceError::InvalidCdf("bin masses sum to zero".into()));
        }
        let mut acc = 0.0;
        let mut cdf: Vec<f64> = mass
            .iter()
            .map(|m| {
                acc += m;
                acc / total
            })
            .collect();
        *cdf.last_mut().expect("len >= 2") = 1.0;
        Ok(Self { cdf })
    }

    /// The cumulative distribution, one value per bin; the last is 1.
    pub fn cdf(&self) -> &[f64] {
        &self.cdf
    }

    /// Probability that an access is a new reference (bin 0), before warm-up effects.
    pub fn new_reference_probability(&self) -> f64 {
        self.cdf[0]
    }

    /// The deepest bin.
    pub fn max_bin(&self) -> usize {
        self.cdf.len() - 1
    }

    /// The artifact's `generate_stack_distance`: while fewer than `max_bin` new lines have been seen, the draw
    /// is confined to bins `0..=new_seen`.
    fn draw(&self, u: f64, new_seen: usize) -> usize {
        let u = if new_seen < self.max_bin() { u * self.cdf[new_seen] } else { u };
        self.cdf.partition_point(|&f| f < u).min(self.max_bin())
    }
}

/// numpy `histogram(density=True)` over equal-width bins spanning [min, max].
fn density_histogram(samples: &[f64], bins: usize) -> Vec<f64> {
    let lo = samples.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = samples.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    // numpy widens a degenerate range to [x - 0.5, x + 0.5].
    let (lo, hi) = if hi > lo { (lo, hi) } else { (lo - 0.5, hi + 0.5) };
    let width = (hi - lo) / bins as f64;
    let mut counts = vec![0u64; bins];
    for &x in samples {
        let b = (((x - lo) / width) as usize).min(bins - 1);
        counts[b] += 1;
    }
    let norm = samples.len() as f64 * width;
    counts.into_iter().map(|c| c as f64 / norm).collect()
}

/// One table's locality trace request.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LocalityTraceSpec {
    /// Rows of the embedding table.
    pub table_rows: u64,
    /// Lookups per sample (bag); stack distances are bins x this.
    pub lookups_per_sample: usize,
    /// Rows per line; ids are line x line_rows.
    pub line_rows: u64,
    /// Accesses returned.
    pub accesses: usize,
    /// Accesses generated and dropped first (the artifact drops as many as it keeps).
    pub warmup: usize,
}

impl LocalityTraceSpec {
    /// The artifact's choices: 128-row lines, warm-up as long as the trace.
    pub fn artifact(table_rows: u64, lookups_per_sample: usize, accesses: usize) -> Self {
        Self { table_rows, lookups_per_sample, line_rows: ARTIFACT_LINE_ROWS, accesses, warmup: accesses }
    }
}

/// A generated trace.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalityTrace {
    /// Row ids in access order.
    pub ids: Vec<u64>,
    /// How many of them were drawn as new references (bin 0).
    pub new_references: usize,
}

impl LocalityTrace {
    /// Fraction of accesses that were new references ("unique accesses" in the paper).
    pub fn new_reference_fraction(&self) -> f64 {
        if self.ids.is_empty() {
            0.0
        } else {
            self.new_references as f64 / self.ids.len() as f64
        }
    }
}

/// Generates one table's trace from stream `stream` of `seed`.
pub fn locality_trace(
    profile: &StackDistanceProfile,
    spec: &LocalityTraceSpec,
    seed: u64,
    stream: u64,
) -> Result<LocalityTrace, TraceError> {
    if spec.line_rows == 0 || spec.lookups_per_sample == 0 {
        return Err(TraceError::InvalidParameter("line_rows and lookups_per_sample must be >= 1".into()));
    }
    let lines = spec.table_rows / spec.line_rows;
    let depth = (profile.max_bin() as u64).saturating_mul(spec.lookups_per_sample as u64);
    if lines == 0 || depth > lines {
        return Err(TraceError::StackDeeperThanTable {
            rows: spec.table_rows,
            line_rows: spec.line_rows,
            lines,
            max_bin: profile.max_bin(),
            lookups: spec.lookups_per_sample,
            depth,
        });
    }
    let lines = usize::try_from(lines)
        .map_err(|_| TraceError::InvalidParameter(format!("{lines} lines do not fit in memory")))?;
    let mut stack = RecencyStack::new(lines);
    let mut rng = stream_rng(seed, stream);
    let mut ids = Vec::with_capacity(spec.accesses);
    let (mut new_seen, mut new_kept) = (0usize, 0usize);
    for n in 0..spec.warmup + spec.accesses {
        let bin = profile.draw(rng.gen::<f64>(), new_seen);
        let line = if bin == 0 {
            new_seen += 1;
            if n >= spec.warmup {
                new_kept += 1;
            }
            stack.touch_depth(lines)
        } else {
            stack.touch_depth(bin * spec.lookups_per_sample)
        };
        if n >= spec.warmup {
            ids.push(line as u64 * spec.line_rows);
        }
    }
    Ok(LocalityTrace { ids, new_references: new_kept })
}

/// Traces for several tables at once (in parallel); table `i` uses stream `i + 1` of `seed`.
pub fn locality_traces(
    profile: &StackDistanceProfile,
    specs: &[LocalityTraceSpec],
    seed: u64,
) -> Result<Vec<LocalityTrace>, TraceError> {
    specs.par_iter().enumerate().map(|(i, s)| locality_trace(profile, s, seed, i as u64 + 1)).collect()
}

/// LRU recency stack of `lines` lines with O(log n) access by depth: a Fenwick tree over last-touch timestamps.
/// Depth 1 = most recent, depth `lines` = least recent. Timestamps are renumbered when the slots run out.
struct RecencyStack {
    lines: usize,
    tree: Vec<u32>,
    slot_line: Vec<u32>,
    line_slot: Vec<usize>,
    next_slot: usize,
}

impl RecencyStack {
    const NO_LINE: u32 = u32::MAX;

    fn new(lines: usize) -> Self {
        let cap = (lines * 4).max(4096);
        let mut s = Self {
            lines,
            tree: vec![0; cap + 1],
            slot_line: vec![Self::NO_LINE; cap],
            line_slot: vec![0; lines],
            next_slot: 0,
        };
        // Initial order of the artifact's `line_accesses = [0, 1, ...]`: line 0 is the least recent.
        s.renumber((0..lines as u32).collect());
        s
    }

    /// Moves the line at `depth` to the top and returns it.
    fn touch_depth(&mut self, depth: usize) -> usize {
        debug_assert!((1..=self.lines).contains(&depth));
        if self.next_slot == self.slot_line.len() {
            let order: Vec<u32> = self.slot_line.iter().copied().filter(|&l| l != Self::NO_LINE).collect();
            self.renumber(order);
        }
        let slot = self.kth_occupied(self.lines - depth + 1);
        let line = self.slot_line[slot];
        self.slot_line[slot] = Self::NO_LINE;
        self.add(slot, -1);
        let top = self.next_slot;
        self.next_slot += 1;
        self.slot_line[top] = line;
        self.line_slot[line as usize] = top;
        self.add(top, 1);
        line as usize
    }

    /// Lays `order` (least recent first) into slots 0.. and rebuilds the tree in O(capacity).
    fn renumber(&mut self, order: Vec<u32>) {
        self.slot_line.fill(Self::NO_LINE);
        self.tree.fill(0);
        for (slot, &line) in order.iter().enumerate() {
            self.slot_line[slot] = line;
            self.line_slot[line as usize] = slot;
            self.tree[slot + 1] = 1;
        }
        let n = self.tree.len() - 1;
        for i in 1..=n {
            let parent = i + (i & i.wrapping_neg());
            if parent <= n {
                self.tree[parent] += self.tree[i];
            }
        }
        self.next_slot = order.len();
    }

    fn add(&mut self, slot: usize, delta: i32) {
        let mut i = slot + 1;
        while i < self.tree.len() {
            self.tree[i] = self.tree[i].wrapping_add_signed(delta);
            i += i & i.wrapping_neg();
        }
    }

    /// Slot of the k-th occupied slot (1-based) by binary lifting.
    fn kth_occupied(&self, mut k: usize) -> usize {
        let n = self.tree.len() - 1;
        let mut pos = 0;
        let mut step = 1usize << (usize::BITS - 1 - n.leading_zeros());
        while step > 0 {
            let next = pos + step;
            if next <= n && (self.tree[next] as usize) < k {
                pos = next;
                k -= self.tree[next] as usize;
            }
            step >>= 1;
        }
        pos
    }
}

/// `bags x lookups` ids uniform over `0..rows`, distinct and sorted within each bag (DLRM `random` generator).
pub fn uniform_bags(rows: u64, bags: usize, lookups: usize, seed: u64) -> Result<Vec<u64>, TraceError> {
    if (lookups as u64) > rows {
        return Err(TraceError::BagLargerThanTable { lookups, rows });
    }
    let mut rng = stream_rng(seed, 0);
    let mut ids = Vec::with_capacity(bags * lookups);
    let mut bag = Vec::with_capacity(lookups);
    for _ in 0..bags {
        bag.clear();
        while bag.len() < lookups {
            while bag.len() < lookups {
                bag.push(rng.gen_range(0..rows));
            }
            bag.sort_unstable();
            bag.dedup();
        }
        ids.extend_from_slice(&bag);
    }
    Ok(ids)
}

/// SEQ microbenchmark: ids `first, first + 1, ...` across the whole batch.
pub fn sequential_bags(rows: u64, bags: usize, lookups: usize, first: u64) -> Result<Vec<u64>, TraceError> {
    strided_bags(rows, bags, lookups, first, 1)
}

/// STR microbenchmark: ids `first + n x stride` across the whole batch.
pub fn strided_bags(rows: u64, bags: usize, lookups: usize, first: u64, stride: u64) -> Result<Vec<u64>, TraceError> {
    let n = (bags as u64).saturating_mul(lookups as u64);
    if n == 0 {
        return Ok(Vec::new());
    }
    let last = (n - 1).checked_mul(stride).and_then(|d| d.checked_add(first)).unwrap_or(u64::MAX);
    if last >= rows {
        return Err(TraceError::IdBeyondTable { id: last, rows });
    }
    Ok((0..n).map(|i| first + i * stride).collect())
}

/// Stride that puts every id on its own page: one page worth of rows, rounded up.
pub fn one_row_per_page_stride(row_bytes: u64, page_bytes: u64) -> u64 {
    page_bytes.div_ceil(row_bytes.max(1)).max(1)
}

/// EmbeddingBag offsets of `bags` bags of `lookups` ids each.
pub fn fixed_offsets(bags: usize, lookups: usize) -> Vec<u64> {
    (0..bags as u64).map(|b| b * lookups as u64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn artifact_trace(k: f64, seed: u64, n: usize) -> LocalityTrace {
        let p = StackDistanceProfile::exponential(&LocalityParams::artifact(k), seed).unwrap();
        locality_trace(&p, &LocalityTraceSpec::artifact(1_000_000, 80, n), seed, 1).unwrap()
    }

    #[test]
    fn unique_access_fractions_match_the_paper() {
        // Paper §5: K = 0, 1, 2 -> 13%, 54%, 72% unique accesses. Averaged over seeds (the histogram's bin width,
        // hence the truncated mass, varies with the 1,000 samples).
        for (k, want) in [(0.0, 0.13), (1.0, 0.54), (2.0, 0.72)] {
            let seeds = 0..8u64;
            let mean: f64 =
                seeds.clone().map(|s| artifact_trace(k, s, 40_000).new_reference_fraction()).sum::<f64>() / 8.0;
            assert!((mean - want).abs() < 0.03, "K={k}: {mean:.3} vs {want}");
        }
    }

    /// Independent check of the counter: after warm-up, an access is a new reference exactly when an LRU cache
    /// holding more lines than the deepest reuse (49 bins x 80) but fewer than all 7,812 lines misses.
    #[test]
    fn new_references_are_exactly_the_deep_misses() {
        let p = StackDistanceProfile::exponential(&LocalityParams::artifact(1.0), 3).unwrap();
        let spec = |n| LocalityTraceSpec { warmup: 0, ..LocalityTraceSpec::artifact(1_000_000, 80, n) };
        let head = locality_trace(&p, &spec(15_000), 3, 1).unwrap();
        let full = locality_trace(&p, &spec(40_000), 3, 1).unwrap();
        assert_eq!(&full.ids[..15_000], &head.ids[..]);
        let mut lru = lru::LruCache::new(std::num::NonZeroUsize::new(5_000).unwrap());
        let mut misses = 0;
        for (i, &id) in full.ids.iter().enumerate() {
            let hit = lru.put(id, ()).is_some();
            misses += usize::from(i >= 15_000 && !hit);
        }
        assert_eq!(misses, full.new_references - head.new_references);
    }

    #[test]
    fn ids_are_line_starts_within_the_table_and_deterministic() {
        let a = artifact_trace(0.0, 11, 5_000);
        let b = artifact_trace(0.0, 11, 5_000);
        assert_eq!(a, b);
        assert!(a.ids.iter().all(|&id| id % 128 == 0 && id < 1_000_000));
        assert_ne!(a.ids, artifact_trace(0.0, 12, 5_000).ids);
    }

    #[test]
    fn profile_follows_the_artifact_formula() {
        let p0 = StackDistanceProfile::exponential(&LocalityParams::artifact(0.0), 5).unwrap();
        let p2 = StackDistanceProfile::exponential(&LocalityParams::artifact(2.0), 5).unwrap();
        assert_eq!(p0.cdf().len(), 50);
        assert!(p0.cdf().windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(*p0.cdf().last().unwrap(), 1.0);
        // Bin 0 of an Exponential(1) histogram with ~0.15-wide bins holds ~13%; K = 2 adds floor(2 / width).
        assert!((0.08..0.2).contains(&p0.new_reference_probability()));
        assert!(p2.new_reference_probability() > 0.6);
    }

    #[test]
    fn shallow_tables_are_rejected() {
        let p = StackDistanceProfile::exponential(&LocalityParams::artifact(1.0), 0).unwrap();
        let err = locality_trace(&p, &LocalityTraceSpec::artifact(10_000, 3, 10), 0, 1).unwrap_err();
        assert!(matches!(err, TraceError::StackDeeperThanTable { lines: 78, depth: 147, .. }), "{err}");
        let bad = LocalityParams { k: -1.0, ..LocalityParams::artifact(0.0) };
        assert!(StackDistanceProfile::exponential(&bad, 0).is_err());
    }

    #[test]
    fn parallel_traces_equal_serial_ones() {
        let p = StackDistanceProfile::exponential(&LocalityParams::artifact(1.0), 9).unwrap();
        let specs = [LocalityTraceSpec::artifact(1 << 20, 20, 3000), LocalityTraceSpec::artifact(1 << 19, 10, 2000)];
        let par = locality_traces(&p, &specs, 9).unwrap();
        for (i, s) in specs.iter().enumerate() {
            assert_eq!(par[i], locality_trace(&p, s, 9, i as u64 + 1).unwrap());
        }
    }

    #[test]
    fn recency_stack_matches_a_naive_list_across_renumbering() {
        let lines = 50;
        let mut fast = RecencyStack::new(lines);
        let mut naive: Vec<usize> = (0..lines).collect(); // back = most recent
        let mut rng = stream_rng(1, 1);
        for _ in 0..20_000 {
            let depth = rng.gen_range(1..=lines);
            let want = naive.remove(lines - depth);
            naive.push(want);
            assert_eq!(fast.touch_depth(depth), want);
        }
    }

    #[test]
    fn uniform_bags_are_distinct_sorted_and_in_range() {
        let ids = uniform_bags(1000, 50, 80, 4).unwrap();
        assert_eq!(ids.len(), 4000);
        for bag in ids.chunks(80) {
            assert!(bag.windows(2).all(|w| w[0] < w[1]));
            assert!(bag.iter().all(|&i| i < 1000));
        }
        assert_eq!(ids, uniform_bags(1000, 50, 80, 4).unwrap());
        assert!(uniform_bags(10, 1, 11, 0).is_err());
    }

    #[test]
    fn microbenchmark_patterns() {
        assert_eq!(sequential_bags(100, 2, 3, 65).unwrap(), vec![65, 66, 67, 68, 69, 70]);
        let stride = one_row_per_page_stride(64 * 4, 16384);
        assert_eq!(stride, 64);
        let s = strided_bags(1 << 20, 2, 2, 65, stride).unwrap();
        assert_eq!(s, vec![65, 129, 193, 257]);
        assert!(strided_bags(200, 2, 2, 65, 64).is_err());
        assert_eq!(fixed_offsets(3, 80), vec![0, 80, 160]);
    }
}
