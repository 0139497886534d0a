//! Garbage collection within one plane.
//!
//! A victim is a full block with something to reclaim, chosen by `ftl.gc_policy`: the fewest valid sectors
//! (greedy, the default), the fewest of `gc_rga_d` random candidates (randomized greedy), a random one, or the one
//! closed longest ago (FIFO, by the sequence number of its first page). Its current sectors (those the mapping
//! table points at) are read and rewritten into the plane's GC frontier (or, with `ftl.gc_copyback`, a page whose
//! every sector is current is moved whole on-die when the frontier's page is empty: MQSim's `Use_Copyback_for_GC`,
//! whose pages are its mapping unit, so always wholly current); after its last move the partial GC page is padded
//! and programmed, so that no moved sector lives only
//! in DRAM, and the victim is erased. Moving only current sectors means collection never changes what the host
//! reads.
//!
//! Two pacings (`ftl.gc_pacing`):
//! - **incremental** (as controller firmware does): once a plane's free pool drops below `gc_start_free_blocks`,
//!   each host page filled in that plane moves the next few pages of the current victim, enough to free a block
//!   per block the host fills (one page more while the pool is below the start threshold), until
//!   `gc_stop_free_blocks` are free. Host programs and GC moves interleave on the die, so write latency stays
//!   bounded by a few page operations. If the pool still falls below the floor (two blocks: one for the host
//!   frontier's next block, one for the GC frontier's), the host write waits for blocking collection (a stall);
//!   config validation therefore asks for `gc_start_free_blocks` >= 3 with this pacing.
//! - **blocking**: when a host write needs a new block and the pool is below the start threshold, whole victims
//!   are collected at once until `gc_stop_free_blocks` are free (the simplest FTLs; every move is booked at that
//!   instant, so later host pages of the die wait for the whole episode).

use super::oob::{self, Oob, INVALID_LPN, SPARE_BYTES};
use super::{FlashSink, Ftl, Slot, Stream, Work};
use crate::config::{GcFree, VictimPolicy};
use crate::engine::At;
use crate::error::Result;
use rand::seq::SliceRandom as _;

/// A victim being collected page by page.
#[derive(Debug, Clone, Copy)]
pub(super) struct GcCursor {
    victim: u32,
    next_page: u32,
    /// Victim pages moved per host page filled: pages / (reclaimable sectors / sectors per page).
    pages_per_step: u32,
    /// When the last move so far is programmed (the erase waits for it).
    last: At,
}

/// Free blocks below which a host write waits for blocking collection: one for the host frontier's next block,
/// one for the GC frontier's.
pub const FREE_FLOOR: u32 = 2;

impl Ftl {
    /// Blocking collection: finishes the current victim, then collects whole victims until `target` blocks are free.
    pub(super) fn collect(&mut self, plane: u32, target: u32, ready: At, sink: &mut dyn FlashSink) -> Result<()> {
        if let Some(c) = self.gc_cursor[plane as usize].take() {
            self.advance_victim(plane, c, u32::MAX, ready, sink)?;
        }
        // Each victim frees one block and opens at most one GC block, so the pool never shrinks; the bound only
        // guards against a plane whose every block is nearly all valid (prevented by config validation).
        for _ in 0..self.geo.blocks_per_plane {
            if self.blocks.free_blocks(plane) >= target {
                break;
            }
            let Some(c) = self.pick_victim(plane, ready) else { break };
            self.advance_victim(plane, c, u32::MAX, ready, sink)?;
        }
        Ok(())
    }

    /// Before a host frontier opens a block: collect if the pool is below what the pacing allows.
    /// Incremental pacing's floor counts every free block (one whose erase is owed can be opened, its pages waiting
    /// for the erase; collecting more would not end that erase sooner); blocking pacing's start threshold counts as
    /// `ftl.gc_free` says, and collects only while the pool, owed erases included, is below the stop threshold.
    pub(super) fn collect_before_open(&mut self, plane: u32, ready: At, sink: &mut dyn FlashSink) -> Result<()> {
        let free = self.blocks.free_blocks(plane);
        let (limit, target, counted) = if self.incremental_gc {
            (FREE_FLOOR, self.gc_start, free)
        } else {
            (self.gc_start, self.gc_stop, self.free_counted(plane, sink))
        };
        // With `issued` (counted = free, start <= stop) the second condition follows from the first.
        if counted < limit && free < target {
            self.stats.gc_stalls += 1;
            self.collect(plane, target, ready, sink)?;
        }
        Ok(())
    }

