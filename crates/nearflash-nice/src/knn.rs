//! NICE-K (paper Sec. IV-D): exact K-nearest-neighbour search over an embedding file of 16- or 32-bit signed
//! integers, as the FPGA computes it, and its timing.
//!
//! Hardware shape: `selectors` parallel pipelines; each has a dimension-partitioned distance unit (`lanes`
//! multiply-accumulate lanes, one vector every ceil(D / lanes) cycles, partial sums joined by an adder tree) feeding
//! a pipelined top-K selector (a sorted insertion chain, latency k + log2 k cycles). Vector i goes to pipeline
//! i mod `selectors`; the selectors' K-lists are merged by one more selector pass. The input streams over the AXI
//! port at `axi_bytes_per_cycle`, which bounds large D (the paper's D = 64 result).
//!
//! Distances are squared L2 in exact integer arithmetic, so partitioning by dimension or by vector changes nothing
//! in the answer: ties are broken by vector index, so the answer equals a brute-force sort. The accumulators are
//! 128 bits wide: a 32-bit difference squared needs 64 bits and a sum over up to `MAX_DIM` = 2^10 dimensions 74,
//! so every representable input is exact (a 64-bit accumulator wraps on full-range int32 embeddings). The
//! firmware's result carries each distance in 64 bits, saturated ([`reported`]); the ranking never is.

use crate::error::{invalid, Result};
use nearflash_core::config::{ExtParams, ParamError};

nearflash_core::ext_params! {
    /// NICE-K parameters in canonical units (Hz, bytes, counts).
    pub struct KnnParams {
        /// FPGA kernel clock.
        clock: Frequency = 200, "MHz", "assumed: NICE gives no FPGA clock; 200 MHz is a common ZU+ programmable-logic kernel clock (Xilinx DS925 allows up to ~600 MHz for simple logic)";
        /// Multiply-accumulate lanes of one distance unit (dimension partitions).
        lanes: Count = 16, "count", "assumed: NICE Sec. IV-D partitions dimensions over a pipelined distance unit without giving the width; 16 lanes cover D = 16 in one cycle";
        /// Distance-unit + top-K selector pipelines in parallel.
        selectors: Count = 4, "count", "assumed: NICE Sec. IV-D runs several selectors in parallel without a count";
        /// Input bytes per cycle over the PS-PL AXI port.
        axi_bytes_per_cycle: Bytes = 16, "B", "Xilinx UG1085: Zynq UltraScale+ PS-PL high-performance AXI ports are 128 bits wide";
        /// Stages of a multiplier before the adder tree.
        mul_stages: Count = 3, "count", "assumed: a pipelined DSP48 multiply";
        /// Distance units (each with its own top-K selector) per pipeline, each serving one query of a batch: the
        /// queries of a batch share one pass of the stream, `query_units` of them at a time on each vector.
        query_units: Count = 8, "count", "assumed: NICE does not describe its batching; 16 lanes x 4 pipelines x 8 units = 512 DSP48E2 multipliers, with NICE-C's 256 PEs within the ZU7EG's 1728 (Xilinx DS891)";
        /// Queries one batched invocation may carry (the on-chip query buffer and per-query top-K state).
        max_queries: Count = 256, "count", "assumed: 256 queries x D <= 64 x 4 B = 64 KiB of query buffer plus 256 x 4 selectors x K = 128 x 12 B = 1.5 MiB of top-K state fit the ZU7EG's 4.75 MB of BRAM + UltraRAM (Xilinx DS891); the batch Fig. 15's GPU uses";
    }
}

/// Element width of an embedding file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    I16,
    I32,
}

impl Width {
    /// The values an element (and a query value) of this width may hold.
    pub fn range(self) -> std::ops::RangeInclusive<i64> {
        match self {
            Width::I16 => i64::from(i16::MIN)..=i64::from(i16::MAX),
            Width::I32 => i64::from(i32::MIN)..=i64::from(i32::MAX),
        }
    }
    pub fn bytes(self) -> usize {
        match self {
            Width::I16 => 2,
            Width::I32 => 4,
        }
    }
    pub fn from_bits(bits: u32) -> Result<Self> {
        match bits {
            16 => Ok(Width::I16),
            32 => Ok(Width::I32),
            _ => Err(invalid(format!("width {bits} bits: 16 or 32 allowed"))),
        }
    }
}

/// Dimensions NICE-K supports (the paper evaluates D = 4..64).
pub const MAX_DIM: usize = 1024;
pub const MAX_K: usize = 4096;

