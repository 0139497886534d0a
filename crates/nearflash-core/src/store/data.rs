//! The data area: sector contents at their physical addresses in a sparse file (`ppn * page_size + slot * sector`).
//!
//! Erasing a block punches a hole, so the image occupies only live data. A device without materialised data
//! (timing-only mode, for sweeps) has no data file: reads return zeroes.

use super::header::{FileHeader, HEADER_SPAN};
use super::mapped::missing;
use crate::error::{Result, SimError};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

pub struct DataStore {
    file: Option<File>,
    sector: u64,
    page: u64,
}

impl DataStore {
    /// Creates the sparse data file (`header.count` pages of `header.record` bytes after the header).
    pub fn create(path: &Path, header: &FileHeader, sector: u32) -> Result<Self> {
        let file = OpenOptions::new().read(true).write(true).create_new(true).open(path)?;
        header.write_to(&file)?;
        file.set_len(HEADER_SPAN + u64::from(header.record) * header.count)?;
        Ok(DataStore { file: Some(file), sector: u64::from(sector), page: u64::from(header.record) })
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
        Ok(DataStore { file: Some(file), sector: u64::from(sector), page: u64::from(header.record) })
    }

    /// An unnamed data file (devices without an image directory).
    pub fn unnamed(sector: u32, page: u32) -> Result<Self> {
        let file = tempfile::tempfile()?;
        file.set_len(HEADER_SPAN)?;
        Ok(DataStore { file: Some(file), sector: u64::from(sector), page: u64::from(page) })
    }

    /// A store that keeps nothing (timing-only devices).
    pub fn none(sector: u32, page: u32) -> Self {
        DataStore { file: None, sector: u64::from(sector), page: u64::from(page) }
    }

    pub fn materialises(&self) -> bool {
        self.file.is_some()
    }

    pub fn write_sector(&self, psa: u64, data: &[u8]) -> Result<()> {
        debug_assert_eq!(data.len() as u64, self.sector);
        if let Some(f) = &self.file {
            f.write_all_at(data, HEADER_SPAN + psa * self.sector)?;
        }
        Ok(())
    }

    /// Reads a sector; holes read as zeroes.
    pub fn read_sector(&self, psa: u64, out: &mut [u8]) -> Result<()> {
        match &self.file {
            Some(f) => {
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
            None => out.fill(0),
        }
        Ok(())
    }

    pub fn copy_sector(&self, from: u64, to: u64, scratch: &mut [u8]) -> Result<()> {
        if self.file.is_some() {
            self.read_sector(from, scratch)?;
            self.write_sector(to, scratch)?;
        }
        Ok(())
    }

    /// Frees the host storage of `pages` pages from `first_ppn` (block erase).
    pub fn punch(&self, first_ppn: u64, pages: u64) -> Result<()> {
        if let Some(f) = &self.file {
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
        if let Some(f) = &self.file {
            f.sync_data()?;
        }
        Ok(())
    }
}
