//! Element formats of stored embedding rows (the paper's Fig. 11a quantisation sweep): fp32 (attributeSize 4, the
//! artifact's only format), fp16 (2: IEEE half precision) and int8 (1: symmetric, one scale per table, `value = q x
//! scale` with `q` in -127..=127). Sums are always fp32: the firmware dequantises each element as it adds it, so
//! results keep their fp32 layout whatever the stored width.
//!
//! Caffe2's 8-bit SLS stores a scale and bias per row (`SparseLengthsSumFused8BitRowwise`); a per-row suffix would
//! make rows of `dim + 8` bytes that straddle 4 KiB blocks, so here the scale is the table's, carried by its
//! layout and registration descriptor. Host and firmware decode the same bytes with [`ElementFormat::decode_row`],
//! so every path sums the same values.

use half::f16;

/// Largest int8 magnitude (symmetric range).
pub const INT8_MAX: f32 = 127.0;

/// How one row's elements are stored.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ElementFormat {
    F32,
    F16,
    /// Symmetric int8 with the table's scale (finite, > 0).
    Int8 { scale: f32 },
}

impl ElementFormat {
    /// The format of `attribute_bytes` (4, 2 or 1; int8 needs a finite positive `scale`).
    pub fn new(attribute_bytes: u32, scale: f32) -> Result<Self, String> {
        match attribute_bytes {
            4 => Ok(Self::F32),
            2 => Ok(Self::F16),
            1 if scale.is_finite() && scale > 0.0 => Ok(Self::Int8 { scale }),
            1 => Err(format!("an int8 table needs a finite positive scale, got {scale}")),
            b => Err(format!("attribute size {b} B is not 4 (fp32), 2 (fp16) or 1 (int8)")),
        }
    }

    /// The int8 scale that maps `max_abs` to 127 (1 for an all-zero table).
    pub fn int8_scale_for(max_abs: f32) -> f32 {
        if max_abs.is_finite() && max_abs > 0.0 {
            max_abs / INT8_MAX
        } else {
            1.0
        }
    }

    pub fn attribute_bytes(&self) -> u32 {
        match self {
            Self::F32 => 4,
            Self::F16 => 2,
            Self::Int8 { .. } => 1,
        }
    }

    /// The int8 scale (0 for the float formats).
    pub fn scale(&self) -> f32 {
        match self {
            Self::Int8 { scale } => *scale,
            _ => 0.0,
        }
    }

    /// Decodes `out.len()` elements from `bytes` (at least `out.len() x attribute_bytes` long).
    pub fn decode_row(&self, bytes: &[u8], out: &mut [f32]) {
        match self {
            Self::F32 => {
                for (v, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                    *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                }
            }
            Self::F16 => {
                for (v, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                    *v = f16::from_le_bytes([b[0], b[1]]).to_f32();
                }
            }
            Self::Int8 { scale } => {
                for (v, &b) in out.iter_mut().zip(bytes) {
                    *v = f32::from(b as i8) * scale;
                }
            }
        }
    }

    /// Encodes `row` into `out` (`row.len() x attribute_bytes` long): fp16 rounds to nearest, int8 rounds and
    /// saturates at ±127.
    pub fn encode_row(&self, row: &[f32], out: &mut [u8]) {
        match self {
            Self::F32 => {
                for (v, b) in row.iter().zip(out.chunks_exact_mut(4)) {
                    b.copy_from_slice(&v.to_le_bytes());
                }
            }
            Self::F16 => {
                for (v, b) in row.iter().zip(out.chunks_exact_mut(2)) {
                    b.copy_from_slice(&f16::from_f32(*v).to_le_bytes());
                }
            }
            Self::Int8 { scale } => {
                for (v, b) in row.iter().zip(out.iter_mut()) {
                    *b = (v / scale).round().clamp(-INT8_MAX, INT8_MAX) as i8 as u8;
                }
            }
        }
    }

    /// Replaces `row` by the values its stored form decodes to (what [`encode_row`](Self::encode_row) then
    /// [`decode_row`](Self::decode_row) give, without the bytes).
    pub fn round_trip(&self, row: &mut [f32]) {
        match self {
            Self::F32 => {}
            Self::F16 => row.iter_mut().for_each(|v| *v = f16::from_f32(*v).to_f32()),
            Self::Int8 { scale } => {
                row.iter_mut().for_each(|v| *v = (*v / scale).round().clamp(-INT8_MAX, INT8_MAX) * scale)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_round_trip_within_their_precision() {
        let row: Vec<f32> = (0..64).map(|i| (i as f32 - 31.5) / 40.0).collect();
        let scale = ElementFormat::int8_scale_for(31.5 / 40.0);
        for (f, tol) in [(ElementFormat::F32, 0.0), (ElementFormat::F16, 1e-3), (ElementFormat::Int8 { scale }, scale / 2.0)] {
            let mut r = row.clone();
            f.round_trip(&mut r);
            for (a, b) in r.iter().zip(&row) {
                assert!((a - b).abs() <= tol * 1.0001 + 1e-9, "{f:?}: {a} vs {b}");
            }
            let mut again = r.clone();
            f.round_trip(&mut again);
            assert_eq!(again, r, "{f:?}: a stored row re-encodes to itself");
            let mut bytes = vec![0u8; 64 * f.attribute_bytes() as usize];
            f.encode_row(&row, &mut bytes);
            let mut decoded = vec![0f32; 64];
            f.decode_row(&bytes, &mut decoded);
            assert_eq!(decoded, r, "{f:?}: round_trip is encode then decode");
        }
        let mut big = [1000.0f32, -1000.0];
        ElementFormat::Int8 { scale: 1.0 }.round_trip(&mut big);
        assert_eq!(big, [127.0, -127.0], "int8 saturates");
    }

    #[test]
    fn only_the_three_widths_are_formats() {
        assert_eq!(ElementFormat::new(4, 0.0), Ok(ElementFormat::F32));
        assert_eq!(ElementFormat::new(2, 0.0), Ok(ElementFormat::F16));
        assert_eq!(ElementFormat::new(1, 0.5), Ok(ElementFormat::Int8 { scale: 0.5 }));
        for (b, s) in [(1, 0.0), (1, f32::NAN), (1, -1.0), (3, 1.0), (8, 1.0), (0, 1.0)] {
            assert!(ElementFormat::new(b, s).is_err(), "{b} {s}");
        }
        assert_eq!(ElementFormat::int8_scale_for(0.0), 1.0);
    }
}
