//! The NDP SLS wire format (paper §4.3; artifact `trans_buffer.h` `struct transConfig`, `unvme_embed_lib.c`).
//!
//! An SLS request is two NVMe commands with one reserved bit of CDW12 set (artifact: `IO_READ_COMMAND_DW12.reserved0`):
//! a Write carrying this **config payload**, then a Read returning the pooled result sectors.
//!
//! Payload, little-endian u32 words (x86 host and ARM FTL agree):
//! ```text
//! attributeSize  embeddingLength  resultEmbeddings  inputEmbeddings  tableID      (20-byte header)
//! result[0] embeddingID[0]  result[1] embeddingID[1]  ...                        (inputEmbeddings pairs)
//! ```
//! Each pair is **(result id, input embedding id)** - result first - and pairs are **sorted by input id** (the
//! paper's contract; the artifact host sorts with `sorted(pairs, key=embedding id)`). Ties keep any order. Bytes
//! after the last pair (padding to whole LBAs) are ignored. The firmware DMAs the payload into a 1 MiB config
//! buffer and accumulates results in a 1 MiB scratchpad returned as at most 256 sectors of 4 KiB
//! (artifact `TRANS_CONFIG_SIZE`, `MAX_EMBEDDING_RESULT_PAGES`); rows are stored as fp32, fp16 or int8
//! (attributeSize 4, 2, 1; `crate::quant`), sums are fp32.
//!
//! Pairing: both commands carry SLBA = table start LBA + request id, with table starts multiples of 1,000 and
//! request ids below 1,000 so the FTL splits them with `/` and `%` (artifact `nvme_io_cmd.c`; the host uses the
//! queue id as request id and puts table `t` at LBA 5,000 + t x 2,500,000).

use serde::{Deserialize, Serialize};

/// Header size, bytes (five u32).
pub const HEADER_BYTES: usize = 20;
/// One (result, input) pair, bytes.
pub const PAIR_BYTES: usize = 8;
/// Config buffer per in-flight request [artifact `TRANS_CONFIG_SIZE = 4096 x 256`].
pub const CONFIG_BUFFER_BYTES: usize = 1 << 20;
/// Result sector size [artifact `SECTOR_SIZE_FTL`].
pub const RESULT_SECTOR_BYTES: usize = 4096;
/// Result sectors per request [artifact `MAX_EMBEDDING_RESULT_PAGES = 256`].
pub const MAX_RESULT_SECTORS: usize = 256;
/// The only supported element: fp32, summed [artifact: "Assume for now attribute size is 4 and ... floats"].
pub const FP32_ATTRIBUTE_BYTES: u32 = 4;
/// SLBA modulus separating table start and request id [artifact `nvme_io_cmd.c`: `curSect % 1000`].
pub const REQUEST_ID_MODULUS: u64 = 1000;
/// Start LBA of table 0 [artifact `unvme_embed_lib.c`: `slba = 5000`].
pub const ARTIFACT_TABLE0_LBA: u64 = 5000;
/// LBAs between table starts [artifact `table_stride = 2500000`, 10 GB apart].
pub const ARTIFACT_TABLE_STRIDE_LBAS: u64 = 2_500_000;

