//! The firmware's table directory: which embedding tables live where on the device, so that config processing
//! can map ids to flash pages and reject ids beyond a table.
//!
//! The artifact's firmware knows nothing about tables beyond the start LBA in each command (rows are packed from
//! there, any id is accepted). Here the host registers each table once with a vendor command carrying a
//! [`TableDescriptor`] (64 bytes at the start of a 4 KiB data block), and the firmware validates configs against
//! it. A table's rows are either **stored** (the bytes on flash are the table) or **generated**: the region is
//! mapped (flash timing is real) but holds no data, and the firmware computes each row it extracts from the
//! table's seed ([`crate::rowgen`]) - how RM2's 8 GB of tables run on a laptop. Both paths read and charge the
//! same flash pages.

use crate::layout::{Placement, TableLayout};
use crate::ndp_command::NdpFault;
use crate::rowgen::GeneratedTable;
use std::collections::BTreeMap;

/// Descriptor size, bytes.
pub const DESCRIPTOR_BYTES: usize = 64;
const MAGIC: &[u8; 8] = b"RSSDTBL1";

/// Where a table's row values come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowData {
    /// The device stores the table's bytes.
    Stored,
    /// Rows are computed from `seed` (the region is mapped but stores nothing).
    Generated { seed: u64 },
}

/// One registered table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TableDescriptor {
    /// Table id (the SSD cache's key and the config's tableID).
    pub table_id: u32,
    pub layout: TableLayout,
    pub data: RowData,
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from(u32_at(b, o)) | (u64::from(u32_at(b, o + 4)) << 32)
}

impl TableDescriptor {
    /// The descriptor bytes: magic, table id, placement, start LBA, rows, dim, attribute bytes, source, the int8
    /// scale (f32 bits at 44, 0 for fp32 / fp16), seed.
    pub fn encode(&self) -> [u8; DESCRIPTOR_BYTES] {
        let mut b = [0u8; DESCRIPTOR_BYTES];
        b[..8].copy_from_slice(MAGIC);
        let l = &self.layout;
        let placement = match l.placement() {
            Placement::Packed => 0u32,
            Placement::OneRowPerPage => 1,
        };
        let (source, seed) = match self.data {
            RowData::Stored => (0u32, 0u64),
            RowData::Generated { seed } => (1, seed),
        };
        b[8..12].copy_from_slice(&self.table_id.to_le_bytes());
        b[12..16].copy_from_slice(&placement.to_le_bytes());
        b[16..24].copy_from_slice(&l.start_lba().to_le_bytes());
        b[24..32].copy_from_slice(&l.rows().to_le_bytes());
        b[32..36].copy_from_slice(&l.dim().to_le_bytes());
        b[36..40].copy_from_slice(&l.attribute_bytes().to_le_bytes());
        b[40..44].copy_from_slice(&source.to_le_bytes());
        b[44..48].copy_from_slice(&l.format().map_or(0.0, |f| f.scale()).to_bits().to_le_bytes());
        b[48..56].copy_from_slice(&seed.to_le_bytes());
        b
    }

    /// Parses a descriptor for a device of `lba_bytes` blocks and `page_bytes` flash pages; a refusal says which
    /// descriptor field is wrong and what it may hold.
    pub fn decode(bytes: &[u8], lba_bytes: u32, page_bytes: u32) -> Result<Self, BadTable> {
        let bad = |why: String| Err(BadTable(why));
        if bytes.len() < DESCRIPTOR_BYTES {
            return bad(format!("table descriptor of {} bytes: expected at least {DESCRIPTOR_BYTES}", bytes.len()));
        }
        if &bytes[..8] != MAGIC {
            return bad(format!("table descriptor bytes 0..8 are not the magic {:?}", String::from_utf8_lossy(MAGIC)));
        }
        let placement = match u32_at(bytes, 12) {
            0 => Placement::Packed,
            1 => Placement::OneRowPerPage,
            p => return bad(format!("placement (descriptor bytes 12..16) = {p}: expected 0 (packed) or 1 (one row per page)")),
        };
        // fp32, fp16 or int8 (crate::quant)
        let attribute = u32_at(bytes, 36);
        if !matches!(attribute, 1 | 2 | 4) {
            return bad(format!("attribute size (descriptor bytes 36..40) = {attribute}: expected 4 (fp32), 2 (fp16) or 1 (int8)"));
        }
        let layout = TableLayout::new(
            u64_at(bytes, 16),
            u64_at(bytes, 24),
            u32_at(bytes, 32),
            u32_at(bytes, 36),
            lba_bytes,
            page_bytes,
            placement,
        )
        .map_err(|e| BadTable(format!("table layout (descriptor bytes 16..40): {e}")))?;
        let data = match u32_at(bytes, 40) {
            0 => RowData::Stored,
            1 => RowData::Generated { seed: u64_at(bytes, 48) },
            s => return bad(format!("row source (descriptor bytes 40..44) = {s}: expected 0 (stored) or 1 (generated)")),
        };
        let scale = u32_at(bytes, 44);
        let layout = if attribute == 1 {
            layout.with_int8_scale(f32::from_bits(scale)).map_err(|e| BadTable(format!("int8 scale (descriptor bytes 44..48): {e}")))?
        } else if scale == 0 {
            layout
        } else {
            return bad(format!("int8 scale (descriptor bytes 44..48) = {}: expected 0 for {attribute}-B elements", f32::from_bits(scale)));
        };
        if layout.rows() == 0 || layout.rows() > u64::from(u32::MAX) {
            // ids travel as u32 in configs
            return bad(format!("rows (descriptor bytes 24..32) = {}: expected 1..={}", layout.rows(), u32::MAX));
        }
        Ok(Self { table_id: u32_at(bytes, 8), layout, data })
    }

