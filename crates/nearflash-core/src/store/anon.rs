//! Sector data of a device without an image directory, in one anonymous memory mapping of the whole data area
//! (`psa * sector`): a read or write is a `memcpy`, not a system call. The mapping reserves no swap
//! (`MAP_NORESERVE`), so it costs only the pages written; erasing a block gives its pages back (`MADV_DONTNEED`,
//! after which they read as zeroes, as a punched hole of the data file does).
//!
//! Host memory is not unbounded: the store counts the flash pages holding data and refuses a write that would take
//! it past its budget (the host's RAM, or less when asked) with a "storage full" I/O error, as the data file on a
//! full disk reports ENOSPC, instead of leaving the process to the out-of-memory killer.

use crate::error::{Result, SimError};
use memmap2::{MmapMut, MmapOptions, UncheckedAdvice};

pub struct AnonData {
    map: MmapMut,
    sector: usize,
    page: usize,
    /// One bit per flash page: the page holds data (its host memory may be resident).
    touched: Vec<u64>,
    resident_pages: u64,
    budget_pages: u64,
}

/// Bytes of RAM this host has (`sysinfo`); `u64::MAX` where it cannot be read.
fn host_ram() -> u64 {
    // SAFETY: sysinfo fills the struct it is given; a zeroed one is a valid starting value.
    let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::sysinfo(&mut info) } != 0 {
        return u64::MAX;
    }
    u64::from(info.totalram).saturating_mul(u64::from(info.mem_unit.max(1)))
}

impl AnonData {
    /// Maps `pages` pages of `sectors_per_page` sectors; `budget` bytes of data at most (`None`: the host's RAM).
    /// Fails (for the caller to fall back on a data file) where the host refuses the mapping.
    pub fn new(sector: u32, sectors_per_page: u32, pages: u64, budget: Option<u64>) -> Result<Self> {
        let page = u64::from(sector) * u64::from(sectors_per_page);
        let bytes = usize::try_from(page * pages).map_err(|_| SimError::Config("data area too large for this host".into()))?;
        let map = MmapOptions::new().len(bytes.max(1)).no_reserve_swap().map_anon()?;
        let budget = budget.unwrap_or_else(host_ram);
        Ok(AnonData {
            map,
            sector: sector as usize,
            page: page as usize,
            touched: vec![0; pages.div_ceil(64) as usize],
            resident_pages: 0,
            budget_pages: budget / page.max(1),
        })
    }

    /// Bytes of data held (whole flash pages).
    pub fn resident_bytes(&self) -> u64 {
        self.resident_pages * self.page as u64
    }