    /// Incremental pacing, after a host page of `plane` filled: moves the next pages of the plane's victim.
    pub(super) fn pace_gc(&mut self, plane: u32, ready: At, sink: &mut dyn FlashSink) -> Result<()> {
        if !self.incremental_gc {
            return Ok(());
        }
        let p = plane as usize;
        let free = self.free_counted(plane, sink);
        let cursor = match self.gc_cursor[p].take() {
            Some(c) => c,
            None if free < self.gc_start || (self.gc_active[p] && free < self.gc_stop) => {
                match self.pick_victim(plane, ready) {
                    Some(c) => c,
                    None => return Ok(()),
                }
            }
            None => {
                self.gc_active[p] = false;
                return Ok(());
            }
        };
        self.gc_active[p] = true;
        let step = cursor.pages_per_step + u32::from(free < self.gc_start);
        self.advance_victim(plane, cursor, step, ready, sink)
    }

    /// The victim of `plane` under the configured policy, as a cursor at its first page.
    fn pick_victim(&mut self, plane: u32, ready: At) -> Option<GcCursor> {
        let capacity = self.geo.pages_per_block * self.spp;
        let victim = match self.victim_policy {
            VictimPolicy::Greedy => self.blocks.victim(plane, capacity)?,
            VictimPolicy::Rga(d) => {
                let all: Vec<u32> = self.blocks.reclaimable(plane, capacity).collect();
                let picks = rand::seq::index::sample(&mut self.gc_rng, all.len().max(1), (d as usize).min(all.len()));
                picks.iter().map(|i| all[i]).min_by_key(|&id| (self.blocks.info[id as usize].valid, id))?
            }
            VictimPolicy::Random => {
                let all: Vec<u32> = self.blocks.reclaimable(plane, capacity).collect();
                *all.choose(&mut self.gc_rng)?
            }
            VictimPolicy::Fifo => {
                let spp = self.spp as usize;
                let closed_at = |id: u32| Oob::new(self.store.oob.get(self.geo.block_first_ppn(id)), spp).seq();
                self.blocks.reclaimable(plane, capacity).min_by_key(|&id| (closed_at(id), id))?
            }
        };
        self.stats.gc_runs += 1;
        let info = self.blocks.info[victim as usize];
        let reclaim_pages = (capacity - info.valid).div_ceil(self.spp).max(1);
        Some(GcCursor { victim, next_page: 0, pages_per_step: info.pages_written.div_ceil(reclaim_pages), last: ready })
    }

    /// Moves up to `pages` more pages of the cursor's victim; if that was its last page, pads the GC page and erases
    /// the victim, else keeps the cursor.
    fn advance_victim(&mut self, plane: u32, mut c: GcCursor, pages: u32, ready: At, sink: &mut dyn FlashSink) -> Result<()> {
        let written = self.blocks.info[c.victim as usize].pages_written;
        let end = c.next_page.saturating_add(pages).min(written);
        let mut moved = std::mem::take(&mut self.scratch.moved);
        moved.clear();
        self.relocate_pages(plane, c.victim, c.next_page..end, ready, sink, &mut moved)?;
        c.last = sink.max_all_programs(c.last, &moved);
        self.scratch.moved = moved;
        c.next_page = end;
        if end < written {
            self.gc_cursor[plane as usize] = Some(c);
            return Ok(());
        }
        if self.gc[plane as usize].filled > 0 {
            self.store.data.flush_copies()?;
            let p = self.program(Stream::Gc, &[plane], sink);
            c.last = sink.max_all(c.last, &[p]);
        }
        let erased = sink.erase_block(c.last, c.victim, Work::Gc { urgent: self.gc_urgent(plane, sink) });
        if erased != At::ZERO {
            self.erasing.insert(c.victim, erased);
            if self.gc_free == GcFree::Erased {
                self.owed[plane as usize].push(c.victim);
            }
        }
        self.erase(c.victim)
    }

