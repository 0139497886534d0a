//! SparseLengthsSum (Caffe2) / `EmbeddingBag(mode="sum")` (PyTorch): the embedding operator RecSSD offloads
//! (paper §2.1, §4.1). This is the functional reference every path (host DRAM, baseline SSD, NDP) must match.
//!
//! Conventions follow PyTorch: `offsets[b]` is where bag `b` starts in `indices` (`offsets[0] == 0`, non-decreasing);
//! the last bag ends at `indices.len()`, or, with `include_last_offset`, `offsets` carries one more entry equal to
//! `indices.len()`. Empty bags give zero vectors. Optional `per_sample_weights` scale each looked-up row. fp32
//! throughout, rows summed in index order. Bad input is an [`SlsError`], checked before any arithmetic.

use rayon::prelude::*;
use std::fmt::Display;

/// Work (floats gathered) below which one thread is faster than fanning out.
const PARALLEL_MIN_FLOATS: usize = 1 << 16;
/// Lookups between a row's prefetch and its use (assumed: covers a ~100 ns DRAM access at a few ns per row;
/// on the large 1M-row cases of `benches/recssd_sls_host.py` 16 gathered 1.1-1.25x more than 8, single thread).
const PREFETCH_DISTANCE: usize = 16;

/// Errors of the SLS operator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SlsError {
    /// The table buffer does not hold `rows x dim` floats, or dim is zero.
    #[error("table buffer of {len} floats does not hold {rows} rows x {dim} columns (dim must be >= 1)")]
    TableShape { len: usize, rows: usize, dim: usize },
    /// An index is negative or not below the row count.
    #[error("indices[{position}] = {index} is outside the table's {rows} rows")]
    IndexOutOfRange { position: usize, index: String, rows: usize },
    /// An index is negative (where no table bounds it).
    #[error("indices[{position}] = {index} is not a row id")]
    NegativeIndex { position: usize, index: String },
    /// `offsets[0]` is not zero.
    #[error("offsets[0] = {first}, but the first bag must start at 0")]
    FirstOffsetNotZero { first: String },
    /// An offset is negative or smaller than its predecessor.
    #[error("offsets[{bag}] = {offset} is below offsets[{}] = {previous} (offsets must be non-decreasing)", .bag - 1)]
    OffsetsDecreasing { bag: usize, offset: String, previous: usize },
    /// An offset points past the end of `indices`.
    #[error("offsets[{bag}] = {offset} is beyond the {len} indices")]
    OffsetBeyondIndices { bag: usize, offset: String, len: usize },
    /// With `include_last_offset`, the last offset must close the last bag at `indices.len()`.
    #[error("include_last_offset: last offset {last} must equal the number of indices {len}")]
    LastOffsetMismatch { last: usize, len: usize },
    /// Indices were given but no bag holds them.
    #[error("{len} indices but no bags (offsets is empty)")]
    IndicesWithoutBags { len: usize },
    /// `per_sample_weights` does not have one weight per index.
    #[error("per_sample_weights has {got} entries, indices has {want}")]
    WeightsLength { got: usize, want: usize },
    /// The output buffer has the wrong size.
    #[error("output buffer has {got} floats, {want} needed ({bags} bags x dim)")]
    OutputLength { got: usize, want: usize, bags: usize },
}

/// An integer type usable as a row index or an offset (numpy and PyTorch use int64; the NDP wire uses u32).
pub trait RowIndex: Copy + Send + Sync + Display {
    /// The value as usize, or None if negative or too large.
    fn to_usize(self) -> Option<usize>;
}

macro_rules! row_index {
    ($($t:ty),*) => {$(
        impl RowIndex for $t {
            #[inline]
            fn to_usize(self) -> Option<usize> {
                usize::try_from(self).ok()
            }
        }
    )*};
}
row_index!(u32, u64, usize, i32, i64);

/// A read-only row-major `rows x dim` fp32 table.
#[derive(Debug, Clone, Copy)]
pub struct TableView<'a> {
    data: &'a [f32],
    rows: usize,
    dim: usize,
}

impl<'a> TableView<'a> {
    /// Wraps `data` (length `rows x dim`).
    pub fn new(data: &'a [f32], rows: usize, dim: usize) -> Result<Self, SlsError> {
        if dim == 0 || rows.checked_mul(dim) != Some(data.len()) {
            return Err(SlsError::TableShape { len: data.len(), rows, dim });
        }
        Ok(Self { data, rows, dim })
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Row `r` (panics if out of range; callers validate first).
    #[inline]
    pub fn row(&self, r: usize) -> &'a [f32] {
        &self.data[r * self.dim..(r + 1) * self.dim]
    }
}

