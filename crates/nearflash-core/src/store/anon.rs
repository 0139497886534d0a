//! Sector data of a device without an image directory, in one anonymous memory mapping: a read or write is a
//! `memcpy`, not a system call. The mapping reserves no swap (`MAP_NORESERVE`), so it costs only what is written.
//!
//! Memory is handed out a flash block at a time: a block's first write takes a block-sized slot of the mapping
//! (a slot freed by an erase, or a new one), and erasing the block returns its slot. Host memory thus follows the
//! blocks holding data, and a slot is reused hot instead of being given back to the kernel and faulted in (and
//! zeroed) again page by page, which in GC steady state cost more than the simulation itself. A reused slot keeps
//! the previous block's bytes in sectors not written since: the FTL reads only the sectors its OOB record marks
//! present (`Oob::present`), and a block without a slot reads as zeroes.
//!
//! Host memory is not unbounded: a write that needs a slot past the budget (the host's RAM, or less when asked)
//! fails with a "storage full" I/O error, as the data file on a full disk reports ENOSPC, instead of leaving the
//! process to the out-of-memory killer.

use crate::error::{Result, SimError};
use memmap2::{MmapMut, MmapOptions};

const NO_SLOT: u32 = u32::MAX;

/// The block-sized pieces of a run of sectors (see `AnonData::pieces`).
struct Pieces {
    at: u64,
    end: u64,
    block_sectors: u64,
    sector: usize,
}

impl Iterator for Pieces {
    type Item = (usize, usize, usize);
    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.end {
            return None;
        }
        let (block, first) = (self.at / self.block_sectors, self.at % self.block_sectors);
        let n = (self.end - self.at).min(self.block_sectors - first);
        self.at += n;
        Some((block as usize, first as usize * self.sector, n as usize * self.sector))
    }
}

pub struct AnonData {
    map: MmapMut,
    sector: usize,
    /// Sectors per flash block; bytes of a block (= of a slot).
    block_sectors: u64,
    block_bytes: usize,
    /// Per flash block: its slot of the mapping, or `NO_SLOT`.
    slot_of: Vec<u32>,
    free_slots: Vec<u32>,
    /// Slots handed out so far (the next new one).
    slots_used: u32,
    budget_slots: u64,
}

/// Bytes of RAM this host has (`sysinfo`); `u64::MAX` where it cannot be read.
fn host_ram() -> u64 {
    // SAFETY: sysinfo fills the struct it is given; a zeroed one is a valid starting value.
    let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::sysinfo(&mut info) } != 0 {
        return u64::MAX;
    }
    #[allow(clippy::useless_conversion)] // `c_ulong`: 32 bits on some hosts
    u64::from(info.totalram).saturating_mul(u64::from(info.mem_unit.max(1)))
}

impl AnonData {
    /// Maps `blocks` blocks of `pages_per_block` pages of `sectors_per_page` sectors; `budget` bytes of data at most
    /// (`None`: the host's RAM). Fails (for the caller to fall back on a data file) where the host refuses it.
    pub fn new(sector: u32, sectors_per_page: u32, pages_per_block: u32, blocks: u32, budget: Option<u64>) -> Result<Self> {
        let block_sectors = u64::from(sectors_per_page) * u64::from(pages_per_block);
        let block_bytes = block_sectors * u64::from(sector);
        let bytes = usize::try_from(block_bytes * u64::from(blocks))
            .map_err(|_| SimError::Config("data area too large for this host".into()))?;
        let map = MmapOptions::new().len(bytes.max(1)).no_reserve_swap().map_anon()?;
        // Huge pages: a slot's first writes fault 2 MiB at a time instead of 4 KiB (a fault per sector written into
        // a fresh block cost more than simulating the write), and random reads miss the TLB less. A hint, ignored
        // where unsupported.
        #[cfg(target_os = "linux")]
        let _ = map.advise(memmap2::Advice::HugePage);
        let budget = budget.unwrap_or_else(host_ram);
        Ok(AnonData {
            map,
            sector: sector as usize,
            block_sectors,
            block_bytes: block_bytes as usize,
            slot_of: vec![NO_SLOT; blocks as usize],
            free_slots: Vec::new(),
            slots_used: 0,
            budget_slots: budget / block_bytes.max(1),
        })
    }

