//! `Programming`: which recently programmed pages are still being programmed (a read of one is served from the
//! write buffer in DRAM until its program ends), kept per block.

use strength_reduce::StrengthReducedU64;

use crate::engine::{At, Flow};

/// `slot_of`'s value for a block without an array.
const NO_SLOT: u32 = 0;

/// The program ends of recently programmed pages (`DeviceCore::programming`): until a page's program ends, a read of
/// it is served from the write buffer in DRAM.
///
/// Pages are programmed block by block, so the ends are kept per block, in an array indexed by the page's offset:
/// a block gets one from a pool on its first program and gives it back once no program it records is pending. This
/// answers as the map from page to its last program's end it replaced (a hash map insert per page programmed, ~135
/// instructions a GC-steady write): a page never programmed, or whose block gave its array back (every program it
/// recorded had ended, and an ended program stays ended), reads as not being programmed; a reused array's entries
/// are all ended programs of another block, so they read the same.
#[derive(Debug)]
pub(crate) struct Programming {
    pages_per_block: u64,
    /// `pages_per_block` as a strength-reduced divisor: `get` splits a PPN on every read.
    per_block: StrengthReducedU64,
    /// Per block: its array's index plus one (`NO_SLOT`: none). Grown on demand to the highest block seen.
    slot_of: Vec<u32>,
    /// The arrays, `pages_per_block` entries each: the end of the last program of each page.
    ends: Vec<At>,
    /// Per array: the block holding it (`u32::MAX`: free).
    block_of: Vec<u32>,
    /// Arrays given back, reused last freed first.
    free: Vec<u32>,
    /// The arrays held after the last pruning (the next prunes once they have grown well past that).
    pruned_at: usize,
}

impl Programming {
    pub(crate) fn new(pages_per_block: u32) -> Self {
        let pages_per_block = u64::from(pages_per_block.max(1));
        Programming {
            pages_per_block,
            per_block: StrengthReducedU64::new(pages_per_block),
            slot_of: Vec::new(),
            ends: Vec::new(),
            block_of: Vec::new(),
            free: Vec::new(),
            pruned_at: 0,
        }
    }

    /// Records that page `ppn`'s last program ends at `done` (`flow`: the steps' states, for a pruning).
    #[inline]
    pub(crate) fn insert<S: Default>(&mut self, ppn: u64, done: At, flow: &Flow<S>) {
        let (block, page) = StrengthReducedU64::div_rem(ppn, self.per_block);
        let page = page as usize;
        let slot = match self.slot_of.get(block as usize) {
            Some(&s) if s != NO_SLOT => s - 1,
            _ => self.attach(block as u32, flow),
        };
        self.ends[slot as usize * self.pages_per_block as usize + page] = done;
    }

    /// Gives `block` an array (a freed one, whose entries are all ended programs, or a new one of `At::ZERO`).
    /// With none free, first gives back the arrays of blocks with nothing pending, once the arrays held have
    /// doubled since the last pruning, and 64 more (a fixed bound had every array scanned on every block opened
    /// while many programs were pending): the pool stays near the blocks with pending programs.
    #[inline(never)]
    fn attach<S: Default>(&mut self, block: u32, flow: &Flow<S>) -> u32 {
        if self.free.is_empty() && self.held() > 2 * self.pruned_at + 64 {
            self.prune(flow);
            self.pruned_at = self.held();
        }
        if self.slot_of.len() <= block as usize {
            self.slot_of.resize(block as usize + 1, NO_SLOT);
        }
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                let s = self.block_of.len() as u32;
                self.block_of.push(block);
                self.ends.resize(self.ends.len() + self.pages_per_block as usize, At::ZERO);
                s
            }
        };
        self.block_of[slot as usize] = block;
        self.slot_of[block as usize] = slot + 1;
        slot
    }

    /// The end of page `ppn`'s last program, if recorded (`None`: never programmed, or ended long ago).
    #[inline]
    pub(crate) fn get(&self, ppn: u64) -> Option<At> {
        let (block, page) = StrengthReducedU64::div_rem(ppn, self.per_block);
        match self.slot_of.get(block as usize) {
            Some(&s) if s != NO_SLOT => {
                let page = page as usize;
                Some(self.ends[(s - 1) as usize * self.pages_per_block as usize + page])
            }
            _ => None,
        }
    }

    /// Arrays held by blocks.
    pub(crate) fn held(&self) -> usize {
        self.block_of.len() - self.free.len()
    }

    /// Gives back the arrays of blocks none of whose recorded programs is pending.
    pub(crate) fn prune<S: Default>(&mut self, flow: &Flow<S>) {
        let ppb = self.pages_per_block as usize;
        for slot in 0..self.block_of.len() {
            let block = self.block_of[slot];
            if block == u32::MAX {
                continue;
            }
            if self.ends[slot * ppb..(slot + 1) * ppb].iter().all(|&p| !flow.pending(p)) {
                self.block_of[slot] = u32::MAX;
                self.slot_of[block as usize] = NO_SLOT;
                self.free.push(slot as u32);
            }
        }
    }

    /// Every recorded program end still pending (repeats included: one per page).
    #[cfg(test)]
    pub(crate) fn pending<S: Default>(&self, flow: &Flow<S>) -> Vec<At> {
        let ppb = self.pages_per_block as usize;
        let held = (0..self.block_of.len()).filter(|&s| self.block_of[s] != u32::MAX);
        held.flat_map(|s| self.ends[s * ppb..(s + 1) * ppb].iter().copied()).filter(|&p| flow.pending(p)).collect()
    }
}
