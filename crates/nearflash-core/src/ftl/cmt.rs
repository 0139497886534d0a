//! The cached mapping table of a demand-paged FTL (DFTL-style).
//!
//! The full map lives in flash as translation pages of `page_size / 4` entries; controller DRAM caches
//! `cmt_size / page_size` of them, least recently used first out. A miss costs a flash read of the translation
//! page; evicting a dirty one costs a program. (The map's contents are always kept exactly in the image's
//! mapping file; this module decides only what the lookups cost.)

use std::collections::HashMap;

const NIL: u32 = u32::MAX;

struct Slot {
    tpage: u64,
    dirty: bool,
    prev: u32,
    next: u32,
}

/// What a mapping access costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CmtAccess {
    /// Translation page to read from flash (miss).
    pub load: Option<u64>,
    /// Dirty translation page to write back (eviction).
    pub write_back: Option<u64>,
}

#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct CmtStats {
    pub hits: u64,
    pub misses: u64,
    pub write_backs: u64,
}

pub struct Cmt {
    entries_per_tpage: u64,
    capacity: usize,
    slots: Vec<Slot>,
    index: HashMap<u64, u32>,
    head: u32, // most recent
    tail: u32, // least recent
    pub stats: CmtStats,
}

impl Cmt {
    pub fn new(capacity_tpages: usize, entries_per_tpage: u64) -> Self {
        Cmt {
            entries_per_tpage: entries_per_tpage.max(1),
            capacity: capacity_tpages.max(1),
            slots: Vec::new(),
            index: HashMap::new(),
            head: NIL,
            tail: NIL,
            stats: CmtStats::default(),
        }
    }

    pub fn tpage_of(&self, lpn: u32) -> u64 {
        u64::from(lpn) / self.entries_per_tpage
    }

    /// Records an access to `lpn`'s entry (`dirty` for updates).
    pub fn access(&mut self, lpn: u32, dirty: bool) -> CmtAccess {
        let tp = self.tpage_of(lpn);
        if let Some(&i) = self.index.get(&tp) {
            self.stats.hits += 1;
            self.slots[i as usize].dirty |= dirty;
            self.unlink(i);
            self.push_front(i);
            return CmtAccess::default();
        }
        self.stats.misses += 1;
        let mut out = CmtAccess { load: Some(tp), write_back: None };
        let i = if self.slots.len() < self.capacity {
            self.slots.push(Slot { tpage: tp, dirty, prev: NIL, next: NIL });
            self.slots.len() as u32 - 1
        } else {
            let victim = self.tail;
            self.unlink(victim);
            let s = &mut self.slots[victim as usize];
            self.index.remove(&s.tpage);
            if s.dirty {
                out.write_back = Some(s.tpage);
                self.stats.write_backs += 1;
            }
            s.tpage = tp;
            s.dirty = dirty;
            victim
        };
        self.index.insert(tp, i);
        self.push_front(i);
        out
    }

    fn unlink(&mut self, i: u32) {
        let (p, n) = (self.slots[i as usize].prev, self.slots[i as usize].next);
        if p != NIL {
            self.slots[p as usize].next = n;
        } else {
            self.head = n;
        }
        if n != NIL {
            self.slots[n as usize].prev = p;
        } else {
            self.tail = p;
        }
    }

    fn push_front(&mut self, i: u32) {
        self.slots[i as usize].prev = NIL;
        self.slots[i as usize].next = self.head;
        if self.head != NIL {
            self.slots[self.head as usize].prev = i;
        }
        self.head = i;
        if self.tail == NIL {
            self.tail = i;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_misses_and_dirty_write_backs() {
        let mut c = Cmt::new(2, 10);
        assert_eq!(c.access(0, false).load, Some(0));
        assert_eq!(c.access(5, true), CmtAccess::default()); // same translation page, now dirty
        assert_eq!(c.access(15, false).load, Some(1));
        c.access(3, false); // touch page 0: page 1 becomes least recent
        let a = c.access(25, false);
        assert_eq!((a.load, a.write_back), (Some(2), None)); // evicts clean page 1
        let b = c.access(35, false);
        assert_eq!((b.load, b.write_back), (Some(3), Some(0))); // evicts dirty page 0
        assert_eq!((c.stats.hits, c.stats.misses, c.stats.write_backs), (2, 4, 1));
    }
}
