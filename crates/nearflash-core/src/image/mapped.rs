//! Fixed-size records in a memory-mapped file (or anonymous memory): the mapping table and the OOB area.
//!
//! Backed by a sparse file, a 512 GiB device's tables cost nothing until written, open instantly, and leave
//! their contents in the page cache if the process is killed; `flush` makes them durable against a host crash.

use crate::error::{Result, SimError};
use memmap2::{MmapMut, MmapOptions};
use std::fs::OpenOptions;
use std::path::Path;

pub struct MappedRecords {
    map: MmapMut,
    record: usize,
    len: u64,
}

impl MappedRecords {
    /// Maps `len` records of `record` bytes from `path`, creating or extending the (sparse) file.
    pub fn open(path: &Path, record: usize, len: u64) -> Result<Self> {
        let bytes = record as u64 * len;
        let f = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
        if f.metadata()?.len() < bytes {
            f.set_len(bytes)?;
        }
        if bytes == 0 {
            return Self::anonymous(record, 0);
        }
        // SAFETY: the file is private to this device directory, which `Image` locks against other processes.
        let map = unsafe { MmapOptions::new().len(bytes as usize).map_mut(&f)? };
        // Accesses are random (one entry per I/O): no read-ahead around faults.
        let _ = map.advise(memmap2::Advice::Random);
        Ok(MappedRecords { map, record, len })
    }

    /// Anonymous zeroed records (devices without an image directory, tests).
    pub fn anonymous(record: usize, len: u64) -> Result<Self> {
        Self::anonymous_with(record, len, false)
    }

    /// Anonymous records; `huge_pages` for tables looked up at random all over (the mapping table). Not for the
    /// OOB area: its records are written plane by plane, and each first touch of a huge page zeroes 2 MiB.
    fn anonymous_with(record: usize, len: u64, huge_pages: bool) -> Result<Self> {
        let bytes = (record as u64 * len).max(1);
        let map = MmapOptions::new()
            .len(usize::try_from(bytes).map_err(|_| SimError::Config("table too large for this host".into()))?)
            .map_anon()?;
        // Huge pages cut the TLB misses of random lookups in large tables (a hint; ignored where unsupported).
        #[cfg(target_os = "linux")]
        if huge_pages {
            let _ = map.advise(memmap2::Advice::HugePage);
        }
        Ok(MappedRecords { map, record, len })
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub fn get(&self, i: u64) -> &[u8] {
        let o = i as usize * self.record;
        &self.map[o..o + self.record]
    }

    #[inline]
    pub fn get_mut(&mut self, i: u64) -> &mut [u8] {
        let o = i as usize * self.record;
        &mut self.map[o..o + self.record]
    }

    /// Zeroes records `[first, first + n)`.
    pub fn zero(&mut self, first: u64, n: u64) {
        let o = first as usize * self.record;
        self.map[o..o + n as usize * self.record].fill(0);
    }

    /// Writes dirty pages back to the file.
    pub fn flush(&self) -> Result<()> {
        Ok(self.map.flush()?)
    }
}

/// A table of `u32` entries (the logical-to-physical map: 0 = unmapped, otherwise PSA + 1).
pub struct MappedU32(MappedRecords);

impl MappedU32 {
    pub fn open(path: &Path, len: u64) -> Result<Self> {
        Ok(MappedU32(MappedRecords::open(path, 4, len)?))
    }

    pub fn anonymous(len: u64) -> Result<Self> {
        Ok(MappedU32(MappedRecords::anonymous_with(4, len, true)?))
    }

    #[inline]
    pub fn get(&self, i: u64) -> u32 {
        u32::from_le_bytes(self.0.get(i).try_into().expect("4-byte record"))
    }

    #[inline]
    pub fn set(&mut self, i: u64, v: u32) {
        self.0.get_mut(i).copy_from_slice(&v.to_le_bytes());
    }

    pub fn len(&self) -> u64 {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn flush(&self) -> Result<()> {
        self.0.flush()
    }

    /// All entries, for whole-table passes (recovery recounts).
    pub fn as_slice(&self) -> &[u8] {
        &self.0.map[..self.0.len as usize * 4]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_backed_records_persist_and_stay_sparse() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("l2p.bin");
        {
            let mut m = MappedU32::open(&p, 1 << 24).unwrap();
            m.set(12345, 77);
            m.flush().unwrap();
        }
        let m = MappedU32::open(&p, 1 << 24).unwrap();
        assert_eq!(m.get(12345), 77);
        assert_eq!(m.get(0), 0);
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(&p).unwrap();
        assert_eq!(meta.len(), 64 << 20);
        assert!(meta.blocks() * 512 < 1 << 20, "64 MiB table should occupy almost nothing on disk");
    }
}
