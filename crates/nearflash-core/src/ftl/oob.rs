//! The out-of-band (spare) area record written with every flash page.
//!
//! Layout (little endian): `seq: u64`, `erase_count: u32`, `present: u32` (bit i: slot i holds stored data),
//! `record_crc: u32`, 4 reserved bytes, then per sector slot `lpn: u32` (`INVALID_LPN` for padding or a stale
//! slot), then per slot `crc: u32`, then per slot `SPARE_BYTES` that firmware extensions write with the sector's
//! data (NICE keeps file links there; GC carries them with the sector). The sequence number orders pages for
//! recovery (0 = never programmed); the LPNs make the page self-describing (reverse map for GC and recovery); the
//! slot CRCs catch data that would otherwise be returned corrupted; the record CRC (over everything but itself and
//! the extension bytes; `super::record_crc`) catches a damaged record. The sequence number is stored last, in one
//! aligned 8-byte store, so a record interrupted by a kill still reads as never programmed.

use super::record_crc::record_crc;

/// Bytes of the fixed header.
pub const HEADER_BYTES: usize = 24;

/// Spare bytes per sector slot reserved for firmware extensions (written with the sector, moved with it by GC).
pub const SPARE_BYTES: usize = 32;

/// The LPN of a slot that holds no live sector.
pub const INVALID_LPN: u32 = u32::MAX;

/// Bytes the record needs for `sectors` sector slots (before extension spare bytes).
pub const fn record_bytes(sectors: usize) -> usize {
    HEADER_BYTES + sectors * 8
}

/// Stride of one page's record in the OOB store.
pub const fn stride(sectors: usize) -> usize {
    record_bytes(sectors) + sectors * SPARE_BYTES
}

#[inline]
fn rd32(b: &[u8], o: usize) -> u32 {
    // One bounds check for the four bytes (indexing them one by one checked each: ~19 instructions a read, GC's scan
    // of a victim page reads a dozen).
    u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"))
}

#[inline]
fn wr32(b: &mut [u8], o: usize, v: u32) {
    b[o..o + 4].copy_from_slice(&v.to_le_bytes());
}

/// Read access to a record.
#[derive(Clone, Copy)]
pub struct Oob<'a> {
    b: &'a [u8],
    spp: usize,
}

impl<'a> Oob<'a> {
    #[inline]
    pub fn new(b: &'a [u8], spp: usize) -> Self {
        Oob { b, spp }
    }

    #[inline]
    pub fn seq(&self) -> u64 {
        u64::from_le_bytes(self.b[0..8].try_into().expect("8 bytes"))
    }

    pub fn erase_count(&self) -> u32 {
        rd32(self.b, 8)
    }

    #[inline]
    pub fn present(&self, slot: usize) -> bool {
        rd32(self.b, 12) & (1 << slot) != 0
    }

    #[inline]
    pub fn lpn(&self, slot: usize) -> u32 {
        rd32(self.b, HEADER_BYTES + slot * 4)
    }

    /// Every slot's LPN, in slot order (one bounds check for all).
    #[inline]
    pub fn lpns(&self) -> impl Iterator<Item = u32> + 'a {
        self.b[HEADER_BYTES..HEADER_BYTES + self.spp * 4].chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
    }

    #[inline]
    pub fn crc(&self, slot: usize) -> u32 {
        rd32(self.b, HEADER_BYTES + self.spp * 4 + slot * 4)
    }

    /// The extension spare bytes of every slot (`SPARE_BYTES` per slot, in slot order).
    pub fn ext(&self) -> &'a [u8] {
        &self.b[record_bytes(self.spp)..]
    }

    /// The extension spare bytes of one slot.
    #[inline]
    pub fn spare(&self, slot: usize) -> &'a [u8] {
        let o = record_bytes(self.spp) + slot * SPARE_BYTES;
        &self.b[o..o + SPARE_BYTES]
    }

    #[inline]
    pub fn is_programmed(&self) -> bool {
        self.seq() != 0
    }

    /// Whether the record matches its checksum (a never-programmed record has none to match).
    pub fn crc_ok(&self) -> bool {
        record_crc(self.seq(), self.b, self.spp) == rd32(self.b, 16)
    }
}

/// Write access to a record.
pub struct OobMut<'a> {
    b: &'a mut [u8],
    spp: usize,
}

impl<'a> OobMut<'a> {
    #[inline]
    pub fn new(b: &'a mut [u8], spp: usize) -> Self {
        OobMut { b, spp }
    }

    /// Completes the record after its slots are set: header fields, checksum, and the sequence number last.
    /// Inlined: `Ftl::program` completes a record per page programmed (`#[inline]` was not taken; the call cost a
    /// GC-steady write ~17 instructions).
    #[inline(always)]
    pub fn set_header(&mut self, seq: u64, erase_count: u32, present_mask: u32) {
        wr32(self.b, 8, erase_count);
        wr32(self.b, 12, present_mask);
        let crc = record_crc(seq, self.b, self.spp);
        wr32(self.b, 16, crc);
        let p = self.b.as_mut_ptr().cast::<u64>();
        if p.is_aligned() {
            // SAFETY: `p` points at the record's first 8 bytes, which are in bounds and aligned; one volatile store
            // so that the record becomes visible as programmed all at once.
            unsafe { std::ptr::write_volatile(p, seq.to_le()) };
        } else {
            self.b[0..8].copy_from_slice(&seq.to_le_bytes());
        }
    }

    #[inline]
    pub fn set_slot(&mut self, slot: usize, lpn: u32, crc: u32) {
        wr32(self.b, HEADER_BYTES + slot * 4, lpn);
        wr32(self.b, HEADER_BYTES + self.spp * 4 + slot * 4, crc);
    }

