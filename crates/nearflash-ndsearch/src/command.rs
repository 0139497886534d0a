//! The `<Search Page>` flash command (NDSearch Sec. IV-C, Fig. 8): distance type (2 bits), row address (26 bits),
//! fv_dim (3 bits), fv_prec (4 bits) and pageLocBit (1 bit), 36 bits packed here least significant field first.
//! The paper gives the field widths only; the codes are ours: distance 0 = L2, 1 = inner product, 2 = cosine;
//! fv_dim = log2(dim rounded up to a power of two) - 4, so 16..2048 (the MAC group masks the padding);
//! fv_prec = element type (0 uint8, 1 int8, 2 fp16, 3 fp32); row address = (block x planes + plane) x
//! pages_per_block + page within the LUN.

use crate::distance::{Dtype, Metric};
use crate::NdError;

/// A decoded `<Search Page>` command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SearchPage {
    pub metric: Metric,
    pub row: u32,
    /// Dimension class: vectors of up to `16 << dim_code` elements.
    pub dim_code: u8,
    pub dtype: Dtype,
    pub shared: bool,
}

const ROW_BITS: u32 = 26;

impl SearchPage {
    /// The dimension class covering `dim` (error above 2048 elements).
    pub fn dim_code(dim: usize) -> Result<u8, NdError> {
        let p = dim.max(16).next_power_of_two();
        if dim == 0 || p > 2048 {
            return Err(NdError::Argument(format!("fv_dim covers 1..=2048 elements, not {dim}")));
        }
        Ok((p.trailing_zeros() - 4) as u8)
    }
    /// The row address of (block, plane, page) within a LUN.
    pub fn row_address(block: u32, plane: u32, page: u32, planes: u32, pages_per_block: u32) -> Result<u32, NdError> {
        let row = (block as u64 * planes as u64 + plane as u64) * pages_per_block as u64 + page as u64;
        if plane >= planes || page >= pages_per_block || row >= 1 << ROW_BITS {
            return Err(NdError::Argument(format!("row address of block {block} plane {plane} page {page} exceeds 26 bits")));
        }
        Ok(row as u32)
    }
    pub fn encode(&self) -> Result<u64, NdError> {
        if self.row >= 1 << ROW_BITS || self.dim_code > 7 {
            return Err(NdError::Argument("row address or dimension class out of range".into()));
        }
        let prec = match self.dtype {
            Dtype::U8 => 0,
            Dtype::I8 => 1,
            Dtype::F32 => 3,
        };
        Ok(self.metric.code() as u64
            | (self.row as u64) << 2
            | (self.dim_code as u64) << 28
            | (prec as u64) << 31
            | (self.shared as u64) << 35)
    }
    pub fn decode(word: u64) -> Result<SearchPage, NdError> {
        if word >> 36 != 0 {
            return Err(NdError::Argument(format!("a <Search Page> command has 36 bits, {word:#x} has more")));
        }
        let metric = Metric::from_code((word & 3) as u8).ok_or_else(|| NdError::Argument("distance type 3 is undefined".into()))?;
        let dtype = match (word >> 31) & 0xF {
            0 => Dtype::U8,
            1 => Dtype::I8,
            3 => Dtype::F32,
            p => return Err(NdError::Argument(format!("fv_prec {p} is not supported"))),
        };
        Ok(SearchPage {
            metric,
            row: ((word >> 2) & ((1 << ROW_BITS) - 1)) as u32,
            dim_code: ((word >> 28) & 7) as u8,
            dtype,
            shared: (word >> 35) & 1 == 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fields_and_limits() {
        assert_eq!(SearchPage::dim_code(784).unwrap(), 6); // 1024
        assert_eq!(SearchPage::dim_code(16).unwrap(), 0);
        assert_eq!(SearchPage::dim_code(3).unwrap(), 0);
        assert!(SearchPage::dim_code(2049).is_err());
        assert_eq!(SearchPage::row_address(511, 1, 127, 2, 128).unwrap(), (511 * 2 + 1) * 128 + 127);
        assert!(SearchPage::row_address(0, 2, 0, 2, 128).is_err());
        assert!(SearchPage::decode(1 << 36).is_err());
        assert!(SearchPage::decode(3).is_err());
    }

    proptest! {
        #[test]
        fn encode_decode_round_trip(m in 0u8..3, row in 0u32..(1 << 26), d in 0u8..8, p in 0usize..3, s: bool) {
            let c = SearchPage { metric: Metric::from_code(m).unwrap(), row, dim_code: d,
                dtype: [Dtype::U8, Dtype::I8, Dtype::F32][p], shared: s };
            let w = c.encode().unwrap();
            prop_assert!(w < 1 << 36);
            prop_assert_eq!(SearchPage::decode(w).unwrap(), c);
        }
    }
}