/// `acc += row`, the inner loop of every reduction here (auto-vectorised).
#[inline]
pub fn add_row(acc: &mut [f32], row: &[f32]) {
    for (a, x) in acc.iter_mut().zip(row) {
        *a += *x;
    }
}

/// `acc += w * row`.
#[inline]
pub fn add_scaled_row(acc: &mut [f32], row: &[f32], w: f32) {
    for (a, x) in acc.iter_mut().zip(row) {
        *a += w * *x;
    }
}

/// Bag boundaries (`bags + 1` positions into `indices`) from EmbeddingBag offsets, validated.
pub fn bag_bounds<O: RowIndex>(
    offsets: &[O],
    n_indices: usize,
    include_last_offset: bool,
) -> Result<Vec<usize>, SlsError> {
    if offsets.is_empty() {
        return if n_indices == 0 { Ok(vec![0]) } else { Err(SlsError::IndicesWithoutBags { len: n_indices }) };
    }
    let mut bounds = Vec::with_capacity(offsets.len() + 1);
    for (bag, &o) in offsets.iter().enumerate() {
        let Some(v) = o.to_usize() else {
            return Err(if bag == 0 {
                SlsError::FirstOffsetNotZero { first: o.to_string() }
            } else {
                SlsError::OffsetsDecreasing { bag, offset: o.to_string(), previous: bounds[bag - 1] }
            });
        };
        if bag == 0 && v != 0 {
            return Err(SlsError::FirstOffsetNotZero { first: o.to_string() });
        }
        if bag > 0 && v < bounds[bag - 1] {
            return Err(SlsError::OffsetsDecreasing { bag, offset: o.to_string(), previous: bounds[bag - 1] });
        }
        if v > n_indices {
            return Err(SlsError::OffsetBeyondIndices { bag, offset: o.to_string(), len: n_indices });
        }
        bounds.push(v);
    }
    if include_last_offset {
        let last = *bounds.last().expect("offsets is not empty");
        if last != n_indices {
            return Err(SlsError::LastOffsetMismatch { last, len: n_indices });
        }
    } else {
        bounds.push(n_indices);
    }
    Ok(bounds)
}

/// Bag lengths (Caffe2 `lengths`) to EmbeddingBag offsets.
pub fn offsets_from_lengths(lengths: &[u64]) -> Vec<u64> {
    lengths
        .iter()
        .scan(0u64, |start, &l| {
            let o = *start;
            *start = start.saturating_add(l);
            Some(o)
        })
        .collect()
}

/// Checks that every index addresses a row of a `rows`-row table.
pub fn check_indices<I: RowIndex>(indices: &[I], rows: usize) -> Result<(), SlsError> {
    match indices.iter().position(|i| i.to_usize().is_none_or(|r| r >= rows)) {
        None => Ok(()),
        Some(position) => Err(SlsError::IndexOutOfRange { position, index: indices[position].to_string(), rows }),
    }
}

/// A table the operator can read rows from: stored ([`TableView`]) or computed on demand
/// ([`crate::rowgen::GeneratedTable`]).
pub trait RowSource: Sync {
    /// Rows.
    fn rows(&self) -> usize;
    /// Columns.
    fn dim(&self) -> usize;
    /// Row `r < rows()`, either borrowed from the source or written into `scratch` (`dim` long).
    fn row<'a>(&'a self, r: usize, scratch: &'a mut [f32]) -> &'a [f32];
    /// Hints that row `r` will be read soon (no-op unless the rows are stored).
    #[inline]
    fn prefetch(&self, _r: usize) {}
}

impl RowSource for TableView<'_> {
    fn rows(&self) -> usize {
        self.rows
    }
    fn dim(&self) -> usize {
        self.dim
    }
    #[inline]
    fn row<'a>(&'a self, r: usize, _scratch: &'a mut [f32]) -> &'a [f32] {
        TableView::row(self, r)
    }
    #[inline]
    fn prefetch(&self, r: usize) {
        if let Some(row) = self.data.get(r * self.dim..(r + 1) * self.dim) {
            prefetch_lines(row);
        }
    }
}

