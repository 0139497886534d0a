//! Physical page access for firmware extensions: reading what any programmed page stores (by physical address,
//! bypassing the mapping), and programming and erasing pages of the extension-reserved blocks
//! (`ftl.ext_reserved_blocks`, the last blocks of each plane), which the FTL never allocates, collects or maps.
//!
//! Reserved pages follow NAND's rules: a block's pages are programmed once each, in order, and only an erase makes
//! them programmable again. Their OOB record has the same layout as the FTL's (sequence number, per-sector
//! checksums, extension spare bytes) with no LBA in any slot, so recovery and GC never mistake them for mapped data.

use super::oob::{Oob, OobMut, INVALID_LPN, SPARE_BYTES};
use super::{BlockState, Ftl};
use crate::error::Result;

/// Why a physical access was refused (device-visible: the extension turns it into an NVMe status).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PhysError {
    #[error("physical page {0} is beyond the device")]
    OutOfRange(u64),
    #[error("block {0} belongs to the FTL, not to the extension-reserved area")]
    NotReserved(u32),
    #[error("page {ppn} cannot be programmed: block's next erased page is {next}")]
    OutOfOrder { ppn: u64, next: u32 },
    #[error("{given} bytes given where a page holds at most {max}")]
    TooLong { given: usize, max: usize },
}

/// What a physical read found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PageData {
    /// The page has been programmed since its block was last erased.
    pub programmed: bool,
    /// Sector slots holding stored data (the rest read as zeroes).
    pub present: u32,
    /// Slots whose data fails its checksum (a media error: never returned as good data).
    pub corrupt: u32,
}

impl Ftl {
    /// Blocks per plane reserved for extensions.
    pub fn reserved_per_plane(&self) -> u32 {
        self.reserved
    }

    pub fn is_reserved_block(&self, block_id: u32) -> bool {
        self.blocks.info.get(block_id as usize).is_some_and(|b| b.state == BlockState::Reserved)
    }

    fn check_ppn(&self, ppn: u64) -> std::result::Result<(), PhysError> {
        if ppn >= self.geo.pages() {
            return Err(PhysError::OutOfRange(ppn));
        }
        Ok(())
    }

    /// Reads the sectors stored in physical page `ppn` into `out` (a whole page; empty: nothing is copied).
    pub fn read_page_data(&self, ppn: u64, out: &mut [u8]) -> Result<std::result::Result<PageData, PhysError>> {
        if let Err(e) = self.check_ppn(ppn) {
            return Ok(Err(e));
        }
        let spp = self.spp as usize;
        let sector = self.geo.sector_size as usize;
        if !out.is_empty() && out.len() != spp * sector {
            return Ok(Err(PhysError::TooLong { given: out.len(), max: spp * sector }));
        }
        let rec = Oob::new(self.store.oob.get(ppn), spp);
        let mut found = PageData { programmed: rec.is_programmed(), ..PageData::default() };
        for slot in 0..spp {
            if rec.present(slot) {
                found.present |= 1 << slot;
            }
            if out.is_empty() {
                continue;
            }
            let dst = &mut out[slot * sector..(slot + 1) * sector];
            if !rec.present(slot) {
                dst.fill(0);
                continue;
            }
            self.store.data.read_sector(ppn * spp as u64 + slot as u64, dst)?;
            if crc32fast::hash(dst) != rec.crc(slot) {
                found.corrupt |= 1 << slot;
            }
        }
        Ok(Ok(found))
    }

    /// Programs reserved page `ppn` with `data` (at most a page; the rest is zero) and `spare` (at most
    /// `SPARE_BYTES` per sector slot, in slot order). The page must be its block's next erased page.
    pub fn program_reserved(&mut self, ppn: u64, data: &[u8], spare: &[u8]) -> Result<std::result::Result<(), PhysError>> {
        if let Err(e) = self.check_ppn(ppn) {
            return Ok(Err(e));
        }
        let spp = self.spp as usize;
        let sector = self.geo.sector_size as usize;
        let block = (ppn / u64::from(self.geo.pages_per_block)) as u32;
        let page = (ppn % u64::from(self.geo.pages_per_block)) as u32;
        if !self.is_reserved_block(block) {
            return Ok(Err(PhysError::NotReserved(block)));
        }
        let next = self.blocks.info[block as usize].pages_written;
        if page != next {
            return Ok(Err(PhysError::OutOfOrder { ppn, next }));
        }
        if data.len() > spp * sector {
            return Ok(Err(PhysError::TooLong { given: data.len(), max: spp * sector }));
        }
        if spare.len() > spp * SPARE_BYTES {
            return Ok(Err(PhysError::TooLong { given: spare.len(), max: spp * SPARE_BYTES }));
        }
        let materialised = self.store.data.materialises();
        let mut present = 0;
        let mut crcs = [0u32; 32];
        let mut buf = vec![0u8; sector];
        for slot in 0..spp {
            let lo = (slot * sector).min(data.len());
            let hi = ((slot + 1) * sector).min(data.len());
            buf.fill(0);
            buf[..hi - lo].copy_from_slice(&data[lo..hi]);
            crcs[slot] = crc32fast::hash(&buf);
            if materialised && hi > lo {
                self.store.data.write_sector(ppn * spp as u64 + slot as u64, &buf)?;
                present |= 1 << slot;
            }
        }
        let seq = self.next_seq();
        let erase_count = self.blocks.info[block as usize].erase_count;
        let mut rec = OobMut::new(self.store.oob.get_mut(ppn), spp);
        for slot in 0..spp {
            rec.set_slot(slot, INVALID_LPN, crcs[slot]);
        }
        rec.ext_mut()[..spare.len()].copy_from_slice(spare);
        rec.set_header(seq, erase_count, present);
        self.spares_written |= !spare.is_empty();
        self.blocks.info[block as usize].pages_written = page + 1;
        self.stats.pages_programmed += 1;
        Ok(Ok(()))
    }

