//! `lineitem` in columnar pages (beyond the paper, which stores 150-byte row records): every column in its own
//! region of pages, so a query senses and moves only the pages of the columns it names (8-20 bytes per row
//! instead of the record's 150).
//!
//! Rows are cut into **row groups** of `page_size / 8` rows (1024 for 8 KiB pages). Column `c`'s values for group
//! `g` are packed back to back, little-endian, at the field's width (the record's encoding, see
//! [`super::layout`]), in `k_c` whole pages starting at page `region_c + g x k_c`, zero padded; an integer column
//! takes exactly one page per group (`k_c = 1`), text columns `ceil(rows_per_group x width / page_size)`. Regions
//! follow in record order, each starting on a multiple of `align_pages` pages: with `align_pages` a multiple of
//! the device's channel count and CWDP striping, page `g` of every integer column lands on channel `g mod n_ch`,
//! so the FMC that maps a row group reads all its columns itself. Page 0 is the table's header ([`HEADER_MAGIC`],
//! rows u64, page size u32, alignment u32, little-endian); column pages have no headers (dense typed arrays), and
//! the row count travels with a query too (the columnar kernels' `rows`), checked against the header on the host.

use super::layout::{Field, FieldKind, RECORD_SIZE};
use crate::error::{invalid, Result};
use serde::Serialize;

/// Widest integer column: a group of `page_size / MAX_INT_WIDTH` rows fills one page of it.
pub const MAX_INT_WIDTH: usize = 8;
/// First bytes of a columnar table's header page.
pub const HEADER_MAGIC: &[u8; 8] = b"NFCOLv1\0";

/// Largest accepted alignment of column regions (pages).
pub const MAX_ALIGN_PAGES: u64 = 1 << 16;

/// The page geometry of a columnar lineitem table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ColumnarLayout {
    pub rows: u64,
    pub page_size: usize,
    pub align_pages: u64,
}

/// Where one column lives: `pages_per_group` pages per row group from page `first_page`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Region {
    pub field: Field,
    pub first_page: u64,
    pub pages_per_group: u64,
}

/// Most rows a columnar table may state (2^36, about SF 11,000 of lineitem).
pub const MAX_ROWS: u64 = 1 << 36;

impl ColumnarLayout {
    /// Checks the geometry: `page_size` a multiple of 8 in [64, 1 MiB], `align_pages` in [1, 65536].
    pub fn new(rows: u64, page_size: usize, align_pages: u64) -> Result<Self> {
        if !(64..=1 << 20).contains(&page_size) || !page_size.is_multiple_of(MAX_INT_WIDTH) {
            return Err(invalid(format!("columnar page size {page_size} B must be a multiple of 8 in [64, 1 MiB]")));
        }
        if !(1..=MAX_ALIGN_PAGES).contains(&align_pages) {
            return Err(invalid(format!("align_pages {align_pages} must be in [1, {MAX_ALIGN_PAGES}]")));
        }
        // Bounded so that page and byte counts of the whole table cannot overflow (a header from untrusted bytes).
        if rows > MAX_ROWS {
            return Err(invalid(format!("a columnar table of {rows} rows is beyond the {MAX_ROWS} supported")));
        }
        Ok(Self { rows, page_size, align_pages })
    }

    pub fn rows_per_group(&self) -> usize {
        self.page_size / MAX_INT_WIDTH
    }

    pub fn groups(&self) -> u64 {
        self.rows.div_ceil(self.rows_per_group() as u64)
    }

    /// Rows of group `g` (the last group may be short); an error past the table.
    pub fn rows_in_group(&self, g: u64) -> Result<usize> {
        let first = g.checked_mul(self.rows_per_group() as u64).filter(|&f| f < self.rows);
        let first = first.ok_or_else(|| invalid(format!("row group {g} is past the table's {} rows", self.rows)))?;
        Ok((self.rows - first).min(self.rows_per_group() as u64) as usize)
    }

    /// Pages per group of a column.
    pub fn pages_per_group(&self, field: Field) -> u64 {
        (self.rows_per_group() * field.width()).div_ceil(self.page_size) as u64
    }

    /// Every column's region, in record order (page 0 is the header).
    pub fn regions(&self) -> Vec<Region> {
        let mut next = self.align_pages;
        Field::ALL
            .iter()
            .map(|&field| {
                let r = Region { field, first_page: next, pages_per_group: self.pages_per_group(field) };
                next = (next + r.pages_per_group * self.groups()).next_multiple_of(self.align_pages);
                r
            })
            .collect()
    }

    pub fn region(&self, field: Field) -> Region {
        self.regions().into_iter().find(|r| r.field == field).expect("every field has a region")
    }

    /// Pages of the whole table.
    pub fn total_pages(&self) -> u64 {
        let last = *self.regions().last().expect("fields");
        (last.first_page + last.pages_per_group * self.groups()).next_multiple_of(self.align_pages)
    }

    pub fn total_bytes(&self) -> u64 {
        self.total_pages() * self.page_size as u64
    }

    /// The header page.
    pub fn header(&self) -> Vec<u8> {
        let mut h = vec![0u8; self.page_size];
        h[..8].copy_from_slice(HEADER_MAGIC);
        h[8..16].copy_from_slice(&self.rows.to_le_bytes());
        h[16..20].copy_from_slice(&(self.page_size as u32).to_le_bytes());
        h[20..24].copy_from_slice(&(self.align_pages as u32).to_le_bytes());
        h
    }