/// Errors of encoding, decoding and validating configs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The payload ends before the header or the announced pairs.
    #[error("config truncated: {needed} bytes needed, {got} present")]
    Truncated { needed: u64, got: usize },
    /// attributeSize is not 4 (fp32), 2 (fp16) or 1 (int8).
    #[error("attribute size {0} B is unsupported (4 fp32, 2 fp16 or 1 int8)")]
    UnsupportedAttributeSize(u32),
    /// embeddingLength is zero.
    #[error("embedding length must be >= 1")]
    ZeroEmbeddingLength,
    /// resultEmbeddings is zero.
    #[error("a request needs >= 1 result embedding")]
    NoResults,
    /// Header plus pairs exceed the config buffer.
    #[error("config of {bytes} B exceeds the {limit}-B config buffer")]
    ConfigTooLarge { bytes: u64, limit: usize },
    /// The results exceed the scratchpad.
    #[error("{results} results x {row_bytes} B need {sectors} result sectors, limit {limit}")]
    ResultTooLarge { results: u32, row_bytes: u64, sectors: u64, limit: usize },
    /// Pairs are not sorted by input id.
    #[error("pair {position}: input id {id} follows input id {previous} (pairs must be sorted by input id)")]
    UnsortedPairs { position: usize, id: u32, previous: u32 },
    /// An input id is not a row of the table.
    #[error("pair {position}: input id {id} is outside the table's {rows} rows")]
    InputBeyondTable { position: usize, id: u32, rows: u64 },
    /// A result id is not below resultEmbeddings.
    #[error("pair {position}: result id {result} is not below resultEmbeddings = {results}")]
    ResultBeyondRange { position: usize, result: u32, results: u32 },
    /// More pairs than a u32 count can announce.
    #[error("{0} pairs do not fit the u32 inputEmbeddings field")]
    TooManyPairs(usize),
    /// A request id is not below the modulus, or the table start is not a multiple of it.
    #[error("cannot pair table start LBA {table_start_lba} with request id {request_id} (modulus {modulus})")]
    BadRequestAddress { table_start_lba: u64, request_id: u64, modulus: u64 },
    /// Bag offsets handed to [`NdpConfig::from_bags`] are malformed.
    #[error("bad bags: {0}")]
    BadBags(String),
}

/// One (result id, input embedding id) pair; wire order is `result` then `input`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NdpPair {
    /// Result embedding (bag) the row is added to.
    pub result: u32,
    /// Row id in the table.
    pub input: u32,
}

/// Limits of the firmware's buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireLimits {
    /// Config buffer, bytes.
    pub config_buffer_bytes: usize,
    /// Result sector, bytes.
    pub result_sector_bytes: usize,
    /// Result sectors per request.
    pub max_result_sectors: usize,
}

impl Default for WireLimits {
    fn default() -> Self {
        Self {
            config_buffer_bytes: CONFIG_BUFFER_BYTES,
            result_sector_bytes: RESULT_SECTOR_BYTES,
            max_result_sectors: MAX_RESULT_SECTORS,
        }
    }
}

/// A decoded config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NdpConfig {
    /// Bytes per stored element (4 fp32, 2 fp16, 1 int8; results are fp32).
    pub attribute_size: u32,
    /// Elements per row.
    pub embedding_length: u32,
    /// Result embeddings (bags).
    pub result_embeddings: u32,
    /// Table id (used by the SSD cache's index).
    pub table_id: u32,
    /// (result, input) pairs sorted by input id; `inputEmbeddings` is their count.
    pub pairs: Vec<NdpPair>,
}

impl NdpConfig {
    /// Builds the config of an EmbeddingBag request (`offsets` = bag starts, PyTorch convention): one pair per
    /// index, sorted by input id, ties by result id.
    pub fn from_bags(
        table_id: u32,
        embedding_length: u32,
        indices: &[u32],
        offsets: &[u32],
    ) -> Result<Self, WireError> {
        let bounds =
            crate::sls::bag_bounds(offsets, indices.len(), false).map_err(|e| WireError::BadBags(e.to_string()))?;
        let bags = bounds.len() - 1;
        let result_embeddings = u32::try_from(bags).map_err(|_| WireError::TooManyPairs(bags))?;
        let mut pairs = Vec::with_capacity(indices.len());
        for b in 0..bags {
            pairs.extend(indices[bounds[b]..bounds[b + 1]].iter().map(|&input| NdpPair { result: b as u32, input }));
        }
        pairs.sort_unstable_by_key(|p| (p.input, p.result));
        Ok(Self { attribute_size: FP32_ATTRIBUTE_BYTES, embedding_length, result_embeddings, table_id, pairs })
    }

    /// Bytes of the encoded payload (header + pairs, no padding).
    pub fn encoded_len(&self) -> usize {
        HEADER_BYTES + PAIR_BYTES * self.pairs.len()
    }