    /// Every slot of the record at once: slot `i` gets the `i`th of `slots` (LPN, data CRC) where bit `i` of
    /// `current` is set, else `INVALID_LPN` and 0 (padding, or a stale copy). One bounds check for the record's
    /// two arrays, where a `set_slot` a slot checked each store (a programmed page's record, every page).
    #[inline]
    pub fn set_slots(&mut self, current: u32, slots: impl Iterator<Item = (u32, u32)>) {
        let (lpns, crcs) = self.b[HEADER_BYTES..HEADER_BYTES + self.spp * 8].split_at_mut(self.spp * 4);
        for (slot, ((l, c), (lpn, crc))) in lpns.chunks_exact_mut(4).zip(crcs.chunks_exact_mut(4)).zip(slots).enumerate() {
            let (lpn, crc) = if current & (1 << slot) != 0 { (lpn, crc) } else { (INVALID_LPN, 0) };
            l.copy_from_slice(&lpn.to_le_bytes());
            c.copy_from_slice(&crc.to_le_bytes());
        }
    }

    pub fn ext_mut(&mut self) -> &mut [u8] {
        let o = record_bytes(self.spp);
        &mut self.b[o..]
    }

    #[inline]
    pub fn set_spare(&mut self, slot: usize, bytes: &[u8; SPARE_BYTES]) {
        let o = record_bytes(self.spp) + slot * SPARE_BYTES;
        self.b[o..o + SPARE_BYTES].copy_from_slice(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trips() {
        let spp = 4;
        let mut buf = vec![0u8; stride(spp)];
        assert!(!Oob::new(&buf, spp).is_programmed());
        let mut w = OobMut::new(&mut buf, spp);
        w.set_slot(0, 100, 0xdead_beef);
        w.set_slot(3, INVALID_LPN, 0);
        w.set_header(42, 7, 0b0101);
        w.ext_mut()[0] = 9;
        w.set_spare(2, &[7; SPARE_BYTES]);
        let r = Oob::new(&buf, spp);
        assert!(r.crc_ok());
        assert_eq!((r.seq(), r.erase_count()), (42, 7));
        assert!(r.present(0) && !r.present(1) && r.present(2));
        assert_eq!((r.lpn(0), r.crc(0), r.lpn(3)), (100, 0xdead_beef, INVALID_LPN));
        assert_eq!(r.ext()[0], 9);
        assert_eq!(r.ext().len(), spp * SPARE_BYTES);
        assert_eq!((r.spare(0)[0], r.spare(2), r.spare(3)[0]), (9, &[7; SPARE_BYTES][..], 0));
        // Any flipped byte of the record (not the extension bytes) fails the checksum.
        for i in 0..record_bytes(spp) {
            let mut d = buf.clone();
            d[i] ^= 0x10;
            assert!(!Oob::new(&d, spp).crc_ok(), "byte {i}");
        }
        let mut d = buf.clone();
        d[record_bytes(spp)] ^= 1;
        assert!(Oob::new(&d, spp).crc_ok(), "extension bytes are the extension's");
    }

    /// `set_slots` writes what `set_slot` of each slot would (the current slots' LPN and CRC, the others
    /// `INVALID_LPN` and 0), for every slot count and mask tried, and leaves the header and extension bytes alone.
    #[test]
    fn set_slots_equals_a_set_slot_per_slot() {
        for spp in [1usize, 2, 4, 8, 16, 32] {
            for current in [0u32, 1, 0b1010, 0x8000_0001, u32::MAX, 0x5555_5555] {
                let slots: Vec<(u32, u32)> = (0..spp as u32).map(|i| (1000 + i, 0xc0de_0000 | i)).collect();
                let fill = |i: usize| (i * 13 + spp) as u8;
                let (mut one, mut each) = (vec![0u8; stride(spp)], vec![0u8; stride(spp)]);
                one.iter_mut().chain(each.iter_mut()).enumerate().for_each(|(i, b)| *b = fill(i % stride(spp)));
                OobMut::new(&mut one, spp).set_slots(current, slots.iter().copied());
                let mut w = OobMut::new(&mut each, spp);
                for (slot, &(lpn, crc)) in slots.iter().enumerate() {
                    let keep = current & (1 << slot) != 0;
                    w.set_slot(slot, if keep { lpn } else { INVALID_LPN }, if keep { crc } else { 0 });
                }
                assert_eq!(one, each, "spp {spp}, mask {current:#x}");
            }
        }
    }

    /// The checksum is CRC-32 (IEEE) of seq, bytes 8..16 and bytes 20..record_bytes, in that order (the format that
    /// images on disk carry), for every slot count a page can have.
    #[test]
    fn record_crc_is_the_documented_concatenation() {
        for spp in [1usize, 2, 4, 8, 16, 32] {
            let mut b: Vec<u8> = (0..stride(spp)).map(|i| (i * 37 + spp) as u8).collect();
            let seq = 0x0123_4567_89ab_cdef_u64 ^ spp as u64;
            let mut expect = seq.to_le_bytes().to_vec();
            expect.extend_from_slice(&b[8..16]);
            expect.extend_from_slice(&b[20..record_bytes(spp)]);
            assert_eq!(record_crc(seq, &b, spp), crc32fast::hash(&expect), "spp {spp}");
            b[16] ^= 0xff; // the stored checksum itself is not covered
            assert_eq!(record_crc(seq, &b, spp), crc32fast::hash(&expect), "spp {spp}");
        }
    }
}
