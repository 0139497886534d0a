//! Fixed-size records in a memory-mapped file (or anonymous memory): the mapping table and the OOB area.
//!
//! Backed by a sparse file, a 512 GiB device's tables cost nothing until written, open instantly, and leave
//! their contents in the page cache if the process is killed; `flush` makes them durable against a host crash.

use super::header::{FileHeader, HEADER_SPAN};
use crate::error::{Result, SimError};
use memmap2::{MmapMut, MmapOptions};
use std::fs::{File, OpenOptions};
use std::path::Path;

pub struct MappedRecords {
    map: MmapMut,
    record: usize,
    len: u64,
    file: Option<File>,
}

/// The message for a missing image file.
pub(crate) fn missing(path: &Path, e: &std::io::Error) -> SimError {
    let name = path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let at = path.display();
    SimError::Image(format!("{name}: cannot open ({e}); the image is damaged: see `nearflash repair` ({at})"))
}

impl MappedRecords {
    /// Creates the (sparse) file `path` with `header` and room for `header.count` records of `header.record` bytes,
    /// and maps it. Refuses an existing file.
    pub fn create(path: &Path, header: &FileHeader) -> Result<Self> {
        Self::create_with(path, header, false)
    }

    fn create_with(path: &Path, header: &FileHeader, huge_pages: bool) -> Result<Self> {
        let f = OpenOptions::new().read(true).write(true).create_new(true).open(path)?;
        header.write_to(&f)?;
        f.set_len(HEADER_SPAN + u64::from(header.record) * header.count)?;
        Self::map(f, header, huge_pages)
    }

    /// Maps an existing file after checking its header and its length (never creates or extends it).
    pub fn open(path: &Path, header: &FileHeader) -> Result<Self> {
        Self::open_with(path, header, false)
    }

    fn open_with(path: &Path, header: &FileHeader, huge_pages: bool) -> Result<Self> {
        let f = OpenOptions::new().read(true).write(true).open(path).map_err(|e| missing(path, &e))?;
        header.check_file(path, &f)?;
        let want = HEADER_SPAN + u64::from(header.record) * header.count;
        let have = f.metadata()?.len();
        if have != want {
            let name = path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
            return Err(SimError::Image(format!(
                "{name}: {have} bytes, expected {want} (truncated or extended; see `nearflash repair`) ({})",
                path.display()
            )));
        }
        Self::map(f, header, huge_pages)
    }

    /// `huge_pages`: as `anonymous_with`'s, for the file's pages in the host's page cache.
    fn map(f: File, header: &FileHeader, huge_pages: bool) -> Result<Self> {
        let (record, len) = (header.record as usize, header.count);
        let bytes = record as u64 * len;
        if bytes == 0 {
            return Self::anonymous(record, 0);
        }
        let size = usize::try_from(bytes).map_err(|_| SimError::Config("table too large for this host".into()))?;
        // SAFETY: the file is private to this device directory, which `Image` locks against other processes.
        let map = unsafe { MmapOptions::new().offset(HEADER_SPAN).len(size).map_mut(&f)? };
        // Accesses are random (one entry per I/O): no read-ahead around faults.
        let _ = map.advise(memmap2::Advice::Random);
        // Huge pages: the page cache reads the file's uncached parts in 2 MiB pages, mapped whole (Linux, where
        // its file system keeps large pages in the page cache: ext4 and tmpfs from 6.16 on, XFS).
        #[cfg(target_os = "linux")]
        if huge_pages {
            let _ = map.advise(memmap2::Advice::HugePage);
        }
        Ok(MappedRecords { map, record, len, file: Some(f) })
    }

