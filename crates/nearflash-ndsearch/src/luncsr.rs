//! LUNCSR (NDSearch Sec. VI-A): the graph as CSR (offset and neighbour arrays) plus the vertex array in the
//! search-in-NAND area and two small arrays that turn a vertex id into a physical page without the FTL: the LUN
//! array (LUN of each vertex) and the BLK array (physical block of each LUN/plane's logical block), which the FTL
//! rewrites when block refresh or GC moves a block.
//!
//! Multi-plane mapping (Sec. VI-A): vertices fill page p of plane 0 of LUN 0, then page p of plane 1, then LUN 1,
//! ..., and only then page p + 1, so the neighbours of a well-ordered vertex sit in pages one multi-plane read
//! fetches, spread over all LUNs. With VPP vectors per page, vertex i (in storage order) lives at
//! slot = i / VPP; plane = slot % P; LUN = (slot / P) % L; logical page = slot / (P L) (digest, [derived]).

use crate::graph::Adjacency;
use crate::NdError;

/// The flash geometry the layout maps onto.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub luns: usize,
    pub planes_per_lun: usize,
    pub blocks_per_plane: usize,
    pub pages_per_block: usize,
    pub page_bytes: usize,
}

impl Geometry {
    /// SearSSD (NDSearch Sec. IV-C): 32 channels x 4 chips x 2 LUNs, 2 planes per LUN, 512 blocks per plane,
    /// 128 pages per block, 16 KiB pages.
    pub const SEARSSD: Geometry =
        Geometry { luns: 256, planes_per_lun: 2, blocks_per_plane: 512, pages_per_block: 128, page_bytes: 16384 };

    pub fn validate(&self) -> Result<(), NdError> {
        let g = self;
        if g.luns == 0 || g.planes_per_lun == 0 || g.blocks_per_plane == 0 || g.pages_per_block == 0 || g.page_bytes == 0 {
            return Err(NdError::Argument(format!("every geometry field must be positive: {g:?}")));
        }
        Ok(())
    }
    /// Pages one plane holds.
    pub fn pages_per_plane(&self) -> usize {
        self.blocks_per_plane * self.pages_per_block
    }
}

/// Where one vertex's vector lives: LUN, plane, logical page within the plane, and position within the page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Slot {
    pub lun: u32,
    pub plane: u32,
    pub page: u32,
    pub offset: u32,
}

/// The multi-plane mapping of storage position `i` with `vpp` vectors per page.
pub fn slot_of(i: usize, vpp: usize, g: &Geometry) -> Slot {
    let slot = i / vpp;
    Slot {
        plane: (slot % g.planes_per_lun) as u32,
        lun: ((slot / g.planes_per_lun) % g.luns) as u32,
        page: (slot / (g.planes_per_lun * g.luns)) as u32,
        offset: (i % vpp) as u32,
    }
}

/// A graph laid out for SearSSD.
#[derive(Clone, Debug, PartialEq)]
pub struct LunCsr {
    pub geometry: Geometry,
    /// Bytes of one stored vector.
    pub vector_bytes: usize,
    /// Vectors per page.
    pub vpp: usize,
    /// `offsets[v] .. offsets[v + 1]` index `neighbours` (vertex ids are storage positions).
    pub offsets: Vec<u64>,
    pub neighbours: Vec<u32>,
    /// LUN of each vertex.
    pub lun: Vec<u16>,
    /// Physical block of logical block `b` of (LUN `l`, plane `p`): `blk[(l * P + p) * blocks_used + b]`.
    pub blk: Vec<u32>,
    /// Logical blocks per plane the vertex array occupies.
    pub blocks_used: usize,
}

impl LunCsr {
    /// Lays out `adj` (vertex ids already in storage order, see `reorder`) with `vector_bytes` per vector.
    pub fn build(adj: &Adjacency, vector_bytes: usize, g: Geometry) -> Result<LunCsr, NdError> {
        g.validate()?;
        if vector_bytes == 0 || vector_bytes > g.page_bytes {
            return Err(NdError::Argument(format!(
                "a {vector_bytes}-byte vector does not fit a {}-byte page",
                g.page_bytes
            )));
        }
        let n = adj.len();
        let vpp = g.page_bytes / vector_bytes;
        let pages = n.div_ceil(vpp).div_ceil(g.planes_per_lun * g.luns);
        let blocks_used = pages.div_ceil(g.pages_per_block);
        if blocks_used > g.blocks_per_plane {
            return Err(NdError::Argument(format!(
                "{n} vectors of {vector_bytes} B need {blocks_used} blocks per plane, the device has {}",
                g.blocks_per_plane
            )));
        }
        let mut offsets = Vec::with_capacity(n + 1);
        let mut neighbours = Vec::with_capacity(adj.edges());
        offsets.push(0);
        for v in 0..n as u32 {
            adj.for_each(v, |u| neighbours.push(u));
            offsets.push(neighbours.len() as u64);
        }
        let lun = (0..n).map(|i| slot_of(i, vpp, &g).lun as u16).collect();
        let planes = g.luns * g.planes_per_lun;
        let blk = (0..planes).flat_map(|_| 0..blocks_used as u32).collect();
        Ok(LunCsr { geometry: g, vector_bytes, vpp, offsets, neighbours, lun, blk, blocks_used })
    }

