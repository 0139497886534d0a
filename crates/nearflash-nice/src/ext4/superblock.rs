//! The ext4 superblock (1024 bytes at byte 1024 of a partition), reduced to the fields the firmware needs to find
//! group descriptors, inode tables and file blocks. Every field is range-checked: the firmware sees untrusted
//! bytes (any host can write any block), so a damaged superblock is refused rather than trusted.

use super::bytes::{u16_at, u32_at};
use crate::error::{corrupt, NiceError, Result};

/// Byte offset of the superblock inside its partition.
pub const SUPERBLOCK_OFFSET: u64 = 1024;
/// Size of the on-disk superblock record.
pub const SUPERBLOCK_SIZE: usize = 1024;
pub const EXT4_MAGIC: u16 = 0xEF53;

/// Incompatible features this parser understands; any other incompat bit makes the file system unsupported.
const INCOMPAT_FILETYPE: u32 = 0x2;
const INCOMPAT_RECOVER: u32 = 0x4;
const INCOMPAT_JOURNAL_DEV: u32 = 0x8;
const INCOMPAT_META_BG: u32 = 0x10;
const INCOMPAT_EXTENTS: u32 = 0x40;
const INCOMPAT_64BIT: u32 = 0x80;
const INCOMPAT_MMP: u32 = 0x100;
const INCOMPAT_FLEX_BG: u32 = 0x200;
const INCOMPAT_LARGEDIR: u32 = 0x4000;
const INCOMPAT_INLINE_DATA: u32 = 0x8000;
const INCOMPAT_CSUM_SEED: u32 = 0x2000;
const INCOMPAT_ENCRYPT: u32 = 0x10000;
const INCOMPAT_CASEFOLD: u32 = 0x20000;
const KNOWN_INCOMPAT: u32 = INCOMPAT_FILETYPE
    | INCOMPAT_RECOVER
    | INCOMPAT_EXTENTS
    | INCOMPAT_64BIT
    | INCOMPAT_MMP
    | INCOMPAT_FLEX_BG
    | INCOMPAT_LARGEDIR
    | INCOMPAT_INLINE_DATA
    | INCOMPAT_CSUM_SEED
    | INCOMPAT_ENCRYPT
    | INCOMPAT_CASEFOLD;

/// The superblock fields NICE uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Superblock {
    pub inodes_count: u32,
    pub blocks_count: u64,
    pub first_data_block: u32,
    /// File system block size in bytes (1024 << s_log_block_size), 1 KiB..64 KiB.
    pub block_size: u32,
    pub blocks_per_group: u32,
    pub inodes_per_group: u32,
    /// Bytes per inode record (128 for revision 0).
    pub inode_size: u16,
    /// Bytes per group descriptor (32 without the 64bit feature).
    pub desc_size: u16,
    pub first_ino: u32,
    pub feature_incompat: u32,
}

impl Superblock {
    /// Parses the 1024 superblock bytes (the slice may be longer; only its first 1024 bytes are read).
    pub fn parse(b: &[u8]) -> Result<Self> {
        const W: &str = "superblock";
        if b.len() < SUPERBLOCK_SIZE {
            return Err(corrupt(W, format!("{} bytes, need {SUPERBLOCK_SIZE}", b.len())));
        }
        let magic = u16_at(b, 0x38, W)?;
        if magic != EXT4_MAGIC {
            return Err(corrupt(W, format!("magic {magic:#06x}, expected {EXT4_MAGIC:#06x}")));
        }
        let inodes_count = u32_at(b, 0x0, W)?;
        let blocks_lo = u32_at(b, 0x4, W)?;
        let first_data_block = u32_at(b, 0x14, W)?;
        let log_block_size = u32_at(b, 0x18, W)?;
        let blocks_per_group = u32_at(b, 0x20, W)?;
        let inodes_per_group = u32_at(b, 0x28, W)?;
        let rev_level = u32_at(b, 0x4C, W)?;
        let feature_incompat = u32_at(b, 0x60, W)?;
        if log_block_size > 6 {
            return Err(corrupt(W, format!("s_log_block_size {log_block_size} (block size above 64 KiB)")));
        }
        let block_size = 1024u32 << log_block_size;
        let is_64bit = feature_incompat & INCOMPAT_64BIT != 0;
        let blocks_hi = if is_64bit { u32_at(b, 0x150, W)? } else { 0 };
        let blocks_count = (u64::from(blocks_hi) << 32) | u64::from(blocks_lo);
        let (inode_size, first_ino) = if rev_level == 0 { (128, 11) } else { (u16_at(b, 0x58, W)?, u32_at(b, 0x54, W)?) };
        let desc_size = if is_64bit { u16_at(b, 0xFE, W)? } else { 32 };
        let sb = Superblock {
            inodes_count,
            blocks_count,
            first_data_block,
            block_size,
            blocks_per_group,
            inodes_per_group,
            inode_size,
            desc_size,
            first_ino,
            feature_incompat,
        };
        sb.validate()?;
        Ok(sb)
    }