/// A squared distance as the 64-bit result field carries it: exact below 2^64 - 1, else saturated at
/// `u64::MAX` (only int32 embeddings far apart reach it).
pub fn reported(dist: u128) -> u64 {
    u64::try_from(dist).unwrap_or(u64::MAX)
}

fn element(b: &[u8], w: Width) -> i64 {
    match w {
        Width::I16 => i64::from(i16::from_le_bytes([b[0], b[1]])),
        Width::I32 => i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
    }
}

/// Checks an embedding file's shape: returns its vector count.
pub fn vector_count(data: &[u8], dim: usize, width: Width) -> Result<usize> {
    if dim == 0 || dim > MAX_DIM {
        return Err(invalid(format!("dim {dim}: 1..={MAX_DIM} allowed")));
    }
    let row = dim * width.bytes();
    if !data.len().is_multiple_of(row) {
        return Err(invalid(format!("{} bytes is not a whole number of {row}-byte vectors", data.len())));
    }
    Ok(data.len() / row)
}

/// A pipelined top-K selector: a chain of K sorted registers; a candidate enters at one end each cycle.
#[derive(Debug, Clone)]
struct Selector {
    k: usize,
    best: Vec<(u128, u32)>,
}

impl Selector {
    fn push(&mut self, c: (u128, u32)) {
        if self.best.len() == self.k && c >= *self.best.last().expect("k >= 1") {
            return;
        }
        let at = self.best.partition_point(|&b| b < c);
        self.best.insert(at, c);
        self.best.truncate(self.k);
    }
}

/// The K nearest vectors to `query` (squared L2 distance, vector index), nearest first.
pub fn knn(data: &[u8], dim: usize, width: Width, query: &[i64], k: usize, p: &KnnParams) -> Result<Vec<(u128, u32)>> {
    Ok(knn_batch(data, dim, width, &[query.to_vec()], k, p)?.remove(0))
}

/// Checks that every query value fits the embedding's element width (the distance unit's operand width).
pub fn check_query_values(queries: &[Vec<i64>], width: Width) -> Result<()> {
    let range = width.range();
    match queries.iter().flatten().find(|v| !range.contains(v)) {
        Some(v) => Err(invalid(format!("query value {v}: a {}-bit embedding takes {}..={}", 8 * width.bytes(), range.start(), range.end()))),
        None => Ok(()),
    }
}

/// Checks a batch's size against the query buffer (`max_queries`).
pub fn check_batch(queries: usize, p: &KnnParams) -> Result<()> {
    if queries == 0 || queries as f64 > p.max_queries {
        return Err(invalid(format!("queries {queries}: 1..={} allowed (the query buffer, max_queries)", p.max_queries)));
    }
    Ok(())
}

/// The K nearest vectors to each of `queries`, in one pass over the file: every vector is decoded once and each
/// query's distance unit and selectors see it (as [`knn`] per query, the same answers).
pub fn knn_batch(data: &[u8], dim: usize, width: Width, queries: &[Vec<i64>], k: usize, p: &KnnParams) -> Result<Vec<Vec<(u128, u32)>>> {
    let n = vector_count(data, dim, width)?;
    check_batch(queries.len(), p)?;
    if let Some(q) = queries.iter().find(|q| q.len() != dim) {
        return Err(invalid(format!("query has {} values, dim is {dim}", q.len())));
    }
    check_query_values(queries, width)?;
    if k == 0 || k > MAX_K {
        return Err(invalid(format!("k {k}: 1..={MAX_K} allowed")));
    }
    if n > u32::MAX as usize {
        return Err(invalid("more than 2^32 vectors"));
    }
    let lanes = p.lanes.max(1.0) as usize;
    let s = p.selectors.max(1.0) as usize;
    let w = width.bytes();
    let mut sel = vec![vec![Selector { k, best: Vec::with_capacity(k + 1) }; s]; queries.len()];
    let (mut row, mut partial) = (vec![0i64; dim], vec![0u128; lanes]);
    for i in 0..n {
        for (d, v) in row.iter_mut().enumerate() {
            *v = element(&data[(i * dim + d) * w..], width);
        }
        for (query, sel) in queries.iter().zip(sel.iter_mut()) {
            // Dimension-partitioned: lane j accumulates dimensions j, j + lanes, ...; the adder tree sums the lanes.
            partial.fill(0);
            for d in 0..dim {
                // |difference| < 2^32 (both in the width's range), so its square fits 64 bits and a lane's sum
                // of at most MAX_DIM of them fits 128.
                let diff = u128::from((row[d] - query[d]).unsigned_abs());
                partial[d % lanes] += diff * diff;
            }
            let dist: u128 = partial.iter().sum();
            sel[i % s].push((dist, i as u32));
        }
    }
    Ok(sel
        .into_iter()
        .map(|sel| {
            let mut merged = Selector { k, best: Vec::with_capacity(k + 1) };
            for c in sel.into_iter().flat_map(|s| s.best) {
                merged.push(c);
            }
            merged.best
        })
        .collect())
}

