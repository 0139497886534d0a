//! The header every binary image file starts with, so that a truncated, swapped, foreign or outdated file is
//! refused by name instead of being read as zeroes.
//!
//! ```text
//! 0   magic  "NEARFLSH"
//! 8   kind   file name tag, 8 bytes ("l2p", "oob", "data", "ckpt", "trim"; zero padded)
//! 16  format u32 (image format version, `FORMAT`)
//! 20  record u32 (bytes per record)
//! 24  count  u64 (records the file must hold; 0 where it grows, e.g. the trim journal)
//! 32  geometry fingerprint u64 (sector and page sizes, pages, logical sectors: a file of another device is refused)
//! 40  crc32 of bytes 0..40
//! ```
//! Memory-mapped tables keep their records one host page after the start (`HEADER_SPAN`), so the map stays
//! page-aligned.

use crate::error::{Result, SimError};
use crate::nand::Geometry;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Image format version; files and `state.json` of another version are refused.
pub const FORMAT: u32 = 2;
/// Bytes used by the header.
pub const HEADER_BYTES: usize = 44;
/// Bytes reserved for the header before the first record of a memory-mapped file (one host page).
pub const HEADER_SPAN: u64 = 4096;
const MAGIC: &[u8; 8] = b"NEARFLSH";

/// What a header says a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileHeader {
    pub kind: &'static str,
    pub record: u32,
    pub count: u64,
    pub geometry: u64,
}

/// A digest of everything that fixes the layout of the image files.
pub fn geometry_fingerprint(geo: &Geometry, logical_sectors: u64) -> u64 {
    let mut h = crc32fast::Hasher::new();
    for v in [
        u64::from(geo.sector_size),
        u64::from(geo.sectors_per_page),
        u64::from(geo.page_size),
        u64::from(geo.pages_per_block),
        u64::from(geo.planes()),
        u64::from(geo.blocks_per_plane),
        logical_sectors,
    ] {
        h.update(&v.to_le_bytes());
    }
    let lo = u64::from(h.finalize());
    lo | (logical_sectors & 0xFFFF_FFFF) << 32
}

impl FileHeader {
    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut b = [0u8; HEADER_BYTES];
        b[0..8].copy_from_slice(MAGIC);
        b[8..8 + self.kind.len()].copy_from_slice(self.kind.as_bytes());
        b[16..20].copy_from_slice(&FORMAT.to_le_bytes());
        b[20..24].copy_from_slice(&self.record.to_le_bytes());
        b[24..32].copy_from_slice(&self.count.to_le_bytes());
        b[32..40].copy_from_slice(&self.geometry.to_le_bytes());
        let crc = crc32fast::hash(&b[0..40]);
        b[40..44].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Writes the header at the start of `f`.
    pub fn write_to(&self, f: &File) -> Result<()> {
        f.write_all_at(&self.encode(), 0)?;
        Ok(())
    }

    /// Checks that `bytes` (the file's first bytes) carry exactly this header; the error names `path` and says
    /// what differs.
    pub fn check(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
        let bad = |what: String| Err(SimError::Image(format!("{name}: {what} ({})", path.display())));
        if bytes.len() < HEADER_BYTES {
            return bad(format!("file is {} bytes, shorter than its {HEADER_BYTES}-byte header", bytes.len()));
        }
        if &bytes[0..8] != MAGIC {
            return bad("not a nearflash image file (bad magic)".into());
        }
        let crc = u32::from_le_bytes(bytes[40..44].try_into().expect("4 bytes"));
        if crc32fast::hash(&bytes[0..40]) != crc {
            return bad("header fails its checksum".into());
        }
        let format = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes"));
        if format != FORMAT {
            return bad(format!("image format {format}, expected {FORMAT}"));
        }
        let want = self.encode();
        if bytes[8..16] != want[8..16] {
            let kind = String::from_utf8_lossy(&bytes[8..16]).trim_end_matches('\0').to_string();
            return bad(format!("holds a {kind:?} file, expected {:?}", self.kind));
        }
        if bytes[20..40] != want[20..40] {
            return bad("was written for a device of another geometry".into());
        }
        Ok(())
    }

    /// Reads and checks the header of an open file.
    pub fn check_file(&self, path: &Path, f: &File) -> Result<()> {
        let mut b = [0u8; HEADER_BYTES];
        let mut done = 0;
        while done < HEADER_BYTES {
            let n = f.read_at(&mut b[done..], done as u64)?;
            if n == 0 {
                break;
            }
            done += n;
        }
        self.check(path, &b[..done])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h() -> FileHeader {
        FileHeader { kind: "l2p", record: 4, count: 100, geometry: 7 }
    }

    #[test]
    fn header_round_trips_and_names_each_mismatch() {
        let p = Path::new("/x/l2p.bin");
        let good = h().encode();
        h().check(p, &good).unwrap();
        let msg = |b: &[u8]| h().check(p, b).unwrap_err().to_string();
        assert!(msg(&good[..10]).contains("shorter than"));
        let mut b = good;
        b[0] = b'X';
        assert!(msg(&b).contains("bad magic"));
        let mut b = good;
        b[25] ^= 1;
        assert!(msg(&b).contains("checksum"));
        let other = FileHeader { count: 101, ..h() }.encode();
        assert!(msg(&other).contains("another geometry"), "{}", msg(&other));
        let other = FileHeader { kind: "oob", ..h() }.encode();
        assert!(msg(&other).contains("expected \"l2p\""), "{}", msg(&other));
        assert!(msg(&other).starts_with("device image error: l2p.bin:"), "{}", msg(&other));
        let mut old = good;
        old[16..20].copy_from_slice(&1u32.to_le_bytes());
        let crc = crc32fast::hash(&old[0..40]);
        old[40..44].copy_from_slice(&crc.to_le_bytes());
        assert!(msg(&old).contains("image format 1, expected 2"), "{}", msg(&old));
    }
}
