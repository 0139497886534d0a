//! Functional core of RecSSD's FTL-side SLS engine (paper §4.1, Fig. 7), without timing: what one entry of the
//! pending-SLS-request buffer holds and does. The firmware extension wraps this in the device's scheduling and
//! charges time for each step; the numbers here are what it charges for.
//!
//! * **Config processing** (steps 2, 2a, 2b) - [`SlsRequest::process_config`]: validate the decoded config, zero
//!   the result scratchpad, probe the SSD cache for every pair (a hit is summed at once), group the remaining
//!   pairs by flash page (pairs arrive sorted by input id, so this is a linear scan), count per result sector the
//!   flash-served inputs it waits for.
//! * **Translation** (steps 4-5) - [`SlsRequest::translate_page`]: for a page read from flash, extract each needed
//!   row, fill the SSD cache with it, add it into its result slot, advance the sector counters.
//! * **Result return** (step 6) - [`SlsRequest::sector_ready`] / [`SlsRequest::sector_bytes`]: a 4 KiB result
//!   sector may go to the host once every input summed into it is done.
//!
//! Differences from the artifact, which only matter off the paper's configurations: a result row that straddles
//! two sectors (row size not dividing 4 KiB) holds both sectors back (the artifact counts only the first), and
//! page groups never include cache-hit pairs (the artifact's per-page start index can point at one).

use crate::layout::{PageGroups, TableLayout};
use crate::ndp_wire::{NdpConfig, WireError, WireLimits};
use crate::sls::{add_row, RowSource};
use crate::ssd_cache::{CacheError, SsdEmbeddingCache};

/// Errors of request execution.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError {
    /// The config is invalid.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// The SSD cache rejected a row.
    #[error(transparent)]
    Cache(#[from] CacheError),
    /// The config does not describe the table's layout.
    #[error("config does not match the table: {0}")]
    Mismatch(String),
    /// A page index, page buffer or sector index is wrong.
    #[error("bad page or sector: {0}")]
    BadPage(String),
}

/// Work done so far, for time and energy charging.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExecStats {
    /// Pairs scanned during config processing.
    pub pairs: u64,
    /// Pairs served by the SSD cache (summed during config processing).
    pub cache_hits: u64,
    /// Flash pages the request needs.
    pub pages: u64,
    /// Pages translated so far.
    pub pages_translated: u64,
    /// Rows extracted from flash pages and summed.
    pub rows_from_flash: u64,
}

/// One in-flight SLS request.
#[derive(Debug, Clone)]
pub struct SlsRequest {
    config: NdpConfig,
    layout: TableLayout,
    groups: PageGroups,
    translated: Vec<bool>,
    sector_bytes: usize,
    sector_waiting: Vec<u32>,
    result: Vec<f32>,
    stats: ExecStats,
}

impl SlsRequest {
    /// Config processing: validates `config` for `layout`, sums SSD-cache hits, plans the page reads.
    pub fn process_config(
        config: NdpConfig,
        layout: &TableLayout,
        limits: &WireLimits,
        mut cache: Option<&mut SsdEmbeddingCache>,
    ) -> Result<Self, ExecError> {
        config.validate(limits, layout.rows())?;
        if config.embedding_length != layout.dim() || config.attribute_size != layout.attribute_bytes() {
            return Err(ExecError::Mismatch(format!(
                "config rows of {} x {} B, table rows of {} x {} B",
                config.embedding_length,
                config.attribute_size,
                layout.dim(),
                layout.attribute_bytes()
            )));
        }
        let dim = layout.dim() as usize;
        let sector_bytes = limits.result_sector_bytes;
        let sectors = config.result_sectors(sector_bytes) as usize;
        let mut result = vec![0.0f32; config.result_embeddings as usize * dim];
        let mut sector_waiting = vec![0u32; sectors];
        let mut misses = Vec::with_capacity(config.pairs.len());
        let mut miss_rows = Vec::with_capacity(config.pairs.len());
        let mut stats = ExecStats { pairs: config.pairs.len() as u64, ..ExecStats::default() };
        for (pos, p) in config.pairs.iter().enumerate() {
            let slot = &mut result[p.result as usize * dim..(p.result as usize + 1) * dim];
            if let Some(c) = cache.as_deref_mut() {
                if let Some(row) = c.probe(config.table_id, u64::from(p.input), dim)? {
                    add_row(slot, row);
                    stats.cache_hits += 1;
                    continue;
                }
            }
            for s in result_sectors_of(p.result as usize, dim * 4, sector_bytes) {
                sector_waiting[s] += 1;
            }
            misses.push(pos);
            miss_rows.push(u64::from(p.input));
        }
        let mut groups = layout.group_by_page(&miss_rows).map_err(|e| ExecError::Mismatch(e.to_string()))?;
        groups.map_positions(|i| misses[i]);
        stats.pages = groups.len() as u64;
        Ok(Self {
            translated: vec![false; groups.len()],
            config,
            layout: *layout,
            groups,
            sector_bytes,
            sector_waiting,
            result,
            stats,
        })
    }

