//! The FSR-ISC baseline (in-storage file-system path walk, DAC'23, as the NICE paper compares with it): the firmware
//! resolves an absolute path from the root inode itself, reading each directory level's inode-table and directory
//! blocks from flash (or its metadata cache), one after the other: a level's block is known only once the level
//! above is parsed. NICE instead locates a file from its first page's OOB in at most two reads (`oob_list`).

use crate::learner::Learner;
use crate::oob_list::{PageCache, INODE_PARSE_INSTR};
use crate::reader::Ext4Reader;
use crate::source::BlockSource;
use nearflash_core::ext::Time;
use nearflash_core::ext::{ExecCtx, ReadTo, Status};
use std::collections::{BTreeSet, HashMap};

/// The outcome of one walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsrResult {
    pub inode: u32,
    pub generation: u32,
    pub size: u64,
    pub levels: u32,
    pub flash_reads: u32,
}

/// Sectors read one after the other through the metadata cache, each block parsed on the A53.
struct Walker<'a, 'b> {
    ctx: &'a mut ExecCtx<'b>,
    cache: &'a mut PageCache,
    t: Time,
    reads: u32,
    /// Superblock and descriptor sectors: the firmware holds them (Superblock Table); not charged.
    known: BTreeSet<u64>,
    /// Sectors this walk already read (its working buffers: a block is not read twice within one walk).
    local: HashMap<u64, Vec<u8>>,
    error: Option<Status>,
}

impl BlockSource for Walker<'_, '_> {
    fn sector_size(&self) -> u32 {
        self.ctx.lba_bytes() as u32
    }
    fn read(&mut self, lba: u64) -> Option<Vec<u8>> {
        if self.known.contains(&lba) {
            let mut buf = vec![0u8; self.ctx.lba_bytes() as usize];
            self.ctx.flash_read(self.t, lba, 1, ReadTo::Dram, &mut buf).ok()?; // content only: the firmware has it in DRAM
            return Some(buf);
        }
        if let Some(b) = self.local.get(&lba) {
            return Some(b.clone());
        }
        match self.cache.read(self.ctx, lba, self.t, &mut self.reads) {
            Ok((b, done)) => {
                self.t = self.ctx.firmware(done, INODE_PARSE_INSTR);
                self.local.insert(lba, b.clone());
                Some(b)
            }
            Err(e) => {
                self.error = Some(e);
                None
            }
        }
    }
}

/// Walks `path` from the root of partition 0. Unknown or damaged paths: Invalid Field.
pub fn walk(ctx: &mut ExecCtx<'_>, learner: &Learner, cache: &mut PageCache, path: &str, t: Time) -> Result<(FsrResult, Time), Status> {
    let no_fs = |ctx: &mut ExecCtx<'_>| ctx.explain(Status::INVALID_FIELD, None, "FSR: the firmware has learnt no ext4 file system in partition 0");
    let Some(sb) = learner.superblock(0) else { return Err(no_fs(ctx)) };
    let Some(start) = learner.partition_start(0) else { return Err(no_fs(ctx)) };
    let (bs, ss) = (u64::from(sb.block_size), ctx.lba_bytes());
    let sector = |byte: u64| start + byte / ss;
    let mut known: BTreeSet<u64> = (sector(1024)..=sector(2047)).collect();
    for b in sb.gdt_block()..sb.gdt_block() + sb.gdt_blocks() {
        known.extend(sector(b * bs)..=sector(b * bs + bs - 1));
    }
    let mut w = Walker { ctx, cache, t, reads: 0, known, local: HashMap::new(), error: None };
    let found = (|| {
        let mut fs = Ext4Reader::open(&mut w, start).ok()?;
        let (ino, levels) = fs.lookup(path).ok()?;
        let inode = fs.inode(ino).ok()?;
        inode.is_regular().then_some((ino, inode.generation, inode.size, levels))
    })();
    if let Some(e) = w.error {
        return Err(e);
    }
    let Some((inode, generation, size, levels)) = found else {
        return Err(w.ctx.explain(Status::INVALID_FIELD, None, format!("FSR path {path:?}: no regular file of that path in partition 0")));
    };
    Ok((FsrResult { inode, generation, size, levels: levels as u32, flash_reads: w.reads }, w.t))
}
