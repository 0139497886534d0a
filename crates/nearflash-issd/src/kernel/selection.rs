//! The partial and output of selecting kernels (scan's selected/projected rows, grep's matching lines): each Map
//! task emits one segment for its chunk, tagged with the chunk's first page, so Reduce can put segments back in
//! input order whatever order the channels deliver them in.

use super::output::Output;
use super::Chunk;
use super::partial::{Mergeable, Partial};
use crate::codec::{bytes_len, varint_len, Body, Reader, Writer};
use crate::error::{IssdError, Result};
use crate::pages::PageLayout;

/// Items selected from one chunk of `pages` pages starting at `first_page`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Segment {
    pub first_page: u64,
    pub pages: u64,
    /// Items (rows, lines) in `bytes`.
    pub items: u64,
    pub bytes: Vec<u8>,
}

/// Segments of one or more chunks, plus how many items were examined.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selection {
    pub scanned: u64,
    pub segments: Vec<Segment>,
}

/// The selected items of the whole input, in input order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SelectionOutput {
    /// Items (rows, lines) examined.
    pub scanned: u64,
    /// Items selected.
    pub items: u64,
    /// Selected items back to back: fixed-width projected rows, or `\n`-terminated lines.
    pub bytes: Vec<u8>,
}

impl Selection {
    /// One chunk's selection.
    pub fn single(first_page: u64, pages: u64, scanned: u64, items: u64, bytes: Vec<u8>) -> Self {
        Self { scanned, segments: vec![Segment { first_page, pages, items, bytes }] }
    }

    /// The Map of a selecting kernel over `chunk`: `select` appends the chunk's selected items to the buffer it is
    /// given and returns (items examined, items selected).
    pub fn map_chunk(
        layout: PageLayout,
        chunk: Chunk<'_>,
        select: impl FnOnce(&mut Vec<u8>) -> Result<(u64, u64)>,
    ) -> Result<Partial> {
        let pages = layout.page_count(chunk.bytes.len())?;
        let mut bytes = Vec::new();
        let (scanned, items) = select(&mut bytes)?;
        Ok(Partial::Selection(Selection::single(chunk.first_page, pages, scanned, items, bytes)))
    }

    /// The `finish` of a selecting kernel (named `kernel`): the merged selection in input order.
    pub fn finish_partial(kernel: &str, p: Partial) -> Result<Output> {
        match p {
            Partial::Selection(s) => Ok(Output::Selection(s.finish()?)),
            other => Err(other.wrong_kind(kernel)),
        }
    }

    /// Orders segments by page and concatenates them; overlapping chunks (a page mapped twice) are an error.
    pub fn finish(mut self) -> Result<SelectionOutput> {
        self.segments.sort_by_key(|s| s.first_page);
        let mut next_free = 0u64;
        let mut out = SelectionOutput { scanned: self.scanned, ..Default::default() };
        out.bytes.reserve(self.segments.iter().map(|s| s.bytes.len()).sum());
        for s in self.segments.iter().filter(|s| s.pages > 0) {
            if s.first_page < next_free {
                return Err(IssdError::PartialMismatch(format!("page {} was mapped twice", s.first_page)));
            }
            next_free = s.first_page + s.pages;
            out.items += s.items;
            out.bytes.extend_from_slice(&s.bytes);
        }
        Ok(out)
    }
}

impl Mergeable for Selection {
    fn merge(&mut self, mut other: Self) -> Result<()> {
        self.scanned += other.scanned;
        self.segments.append(&mut other.segments);
        Ok(())
    }
}

impl Body for Selection {
    fn body_len(&self) -> usize {
        varint_len(self.scanned)
            + varint_len(self.segments.len() as u64)
            + self
                .segments
                .iter()
                .map(|s| {
                    varint_len(s.first_page) + varint_len(s.pages) + varint_len(s.items) + bytes_len(s.bytes.len())
                })
                .sum::<usize>()
    }
    fn encode_body(&self, w: &mut Writer) {
        w.varint(self.scanned);
        w.varint(self.segments.len() as u64);
        for s in &self.segments {
            w.varint(s.first_page);
            w.varint(s.pages);
            w.varint(s.items);
            w.bytes(&s.bytes);
        }
    }
    fn decode_body(r: &mut Reader<'_>) -> Result<Self> {
        let scanned = r.varint()?;
        let n = r.count(4)?;
        let mut segments = Vec::with_capacity(n);
        for _ in 0..n {
            let (first_page, pages, items) = (r.varint()?, r.varint()?, r.varint()?);
            segments.push(Segment { first_page, pages, items, bytes: r.bytes()?.to_vec() });
        }
        Ok(Self { scanned, segments })
    }
}

impl Body for SelectionOutput {
    fn body_len(&self) -> usize {
        varint_len(self.scanned) + varint_len(self.items) + bytes_len(self.bytes.len())
    }
    fn encode_body(&self, w: &mut Writer) {
        w.varint(self.scanned);
        w.varint(self.items);
        w.bytes(&self.bytes);
    }
    fn decode_body(r: &mut Reader<'_>) -> Result<Self> {
        Ok(Self { scanned: r.varint()?, items: r.varint()?, bytes: r.bytes()?.to_vec() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_come_back_in_page_order() {
        let mut a = Selection::single(4, 2, 10, 1, b"c".to_vec());
        a.merge(Selection::single(0, 2, 10, 2, b"ab".to_vec())).unwrap();
        a.merge(Selection::single(2, 2, 10, 0, vec![])).unwrap();
        let out = a.clone().finish().unwrap();
        assert_eq!(out, SelectionOutput { scanned: 30, items: 3, bytes: b"abc".to_vec() });
        let mut w = Writer::default();
        a.encode_body(&mut w);
        let b = w.into_vec();
        assert_eq!(b.len(), a.body_len());
        assert_eq!(Selection::decode_body(&mut Reader::new(&b)).unwrap(), a);
    }

    #[test]
    fn a_page_mapped_twice_is_an_error() {
        let mut a = Selection::single(0, 3, 1, 0, vec![]);
        a.merge(Selection::single(2, 1, 1, 0, vec![])).unwrap();
        assert!(a.finish().is_err());
    }
}
