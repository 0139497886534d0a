//! Where an embedding row lives on the device (paper §4.1, §5; artifact `trans_buffer.c`, `unvme_embed_lib.c`).
//!
//! A table occupies consecutive logical blocks from its start LBA. Two placements:
//! * [`Placement::Packed`]: rows back to back, row-major; the artifact's firmware finds a row's flash page as
//!   `floor(id x attr x dim / page_bytes)` and the baseline host path reads the 4 KiB LBA
//!   `start + floor(id x attr x dim / 4096)`. Rows never straddle a page: the row size must divide the page size.
//! * [`Placement::OneRowPerPage`]: row `r` alone at the start of flash page `r` - the paper's end-to-end evaluation
//!   assumption ("we assume a single embedding vector per SSD page of 16KB", §5).
//!
//! Logical blocks are 4 KiB and flash pages 16 KiB on the Cosmos+ OpenSSD (paper §5; artifact `SECTOR_SIZE_FTL`,
//! `PAGE_SIZE`); both are parameters here. The table start must be page aligned so table pages are flash pages.

use serde::{Deserialize, Serialize};

/// Logical block size, bytes [paper §5, artifact `SECTOR_SIZE_FTL = 4096`].
pub const LBA_BYTES: u32 = 4096;
/// Flash page size, bytes [paper §5 "page size of 16KB"].
pub const FLASH_PAGE_BYTES: u32 = 16384;

/// Errors of table placement.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LayoutError {
    /// A size is zero, the page is not a whole number of LBAs, or a row does not fit a page.
    #[error("invalid layout geometry: {0}")]
    Geometry(String),
    /// Packed rows would straddle pages.
    #[error("packed layout needs the row size ({row_bytes} B) to divide the page size ({page_bytes} B)")]
    RowStraddlesPages { row_bytes: u64, page_bytes: u64 },
    /// The start LBA is not the first LBA of a flash page.
    #[error("table start LBA {start_lba} is not aligned to a {lbas_per_page}-LBA flash page")]
    UnalignedStart { start_lba: u64, lbas_per_page: u64 },
    /// A row id is not in the table.
    #[error("row {row} is outside the table's {rows} rows")]
    RowOutOfRange { row: u64, rows: u64 },
    /// The table's extent overflows 64-bit LBAs.
    #[error("table extent overflows the LBA space")]
    Overflow,
}

/// How rows are placed on pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Placement {
    /// Row-major, back to back.
    Packed,
    /// One row at the start of each page.
    OneRowPerPage,
}

/// Decodes fp32 little-endian values (rows as [`TableLayout::render_page`] stores them, partial sums as the
/// device returns them) into `out`, as many as both hold.
pub fn read_f32s(bytes: &[u8], out: &mut [f32]) {
    for (v, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
        *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
}

use crate::quant::ElementFormat;

/// A table's geometry on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableLayout {
    start_lba: u64,
    rows: u64,
    dim: u32,
    attribute_bytes: u32,
    lba_bytes: u32,
    page_bytes: u32,
    placement: Placement,
    /// Bits of the int8 scale (0 for the float formats), see [`crate::quant`].
    #[serde(default)]
    int8_scale_bits: u32,
}

/// A row's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowLocation {
    /// Flash page of the table holding the row (0 = the table's first page).
    pub page: u64,
    /// Absolute LBA holding the row's first byte.
    pub lba: u64,
    /// Offset of the row in that LBA, bytes.
    pub byte_in_lba: u32,
    /// Offset of the row in its flash page, bytes.
    pub byte_in_page: u32,
}

impl TableLayout {
    /// A fp32 table with the Cosmos+ geometry (4 KiB LBAs, 16 KiB pages).
    pub fn fp32(start_lba: u64, rows: u64, dim: u32, placement: Placement) -> Result<Self, LayoutError> {
        Self::new(start_lba, rows, dim, 4, LBA_BYTES, FLASH_PAGE_BYTES, placement)
    }

