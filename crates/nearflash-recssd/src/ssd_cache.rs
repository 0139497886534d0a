//! RecSSD's SSD-side embedding cache in controller DRAM (paper §4.2 "SSD-side DRAM Caching"; artifact
//! `trans_buffer.c`): direct-mapped, no replacement metadata, filled with every row translated from a flash page,
//! probed while the config is processed (a hit is summed at once and needs no page read).
//!
//! Indexing (artifact): `key = embeddingID << 5 | tableID`; set = low 20 bits of `key`; tag = the next 12 bits;
//! 2^20 entries of 128 B payload (one dim-32 fp32 row). All widths are parameters here ([`SsdCacheConfig`]).
//! Two deliberate differences from the artifact, both invisible for the paper's tables (< 2^27 rows, < 32 tables,
//! rows <= payload):
//! * the stored tag is the whole `key >> index_bits`, so a probe never returns another row's data (the artifact's
//!   12-bit tag aliases rows >= 2^27; `tag_bits` still sizes the DRAM footprint);
//! * a table id that does not fit `table_bits`, or a row longer than the payload, is an error (the artifact would
//!   corrupt the key, or overrun the next entry - a dim-64 row is 256 B).
//!
//! [`DirectMappedTags`] is the tag array alone, for hit-rate studies without data; [`SsdEmbeddingCache`] adds the
//! payload and is what the FTL engine uses.

use serde::{Deserialize, Serialize};

/// Errors of the SSD cache.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CacheError {
    /// The configuration is unusable.
    #[error("invalid SSD cache configuration: {0}")]
    Config(String),
    /// A table id needs more than `table_bits` bits.
    #[error("table id {table} does not fit the cache key's {bits} table bits")]
    TableIdTooLarge { table: u32, bits: u32 },
    /// A row id is too large for a 64-bit key.
    #[error("row {row} does not fit a 64-bit cache key with {bits} table bits")]
    RowTooLarge { row: u64, bits: u32 },
    /// A row is longer than an entry's payload.
    #[error("a row of {row_bytes} B does not fit the {payload_bytes}-B cache payload")]
    RowLongerThanPayload { row_bytes: usize, payload_bytes: u32 },
}

/// Geometry of the direct-mapped cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SsdCacheConfig {
    /// log2 of the entry count [artifact: 20, `TRANS_EMBED_CACHE_ENTRY_NUM = 2^20`].
    pub index_bits: u32,
    /// Tag width stored per entry, for footprint accounting [artifact: 12].
    pub tag_bits: u32,
    /// Low key bits holding the table id (artifact: 5, `embeddingID << 5 | tableID`).
    pub table_bits: u32,
    /// Payload per entry, bytes [artifact: 128, "fixed attribute size and embedding vector length"].
    pub payload_bytes: u32,
}

impl Default for SsdCacheConfig {
    fn default() -> Self {
        Self { index_bits: 20, tag_bits: 12, table_bits: 5, payload_bytes: 128 }
    }
}

impl SsdCacheConfig {
    fn check(&self) -> Result<(), CacheError> {
        if self.index_bits == 0 || self.index_bits > 30 {
            return Err(CacheError::Config(format!("index_bits = {} must be in 1..=30", self.index_bits)));
        }
        if self.table_bits > 16 {
            return Err(CacheError::Config(format!("table_bits = {} must be <= 16", self.table_bits)));
        }
        if !self.payload_bytes.is_multiple_of(4) {
            return Err(CacheError::Config(format!("payload of {} B is not whole fp32 values", self.payload_bytes)));
        }
        Ok(())
    }

    /// Entries.
    pub fn entries(&self) -> usize {
        1usize << self.index_bits
    }

    /// Controller DRAM the cache occupies: entries x (payload + valid bit and tag rounded up to 32 bits).
    pub fn footprint_bytes(&self) -> u64 {
        let meta = (1 + u64::from(self.tag_bits)).div_ceil(32) * 4;
        self.entries() as u64 * (u64::from(self.payload_bytes) + meta)
    }
}

