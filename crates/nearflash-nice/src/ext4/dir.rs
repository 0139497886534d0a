//! Directory blocks: linear `ext4_dir_entry_2` records. Hashed-tree (htree) directories keep their entries in
//! ordinary leaf blocks; the root and interior index blocks parse as blocks holding only "." / ".." or one empty
//! record spanning the block, so a linear walk over every block of a directory finds all its entries.

use super::bytes::{slice, u16_at, u32_at, u8_at};
use crate::error::{corrupt, Result};

/// One directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub inode: u32,
    pub name: Vec<u8>,
    /// ext4 file type byte (1 regular, 2 directory, 7 symlink...).
    pub file_type: u8,
}

/// Parses all live entries of one directory block. `inodes_count` bounds the inode numbers.
pub fn parse_dir_block(b: &[u8], inodes_count: u32) -> Result<Vec<DirEntry>> {
    const W: &str = "directory block";
    let mut out = Vec::new();
    let mut off = 0usize;
    while off < b.len() {
        let inode = u32_at(b, off, W)?;
        let rec_len = usize::from(u16_at(b, off + 4, W)?);
        let name_len = usize::from(u8_at(b, off + 6, W)?);
        let file_type = u8_at(b, off + 7, W)?;
        // rec_len is 4-byte aligned, covers the header and name, and stays in the block (a 64 KiB block stores
        // rec_len 65536 as 0 or 65535; not produced for 4 KiB blocks).
        if rec_len < 12 || rec_len % 4 != 0 || off + rec_len > b.len() || 8 + name_len > rec_len {
            return Err(corrupt(W, format!("entry at {off}: rec_len {rec_len}, name_len {name_len}")));
        }
        if inode != 0 {
            if inode > inodes_count {
                return Err(corrupt(W, format!("entry at {off}: inode {inode} > {inodes_count}")));
            }
            if name_len == 0 {
                return Err(corrupt(W, format!("entry at {off}: empty name")));
            }
            let name = slice(b, off + 8, name_len, W)?.to_vec();
            if name.contains(&b'/') || name.contains(&0) {
                return Err(corrupt(W, format!("entry at {off}: name contains '/' or NUL")));
            }
            out.push(DirEntry { inode, name, file_type });
        }
        off += rec_len;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(inode: u32, name: &[u8], rec_len: u16) -> Vec<u8> {
        let mut e = vec![0u8; usize::from(rec_len)];
        e[0..4].copy_from_slice(&inode.to_le_bytes());
        e[4..6].copy_from_slice(&rec_len.to_le_bytes());
        e[6] = name.len() as u8;
        e[7] = 1;
        e[8..8 + name.len()].copy_from_slice(name);
        e
    }

    #[test]
    fn parses_and_skips_empty_records() {
        let mut b = entry(12, b"a.bin", 16);
        b.extend(entry(0, b"", 12));
        b.extend(entry(13, b"b", 4096 - 28));
        let es = parse_dir_block(&b, 100).unwrap();
        assert_eq!(es.len(), 2);
        assert_eq!(es[1].name, b"b");
    }

    #[test]
    fn refuses_bad_records() {
        let mut b = entry(12, b"a", 4096);
        b[4] = 3; // rec_len 3 + 16*256
        assert!(parse_dir_block(&b, 100).is_err());
        assert!(parse_dir_block(&entry(500, b"a", 4096), 100).is_err());
        assert!(parse_dir_block(&entry(5, b"a/b", 4096), 100).is_err());
        let mut long = entry(5, b"a", 4096);
        long[6] = 255;
        long.truncate(200);
        long[4..6].copy_from_slice(&200u16.to_le_bytes());
        assert!(parse_dir_block(&long, 100).is_err());
    }
}