    pub fn len(&self) -> usize {
        self.lun.len()
    }
    pub fn is_empty(&self) -> bool {
        self.lun.is_empty()
    }
    /// Neighbours of `v` (the NBR fetcher's read, after the OFS fetcher's two offsets).
    /// The longest neighbour list.
    pub fn max_degree(&self) -> usize {
        self.offsets.windows(2).map(|w| (w[1] - w[0]) as usize).max().unwrap_or(0)
    }

    pub fn neighbours_of(&self, v: u32) -> &[u32] {
        let (a, b) = (self.offsets[v as usize] as usize, self.offsets[v as usize + 1] as usize);
        &self.neighbours[a..b]
    }
    /// The slot of vertex `v`.
    pub fn slot(&self, v: u32) -> Slot {
        slot_of(v as usize, self.vpp, &self.geometry)
    }
    /// Physical address of `v`'s page as the Allocator builds it: (LUN, plane, physical block, page in block).
    /// The LUN comes from the LUN array, the block from the BLK array; no FTL translation.
    pub fn physical(&self, v: u32) -> (u32, u32, u32, u32) {
        let s = self.slot(v);
        let lun = self.lun[v as usize] as u32;
        let ppb = self.geometry.pages_per_block as u32;
        let logical_block = s.page / ppb;
        let idx = (lun as usize * self.geometry.planes_per_lun + s.plane as usize) * self.blocks_used + logical_block as usize;
        (lun, s.plane, self.blk[idx], s.page % ppb)
    }
    /// Block refresh / GC moved logical block `logical` of (`lun`, `plane`) to physical block `to`.
    pub fn remap_block(&mut self, lun: u32, plane: u32, logical: u32, to: u32) -> Result<(), NdError> {
        let g = &self.geometry;
        if lun as usize >= g.luns || plane as usize >= g.planes_per_lun || logical as usize >= self.blocks_used {
            return Err(NdError::Argument(format!("no logical block {logical} of LUN {lun} plane {plane}")));
        }
        if to as usize >= g.blocks_per_plane {
            return Err(NdError::Argument(format!("physical block {to} beyond {} per plane", g.blocks_per_plane)));
        }
        let idx = (lun as usize * g.planes_per_lun + plane as usize) * self.blocks_used + logical as usize;
        self.blk[idx] = to;
        Ok(())
    }
    /// Bytes of the DRAM-resident arrays (offset, neighbour, LUN, BLK).
    pub fn index_bytes(&self) -> usize {
        self.offsets.len() * 8 + self.neighbours.len() * 4 + self.lun.len() * 2 + self.blk.len() * 4
    }
    /// Fraction of each page the [vector | R neighbour ids] layout of DiskANN would waste with degree `r` and
    /// `page` bytes (the paper's >= 46.9% for R = 32, 128 B vectors, 4 KiB pages).
    pub fn standard_layout_waste(vector_bytes: usize, r: usize, page: usize) -> f64 {
        let node = vector_bytes + 4 * r + 4;
        let per_page = page / node;
        if per_page == 0 {
            return 1.0;
        }
        1.0 - (per_page * vector_bytes) as f64 / page as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_plane_mapping_fills_a_page_row_across_planes_then_luns() {
        let g = Geometry { luns: 3, planes_per_lun: 2, blocks_per_plane: 4, pages_per_block: 2, page_bytes: 64 };
        // 16-byte vectors: 4 per page
        let s: Vec<Slot> = (0..30).map(|i| slot_of(i, 4, &g)).collect();
        assert_eq!(s[0], Slot { lun: 0, plane: 0, page: 0, offset: 0 });
        assert_eq!(s[3], Slot { lun: 0, plane: 0, page: 0, offset: 3 });
        assert_eq!(s[4], Slot { lun: 0, plane: 1, page: 0, offset: 0 });
        assert_eq!(s[8], Slot { lun: 1, plane: 0, page: 0, offset: 0 });
        assert_eq!(s[24], Slot { lun: 0, plane: 0, page: 1, offset: 0 });
    }

    #[test]
    fn physical_addresses_follow_the_blk_array() {
        let g = Geometry { luns: 2, planes_per_lun: 2, blocks_per_plane: 8, pages_per_block: 2, page_bytes: 32 };
        let mut adj = Adjacency::new(2);
        adj.resize(40);
        for v in 0..40u32 {
            adj.set(v, &[(v + 1) % 40, (v + 7) % 40]);
        }
        let mut l = LunCsr::build(&adj, 16, g).unwrap();
        assert_eq!(l.vpp, 2);
        assert_eq!(l.neighbours_of(39), &[0, 6]);
        // vertex 33: slot 16 -> plane 0, LUN 0, logical page 4 -> logical block 2, page 0
        assert_eq!(l.physical(33), (0, 0, 2, 0));
        l.remap_block(0, 0, 2, 7).unwrap();
        assert_eq!(l.physical(33), (0, 0, 7, 0));
        assert!(l.remap_block(0, 0, 9, 1).is_err());
        assert!(l.remap_block(0, 0, 2, 8).is_err());
        // too many vectors for the device
        let tiny = Geometry { blocks_per_plane: 1, ..g };
        assert!(LunCsr::build(&adj, 16, tiny).is_err());
        assert!(LunCsr::build(&adj, 33, g).is_err());
    }

    #[test]
    fn the_papers_page_waste_figure() {
        // R = 32, 128-byte vectors, 4 KiB pages: 15 nodes of 260 B per page -> 1920 B of vectors, 53% wasted
        let w = LunCsr::standard_layout_waste(128, 32, 4096);
        assert!(w >= 0.469, "{w}");
    }
}