/// Hit/miss counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheStats {
    /// Probes that found the row.
    pub hits: u64,
    /// Probes that did not.
    pub misses: u64,
    /// Rows written into the cache.
    pub fills: u64,
    /// Fills that replaced a valid entry of another row.
    pub evictions: u64,
}

impl CacheStats {
    /// hits / (hits + misses), 0 when nothing was probed.
    pub fn hit_rate(&self) -> f64 {
        let n = self.hits + self.misses;
        if n == 0 {
            0.0
        } else {
            self.hits as f64 / n as f64
        }
    }
}

/// Tag array of a direct-mapped cache (no data).
#[derive(Debug, Clone)]
pub struct DirectMappedTags {
    cfg: SsdCacheConfig,
    /// `tag + 1` per entry; 0 = invalid.
    tags: Vec<u64>,
    stats: CacheStats,
}

impl DirectMappedTags {
    /// An empty cache.
    pub fn new(cfg: SsdCacheConfig) -> Result<Self, CacheError> {
        cfg.check()?;
        Ok(Self { cfg, tags: vec![0; cfg.entries()], stats: CacheStats::default() })
    }

    /// Configuration.
    pub fn config(&self) -> &SsdCacheConfig {
        &self.cfg
    }

    /// (entry index, tag) of a row.
    pub fn slot(&self, table: u32, row: u64) -> Result<(usize, u64), CacheError> {
        let tb = self.cfg.table_bits;
        if u64::from(table) >> tb != 0 {
            return Err(CacheError::TableIdTooLarge { table, bits: tb });
        }
        if tb > 0 && row >> (64 - tb) != 0 {
            return Err(CacheError::RowTooLarge { row, bits: tb });
        }
        let key = (row << tb) | u64::from(table);
        let index = (key & ((1u64 << self.cfg.index_bits) - 1)) as usize;
        Ok((index, key >> self.cfg.index_bits))
    }

    /// Looks a row up, counting a hit or a miss; returns the entry index on a hit.
    pub fn probe(&mut self, table: u32, row: u64) -> Result<Option<usize>, CacheError> {
        let (index, tag) = self.slot(table, row)?;
        let hit = self.tags[index] == tag + 1;
        if hit {
            self.stats.hits += 1;
        } else {
            self.stats.misses += 1;
        }
        Ok(hit.then_some(index))
    }

    /// Installs a row's tag, replacing the entry's previous row; returns the entry index.
    pub fn fill(&mut self, table: u32, row: u64) -> Result<usize, CacheError> {
        let (index, tag) = self.slot(table, row)?;
        let old = self.tags[index];
        if old != 0 && old != tag + 1 {
            self.stats.evictions += 1;
        }
        self.tags[index] = tag + 1;
        self.stats.fills += 1;
        Ok(index)
    }

    /// Probe, and fill on a miss (what one NDP lookup does to the cache); true on a hit.
    pub fn access(&mut self, table: u32, row: u64) -> Result<bool, CacheError> {
        let hit = self.probe(table, row)?.is_some();
        if !hit {
            self.fill(table, row)?;
        }
        Ok(hit)
    }

    /// Counters.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    /// Zeroes the counters.
    pub fn reset_stats(&mut self) {
        self.stats = CacheStats::default();
    }

    /// Invalidates every entry (e.g. when a table is rewritten).
    pub fn clear(&mut self) {
        self.tags.fill(0);
    }

