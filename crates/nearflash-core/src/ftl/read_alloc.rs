//! `ftl.unmapped_read = allocate`: a read of a never-written sector gets a flash page, as in MQSim.
//!
//! MQSim's page-level FTL (`Address_Mapping_Unit_Page_Level::translate_lpa_to_ppa`) meets a read of a logical page
//! that has no mapping with `online_create_entry_for_reads`: the page's plane comes from the static allocation
//! order (as for a write), the physical page is taken at that plane's write frontier
//! (`Allocate_block_and_page_in_plane_for_user_write`), the mapping is recorded, and the read goes to flash with
//! that page's type and timing. Reads of a fresh device thus find, per plane, pages in arrival order: on MLC the
//! page types alternate LSB, MSB, LSB, ... as the reads arrive.
//!
//! Here the same: the sector's page-sized logical group (MQSim's logical page) gets the next page of its plane's
//! host frontier; every never-written sector of the group is mapped to its slot of that page (slot = offset in the
//! group), so later reads of the group's other sectors read the same page. Nothing is programmed (no program time,
//! not counted in `pages_programmed` or the WAF): the page's OOB record is written as for a page programmed with no
//! stored data (a timing-only write: LPNs, no slot present), so the sectors read as zeroes, and
//! - GC treats them as valid sectors and moves them (as MQSim, whose block manager counts such a page valid);
//! - recovery after a crash replays the record like any other, and a clean close persists it, so an image reopens
//!   with the same mapping;
//! - a write or trim of such a sector replaces or drops it as it would any mapped sector.
//!
//! The allocation needs the frontier at a page boundary. While the plane's open page holds buffered writes (or
//! waits for sibling planes) the read is served as with `zeroes`, without flash: MQSim has no partially filled
//! pages (its logical page is a flash page), and programming the buffered sectors early would change write timing.

use super::{FlashSink, Ftl, Location, Stream};
use crate::engine::At;
use crate::error::Result;
use super::oob::{OobMut, INVALID_LPN};

impl Ftl {
    /// Maps the never-written sectors of `lpn`'s group to the next page of its plane's host frontier (opening a
    /// block, after GC if the plane needs it) and returns `lpn`'s new location; a mapped `lpn` is left as it is.
    /// Returns `Location::Unmapped` (nothing changed) while the frontier's open page holds buffered sectors.
    pub fn allocate_for_read(&mut self, lpn: u32, ready: impl Into<At>, sink: &mut dyn FlashSink) -> Result<Location> {
        let ready = ready.into();
        self.check_lpn(lpn)?;
        let loc = self.locate(lpn);
        let plane = self.plane_of(lpn);
        if loc != Location::Unmapped || self.host[plane as usize].filled > 0 {
            return Ok(loc);
        }
        self.ensure_slot(Stream::Host, plane, ready, sink)?;
        let spp = u64::from(self.spp);
        let first = u64::from(lpn) - u64::from(lpn) % spp;
        let fr = &self.host[plane as usize];
        let ppn = self.geo.block_first_ppn(fr.block) + u64::from(fr.page);
        let erase_count = self.blocks.info[fr.block as usize].erase_count;
        let slots: Vec<u32> = (0..spp)
            .map(|s| first + s)
            .map(|l| if l < self.logical_sectors && self.locate(l as u32) == Location::Unmapped { l as u32 } else { INVALID_LPN })
            .collect();
        // The record first, the mapping after (as `program`): a kill in between leaves a record recovery maps.
        let seq = self.next_seq();
        let mut rec = OobMut::new(self.store.oob.get_mut(ppn), self.spp as usize);
        for (slot, &l) in slots.iter().enumerate() {
            rec.set_slot(slot, l, 0);
        }
        rec.set_header(seq, erase_count, 0);
        for (slot, &l) in slots.iter().enumerate() {
            if l != INVALID_LPN {
                self.remap(l, ppn * spp + slot as u64);
            }
        }
        self.next_page(Stream::Host, plane);
        self.stats.read_allocated_pages += 1;
        // The page used the frontier like a host page: GC keeps pace with it the same way.
        self.pace_gc(plane, ready, sink)?;
        Ok(self.locate(lpn))
    }
}