    /// The decoded config.
    pub fn config(&self) -> &NdpConfig {
        &self.config
    }

    /// Table pages to read from flash, ascending; page group `g` is `flash_pages()[g]`.
    pub fn flash_pages(&self) -> &[u64] {
        self.groups.pages()
    }

    /// First LBA of page group `g`.
    pub fn page_lba(&self, g: usize) -> Option<u64> {
        self.groups.pages().get(g).map(|&p| self.layout.page_lba(p))
    }

    /// Rows page group `g` contributes (translation work of that page).
    pub fn rows_on_page(&self, g: usize) -> usize {
        if g < self.groups.len() {
            self.groups.positions(g).len()
        } else {
            0
        }
    }

    /// Translation of page group `g` from the page's bytes; returns the rows summed. Fills `cache` with them.
    pub fn translate_page(
        &mut self,
        g: usize,
        page: &[u8],
        cache: Option<&mut SsdEmbeddingCache>,
    ) -> Result<usize, ExecError> {
        if page.len() != self.layout.page_bytes() as usize {
            return Err(ExecError::BadPage(format!(
                "{} B given for a {}-B page",
                page.len(),
                self.layout.page_bytes()
            )));
        }
        let layout = self.layout;
        let format = layout.format().map_err(|e| ExecError::Mismatch(e.to_string()))?;
        let row_bytes = layout.row_bytes() as usize;
        self.translate_with(g, cache, |input, row| {
            let at = layout.locate(u64::from(input)).map_err(|e| ExecError::Mismatch(e.to_string()))?.byte_in_page as usize;
            format.decode_row(&page[at..at + row_bytes], row);
            Ok(())
        })
    }

    /// Translation of page group `g` whose rows come from `source` (a table the device does not store, see
    /// [`crate::table_dir::RowData::Generated`]); otherwise as [`translate_page`](Self::translate_page).
    pub fn translate_page_from<S: RowSource>(
        &mut self,
        g: usize,
        source: &S,
        cache: Option<&mut SsdEmbeddingCache>,
    ) -> Result<usize, ExecError> {
        if source.dim() != self.layout.dim() as usize || source.rows() as u64 != self.layout.rows() {
            return Err(ExecError::Mismatch(format!(
                "row source of {} x {}, table of {} x {}",
                source.rows(),
                source.dim(),
                self.layout.rows(),
                self.layout.dim()
            )));
        }
        let mut scratch = vec![0.0f32; source.dim()];
        self.translate_with(g, cache, |input, row| {
            let r = source.row(input as usize, &mut scratch);
            row.copy_from_slice(r);
            Ok(())
        })
    }

    fn translate_with(
        &mut self,
        g: usize,
        mut cache: Option<&mut SsdEmbeddingCache>,
        mut extract: impl FnMut(u32, &mut [f32]) -> Result<(), ExecError>,
    ) -> Result<usize, ExecError> {
        if g >= self.groups.len() || self.translated[g] {
            return Err(ExecError::BadPage(format!("page group {g} unknown or already translated")));
        }
        let dim = self.layout.dim() as usize;
        let row_bytes = dim * 4;
        let mut row = vec![0.0f32; dim];
        let positions = self.groups.positions(g);
        for &pos in positions {
            let p = self.config.pairs[pos];
            extract(p.input, &mut row)?;
            if let Some(c) = cache.as_deref_mut() {
                c.fill(self.config.table_id, u64::from(p.input), &row)?;
            }
            let r = p.result as usize;
            add_row(&mut self.result[r * dim..(r + 1) * dim], &row);
            for s in result_sectors_of(r, row_bytes, self.sector_bytes) {
                self.sector_waiting[s] -= 1;
            }
        }
        self.translated[g] = true;
        self.stats.pages_translated += 1;
        self.stats.rows_from_flash += positions.len() as u64;
        Ok(positions.len())
    }