/// Cycle counts of one NICE-K query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KnnTiming {
    pub distance_cycles: f64,
    pub stream_cycles: f64,
    pub selector_cycles: f64,
    pub merge_cycles: f64,
    pub total_cycles: f64,
    pub seconds: f64,
}

/// Pipelined top-K selector latency: k + log2 k cycles (paper Sec. IV-D).
pub fn selector_latency(k: usize) -> f64 {
    k as f64 + (k as f64).log2().ceil()
}

/// Timing of a query over `n` vectors of `dim` elements.
pub fn knn_timing(n: u64, dim: usize, width: Width, k: usize, p: &KnnParams) -> KnnTiming {
    knn_batch_timing(n, dim, width, k, 1, p)
}

/// Timing of `queries` queries answered in one pass over `n` vectors: the stream is read once; each pipeline's
/// `query_units` distance units take a vector's queries `query_units` at a time (ceil(queries / query_units)
/// rounds per vector), and each unit's merge selector merges its queries' K-lists one query after another.
pub fn knn_batch_timing(n: u64, dim: usize, width: Width, k: usize, queries: usize, p: &KnnParams) -> KnnTiming {
    let lanes = p.lanes.max(1.0);
    let s = p.selectors.max(1.0);
    let rounds = (queries.max(1) as f64 / p.query_units.max(1.0)).ceil();
    let per_vector = (dim as f64 / lanes).ceil() * rounds;
    let distance_cycles = (n as f64 / s).ceil() * per_vector + p.mul_stages + lanes.log2().ceil();
    let stream_cycles = (n as f64 * dim as f64 * width.bytes() as f64 / p.axi_bytes_per_cycle).ceil();
    let selector_cycles = selector_latency(k);
    // The merge pass feeds every selector's K survivors through one selector, per query of a unit.
    let merge_cycles = if s > 1.0 { rounds * s * k as f64 + selector_latency(k) } else { 0.0 };
    let total_cycles = distance_cycles.max(stream_cycles) + selector_cycles + merge_cycles;
    KnnTiming { distance_cycles, stream_cycles, selector_cycles, merge_cycles, total_cycles, seconds: total_cycles / p.clock }
}

