//! The Superblock Table: where each partition starts. The firmware reads the partition table (MBR, or GPT behind a
//! protective MBR) from LBA 0; without one the whole device is one file system starting at LBA 0, which is how
//! `mke2fs` on a bare device lays it out.

use crate::ext4::bytes::{slice, u32_at, u64_at, u8_at};
use crate::error::{corrupt, Result};
use crate::source::BlockSource;

/// One partition: its first sector and length in sectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partition {
    pub start_lba: u64,
    pub sectors: u64,
}

const MBR_SIGNATURE: [u8; 2] = [0x55, 0xAA];
const GPT_PROTECTIVE: u8 = 0xEE;
const GPT_SIGNATURE: &[u8; 8] = b"EFI PART";
/// Bound on GPT entries read (the standard table has 128).
const MAX_GPT_ENTRIES: u32 = 256;

/// Reads the partition table through `src` (capacity `sectors`). Returns the partitions, or one partition
/// covering the device when sector 0 carries no MBR signature. Sectors not yet written count as "no table".
pub fn superblock_table(src: &mut dyn BlockSource, sectors: u64) -> Result<Vec<Partition>> {
    let whole = vec![Partition { start_lba: 0, sectors }];
    let Some(s0) = src.read(0) else { return Ok(whole) };
    if s0.len() < 512 || s0[510..512] != MBR_SIGNATURE {
        return Ok(whole);
    }
    // An ext4 boot block is zero; a VFAT/NTFS boot sector also ends in 55AA but has no partition entries:
    // all four entries zero means "no table".
    let mut parts = Vec::new();
    for i in 0..4 {
        let e = slice(&s0, 0x1BE + 16 * i, 16, "MBR")?;
        let kind = u8_at(e, 4, "MBR")?;
        if kind == 0 {
            continue;
        }
        if kind == GPT_PROTECTIVE {
            return gpt(src, sectors);
        }
        let start = u64::from(u32_at(e, 8, "MBR")?);
        let len = u64::from(u32_at(e, 12, "MBR")?);
        parts.push(checked(start, len, sectors, "MBR")?);
    }
    Ok(if parts.is_empty() { whole } else { parts })
}

fn checked(start: u64, len: u64, sectors: u64, what: &'static str) -> Result<Partition> {
    if start == 0 || len == 0 || start.checked_add(len).is_none_or(|e| e > sectors) {
        return Err(corrupt(what, format!("partition {start}+{len} outside the device ({sectors} sectors)")));
    }
    Ok(Partition { start_lba: start, sectors: len })
}

fn gpt(src: &mut dyn BlockSource, sectors: u64) -> Result<Vec<Partition>> {
    const W: &str = "GPT";
    let h = src.read(1).ok_or_else(|| corrupt(W, "header sector 1 not written"))?;
    if slice(&h, 0, 8, W)? != GPT_SIGNATURE {
        return Err(corrupt(W, "header signature"));
    }
    let entries_lba = u64_at(&h, 0x48, W)?;
    let count = u32_at(&h, 0x50, W)?;
    let size = u32_at(&h, 0x54, W)?;
    if count > MAX_GPT_ENTRIES || !(128..=4096).contains(&size) || !size.is_power_of_two() {
        return Err(corrupt(W, format!("{count} entries of {size} bytes")));
    }
    let ss = u64::from(src.sector_size());
    let bytes = crate::source::read_bytes(src, entries_lba.saturating_mul(ss), (count * size) as usize)
        .ok_or_else(|| corrupt(W, "entry array not written"))?;
    let mut parts = Vec::new();
    for i in 0..count as usize {
        let e = slice(&bytes, i * size as usize, size as usize, W)?;
        if e[..16].iter().all(|&b| b == 0) {
            continue;
        }
        let first = u64_at(e, 32, W)?;
        let last = u64_at(e, 40, W)?;
        if last < first {
            return Err(corrupt(W, format!("entry {i}: last {last} < first {first}")));
        }
        parts.push(checked(first, last - first + 1, sectors, W)?);
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::MemDisk;

    #[test]
    fn no_table_means_one_partition_at_zero() {
        let mut d = MemDisk::new(4096, 16);
        assert_eq!(superblock_table(&mut d, 16).unwrap(), vec![Partition { start_lba: 0, sectors: 16 }]);
        d.write(0, &[0u8; 4096]);
        assert_eq!(superblock_table(&mut d, 16).unwrap()[0].start_lba, 0);
    }

    #[test]
    fn mbr_and_gpt_partitions() {
        let mut d = MemDisk::new(4096, 64);
        let mut s0 = vec![0u8; 4096];
        s0[510] = 0x55;
        s0[511] = 0xAA;
        s0[0x1BE + 4] = 0x83;
        s0[0x1BE + 8..0x1BE + 12].copy_from_slice(&8u32.to_le_bytes());
        s0[0x1BE + 12..0x1BE + 16].copy_from_slice(&40u32.to_le_bytes());
        d.write(0, &s0);
        assert_eq!(superblock_table(&mut d, 64).unwrap(), vec![Partition { start_lba: 8, sectors: 40 }]);
        s0[0x1BE + 12..0x1BE + 16].copy_from_slice(&60u32.to_le_bytes());
        d.write(0, &s0);
        assert!(superblock_table(&mut d, 64).is_err(), "past the end");
        // GPT behind a protective MBR.
        s0[0x1BE + 4] = 0xEE;
        d.write(0, &s0);
        assert!(superblock_table(&mut d, 64).is_err(), "header not written yet");
        let mut h = vec![0u8; 4096];
        h[..8].copy_from_slice(GPT_SIGNATURE);
        h[0x48..0x50].copy_from_slice(&2u64.to_le_bytes());
        h[0x50..0x54].copy_from_slice(&4u32.to_le_bytes());
        h[0x54..0x58].copy_from_slice(&128u32.to_le_bytes());
        d.write(1, &h);
        let mut e = vec![0u8; 4096];
        e[0] = 1;
        e[32..40].copy_from_slice(&6u64.to_le_bytes());
        e[40..48].copy_from_slice(&29u64.to_le_bytes());
        d.write(2, &e);
        assert_eq!(superblock_table(&mut d, 64).unwrap(), vec![Partition { start_lba: 6, sectors: 24 }]);
    }
}
