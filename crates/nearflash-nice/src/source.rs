//! Where the firmware and the host reader get sectors from: the device's flash (through the FTL), an image file,
//! or a memory disk in tests. `read` returns `None` for a sector never written, which is how the learner knows a
//! block it needs has not arrived yet (deferred list building).

/// A sector-addressed store.
pub trait BlockSource {
    /// Bytes per sector (the device's logical block).
    fn sector_size(&self) -> u32;
    /// The sector at `lba`, or None when it was never written (or lies beyond the device).
    fn read(&mut self, lba: u64) -> Option<Vec<u8>>;
}

/// A memory disk that remembers which sectors were written: the device side of tests and of the learner's
/// re-reads.
#[derive(Debug, Clone)]
pub struct MemDisk {
    sector: u32,
    data: Vec<u8>,
    written: Vec<bool>,
    /// Sectors read so far (the learner's deferred re-reads are counted through this).
    pub reads: u64,
}

impl MemDisk {
    pub fn new(sector: u32, sectors: u64) -> Self {
        let n = usize::try_from(sectors).expect("disk fits memory");
        MemDisk { sector, data: vec![0; n * sector as usize], written: vec![false; n], reads: 0 }
    }

    /// A disk holding `image` (zero padded to whole sectors), every sector counted as written.
    pub fn from_image(sector: u32, image: &[u8]) -> Self {
        let sectors = (image.len() as u64).div_ceil(u64::from(sector));
        let mut d = MemDisk::new(sector, sectors);
        d.data[..image.len()].copy_from_slice(image);
        d.written.iter_mut().for_each(|w| *w = true);
        d
    }

    pub fn sectors(&self) -> u64 {
        self.written.len() as u64
    }

    /// Stores whole sectors from `lba`; false when they do not fit.
    pub fn write(&mut self, lba: u64, bytes: &[u8]) -> bool {
        let s = self.sector as usize;
        if !bytes.len().is_multiple_of(s) {
            return false;
        }
        let n = bytes.len() / s;
        let Ok(first) = usize::try_from(lba) else { return false };
        if first.checked_add(n).is_none_or(|end| end > self.written.len()) {
            return false;
        }
        self.data[first * s..(first + n) * s].copy_from_slice(bytes);
        self.written[first..first + n].iter_mut().for_each(|w| *w = true);
        true
    }
}

impl BlockSource for MemDisk {
    fn sector_size(&self) -> u32 {
        self.sector
    }
    fn read(&mut self, lba: u64) -> Option<Vec<u8>> {
        let i = usize::try_from(lba).ok()?;
        if !*self.written.get(i)? {
            return None;
        }
        self.reads += 1;
        let s = self.sector as usize;
        Some(self.data[i * s..(i + 1) * s].to_vec())
    }
}

/// Reads `len` bytes at byte offset `off` of `src`, sector by sector; None if a sector is unwritten.
pub fn read_bytes(src: &mut dyn BlockSource, off: u64, len: usize) -> Option<Vec<u8>> {
    let s = u64::from(src.sector_size());
    let mut out = Vec::with_capacity(len);
    let mut pos = off;
    let end = off.checked_add(len as u64)?;
    while pos < end {
        let sec = src.read(pos / s)?;
        let a = (pos % s) as usize;
        let take = ((end - pos) as usize).min(sec.len() - a);
        out.extend_from_slice(&sec[a..a + take]);
        pos += take as u64;
    }
    Some(out)
}
