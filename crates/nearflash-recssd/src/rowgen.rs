//! Procedurally generated embedding tables: row `r` of table `t` under seed `s` is computed from a counter-based
//! hash, so a model's tables (RM2: 32 x 1M x 64 fp32 = 8 GB) never need to be stored whole on the host; any row,
//! page or range can be produced on demand - for the DRAM reference, and to write the device image.
//!
//! Values are uniform in `[-bound, bound)` with `bound = sqrt(1 / rows)` by default, DLRM's embedding
//! initialisation (artifact `create_emb`: `np.random.uniform(-sqrt(1/n), sqrt(1/n))`), quantised to 2^-24 of the
//! range. They are not the artifact's numbers (it draws from one global numpy stream); the distribution is.

use crate::quant::ElementFormat;
use crate::seeds::{splitmix64, stream_seed};
use crate::sls::{RowSource, SlsError};
use rayon::prelude::*;

/// A table whose rows are a function of (seed, table id, row, column).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GeneratedTable {
    seed: u64,
    table_id: u32,
    base: u64,
    rows: usize,
    dim: usize,
    bound: f32,
    /// Rows are the values their stored form decodes to (fp32: the generated values).
    format: ElementFormat,
}

impl GeneratedTable {
    /// Table `table_id` of a model seeded with `seed`, DLRM initialisation bound.
    pub fn new(seed: u64, table_id: u32, rows: usize, dim: usize) -> Result<Self, SlsError> {
        let bound = (1.0 / rows.max(1) as f64).sqrt() as f32;
        Self::with_bound(seed, table_id, rows, dim, bound)
    }

    /// Like [`new`](Self::new) with values in `[-bound, bound)`.
    pub fn with_bound(seed: u64, table_id: u32, rows: usize, dim: usize, bound: f32) -> Result<Self, SlsError> {
        if dim == 0 || rows.checked_mul(dim).is_none() || !bound.is_finite() {
            return Err(SlsError::TableShape { len: 0, rows, dim });
        }
        Ok(Self { seed, table_id, base: stream_seed(seed, u64::from(table_id)), rows, dim, bound, format: ElementFormat::F32 })
    }

    /// The same table stored in `format`: rows are what their stored form decodes to.
    pub fn with_format(mut self, format: ElementFormat) -> Self {
        self.format = format;
        self
    }

    /// The int8 scale of this table (its bound maps to 127).
    pub fn int8_scale(&self) -> f32 {
        ElementFormat::int8_scale_for(self.bound)
    }

    /// The model seed the rows derive from.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The table id the rows derive from.
    pub fn table_id(&self) -> u32 {
        self.table_id
    }

    /// The value bound.
    pub fn bound(&self) -> f32 {
        self.bound
    }

    /// Writes row `r` (must be `< rows`) into `out` (`dim` long).
    #[inline]
    pub fn row_into(&self, r: usize, out: &mut [f32]) {
        let start = (r as u64).wrapping_mul(self.dim as u64);
        let scale = 2.0 * self.bound / (1u32 << 24) as f32;
        for (c, o) in out.iter_mut().enumerate() {
            let h = splitmix64(self.base ^ splitmix64(start.wrapping_add(c as u64)));
            *o = (h >> 40) as f32 * scale - self.bound;
        }
        self.format.round_trip(out);
    }

    /// Rows `rows` gathered into a `rows.len() x dim` row-major buffer.
    pub fn gather(&self, rows: &[u64]) -> Result<Vec<f32>, SlsError> {
        crate::sls::check_indices(rows, self.rows)?;
        let mut out = vec![0.0; rows.len() * self.dim];
        out.par_chunks_mut(self.dim)
            .zip(rows.par_iter())
            .with_min_len(256)
            .for_each(|(o, &r)| self.row_into(r as usize, o));
        Ok(out)
    }

    /// Rows `first..first + count` as a row-major buffer.
    pub fn materialize(&self, first: usize, count: usize) -> Result<Vec<f32>, SlsError> {
        let end = first.checked_add(count).filter(|&e| e <= self.rows);
        if end.is_none() {
            return Err(SlsError::IndexOutOfRange { position: 0, index: format!("{first}+{count}"), rows: self.rows });
        }
        let rows: Vec<u64> = (first as u64..(first + count) as u64).collect();
        self.gather(&rows)
    }
}

impl RowSource for GeneratedTable {
    fn rows(&self) -> usize {
        self.rows
    }
    fn dim(&self) -> usize {
        self.dim
    }
    #[inline]
    fn row<'a>(&'a self, r: usize, scratch: &'a mut [f32]) -> &'a [f32] {
        self.row_into(r, scratch);
        scratch
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sls::{embedding_bag_sum, TableView};

    #[test]
    fn rows_are_deterministic_bounded_and_distinct() {
        let t = GeneratedTable::new(1, 0, 1_000_000, 32).unwrap();
        let a = t.gather(&[5, 999_999, 5]).unwrap();
        assert_eq!(a, t.gather(&[5, 999_999, 5]).unwrap());
        assert_eq!(&a[..32], &a[64..]);
        assert_ne!(&a[..32], &a[32..64]);
        assert!(a.iter().all(|v| v.abs() <= 0.001));
        assert_ne!(a[..32], GeneratedTable::new(1, 1, 1_000_000, 32).unwrap().gather(&[5]).unwrap()[..]);
        assert_ne!(a[..32], GeneratedTable::new(2, 0, 1_000_000, 32).unwrap().gather(&[5]).unwrap()[..]);
        let many = t.materialize(0, 4096).unwrap();
        let mean = many.iter().map(|&v| f64::from(v)).sum::<f64>() / many.len() as f64;
        assert!(mean.abs() < 2e-5, "mean {mean}");
        assert!(t.gather(&[1_000_000]).is_err());
        assert!(t.materialize(999_999, 2).is_err());
    }

    #[test]
    fn generated_sls_equals_sls_over_the_materialised_table() {
        let t = GeneratedTable::new(3, 2, 500, 16).unwrap();
        let m = t.materialize(0, 500).unwrap();
        let tv = TableView::new(&m, 500, 16).unwrap();
        let idx: Vec<i64> = (0..3000).map(|i| (i * 7 % 500) as i64).collect();
        let offs: Vec<i64> = (0..30).map(|b| b * 100).collect();
        let a = embedding_bag_sum(&t, &idx, &offs, None, false).unwrap();
        let b = embedding_bag_sum(&tv, &idx, &offs, None, false).unwrap();
        assert_eq!(a, b);
    }
}