    /// Logical blocks the config write covers.
    pub fn config_blocks(&self, lba_bytes: usize) -> usize {
        self.encoded_len().div_ceil(lba_bytes.max(1))
    }

    /// Bytes of one result row: results are fp32 sums whatever the stored element width.
    pub fn row_bytes(&self) -> u64 {
        u64::from(FP32_ATTRIBUTE_BYTES) * u64::from(self.embedding_length)
    }

    /// The same request on rows stored with `attribute_size`-byte elements (see [`crate::quant`]).
    pub fn with_attribute_size(mut self, attribute_size: u32) -> Self {
        self.attribute_size = attribute_size;
        self
    }

    /// Result sectors the read returns: `ceil(results x row / sector)`.
    pub fn result_sectors(&self, sector_bytes: usize) -> u64 {
        // Saturating: a hostile header (2^32 results of 2^32 x 2^32 bytes) must not overflow.
        (u64::from(self.result_embeddings).saturating_mul(self.row_bytes())).div_ceil(sector_bytes.max(1) as u64)
    }

    /// Appends the payload to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), WireError> {
        let n = u32::try_from(self.pairs.len()).map_err(|_| WireError::TooManyPairs(self.pairs.len()))?;
        out.reserve(self.encoded_len());
        for w in [self.attribute_size, self.embedding_length, self.result_embeddings, n, self.table_id] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        for p in &self.pairs {
            out.extend_from_slice(&p.result.to_le_bytes());
            out.extend_from_slice(&p.input.to_le_bytes());
        }
        Ok(())
    }

    /// The payload.
    pub fn encode(&self) -> Result<Vec<u8>, WireError> {
        let mut out = Vec::new();
        self.encode_into(&mut out)?;
        Ok(out)
    }

    /// Parses a payload (structure only; see [`validate`](Self::validate)). Never panics; allocates only for
    /// pairs actually present in `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<Self, WireError> {
        let word = |i: usize| -> Option<u32> {
            let b = bytes.get(4 * i..4 * i + 4)?;
            Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        let header: Option<Vec<u32>> = (0..5).map(word).collect();
        let Some(h) = header else {
            return Err(WireError::Truncated { needed: HEADER_BYTES as u64, got: bytes.len() });
        };
        let n = h[3] as usize;
        let needed = HEADER_BYTES as u64 + PAIR_BYTES as u64 * u64::from(h[3]);
        if (bytes.len() as u64) < needed {
            return Err(WireError::Truncated { needed, got: bytes.len() });
        }
        let pairs = bytes[HEADER_BYTES..HEADER_BYTES + PAIR_BYTES * n]
            .chunks_exact(PAIR_BYTES)
            .map(|c| NdpPair {
                result: u32::from_le_bytes([c[0], c[1], c[2], c[3]]),
                input: u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
            })
            .collect();
        Ok(Self { attribute_size: h[0], embedding_length: h[1], result_embeddings: h[2], table_id: h[4], pairs })
    }

    /// Checks the config against the firmware's limits and a table of `table_rows` rows.
    pub fn validate(&self, limits: &WireLimits, table_rows: u64) -> Result<(), WireError> {
        if !matches!(self.attribute_size, 1 | 2 | 4) {
            return Err(WireError::UnsupportedAttributeSize(self.attribute_size));
        }
        if self.embedding_length == 0 {
            return Err(WireError::ZeroEmbeddingLength);
        }
        if self.result_embeddings == 0 {
            return Err(WireError::NoResults);
        }
        let bytes = HEADER_BYTES as u64 + PAIR_BYTES as u64 * self.pairs.len() as u64;
        if bytes > limits.config_buffer_bytes as u64 {
            return Err(WireError::ConfigTooLarge { bytes, limit: limits.config_buffer_bytes });
        }
        let sectors = self.result_sectors(limits.result_sector_bytes);
        if sectors > limits.max_result_sectors as u64 {
            return Err(WireError::ResultTooLarge {
                results: self.result_embeddings,
                row_bytes: self.row_bytes(),
                sectors,
                limit: limits.max_result_sectors,
            });
        }
        let mut previous = 0u32;
        for (position, p) in self.pairs.iter().enumerate() {
            if p.input < previous {
                return Err(WireError::UnsortedPairs { position, id: p.input, previous });
            }
            previous = p.input;
            if u64::from(p.input) >= table_rows {
                return Err(WireError::InputBeyondTable { position, id: p.input, rows: table_rows });
            }
            if p.result >= self.result_embeddings {
                return Err(WireError::ResultBeyondRange {
                    position,
                    result: p.result,
                    results: self.result_embeddings,
                });
            }
        }
        Ok(())
    }

    /// [`decode`](Self::decode) then [`validate`](Self::validate).
    pub fn decode_validated(bytes: &[u8], limits: &WireLimits, table_rows: u64) -> Result<Self, WireError> {
        let c = Self::decode(bytes)?;
        c.validate(limits, table_rows)?;
        Ok(c)
    }
}