    /// Record ranges `[first, end)` that may hold non-zero bytes (the file's data extents; everything for
    /// anonymous memory), so whole-table passes skip the holes of a sparse file.
    pub fn written_ranges(&self) -> Vec<(u64, u64)> {
        let all = vec![(0, self.len)];
        let Some(f) = &self.file else { return all };
        use std::os::fd::AsRawFd;
        let fd = f.as_raw_fd();
        let end = HEADER_SPAN + self.record as u64 * self.len;
        let mut out = Vec::new();
        let mut off = HEADER_SPAN;
        while off < end {
            // SAFETY: lseek on an open descriptor; errors (ENXIO: no data after off) end the walk.
            let start = unsafe { libc::lseek(fd, off as libc::off_t, libc::SEEK_DATA) };
            if start < 0 {
                if std::io::Error::last_os_error().raw_os_error() == Some(libc::ENXIO) {
                    break;
                }
                return all; // SEEK_DATA unsupported: scan everything
            }
            // SAFETY: as above.
            let stop = unsafe { libc::lseek(fd, start, libc::SEEK_HOLE) };
            let (start, stop) = (start as u64, if stop < 0 { end } else { (stop as u64).min(end) });
            if stop <= start {
                break;
            }
            let r = self.record as u64;
            out.push(((start.max(HEADER_SPAN) - HEADER_SPAN) / r, (stop - HEADER_SPAN).div_ceil(r).min(self.len)));
            off = stop;
        }
        out
    }

    /// Anonymous zeroed records (devices without an image directory, tests). The mapping reserves no swap
    /// (`MAP_NORESERVE`), as the data area's: a table costs the pages written, so a sparse 4 TB device's mapping
    /// table and OOB area (GBs of address space) are not refused by the kernel's overcommit check.
    pub fn anonymous(record: usize, len: u64) -> Result<Self> {
        Self::anonymous_with(record, len, false)
    }

