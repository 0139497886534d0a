//! The block table: state, valid-sector count, wear and write progress of every block; per-plane free pools
//! (lowest erase count first, for dynamic wear levelling) and greedy victim selection.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum BlockState {
    #[default]
    Free = 0,
    Open = 1,
    Full = 2,
    /// Set aside for firmware extensions (`ftl.ext_reserved_blocks`): never allocated, collected or mapped.
    Reserved = 3,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlockInfo {
    pub state: BlockState,
    pub erase_count: u32,
    /// Sectors in the block that the mapping table points at.
    pub valid: u32,
    /// Pages programmed (the write pointer).
    pub pages_written: u32,
}

/// Bytes of one serialized block entry in a checkpoint.
pub const ENTRY_BYTES: usize = 16;

pub struct BlockTable {
    pub info: Vec<BlockInfo>,
    free: Vec<BinaryHeap<Reverse<(u32, u32)>>>,
    blocks_per_plane: u32,
}

impl BlockTable {
    /// A table of `planes x blocks_per_plane` erased blocks.
    pub fn new(planes: u32, blocks_per_plane: u32) -> Self {
        let info = vec![BlockInfo::default(); (planes * blocks_per_plane) as usize];
        let mut t = BlockTable { info, free: Vec::new(), blocks_per_plane };
        t.rebuild_free_pools();
        t
    }

    /// Marks the last `per_plane` blocks of every plane reserved for extensions (a fresh table).
    pub fn reserve_last(&mut self, per_plane: u32) {
        for (id, b) in self.info.iter_mut().enumerate() {
            if id as u32 % self.blocks_per_plane >= self.blocks_per_plane - per_plane {
                b.state = BlockState::Reserved;
            }
        }
        self.rebuild_free_pools();
    }

    /// Recomputes the free pools from the block states (after loading or recovery).
    pub fn rebuild_free_pools(&mut self) {
        let planes = self.info.len() as u32 / self.blocks_per_plane;
        self.free = (0..planes).map(|_| BinaryHeap::new()).collect();
        for (id, b) in self.info.iter().enumerate() {
            if b.state == BlockState::Free {
                let plane = id as u32 / self.blocks_per_plane;
                self.free[plane as usize].push(Reverse((b.erase_count, id as u32)));
            }
        }
    }

    pub fn free_blocks(&self, plane: u32) -> u32 {
        self.free[plane as usize].len() as u32
    }

    /// Takes the least-worn free block of `plane` and opens it.
    pub fn open_free(&mut self, plane: u32) -> Option<u32> {
        self.open_free_erased(plane, |_| None)
    }

    /// Takes the least-worn free block of `plane` whose erase has ended (`owed(id)` is None) and opens it; if every
    /// free block still owes its erase, the one whose erase was issued first (the least `owed(id)`, the order GC
    /// issued them in), as a real FTL whose writes wait for the first free block.
    pub fn open_free_erased(&mut self, plane: u32, owed: impl Fn(u32) -> Option<u64>) -> Option<u32> {
        let pool = &mut self.free[plane as usize];
        let mut skipped: Vec<Reverse<(u32, u32)>> = Vec::new();
        let id = loop {
            match pool.pop() {
                Some(Reverse((w, id))) if owed(id).is_some() => skipped.push(Reverse((w, id))),
                Some(Reverse((_, id))) => break Some(id),
                None => break None,
            }
        };
        let id = match id {
            Some(id) => id,
            None => {
                let first = skipped.iter().enumerate().min_by_key(|(_, Reverse((_, id)))| (owed(*id), *id))?.0;
                skipped.swap_remove(first).0 .1
            }
        };
        pool.extend(skipped);
        let b = &mut self.info[id as usize];
        debug_assert_eq!(b.state, BlockState::Free);
        b.state = BlockState::Open;
        b.pages_written = 0;
        b.valid = 0;
        Some(id)
    }

    /// Marks an erased block free again.
    pub fn erased(&mut self, id: u32) {
        let plane = id / self.blocks_per_plane;
        let b = &mut self.info[id as usize];
        b.state = BlockState::Free;
        b.erase_count += 1;
        b.valid = 0;
        b.pages_written = 0;
        self.free[plane as usize].push(Reverse((b.erase_count, id)));
    }