impl KnnParams {
    /// Defaults overridden by a JSON object of plain numbers in the units listed in the parameter table.
    pub fn from_json(v: &serde_json::Value) -> Result<Self> {
        let mut p = KnnParams::default();
        p.apply_json_object(v, &[]).map_err(|e: ParamError| invalid(format!("NICE-K {e}")))?;
        if p.clock <= 0.0 || p.lanes < 1.0 || p.selectors < 1.0 || p.axi_bytes_per_cycle <= 0.0 || p.query_units < 1.0 || p.max_queries < 1.0 {
            return Err(invalid("NICE-K parameters must be positive"));
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The exact reference: signed 128-bit arithmetic, a plain sort.
    fn brute(data: &[u8], dim: usize, w: Width, q: &[i64], k: usize) -> Vec<(u128, u32)> {
        let n = data.len() / (dim * w.bytes());
        let mut all: Vec<(u128, u32)> = (0..n)
            .map(|i| {
                let d: i128 = (0..dim)
                    .map(|j| {
                        let x = i128::from(element(&data[(i * dim + j) * w.bytes()..], w)) - i128::from(q[j]);
                        x * x
                    })
                    .sum();
                let d = u128::try_from(d).unwrap();
                (d, i as u32)
            })
            .collect();
        all.sort();
        all.truncate(k);
        all
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn equals_brute_force(dim in 4usize..=64, n in 1usize..400, k in 1usize..=128, wide: bool, seed: u64, lanes in 1u32..20, sel in 1u32..6) {
            let w = if wide { Width::I32 } else { Width::I16 };
            let mut x = seed | 1;
            let mut next = || { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x };
            // Small value range so that ties happen and the index tie-break is exercised.
            let data: Vec<u8> = (0..n * dim).flat_map(|_| {
                let v = (next() % 9) as i64 - 4;
                if wide { (v as i32 * 1000).to_le_bytes().to_vec() } else { (v as i16).to_le_bytes().to_vec() }
            }).collect();
            let q: Vec<i64> = (0..dim).map(|_| ((next() % 9) as i64 - 4) * if wide { 1000 } else { 1 }).collect();
            let p = KnnParams { lanes: f64::from(lanes), selectors: f64::from(sel), ..KnnParams::default() };
            prop_assert_eq!(knn(&data, dim, w, &q, k, &p).unwrap(), brute(&data, dim, w, &q, k));
        }
    }

    /// Values over the width's whole range, its extremes often (where a narrow accumulator wraps).
    fn full_range(w: Width) -> impl Strategy<Value = i64> {
        let (lo, hi) = (*w.range().start(), *w.range().end());
        prop_oneof![Just(lo), Just(hi), Just(0i64), Just(lo + 1), Just(hi - 1), lo..=hi]
    }

    fn full_range_case() -> impl Strategy<Value = (Width, usize, Vec<i64>, Vec<Vec<i64>>, usize)> {
        (any::<bool>(), 1usize..=64, 1usize..40, 1usize..4).prop_flat_map(|(wide, dim, n, q)| {
            let w = if wide { Width::I32 } else { Width::I16 };
            (
                Just(w),
                Just(dim),
                proptest::collection::vec(full_range(w), n * dim),
                proptest::collection::vec(proptest::collection::vec(full_range(w), dim), q),
                1usize..=n + 2,
            )
        })
    }

    fn encode(values: &[i64], w: Width) -> Vec<u8> {
        values
            .iter()
            .flat_map(|&v| match w {
                Width::I16 => (v as i16).to_le_bytes().to_vec(),
                Width::I32 => (v as i32).to_le_bytes().to_vec(),
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn exact_over_the_full_range_of_either_width((w, dim, values, queries, k) in full_range_case(), lanes in 1u32..20, sel in 1u32..6) {
            let data = encode(&values, w);
            let p = KnnParams { lanes: f64::from(lanes), selectors: f64::from(sel), ..KnnParams::default() };
            let got = knn_batch(&data, dim, w, &queries, k, &p).unwrap();
            for (g, q) in got.iter().zip(&queries) {
                prop_assert_eq!(g, &brute(&data, dim, w, q, k));
            }
        }
    }

    #[test]
    fn full_range_int32_rows_rank_exactly() {
        // A 64-bit accumulator wraps the far row's 4 x (2^32 - 1)^2 and ranks it first.
        let rows: Vec<i64> = [i64::from(i32::MAX), 0, i64::from(i32::MIN)].iter().flat_map(|&v| [v; 4]).collect();
        let q = vec![i64::from(i32::MIN); 4];
        let got = knn(&encode(&rows, Width::I32), 4, Width::I32, &q, 3, &KnnParams::default()).unwrap();
        assert_eq!(got.iter().map(|c| c.1).collect::<Vec<_>>(), vec![2, 1, 0]);
        assert_eq!(got[2].0, 4 * u128::from(u32::MAX) * u128::from(u32::MAX));
        assert_eq!(got[1].0, 1 << 64);
        assert_eq!((reported(got[1].0 - 1), reported(got[1].0)), (u64::MAX, u64::MAX), "the result field saturates");
        assert_eq!(reported((1 << 64) - 2), u64::MAX - 1);
    }

    #[test]
    fn query_values_outside_the_width_are_refused() {
        let p = KnnParams::default();
        for (w, bad) in [(Width::I16, 32768), (Width::I16, -32769), (Width::I32, 1 << 31), (Width::I32, -(1 << 31) - 1)] {
            let data = vec![0u8; 4 * w.bytes()];
            let e = knn(&data, 4, w, &[0, 0, bad, 0], 1, &p).unwrap_err().to_string();
            assert!(e.contains(&format!("query value {bad}")), "{e}");
        }
        assert!(knn(&[0; 8], 4, Width::I16, &[-32768, 32767, 0, 0], 1, &p).is_ok(), "the extremes are allowed");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(16))]
        #[test]
        fn a_batch_equals_brute_force_per_query(dim in 4usize..=64, n in 1usize..300, k in 1usize..=128, wide: bool, seed: u64, q in 1usize..12) {
            let w = if wide { Width::I32 } else { Width::I16 };
            let mut x = seed | 1;
            let mut next = || { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x };
            let data: Vec<u8> = (0..n * dim).flat_map(|_| {
                let v = (next() % 9) as i64 - 4;
                if wide { (v as i32 * 1000).to_le_bytes().to_vec() } else { (v as i16).to_le_bytes().to_vec() }
            }).collect();
            let qs: Vec<Vec<i64>> = (0..q).map(|_| (0..dim).map(|_| ((next() % 9) as i64 - 4) * if wide { 1000 } else { 1 }).collect()).collect();
            let got = knn_batch(&data, dim, w, &qs, k, &KnnParams::default()).unwrap();
            prop_assert_eq!(got.len(), q);
            for (g, qv) in got.iter().zip(&qs) {
                prop_assert_eq!(g, &brute(&data, dim, w, qv, k));
            }
        }
    }

    #[test]
    fn batches_of_no_queries_or_more_than_the_buffer_are_refused() {
        let p = KnnParams { max_queries: 3.0, ..KnnParams::default() };
        let q = vec![0i64; 4];
        assert!(knn_batch(&[0; 16], 4, Width::I16, &[], 1, &p).unwrap_err().to_string().contains("queries 0"));
        let four = vec![q.clone(); 4];
        assert!(knn_batch(&[0; 16], 4, Width::I16, &four, 1, &p).unwrap_err().to_string().contains("max_queries"));
        assert_eq!(knn_batch(&[0; 16], 4, Width::I16, &four[..3], 1, &p).unwrap().len(), 3);
        assert!(knn_batch(&[0; 16], 4, Width::I16, &[q.clone(), vec![0; 3]], 1, &p).is_err(), "a short query");
        assert!(KnnParams::from_json(&serde_json::json!({"query_units": 0})).is_err());
    }

    #[test]
    fn a_batch_shares_the_stream_and_takes_its_queries_query_units_at_a_time() {
        let p = KnnParams::default();
        let one = knn_timing(1 << 16, 16, Width::I16, 128, &p);
        assert_eq!(knn_batch_timing(1 << 16, 16, Width::I16, 128, 1, &p), one);
        // Up to query_units queries: the same distance and stream cycles as one.
        let eight = knn_batch_timing(1 << 16, 16, Width::I16, 128, 8, &p);
        assert_eq!((eight.distance_cycles, eight.stream_cycles), (one.distance_cycles, one.stream_cycles));
        // 256 queries: 32 rounds per vector (distance bound now), the stream still read once.
        let full = knn_batch_timing(1 << 16, 16, Width::I16, 128, 256, &p);
        assert_eq!(full.stream_cycles, one.stream_cycles);
        assert_eq!(full.distance_cycles - p.mul_stages - 4.0, 32.0 * f64::from(1 << 14));
        assert_eq!(full.merge_cycles, 32.0 * 4.0 * 128.0 + 135.0);
        assert!(full.total_cycles < 256.0 * one.total_cycles / 4.0, "far cheaper than 256 passes");
    }

    #[test]
    fn bad_shapes_are_refused() {
        let p = KnnParams::default();
        assert!(knn(&[0; 10], 4, Width::I16, &[0; 4], 1, &p).is_err(), "not whole vectors");
        assert!(knn(&[0; 16], 4, Width::I16, &[0; 3], 1, &p).is_err(), "query length");
        assert!(knn(&[0; 16], 4, Width::I16, &[0; 4], 0, &p).is_err(), "k = 0");
        assert!(knn(&[0; 16], 0, Width::I16, &[], 1, &p).is_err(), "dim 0");
        assert!(Width::from_bits(8).is_err());
        assert!(KnnParams::from_json(&serde_json::json!({"lanes": 0})).is_err());
        assert!(KnnParams::from_json(&serde_json::json!({"nope": 1})).is_err());
    }

    #[test]
    fn timing_follows_the_pipeline() {
        let p = KnnParams::default();
        assert_eq!(selector_latency(128), 135.0);
        // D = 16, 16-bit: 32 B per vector, 2 cycles of AXI vs 1/4 cycle of distance per vector: stream bound.
        let t = knn_timing(1 << 20, 16, Width::I16, 128, &p);
        assert_eq!(t.stream_cycles, 2.0 * f64::from(1 << 20));
        assert!(t.total_cycles > t.stream_cycles && t.total_cycles < t.stream_cycles + 1000.0);
        assert!((t.seconds - t.total_cycles / 200e6).abs() < 1e-12);
        // Doubling D doubles a stream-bound query.
        let t2 = knn_timing(1 << 20, 32, Width::I16, 128, &p);
        assert!((t2.stream_cycles / t.stream_cycles - 2.0).abs() < 1e-9);
        // Compute bound with one narrow lane.
        let slow = KnnParams { lanes: 1.0, selectors: 1.0, ..p };
        let t3 = knn_timing(1000, 64, Width::I16, 128, &slow);
        assert!(t3.distance_cycles > t3.stream_cycles);
    }
}
