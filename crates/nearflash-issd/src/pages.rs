//! The paged layout every iSSD kernel input uses on flash: the input is a run of `page_size`-byte pages (the
//! striping unit the paper's FMCs process one by one, §3.2), each self-describing so a Map task on one channel
//! needs nothing but the page:
//!
//! ```text
//! page := [payload_len: u32 LE][payload: payload_len bytes][zero padding up to page_size]
//! ```
//!
//! * Record data (lineitem rows, points, pixels): the payload is whole fixed-size records; a record never straddles
//!   a page, so a page holds `(page_size - 4) / record_size` records and the slack is padding.
//! * Text: the payload is whole `\n`-terminated lines; a line (hence a word) never straddles a page.
//!
//! An all-zero page (unwritten or trimmed flash) reads as an empty page.

use crate::error::{invalid, malformed, Result};
use memchr::memchr;
use rayon::prelude::*;

/// Bytes of the page header (the payload length).
pub const PAGE_HEADER_BYTES: usize = 4;
/// Smallest page size accepted: room for the header and a few records.
pub const MIN_PAGE_SIZE: usize = 64;
/// Largest page size accepted (the header length field and sane buffers).
pub const MAX_PAGE_SIZE: usize = 1 << 24;

/// The page geometry of a paged input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLayout {
    page_size: usize,
}

impl PageLayout {
    pub fn new(page_size: usize) -> Result<Self> {
        if !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&page_size) {
            return Err(invalid(format!("page size {page_size} B outside [{MIN_PAGE_SIZE}, {MAX_PAGE_SIZE}]")));
        }
        Ok(Self { page_size })
    }

    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// Payload bytes a page can hold.
    pub fn capacity(&self) -> usize {
        self.page_size - PAGE_HEADER_BYTES
    }

    /// Whole records of `record_size` bytes per page.
    pub fn records_per_page(&self, record_size: usize) -> Result<usize> {
        if record_size == 0 || record_size > self.capacity() {
            return Err(invalid(format!(
                "record of {record_size} B does not fit a {} B page payload",
                self.capacity()
            )));
        }
        Ok(self.capacity() / record_size)
    }

    /// Pages needed for `records` records.
    pub fn pages_for_records(&self, records: u64, record_size: usize) -> Result<u64> {
        Ok(records.div_ceil(self.records_per_page(record_size)? as u64))
    }

    /// (page index, byte offset from the start of the paged stream) of record `index`.
    pub fn record_location(&self, index: u64, record_size: usize) -> Result<(u64, u64)> {
        let per = self.records_per_page(record_size)? as u64;
        let page = index / per;
        let offset = page * self.page_size as u64 + (PAGE_HEADER_BYTES as u64) + (index % per) * record_size as u64;
        Ok((page, offset))
    }

    /// Number of pages in `len` bytes; errors unless `len` is a whole number of pages.
    pub fn page_count(&self, len: usize) -> Result<u64> {
        if !len.is_multiple_of(self.page_size) {
            return Err(malformed(format!("{len} B is not a whole number of {} B pages", self.page_size)));
        }
        Ok((len / self.page_size) as u64)
    }

    /// The payload of one page, checked against the header.
    pub fn payload<'a>(&self, page: &'a [u8]) -> Result<&'a [u8]> {
        if page.len() != self.page_size {
            return Err(malformed(format!("page of {} B, layout says {} B", page.len(), self.page_size)));
        }
        let len = u32::from_le_bytes([page[0], page[1], page[2], page[3]]) as usize;
        if len > self.capacity() {
            return Err(malformed(format!("page header claims {len} B, capacity is {} B", self.capacity())));
        }
        Ok(&page[PAGE_HEADER_BYTES..PAGE_HEADER_BYTES + len])
    }

    /// Payloads of the pages of a chunk (a whole number of pages), in order.
    pub fn payloads<'a>(&self, chunk: &'a [u8]) -> Result<impl Iterator<Item = Result<&'a [u8]>> + 'a> {
        self.page_count(chunk.len())?;
        let layout = *self;
        Ok(chunk.chunks_exact(self.page_size).map(move |p| layout.payload(p)))
    }

    /// Payloads that must hold whole records of `record_size` bytes.
    pub fn record_payloads<'a>(
        &self,
        chunk: &'a [u8],
        record_size: usize,
    ) -> Result<impl Iterator<Item = Result<&'a [u8]>> + 'a> {
        self.records_per_page(record_size)?;
        Ok(self.payloads(chunk)?.map(move |p| {
            let p = p?;
            if !p.len().is_multiple_of(record_size) {
                return Err(malformed(format!("payload of {} B is not whole {record_size} B records", p.len())));
            }
            Ok(p)
        }))
    }
}

/// Writes one page: header, payload, zero padding.
fn write_page(page: &mut [u8], payload: &[u8]) {
    page[..PAGE_HEADER_BYTES].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    page[PAGE_HEADER_BYTES..PAGE_HEADER_BYTES + payload.len()].copy_from_slice(payload);
    page[PAGE_HEADER_BYTES + payload.len()..].fill(0);
}

