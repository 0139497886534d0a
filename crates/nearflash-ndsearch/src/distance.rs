//! Distances between stored vectors and queries: squared L2, inner product (as `1 - dot`) and cosine (as
//! `1 - cos`), over f32, uint8 and int8 elements. int8 goes through simsimd's runtime-dispatched SIMD kernels,
//! f32 through our four-accumulator kernels (`kernels`, faster than simsimd's one-accumulator loop on long vectors),
//! uint8 (which simsimd's Rust API lacks) L2 through our 16-bit-lane kernel (`kernels::l2sq_u8`, exact), its inner
//! product and cosine through a loop written so that LLVM vectorises it. Cosine on f32
//! normalises stored vectors and queries once, so that each distance is one dot product. Smaller is nearer.

use simsimd::SpatialSimilarity;

use crate::NdError;

/// How nearness is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Squared Euclidean distance (as hnswlib and FAISS report it).
    L2,
    /// `1 - <a, b>`.
    InnerProduct,
    /// `1 - cos(a, b)`.
    Cosine,
}

impl Metric {
    pub fn name(self) -> &'static str {
        match self {
            Metric::L2 => "l2",
            Metric::InnerProduct => "ip",
            Metric::Cosine => "cosine",
        }
    }
    pub fn parse(s: &str) -> Result<Metric, NdError> {
        match s {
            "l2" => Ok(Metric::L2),
            "ip" => Ok(Metric::InnerProduct),
            "cosine" => Ok(Metric::Cosine),
            _ => Err(NdError::Argument(format!("metric {s:?} is not 'l2', 'ip' or 'cosine'"))),
        }
    }
    pub(crate) fn code(self) -> u8 {
        self as u8
    }
    pub(crate) fn from_code(c: u8) -> Option<Metric> {
        [Metric::L2, Metric::InnerProduct, Metric::Cosine].get(c as usize).copied()
    }
}

/// Element type of the stored vectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    F32,
    U8,
    I8,
}

impl Dtype {
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "float32",
            Dtype::U8 => "uint8",
            Dtype::I8 => "int8",
        }
    }
    pub fn parse(s: &str) -> Result<Dtype, NdError> {
        match s {
            "float32" => Ok(Dtype::F32),
            "uint8" => Ok(Dtype::U8),
            "int8" => Ok(Dtype::I8),
            _ => Err(NdError::Argument(format!("dtype {s:?} is not 'float32', 'uint8' or 'int8'"))),
        }
    }
    pub fn bytes(self) -> usize {
        match self {
            Dtype::F32 => 4,
            Dtype::U8 | Dtype::I8 => 1,
        }
    }
    pub(crate) fn code(self) -> u8 {
        self as u8
    }
    pub(crate) fn from_code(c: u8) -> Option<Dtype> {
        [Dtype::F32, Dtype::U8, Dtype::I8].get(c as usize).copied()
    }
}

/// Vectors of one element type, row-major.
#[derive(Clone, Debug, PartialEq)]
pub enum Rows {
    F32(Vec<f32>),
    U8(Vec<u8>),
    I8(Vec<i8>),
}