    /// Drops the cached rows `rows` of `table` (the host overwrote or trimmed where they are stored); returns
    /// how many entries held one. Walks the rows, or the entries when the range is longer than the cache.
    pub fn invalidate_rows(&mut self, table: u32, rows: std::ops::Range<u64>) -> u64 {
        let mut dropped = 0;
        if rows.end.saturating_sub(rows.start) <= self.tags.len() as u64 {
            for row in rows {
                if let Ok((i, tag)) = self.slot(table, row) {
                    if self.tags[i] == tag + 1 {
                        self.tags[i] = 0;
                        dropped += 1;
                    }
                }
            }
            return dropped;
        }
        let (ib, tb) = (self.cfg.index_bits, self.cfg.table_bits);
        for (i, t) in self.tags.iter_mut().enumerate() {
            if *t == 0 {
                continue;
            }
            let key = ((*t - 1) << ib) | i as u64;
            let (entry_table, row) = ((key & ((1u64 << tb) - 1)) as u32, key >> tb);
            if entry_table == table && rows.contains(&row) {
                *t = 0;
                dropped += 1;
            }
        }
        dropped
    }
}

/// The cache with row payloads.
#[derive(Debug, Clone)]
pub struct SsdEmbeddingCache {
    tags: DirectMappedTags,
    payload_floats: usize,
    /// `entries x payload_floats`; zero-initialised memory is mapped lazily by the allocator.
    payload: Vec<f32>,
}

impl SsdEmbeddingCache {
    /// An empty cache.
    pub fn new(cfg: SsdCacheConfig) -> Result<Self, CacheError> {
        let tags = DirectMappedTags::new(cfg)?;
        let payload_floats = cfg.payload_bytes as usize / 4;
        Ok(Self { tags, payload_floats, payload: vec![0.0; cfg.entries() * payload_floats] })
    }

    /// Configuration.
    pub fn config(&self) -> &SsdCacheConfig {
        self.tags.config()
    }

    fn check_len(&self, dim: usize) -> Result<(), CacheError> {
        if dim > self.payload_floats {
            return Err(CacheError::RowLongerThanPayload {
                row_bytes: dim * 4,
                payload_bytes: self.config().payload_bytes,
            });
        }
        Ok(())
    }

    /// The cached row of `dim` values, counting a hit or a miss.
    pub fn probe(&mut self, table: u32, row: u64, dim: usize) -> Result<Option<&[f32]>, CacheError> {
        self.check_len(dim)?;
        Ok(self.tags.probe(table, row)?.map(|i| &self.payload[i * self.payload_floats..i * self.payload_floats + dim]))
    }

    /// Drops the cached rows `rows` of `table`; see [`DirectMappedTags::invalidate_rows`].
    pub fn invalidate_rows(&mut self, table: u32, rows: std::ops::Range<u64>) -> u64 {
        self.tags.invalidate_rows(table, rows)
    }

    /// Stores a row read from flash.
    pub fn fill(&mut self, table: u32, row: u64, values: &[f32]) -> Result<(), CacheError> {
        self.check_len(values.len())?;
        let i = self.tags.fill(table, row)?;
        self.payload[i * self.payload_floats..i * self.payload_floats + values.len()].copy_from_slice(values);
        Ok(())
    }

    /// Counters.
    pub fn stats(&self) -> CacheStats {
        self.tags.stats()
    }

    /// Zeroes the counters.
    pub fn reset_stats(&mut self) {
        self.tags.reset_stats();
    }