/// SLBA of both commands of request `request_id` on the table starting at `table_start_lba`.
pub fn request_slba(table_start_lba: u64, request_id: u64, modulus: u64) -> Result<u64, WireError> {
    let bad = || WireError::BadRequestAddress { table_start_lba, request_id, modulus };
    if modulus == 0 || request_id >= modulus || !table_start_lba.is_multiple_of(modulus) {
        return Err(bad());
    }
    table_start_lba.checked_add(request_id).ok_or_else(bad)
}

/// (table start LBA, request id) of an NDP command's SLBA, as the FTL computes them.
pub fn split_request_slba(slba: u64, modulus: u64) -> Option<(u64, u64)> {
    (modulus > 0).then(|| (slba / modulus * modulus, slba % modulus))
}

/// The artifact's start LBA of table `t` (5,000 + t x 2,500,000).
pub fn artifact_table_start_lba(table: u64) -> u64 {
    ARTIFACT_TABLE0_LBA + table * ARTIFACT_TABLE_STRIDE_LBAS
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn example() -> NdpConfig {
        // trans_buffer.h's example: IDs [0, 15, 24, 32], lengths [3, 1].
        NdpConfig::from_bags(3, 32, &[24, 0, 15, 32], &[0, 3]).unwrap()
    }

    #[test]
    fn encodes_the_artifact_example() {
        let c = example();
        let want: Vec<(u32, u32)> = vec![(0, 0), (0, 15), (0, 24), (1, 32)];
        assert_eq!(c.pairs.iter().map(|p| (p.result, p.input)).collect::<Vec<_>>(), want);
        let bytes = c.encode().unwrap();
        assert_eq!(bytes.len(), 20 + 4 * 8);
        let words: Vec<u32> = bytes.chunks(4).map(|w| u32::from_le_bytes(w.try_into().unwrap())).collect();
        assert_eq!(&words[..5], &[4, 32, 2, 4, 3]);
        assert_eq!(&words[5..], &[0, 0, 0, 15, 0, 24, 1, 32]);
        let mut padded = bytes.clone();
        padded.resize(4096, 0xAB);
        assert_eq!(NdpConfig::decode_validated(&padded, &WireLimits::default(), 33).unwrap(), c);
    }

    #[test]
    fn validation_errors() {
        let lim = WireLimits::default();
        let v = |c: &NdpConfig, rows| c.validate(&lim, rows).unwrap_err();
        let mut c = example();
        assert!(matches!(v(&c, 32), WireError::InputBeyondTable { position: 3, id: 32, rows: 32 }));
        c.pairs.swap(0, 2);
        assert!(matches!(v(&c, 100), WireError::UnsortedPairs { position: 1, id: 15, previous: 24 }));
        let mut c = example();
        c.pairs[3].result = 2;
        assert!(matches!(v(&c, 100), WireError::ResultBeyondRange { position: 3, result: 2, results: 2 }));
        let c = NdpConfig { attribute_size: 3, ..example() };
        assert_eq!(v(&c, 100), WireError::UnsupportedAttributeSize(3));
        let c = NdpConfig { embedding_length: 0, ..example() };
        assert_eq!(v(&c, 100), WireError::ZeroEmbeddingLength);
        // 8,193 results x 128 B = 257 sectors > 256; 8,192 fits exactly.
        let c = NdpConfig { result_embeddings: 8193, ..example() };
        assert!(matches!(v(&c, 100), WireError::ResultTooLarge { sectors: 257, .. }));
        assert!(NdpConfig { result_embeddings: 8192, ..example() }.validate(&lim, 100).is_ok());
        // (1 MiB - 20) / 8 = 131,069 pairs fit; one more does not.
        let many = |n: usize| NdpConfig { pairs: vec![NdpPair { result: 0, input: 0 }; n], ..example() };
        assert!(many(131_069).validate(&lim, 100).is_ok());
        assert!(matches!(v(&many(131_070), 100), WireError::ConfigTooLarge { bytes: 1_048_580, .. }));
        let err = NdpConfig::decode(&example().encode().unwrap()[..40]).unwrap_err();
        assert_eq!(err, WireError::Truncated { needed: 52, got: 40 });
        assert!(matches!(NdpConfig::decode(&[0; 19]), Err(WireError::Truncated { needed: 20, got: 19 })));
    }

    #[test]
    fn empty_request_and_bad_bags() {
        let c = NdpConfig::from_bags(0, 16, &[], &[0, 0]).unwrap();
        assert_eq!((c.result_embeddings, c.pairs.len()), (2, 0));
        assert!(c.validate(&WireLimits::default(), 1).is_ok());
        assert!(matches!(NdpConfig::from_bags(0, 16, &[1], &[1]), Err(WireError::BadBags(_))));
    }

    #[test]
    fn request_pairing() {
        let start = artifact_table_start_lba(3);
        assert_eq!(start, 7_505_000);
        let slba = request_slba(start, 7, REQUEST_ID_MODULUS).unwrap();
        assert_eq!(split_request_slba(slba, REQUEST_ID_MODULUS), Some((start, 7)));
        assert!(request_slba(start, 1000, REQUEST_ID_MODULUS).is_err());
        assert!(request_slba(start + 4, 1, REQUEST_ID_MODULUS).is_err());
        assert!(request_slba(0, 0, 0).is_err());
        assert_eq!(split_request_slba(5, 0), None);
    }

    proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(c) = NdpConfig::decode(&bytes) {
                let _ = c.validate(&WireLimits::default(), u64::from(u32::MAX));
                prop_assert!(c.encoded_len() <= bytes.len());
                prop_assert_eq!(&c.encode().unwrap()[..], &bytes[..c.encoded_len()]);
            }
        }

        #[test]
        fn headers_claiming_huge_counts_are_truncated(words in proptest::collection::vec(any::<u32>(), 5..12)) {
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            match NdpConfig::decode(&bytes) {
                Ok(c) => prop_assert!((words[3] as usize) * 8 + 20 <= bytes.len() && c.pairs.len() == words[3] as usize),
                Err(WireError::Truncated { needed, .. }) => prop_assert!(needed > bytes.len() as u64),
                Err(e) => prop_assert!(false, "unexpected {e}"),
            }
        }

        #[test]
        fn round_trip_of_valid_bags(
            bags in proptest::collection::vec(proptest::collection::vec(0u32..500, 0..10), 1..20),
        ) {
            let mut idx = Vec::new();
            let mut offs = Vec::new();
            for b in &bags { offs.push(idx.len() as u32); idx.extend_from_slice(b); }
            let c = NdpConfig::from_bags(1, 32, &idx, &offs).unwrap();
            c.validate(&WireLimits::default(), 500).unwrap();
            prop_assert_eq!(NdpConfig::decode(&c.encode().unwrap()).unwrap(), c.clone());
            // Every (bag, id) occurrence is kept.
            let mut want: Vec<(u32, u32)> = bags.iter().enumerate()
                .flat_map(|(b, ids)| ids.iter().map(move |&i| (b as u32, i))).collect();
            let mut got: Vec<(u32, u32)> = c.pairs.iter().map(|p| (p.result, p.input)).collect();
            want.sort_unstable(); got.sort_unstable();
            prop_assert_eq!(got, want);
        }
    }
}
