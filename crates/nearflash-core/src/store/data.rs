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
}

impl DataStore {
    /// Creates the sparse data file (`header.count` pages of `header.record` bytes after the header).
    pub fn create(path: &Path, header: &FileHeader, sector: u32) -> Result<Self> {
        let file = OpenOptions::new().read(true).write(true).create_new(true).open(path)?;
        header.write_to(&file)?;
        file.set_len(HEADER_SPAN + u64::from(header.record) * header.count)?;
        Ok(DataStore { backing: Backing::File(file), sector: u64::from(sector), page: u64::from(header.record) })
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
        Ok(DataStore { backing: Backing::File(file), sector: u64::from(sector), page: u64::from(header.record) })
    }

    /// An unnamed data file (devices without an image directory, where anonymous memory cannot be mapped).
    pub fn unnamed(sector: u32, page: u32) -> Result<Self> {
        let file = tempfile::tempfile()?;
        file.set_len(HEADER_SPAN)?;
        Ok(DataStore { backing: Backing::File(file), sector: u64::from(sector), page: u64::from(page) })
    }

    /// Anonymous memory for `pages` pages (devices without an image directory); falls back on an unnamed data file
    /// where the host refuses so large a mapping (e.g. strict overcommit). `budget`: bytes of data at most (`None`:
    /// the host's RAM).
    pub fn memory(sector: u32, page: u32, pages: u64, budget: Option<u64>) -> Result<Self> {
        match AnonData::new(sector, page / sector.max(1), pages, budget) {
            Ok(m) => Ok(DataStore { backing: Backing::Memory(m), sector: u64::from(sector), page: u64::from(page) }),
            Err(_) => Self::unnamed(sector, page),
        }
    }

    /// A store that keeps nothing (timing-only devices).
    pub fn none(sector: u32, page: u32) -> Self {
        DataStore { backing: Backing::None, sector: u64::from(sector), page: u64::from(page) }
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
        match &mut self.backing {
            Backing::None => Ok(()),
            Backing::File(f) => Ok(f.write_all_at(data, HEADER_SPAN + psa * self.sector)?),
            Backing::Memory(m) => m.write(psa, data),
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

    pub fn copy_sector(&mut self, from: u64, to: u64, scratch: &mut [u8]) -> Result<()> {
        match &mut self.backing {
            Backing::None => Ok(()),
            Backing::Memory(m) => m.copy(from, to, 1),
            Backing::File(_) => {
                self.read_sector(from, scratch)?;
                self.write_sector(to, scratch)
            }
        }
    }

    /// Frees the host storage of `pages` pages from `first_ppn` (block erase).
    pub fn punch(&mut self, first_ppn: u64, pages: u64) -> Result<()> {
        if let Backing::Memory(m) = &mut self.backing {
            return m.discard(first_ppn, pages);
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