    /// Invalidates every entry.
    pub fn clear(&mut self) {
        self.tags.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifact_indexing() {
        let t = DirectMappedTags::new(SsdCacheConfig::default()).unwrap();
        // key = id << 5 | table; index = low 20 bits; tag = key >> 20.
        let (id, table) = (0x12345u64, 7u32);
        let key = (id << 5) | 7;
        assert_eq!(t.slot(table, id).unwrap(), ((key & 0xFFFFF) as usize, key >> 20));
        // Rows 2^15 apart in the same table collide in a set (the trace's line x 128 ids use only 256 sets/table).
        assert_eq!(t.slot(0, 5).unwrap().0, t.slot(0, 5 + (1 << 15)).unwrap().0);
        assert_ne!(t.slot(0, 5).unwrap().1, t.slot(0, 5 + (1 << 15)).unwrap().1);
        let sets: std::collections::HashSet<usize> = (0..7812u64).map(|l| t.slot(0, l * 128).unwrap().0).collect();
        assert_eq!(sets.len(), 256);
        assert_eq!(SsdCacheConfig::default().footprint_bytes(), (1 << 20) * (128 + 4));
    }

    #[test]
    fn invalidation_drops_exactly_the_rows_of_the_range_by_rows_or_by_entries() {
        // 256 entries, key = row << 2 | table: rows 0..40 of two tables fit without conflicts.
        let cfg = SsdCacheConfig { index_bits: 8, table_bits: 2, ..Default::default() };
        let mut c = SsdEmbeddingCache::new(cfg).unwrap();
        for row in 0..40u64 {
            c.fill(1, row, &[row as f32; 4]).unwrap();
            c.fill(2, row, &[-(row as f32); 4]).unwrap();
        }
        // A short range walks its rows; a range longer than the cache walks the entries.
        assert_eq!(c.invalidate_rows(1, 10..13), 3);
        assert_eq!(c.invalidate_rows(2, 5..1_000), 35);
        for row in 0..40u64 {
            let cached1 = c.probe(1, row, 4).unwrap().is_some();
            assert_eq!(cached1, !(10..13).contains(&row), "table 1 row {row}");
            let cached2 = c.probe(2, row, 4).unwrap().map(<[f32]>::to_vec);
            assert_eq!(cached2, (row < 5).then(|| vec![-(row as f32); 4]), "table 2 row {row}");
        }
        assert_eq!(c.invalidate_rows(2, 5..1_000), 0, "already dropped");
        assert_eq!(c.invalidate_rows(3, 0..u64::MAX), 0, "a table with nothing cached");
    }

    #[test]
    fn direct_mapped_hits_misses_and_conflicts() {
        let cfg = SsdCacheConfig { index_bits: 4, ..Default::default() };
        let mut c = DirectMappedTags::new(cfg).unwrap();
        assert!(!c.access(1, 3).unwrap());
        assert!(c.access(1, 3).unwrap());
        assert!(!c.access(2, 3).unwrap()); // other table, other set
        assert!(!c.access(1, 3 + (1 << 4)).unwrap()); // conflict: same set, evicts row 3
        assert!(!c.access(1, 3).unwrap());
        let s = c.stats();
        assert_eq!((s.hits, s.misses, s.fills, s.evictions), (1, 4, 4, 2));
        assert!((s.hit_rate() - 0.2).abs() < 1e-12);
        c.clear();
        assert!(!c.access(1, 3).unwrap());
        assert!(matches!(c.access(32, 0), Err(CacheError::TableIdTooLarge { table: 32, bits: 5 })));
        assert!(matches!(c.access(0, u64::MAX), Err(CacheError::RowTooLarge { .. })));
        assert!(DirectMappedTags::new(SsdCacheConfig { index_bits: 0, ..cfg }).is_err());
    }

    #[test]
    fn payload_round_trip_and_row_size_check() {
        let cfg = SsdCacheConfig { index_bits: 3, ..Default::default() };
        let mut c = SsdEmbeddingCache::new(cfg).unwrap();
        let row: Vec<f32> = (0..32).map(|i| i as f32 * 0.5).collect();
        assert_eq!(c.probe(0, 9, 32).unwrap(), None);
        c.fill(0, 9, &row).unwrap();
        assert_eq!(c.probe(0, 9, 32).unwrap(), Some(&row[..]));
        c.fill(0, 9 + 8, &[1.0; 32]).unwrap();
        assert_eq!(c.probe(0, 9, 32).unwrap(), None);
        assert!(matches!(c.fill(0, 1, &[0.0; 64]), Err(CacheError::RowLongerThanPayload { row_bytes: 256, .. })));
        let wide = SsdCacheConfig { payload_bytes: 256, ..cfg };
        assert!(SsdEmbeddingCache::new(wide).unwrap().fill(0, 1, &[0.0; 64]).is_ok());
        assert_eq!(c.stats().hits, 1);
    }
}