/// Packs contiguous fixed-size records into pages (records never straddle a page; the last page may be partial).
pub fn pack_records(layout: PageLayout, records: &[u8], record_size: usize) -> Result<Vec<u8>> {
    let per = layout.records_per_page(record_size)?;
    if !records.len().is_multiple_of(record_size) {
        return Err(invalid(format!("{} B is not whole {record_size} B records", records.len())));
    }
    let per_page_bytes = per * record_size;
    let pages = records.len().div_ceil(per_page_bytes);
    let mut out = vec![0u8; pages * layout.page_size()];
    out.par_chunks_mut(layout.page_size())
        .zip(records.par_chunks(per_page_bytes))
        .for_each(|(page, recs)| write_page(page, recs));
    Ok(out)
}

/// Packs text into pages of whole lines. Lines end with `\n` (one is added to a last unterminated line); a line
/// longer than a page payload or a NUL byte (reserved for padding) is an error.
pub fn pack_lines(layout: PageLayout, text: &[u8]) -> Result<Vec<u8>> {
    if let Some(i) = memchr(0, text) {
        return Err(invalid(format!("text holds a NUL byte at offset {i}")));
    }
    let cap = layout.capacity();
    let mut out = Vec::with_capacity(text.len() + text.len() / cap * PAGE_HEADER_BYTES + layout.page_size());
    let mut page: Vec<u8> = Vec::with_capacity(cap);
    let flush = |page: &mut Vec<u8>, out: &mut Vec<u8>| {
        let start = out.len();
        out.resize(start + layout.page_size(), 0);
        write_page(&mut out[start..], page);
        page.clear();
    };
    let mut rest = text;
    while !rest.is_empty() {
        let end = memchr(b'\n', rest).map_or(rest.len(), |i| i + 1);
        let (line, tail) = rest.split_at(end);
        let need = line.len() + usize::from(!line.ends_with(b"\n"));
        if need > cap {
            return Err(invalid(format!("a line of {need} B exceeds the {cap} B page payload")));
        }
        if page.len() + need > cap {
            flush(&mut page, &mut out);
        }
        page.extend_from_slice(line);
        if !line.ends_with(b"\n") {
            page.push(b'\n');
        }
        rest = tail;
    }
    if !page.is_empty() {
        flush(&mut page, &mut out);
    }
    Ok(out)
}

/// Concatenated payloads of a paged stream (the logical content, without headers and padding).
pub fn unpack(layout: PageLayout, data: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(data.len());
    for p in layout.payloads(data)? {
        out.extend_from_slice(p?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_helpers_agree_with_packing() {
        let layout = PageLayout::new(8192).unwrap();
        assert_eq!(layout.records_per_page(150).unwrap(), 54);
        assert_eq!(PageLayout::new(16384).unwrap().records_per_page(150).unwrap(), 109);
        let recs: Vec<u8> = (0..150 * 120).map(|i| (i % 251) as u8).collect();
        let packed = pack_records(layout, &recs, 150).unwrap();
        assert_eq!(packed.len(), 3 * 8192);
        assert_eq!(layout.pages_for_records(120, 150).unwrap(), 3);
        for idx in [0u64, 53, 54, 119] {
            let (page, off) = layout.record_location(idx, 150).unwrap();
            assert_eq!(page, idx / 54);
            let o = off as usize;
            assert_eq!(&packed[o..o + 150], &recs[idx as usize * 150..(idx as usize + 1) * 150]);
        }
        assert_eq!(unpack(layout, &packed).unwrap(), recs);
        let sizes: Vec<usize> = layout.payloads(&packed).unwrap().map(|p| p.unwrap().len()).collect();
        assert_eq!(sizes, vec![54 * 150, 54 * 150, 12 * 150]);
    }

    #[test]
    fn lines_never_straddle_pages() {
        let layout = PageLayout::new(64).unwrap();
        let text = b"alpha beta\ngamma delta epsilon zeta eta theta\niota kappa lambda mu nu xi omicron\npi";
        let packed = pack_lines(layout, text).unwrap();
        for p in layout.payloads(&packed).unwrap() {
            let p = p.unwrap();
            assert!(p.ends_with(b"\n"));
        }
        let mut expect = text.to_vec();
        expect.push(b'\n');
        assert_eq!(unpack(layout, &packed).unwrap(), expect);
    }

    #[test]
    fn bad_layouts_and_pages_are_errors() {
        assert!(PageLayout::new(10).is_err());
        let layout = PageLayout::new(64).unwrap();
        assert!(layout.records_per_page(61).is_err());
        assert!(pack_lines(layout, &[b'a'; 70]).is_err());
        assert!(pack_lines(layout, b"a\0b").is_err());
        assert!(layout.page_count(65).is_err());
        let mut page = vec![0u8; 64];
        assert_eq!(layout.payload(&page).unwrap().len(), 0, "zero page is empty");
        page[0] = 61;
        assert!(layout.payload(&page).is_err());
        page[0] = 7;
        assert!(layout.record_payloads(&page, 3).unwrap().next().unwrap().is_err());
    }
}
