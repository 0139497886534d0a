//! The trim journal: deallocations since the last checkpoint, appended as they happen so that recovery can
//! replay them in sequence order with the programmed pages (a trimmed sector leaves no trace in the OOB area).
//!
//! The file starts with a `FileHeader`; each record is `seq: u64, lpn: u32, count: u32, crc32: u32` (the CRC
//! covers the first 16 bytes). A record that fails its checksum or names sectors past the device is damage: the
//! strict reader refuses it by index, the lenient one (repair) skips and reports it.

use super::header::{FileHeader, HEADER_BYTES};
use super::mapped::missing;
use crate::error::{Result, SimError};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

/// One deallocated range: `count` sectors from `lpn`, ordered by `seq` among page programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrimRecord {
    pub seq: u64,
    pub lpn: u32,
    pub count: u32,
}

const RECORD: usize = 20;

/// A record the lenient reader skipped: its index, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadTrim {
    pub index: usize,
    pub why: String,
}

pub struct TrimJournal {
    file: Option<File>,
    /// Sectors of the device: records must stay below.
    logical: u64,
}

impl TrimJournal {
    /// Creates an empty journal (refuses an existing file).
    pub fn create(path: &Path, header: &FileHeader, logical: u64) -> Result<Self> {
        let mut file = OpenOptions::new().read(true).append(true).create_new(true).open(path)?;
        file.write_all(&header.encode())?;
        Ok(TrimJournal { file: Some(file), logical })
    }

    /// Opens an existing journal after checking its header.
    pub fn open(path: &Path, header: &FileHeader, logical: u64) -> Result<Self> {
        let file = OpenOptions::new().read(true).append(true).open(path).map_err(|e| missing(path, &e))?;
        header.check_file(path, &file)?;
        Ok(TrimJournal { file: Some(file), logical })
    }

    /// A journal that records nothing (devices without an image).
    pub fn none() -> Self {
        TrimJournal { file: None, logical: 0 }
    }

    pub fn append(&mut self, r: TrimRecord) -> Result<()> {
        if let Some(f) = &mut self.file {
            f.write_all(&encode(r))?;
        }
        Ok(())
    }

    /// Every whole record (a torn tail from a kill is ignored); a damaged record is refused, naming its index.
    pub fn records(&mut self) -> Result<Vec<TrimRecord>> {
        let (good, bad) = self.records_lenient()?;
        match bad.first() {
            None => Ok(good),
            Some(b) => Err(SimError::Image(format!(
                "trim.log: record {} {}; {} damaged record(s) in all (see `nearflash repair`)",
                b.index,
                b.why,
                bad.len()
            ))),
        }
    }

    /// The intact records, and the damaged ones that were skipped.
    pub fn records_lenient(&mut self) -> Result<(Vec<TrimRecord>, Vec<BadTrim>)> {
        let Some(f) = &mut self.file else { return Ok((Vec::new(), Vec::new())) };
        f.seek(SeekFrom::Start(HEADER_BYTES as u64))?;
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes)?;
        let (mut good, mut bad) = (Vec::new(), Vec::new());
        for (index, c) in bytes.chunks_exact(RECORD).enumerate() {
            let crc = u32::from_le_bytes(c[16..20].try_into().expect("4 bytes"));
            if crc32fast::hash(&c[0..16]) != crc {
                bad.push(BadTrim { index, why: "fails its checksum".into() });
                continue;
            }
            let r = TrimRecord {
                seq: u64::from_le_bytes(c[0..8].try_into().expect("8 bytes")),
                lpn: u32::from_le_bytes(c[8..12].try_into().expect("4 bytes")),
                count: u32::from_le_bytes(c[12..16].try_into().expect("4 bytes")),
            };
            if r.count == 0 || u64::from(r.lpn) + u64::from(r.count) > self.logical {
                let why = format!("names LBAs {}+{} beyond the device's {} sectors", r.lpn, r.count, self.logical);
                bad.push(BadTrim { index, why });
                continue;
            }
            good.push(r);
        }
        Ok((good, bad))
    }

    /// Bytes of records in the file (0: empty).
    pub fn record_bytes(&self) -> Result<u64> {
        Ok(match &self.file {
            Some(f) => f.metadata()?.len().saturating_sub(HEADER_BYTES as u64),
            None => 0,
        })
    }

    /// Empties the journal (after a checkpoint made its effects durable); the header stays.
    pub fn clear(&mut self) -> Result<()> {
        if let Some(f) = &mut self.file {
            // Cut back to the header (never below it: a kill here must leave a valid, empty journal).
            f.set_len(HEADER_BYTES as u64)?;
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

fn encode(r: TrimRecord) -> [u8; RECORD] {
    let mut b = [0u8; RECORD];
    b[0..8].copy_from_slice(&r.seq.to_le_bytes());
    b[8..12].copy_from_slice(&r.lpn.to_le_bytes());
    b[12..16].copy_from_slice(&r.count.to_le_bytes());
    let crc = crc32fast::hash(&b[0..16]);
    b[16..20].copy_from_slice(&crc.to_le_bytes());
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_survive_reopen_and_torn_tails_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("trim.log");
        let h = FileHeader { kind: "trim", record: RECORD as u32, count: 0, geometry: 3 };
        let mut j = TrimJournal::create(&p, &h, 100).unwrap();
        j.append(TrimRecord { seq: 5, lpn: 10, count: 3 }).unwrap();
        drop(j);
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(&[1, 2, 3]).unwrap(); // torn record
        let mut j = TrimJournal::open(&p, &h, 100).unwrap();
        assert_eq!(j.records().unwrap(), vec![TrimRecord { seq: 5, lpn: 10, count: 3 }]);
        j.clear().unwrap();
        assert!(j.records().unwrap().is_empty());
        drop(j);
        assert!(TrimJournal::open(&p, &h, 100).is_ok(), "a cleared journal keeps its header");
    }

    #[test]
    fn damaged_and_out_of_range_records_are_refused_or_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("trim.log");
        let h = FileHeader { kind: "trim", record: RECORD as u32, count: 0, geometry: 3 };
        let mut j = TrimJournal::create(&p, &h, 100).unwrap();
        j.append(TrimRecord { seq: 1, lpn: 0, count: 4 }).unwrap();
        j.append(TrimRecord { seq: 2, lpn: 50, count: 2 }).unwrap();
        // A crafted record with a valid checksum that would wipe the device.
        j.append(TrimRecord { seq: 3, lpn: 0, count: u32::MAX }).unwrap();
        drop(j);
        // Flip one byte of record 1 (the LBA field).
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[HEADER_BYTES + RECORD + 8] ^= 0x40;
        std::fs::write(&p, &bytes).unwrap();
        let mut j = TrimJournal::open(&p, &h, 100).unwrap();
        let e = j.records().unwrap_err().to_string();
        assert!(e.contains("trim.log: record 1 fails its checksum") && e.contains("2 damaged"), "{e}");
        let (good, bad) = j.records_lenient().unwrap();
        assert_eq!(good, vec![TrimRecord { seq: 1, lpn: 0, count: 4 }]);
        assert_eq!(bad.iter().map(|b| b.index).collect::<Vec<_>>(), vec![1, 2]);
        assert!(bad[1].why.contains("beyond the device"), "{}", bad[1].why);
        // A journal whose header was damaged is refused before any record is read.
        bytes[3] ^= 1;
        std::fs::write(&p, &bytes).unwrap();
        let e = TrimJournal::open(&p, &h, 100).err().unwrap().to_string();
        assert!(e.contains("trim.log") && e.contains("magic"), "{e}");
    }
}