    /// The generator of a generated table.
    pub fn generator(&self) -> Option<GeneratedTable> {
        match self.data {
            RowData::Stored => None,
            RowData::Generated { seed } => {
                let g = GeneratedTable::new(seed, self.table_id, self.layout.rows() as usize, self.layout.dim() as usize);
                Some(g.ok()?.with_format(self.layout.format().ok()?))
            }
        }
    }
}

/// A table descriptor or registration the firmware refuses ([`NdpFault::BadTable`]), with the reason in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadTable(pub String);

impl From<BadTable> for NdpFault {
    fn from(_: BadTable) -> NdpFault {
        NdpFault::BadTable
    }
}

impl std::fmt::Display for BadTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Registered tables by start LBA.
#[derive(Debug, Clone, Default)]
pub struct TableDirectory {
    by_start: BTreeMap<u64, TableDescriptor>,
}

impl TableDirectory {
    /// Registers (or re-registers, same start) a table of a namespace of `lbas` blocks; table starts must be
    /// multiples of the request modulus, extents inside the namespace and disjoint, table ids distinct.
    pub fn register(&mut self, d: TableDescriptor, lbas: u64, modulus: u64) -> Result<(), BadTable> {
        let l = &d.layout;
        if modulus == 0 || !l.start_lba().is_multiple_of(modulus) {
            return Err(BadTable(format!("table start LBA {} is not a multiple of the request modulus {modulus}", l.start_lba())));
        }
        if l.end_lba() > lbas {
            return Err(BadTable(format!("table LBAs {}..{} end past the namespace's {lbas} blocks", l.start_lba(), l.end_lba())));
        }
        for (&start, other) in &self.by_start {
            if start == l.start_lba() {
                continue;
            }
            if start < l.end_lba() && l.start_lba() < other.layout.end_lba() {
                let why = format!("table LBAs {}..{} overlap table {} at LBAs {start}..{}", l.start_lba(), l.end_lba(), other.table_id, other.layout.end_lba());
                return Err(BadTable(why));
            }
            if other.table_id == d.table_id {
                return Err(BadTable(format!("table id {} is already registered at LBA {start}", d.table_id)));
            }
        }
        self.by_start.insert(l.start_lba(), d);
        Ok(())
    }

    /// The table starting at `start_lba`.
    pub fn get(&self, start_lba: u64) -> Option<&TableDescriptor> {
        self.by_start.get(&start_lba)
    }

    /// The rows stored in LBAs `[first, first + n)`: (table id, row range) per registered table overlapping it.
    /// Whole flash pages count (a row shares its page with its neighbours), so the ranges may include a few rows
    /// beside the LBAs, never miss one.
    pub fn rows_in_lbas(&self, first: u64, n: u64) -> Vec<(u32, std::ops::Range<u64>)> {
        let end = first.saturating_add(n);
        let mut out = Vec::new();
        for d in self.by_start.values() {
            let l = &d.layout;
            let (a, b) = (first.max(l.start_lba()), end.min(l.end_lba()));
            if a >= b {
                continue;
            }
            let per = l.lbas_per_page();
            let (p0, p1) = ((a - l.start_lba()) / per, (b - 1 - l.start_lba()) / per);
            let rows = l.rows_on_page(p0).start..l.rows_on_page(p1).end;
            if !rows.is_empty() {
                out.push((d.table_id, rows));
            }
        }
        out
    }

    /// Registered tables.
    pub fn len(&self) -> usize {
        self.by_start.len()
    }