    /// The layout a table's header page states, checked against the table's length.
    pub fn from_table(table: &[u8]) -> Result<Self> {
        if table.len() < 24 || &table[..8] != HEADER_MAGIC {
            return Err(invalid("not a columnar lineitem table (bad header page)"));
        }
        let u32_at = |i: usize| u32::from_le_bytes(table[i..i + 4].try_into().expect("4 bytes"));
        let rows = u64::from_le_bytes(table[8..16].try_into().expect("8 bytes"));
        let l = Self::new(rows, u32_at(16) as usize, u64::from(u32_at(20)))?;
        l.check_len(table.len())?;
        Ok(l)
    }

    /// Checks that `len` bytes are this table.
    pub fn check_len(&self, len: usize) -> Result<()> {
        if len as u64 != self.total_bytes() {
            return Err(invalid(format!(
                "a columnar table of {} rows in {} B pages (align {}) is {} B, got {len}",
                self.rows,
                self.page_size,
                self.align_pages,
                self.total_bytes()
            )));
        }
        Ok(())
    }

    /// The bytes of column `field` in group `g` (`rows_in_group x width` bytes, no padding).
    pub fn column<'a>(&self, table: &'a [u8], field: Field, g: u64) -> Result<&'a [u8]> {
        let n = self.rows_in_group(g)?;
        let r = self.region(field);
        let start = ((r.first_page + g * r.pages_per_group) * self.page_size as u64) as usize;
        table.get(start..start + n * field.width()).ok_or_else(|| invalid("columnar table is too short"))
    }
}

/// Transposes contiguous 150-byte records into a columnar table of `layout` (whose `rows` must match).
pub fn columnar_from_records(layout: ColumnarLayout, records: &[u8]) -> Result<Vec<u8>> {
    if !records.len().is_multiple_of(RECORD_SIZE) || (records.len() / RECORD_SIZE) as u64 != layout.rows {
        return Err(invalid(format!(
            "{} B are not {} records of {RECORD_SIZE} B",
            records.len(),
            layout.rows
        )));
    }
    let mut out = vec![0u8; layout.total_bytes() as usize];
    out[..layout.page_size].copy_from_slice(&layout.header());
    let rpg = layout.rows_per_group();
    for r in layout.regions() {
        let (off, w) = (r.field.offset(), r.field.width());
        let group_bytes = r.pages_per_group as usize * layout.page_size;
        let base = r.first_page as usize * layout.page_size;
        for (g, rows) in records.chunks(rpg * RECORD_SIZE).enumerate() {
            let dst = &mut out[base + g * group_bytes..];
            for (i, rec) in rows.chunks_exact(RECORD_SIZE).enumerate() {
                dst[i * w..(i + 1) * w].copy_from_slice(&rec[off..off + w]);
            }
        }
    }
    Ok(out)
}

/// Reads value `i` of an integer column's bytes as the row layout's `read_int` does.
#[inline(always)]
pub fn value(col: &[u8], i: usize, kind: FieldKind) -> i64 {
    crate::lineitem::layout::read_int(col, i * kind_width(kind), kind)
}

/// Bytes per value of an integer kind (text: 0).
pub fn kind_width(kind: FieldKind) -> usize {
    match kind {
        FieldKind::I64 | FieldKind::U64 => 8,
        FieldKind::I32 => 4,
        FieldKind::U8 => 1,
        FieldKind::Text => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lineitem::{generate_records, CommentPool, LineitemSpec};

    #[test]
    fn regions_are_aligned_and_columns_round_trip() {
        let records = generate_records(&LineitemSpec::rows(2500).with_comment_pool(CommentPool::Compact)).unwrap();
        let l = ColumnarLayout::new(2500, 8192, 4).unwrap();
        assert_eq!((l.rows_per_group(), l.groups()), (1024, 3));
        assert_eq!(l.pages_per_group(Field::PartKey), 1);
        assert_eq!(l.pages_per_group(Field::Comment), 6); // 1024 x 44 B
        assert!(l.regions().iter().all(|r| r.first_page % 4 == 0));
        let t = columnar_from_records(l, &records).unwrap();
        assert_eq!(t.len() as u64, l.total_bytes());
        for &f in Field::ALL {
            for g in 0..3u64 {
                let col = l.column(&t, f, g).unwrap();
                for (i, v) in col.chunks_exact(f.width()).enumerate() {
                    let rec = &records[(g as usize * 1024 + i) * RECORD_SIZE..][..RECORD_SIZE];
                    assert_eq!(v, f.bytes(rec));
                }
            }
        }
        assert_eq!(l.rows_in_group(2).unwrap(), 2500 - 2048);
        assert!(l.rows_in_group(3).is_err());
        assert_eq!(ColumnarLayout::from_table(&t).unwrap(), l);
        let mut bad = t.clone();
        bad[0] ^= 1;
        assert!(ColumnarLayout::from_table(&bad).is_err());
        assert!(ColumnarLayout::from_table(&t[..t.len() - 8192]).is_err());
    }

    #[test]
    fn bad_geometry_and_lengths_are_errors() {
        assert!(ColumnarLayout::new(10, 8190, 1).is_err());
        assert!(ColumnarLayout::new(10, 32, 1).is_err());
        assert!(ColumnarLayout::new(10, 8192, 0).is_err());
        let l = ColumnarLayout::new(10, 8192, 1).unwrap();
        assert!(columnar_from_records(l, &[0u8; 9 * RECORD_SIZE]).is_err());
        assert!(l.check_len(5).is_err());
        let empty = ColumnarLayout::new(0, 8192, 1).unwrap();
        assert_eq!((empty.groups(), empty.total_pages()), (0, 1));
    }
}
