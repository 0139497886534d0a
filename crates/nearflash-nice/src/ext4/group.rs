//! Group descriptors (32-byte records, or `desc_size`-byte records with the 64bit feature): NICE needs only where
//! each group's inode table starts, to recognise inode-table writes.

use super::bytes::u32_at;
use super::superblock::Superblock;
use crate::error::{corrupt, Result};

/// File system block of each group's inode table, checked against the file system size.
pub fn inode_table_start(sb: &Superblock, desc: &[u8]) -> Result<u64> {
    const W: &str = "group descriptor";
    let lo = u64::from(u32_at(desc, 0x8, W)?);
    let hi = if sb.is_64bit() && sb.desc_size >= 64 { u64::from(u32_at(desc, 0x28, W)?) } else { 0 };
    let start = (hi << 32) | lo;
    let end = start.checked_add(sb.inode_table_blocks());
    match end {
        Some(end) if start > u64::from(sb.first_data_block) && end <= sb.blocks_count => Ok(start),
        _ => Err(corrupt(W, format!("inode table at block {start} outside the file system ({} blocks)", sb.blocks_count))),
    }
}

/// Parses the descriptors held in one block of the table: `first_group` is the group of the block's first
/// record; returns (group, inode table start) for every group of the file system the block covers.
pub fn parse_gdt_block(sb: &Superblock, block: &[u8], first_group: u32) -> Result<Vec<(u32, u64)>> {
    let ds = usize::from(sb.desc_size);
    let per_block = block.len() / ds;
    let mut out = Vec::new();
    for i in 0..per_block {
        let g = first_group + i as u32;
        if g >= sb.group_count() {
            break;
        }
        out.push((g, inode_table_start(sb, &block[i * ds..(i + 1) * ds])?));
    }
    Ok(out)
}