    /// Moves every current sector of `victim`'s `pages` out; the moves programmed so far (their ends) go to `last`.
    fn relocate_pages(
        &mut self,
        plane: u32,
        victim: u32,
        pages: std::ops::Range<u32>,
        ready: At,
        sink: &mut dyn FlashSink,
        last: &mut Vec<At>,
    ) -> Result<()> {
        let spp = self.spp as usize;
        let first = self.geo.block_first_ppn(victim);
        let work = Work::Gc { urgent: self.gc_urgent(plane, sink) };
        // The mapping entries of the victim's sectors are scattered over the table: request them `AHEAD` pages in
        // advance, so that their cache misses overlap instead of following one another.
        const AHEAD: u32 = 8;
        let prefetch_page = |ftl: &Self, page: u32| {
            if page < pages.end {
                let rec = Oob::new(ftl.store.oob.get(first + u64::from(page)), spp);
                for lpn in rec.lpns() {
                    ftl.store.l2p.prefetch(u64::from(lpn));
                }
            }
        };
        for page in pages.start..pages.end.min(pages.start.saturating_add(AHEAD)) {
            prefetch_page(self, page);
        }
        for page in pages.clone() {
            prefetch_page(self, page.saturating_add(AHEAD));
            let ppn = first + u64::from(page);
            let first_psa = ppn * spp as u64;
            // The current slots, as a mask (their LPNs, checksums and data flags are read from the record again
            // where they move: a 32-slot array of them cost ~100 instructions a page to set up).
            let live = self.live_slots(ppn, spp);
            #[cfg(test)]
            let reference = self.per_sector_moves.then(|| self.live_slots_scan(ppn, spp));
            #[cfg(test)]
            let live = reference.map_or(live, |r| r.0);
            if live == 0 {
                continue;
            }
            let worst = self.worst_injected(first_psa, live);
            #[cfg(test)]
            let worst = reference.map_or(worst, |r| r.1);
            let n = live.count_ones() as usize;
            // Copyback moves a page whole, so only a page whose every sector is current goes that way: copying one
            // with stale sectors would carry them along as padding, and under steady random writes (every victim
            // page has some) collection then reclaimed nothing until a plane ran out of free blocks.
            if self.copyback && n == spp && self.gc_frontier_empty(plane) {
                last.push(self.copy_back_page(plane, ppn, live, ready, sink)?);
                continue;
            }
            let pe = self.blocks.info[victim as usize].erase_count;
            let data_ready = sink.read_page(ready, ppn, n as u32, worst, pe, work);
            #[cfg(test)]
            if self.per_sector_moves {
                self.move_live_per_sector(plane, ppn, live, data_ready, sink, last)?;
                continue;
            }
            self.move_live(plane, ppn, live, data_ready, sink, last)?;
        }
        Ok(())
    }

    /// Moves the `live` slots of victim page `ppn` (read into the controller by `data_ready`) into the plane's GC
    /// frontier, in slot order; each GC page they fill is programmed, its end pushed to `last`. Works a frontier
    /// page at a time: the frontier is checked, addressed and counted once per run of slots that go into one of
    /// its pages, and what a sector may carry besides its record (data, injected errors, spare bytes, a
    /// relocation entry) is looked at only when any of it can be there.
    fn move_live(&mut self, plane: u32, ppn: u64, live: u32, data_ready: At, sink: &mut dyn FlashSink, last: &mut Vec<At>) -> Result<()> {
        let spp = self.spp as usize;
        let src_first = ppn * spp as u64;
        let extras = self.relocations.is_some() || self.spares_written || !self.injected.is_empty();
        let (p, i) = (plane as usize, Self::spare_index(Stream::Gc, plane));
        let mut rest = live;
        while rest != 0 {
            self.ensure_slot(Stream::Gc, plane, data_ready, sink)?;
            let (dst_first, filled) = self.next_psa(Stream::Gc, plane);
            // The run of slots that fit the frontier's page: their record fields into the frontier.
            let rec = Oob::new(self.store.oob.get(ppn), spp);
            let fr = &mut self.gc[p];
            let mut k = filled;
            let mut present = 0u32;
            while rest != 0 && k < spp {
                let slot = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                fr.slots[k] = Slot { lpn: rec.lpn(slot), crc: rec.crc(slot) };
                fr.src[k] = src_first + slot as u64;
                present |= u32::from(rec.present(slot)) << k;
                self.slot_ready[i][k] = data_ready;
                k += 1;
            }
            fr.present |= present;
            if present != 0 || extras {
                for d in filled..k {
                    let (lpn, src) = (self.gc[p].slots[d].lpn, self.gc[p].src[d]);
                    self.carry_sector(plane, d, lpn, present & (1 << d) != 0, src, dst_first + (d - filled) as u64)?;
                }
            }
            self.gc[p].filled = k as u32;
            self.stats.gc_sectors_moved += (k - filled) as u64;
            if k == spp {
                self.store.data.flush_copies()?; // the data is in place before the OOB record says so
                last.push(self.program(Stream::Gc, &[plane], sink));
            }
        }
        Ok(())
    }

