//! The data area: sector contents at their physical addresses (`ppn * page_size + slot * sector`), in a sparse
//! file for an image, or in anonymous memory for a device without one (`anon`).
//!
//! Erasing a block punches a hole (or gives the memory back), so the store occupies only live data. A device
//! without materialised data (timing-only mode, for sweeps) stores nothing: reads return zeroes. Runs of
//! consecutive sectors move in one system call (`read_sectors`, `write_sectors`), so a page costs one call.

use super::anon::AnonData;
use super::header::{FileHeader, HEADER_SPAN};
use super::mapped::missing;
use crate::error::{Result, SimError};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

enum Backing {
    None,
    File(File),
    Memory(AnonData),
}

pub struct DataStore {
    backing: Backing,
    sector: u64,
    page: u64,
    /// File-backed GC copies: the source page last read whole (ppn, bytes), and the run of consecutive destination
    /// sectors not yet written (first PSA, bytes; written by `flush_copies`, before the page holding them is
    /// programmed).
    copy_src: Option<(u64, Vec<u8>)>,
    copy_run: (u64, Vec<u8>),
}

impl DataStore {
    /// Creates the sparse data file (`header.count` pages of `header.record` bytes after the header).
    pub fn create(path: &Path, header: &FileHeader, sector: u32) -> Result<Self> {
        let file = OpenOptions::new().read(true).write(true).create_new(true).open(path)?;
        header.write_to(&file)?;
        file.set_len(HEADER_SPAN + u64::from(header.record) * header.count)?;
        Ok(Self::with(Backing::File(file), sector, header.record))
    }

    /// Opens an existing data file after checking its header and length.
    pub fn open(path: &Path, header: &FileHeader, sector: u32) -> Result<Self> {
        let file = OpenOptions::new().read(true).write(true).open(path).map_err(|e| missing(path, &e))?;
        header.check_file(path, &file)?;
        let want = HEADER_SPAN + u64::from(header.record) * header.count;
        let have = file.metadata()?.len();
        if have != want {
            return Err(SimError::Image(format!(
                "data.bin: {have} bytes, expected {want} (truncated or extended; see `nearflash repair`) ({})",
                path.display()
            )));
        }
        Ok(Self::with(Backing::File(file), sector, header.record))
    }

    /// An unnamed data file (devices without an image directory, where anonymous memory cannot be mapped).
    pub fn unnamed(sector: u32, page: u32) -> Result<Self> {
        let file = tempfile::tempfile()?;
        file.set_len(HEADER_SPAN)?;
        Ok(Self::with(Backing::File(file), sector, page))
    }

    /// Anonymous memory for `blocks` blocks (devices without an image directory); falls back on an unnamed data file
    /// where the host refuses so large a mapping (e.g. strict overcommit). `budget`: bytes of data at most (`None`:
    /// the host's RAM).
    pub fn memory(sector: u32, page: u32, pages_per_block: u32, blocks: u32, budget: Option<u64>) -> Result<Self> {
        match AnonData::new(sector, page / sector.max(1), pages_per_block, blocks, budget) {
            Ok(m) => Ok(Self::with(Backing::Memory(m), sector, page)),
            Err(_) => Self::unnamed(sector, page),
        }
    }

    fn with(backing: Backing, sector: u32, page: u32) -> Self {
        let (sector, page) = (u64::from(sector), u64::from(page));
        DataStore { backing, sector, page, copy_src: None, copy_run: (0, Vec::new()) }
    }

    /// A store that keeps nothing (timing-only devices).
    pub fn none(sector: u32, page: u32) -> Self {
        Self::with(Backing::None, sector, page)
    }

    pub fn materialises(&self) -> bool {
        !matches!(self.backing, Backing::None)
    }

    /// Whether the bytes live in this process's memory only (nothing outside it can change them).
    pub fn in_memory(&self) -> bool {
        matches!(self.backing, Backing::Memory(_))
    }

    pub fn write_sector(&mut self, psa: u64, data: &[u8]) -> Result<()> {
        debug_assert_eq!(data.len() as u64, self.sector);
        self.write_sectors(psa, data)
    }

