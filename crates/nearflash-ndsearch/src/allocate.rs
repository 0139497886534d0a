//! Page accesses of a search trace and batch-wise dynamic allocating (NDSearch Sec. VI-B). An iteration of the
//! lock-step batch search produces (query, vertex) pairs; each needs the page holding the vertex's vector.
//! Without dynamic allocating each query's pairs are served on their own (pages shared only within one query's
//! neighbour list, which reordering makes likely); with it the Allocator groups all pairs of the iteration by LUN,
//! then plane and page, so one page read serves every query that needs it (the pageLocBit marks such shared
//! pages), and the pages of the same row in the LUN's planes go out as one multi-plane read.

use std::collections::BTreeMap;

use crate::luncsr::LunCsr;

/// One distance to compute: query `query` against vertex `vertex`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pair {
    pub query: u32,
    pub vertex: u32,
}

/// One page read and the pairs it serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageGroup {
    pub plane: u32,
    pub page: u32,
    pub pairs: Vec<Pair>,
}

impl PageGroup {
    /// The `<Search Page>` pageLocBit: the page serves more than one query.
    pub fn shared(&self) -> bool {
        self.pairs.windows(2).any(|w| w[0].query != w[1].query)
    }
}

/// One LUN's work in an iteration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LunWork {
    pub lun: u32,
    /// Page groups in (page, plane) order, so a page row's planes are adjacent.
    pub pages: Vec<PageGroup>,
}

impl LunWork {
    /// Multi-plane read operations: one per distinct page row.
    pub fn multiplane_reads(&self) -> usize {
        let mut rows: Vec<u32> = self.pages.iter().map(|p| p.page).collect();
        rows.dedup();
        rows.len()
    }
    pub fn pairs(&self) -> usize {
        self.pages.iter().map(|p| p.pairs.len()).sum()
    }
}

/// Batch-wise dynamic allocating: every pair of the iteration grouped by LUN, page row and plane.
pub fn allocate(pairs: &[Pair], layout: &LunCsr) -> Vec<LunWork> {
    let mut by: BTreeMap<(u32, u32, u32), Vec<Pair>> = BTreeMap::new();
    for &p in pairs {
        let s = layout.slot(p.vertex);
        by.entry((s.lun, s.page, s.plane)).or_default().push(p);
    }
    let mut out: Vec<LunWork> = Vec::new();
    for ((lun, page, plane), mut ps) in by {
        ps.sort_unstable();
        if out.last().is_none_or(|w| w.lun != lun) {
            out.push(LunWork { lun, pages: Vec::new() });
        }
        out.last_mut().unwrap().pages.push(PageGroup { plane, page, pairs: ps });
    }
    out
}

/// Page reads when each query's pairs are served on their own (no sharing across queries): distinct pages per query.
pub fn page_reads_per_query(pairs: &[Pair], layout: &LunCsr) -> usize {
    let mut keys: Vec<(u32, u32, u32, u32)> = pairs
        .iter()
        .map(|p| {
            let s = layout.slot(p.vertex);
            (p.query, s.lun, s.plane, s.page)
        })
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys.len()
}

/// Page reads with dynamic allocating (distinct pages of the whole iteration).
pub fn page_reads_shared(pairs: &[Pair], layout: &LunCsr) -> usize {
    allocate(pairs, layout).iter().map(|w| w.pages.len()).sum()
}

/// Page accesses of a trace (iterations of pairs) over its length: the paper's page access ratio.
pub fn page_access_ratio(iterations: &[Vec<Pair>], layout: &LunCsr, dynamic: bool) -> f64 {
    let len: usize = iterations.iter().map(Vec::len).sum();
    if len == 0 {
        return 0.0;
    }
    let reads: usize = iterations
        .iter()
        .map(|it| if dynamic { page_reads_shared(it, layout) } else { page_reads_per_query(it, layout) })
        .sum();
    reads as f64 / len as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Adjacency;
    use crate::luncsr::Geometry;

    fn layout(n: usize) -> LunCsr {
        let g = Geometry { luns: 2, planes_per_lun: 2, blocks_per_plane: 64, pages_per_block: 4, page_bytes: 64 };
        let mut a = Adjacency::new(1);
        a.resize(n);
        LunCsr::build(&a, 16, g).unwrap() // 4 vectors per page
    }

    #[test]
    fn pairs_are_grouped_by_lun_page_and_plane_with_sharing() {
        let l = layout(64);
        // vertices 0..4 share page (lun 0, plane 0, page 0); 4 is plane 1 of the same row; 8 is LUN 1; 16 is row 1
        let pairs = [(0, 1), (1, 2), (0, 4), (2, 8), (1, 16), (0, 3)].map(|(q, v)| Pair { query: q, vertex: v });
        let w = allocate(&pairs, &l);
        assert_eq!(w.len(), 2);
        assert_eq!(w[0].lun, 0);
        assert_eq!(w[0].pages.len(), 3);
        assert_eq!(w[0].pages[0].pairs.len(), 3);
        assert!(w[0].pages[0].shared());
        assert!(!w[0].pages[1].shared());
        assert_eq!(w[0].multiplane_reads(), 2, "row 0 (two planes) and row 1");
        assert_eq!(w.iter().map(LunWork::pairs).sum::<usize>(), pairs.len());
        assert_eq!(page_reads_shared(&pairs, &l), 4);
        // query 0 reads page 0 once for vertices 1 and 3; query 1 reads it again
        assert_eq!(page_reads_per_query(&pairs, &l), 5);
        let r = page_access_ratio(&[pairs.to_vec()], &l, true);
        assert!((r - 4.0 / 6.0).abs() < 1e-12);
    }
}