/// Asks the CPU to start loading every cache line of `row` (random gathers are latency-bound: with rows fetched
/// [`PREFETCH_DISTANCE`] lookups ahead, several DRAM accesses overlap).
#[inline]
fn prefetch_lines(row: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    for line in row.chunks(16) {
        // SAFETY: a prefetch is only a hint; it never faults and reads nothing observable. The address is that of
        // a live slice element.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(line.as_ptr().cast::<i8>());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = row;
}

/// Sums the rows of each bag into `out` (`bags x dim`, overwritten); returns the number of bags.
pub fn embedding_bag_sum_into<T: RowSource, I: RowIndex, O: RowIndex>(
    table: &T,
    indices: &[I],
    offsets: &[O],
    per_sample_weights: Option<&[f32]>,
    include_last_offset: bool,
    out: &mut [f32],
) -> Result<usize, SlsError> {
    let bounds = bag_bounds(offsets, indices.len(), include_last_offset)?;
    let bags = bounds.len() - 1;
    let dim = table.dim();
    if out.len() != bags * dim {
        return Err(SlsError::OutputLength { got: out.len(), want: bags * dim, bags });
    }
    if let Some(w) = per_sample_weights {
        if w.len() != indices.len() {
            return Err(SlsError::WeightsLength { got: w.len(), want: indices.len() });
        }
    }
    check_indices(indices, table.rows())?;

    let bag = |scratch: &mut Vec<f32>, (b, acc): (usize, &mut [f32])| {
        acc.fill(0.0);
        for p in bounds[b]..bounds[b + 1] {
            if let Some(ahead) = indices.get(p + PREFETCH_DISTANCE).and_then(|i| i.to_usize()) {
                if ahead < table.rows() {
                    table.prefetch(ahead);
                }
            }
            // Validated above; a failed conversion cannot happen here.
            let Some(r) = indices[p].to_usize() else { continue };
            let row = table.row(r, scratch);
            match per_sample_weights {
                None => add_row(acc, row),
                Some(w) => add_scaled_row(acc, row, w[p]),
            }
        }
    };
    let work = indices.len().saturating_mul(dim);
    if work < PARALLEL_MIN_FLOATS || bags < 2 {
        let mut scratch = vec![0.0; dim];
        out.chunks_mut(dim).enumerate().for_each(|item| bag(&mut scratch, item));
    } else {
        // Tasks of about PARALLEL_MIN_FLOATS gathered floats each.
        let per_bag = (work / bags).max(1);
        let min_bags = (PARALLEL_MIN_FLOATS / per_bag).max(1);
        out.par_chunks_mut(dim).enumerate().with_min_len(min_bags).for_each_init(|| vec![0.0; dim], bag);
    }
    Ok(bags)
}

/// Like [`embedding_bag_sum_into`], allocating the `bags x dim` result.
pub fn embedding_bag_sum<T: RowSource, I: RowIndex, O: RowIndex>(
    table: &T,
    indices: &[I],
    offsets: &[O],
    per_sample_weights: Option<&[f32]>,
    include_last_offset: bool,
) -> Result<Vec<f32>, SlsError> {
    let bounds_len = if include_last_offset { offsets.len().saturating_sub(1) } else { offsets.len() };
    let mut out = vec![0.0; bounds_len * table.dim()];
    embedding_bag_sum_into(table, indices, offsets, per_sample_weights, include_last_offset, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn naive(table: &[f32], dim: usize, idx: &[i64], offs: &[i64], w: Option<&[f32]>) -> Vec<f32> {
        let mut out = vec![0.0f32; offs.len() * dim];
        for b in 0..offs.len() {
            let end = if b + 1 < offs.len() { offs[b + 1] as usize } else { idx.len() };
            for p in offs[b] as usize..end {
                for c in 0..dim {
                    out[b * dim + c] += w.map_or(1.0, |w| w[p]) * table[idx[p] as usize * dim + c];
                }
            }
        }
        out
    }

    fn table(rows: usize, dim: usize) -> Vec<f32> {
        (0..rows * dim).map(|i| ((i * 37 % 101) as f32 - 50.0) / 16.0).collect()
    }

    #[test]
    fn sums_bags_including_empty_and_repeated() {
        let t = table(10, 3);
        let tv = TableView::new(&t, 10, 3).unwrap();
        let idx = [1i64, 1, 9, 0, 4];
        let offs = [0i64, 3, 3, 4];
        let got = embedding_bag_sum(&tv, &idx, &offs, None, false).unwrap();
        assert_eq!(got, naive(&t, 3, &idx, &offs, None));
        assert_eq!(&got[3..6], &[0.0; 3]); // empty bag
        let w = [0.5f32, -1.0, 2.0, 1.0, 0.0];
        let got = embedding_bag_sum(&tv, &idx, &offs, Some(&w), false).unwrap();
        assert_eq!(got, naive(&t, 3, &idx, &offs, Some(&w)));
        let with_last = embedding_bag_sum(&tv, &idx, &[0i64, 3, 3, 4, 5], None, true).unwrap();
        assert_eq!(with_last, naive(&t, 3, &idx, &offs, None));
    }

    #[test]
    fn bad_input_is_an_error() {
        let t = table(4, 2);
        let tv = TableView::new(&t, 4, 2).unwrap();
        let e = |idx: &[i64], offs: &[i64]| embedding_bag_sum(&tv, idx, offs, None, false).unwrap_err();
        assert!(matches!(e(&[4], &[0]), SlsError::IndexOutOfRange { position: 0, .. }));
        assert!(matches!(e(&[0, -1], &[0]), SlsError::IndexOutOfRange { position: 1, .. }));
        assert!(matches!(e(&[0], &[1]), SlsError::FirstOffsetNotZero { .. }));
        assert!(matches!(e(&[0, 1], &[0, 2, 1]), SlsError::OffsetsDecreasing { bag: 2, .. }));
        assert!(matches!(e(&[0], &[0, 3]), SlsError::OffsetBeyondIndices { bag: 1, .. }));
        assert!(matches!(e(&[0], &[]), SlsError::IndicesWithoutBags { len: 1 }));
        let err = embedding_bag_sum(&tv, &[0i64, 1], &[0i64, 1], None, true).unwrap_err();
        assert!(matches!(err, SlsError::LastOffsetMismatch { last: 1, len: 2 }));
        let err = embedding_bag_sum(&tv, &[0i64], &[0i64], Some(&[1.0, 2.0]), false).unwrap_err();
        assert!(matches!(err, SlsError::WeightsLength { .. }));
        assert!(TableView::new(&t, 3, 2).is_err());
        assert!(TableView::new(&[], 0, 0).is_err());
        assert!(e(&[4], &[0]).to_string().contains("indices[0] = 4"));
    }

    #[test]
    fn large_batches_take_the_parallel_path_and_agree() {
        let (rows, dim) = (5000, 32);
        let t = table(rows, dim);
        let tv = TableView::new(&t, rows, dim).unwrap();
        let idx: Vec<i64> = (0..64 * 80).map(|i| (i * 7919 % rows) as i64).collect();
        let offs: Vec<i64> = (0..64).map(|b| b * 80).collect();
        assert!(idx.len() * dim >= PARALLEL_MIN_FLOATS);
        assert_eq!(embedding_bag_sum(&tv, &idx, &offs, None, false).unwrap(), naive(&t, dim, &idx, &offs, None));
    }

    proptest! {
        #[test]
        fn matches_naive_reference(
            rows in 1usize..40, dim in 1usize..9,
            bags in proptest::collection::vec(proptest::collection::vec(0usize..1000, 0..6), 0..8),
        ) {
            let t = table(rows, dim);
            let tv = TableView::new(&t, rows, dim).unwrap();
            let mut idx = Vec::new();
            let mut offs = Vec::new();
            for bag in &bags {
                offs.push(idx.len() as i64);
                idx.extend(bag.iter().map(|&i| (i % rows) as i64));
            }
            let got = embedding_bag_sum(&tv, &idx, &offs, None, false).unwrap();
            prop_assert_eq!(got, naive(&t, dim, &idx, &offs, None));
        }

        #[test]
        fn arbitrary_offsets_never_panic(
            offs in proptest::collection::vec(-3i64..12, 0..6),
            idx in proptest::collection::vec(-2i64..6, 0..10),
            last in any::<bool>(),
        ) {
            let t = table(5, 2);
            let tv = TableView::new(&t, 5, 2).unwrap();
            let _ = embedding_bag_sum(&tv, &idx, &offs, None, last);
        }
    }

    #[test]
    fn lengths_to_offsets() {
        assert_eq!(offsets_from_lengths(&[3, 0, 2]), vec![0, 3, 3]);
        assert!(offsets_from_lengths(&[]).is_empty());
    }
}