    /// Writes whole sectors from `psa` (a run of consecutive physical sectors) with one call.
    pub fn write_sectors(&mut self, psa: u64, data: &[u8]) -> Result<()> {
        debug_assert_eq!(data.len() as u64 % self.sector, 0);
        if let Some((p, _)) = &self.copy_src {
            let spp = self.page / self.sector;
            let (lo, hi) = (p * spp, (p + 1) * spp);
            if psa < hi && psa + data.len() as u64 / self.sector > lo {
                self.copy_src = None;
            }
        }
        match &mut self.backing {
            Backing::None => Ok(()),
            Backing::File(f) => Ok(f.write_all_at(data, HEADER_SPAN + psa * self.sector)?),
            Backing::Memory(m) => m.write(psa, data),
        }
    }

    /// Starts loading sector `psa` into the CPU cache where it is in memory (a hint; nothing for files).
    #[inline]
    pub fn prefetch(&self, psa: u64) {
        if let Backing::Memory(m) = &self.backing {
            m.prefetch(psa);
        }
    }

    /// Reads a sector; holes read as zeroes.
    pub fn read_sector(&self, psa: u64, out: &mut [u8]) -> Result<()> {
        self.read_sectors(psa, out)
    }

    /// Reads a run of consecutive sectors from `psa` into `out` with one call; holes read as zeroes.
    pub fn read_sectors(&self, psa: u64, out: &mut [u8]) -> Result<()> {
        match &self.backing {
            Backing::File(f) => {
                let mut done = 0;
                while done < out.len() {
                    let n = f.read_at(&mut out[done..], HEADER_SPAN + psa * self.sector + done as u64)?;
                    if n == 0 {
                        out[done..].fill(0); // past the end of the sparse file
                        break;
                    }
                    done += n;
                }
            }
            Backing::Memory(m) => m.read(psa, out)?,
            Backing::None => out.fill(0),
        }
        Ok(())
    }

    /// Copies a sector (GC). In a data file the source page is read whole once and consecutive destinations are
    /// gathered into one write: call `flush_copies` before the destination page is programmed.
    pub fn copy_sector(&mut self, from: u64, to: u64) -> Result<()> {
        match &mut self.backing {
            Backing::None => Ok(()),
            Backing::Memory(m) => m.copy(from, to),
            Backing::File(_) => {
                let (spp, sector) = (self.page / self.sector, self.sector as usize);
                let ppn = from / spp;
                if self.copy_src.as_ref().is_none_or(|(p, _)| *p != ppn) {
                    let mut buf = self.copy_src.take().map(|(_, b)| b).unwrap_or_default();
                    buf.resize(self.page as usize, 0);
                    self.read_sectors(ppn * spp, &mut buf)?;
                    self.copy_src = Some((ppn, buf));
                }
                let (first, run) = &self.copy_run;
                if !run.is_empty() && *first + run.len() as u64 / self.sector != to {
                    self.flush_copies()?;
                }
                if self.copy_run.1.is_empty() {
                    self.copy_run.0 = to;
                }
                let slot = (from % spp) as usize;
                let src = &self.copy_src.as_ref().expect("read above").1[slot * sector..(slot + 1) * sector];
                self.copy_run.1.extend_from_slice(src);
                Ok(())
            }
        }
    }

    /// Writes the GC copies gathered so far (one call for a run of consecutive sectors).
    pub fn flush_copies(&mut self) -> Result<()> {
        if self.copy_run.1.is_empty() {
            return Ok(());
        }
        let (first, mut run) = std::mem::take(&mut self.copy_run);
        let r = self.write_sectors(first, &run);
        run.clear();
        self.copy_run.1 = run; // keep the allocation
        r
    }