    /// A table of `rows x dim` elements of `attribute_bytes` each.
    pub fn new(
        start_lba: u64,
        rows: u64,
        dim: u32,
        attribute_bytes: u32,
        lba_bytes: u32,
        page_bytes: u32,
        placement: Placement,
    ) -> Result<Self, LayoutError> {
        if dim == 0 || attribute_bytes == 0 || lba_bytes == 0 || page_bytes == 0 {
            return Err(LayoutError::Geometry("dim, attribute, LBA and page sizes must be >= 1".into()));
        }
        if !page_bytes.is_multiple_of(lba_bytes) {
            return Err(LayoutError::Geometry(format!(
                "page of {page_bytes} B is not a multiple of {lba_bytes}-B LBAs"
            )));
        }
        let row_bytes = u64::from(dim) * u64::from(attribute_bytes);
        if row_bytes > u64::from(page_bytes) {
            return Err(LayoutError::Geometry(format!("a row of {row_bytes} B does not fit a {page_bytes}-B page")));
        }
        if placement == Placement::Packed && u64::from(page_bytes) % row_bytes != 0 {
            return Err(LayoutError::RowStraddlesPages { row_bytes, page_bytes: u64::from(page_bytes) });
        }
        let layout = Self { start_lba, rows, dim, attribute_bytes, lba_bytes, page_bytes, placement, int8_scale_bits: 0 };
        if !start_lba.is_multiple_of(layout.lbas_per_page()) {
            return Err(LayoutError::UnalignedStart { start_lba, lbas_per_page: layout.lbas_per_page() });
        }
        layout
            .pages()
            .checked_mul(layout.lbas_per_page())
            .and_then(|n| n.checked_add(start_lba))
            .ok_or(LayoutError::Overflow)?;
        Ok(layout)
    }

    /// The same table with int8 elements of `scale` (see [`crate::quant`]); an error for other widths.
    pub fn with_int8_scale(mut self, scale: f32) -> Result<Self, LayoutError> {
        ElementFormat::new(self.attribute_bytes, scale).map_err(LayoutError::Geometry)?;
        if self.attribute_bytes != 1 {
            return Err(LayoutError::Geometry(format!("a scale given for {}-B elements", self.attribute_bytes)));
        }
        self.int8_scale_bits = scale.to_bits();
        Ok(self)
    }

    /// How the elements are stored.
    pub fn format(&self) -> Result<ElementFormat, LayoutError> {
        ElementFormat::new(self.attribute_bytes, f32::from_bits(self.int8_scale_bits)).map_err(LayoutError::Geometry)
    }

    /// First LBA of the table.
    pub fn start_lba(&self) -> u64 {
        self.start_lba
    }
    /// Rows.
    pub fn rows(&self) -> u64 {
        self.rows
    }
    /// Elements per row.
    pub fn dim(&self) -> u32 {
        self.dim
    }
    /// Bytes per element.
    pub fn attribute_bytes(&self) -> u32 {
        self.attribute_bytes
    }
    /// Bytes per LBA.
    pub fn lba_bytes(&self) -> u32 {
        self.lba_bytes
    }
    /// Bytes per flash page.
    pub fn page_bytes(&self) -> u32 {
        self.page_bytes
    }
    /// Placement.
    pub fn placement(&self) -> Placement {
        self.placement
    }
    /// Bytes per row.
    pub fn row_bytes(&self) -> u64 {
        u64::from(self.dim) * u64::from(self.attribute_bytes)
    }
    /// LBAs per flash page.
    pub fn lbas_per_page(&self) -> u64 {
        u64::from(self.page_bytes / self.lba_bytes)
    }
    /// Rows per flash page.
    pub fn rows_per_page(&self) -> u64 {
        match self.placement {
            Placement::Packed => u64::from(self.page_bytes) / self.row_bytes(),
            Placement::OneRowPerPage => 1,
        }
    }
    /// Flash pages the table occupies.
    pub fn pages(&self) -> u64 {
        self.rows.div_ceil(self.rows_per_page())
    }
    /// LBAs the table occupies (whole pages).
    pub fn lbas(&self) -> u64 {
        self.pages() * self.lbas_per_page()
    }
    /// One past the table's last LBA.
    pub fn end_lba(&self) -> u64 {
        self.start_lba + self.lbas()
    }
    /// First LBA of table page `page`.
    pub fn page_lba(&self, page: u64) -> u64 {
        self.start_lba + page * self.lbas_per_page()
    }

    /// The table page holding `row`.
    #[inline]
    pub fn page_of(&self, row: u64) -> Result<u64, LayoutError> {
        self.check_row(row)?;
        Ok(row / self.rows_per_page())
    }

    /// Where `row` lives.
    pub fn locate(&self, row: u64) -> Result<RowLocation, LayoutError> {
        let page = self.page_of(row)?;
        let byte_in_page = (row % self.rows_per_page()) * self.row_bytes();
        let lba_bytes = u64::from(self.lba_bytes);
        Ok(RowLocation {
            page,
            lba: self.page_lba(page) + byte_in_page / lba_bytes,
            byte_in_lba: (byte_in_page % lba_bytes) as u32,
            byte_in_page: byte_in_page as u32,
        })
    }

    /// Row ids stored on table page `page`, in order.
    pub fn rows_on_page(&self, page: u64) -> std::ops::Range<u64> {
        let first = page.saturating_mul(self.rows_per_page()).min(self.rows);
        first..(first + self.rows_per_page()).min(self.rows)
    }