    /// The full blocks of `plane` with something to reclaim (fewer than `capacity_sectors` valid), by id.
    pub fn reclaimable(&self, plane: u32, capacity_sectors: u32) -> impl Iterator<Item = u32> + '_ {
        let first = plane * self.blocks_per_plane;
        (first..first + self.blocks_per_plane).filter(move |&id| {
            let b = &self.info[id as usize];
            b.state == BlockState::Full && b.valid < capacity_sectors
        })
    }

    /// Greedy victim: the full block of `plane` with the fewest valid sectors (ties: lowest id), if it has any
    /// invalid sector to reclaim.
    pub fn victim(&self, plane: u32, capacity_sectors: u32) -> Option<u32> {
        let first = plane * self.blocks_per_plane;
        let mut best: Option<(u32, u32)> = None;
        for id in first..first + self.blocks_per_plane {
            let b = &self.info[id as usize];
            if b.state == BlockState::Full && b.valid < capacity_sectors && best.is_none_or(|(_, v)| b.valid < v) {
                best = Some((id, b.valid));
                if b.valid == 0 {
                    break;
                }
            }
        }
        best.map(|(id, _)| id)
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.info.len() * ENTRY_BYTES);
        for b in &self.info {
            out.extend_from_slice(&[b.state as u8, 0, 0, 0]);
            out.extend_from_slice(&b.erase_count.to_le_bytes());
            out.extend_from_slice(&b.valid.to_le_bytes());
            out.extend_from_slice(&b.pages_written.to_le_bytes());
        }
        out
    }

    /// Restores a table serialized by `to_bytes`; `None` if the bytes do not fit this geometry.
    pub fn from_bytes(bytes: &[u8], planes: u32, blocks_per_plane: u32) -> Option<Self> {
        let n = (planes * blocks_per_plane) as usize;
        if bytes.len() != n * ENTRY_BYTES {
            return None;
        }
        let rd = |c: &[u8], o: usize| u32::from_le_bytes(c[o..o + 4].try_into().expect("4 bytes"));
        let mut info = Vec::with_capacity(n);
        for c in bytes.chunks_exact(ENTRY_BYTES) {
            let state = match c[0] {
                0 => BlockState::Free,
                1 => BlockState::Open,
                2 => BlockState::Full,
                3 => BlockState::Reserved,
                _ => return None,
            };
            info.push(BlockInfo { state, erase_count: rd(c, 4), valid: rd(c, 8), pages_written: rd(c, 12) });
        }
        let mut t = BlockTable { info, free: Vec::new(), blocks_per_plane };
        t.rebuild_free_pools();
        Some(t)
    }

    /// Wear statistics: (min, mean, max) erase count.
    pub fn wear(&self) -> (u32, f64, u32) {
        let min = self.info.iter().map(|b| b.erase_count).min().unwrap_or(0);
        let max = self.info.iter().map(|b| b.erase_count).max().unwrap_or(0);
        let mean = self.info.iter().map(|b| f64::from(b.erase_count)).sum::<f64>() / self.info.len().max(1) as f64;
        (min, mean, max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_prefers_least_worn_and_victim_is_greedy() {
        let mut t = BlockTable::new(1, 4);
        let a = t.open_free(0).unwrap();
        t.info[a as usize].state = BlockState::Full;
        t.erased(a); // a now has erase count 1
        let b = t.open_free(0).unwrap();
        assert_ne!(a, b, "the worn block is taken last");
        for (id, valid) in [(0u32, 5u32), (1, 2), (2, 9)] {
            t.info[id as usize] = BlockInfo { state: BlockState::Full, erase_count: 0, valid, pages_written: 4 };
        }
        assert_eq!(t.victim(0, 16), Some(1));
        assert_eq!(t.victim(0, 2), None, "fully valid blocks are never victims");
        let restored = BlockTable::from_bytes(&t.to_bytes(), 1, 4).unwrap();
        assert_eq!(restored.info, t.info);
        assert_eq!(restored.free_blocks(0), 1, "only block 3 is free");
    }

    #[test]
    fn an_erased_block_is_opened_before_one_owing_its_erase() {
        let mut t = BlockTable::new(1, 4);
        // Blocks 0 and 1 owe their erases (issued second and first); 2 and 3 are erased.
        let owed = |id: u32| [Some(2), Some(1), None, None][id as usize];
        assert_eq!(t.open_free_erased(0, owed), Some(2), "the least-worn erased block");
        assert_eq!(t.open_free_erased(0, owed), Some(3));
        assert_eq!(t.open_free_erased(0, owed), Some(1), "none erased: the erase issued first");
        assert_eq!(t.open_free_erased(0, owed), Some(0));
        assert_eq!(t.open_free_erased(0, owed), None);
    }
}