    fn validate(&self) -> Result<()> {
        const W: &str = "superblock";
        let bad = |d: String| Err(corrupt(W, d));
        if self.blocks_count == 0 || self.inodes_count == 0 {
            return bad(format!("blocks_count {} inodes_count {}", self.blocks_count, self.inodes_count));
        }
        // Byte offsets of blocks must fit u64 with room for a partition offset: at most 2^60 bytes (1 EiB).
        if self.blocks_count.checked_mul(u64::from(self.block_size)).is_none_or(|b| b > 1 << 60) {
            return bad(format!("{} blocks of {} bytes exceed 1 EiB", self.blocks_count, self.block_size));
        }
        // A group's block bitmap is one block: at most 8 * block_size blocks per group.
        if self.blocks_per_group == 0 || self.blocks_per_group > 8 * self.block_size {
            return bad(format!("blocks_per_group {} (block size {})", self.blocks_per_group, self.block_size));
        }
        if self.inodes_per_group == 0 || self.inodes_per_group > 8 * self.block_size {
            return bad(format!("inodes_per_group {}", self.inodes_per_group));
        }
        // Before group_count(), which subtracts first_data_block from blocks_count.
        let expected_first = u32::from(self.block_size == 1024);
        if self.first_data_block != expected_first {
            return bad(format!("first_data_block {} for block size {}", self.first_data_block, self.block_size));
        }
        if u64::from(self.first_data_block) >= self.blocks_count {
            return bad("first_data_block beyond the file system".into());
        }
        if u64::from(self.inodes_per_group) * u64::from(self.group_count()) < u64::from(self.inodes_count) {
            return bad(format!("inodes_count {} exceeds groups x inodes_per_group", self.inodes_count));
        }
        if self.inode_size < 128 || !self.inode_size.is_power_of_two() || u32::from(self.inode_size) > self.block_size {
            return bad(format!("inode_size {}", self.inode_size));
        }
        if self.desc_size < 32 || !self.desc_size.is_power_of_two() || u32::from(self.desc_size) > 1024 {
            return bad(format!("desc_size {}", self.desc_size));
        }
        let unknown = self.feature_incompat & !KNOWN_INCOMPAT;
        if unknown & INCOMPAT_JOURNAL_DEV != 0 {
            return Err(NiceError::Unsupported("external journal device, not a file system".into()));
        }
        if unknown & INCOMPAT_META_BG != 0 {
            return Err(NiceError::Unsupported("meta_bg group descriptor layout".into()));
        }
        if unknown != 0 {
            return Err(NiceError::Unsupported(format!("incompatible features {unknown:#x}")));
        }
        Ok(())
    }

    pub fn is_64bit(&self) -> bool {
        self.feature_incompat & INCOMPAT_64BIT != 0
    }

    pub fn has_extents(&self) -> bool {
        self.feature_incompat & INCOMPAT_EXTENTS != 0
    }

    /// Number of block groups.
    pub fn group_count(&self) -> u32 {
        let data = self.blocks_count - u64::from(self.first_data_block);
        // Validated: blocks_per_group >= 1; the quotient fits u32 because blocks_count < 2^64 / 1 ... bounded below.
        u32::try_from(data.div_ceil(u64::from(self.blocks_per_group))).unwrap_or(u32::MAX)
    }