    /// Frees the host storage of `pages` pages from `first_ppn` (block erase).
    pub fn punch(&mut self, first_ppn: u64, pages: u64) -> Result<()> {
        // Another plane's GC page may still be gathering copies (its page is not programmed yet): they belong to a
        // different block, so they land now, and the erase cannot overtake them.
        let spp = self.page / self.sector;
        let (run_first, run) = (&self.copy_run.0, &self.copy_run.1);
        debug_assert!(
            run.is_empty() || *run_first + run.len() as u64 / self.sector <= first_ppn * spp || *run_first >= (first_ppn + pages) * spp,
            "GC copies pending into the block being erased"
        );
        self.flush_copies()?;
        if self.copy_src.as_ref().is_some_and(|(p, _)| (first_ppn..first_ppn + pages).contains(p)) {
            self.copy_src = None;
        }
        if let Backing::Memory(m) = &mut self.backing {
            let ppb = pages.max(1);
            debug_assert!(first_ppn.is_multiple_of(ppb), "erases are whole blocks");
            return m.discard_block(first_ppn / ppb);
        }
        if let Backing::File(f) = &self.backing {
            use std::os::fd::AsRawFd;
            let off = (HEADER_SPAN + first_ppn * self.page) as libc::off_t;
            let len = (pages * self.page) as libc::off_t;
            // SAFETY: plain syscall on an open descriptor; failure (e.g. unsupported file system) is reported.
            let rc = unsafe {
                libc::fallocate(f.as_raw_fd(), libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, off, len)
            };
            if rc != 0 {
                let err = std::io::Error::last_os_error();
                if err.raw_os_error() != Some(libc::EOPNOTSUPP) {
                    return Err(err.into());
                }
            }
        }
        Ok(())
    }

    pub fn sync(&self) -> Result<()> {
        if let Backing::File(f) = &self.backing {
            f.sync_data()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sector(tag: u8) -> Vec<u8> {
        vec![tag; 512]
    }

    #[test]
    fn an_erase_elsewhere_lands_pending_copies_first() {
        // Found by the device_model fuzzer: one plane's GC page still gathers copies while another plane erases.
        let mut d = DataStore::unnamed(512, 2048).unwrap();
        d.write_sectors(0, &sector(7)).unwrap();
        d.copy_sector(0, 40).unwrap(); // pending: the destination page is not programmed yet
        d.punch(0, 4).unwrap(); // the source block (pages 0..4) is erased
        let mut out = vec![0u8; 512];
        d.read_sector(40, &mut out).unwrap();
        assert_eq!(out, sector(7), "the pending copy survived the erase of its source");
    }

    #[test]
    fn file_copies_read_the_source_page_once_and_land_after_flush() {
        // 4 sectors of 512 B per page.
        let mut d = DataStore::unnamed(512, 2048).unwrap();
        let page: Vec<u8> = (1..=4).flat_map(sector).collect();
        d.write_sectors(0, &page).unwrap(); // page 0
        // Slots 0, 1 and 3 of page 0 move to PSAs 40, 41, 42 (a run) and slot 2 to 50 (another run).
        for (from, to) in [(0, 40), (1, 41), (3, 42), (2, 50)] {
            d.copy_sector(from, to).unwrap();
        }
        d.flush_copies().unwrap();
        let mut out = vec![0u8; 512];
        for (psa, tag) in [(40, 1), (41, 2), (42, 4), (50, 3)] {
            d.read_sector(psa, &mut out).unwrap();
            assert_eq!(out, sector(tag), "PSA {psa}");
        }
        // The cached source page is dropped when it is erased and rewritten.
        d.punch(0, 4).unwrap();
        d.write_sectors(1, &sector(9)).unwrap();
        d.copy_sector(1, 60).unwrap();
        d.flush_copies().unwrap();
        d.read_sector(60, &mut out).unwrap();
        assert_eq!(out, sector(9));
    }

    #[test]
    fn memory_and_file_stores_hold_the_same_bytes() {
        let mut f = DataStore::unnamed(512, 2048).unwrap();
        let mut m = DataStore::memory(512, 2048, 4, 16, None).unwrap();
        assert!(m.in_memory() && !f.in_memory() && !DataStore::none(512, 2048).materialises());
        for d in [&mut f, &mut m] {
            d.write_sector(5, &sector(7)).unwrap();
            d.copy_sector(5, 9).unwrap();
            d.flush_copies().unwrap();
        }
        let (mut a, mut b) = (vec![0u8; 2048], vec![1u8; 2048]);
        f.read_sectors(8, &mut a).unwrap();
        m.read_sectors(8, &mut b).unwrap();
        assert_eq!(a, b);
        assert_eq!(&a[512..1024], &sector(7)[..]);
    }
}
