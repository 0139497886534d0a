//! The host library of the paper's Table II, without the device: `open(path, flag)` wraps the file system's lookup
//! (an ext4 reader over the device's blocks), checks the caller's permission from the inode's mode bits and uid,
//! and keeps the head-LBA hash table; the hyper-address of a file is its first LBA plus the real capacity C, which
//! `NICE_Write` / `NICE_Read` send as ordinary writes and reads.

use std::collections::HashMap;

use crate::error::{invalid, NiceError, Result};
use crate::reader::Ext4Reader;

/// `open` flags the library accepts (POSIX access modes; NICE only reads files in storage).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenFlag {
    ReadOnly,
}

impl OpenFlag {
    /// Parses a POSIX flag value: only O_RDONLY (0) is meaningful for in-storage processing.
    pub fn from_posix(flag: i32) -> Result<Self> {
        match flag {
            0 => Ok(OpenFlag::ReadOnly),
            _ => Err(invalid(format!("flag {flag}: only O_RDONLY (0) is allowed"))),
        }
    }
}

/// What `open` records per path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFile {
    pub inode: u32,
    pub head_lba: u64,
    pub size: u64,
}

/// The head-LBA hash table of one device.
#[derive(Debug, Clone)]
pub struct HeadTable {
    /// Real capacity C in sectors: hyper-addresses start there.
    capacity: u64,
    uid: u32,
    files: HashMap<String, OpenFile>,
}

impl HeadTable {
    /// A table for a device of `capacity` sectors, opened by user `uid`.
    pub fn new(capacity: u64, uid: u32) -> Result<Self> {
        if capacity == 0 || capacity > u64::MAX / 2 {
            return Err(invalid(format!("capacity {capacity} sectors")));
        }
        Ok(HeadTable { capacity, uid, files: HashMap::new() })
    }

    /// Looks `path` up, checks that the caller may read it and that it is a non-empty regular file, and inserts
    /// (path -> first LBA). Only a passing check inserts.
    pub fn open(&mut self, fs: &mut Ext4Reader<'_>, path: &str, flag: OpenFlag) -> Result<OpenFile> {
        let OpenFlag::ReadOnly = flag;
        let (ino, _) = fs.lookup(path)?;
        let inode = fs.inode(ino)?;
        if !inode.is_regular() {
            return Err(invalid(format!("{path} is not a regular file")));
        }
        if !inode.readable_by(self.uid) {
            return Err(NiceError::PermissionDenied(format!(
                "{path}: mode {:o} owner {} not readable by uid {}",
                inode.mode & 0o7777,
                inode.uid,
                self.uid
            )));
        }
        let lbas = fs.file_lbas(&inode)?;
        let head_lba = *lbas.first().ok_or_else(|| invalid(format!("{path} has no data blocks")))?;
        let f = OpenFile { inode: ino, head_lba, size: inode.size };
        self.files.insert(path.to_string(), f);
        Ok(f)
    }

    /// The hyper-address (first LBA + C) of an opened file.
    pub fn hyper_address(&self, path: &str) -> Result<u64> {
        let f = self.files.get(path).ok_or_else(|| NiceError::NotFound(format!("{path} was not opened")))?;
        Ok(f.head_lba + self.capacity)
    }

    /// Forgets an opened path.
    pub fn close(&mut self, path: &str) -> bool {
        self.files.remove(path).is_some()
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

/// Splits an LBA seen by the device into (original LBA, is an in-storage invocation): reads and writes at
/// `capacity..2 * capacity` are hyper-addresses; beyond that is out of range.
pub fn split_hyper(lba: u64, capacity: u64) -> Option<(u64, bool)> {
    match lba {
        l if l < capacity => Some((l, false)),
        l if l - capacity < capacity => Some((l - capacity, true)),
        _ => None,
    }
}
