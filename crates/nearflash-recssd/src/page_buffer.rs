//! GreedyFTL's LRU data buffer in controller DRAM (Cosmos+ `lru_buffer.c`, kept by the RecSSD firmware): whole
//! 16 KiB flash pages, an LRU list per die (`die = logical page % dies`), `BUF_ENTRY_NUM_PER_DIE` entries each.
//! Every page the SLS engine or a host read brings from flash lands here; a later request for the same page is
//! served from DRAM (paper §4.1 step 3b, and the reason SEQ lookups are cheap for the baseline, §6.1).
//!
//! An entry remembers the physical sector addresses it was read from: a host write moves a logical page
//! elsewhere (out-of-place), so a buffered copy whose addresses no longer match the FTL's mapping is stale and
//! dropped instead of served. An entry may hold the page's bytes (stored tables) or only its timing (regions
//! that store no data).

use crate::ssd_cache::CacheStats;
use lru::LruCache;
use nearflash_core::ext::Time;
use std::num::NonZeroUsize;

/// A buffered page.
#[derive(Debug, Clone)]
struct Entry {
    /// When the page's data is (or will be) in DRAM.
    ready: Time,
    /// Physical sector addresses the page was read from.
    psas: Vec<u64>,
    data: Option<Box<[u8]>>,
}

/// A hit: when the data is available and, if kept, the page's bytes.
#[derive(Debug, Clone, Copy)]
pub struct BufferedPage<'a> {
    pub ready: Time,
    pub data: Option<&'a [u8]>,
}

/// The per-die LRU page buffer.
pub struct PageBuffer {
    per_die: Vec<LruCache<u64, Entry>>,
    stats: CacheStats,
    /// Hits refused because the FTL had remapped the page since it was buffered.
    stale: u64,
}

impl PageBuffer {
    /// `dies` LRU lists of `pages_per_die` pages; `pages_per_die == 0` disables buffering.
    pub fn new(dies: u32, pages_per_die: usize) -> Self {
        let per_die = match NonZeroUsize::new(pages_per_die) {
            Some(cap) => (0..dies.max(1)).map(|_| LruCache::new(cap)).collect(),
            None => Vec::new(),
        };
        Self { per_die, stats: CacheStats::default(), stale: 0 }
    }

    fn list(&mut self, lpage: u64) -> Option<&mut LruCache<u64, Entry>> {
        let n = self.per_die.len() as u64;
        if n == 0 {
            None
        } else {
            self.per_die.get_mut((lpage % n) as usize)
        }
    }

    /// Looks up logical page `lpage` whose sectors currently map to `psas`; a hit must hold the bytes when
    /// `need_data`. Counts a hit or a miss.
    pub fn lookup(&mut self, lpage: u64, psas: &[u64], need_data: bool) -> Option<BufferedPage<'_>> {
        let mut stale = false;
        let hit = match self.list(lpage) {
            None => false,
            Some(list) => match list.get(&lpage) {
                Some(e) if e.psas != psas => {
                    stale = true;
                    false
                }
                Some(e) => !need_data || e.data.is_some(),
                None => false,
            },
        };
        if stale {
            self.stale += 1;
            if let Some(list) = self.list(lpage) {
                list.pop(&lpage);
            }
        }
        if !hit {
            self.stats.misses += 1;
            return None;
        }
        self.stats.hits += 1;
        let e = self.list(lpage)?.peek(&lpage)?;
        Some(BufferedPage { ready: e.ready, data: e.data.as_deref() })
    }

    /// Buffers page `lpage` read from `psas`, available at `ready`, with its bytes if given.
    pub fn insert(&mut self, lpage: u64, psas: Vec<u64>, ready: Time, data: Option<&[u8]>) {
        let data = data.map(|d| d.to_vec().into_boxed_slice());
        let Some(list) = self.list(lpage) else { return };
        let evicted = list.push(lpage, Entry { ready, psas, data }).is_some_and(|(k, _)| k != lpage);
        self.stats.fills += 1;
        self.stats.evictions += u64::from(evicted);
    }

    /// Hit/miss/fill/eviction counters.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    /// Lookups refused because the page had been rewritten.
    pub fn stale(&self) -> u64 {
        self.stale
    }

    /// Pages the buffer can hold.
    pub fn capacity(&self) -> usize {
        self.per_die.iter().map(|l| l.cap().get()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_die_lru_with_stale_detection() {
        let mut b = PageBuffer::new(2, 2);
        assert_eq!(b.capacity(), 4);
        assert!(b.lookup(4, &[10, 11], false).is_none());
        b.insert(4, vec![10, 11], Time::from_ns(100), Some(&[7u8; 8]));
        let hit = b.lookup(4, &[10, 11], true).unwrap();
        assert_eq!((hit.ready, hit.data.unwrap()[0]), (Time::from_ns(100), 7));
        // Rewritten page: the mapping moved, the entry is dropped.
        assert!(b.lookup(4, &[20, 11], false).is_none());
        assert!(b.lookup(4, &[10, 11], false).is_none());
        assert_eq!(b.stale(), 1);
        // Timing-only entries serve timing, not data.
        b.insert(6, vec![1], Time::from_ns(5), None);
        assert!(b.lookup(6, &[1], false).is_some());
        assert!(b.lookup(6, &[1], true).is_none());
        // Die 0 holds two pages (even page numbers): a third evicts the least recently used.
        b.insert(0, vec![0], Time::from_ns(1), None);
        b.insert(2, vec![2], Time::from_ns(1), None);
        assert!(b.lookup(6, &[1], false).is_none());
        assert!(b.lookup(1 + 2, &[3], false).is_none()); // die 1 never filled
        let s = b.stats();
        assert_eq!((s.fills, s.evictions), (4, 1));
        let mut off = PageBuffer::new(4, 0);
        off.insert(1, vec![1], Time::ZERO, None);
        assert!(off.lookup(1, &[1], false).is_none());
    }
}
