//! Greedy garbage collection within one plane.
//!
//! When a plane's free pool drops below `gc_start_free_blocks`, victims (the full block with the fewest valid
//! sectors) are collected until `gc_stop_free_blocks` are free: valid sectors are read and rewritten into the
//! plane's GC frontier (or whole pages moved on-die with copyback), the last partial GC page is padded and
//! programmed so that no moved sector lives only in DRAM, and the victim is erased. Moving only current sectors
//! (those the mapping table points at) means collection never changes what the host reads.

use super::oob::{Oob, INVALID_LPN};
use super::{FlashSink, Ftl, Stream};
use crate::engine::Time;
use crate::error::Result;

impl Ftl {
    pub(super) fn collect(&mut self, plane: u32, ready: Time, sink: &mut dyn FlashSink) -> Result<()> {
        let capacity = self.geo.pages_per_block * self.spp;
        // Each round frees one block and opens at most one GC block, so the pool never shrinks; the bound only
        // guards against a plane whose every block is nearly all valid (prevented by config validation).
        for _ in 0..self.geo.blocks_per_plane {
            if self.blocks.free_blocks(plane) >= self.gc_stop {
                break;
            }
            let Some(victim) = self.blocks.victim(plane, capacity) else { break };
            self.stats.gc_runs += 1;
            let moved_done = self.relocate_block(plane, victim, ready, sink)?;
            sink.erase_block(moved_done, victim);
            self.erase(victim)?;
        }
        Ok(())
    }

    /// Moves every current sector out of `victim`; returns when the last move is programmed.
    fn relocate_block(&mut self, plane: u32, victim: u32, ready: Time, sink: &mut dyn FlashSink) -> Result<Time> {
        let spp = self.spp as usize;
        let first = self.geo.block_first_ppn(victim);
        let pages = self.blocks.info[victim as usize].pages_written;
        let mut last = ready;
        for page in 0..pages {
            let ppn = first + u64::from(page);
            let rec = Oob::new(self.store.oob.get(ppn), spp);
            let mut live: [(u32, u32, bool); 32] = [(INVALID_LPN, 0, false); 32];
            let mut n = 0usize;
            let mut worst = 0;
            for slot in 0..spp {
                let lpn = rec.lpn(slot);
                let psa = ppn * spp as u64 + slot as u64;
                if lpn != INVALID_LPN && self.store.l2p.get(u64::from(lpn)) == (psa + 1) as u32 {
                    live[slot] = (lpn, rec.crc(slot), rec.present(slot));
                    n += 1;
                    worst = worst.max(self.injected_errors(psa));
                }
            }
            if n == 0 {
                continue;
            }
            if self.copyback && self.gc_frontier_empty(plane) {
                last = last.max(self.copy_back_page(plane, ppn, &live, ready, sink)?);
                continue;
            }
            let pe = self.blocks.info[victim as usize].erase_count;
            let data_ready = sink.read_page(ready, ppn, n as u32, worst, pe);
            for (slot, &(lpn, crc, present)) in live.iter().enumerate().take(spp) {
                if lpn == INVALID_LPN {
                    continue;
                }
                let src = ppn * spp as u64 + slot as u64;
                if let Some(t) = self.append_gc(plane, lpn, src, crc, present, data_ready, sink)? {
                    last = last.max(t);
                }
            }
        }
        if self.gc[plane as usize].filled > 0 {
            last = last.max(self.program(Stream::Gc, &[plane], sink));
        }
        Ok(last)
    }

    fn gc_frontier_empty(&self, plane: u32) -> bool {
        self.gc[plane as usize].filled == 0
    }

    /// Appends one moved sector to the GC frontier; returns the program end if that filled a page.
    #[allow(clippy::too_many_arguments)]
    fn append_gc(
        &mut self,
        plane: u32,
        lpn: u32,
        src: u64,
        crc: u32,
        present: bool,
        data_ready: Time,
        sink: &mut dyn FlashSink,
    ) -> Result<Option<Time>> {
        self.ensure_slot(Stream::Gc, plane, data_ready, sink)?;
        let (dst, slot) = self.next_psa(Stream::Gc, plane);
        self.move_sector(plane, slot, lpn, crc, present, src, dst)?;
        let fr = &mut self.gc[plane as usize];
        fr.filled += 1;
        fr.ready = fr.ready.max(data_ready);
        self.stats.gc_sectors_moved += 1;
        if fr.filled == self.spp {
            return Ok(Some(self.program(Stream::Gc, &[plane], sink)));
        }
        Ok(None)
    }

    /// Moves a whole page on-die into the (empty) GC frontier page.
    fn copy_back_page(
        &mut self,
        plane: u32,
        src_ppn: u64,
        live: &[(u32, u32, bool); 32],
        ready: Time,
        sink: &mut dyn FlashSink,
    ) -> Result<Time> {
        let spp = self.spp as usize;
        self.ensure_slot(Stream::Gc, plane, ready, sink)?;
        let (dst_first, _) = self.next_psa(Stream::Gc, plane);
        let dst_ppn = dst_first / spp as u64;
        let done = sink.copyback(ready, src_ppn, dst_ppn);
        for (slot, &(lpn, crc, present)) in live.iter().enumerate().take(spp) {
            let src = src_ppn * spp as u64 + slot as u64;
            let dst = dst_ppn * spp as u64 + slot as u64;
            self.move_sector(plane, slot, lpn, crc, present && lpn != INVALID_LPN, src, dst)?;
        }
        let fr = &mut self.gc[plane as usize];
        fr.filled = self.spp;
        fr.ready = done;
        self.stats.gc_pages_copied_back += 1;
        self.stats.gc_sectors_moved += live.iter().filter(|l| l.0 != INVALID_LPN).count() as u64;
        // The copyback already programmed the page: record it without a second program's timing.
        let mut sink_done = super::Untimed;
        self.program(Stream::Gc, &[plane], &mut sink_done);
        Ok(done)
    }

    /// Copies one sector's data, checksum and injected errors from `src` to slot `slot` (at `dst`) of the GC frontier.
    #[allow(clippy::too_many_arguments)]
    fn move_sector(&mut self, plane: u32, slot: usize, lpn: u32, crc: u32, present: bool, src: u64, dst: u64) -> Result<()> {
        if present {
            let mut scratch = std::mem::take(&mut self.scratch);
            let r = self.store.data.copy_sector(src, dst, &mut scratch);
            self.scratch = scratch;
            r?;
        }
        if let Some(bits) = self.injected.remove(&src) {
            // An uncorrectable sector stays uncorrectable where it moves; a correctable one was corrected.
            self.injected.insert(dst, bits);
        }
        let fr = &mut self.gc[plane as usize];
        fr.lpns[slot] = lpn;
        fr.crcs[slot] = crc;
        fr.src[slot] = src;
        fr.present |= u32::from(present) << slot;
        Ok(())
    }

    /// Erases a block whose sectors are all stale: clears its OOB, frees its host storage, returns it to the pool.
    pub(super) fn erase(&mut self, block: u32) -> Result<()> {
        let first = self.geo.block_first_ppn(block);
        let ppb = u64::from(self.geo.pages_per_block);
        debug_assert_eq!(self.blocks.info[block as usize].valid, 0, "erasing a block with valid data");
        self.store.oob.zero(first, ppb);
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
