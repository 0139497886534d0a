//! The out-of-band (spare) area record written with every flash page.
//!
//! Layout (little endian): `seq: u64`, `erase_count: u32`, `present: u32` (bit i: slot i holds stored data), then
//! per sector slot `lpn: u32` (`INVALID_LPN` for padding or a stale slot), then per slot `crc: u32`, then per slot
//! `SPARE_BYTES` that firmware extensions write with the sector's data (NICE keeps file links there); GC carries
//! them with the sector. The sequence number orders pages for recovery (0 = never programmed); the LPNs make the
//! page self-describing (reverse map for GC and recovery); the CRCs catch data that would otherwise be returned
//! corrupted.

/// Bytes of the fixed header.
pub const HEADER_BYTES: usize = 16;

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
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
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
    pub fn new(b: &'a [u8], spp: usize) -> Self {
        Oob { b, spp }
    }

    pub fn seq(&self) -> u64 {
        u64::from_le_bytes(self.b[0..8].try_into().expect("8 bytes"))
    }

    pub fn erase_count(&self) -> u32 {
        rd32(self.b, 8)
    }

    pub fn present(&self, slot: usize) -> bool {
        rd32(self.b, 12) & (1 << slot) != 0
    }

    pub fn lpn(&self, slot: usize) -> u32 {
        rd32(self.b, HEADER_BYTES + slot * 4)
    }

    pub fn crc(&self, slot: usize) -> u32 {
        rd32(self.b, HEADER_BYTES + self.spp * 4 + slot * 4)
    }

    /// The extension spare bytes of every slot (`SPARE_BYTES` per slot, in slot order).
    pub fn ext(&self) -> &'a [u8] {
        &self.b[record_bytes(self.spp)..]
    }

    /// The extension spare bytes of one slot.
    pub fn spare(&self, slot: usize) -> &'a [u8] {
        let o = record_bytes(self.spp) + slot * SPARE_BYTES;
        &self.b[o..o + SPARE_BYTES]
    }

    pub fn is_programmed(&self) -> bool {
        self.seq() != 0
    }
}

/// Write access to a record.
pub struct OobMut<'a> {
    b: &'a mut [u8],
    spp: usize,
}

impl<'a> OobMut<'a> {
    pub fn new(b: &'a mut [u8], spp: usize) -> Self {
        OobMut { b, spp }
    }

    pub fn set_header(&mut self, seq: u64, erase_count: u32, present_mask: u32) {
        self.b[0..8].copy_from_slice(&seq.to_le_bytes());
        wr32(self.b, 8, erase_count);
        wr32(self.b, 12, present_mask);
    }

    pub fn set_slot(&mut self, slot: usize, lpn: u32, crc: u32) {
        wr32(self.b, HEADER_BYTES + slot * 4, lpn);
        wr32(self.b, HEADER_BYTES + self.spp * 4 + slot * 4, crc);
    }

    pub fn ext_mut(&mut self) -> &mut [u8] {
        let o = record_bytes(self.spp);
        &mut self.b[o..]
    }

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
        w.set_header(42, 7, 0b0101);
        w.set_slot(0, 100, 0xdead_beef);
        w.set_slot(3, INVALID_LPN, 0);
        w.ext_mut()[0] = 9;
        w.set_spare(2, &[7; SPARE_BYTES]);
        let r = Oob::new(&buf, spp);
        assert_eq!((r.seq(), r.erase_count()), (42, 7));
        assert!(r.present(0) && !r.present(1) && r.present(2));
        assert_eq!((r.lpn(0), r.crc(0), r.lpn(3)), (100, 0xdead_beef, INVALID_LPN));
        assert_eq!(r.ext()[0], 9);
        assert_eq!(r.ext().len(), spp * SPARE_BYTES);
        assert_eq!((r.spare(0)[0], r.spare(2), r.spare(3)[0]), (9, &[7; SPARE_BYTES][..], 0));
    }
}