    /// No tables.
    pub fn is_empty(&self) -> bool {
        self.by_start.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc(id: u32, start: u64, rows: u64, data: RowData) -> TableDescriptor {
        TableDescriptor { table_id: id, layout: TableLayout::fp32(start, rows, 32, Placement::Packed).unwrap(), data }
    }

    #[test]
    fn descriptors_round_trip() {
        for d in [desc(3, 5000, 1000, RowData::Stored), desc(7, 0, 1 << 20, RowData::Generated { seed: 99 })] {
            let mut block = vec![0u8; 4096];
            block[..DESCRIPTOR_BYTES].copy_from_slice(&d.encode());
            assert_eq!(TableDescriptor::decode(&block, 4096, 16384).unwrap(), d);
        }
        let one = TableDescriptor {
            table_id: 1,
            layout: TableLayout::fp32(8, 10, 48, Placement::OneRowPerPage).unwrap(),
            data: RowData::Stored,
        };
        assert_eq!(TableDescriptor::decode(&one.encode(), 4096, 16384).unwrap(), one);
        let mut bad = desc(1, 0, 10, RowData::Stored).encode();
        bad[0] = b'X';
        assert!(TableDescriptor::decode(&bad, 4096, 16384).unwrap_err().0.contains("magic"));
        assert!(TableDescriptor::decode(&[0; 10], 4096, 16384).is_err());
        let mut odd = desc(1, 0, 10, RowData::Stored).encode();
        odd[32..36].copy_from_slice(&48u32.to_le_bytes()); // packed 192-B rows straddle pages
        assert!(TableDescriptor::decode(&odd, 4096, 16384).is_err());
    }

    #[test]
    fn quantised_descriptors_carry_their_format() {
        let l = |bytes| TableLayout::new(0, 1000, 32, bytes, 4096, 16384, Placement::Packed).unwrap();
        let i8 = TableDescriptor { table_id: 2, layout: l(1).with_int8_scale(0.25).unwrap(), data: RowData::Generated { seed: 4 } };
        let f16 = TableDescriptor { table_id: 3, layout: l(2), data: RowData::Stored };
        for d in [i8, f16] {
            let back = TableDescriptor::decode(&d.encode(), 4096, 16384).unwrap();
            assert_eq!(back, d);
            assert_eq!(back.layout.format(), d.layout.format());
        }
        assert_eq!(i8.generator().unwrap().with_format(crate::quant::ElementFormat::F32).gather(&[1]).unwrap().len(), 32);
        let mut no_scale = i8.encode();
        no_scale[44..48].fill(0);
        assert!(TableDescriptor::decode(&no_scale, 4096, 16384).unwrap_err().0.contains("int8 scale (descriptor bytes 44..48)"));
        let mut scaled_f16 = f16.encode();
        scaled_f16[44..48].copy_from_slice(&1.0f32.to_bits().to_le_bytes());
        assert!(TableDescriptor::decode(&scaled_f16, 4096, 16384).unwrap_err().0.contains("expected 0 for 2-B elements"));
        let mut three = f16.encode();
        three[36..40].copy_from_slice(&3u32.to_le_bytes());
        assert!(TableDescriptor::decode(&three, 4096, 16384).unwrap_err().0.contains("expected 4 (fp32), 2 (fp16) or 1 (int8)"));
    }

    #[test]
    fn directory_rules() {
        let mut dir = TableDirectory::default();
        dir.register(desc(0, 0, 1000, RowData::Stored), 1 << 20, 1000).unwrap();
        assert_eq!(dir.get(0).unwrap().table_id, 0);
        // 1000 rows of 128 B = 8 pages = 32 LBAs: the next table may start at 1000.
        dir.register(desc(1, 1000, 1000, RowData::Stored), 1 << 20, 1000).unwrap();
        assert!(dir.register(desc(2, 500, 10, RowData::Stored), 1 << 20, 1000).unwrap_err().0.contains("not a multiple of the request modulus 1000"));
        assert!(dir.register(desc(1, 2000, 10, RowData::Stored), 1 << 20, 1000).unwrap_err().0.contains("table id 1 is already registered"));
        assert_eq!(NdpFault::from(dir.register(desc(2, 0, 100_000, RowData::Stored), 1 << 20, 1000).unwrap_err()), NdpFault::BadTable);
        assert!(dir.register(desc(3, 1 << 20, 10, RowData::Stored), 1 << 20, 1000).is_err());
        dir.register(desc(0, 0, 10, RowData::Generated { seed: 1 }), 1 << 20, 1000).unwrap(); // re-register
        assert_eq!(dir.len(), 2);
        assert!(dir.get(0).unwrap().generator().is_some());
    }

    #[test]
    fn rows_in_lbas_covers_whole_pages_of_each_overlapping_table() {
        let mut dir = TableDirectory::default();
        // 128-B rows: 128 rows per 16 KiB page, 4 LBAs per page; 1000 rows = 8 pages = LBAs [0, 32).
        dir.register(desc(0, 0, 1000, RowData::Stored), 1 << 20, 1000).unwrap();
        dir.register(desc(5, 1000, 300, RowData::Stored), 1 << 20, 1000).unwrap();
        assert_eq!(dir.rows_in_lbas(0, 1), vec![(0, 0..128)]);
        assert_eq!(dir.rows_in_lbas(5, 4), vec![(0, 128..384)], "LBAs 5..9 touch pages 1 and 2");
        assert_eq!(dir.rows_in_lbas(28, 4), vec![(0, 896..1000)], "the last page is partly filled");
        assert_eq!(dir.rows_in_lbas(32, 968), vec![], "between the tables");
        assert_eq!(dir.rows_in_lbas(30, 974), vec![(0, 896..1000), (5, 0..128)]);
        assert_eq!(dir.rows_in_lbas(30, 975), vec![(0, 896..1000), (5, 0..256)]);
        assert_eq!(dir.rows_in_lbas(0, u64::MAX), vec![(0, 0..1000), (5, 0..300)]);
        assert_eq!(dir.rows_in_lbas(u64::MAX - 1, 5), vec![]);
    }
}