    /// Writes the bytes of table page `page` (rows in the layout's element format, little-endian, per the
    /// placement, zero padding) into `out` (`page_bytes` long): what the device stores, and what a flash read
    /// returns.
    pub fn render_page(&self, table: &crate::sls::TableView<'_>, page: u64, out: &mut [u8]) -> Result<(), LayoutError> {
        let format = self.format()?;
        if table.dim() != self.dim as usize || table.rows() as u64 != self.rows {
            return Err(LayoutError::Geometry(format!(
                "table of {} x {} fp32 does not match layout of {} x {} x {} B",
                table.rows(),
                table.dim(),
                self.rows,
                self.dim,
                self.attribute_bytes
            )));
        }
        if out.len() != self.page_bytes as usize {
            return Err(LayoutError::Geometry(format!(
                "page buffer of {} B, page is {} B",
                out.len(),
                self.page_bytes
            )));
        }
        if page >= self.pages() {
            return Err(LayoutError::RowOutOfRange { row: page.saturating_mul(self.rows_per_page()), rows: self.rows });
        }
        out.fill(0);
        let row_bytes = self.row_bytes() as usize;
        for (k, r) in self.rows_on_page(page).enumerate() {
            format.encode_row(table.row(r as usize), &mut out[k * row_bytes..(k + 1) * row_bytes]);
        }
        Ok(())
    }

    fn check_row(&self, row: u64) -> Result<(), LayoutError> {
        if row < self.rows {
            Ok(())
        } else {
            Err(LayoutError::RowOutOfRange { row, rows: self.rows })
        }
    }

    /// Groups `rows` (any order) by flash page: pages ascending, each with the positions of its rows in input
    /// order - the "separate input embeddings by flash page" step of config processing (§4.1).
    pub fn group_by_page(&self, rows: &[u64]) -> Result<PageGroups, LayoutError> {
        let mut keyed = Vec::with_capacity(rows.len());
        for (pos, &r) in rows.iter().enumerate() {
            keyed.push((self.page_of(r)?, pos));
        }
        // Already sorted by id (the NDP config's contract) means already sorted by page: skip the sort.
        if !keyed.windows(2).all(|w| w[0].0 <= w[1].0) {
            keyed.sort_by_key(|&(page, _)| page);
        }
        let mut groups = PageGroups { pages: Vec::new(), starts: vec![0], positions: Vec::with_capacity(rows.len()) };
        for &(page, pos) in &keyed {
            if groups.pages.last() != Some(&page) {
                if !groups.pages.is_empty() {
                    groups.starts.push(groups.positions.len());
                }
                groups.pages.push(page);
            }
            groups.positions.push(pos);
        }
        if !groups.pages.is_empty() {
            groups.starts.push(groups.positions.len());
        }
        Ok(groups)
    }
}

/// Positions of a request's rows grouped by flash page (compressed rows: `positions[starts[g]..starts[g + 1]]`
/// are on `pages[g]`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PageGroups {
    pages: Vec<u64>,
    starts: Vec<usize>,
    positions: Vec<usize>,
}