    /// File system block of the first group-descriptor block (right after the superblock's block).
    pub fn gdt_block(&self) -> u64 {
        u64::from(self.first_data_block) + 1
    }

    /// Number of blocks the group-descriptor table spans.
    pub fn gdt_blocks(&self) -> u64 {
        (u64::from(self.group_count()) * u64::from(self.desc_size)).div_ceil(u64::from(self.block_size))
    }

    /// Block group and byte offset inside that group's inode table of inode `ino` (1-based), or an error when
    /// `ino` is 0 or beyond `inodes_count`.
    pub fn inode_location(&self, ino: u32) -> Result<(u32, u64)> {
        if ino == 0 || ino > self.inodes_count {
            return Err(corrupt("inode number", format!("{ino} outside 1..={}", self.inodes_count)));
        }
        let idx = ino - 1;
        let group = idx / self.inodes_per_group;
        let within = idx % self.inodes_per_group;
        Ok((group, u64::from(within) * u64::from(self.inode_size)))
    }

    /// Blocks an inode table occupies.
    pub fn inode_table_blocks(&self) -> u64 {
        (u64::from(self.inodes_per_group) * u64::from(self.inode_size)).div_ceil(u64::from(self.block_size))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn minimal() -> Vec<u8> {
        let mut b = vec![0u8; 1024];
        b[0x0..0x4].copy_from_slice(&128u32.to_le_bytes());
        b[0x4..0x8].copy_from_slice(&1024u32.to_le_bytes());
        b[0x18..0x1C].copy_from_slice(&2u32.to_le_bytes());
        b[0x20..0x24].copy_from_slice(&32768u32.to_le_bytes());
        b[0x28..0x2C].copy_from_slice(&128u32.to_le_bytes());
        b[0x38..0x3A].copy_from_slice(&EXT4_MAGIC.to_le_bytes());
        b[0x4C..0x50].copy_from_slice(&1u32.to_le_bytes());
        b[0x54..0x58].copy_from_slice(&11u32.to_le_bytes());
        b[0x58..0x5A].copy_from_slice(&256u16.to_le_bytes());
        b[0x60..0x64].copy_from_slice(&(INCOMPAT_EXTENTS | INCOMPAT_FILETYPE).to_le_bytes());
        b
    }

    #[test]
    fn parses_a_minimal_superblock() {
        let sb = Superblock::parse(&minimal()).unwrap();
        assert_eq!(sb.block_size, 4096);
        assert_eq!(sb.group_count(), 1);
        assert_eq!(sb.desc_size, 32);
        assert_eq!(sb.inode_location(1).unwrap(), (0, 0));
        assert_eq!(sb.inode_location(12).unwrap(), (0, 11 * 256));
        assert!(sb.inode_location(0).is_err() && sb.inode_location(129).is_err());
    }

    #[test]
    fn refuses_damaged_fields() {
        let cases: [(usize, &[u8]); 6] = [
            (0x38, &[0, 0]),                   // magic
            (0x18, &[9, 0, 0, 0]),             // log block size
            (0x20, &[0, 0, 0, 0]),             // blocks per group
            (0x58, &[100, 0]),                 // inode size
            (0x60, &[0x40, 0x10, 0, 0]),       // meta_bg
            (0x0, &[0xFF, 0xFF, 0xFF, 0x7F]),  // inode count beyond groups
        ];
        // 1 KiB blocks (first data block 1) in a one-block file system: found by the fuzzer as an underflow.
        let mut b = minimal();
        b[0x4..0x8].copy_from_slice(&1u32.to_le_bytes());
        b[0x18..0x1C].copy_from_slice(&0u32.to_le_bytes());
        b[0x14..0x18].copy_from_slice(&1u32.to_le_bytes());
        b[0x20..0x24].copy_from_slice(&8192u32.to_le_bytes());
        assert!(Superblock::parse(&b).is_err());
        for (off, bytes) in cases {
            let mut b = minimal();
            b[off..off + bytes.len()].copy_from_slice(bytes);
            assert!(Superblock::parse(&b).is_err(), "field at {off:#x}");
        }
        assert!(Superblock::parse(&minimal()[..1000]).is_err());
    }
}
