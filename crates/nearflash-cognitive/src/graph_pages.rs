//! The K-NN graph laid out in flash pages for the GSE. Both layouts store entries of (id: W_id = 32 bits, code:
//! ceil(W_hash / 8) bytes), little-endian:
//! - plain: one record per vertex, `[v, its K neighbours]` (1 + K entries; the paper's "neighborhoods of one vertex
//!   (250 bytes)" plus the vertex itself), records packed in id order, as many per page as fit;
//! - two-hop (Fig. 6): one page per vertex holding `[v, its K neighbours, each neighbour's K neighbours]`
//!   (1 + K + K^2 entries), so one read serves a vertex and all its neighbours' expansions; Eq. 6 bounds it.
//!
//! Pages are produced on demand from the graph (the host holds no 1 GB image); the GSE decodes real page bytes.

use crate::error::{CognitiveError, Result};
use crate::knn::KnnGraph;

/// Which layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GraphLayout {
    Plain,
    TwoHop,
}

impl GraphLayout {
    pub fn parse(s: &str) -> Result<GraphLayout> {
        match s {
            "plain" => Ok(GraphLayout::Plain),
            "two_hop" | "2hop" => Ok(GraphLayout::TwoHop),
            other => Err(CognitiveError::invalid("layout", format!("{other:?}; \"plain\" or \"two_hop\" allowed"))),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            GraphLayout::Plain => "plain",
            GraphLayout::TwoHop => "two_hop",
        }
    }
}

/// One decoded entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub id: u32,
    pub code: u64,
}

/// What reading a laid-out graph needs (the firmware holds no neighbour lists): layout, vertex count, K, code width
/// and page size. Decodes records from page bytes and locates a vertex's page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageFormat {
    pub layout: GraphLayout,
    pub vertices: usize,
    pub k: usize,
    pub code_bytes: usize,
    pub page_size: usize,
}

impl PageFormat {
    /// Checks the sizes (Eq. 6 for two-hop: `K^2 (W_hash + W_id) < S_page`, and the whole record must fit).
    pub fn new(layout: GraphLayout, vertices: usize, k: usize, bits: u32, page_size: usize) -> Result<Self> {
        if !(1..=64).contains(&bits) {
            return Err(CognitiveError::invalid("bits", format!("{bits}; 1 to 64 allowed")));
        }
        if k == 0 || vertices == 0 {
            return Err(CognitiveError::invalid("graph", format!("{vertices} vertices of {k} neighbours; both must be positive")));
        }
        let code_bytes = (bits as usize).div_ceil(8);
        let f = PageFormat { layout, vertices, k, code_bytes, page_size };
        if layout == GraphLayout::TwoHop && k * k * (code_bytes + 4) >= page_size {
            return Err(CognitiveError::NoSpace(format!(
                "Eq. 6: K^2 x (W_hash + W_id) = {} B is not below S_page = {page_size} B (K = {k}, {bits}-bit codes)",
                k * k * (code_bytes + 4)
            )));
        }
        if f.record_bytes() > page_size {
            return Err(CognitiveError::NoSpace(format!("a {}-byte record does not fit a {page_size}-byte page", f.record_bytes())));
        }
        Ok(f)
    }

    pub fn entry_bytes(&self) -> usize {
        4 + self.code_bytes
    }

    /// Entries of one vertex's record.
    pub fn record_entries(&self) -> usize {
        match self.layout {
            GraphLayout::Plain => 1 + self.k,
            GraphLayout::TwoHop => 1 + self.k + self.k * self.k,
        }
    }

    pub fn record_bytes(&self) -> usize {
        self.record_entries() * self.entry_bytes()
    }

    /// Records per page: as many as fit for plain, one for two-hop (the paper aligns V0 to the page start).
    pub fn records_per_page(&self) -> usize {
        match self.layout {
            GraphLayout::Plain => self.page_size / self.record_bytes(),
            GraphLayout::TwoHop => 1,
        }
    }

    /// Pages of the whole graph.
    pub fn pages(&self) -> usize {
        self.vertices.div_ceil(self.records_per_page())
    }

    /// Page index (within the graph region) holding vertex `v`'s record.
    pub fn page_of(&self, v: u32) -> usize {
        v as usize / self.records_per_page()
    }

    /// Decodes vertex `v`'s record from its page's bytes (entries in record order).
    pub fn decode_record(&self, page: &[u8], v: u32) -> Result<Vec<Entry>> {
        if page.len() != self.page_size {
            return Err(CognitiveError::invalid("page", format!("{} bytes; pages are {}", page.len(), self.page_size)));
        }
        if v as usize >= self.vertices {
            return Err(CognitiveError::invalid("vertex", format!("{v}; the graph has {} vertices", self.vertices)));
        }
        let slot = v as usize % self.records_per_page();
        let eb = self.entry_bytes();
        let start = slot * self.record_bytes();
        let rec = &page[start..start + self.record_bytes()];
        let entries: Vec<Entry> = rec
            .chunks_exact(eb)
            .map(|c| {
                let mut code = [0u8; 8];
                code[..self.code_bytes].copy_from_slice(&c[4..]);
                Entry { id: u32::from_le_bytes([c[0], c[1], c[2], c[3]]), code: u64::from_le_bytes(code) }
            })
            .collect();
        if entries[0].id != v {
            return Err(CognitiveError::bad_file("graph page", format!("record slot {slot} holds vertex {}, not {v}", entries[0].id)));
        }
        if let Some(e) = entries.iter().find(|e| e.id as usize >= self.vertices) {
            return Err(CognitiveError::bad_file("graph page", format!("vertex id {} beyond the {} vertices", e.id, self.vertices)));
        }
        Ok(entries)
    }
}