impl PageGroups {
    /// Distinct pages, ascending.
    pub fn pages(&self) -> &[u64] {
        &self.pages
    }
    /// Number of distinct pages.
    pub fn len(&self) -> usize {
        self.pages.len()
    }
    /// No pages.
    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }
    /// Input positions of the rows on the `g`-th page.
    pub fn positions(&self, g: usize) -> &[usize] {
        &self.positions[self.starts[g]..self.starts[g + 1]]
    }
    /// Renames every position through `f` (e.g. back to positions of a larger list).
    pub(crate) fn map_positions(&mut self, f: impl Fn(usize) -> usize) {
        self.positions.iter_mut().for_each(|p| *p = f(*p));
    }

    /// (page, positions) pairs.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &[usize])> + '_ {
        self.pages.iter().enumerate().map(|(g, &p)| (p, self.positions(g)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn packed_fp32_dim32_matches_the_artifact_formulas() {
        let l = TableLayout::fp32(5000, 1_000_000, 32, Placement::Packed).unwrap();
        assert_eq!((l.row_bytes(), l.rows_per_page(), l.lbas_per_page()), (128, 128, 4));
        for id in [0u64, 1, 31, 32, 127, 128, 999_999] {
            let loc = l.locate(id).unwrap();
            // Firmware: page = id * attr * dim / PAGE_SIZE; host baseline: LBA = slba + id * attr * dim / 4096.
            assert_eq!(loc.page, id * 4 * 32 / 16384);
            assert_eq!(loc.lba, 5000 + id * 4 * 32 / 4096);
            // Host baseline: offset = (id % (4096 / row)) * row.
            assert_eq!(u64::from(loc.byte_in_lba), (id % (4096 / 128)) * 128);
        }
        assert_eq!(l.pages(), 7813);
        assert_eq!(l.end_lba(), 5000 + 7813 * 4);
        assert_eq!(l.rows_on_page(7812), 999_936..1_000_000);
    }

    #[test]
    fn one_row_per_page() {
        let l = TableLayout::fp32(0, 100, 64, Placement::OneRowPerPage).unwrap();
        let loc = l.locate(7).unwrap();
        assert_eq!((loc.page, loc.lba, loc.byte_in_lba, loc.byte_in_page), (7, 28, 0, 0));
        assert_eq!(l.lbas(), 400);
        assert_eq!(l.rows_on_page(7), 7..8);
    }

    #[test]
    fn bad_geometry_is_rejected() {
        assert!(matches!(TableLayout::fp32(0, 10, 48, Placement::Packed), Err(LayoutError::RowStraddlesPages { .. })));
        assert!(TableLayout::fp32(0, 10, 48, Placement::OneRowPerPage).is_ok());
        assert!(matches!(TableLayout::fp32(2, 10, 32, Placement::Packed), Err(LayoutError::UnalignedStart { .. })));
        assert!(TableLayout::fp32(0, 10, 8192, Placement::OneRowPerPage).is_err());
        assert!(TableLayout::new(0, 10, 32, 4, 4096, 6000, Placement::Packed).is_err());
        assert!(TableLayout::fp32(u64::MAX - 3, 1 << 40, 32, Placement::Packed).is_err());
        let l = TableLayout::fp32(0, 10, 32, Placement::Packed).unwrap();
        assert_eq!(l.locate(10), Err(LayoutError::RowOutOfRange { row: 10, rows: 10 }));
    }

    #[test]
    fn grouping_by_page() {
        let l = TableLayout::fp32(0, 1000, 32, Placement::Packed).unwrap(); // 128 rows per page
        let g = l.group_by_page(&[300, 5, 127, 128, 6, 255, 256]).unwrap();
        let got: Vec<(u64, Vec<usize>)> = g.iter().map(|(p, pos)| (p, pos.to_vec())).collect();
        assert_eq!(got, vec![(0, vec![1, 2, 4]), (1, vec![3, 5]), (2, vec![0, 6])]);
        assert!(l.group_by_page(&[]).unwrap().is_empty());
        assert!(l.group_by_page(&[1000]).is_err());
    }

    #[test]
    fn rendered_pages_hold_the_rows_where_locate_says() {
        let (rows, dim) = (300usize, 32usize);
        let data: Vec<f32> = (0..rows * dim).map(|i| i as f32).collect();
        let tv = crate::sls::TableView::new(&data, rows, dim).unwrap();
        for placement in [Placement::Packed, Placement::OneRowPerPage] {
            let l = TableLayout::fp32(0, rows as u64, dim as u32, placement).unwrap();
            let mut page = vec![0u8; 16384];
            for r in [0u64, 127, 128, 299] {
                let loc = l.locate(r).unwrap();
                l.render_page(&tv, loc.page, &mut page).unwrap();
                let at = loc.byte_in_page as usize;
                let first = f32::from_le_bytes(page[at..at + 4].try_into().unwrap());
                let last = f32::from_le_bytes(page[at + 124..at + 128].try_into().unwrap());
                assert_eq!((first, last), ((r * 32) as f32, (r * 32 + 31) as f32));
            }
            assert!(l.render_page(&tv, l.pages(), &mut page).is_err());
            assert!(l.render_page(&tv, 0, &mut page[..4096]).is_err());
        }
    }

    proptest! {
        #[test]
        fn groups_partition_the_request(ids in proptest::collection::vec(0u64..2000, 0..60), one in any::<bool>()) {
            let placement = if one { Placement::OneRowPerPage } else { Placement::Packed };
            let l = TableLayout::fp32(64, 2000, 16, placement).unwrap();
            let g = l.group_by_page(&ids).unwrap();
            let mut seen = vec![false; ids.len()];
            prop_assert!(g.pages().windows(2).all(|w| w[0] < w[1]));
            for (page, pos) in g.iter() {
                prop_assert!(pos.windows(2).all(|w| w[0] < w[1]));
                for &p in pos {
                    prop_assert_eq!(l.page_of(ids[p]).unwrap(), page);
                    prop_assert!(l.rows_on_page(page).contains(&ids[p]));
                    seen[p] = true;
                }
            }
            prop_assert!(seen.into_iter().all(|s| s));
        }
    }
}