    /// `move_live` as it was, one sector at a time (the reference the tests hold it to).
    #[cfg(test)]
    fn move_live_per_sector(&mut self, plane: u32, ppn: u64, live: u32, data_ready: At, sink: &mut dyn FlashSink, last: &mut Vec<At>) -> Result<()> {
        let spp = self.spp as usize;
        let mut rest = live;
        while rest != 0 {
            let slot = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            let (lpn, crc, present) = Self::oob_slot(&self.store.oob, ppn, spp, slot);
            self.ensure_slot(Stream::Gc, plane, data_ready, sink)?;
            let (dst, to) = self.next_psa(Stream::Gc, plane);
            self.move_sector(plane, to, lpn, crc, present, ppn * spp as u64 + slot as u64, dst)?;
            self.slot_ready[Self::spare_index(Stream::Gc, plane)][to] = data_ready;
            self.gc[plane as usize].filled += 1;
            self.stats.gc_sectors_moved += 1;
            if self.gc[plane as usize].filled == self.spp {
                self.store.data.flush_copies()?;
                last.push(self.program(Stream::Gc, &[plane], sink));
            }
        }
        Ok(())
    }

    /// `live_slots` and `worst_injected` as they were, one branch per slot (the reference for the tests).
    #[cfg(test)]
    fn live_slots_scan(&self, ppn: u64, spp: usize) -> (u32, u32) {
        let first_psa = ppn * spp as u64;
        let (mut live, mut worst) = (0u32, 0);
        for (slot, lpn) in Oob::new(self.store.oob.get(ppn), spp).lpns().enumerate() {
            let psa = first_psa + slot as u64;
            if lpn != INVALID_LPN && self.store.l2p.get(u64::from(lpn)) == (psa + 1) as u32 {
                live |= 1 << slot;
                worst = worst.max(self.injected_errors(psa));
            }
        }
        (live, worst)
    }

    /// The slots of page `ppn` whose sector is current (the mapping table points at it), as a mask. Without a
    /// branch on the answer, which is random under random writes (a third of it mispredicted): the entry of an
    /// `INVALID_LPN` slot (or of any LPN past the table) is read at the table's last index, and not counted.
    #[inline]
    fn live_slots(&self, ppn: u64, spp: usize) -> u32 {
        let l2p = &self.store.l2p;
        let last = l2p.len() - 1;
        let first_psa = ppn * spp as u64;
        let mut live = 0u32;
        for (slot, lpn) in Oob::new(self.store.oob.get(ppn), spp).lpns().enumerate() {
            let lpn = u64::from(lpn);
            let current = (lpn <= last) & (l2p.get(lpn.min(last)) == (first_psa + slot as u64 + 1) as u32);
            live |= u32::from(current) << slot;
        }
        live
    }

    /// The most errors injected into any of the `live` slots of the page at `first_psa` (0 while none were).
    #[inline]
    fn worst_injected(&self, first_psa: u64, live: u32) -> u32 {
        if self.injected.is_empty() {
            return 0;
        }
        let mut worst = 0;
        let mut rest = live;
        while rest != 0 {
            let slot = rest.trailing_zeros();
            rest &= rest - 1;
            worst = worst.max(self.injected_errors(first_psa + u64::from(slot)));
        }
        worst
    }

    /// The LPN, checksum and data flag that page `ppn`'s OOB record gives slot `slot`.
    #[inline]
    fn oob_slot(oob: &crate::store::MappedRecords, ppn: u64, spp: usize, slot: usize) -> (u32, u32, bool) {
        let rec = Oob::new(oob.get(ppn), spp);
        (rec.lpn(slot), rec.crc(slot), rec.present(slot))
    }

    fn gc_frontier_empty(&self, plane: u32) -> bool {
        self.gc[plane as usize].filled == 0
    }

