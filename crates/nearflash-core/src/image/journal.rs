//! The trim journal: deallocations since the last checkpoint, appended as they happen so that recovery can
//! replay them in sequence order with the programmed pages (a trimmed sector leaves no trace in the OOB area).

use crate::error::Result;
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

const RECORD: usize = 16;

pub struct TrimJournal {
    file: Option<File>,
}

impl TrimJournal {
    pub fn open(path: &Path) -> Result<Self> {
        let file = OpenOptions::new().read(true).append(true).create(true).open(path)?;
        Ok(TrimJournal { file: Some(file) })
    }

    /// A journal that records nothing (devices without an image).
    pub fn none() -> Self {
        TrimJournal { file: None }
    }

    pub fn append(&mut self, r: TrimRecord) -> Result<()> {
        if let Some(f) = &mut self.file {
            let mut b = [0u8; RECORD];
            b[0..8].copy_from_slice(&r.seq.to_le_bytes());
            b[8..12].copy_from_slice(&r.lpn.to_le_bytes());
            b[12..16].copy_from_slice(&r.count.to_le_bytes());
            f.write_all(&b)?;
        }
        Ok(())
    }

    /// Every whole record (a torn tail from a kill is ignored).
    pub fn records(&mut self) -> Result<Vec<TrimRecord>> {
        let Some(f) = &mut self.file else { return Ok(Vec::new()) };
        f.seek(SeekFrom::Start(0))?;
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes)?;
        Ok(bytes
            .chunks_exact(RECORD)
            .map(|c| TrimRecord {
                seq: u64::from_le_bytes(c[0..8].try_into().expect("8 bytes")),
                lpn: u32::from_le_bytes(c[8..12].try_into().expect("4 bytes")),
                count: u32::from_le_bytes(c[12..16].try_into().expect("4 bytes")),
            })
            .collect())
    }

    /// Empties the journal (after a checkpoint made its effects durable).
    pub fn clear(&mut self) -> Result<()> {
        if let Some(f) = &mut self.file {
            f.set_len(0)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_survive_reopen_and_torn_tails_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("trim.log");
        let mut j = TrimJournal::open(&p).unwrap();
        j.append(TrimRecord { seq: 5, lpn: 10, count: 3 }).unwrap();
        drop(j);
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(&[1, 2, 3]).unwrap(); // torn record
        let mut j = TrimJournal::open(&p).unwrap();
        assert_eq!(j.records().unwrap(), vec![TrimRecord { seq: 5, lpn: 10, count: 3 }]);
        j.clear().unwrap();
        assert!(j.records().unwrap().is_empty());
    }
}