    /// Anonymous records; `huge_pages` for tables looked up at random all over (the mapping table). Not for the
    /// OOB area: its records are written plane by plane, and each first touch of a huge page zeroes 2 MiB.
    fn anonymous_with(record: usize, len: u64, huge_pages: bool) -> Result<Self> {
        let bytes = (record as u64 * len).max(1);
        let map = MmapOptions::new()
            .len(usize::try_from(bytes).map_err(|_| SimError::Config("table too large for this host".into()))?)
            .no_reserve_swap()
            .map_anon()?;
        // Huge pages cut the TLB misses of random lookups in large tables (a hint; ignored where unsupported).
        #[cfg(target_os = "linux")]
        if huge_pages {
            let _ = map.advise(memmap2::Advice::HugePage);
        }
        Ok(MappedRecords { map, record, len, file: None })
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

    /// Starts loading record `i` into the CPU cache (a hint; out-of-range indices are ignored).
    #[inline]
    pub fn prefetch(&self, i: u64) {
        if i < self.len {
            prefetch_bytes(&self.map[i as usize * self.record..], self.record);
        }
    }

    /// Zeroes records `[first, first + n)`.
    pub fn zero(&mut self, first: u64, n: u64) {
        let o = first as usize * self.record;
        self.map[o..o + n as usize * self.record].fill(0);
    }

    /// Zeroes the first `bytes` bytes of each of records `[first, first + n)` (the rest of each is left as it is).
    pub fn zero_prefix(&mut self, first: u64, n: u64, bytes: usize) {
        let bytes = bytes.min(self.record);
        let o = first as usize * self.record;
        for r in self.map[o..o + n as usize * self.record].chunks_exact_mut(self.record) {
            r[..bytes].fill(0);
        }
    }

    /// Writes dirty pages back to the file.
    pub fn flush(&self) -> Result<()> {
        Ok(self.map.flush()?)
    }
}

/// Starts loading the cache line of `b`'s first byte (a hint).
#[inline]
fn prefetch_line(b: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults; the address lies inside `b` (or one past it when empty).
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(b.as_ptr().cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = b;
}

/// Asks the CPU to start loading the cache lines of the first `len` bytes of `b` (a hint that never faults).
#[inline]
pub(crate) fn prefetch_bytes(b: &[u8], len: usize) {
    let len = len.min(b.len());
    let mut o = 0;
    while o < len {
        prefetch_line(&b[o..]);
        o += 64;
    }
}

/// A table of `u32` entries (the logical-to-physical map: 0 = unmapped, otherwise PSA + 1).
///
/// A file's table keeps an order-independent digest of its entries up to date on every `set` (a sum of a hash of each
/// (index, value) pair), so a checkpoint can record it cheaply and a clean open can check the file against it. An
/// anonymous table has no checkpoint to record it in: it computes the digest when asked instead (two hashes per `set`
/// were ~100 instructions a page programmed, the largest part of a GC-steady write's mapping update).
pub struct MappedU32 {
    t: MappedRecords,
    /// The digest as `set` keeps it (`None`: an anonymous table, which does not keep it).
    digest: Option<u64>,
    /// The largest entry found by the pass at open (lets `first_entry_above` skip a second pass).
    max_at_open: u32,
}

/// The digest term of one non-zero entry.
#[inline]
fn term(i: u64, v: u32) -> u64 {
    if v == 0 {
        return 0;
    }
    // splitmix64 finaliser
    let mut z = (i << 32 | u64::from(v)).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl MappedU32 {
    pub fn create(path: &Path, header: &FileHeader) -> Result<Self> {
        Self::check_record(header)?;
        Ok(MappedU32 { t: MappedRecords::create_with(path, header, true)?, digest: Some(0), max_at_open: 0 })
    }

    /// `get` and `set` address 4-byte records directly: refuse a header that says otherwise.
    fn check_record(header: &FileHeader) -> Result<()> {
        if header.record != 4 {
            return Err(SimError::Image(format!("mapping table records of {} bytes (expected 4)", header.record)));
        }
        Ok(())
    }

    /// Opens the table and computes its digest (a pass over the written parts of the file).
    pub fn open(path: &Path, header: &FileHeader) -> Result<Self> {
        Self::check_record(header)?;
        let t = MappedRecords::open_with(path, header, true)?;
        let mut m = MappedU32 { t, digest: None, max_at_open: 0 };
        let (mut d, mut max) = (0u64, 0u32);
        for (a, b) in m.t.written_ranges() {
            for i in a..b {
                let v = m.get(i);
                d = d.wrapping_add(term(i, v));
                max = max.max(v);
            }
        }
        (m.digest, m.max_at_open) = (Some(d), max);
        Ok(m)
    }

    pub fn anonymous(len: u64) -> Result<Self> {
        Ok(MappedU32 { t: MappedRecords::anonymous_with(4, len, true)?, digest: None, max_at_open: 0 })
    }

    /// Recomputes the digest from the entries (skipping the holes of a sparse file).
    pub fn compute_digest(&self) -> u64 {
        let mut d = 0u64;
        for (a, b) in self.t.written_ranges() {
            for i in a..b {
                d = d.wrapping_add(term(i, self.get(i)));
            }
        }
        d
    }

    /// The largest entry the table held when it was opened (0 for created or anonymous tables).
    pub fn max_at_open(&self) -> u32 {
        self.max_at_open
    }

    /// The digest of the entries: as maintained by `set` for a file's table, computed now for an anonymous one.
    pub fn digest(&self) -> u64 {
        self.digest.unwrap_or_else(|| self.compute_digest())
    }

    /// The first entry above `limit` (PSA + 1 past the flash), as (index, entry).
    pub fn first_entry_above(&self, limit: u64) -> Option<(u64, u32)> {
        for (a, b) in self.t.written_ranges() {
            for i in a..b {
                let v = self.get(i);
                if u64::from(v) > limit {
                    return Some((i, v));
                }
            }
        }
        None
    }

    #[inline]
    pub fn get(&self, i: u64) -> u32 {
        // Records of 4 bytes (`anonymous`, `create`, `open` make them so): one bounds check, no length check.
        let o = i as usize * 4;
        u32::from_le_bytes(self.t.map[o..o + 4].try_into().expect("4 bytes"))
    }

    /// Starts loading entry `i` into the CPU cache (a hint; out-of-range indices are ignored).
    #[inline]
    pub fn prefetch(&self, i: u64) {
        // A 4-byte entry (aligned) lies in one cache line: one prefetch, one bounds check (not the records' loop over
        // lines, about 60 instructions per call on GC's scan of a victim page).
        if i < self.t.len {
            prefetch_line(&self.t.map[i as usize * 4..]);
        }
    }

    #[inline]
    pub fn set(&mut self, i: u64, v: u32) {
        if let Some(d) = self.digest {
            self.digest = Some(d.wrapping_sub(term(i, self.get(i))).wrapping_add(term(i, v)));
        }
        let o = i as usize * 4;
        self.t.map[o..o + 4].copy_from_slice(&v.to_le_bytes());
    }

    pub fn len(&self) -> u64 {
        self.t.len()
    }

    pub fn is_empty(&self) -> bool {
        self.t.is_empty()
    }

    pub fn flush(&self) -> Result<()> {
        self.t.flush()
    }

    /// All entries, for whole-table passes (recovery recounts).
    pub fn as_slice(&self) -> &[u8] {
        &self.t.map[..self.t.len as usize * 4]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_prefix_clears_only_each_records_first_bytes() {
        let mut r = MappedRecords::anonymous(8, 4).unwrap();
        for i in 0..4 {
            r.get_mut(i).fill(0xff);
        }
        r.zero_prefix(1, 2, 3);
        assert_eq!(r.get(0), &[0xff; 8]);
        assert_eq!((r.get(1), r.get(2)), (&[0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff][..], &[0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff][..]));
        assert_eq!(r.get(3), &[0xff; 8]);
        r.zero_prefix(3, 1, 100); // more than a record: the whole record
        assert_eq!(r.get(3), &[0; 8]);
    }

    #[test]
    fn file_backed_records_persist_and_stay_sparse() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("l2p.bin");
        let h = FileHeader { kind: "l2p", record: 4, count: 1 << 24, geometry: 1 };
        let digest = {
            let mut m = MappedU32::create(&p, &h).unwrap();
            m.set(12345, 77);
            m.set(99, 5);
            m.set(99, 0);
            m.flush().unwrap();
            m.digest()
        };
        let m = MappedU32::open(&p, &h).unwrap();
        assert_eq!(m.get(12345), 77);
        assert_eq!(m.get(0), 0);
        assert_eq!(m.digest(), digest, "the digest kept by set equals the one recomputed at open");
        assert_ne!(digest, 0);
        assert_eq!(m.first_entry_above(77), None);
        assert_eq!(m.first_entry_above(76), Some((12345, 77)));
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(&p).unwrap();
        assert_eq!(meta.len(), (64 << 20) + HEADER_SPAN);
        assert!(meta.blocks() * 512 < 1 << 20, "64 MiB table should occupy almost nothing on disk");
        drop(m);
        // A truncated, missing or foreign file is refused by name.
        std::fs::OpenOptions::new().write(true).open(&p).unwrap().set_len(1 << 20).unwrap();
        let e = MappedU32::open(&p, &h).err().unwrap().to_string();
        assert!(e.contains("l2p.bin") && e.contains("expected"), "{e}");
        std::fs::remove_file(&p).unwrap();
        let e = MappedU32::open(&p, &h).err().unwrap().to_string();
        assert!(e.contains("l2p.bin: cannot open"), "{e}");
        assert!(!p.exists(), "opening never creates");
        // A mapping table of records other than 4 bytes is refused before anything is created or read.
        let odd = FileHeader { record: 8, ..h };
        let e = MappedU32::create(&p, &odd).err().unwrap().to_string();
        assert!(e.contains("records of 8 bytes"), "{e}");
        assert!(!p.exists(), "a refused create leaves no file");
        assert!(MappedU32::open(&p, &odd).err().unwrap().to_string().contains("records of 8 bytes"));
    }

    /// An anonymous table keeps no digest on `set` but gives the same one as a file's table of the same entries.
    #[test]
    fn an_anonymous_tables_digest_equals_a_file_tables() {
        let dir = tempfile::tempdir().unwrap();
        let h = FileHeader { kind: "l2p", record: 4, count: 1 << 16, geometry: 1 };
        let mut file = MappedU32::create(&dir.path().join("l2p.bin"), &h).unwrap();
        let mut anon = MappedU32::anonymous(1 << 16).unwrap();
        assert_eq!(anon.digest, None);
        for (i, v) in [(7u64, 3u32), (65_535, 9), (7, 0), (100, 1), (100, 2), (0, u32::MAX)] {
            file.set(i, v);
            anon.set(i, v);
            assert_eq!(anon.digest(), file.digest());
        }
        assert_eq!(file.digest(), file.compute_digest());
        assert_ne!(anon.digest(), 0);
    }
}