    /// Result sectors page group `g` contributes to (ascending, distinct).
    pub fn sectors_of_page(&self, g: usize) -> Vec<usize> {
        if g >= self.groups.len() {
            return Vec::new();
        }
        let row_bytes = self.layout.dim() as usize * 4;
        let mut out: Vec<usize> = self
            .groups
            .positions(g)
            .iter()
            .flat_map(|&pos| result_sectors_of(self.config.pairs[pos].result as usize, row_bytes, self.sector_bytes))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The table layout the request was processed against.
    pub fn layout(&self) -> &TableLayout {
        &self.layout
    }

    /// Result sectors of the request.
    pub fn result_sectors(&self) -> usize {
        self.sector_waiting.len()
    }

    /// True once every input of sector `s` has been summed.
    pub fn sector_ready(&self, s: usize) -> bool {
        self.sector_waiting.get(s) == Some(&0)
    }

    /// Bytes of result sector `s` (fp32 little-endian, zero padded), once ready.
    pub fn sector_bytes(&self, s: usize) -> Result<Vec<u8>, ExecError> {
        if !self.sector_ready(s) {
            return Err(ExecError::BadPage(format!("result sector {s} is not ready")));
        }
        let mut out = vec![0u8; self.sector_bytes];
        let first = s * self.sector_bytes / 4;
        let end = (first + self.sector_bytes / 4).min(self.result.len());
        for (o, v) in out.chunks_exact_mut(4).zip(&self.result[first.min(end)..end]) {
            o.copy_from_slice(&v.to_le_bytes());
        }
        Ok(out)
    }

    /// True once every page is translated.
    pub fn is_complete(&self) -> bool {
        self.translated.iter().all(|&t| t)
    }

    /// Work counters.
    pub fn stats(&self) -> ExecStats {
        self.stats
    }

    /// The pooled results, `result_embeddings x dim`.
    pub fn result(&self) -> &[f32] {
        &self.result
    }
}

/// Result sectors a result row overlaps.
fn result_sectors_of(result: usize, row_bytes: usize, sector_bytes: usize) -> std::ops::RangeInclusive<usize> {
    let start = result * row_bytes;
    start / sector_bytes..=(start + row_bytes - 1) / sector_bytes
}

/// Runs a whole request functionally: config processing, then every page in order from `read_page(page, buf)`.
pub fn execute<E>(
    config: NdpConfig,
    layout: &TableLayout,
    limits: &WireLimits,
    mut cache: Option<&mut SsdEmbeddingCache>,
    mut read_page: impl FnMut(u64, &mut [u8]) -> Result<(), E>,
) -> Result<Result<SlsRequest, E>, ExecError> {
    let mut req = SlsRequest::process_config(config, layout, limits, cache.as_deref_mut())?;
    let mut buf = vec![0u8; layout.page_bytes() as usize];
    for g in 0..req.flash_pages().len() {
        if let Err(e) = read_page(req.flash_pages()[g], &mut buf) {
            return Ok(Err(e));
        }
        req.translate_page(g, &buf, cache.as_deref_mut())?;
    }
    Ok(Ok(req))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Placement;
    use crate::sls::{embedding_bag_sum, TableView};
    use crate::ssd_cache::SsdCacheConfig;
    use proptest::prelude::*;

    fn run(
        table: &[f32],
        rows: usize,
        dim: usize,
        placement: Placement,
        idx: &[u32],
        offs: &[u32],
        cache: Option<&mut SsdEmbeddingCache>,
    ) -> SlsRequest {
        let tv = TableView::new(table, rows, dim).unwrap();
        let layout = TableLayout::fp32(8, rows as u64, dim as u32, placement).unwrap();
        let cfg = NdpConfig::from_bags(2, dim as u32, idx, offs).unwrap();
        let wire = NdpConfig::decode(&cfg.encode().unwrap()).unwrap();
        execute(wire, &layout, &WireLimits::default(), cache, |p, buf| layout.render_page(&tv, p, buf))
            .unwrap()
            .unwrap()
    }

    #[test]
    fn pages_cache_and_sectors() {
        let (rows, dim) = (1000usize, 32usize);
        let table: Vec<f32> = (0..rows * dim).map(|i| (i % 251) as f32).collect();
        // Bags: repeated ids, an empty bag, page-boundary ids 127/128, a bag spanning many pages.
        let idx = [127u32, 128, 128, 0, 999, 5, 300, 600, 900];
        let offs = [0u32, 3, 3, 5];
        let mut cache = SsdEmbeddingCache::new(SsdCacheConfig { index_bits: 16, ..Default::default() }).unwrap();
        let req = run(&table, rows, dim, Placement::Packed, &idx, &offs, Some(&mut cache));
        let tv = TableView::new(&table, rows, dim).unwrap();
        assert_eq!(req.result(), &embedding_bag_sum(&tv, &idx, &offs, None, false).unwrap()[..]);
        // Pages of 128 rows: ids 0,5 -> 0; 127 -> 0; 128 -> 1; 300 -> 2; 600 -> 4; 900 -> 7; 999 -> 7.
        assert_eq!(req.flash_pages(), &[0, 1, 2, 4, 7]);
        assert_eq!(req.stats().cache_hits, 0);
        assert!(req.is_complete() && req.sector_ready(0) && req.result_sectors() == 1);
        // Same request again: every row was cached by the first run's translation.
        let again = run(&table, rows, dim, Placement::Packed, &idx, &offs, Some(&mut cache));
        assert_eq!(again.result(), req.result());
        assert_eq!(again.stats().cache_hits, 9);
        assert!(again.flash_pages().is_empty());
        let one = run(&table, rows, dim, Placement::OneRowPerPage, &idx, &offs, None);
        assert_eq!(one.flash_pages().len(), 8);
        assert_eq!(one.result(), req.result());
    }

    #[test]
    fn sectors_wait_for_their_inputs() {
        let (rows, dim) = (100usize, 64usize); // 256-B results: 16 per 4 KiB sector
        let table = vec![1.0f32; rows * dim];
        let tv = TableView::new(&table, rows, dim).unwrap();
        let layout = TableLayout::fp32(0, rows as u64, dim as u32, Placement::OneRowPerPage).unwrap();
        // 17 bags: bag 16 (sector 1) reads row 99 only; bags 0..16 read row 0.
        let mut idx: Vec<u32> = vec![0; 16];
        idx.push(99);
        let offs: Vec<u32> = (0..17).collect();
        let cfg = NdpConfig::from_bags(0, 64, &idx, &offs).unwrap();
        let mut req = SlsRequest::process_config(cfg, &layout, &WireLimits::default(), None).unwrap();
        assert_eq!((req.result_sectors(), req.flash_pages()), (2, &[0u64, 99][..]));
        assert!(!req.sector_ready(0) && !req.sector_ready(1));
        let mut page = vec![0u8; 16384];
        layout.render_page(&tv, 99, &mut page).unwrap();
        req.translate_page(1, &page, None).unwrap();
        assert!(!req.sector_ready(0) && req.sector_ready(1));
        assert!(req.sector_bytes(0).is_err());
        let s1 = req.sector_bytes(1).unwrap();
        assert_eq!(f32::from_le_bytes(s1[0..4].try_into().unwrap()), 1.0);
        assert!(s1[256..].iter().all(|&b| b == 0));
        assert!(req.translate_page(1, &page, None).is_err());
        assert!(req.translate_page(0, &page[..100], None).is_err());
        layout.render_page(&tv, 0, &mut page).unwrap();
        assert_eq!(req.translate_page(0, &page, None).unwrap(), 16);
        assert!(req.sector_ready(0) && req.is_complete());
    }

    #[test]
    fn mismatched_configs_are_rejected() {
        let layout = TableLayout::fp32(0, 10, 32, Placement::Packed).unwrap();
        let cfg = NdpConfig::from_bags(0, 16, &[1], &[0]).unwrap();
        let err = SlsRequest::process_config(cfg, &layout, &WireLimits::default(), None).unwrap_err();
        assert!(matches!(err, ExecError::Mismatch(_)));
        let cfg = NdpConfig::from_bags(0, 32, &[10], &[0]).unwrap();
        let err = SlsRequest::process_config(cfg, &layout, &WireLimits::default(), None).unwrap_err();
        assert!(matches!(err, ExecError::Wire(WireError::InputBeyondTable { .. })));
    }

    proptest! {
        #[test]
        fn ndp_equals_the_host_reference(
            bags in proptest::collection::vec(proptest::collection::vec(0u32..700, 0..12), 1..12),
            dim in prop_oneof![Just(16usize), Just(32), Just(64)],
            one in any::<bool>(),
        ) {
            let rows = 700usize;
            let table: Vec<f32> = (0..rows * dim).map(|i| ((i * 31) % 97) as f32 - 48.0).collect();
            let mut idx = Vec::new();
            let mut offs = Vec::new();
            for b in &bags { offs.push(idx.len() as u32); idx.extend_from_slice(b); }
            let placement = if one { Placement::OneRowPerPage } else { Placement::Packed };
            let req = run(&table, rows, dim, placement, &idx, &offs, None);
            let tv = TableView::new(&table, rows, dim).unwrap();
            let want = embedding_bag_sum(&tv, &idx, &offs, None, false).unwrap();
            prop_assert_eq!(req.result(), &want[..]);
            prop_assert!((0..req.result_sectors()).all(|s| req.sector_ready(s)));
        }
    }
}
