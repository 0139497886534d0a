//! A read-only ext4 reader over a [`BlockSource`]: path lookup from the root inode, inode records, file extents
//! as device LBAs, file contents. The host library's `open(path)` uses it (the paper wraps the file system's own
//! lookup), and the FSR-ISC baseline walks paths with it one directory level at a time.

use crate::error::{corrupt, invalid, NiceError, Result};
use crate::ext4::{group, parse_dir_block, resolve_extents, DirEntry, Extent, Inode, Superblock};
use crate::ext4::{SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE};
use crate::source::{read_bytes, BlockSource};

pub const ROOT_INODE: u32 = 2;
/// Bound on extent-tree nodes loaded per file and on directory blocks walked per directory.
const MAX_TREE_NODES: usize = 1 << 16;
/// Bound on path components (PATH_MAX 4096 / 2).
const MAX_COMPONENTS: usize = 2048;

/// An ext4 file system inside a partition of a block source.
pub struct Ext4Reader<'a> {
    src: &'a mut dyn BlockSource,
    /// Byte offset of the partition on the source.
    part_off: u64,
    pub sb: Superblock,
    inode_tables: Vec<u64>,
    /// File system blocks read so far (FSR-ISC's flash reads: inode-table and directory blocks per level).
    pub block_reads: u64,
}

impl<'a> Ext4Reader<'a> {
    /// Reads the superblock and group descriptors of the partition starting at sector `start_lba`.
    pub fn open(src: &'a mut dyn BlockSource, start_lba: u64) -> Result<Self> {
        let part_off = start_lba
            .checked_mul(u64::from(src.sector_size()))
            .ok_or_else(|| invalid(format!("partition start {start_lba} overflows")))?;
        let sbb = read_bytes(src, part_off + SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE)
            .ok_or_else(|| corrupt("superblock", "not written"))?;
        let sb = Superblock::parse(&sbb)?;
        if sb.block_size % src.sector_size() != 0 {
            return Err(NiceError::Unsupported(format!(
                "block size {} not a multiple of the {}-byte sector",
                sb.block_size,
                src.sector_size()
            )));
        }
        let mut r = Ext4Reader { src, part_off, sb, inode_tables: Vec::new(), block_reads: 0 };
        let per_block = r.sb.block_size / u32::from(r.sb.desc_size);
        for i in 0..r.sb.gdt_blocks() {
            let blk = r.block(r.sb.gdt_block() + i)?;
            let first = u32::try_from(i).unwrap_or(u32::MAX).saturating_mul(per_block);
            r.inode_tables.extend(group::parse_gdt_block(&r.sb, &blk, first)?.into_iter().map(|(_, t)| t));
        }
        Ok(r)
    }

    /// Device LBA of file system block `blk`.
    pub fn block_lba(&self, blk: u64) -> u64 {
        let ss = u64::from(self.src.sector_size());
        (self.part_off + blk * u64::from(self.sb.block_size)) / ss
    }

    /// One file system block.
    pub fn block(&mut self, blk: u64) -> Result<Vec<u8>> {
        if blk >= self.sb.blocks_count {
            return Err(corrupt("block number", format!("{blk} >= {}", self.sb.blocks_count)));
        }
        let bs = self.sb.block_size;
        self.block_reads += 1;
        read_bytes(self.src, self.part_off + blk * u64::from(bs), bs as usize)
            .ok_or_else(|| corrupt("block", format!("block {blk} was never written")))
    }

    /// The inode record of `ino`.
    pub fn inode(&mut self, ino: u32) -> Result<Inode> {
        let (g, off) = self.sb.inode_location(ino)?;
        let table = *self.inode_tables.get(g as usize).ok_or_else(|| corrupt("group", format!("group {g}")))?;
        let bs = u64::from(self.sb.block_size);
        let blk = self.block(table + off / bs)?;
        let at = (off % bs) as usize;
        Inode::parse(&blk[at..at + usize::from(self.sb.inode_size)])
    }

    /// The leaf extents of an inode (empty for inodes without an extent tree).
    pub fn extents(&mut self, inode: &Inode) -> Result<Vec<Extent>> {
        let fs_blocks = self.sb.blocks_count;
        let Some(root) = inode.extent_root(fs_blocks)? else { return Ok(Vec::new()) };
        resolve_extents(root, fs_blocks, MAX_TREE_NODES, &mut |b| self.block(b))
    }

    /// Device LBAs of every sector of the file, in file order (holes and unwritten extents are skipped: they hold
    /// no data on flash).
    pub fn file_lbas(&mut self, inode: &Inode) -> Result<Vec<u64>> {
        let spb = u64::from(self.sb.block_size / self.src.sector_size());
        let mut out = Vec::new();
        for e in self.extents(inode)?.into_iter().filter(|e| !e.unwritten) {
            for b in 0..u64::from(e.len) {
                let first = self.block_lba(e.start + b);
                out.extend(first..first + spb);
            }
        }
        Ok(out)
    }

    /// The entries of a directory inode.
    pub fn dir_entries(&mut self, dir: &Inode) -> Result<Vec<DirEntry>> {
        if !dir.is_dir() {
            return Err(NiceError::InvalidArgument("not a directory".into()));
        }
        let mut out = Vec::new();
        for e in self.extents(dir)?.into_iter().filter(|e| !e.unwritten) {
            for b in 0..u64::from(e.len) {
                let blk = self.block(e.start + b)?;
                out.extend(parse_dir_block(&blk, self.sb.inodes_count)?);
            }
        }
        Ok(out)
    }

    /// Resolves an absolute path to its inode number, one directory per component; `levels` counts the directory
    /// reads (FSR-ISC's flash reads per level).
    pub fn lookup(&mut self, path: &str) -> Result<(u32, usize)> {
        let rest = path.strip_prefix('/').ok_or_else(|| invalid(format!("path {path:?} is not absolute")))?;
        let mut ino = ROOT_INODE;
        let mut levels = 0usize;
        for (i, comp) in rest.split('/').filter(|c| !c.is_empty()).enumerate() {
            if i >= MAX_COMPONENTS {
                return Err(invalid(format!("path {path:?} has more than {MAX_COMPONENTS} components")));
            }
            let dir = self.inode(ino)?;
            if !dir.is_dir() {
                return Err(NiceError::NotFound(format!("{path}: a component is not a directory")));
            }
            levels += 1;
            let entries = self.dir_entries(&dir)?;
            ino = entries
                .iter()
                .find(|e| e.name == comp.as_bytes())
                .map(|e| e.inode)
                .ok_or_else(|| NiceError::NotFound(path.to_string()))?;
        }
        Ok((ino, levels))
    }

    /// The whole contents of a regular file (its size, holes as zeros).
    pub fn read_file(&mut self, inode: &Inode) -> Result<Vec<u8>> {
        let fs_bytes = self.sb.blocks_count.saturating_mul(u64::from(self.sb.block_size));
        if inode.size > fs_bytes {
            return Err(corrupt("inode", format!("size {} beyond the {fs_bytes}-byte file system", inode.size)));
        }
        let size = usize::try_from(inode.size).map_err(|_| invalid("file larger than memory"))?;
        let bs = self.sb.block_size as usize;
        let mut out = vec![0u8; size];
        for e in self.extents(inode)?.into_iter().filter(|e| !e.unwritten) {
            for b in 0..e.len as usize {
                let at = (e.logical as usize + b) * bs;
                if at >= size {
                    break;
                }
                let blk = self.block(e.start + b as u64)?;
                let n = bs.min(size - at);
                out[at..at + n].copy_from_slice(&blk[..n]);
            }
        }
        Ok(out)
    }
}