    /// Moves a whole page on-die into the (empty) GC frontier page.
    fn copy_back_page(
        &mut self,
        plane: u32,
        src_ppn: u64,
        live: u32,
        ready: At,
        sink: &mut dyn FlashSink,
    ) -> Result<At> {
        let spp = self.spp as usize;
        self.ensure_slot(Stream::Gc, plane, ready, sink)?;
        let (dst_first, _) = self.next_psa(Stream::Gc, plane);
        let dst_ppn = dst_first / spp as u64;
        let erased = self.block_erased[Self::spare_index(Stream::Gc, plane)];
        let ready = if erased == At::ZERO { ready } else { sink.max_all(ready, &[erased]) };
        let done = sink.copyback(ready, src_ppn, dst_ppn, Work::Gc { urgent: self.gc_urgent(plane, sink) });
        for slot in 0..spp {
            let (lpn, crc, present) =
                if live & (1 << slot) != 0 { Self::oob_slot(&self.store.oob, src_ppn, spp, slot) } else { (INVALID_LPN, 0, false) };
            let src = src_ppn * spp as u64 + slot as u64;
            let dst = dst_ppn * spp as u64 + slot as u64;
            self.move_sector(plane, slot, lpn, crc, present && lpn != INVALID_LPN, src, dst)?;
        }
        let fr = &mut self.gc[plane as usize];
        fr.filled = self.spp;
        self.stats.gc_pages_copied_back += 1;
        self.stats.gc_sectors_moved += u64::from(live.count_ones());
        self.store.data.flush_copies()?;
        // The copyback already programmed the page: record it without a second program's timing.
        let i = Self::spare_index(Stream::Gc, plane);
        self.slot_ready[i] = [At::ZERO; super::MAX_SPP];
        self.page_floor[i] = At::ZERO;
        let mut sink_done = super::Untimed;
        self.program(Stream::Gc, &[plane], &mut sink_done);
        Ok(done)
    }

    /// Copies one sector's data, checksum and injected errors from `src` to slot `slot` (at `dst`) of the GC frontier.
    #[allow(clippy::too_many_arguments)]
    fn move_sector(&mut self, plane: u32, slot: usize, lpn: u32, crc: u32, present: bool, src: u64, dst: u64) -> Result<()> {
        self.carry_sector(plane, slot, lpn, present, src, dst)?;
        let fr = &mut self.gc[plane as usize];
        fr.slots[slot] = Slot { lpn, crc };
        fr.src[slot] = src;
        fr.present |= u32::from(present) << slot;
        Ok(())
    }

    /// What a sector moved from `src` to slot `slot` (at `dst`) of the GC frontier carries besides its record: its
    /// data (if `present`), injected errors, extension spare bytes (marked in the frontier's `tagged`), and the
    /// relocation log's entry.
    fn carry_sector(&mut self, plane: u32, slot: usize, lpn: u32, present: bool, src: u64, dst: u64) -> Result<()> {
        if present {
            self.store.data.copy_sector(src, dst)?;
        }
        if let Some(bits) = self.injected.remove(&src) {
            // An uncorrectable sector stays uncorrectable where it moves; a correctable one was corrected.
            self.injected.insert(dst, bits);
        }
        // Extension spare bytes travel with the sector (none to read while none was ever given).
        let mut tagged = false;
        if self.spares_written {
            let spp = self.spp as usize;
            let spare: [u8; SPARE_BYTES] =
                Oob::new(self.store.oob.get(src / spp as u64), spp).spare((src % spp as u64) as usize).try_into().expect("slot");
            tagged = spare != [0; SPARE_BYTES];
            if tagged {
                self.spares[Self::spare_index(Stream::Gc, plane)][slot] = spare;
            }
        }
        if let Some(log) = &mut self.relocations {
            log.push(super::Relocation { lpn, from_psa: src, to_psa: dst });
        }
        self.gc[plane as usize].tagged |= u32::from(tagged) << slot;
        Ok(())
    }

    /// Erases a block whose sectors are all stale: clears its OOB, frees its host storage, returns it to the pool.
    pub(super) fn erase(&mut self, block: u32) -> Result<()> {
        let first = self.geo.block_first_ppn(block);
        let ppb = u64::from(self.geo.pages_per_block);
        debug_assert_eq!(self.blocks.info[block as usize].valid, 0, "erasing a block with valid data");
        if self.spares_written {
            self.store.oob.zero(first, ppb);
        } else {
            // No extension spare bytes were ever written: they are zeroes already, and only each record's own
            // bytes (56 of 184 with 4 slots) need clearing.
            self.store.oob.zero_prefix(first, ppb, oob::record_bytes(self.spp as usize));
        }
        self.store.data.punch(first, ppb)?;
        let spp = u64::from(self.spp);
        let lo = first * spp;
        let doomed: Vec<u64> = self.injected.range(lo..lo + ppb * spp).map(|(&k, _)| k).collect();
        for k in doomed {
            self.injected.remove(&k);
        }
        self.blocks.erased(block);
        self.stats.blocks_erased += 1;
        Ok(())
    }
}