/// A borrowed vector (a stored row or a query).
#[derive(Clone, Copy, Debug)]
pub enum VecRef<'a> {
    F32(&'a [f32]),
    U8(&'a [u8]),
    I8(&'a [i8]),
}

impl Rows {
    pub fn empty(dtype: Dtype) -> Rows {
        match dtype {
            Dtype::F32 => Rows::F32(Vec::new()),
            Dtype::U8 => Rows::U8(Vec::new()),
            Dtype::I8 => Rows::I8(Vec::new()),
        }
    }
    pub fn dtype(&self) -> Dtype {
        match self {
            Rows::F32(_) => Dtype::F32,
            Rows::U8(_) => Dtype::U8,
            Rows::I8(_) => Dtype::I8,
        }
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Rows::F32(v) => v.len(),
            Rows::U8(v) => v.len(),
            Rows::I8(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Row `i` of width `dim`.
    #[inline(always)]
    pub fn row(&self, i: usize, dim: usize) -> VecRef<'_> {
        let r = i * dim..(i + 1) * dim;
        match self {
            Rows::F32(v) => VecRef::F32(&v[r]),
            Rows::U8(v) => VecRef::U8(&v[r]),
            Rows::I8(v) => VecRef::I8(&v[r]),
        }
    }
    /// Appends `other` (same dtype; checked by the caller), taking its buffer where this is empty.
    pub(crate) fn extend(&mut self, other: Rows) {
        fn append<T: Copy>(a: &mut Vec<T>, b: Vec<T>) {
            if a.is_empty() {
                *a = b;
            } else {
                crate::graph::reserve_gently(a, b.len());
                a.extend_from_slice(&b);
            }
        }
        match (self, other) {
            (Rows::F32(a), Rows::F32(b)) => append(a, b),
            (Rows::U8(a), Rows::U8(b)) => append(a, b),
            (Rows::I8(a), Rows::I8(b)) => append(a, b),
            _ => unreachable!("dtype checked before extend"),
        }
    }
    /// Bytes held on the heap.
    pub fn heap_bytes(&self) -> usize {
        match self {
            Rows::F32(v) => v.capacity() * 4,
            Rows::U8(v) => v.capacity(),
            Rows::I8(v) => v.capacity(),
        }
    }
    /// The rows `i` (of width `dim`) for which `keep(i)` holds, in order.
    pub(crate) fn select(&self, dim: usize, keep: impl Fn(usize) -> bool) -> Rows {
        fn pick<T: Copy>(v: &[T], dim: usize, keep: &dyn Fn(usize) -> bool) -> Vec<T> {
            v.chunks_exact(dim.max(1)).enumerate().filter(|(i, _)| keep(*i)).flat_map(|(_, r)| r.iter().copied()).collect()
        }
        match self {
            Rows::F32(v) => Rows::F32(pick(v, dim, &keep)),
            Rows::U8(v) => Rows::U8(pick(v, dim, &keep)),
            Rows::I8(v) => Rows::I8(pick(v, dim, &keep)),
        }
    }
    /// Address of row `i`'s first byte, for prefetching.
    #[inline(always)]
    pub(crate) fn row_ptr(&self, i: usize, dim: usize) -> *const u8 {
        match self {
            Rows::F32(v) => v.as_ptr().wrapping_add(i * dim) as *const u8,
            Rows::U8(v) => v.as_ptr().wrapping_add(i * dim),
            Rows::I8(v) => v.as_ptr().wrapping_add(i * dim) as *const u8,
        }
    }
    /// Raw little-endian bytes (for the index file).
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        match self {
            Rows::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Rows::U8(v) => v.clone(),
            Rows::I8(v) => v.iter().map(|&x| x as u8).collect(),
        }
    }
    pub(crate) fn from_bytes(dtype: Dtype, b: &[u8]) -> Rows {
        match dtype {
            Dtype::F32 => Rows::F32(b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()),
            Dtype::U8 => Rows::U8(b.to_vec()),
            Dtype::I8 => Rows::I8(b.iter().map(|&x| x as i8).collect()),
        }
    }
}

/// Scales an f32 vector to unit length in place (zero vectors stay zero).
pub fn normalize(v: &mut [f32]) {
    let n = crate::kernels::dot_f32(v, v).sqrt();
    if n > 0.0 {
        v.iter_mut().for_each(|x| *x /= n);
    }
}

#[inline(always)]
fn dot_u8(a: &[u8], b: &[u8]) -> (f32, f32, f32) {
    let (mut ab, mut aa, mut bb) = (0u64, 0u64, 0u64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (*x as u64, *y as u64);
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    (ab as f32, aa as f32, bb as f32)
}

/// Distance between two vectors of the same dtype and length under `metric` (f32 cosine expects normalised
/// vectors, which the index stores).
#[inline(always)]
pub fn distance(metric: Metric, a: VecRef<'_>, b: VecRef<'_>) -> f32 {
    match (a, b) {
        (VecRef::F32(a), VecRef::F32(b)) => match metric {
            Metric::L2 => crate::kernels::l2sq_f32(a, b),
            Metric::InnerProduct | Metric::Cosine => 1.0 - crate::kernels::dot_f32(a, b),
        },
        (VecRef::I8(a), VecRef::I8(b)) => match metric {
            Metric::L2 => i8::l2sq(a, b).unwrap_or(f64::NAN) as f32,
            Metric::InnerProduct => 1.0 - i8::dot(a, b).unwrap_or(f64::NAN) as f32,
            Metric::Cosine => i8::cos(a, b).unwrap_or(f64::NAN) as f32,
        },
        (VecRef::U8(a), VecRef::U8(b)) => match metric {
            Metric::L2 => crate::kernels::l2sq_u8(a, b) as f32,
            Metric::InnerProduct => 1.0 - dot_u8(a, b).0,
            Metric::Cosine => {
                let (ab, aa, bb) = dot_u8(a, b);
                if aa == 0.0 || bb == 0.0 {
                    if aa == bb { 0.0 } else { 1.0 }
                } else {
                    1.0 - ab / (aa.sqrt() * bb.sqrt())
                }
            }
        },
        _ => f32::NAN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive_l2(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
    }

    #[test]
    fn f32_l2_and_ip_match_scalar_code() {
        let a: Vec<f32> = (0..100).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..100).map(|i| (i as f32 * 0.11).cos()).collect();
        let d = distance(Metric::L2, VecRef::F32(&a), VecRef::F32(&b));
        assert!((d - naive_l2(&a, &b)).abs() < 1e-3 * naive_l2(&a, &b));
        let dot: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        let ip = distance(Metric::InnerProduct, VecRef::F32(&a), VecRef::F32(&b));
        assert!((ip - (1.0 - dot)).abs() < 1e-3);
    }

    #[test]
    fn u8_and_i8_are_exact() {
        let a: Vec<u8> = (0..77).map(|i| (i * 7 % 256) as u8).collect();
        let b: Vec<u8> = (0..77).map(|i| (255 - i * 3 % 256) as u8).collect();
        let want: u64 = a.iter().zip(&b).map(|(x, y)| (*x as i64 - *y as i64).pow(2) as u64).sum();
        assert_eq!(distance(Metric::L2, VecRef::U8(&a), VecRef::U8(&b)), want as f32);
        let ai: Vec<i8> = a.iter().map(|&x| (x as i16 - 128) as i8).collect();
        let bi: Vec<i8> = b.iter().map(|&x| (x as i16 - 128) as i8).collect();
        let want: i64 = ai.iter().zip(&bi).map(|(x, y)| (*x as i64 - *y as i64).pow(2)).sum();
        assert_eq!(distance(Metric::L2, VecRef::I8(&ai), VecRef::I8(&bi)), want as f32);
    }

    #[test]
    fn cosine_of_a_vector_with_itself_is_zero() {
        let mut a: Vec<f32> = (1..50).map(|i| i as f32).collect();
        normalize(&mut a);
        assert!(distance(Metric::Cosine, VecRef::F32(&a), VecRef::F32(&a)).abs() < 1e-5);
        let u: Vec<u8> = (1..50).map(|i| i as u8).collect();
        assert!(distance(Metric::Cosine, VecRef::U8(&u), VecRef::U8(&u)).abs() < 1e-5);
    }
}