    /// Marks the flash pages of `[off, off + len)` as holding data, refusing to go past the budget.
    #[inline]
    fn touch(&mut self, off: usize, len: usize) -> Result<()> {
        for ppn in off / self.page..(off + len).div_ceil(self.page) {
            let (w, b) = (ppn / 64, 1u64 << (ppn % 64));
            if self.touched[w] & b != 0 {
                continue;
            }
            if self.resident_pages >= self.budget_pages {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::StorageFull,
                    format!(
                        "in-memory device data is full: {} MiB of host memory hold written pages (the limit is the \
                         host's RAM); create the device with an image directory to keep more",
                        self.resident_bytes() >> 20
                    ),
                )
                .into());
            }
            self.touched[w] |= b;
            self.resident_pages += 1;
        }
        Ok(())
    }

    fn range(&self, psa: u64, len: usize) -> Result<usize> {
        let off = usize::try_from(psa).ok().and_then(|p| p.checked_mul(self.sector));
        match off {
            Some(o) if o.checked_add(len).is_some_and(|e| e <= self.map.len()) => Ok(o),
            _ => Err(SimError::Fault(format!("sector {psa} (+{len} B) is beyond the data area"))),
        }
    }

    /// Stores whole sectors from `psa` (`data` a multiple of the sector size).
    pub fn write(&mut self, psa: u64, data: &[u8]) -> Result<()> {
        let off = self.range(psa, data.len())?;
        self.touch(off, data.len())?;
        self.map[off..off + data.len()].copy_from_slice(data);
        Ok(())
    }

    /// Reads sectors from `psa` into `out` (never-written sectors read as zeroes).
    pub fn read(&self, psa: u64, out: &mut [u8]) -> Result<()> {
        let off = self.range(psa, out.len())?;
        out.copy_from_slice(&self.map[off..off + out.len()]);
        Ok(())
    }

    /// Copies `sectors` sectors from `from` to `to` (non-overlapping).
    pub fn copy(&mut self, from: u64, to: u64, sectors: usize) -> Result<()> {
        let len = sectors * self.sector;
        let (src, dst) = (self.range(from, len)?, self.range(to, len)?);
        self.touch(dst, len)?;
        self.map.copy_within(src..src + len, dst);
        Ok(())
    }

    /// Gives back the memory of `pages` flash pages from `first_ppn` (block erase); they read as zeroes after.
    pub fn discard(&mut self, first_ppn: u64, pages: u64) -> Result<()> {
        let (first, n) = (first_ppn as usize, pages as usize);
        let len = n * self.page;
        let off = self.range(first_ppn * (self.page / self.sector) as u64, len)?;
        let mut held = 0;
        for ppn in first..first + n {
            let (w, b) = (ppn / 64, 1u64 << (ppn % 64));
            if self.touched[w] & b != 0 {
                self.touched[w] &= !b;
                held += 1;
            }
        }
        if held == 0 {
            return Ok(());
        }
        self.resident_pages -= held;
        // SAFETY: MADV_DONTNEED on a private anonymous mapping only zeroes the range; no reference into it is held
        // (every access goes through `&self`/`&mut self` of this store and ends before this call).
        unsafe { self.map.unchecked_advise_range(UncheckedAdvice::DontNeed, off, len)? };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sectors_round_trip_copy_and_read_zero_after_discard() {
        // 4 sectors of 512 B per page, 64 pages.
        let mut d = AnonData::new(512, 4, 64, None).unwrap();
        let a = vec![7u8; 1024];
        d.write(5, &a).unwrap(); // sectors 5 and 6: pages 1 (slots 1, 2)
        let mut out = vec![0u8; 1024];
        d.read(5, &mut out).unwrap();
        assert_eq!(out, a);
        d.copy(5, 40, 2).unwrap(); // into page 10
        d.read(40, &mut out).unwrap();
        assert_eq!(out, a);
        assert_eq!(d.resident_bytes(), 2 * 2048);
        d.discard(0, 4).unwrap(); // pages 0..4 (block of 4 pages)
        d.read(5, &mut out).unwrap();
        assert!(out.iter().all(|&b| b == 0), "a discarded page reads as zeroes");
        d.read(40, &mut out).unwrap();
        assert_eq!(out, a, "other blocks keep their data");
        assert_eq!(d.resident_bytes(), 2048);
        assert!(d.read(64 * 4, &mut out).is_err(), "past the data area is a fault, not a panic");
        assert!(d.write(64 * 4 - 1, &a).is_err());
    }

    #[test]
    fn writes_past_the_budget_fail_as_storage_full_and_store_nothing() {
        let mut d = AnonData::new(512, 4, 64, Some(3 * 2048)).unwrap();
        let s = vec![1u8; 512];
        for p in 0..3u64 {
            d.write(p * 4, &s).unwrap();
            d.write(p * 4 + 1, &s).unwrap(); // same page: no new memory
        }
        let e = d.write(12, &s).unwrap_err();
        match &e {
            SimError::Io(io) => assert_eq!(io.kind(), std::io::ErrorKind::StorageFull),
            other => panic!("expected an I/O error, got {other}"),
        }
        assert!(e.to_string().contains("image directory"), "{e}");
        let mut out = vec![9u8; 512];
        d.read(12, &mut out).unwrap();
        assert!(out.iter().all(|&b| b == 0), "the refused write stored nothing");
        assert!(d.copy(0, 12, 1).is_err(), "GC copies count too");
        d.discard(0, 4).unwrap(); // erasing frees room
        d.write(12, &s).unwrap();
    }

    #[test]
    fn a_huge_sparse_area_costs_nothing_until_written() {
        // 1 TiB of flash: mapped without reserving memory.
        let mut d = AnonData::new(4096, 4, (1u64 << 40) / 16384, None).unwrap();
        d.write((1u64 << 40) / 4096 - 1, &[3u8; 4096]).unwrap();
        assert_eq!(d.resident_bytes(), 16384);
    }
}