/// The graph, its codes and a layout: addresses and bytes of its pages.
#[derive(Debug, Clone)]
pub struct GraphPages<'a> {
    pub layout: GraphLayout,
    pub graph: &'a KnnGraph,
    pub codes: &'a [u64],
    pub code_bytes: usize,
    pub page_size: usize,
}

impl<'a> GraphPages<'a> {
    /// Checks the sizes (see [`PageFormat::new`]).
    pub fn new(layout: GraphLayout, graph: &'a KnnGraph, codes: &'a [u64], bits: u32, page_size: usize) -> Result<Self> {
        if graph.len() != codes.len() {
            return Err(CognitiveError::invalid("codes", format!("{} codes for a graph of {} vertices", codes.len(), graph.len())));
        }
        let f = PageFormat::new(layout, graph.len(), graph.k, bits, page_size)?;
        Ok(GraphPages { layout, graph, codes, code_bytes: f.code_bytes, page_size })
    }

    /// What reading these pages needs.
    pub fn format(&self) -> PageFormat {
        PageFormat { layout: self.layout, vertices: self.graph.len(), k: self.graph.k, code_bytes: self.code_bytes, page_size: self.page_size }
    }

    pub fn entry_bytes(&self) -> usize {
        self.format().entry_bytes()
    }

    pub fn record_entries(&self) -> usize {
        self.format().record_entries()
    }

    pub fn record_bytes(&self) -> usize {
        self.format().record_bytes()
    }

    pub fn records_per_page(&self) -> usize {
        self.format().records_per_page()
    }

    pub fn pages(&self) -> usize {
        self.format().pages()
    }

    pub fn page_of(&self, v: u32) -> usize {
        self.format().page_of(v)
    }

    fn put(&self, out: &mut Vec<u8>, id: u32) {
        out.extend_from_slice(&id.to_le_bytes());
        out.extend_from_slice(&self.codes[id as usize].to_le_bytes()[..self.code_bytes]);
    }

    /// The bytes of page `page` (zero-padded to the page size).
    pub fn page_bytes(&self, page: usize) -> Result<Vec<u8>> {
        if page >= self.pages() {
            return Err(CognitiveError::invalid("page", format!("{page}; the graph has {} pages", self.pages())));
        }
        let mut out = Vec::with_capacity(self.page_size);
        let rpp = self.records_per_page();
        for v in page * rpp..((page + 1) * rpp).min(self.graph.len()) {
            self.put(&mut out, v as u32);
            for &u in self.graph.of(v) {
                self.put(&mut out, u);
            }
            if self.layout == GraphLayout::TwoHop {
                for &u in self.graph.of(v) {
                    for &w in self.graph.of(u as usize) {
                        self.put(&mut out, w);
                    }
                }
            }
        }
        out.resize(self.page_size, 0);
        Ok(out)
    }

    /// Decodes vertex `v`'s record from its page's bytes.
    pub fn decode_record(&self, page: &[u8], v: u32) -> Result<Vec<Entry>> {
        self.format().decode_record(page, v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knn;

    fn small() -> (KnnGraph, Vec<u64>) {
        let codes: Vec<u64> = (0..300u64).map(|i| (i * 0x9E37_79B9_7F4A) & 0xFFFF_FFFF_FFFF).collect();
        (knn::build(&codes, 48, 25, 1).unwrap(), codes)
    }

    #[test]
    fn paper_sizes() {
        let (g, c) = small();
        let p = GraphPages::new(GraphLayout::Plain, &g, &c, 48, 16384).unwrap();
        assert_eq!(p.entry_bytes(), 10);
        assert_eq!(p.record_bytes(), 260); // the paper's 250-byte neighbourhood + the vertex
        assert_eq!(p.records_per_page(), 63);
        let t = GraphPages::new(GraphLayout::TwoHop, &g, &c, 48, 16384).unwrap();
        assert_eq!(t.record_bytes(), 6510);
        assert_eq!(t.pages(), 300);
        // Eq. 6 refuses 64-bit codes with K = 40 (40^2 x 12 B = 19200 B > 16 KB)
        let g40 = knn::build(&c, 48, 40, 1).unwrap();
        assert!(GraphPages::new(GraphLayout::TwoHop, &g40, &c, 64, 16384).is_err());
    }

    #[test]
    fn records_roundtrip_and_damage_is_caught() {
        let (g, c) = small();
        for layout in [GraphLayout::Plain, GraphLayout::TwoHop] {
            let p = GraphPages::new(layout, &g, &c, 48, 16384).unwrap();
            for v in [0u32, 62, 63, 299] {
                let bytes = p.page_bytes(p.page_of(v)).unwrap();
                let rec = p.decode_record(&bytes, v).unwrap();
                assert_eq!(rec[0], Entry { id: v, code: c[v as usize] });
                assert_eq!(rec[1..=25].iter().map(|e| e.id).collect::<Vec<_>>(), g.of(v as usize));
                assert!(rec.iter().all(|e| e.code == c[e.id as usize]));
                let mut bad = bytes.clone();
                let at = (v as usize % p.records_per_page()) * p.record_bytes();
                bad[at] ^= 1;
                assert!(p.decode_record(&bad, v).is_err());
            }
            assert!(p.page_bytes(p.pages()).is_err());
        }
    }
}