    /// Erases reserved block `block_id` (all its pages become programmable again).
    pub fn erase_reserved(&mut self, block_id: u32) -> Result<std::result::Result<(), PhysError>> {
        if !self.is_reserved_block(block_id) {
            return Ok(Err(if block_id >= self.geo.blocks() {
                PhysError::OutOfRange(self.geo.block_first_ppn(block_id))
            } else {
                PhysError::NotReserved(block_id)
            }));
        }
        let first = self.geo.block_first_ppn(block_id);
        let ppb = u64::from(self.geo.pages_per_block);
        self.store.oob.zero(first, ppb);
        self.store.data.punch(first, ppb)?;
        let info = &mut self.blocks.info[block_id as usize];
        info.erase_count += 1;
        info.pages_written = 0;
        self.stats.blocks_erased += 1;
        Ok(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{load_preset, DeviceConfig};
    use crate::engine::Time;
    use crate::ftl::Untimed;
    use crate::image::Image;

    fn ftl(reserved: u32) -> Ftl {
        let mut tree = load_preset("cosmos-plus").unwrap();
        for (k, v) in [("channels", "2"), ("chips_per_channel", "1"), ("blocks_per_plane", "64"), ("pages_per_block", "8"), ("over_provisioning", "25%")] {
            tree.set(k, v).unwrap();
        }
        tree.set("ext_reserved_blocks", &reserved.to_string()).unwrap();
        let cfg = DeviceConfig::from_tree(&tree).unwrap();
        Ftl::new(&cfg, Image::memory_store(&cfg, true, None).unwrap()).unwrap()
    }

    #[test]
    fn reserved_pages_program_in_order_read_back_and_erase() {
        let mut f = ftl(4);
        let bpp = f.geo.blocks_per_plane;
        let block = bpp - 1; // last block of plane 0
        let first = f.geo.block_first_ppn(block);
        let page = f.geo.page_size as usize;
        assert_eq!(f.program_reserved(first + 1, &[1], &[]).unwrap(), Err(PhysError::OutOfOrder { ppn: first + 1, next: 0 }));
        let data: Vec<u8> = (0..page).map(|i| (i % 251) as u8).collect();
        f.program_reserved(first, &data, &[9; 40]).unwrap().unwrap();
        assert_eq!(f.program_reserved(first, &data, &[]).unwrap(), Err(PhysError::OutOfOrder { ppn: first, next: 1 }));
        let mut out = vec![0u8; page];
        let got = f.read_page_data(first, &mut out).unwrap().unwrap();
        assert_eq!((got.programmed, got.present, got.corrupt), (true, 0b1111, 0));
        assert_eq!(out, data);
        assert_eq!(&f.oob(first).spare(1)[..8], &[9; 8]);
        assert_eq!(f.oob(first).lpn(0), INVALID_LPN);
        f.erase_reserved(block).unwrap().unwrap();
        assert!(!f.read_page_data(first, &mut out).unwrap().unwrap().programmed);
        assert!(out.iter().all(|&b| b == 0));
        f.program_reserved(first, &data[..10], &[]).unwrap().unwrap();
    }

    #[test]
    fn the_ftl_never_uses_reserved_blocks_and_extensions_never_touch_the_ftls() {
        let mut f = ftl(4);
        assert_eq!(f.program_reserved(0, &[1], &[]).unwrap(), Err(PhysError::NotReserved(0)));
        assert_eq!(f.erase_reserved(0).unwrap(), Err(PhysError::NotReserved(0)));
        assert!(matches!(f.program_reserved(f.geo.pages(), &[1], &[]).unwrap(), Err(PhysError::OutOfRange(_))));
        assert!(matches!(f.read_page_data(f.geo.pages(), &mut []).unwrap(), Err(PhysError::OutOfRange(_))));
        assert!(matches!(f.program_reserved(f.geo.block_first_ppn(63), &vec![0; 1 << 20], &[]).unwrap(), Err(PhysError::TooLong { .. })));
        // Fill the logical space twice over (GC runs); no mapping ever points into a reserved block.
        let n = f.logical_sectors() as u32;
        for round in 0..2 {
            for l in 0..n {
                f.write((l * 7 + round) % n, None, Time::ZERO, &mut Untimed).unwrap();
            }
        }
        f.flush(Time::ZERO, &mut Untimed);
        assert!(f.stats.gc_runs > 0);
        for l in 0..n {
            if let crate::ftl::Location::Flash(psa) = f.locate(l) {
                let block = (psa / u64::from(f.spp) / u64::from(f.geo.pages_per_block)) as u32;
                assert!(!f.is_reserved_block(block), "LBA {l} mapped into reserved block {block}");
            }
        }
        f.check_consistency().unwrap();
    }
}