    /// Bytes of host memory handed out to blocks holding data.
    pub fn resident_bytes(&self) -> u64 {
        (u64::from(self.slots_used) - self.free_slots.len() as u64) * self.block_bytes as u64
    }

    /// Splits `[psa, psa + len bytes)` at block boundaries: (block, byte offset in the block, bytes); refuses a
    /// range past the data area.
    fn pieces(&self, psa: u64, len: usize) -> Result<Pieces> {
        let sectors = (len / self.sector) as u64;
        if psa.checked_add(sectors).is_none_or(|e| e > self.slot_of.len() as u64 * self.block_sectors) {
            return Err(SimError::Fault(format!("sector {psa} (+{len} B) is beyond the data area")));
        }
        Ok(Pieces { at: psa, end: psa + sectors, block_sectors: self.block_sectors, sector: self.sector })
    }

    /// The slot of `block`, taking one if it has none (refused past the budget).
    fn slot_for_write(&mut self, block: usize) -> Result<usize> {
        let s = self.slot_of[block];
        if s != NO_SLOT {
            return Ok(s as usize);
        }
        let s = match self.free_slots.pop() {
            Some(s) => s,
            None if u64::from(self.slots_used) < self.budget_slots => {
                self.slots_used += 1;
                self.slots_used - 1
            }
            None => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::StorageFull,
                    format!(
                        "in-memory device data is full: {} MiB of host memory hold written blocks, the most its limit \
                         ({} MiB: the host's RAM or memory_limit) allows; create the device with an image directory \
                         to keep more",
                        self.resident_bytes() >> 20,
                        (self.budget_slots * self.block_bytes as u64) >> 20
                    ),
                )
                .into())
            }
        };
        self.slot_of[block] = s;
        Ok(s as usize)
    }

    /// Stores whole sectors from `psa` (`data` a multiple of the sector size).
    pub fn write(&mut self, psa: u64, data: &[u8]) -> Result<()> {
        let mut done = 0;
        for (block, off, n) in self.pieces(psa, data.len())? {
            let at = self.slot_for_write(block)? * self.block_bytes + off;
            self.map[at..at + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
        Ok(())
    }

    /// Reads sectors from `psa` into `out` (sectors of a block without a slot read as zeroes).
    pub fn read(&self, psa: u64, out: &mut [u8]) -> Result<()> {
        let mut done = 0;
        for (block, off, n) in self.pieces(psa, out.len())? {
            let dst = &mut out[done..done + n];
            match self.slot_of[block] {
                NO_SLOT => dst.fill(0),
                s => {
                    let at = s as usize * self.block_bytes + off;
                    dst.copy_from_slice(&self.map[at..at + n]);
                }
            }
            done += n;
        }
        Ok(())
    }

    /// Starts loading sector `psa` into the CPU cache (a hint; nothing for sectors of blocks without a slot).
    #[inline]
    pub fn prefetch(&self, psa: u64) {
        let block = (psa / self.block_sectors) as usize;
        match self.slot_of.get(block) {
            Some(&s) if s != NO_SLOT => {
                let at = s as usize * self.block_bytes + (psa % self.block_sectors) as usize * self.sector;
                // The first lines only: the hardware prefetcher streams the rest of the sector once the copy starts,
                // and a prefetch per line of a 4 KiB sector would fill the CPU's miss buffers and stall.
                super::mapped::prefetch_bytes(&self.map[at..], self.sector.min(256));
            }
            _ => {}
        }
    }

    /// Copies one sector from `from` to `to` (GC).
    pub fn copy(&mut self, from: u64, to: u64) -> Result<()> {
        let (fb, foff, n) = self.pieces(from, self.sector)?.next().expect("one sector");
        let (tb, toff, _) = self.pieces(to, self.sector)?.next().expect("one sector");
        let dst = self.slot_for_write(tb)? * self.block_bytes + toff;
        match self.slot_of[fb] {
            NO_SLOT => self.map[dst..dst + n].fill(0),
            s => {
                let src = s as usize * self.block_bytes + foff;
                self.map.copy_within(src..src + n, dst);
            }
        }
        Ok(())
    }

    /// Erases `block`: its slot goes back to the pool (its sectors read as zeroes until written again).
    pub fn discard_block(&mut self, block: u64) -> Result<()> {
        let b = usize::try_from(block).ok().filter(|&b| b < self.slot_of.len());
        let b = b.ok_or_else(|| SimError::Fault(format!("block {block} is beyond the data area")))?;
        let s = std::mem::replace(&mut self.slot_of[b], NO_SLOT);
        if s != NO_SLOT {
            self.free_slots.push(s);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // 512-byte sectors, 4 per page, 4 pages per block (8 KiB blocks).
    fn store(blocks: u32, budget: Option<u64>) -> AnonData {
        AnonData::new(512, 4, 4, blocks, budget).unwrap()
    }

    #[test]
    fn sectors_round_trip_across_blocks_and_copy() {
        let mut d = store(16, None);
        let a: Vec<u8> = (0..1024).map(|i| (i % 251) as u8).collect();
        d.write(15, &a).unwrap(); // sectors 15 (block 0) and 16 (block 1)
        let mut out = vec![0u8; 1024];
        d.read(15, &mut out).unwrap();
        assert_eq!(out, a);
        d.copy(16, 40).unwrap(); // block 2
        d.read(40, &mut out[..512]).unwrap();
        assert_eq!(&out[..512], &a[512..]);
        assert_eq!(d.resident_bytes(), 3 * 8192);
        let mut z = vec![9u8; 512];
        d.read(100, &mut z).unwrap();
        assert!(z.iter().all(|&b| b == 0), "a block never written reads as zeroes");
        assert!(d.read(16 * 16, &mut z).is_err(), "past the data area is a fault, not a panic");
        assert!(d.write(16 * 16 - 1, &a).is_err());
        assert!(d.discard_block(16).is_err());
    }

    #[test]
    fn erased_blocks_give_their_memory_to_the_next_block_written() {
        let mut d = store(16, None);
        d.write(0, &[1u8; 512]).unwrap();
        d.discard_block(0).unwrap();
        let mut out = vec![7u8; 512];
        d.read(0, &mut out).unwrap();
        assert!(out.iter().all(|&b| b == 0), "an erased block reads as zeroes");
        assert_eq!(d.resident_bytes(), 0);
        d.write(5 * 16, &[2u8; 512]).unwrap(); // block 5 takes the freed slot
        assert_eq!((d.resident_bytes(), d.slots_used), (8192, 1));
        d.read(5 * 16, &mut out).unwrap();
        assert_eq!(out, vec![2u8; 512]);
    }

    #[test]
    fn writes_past_the_budget_fail_as_storage_full_and_store_nothing() {
        let mut d = store(16, Some(3 * 8192));
        let s = vec![1u8; 512];
        for b in 0..3u64 {
            d.write(b * 16, &s).unwrap();
            d.write(b * 16 + 1, &s).unwrap(); // same block: no new memory
        }
        let e = d.write(3 * 16, &s).unwrap_err();
        match &e {
            SimError::Io(io) => assert_eq!(io.kind(), std::io::ErrorKind::StorageFull),
            other => panic!("expected an I/O error, got {other}"),
        }
        assert!(e.to_string().contains("image directory"), "{e}");
        let mut out = vec![9u8; 512];
        d.read(3 * 16, &mut out).unwrap();
        assert!(out.iter().all(|&b| b == 0), "the refused write stored nothing");
        assert!(d.copy(0, 3 * 16).is_err(), "GC copies count too");
        d.discard_block(0).unwrap(); // erasing frees room
        d.write(3 * 16, &s).unwrap();
    }

    #[test]
    fn a_huge_sparse_area_costs_nothing_until_written() {
        // 1 TiB of flash in 4 MiB blocks: mapped without reserving memory.
        let mut d = AnonData::new(4096, 4, 256, 1 << 18, None).unwrap();
        d.write((1u64 << 40) / 4096 - 1, &[3u8; 4096]).unwrap();
        assert_eq!(d.resident_bytes(), 4 << 20);
    }
}
