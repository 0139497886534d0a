//! The firmware's ext4 learner: it sees only the writes the device receives (LBA + bytes) and learns, per file,
//! its inode number and the device LBAs of its data, as NICE's firmware does (paper Sec. IV-B).
//!
//! ext4 writes in no fixed order (data before the inode that points at it; a copy tool may even write the image
//! back to front), so every structure is learnt whenever the last piece it depends on arrives:
//! * the superblock (sector holding partition byte 1024) gives the group-descriptor blocks;
//! * a group-descriptor block gives the inode tables of its groups;
//! * an inode-table block gives inodes; a file's extent tree may point at tree blocks elsewhere;
//! * directory data blocks give names.
//!
//! When a piece arrives after blocks that depend on it were written, the learner re-reads those blocks from
//! flash ("deferred list building"): a superblock written last triggers reading the group descriptors and the
//! inode tables already on flash. Those re-reads are counted (`deferred_reads`) so the firmware can charge them.
//! Blocks awaited but not yet written are remembered by role (extent-tree node or directory block of an inode),
//! and the inode is relearnt when they arrive. Corrupt metadata is logged in `errors` and the structure it would
//! have described is dropped; the learner never panics on bytes.

use std::collections::{BTreeMap, HashMap};

use crate::error::{invalid, NiceError, Result};
use crate::ext4::{group, parse_dir_block, resolve_extents, DirEntry, Inode, Superblock};
use crate::ext4::{SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE};
use crate::partition::{superblock_table, Partition};
use crate::source::{read_bytes, BlockSource};

/// Bound on extent-tree nodes per file.
const MAX_TREE_NODES: usize = 1 << 16;
/// Bound on errors kept (oldest first).
const MAX_ERRORS: usize = 64;
/// Sectors whose writes can change the partition table (MBR, GPT header and a 128-entry array at 512 B sectors).
const TABLE_SECTORS: u64 = 34;

/// What the learner knows about one file or directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileLayout {
    pub partition: usize,
    pub inode: u32,
    pub mode: u16,
    pub uid: u32,
    pub size: u64,
    pub is_dir: bool,
    /// Device LBAs of the file's data sectors in file order; empty until `complete`.
    pub lbas: Vec<u64>,
    /// False while an extent-tree block of the file has not been written yet.
    pub complete: bool,
}

impl FileLayout {
    pub fn head_lba(&self) -> Option<u64> {
        self.lbas.first().copied()
    }
}

/// A change the firmware reacts to (rewriting the file's OOB list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Learnt {
    /// The file's layout is now known (or changed).
    Layout { partition: usize, inode: u32 },
    /// The inode slot was freed or no longer parses.
    Removed { partition: usize, inode: u32 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Gdt(u64),
    ExtentNode(u32),
    DirData(u32),
}

#[derive(Default)]
struct PartState {
    part: Option<Partition>,
    sb: Option<Superblock>,
    /// Inode table start block per group (None until its descriptor is written).
    tables: Vec<Option<u64>>,
    roles: HashMap<u64, Vec<Role>>,
    files: BTreeMap<u32, FileLayout>,
    dirs: BTreeMap<u32, BTreeMap<u64, Vec<DirEntry>>>,
}

/// The learner of one device.
pub struct Learner {
    sectors: u64,
    sector_size: u32,
    table: Vec<Partition>,
    parts: Vec<PartState>,
    heads: BTreeMap<u64, (usize, u32)>,
    /// Sector 0 carries a protective MBR: the GPT sectors after it matter too.
    gpt: bool,
    /// Sectors re-read from flash because metadata arrived after the blocks it describes.
    pub deferred_reads: u64,
    /// Corrupt or unsupported metadata seen (newest last, at most 64).
    pub errors: Vec<NiceError>,
}

/// A source whose sectors in the current write come from the write buffer (free); others are flash re-reads.
struct Overlay<'a> {
    src: &'a mut dyn BlockSource,
    lba: u64,
    data: &'a [u8],
    reads: u64,
}

impl BlockSource for Overlay<'_> {
    fn sector_size(&self) -> u32 {
        self.src.sector_size()
    }
    fn read(&mut self, lba: u64) -> Option<Vec<u8>> {
        let s = self.src.sector_size() as usize;
        let n = (self.data.len() / s) as u64;
        if lba >= self.lba && lba < self.lba + n {
            let i = (lba - self.lba) as usize;
            return Some(self.data[i * s..(i + 1) * s].to_vec());
        }
        let r = self.src.read(lba);
        self.reads += u64::from(r.is_some());
        r
    }
}

impl Learner {
    /// A learner for a device of `sectors` sectors of `sector_size` bytes.
    pub fn new(sectors: u64, sector_size: u32) -> Result<Self> {
        if sector_size < 512 || !sector_size.is_power_of_two() || sectors == 0 {
            return Err(invalid(format!("sector size {sector_size} / {sectors} sectors")));
        }
        let whole = Partition { start_lba: 0, sectors };
        let parts = vec![PartState { part: Some(whole), ..Default::default() }];
        Ok(Learner { sectors, sector_size, table: vec![whole], parts, heads: BTreeMap::new(), gpt: false, deferred_reads: 0, errors: Vec::new() })
    }

    /// The Superblock Table: each partition's start and length.
    pub fn superblock_table(&self) -> &[Partition] {
        &self.table
    }

    /// The superblock learnt for a partition.
    pub fn superblock(&self, partition: usize) -> Option<&Superblock> {
        self.parts.get(partition).and_then(|p| p.sb.as_ref())
    }

    /// Every file and directory learnt, by partition and inode.
    pub fn files(&self) -> impl Iterator<Item = &FileLayout> {
        self.parts.iter().flat_map(|p| p.files.values())
    }

    pub fn file(&self, partition: usize, inode: u32) -> Option<&FileLayout> {
        self.parts.get(partition)?.files.get(&inode)
    }

    /// The regular file whose first data sector is `lba` (what a hyper-address must name).
    pub fn file_at_head(&self, lba: u64) -> Option<&FileLayout> {
        let &(p, ino) = self.heads.get(&lba)?;
        self.file(p, ino)
    }

    /// Where inode `ino` of a partition is on the device: the sector holding its record and the byte offset of the
    /// record in that sector (from the Superblock Table, the superblock and the group descriptors learnt).
    pub fn inode_sector(&self, partition: usize, ino: u32) -> Option<(u64, usize)> {
        let p = self.parts.get(partition)?;
        let sb = p.sb.as_ref()?;
        let (g, off) = sb.inode_location(ino).ok()?;
        let table = (*p.tables.get(g as usize)?)?;
        let byte = p.part?.start_lba.checked_mul(u64::from(self.sector_size))?.checked_add(table.checked_mul(u64::from(sb.block_size))?)?.checked_add(off)?;
        let ss = u64::from(self.sector_size);
        Some((byte / ss, (byte % ss) as usize))
    }

    /// First sector of a partition in the Superblock Table.
    pub fn partition_start(&self, partition: usize) -> Option<u64> {
        self.parts.get(partition)?.part.map(|p| p.start_lba)
    }

    /// Resolves an absolute path from the directory entries learnt so far (root inode 2).
    pub fn lookup(&self, partition: usize, path: &str) -> Option<u32> {
        let p = self.parts.get(partition)?;
        let mut ino = crate::reader::ROOT_INODE;
        for comp in path.strip_prefix('/')?.split('/').filter(|c| !c.is_empty()) {
            let dir = p.dirs.get(&ino)?;
            ino = dir.values().flatten().find(|e| e.name == comp.as_bytes())?.inode;
        }
        Some(ino)
    }

    /// Feeds one write (whole sectors from `lba`) after the device stored it on `flash`. Returns the files whose
    /// layout changed. Errors only for a malformed call; corrupt metadata goes to `errors`.
    pub fn ingest(&mut self, lba: u64, data: &[u8], flash: &mut dyn BlockSource) -> Result<Vec<Learnt>> {
        let ss = self.sector_size as usize;
        if data.is_empty() || !data.len().is_multiple_of(ss) {
            return Err(invalid(format!("write of {} bytes is not whole {ss}-byte sectors", data.len())));
        }
        let n = (data.len() / ss) as u64;
        if lba.checked_add(n).is_none_or(|e| e > self.sectors) {
            return Err(invalid(format!("write {lba}+{n} beyond {} sectors", self.sectors)));
        }
        let mut src = Overlay { src: flash, lba, data, reads: 0 };
        let mut out = Vec::new();
        // Sector 0 holds the MBR; the GPT header and entries follow it only behind a protective MBR.
        if lba == 0 || (self.gpt && lba < TABLE_SECTORS) {
            self.refresh_table(&mut src, &mut out);
        }
        for pi in 0..self.parts.len() {
            let Some(part) = self.parts[pi].part else { continue };
            let (a, b) = (lba.max(part.start_lba), (lba + n).min(part.start_lba + part.sectors));
            if a >= b {
                continue;
            }
            let bs = self.parts[pi].sb.as_ref().map_or(4096, |s| u64::from(s.block_size));
            let per = (bs / u64::from(self.sector_size)).max(1);
            let (first, last) = ((a - part.start_lba) / per, (b - 1 - part.start_lba) / per);
            for blk in first..=last {
                self.on_block(pi, blk, &mut src, &mut out);
            }
        }
        self.deferred_reads += src.reads;
        Ok(out)
    }

    fn log(&mut self, e: NiceError) {
        if self.errors.len() == MAX_ERRORS {
            self.errors.remove(0);
        }
        self.errors.push(e);
    }

    fn refresh_table(&mut self, src: &mut Overlay, out: &mut Vec<Learnt>) {
        self.gpt = src.read(0).is_some_and(|s0| s0.len() >= 512 && s0[510..512] == [0x55, 0xAA] && (0..4).any(|i| s0[0x1BE + 16 * i + 4] == 0xEE));
        let table = match superblock_table(src, self.sectors) {
            Ok(t) => t,
            Err(e) => {
                self.log(e);
                return;
            }
        };
        if table == self.table {
            return;
        }
        for pi in 0..self.parts.len() {
            self.drop_partition(pi, out);
        }
        self.table = table.clone();
        self.parts = table.into_iter().map(|p| PartState { part: Some(p), ..Default::default() }).collect();
        for pi in 0..self.parts.len() {
            self.learn_superblock(pi, src, out);
        }
    }

    fn drop_partition(&mut self, pi: usize, out: &mut Vec<Learnt>) {
        let inodes: Vec<u32> = self.parts[pi].files.keys().copied().collect();
        for ino in inodes {
            self.remove(pi, ino, out);
        }
        let part = self.parts[pi].part;
        self.parts[pi] = PartState { part, ..Default::default() };
    }

    fn part_byte(&self, pi: usize) -> u64 {
        self.parts[pi].part.map_or(0, |p| p.start_lba) * u64::from(self.sector_size)
    }

    fn on_block(&mut self, pi: usize, blk: u64, src: &mut Overlay, out: &mut Vec<Learnt>) {
        let sb_block = self.parts[pi].sb.as_ref().map_or(SUPERBLOCK_OFFSET / 4096, |s| SUPERBLOCK_OFFSET / u64::from(s.block_size));
        if blk == sb_block || self.parts[pi].sb.is_none() {
            // Before a superblock is known only the superblock's sector matters.
            let sb_sector = (self.part_byte(pi) + SUPERBLOCK_OFFSET) / u64::from(self.sector_size);
            let (lo, hi) = (src.lba, src.lba + (src.data.len() as u64 / u64::from(self.sector_size)));
            if (lo..hi).contains(&sb_sector) {
                self.learn_superblock(pi, src, out);
                return;
            }
        }
        let Some(sb) = self.parts[pi].sb.clone() else { return };
        for role in self.parts[pi].roles.get(&blk).cloned().unwrap_or_default() {
            match role {
                Role::Gdt(i) => self.learn_gdt_block(pi, &sb, i, src, out),
                Role::ExtentNode(ino) => self.relearn_inode(pi, &sb, ino, src, out),
                Role::DirData(ino) => self.learn_dir_block(pi, &sb, ino, blk, src),
            }
        }
        let itb = sb.inode_table_blocks();
        let hit = self.parts[pi].tables.iter().enumerate().find_map(|(g, t)| {
            t.filter(|&t| blk >= t && blk < t + itb).map(|t| (g as u32, blk - t))
        });
        if let Some((g, idx)) = hit {
            self.learn_inode_block(pi, &sb, g, idx, src, out);
        }
    }

    fn block(&self, pi: usize, sb: &Superblock, blk: u64, src: &mut Overlay) -> Option<Vec<u8>> {
        let bs = u64::from(sb.block_size);
        read_bytes(src, self.part_byte(pi) + blk * bs, bs as usize)
    }

    fn learn_superblock(&mut self, pi: usize, src: &mut Overlay, out: &mut Vec<Learnt>) {
        let Some(bytes) = read_bytes(src, self.part_byte(pi) + SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE) else { return };
        let parsed = Superblock::parse(&bytes).and_then(|sb| {
            if sb.block_size % self.sector_size != 0 {
                return Err(NiceError::Unsupported(format!("block size {} below the sector", sb.block_size)));
            }
            let sectors = self.parts[pi].part.map_or(0, |p| p.sectors);
            if sb.blocks_count * u64::from(sb.block_size / self.sector_size) > sectors {
                return Err(crate::error::corrupt("superblock", "file system larger than its partition"));
            }
            Ok(sb)
        });
        match parsed {
            Ok(sb) if self.parts[pi].sb.as_ref() == Some(&sb) => {}
            Ok(sb) => {
                self.drop_partition(pi, out);
                let p = &mut self.parts[pi];
                p.tables = vec![None; sb.group_count() as usize];
                for i in 0..sb.gdt_blocks() {
                    p.roles.entry(sb.gdt_block() + i).or_default().push(Role::Gdt(i));
                }
                p.sb = Some(sb.clone());
                for i in 0..sb.gdt_blocks() {
                    self.learn_gdt_block(pi, &sb, i, src, out);
                }
            }
            Err(e) => {
                self.drop_partition(pi, out);
                self.log(e);
            }
        }
    }

    fn learn_gdt_block(&mut self, pi: usize, sb: &Superblock, i: u64, src: &mut Overlay, out: &mut Vec<Learnt>) {
        let Some(bytes) = self.block(pi, sb, sb.gdt_block() + i, src) else { return };
        let first = (i * u64::from(sb.block_size / u32::from(sb.desc_size))) as u32;
        let groups = match group::parse_gdt_block(sb, &bytes, first) {
            Ok(g) => g,
            Err(e) => return self.log(e),
        };
        for (g, start) in groups {
            if self.parts[pi].tables[g as usize] == Some(start) {
                continue;
            }
            self.parts[pi].tables[g as usize] = Some(start);
            for idx in 0..sb.inode_table_blocks() {
                self.learn_inode_block(pi, sb, g, idx, src, out);
            }
        }
    }

    fn learn_inode_block(&mut self, pi: usize, sb: &Superblock, g: u32, idx: u64, src: &mut Overlay, out: &mut Vec<Learnt>) {
        let Some(table) = self.parts[pi].tables[g as usize] else { return };
        let Some(bytes) = self.block(pi, sb, table + idx, src) else { return };
        let isz = usize::from(sb.inode_size);
        let per = sb.block_size as usize / isz;
        for k in 0..per {
            let index = idx * per as u64 + k as u64;
            if index >= u64::from(sb.inodes_per_group) {
                break;
            }
            let ino = g * sb.inodes_per_group + index as u32 + 1;
            if ino > sb.inodes_count {
                break;
            }
            match Inode::parse(&bytes[k * isz..(k + 1) * isz]) {
                Ok(inode) => self.learn_inode(pi, sb, ino, &inode, src, out),
                Err(e) => {
                    self.log(e);
                    self.remove(pi, ino, out);
                }
            }
        }
    }

    fn relearn_inode(&mut self, pi: usize, sb: &Superblock, ino: u32, src: &mut Overlay, out: &mut Vec<Learnt>) {
        let Ok((g, off)) = sb.inode_location(ino) else { return };
        let bs = u64::from(sb.block_size);
        let Some(Some(table)) = self.parts[pi].tables.get(g as usize).copied() else { return };
        let Some(bytes) = self.block(pi, sb, table + off / bs, src) else { return };
        let at = (off % bs) as usize;
        match Inode::parse(&bytes[at..at + usize::from(sb.inode_size)]) {
            Ok(inode) => self.learn_inode(pi, sb, ino, &inode, src, out),
            Err(e) => self.log(e),
        }
    }

    fn learn_inode(&mut self, pi: usize, sb: &Superblock, ino: u32, inode: &Inode, src: &mut Overlay, out: &mut Vec<Learnt>) {
        let wanted = inode.in_use() && (inode.is_regular() || inode.is_dir()) && ino >= sb.first_ino.min(2);
        let root = if wanted { inode.extent_root(sb.blocks_count) } else { Ok(None) };
        let root = match root {
            Ok(Some(r)) => r,
            Ok(None) => return self.remove(pi, ino, out),
            Err(e) => {
                self.log(e);
                return self.remove(pi, ino, out);
            }
        };
        // Forget roles this inode held; they are re-registered below.
        for roles in self.parts[pi].roles.values_mut() {
            roles.retain(|r| !matches!(r, Role::ExtentNode(i) | Role::DirData(i) if *i == ino));
        }
        let mut nodes = Vec::new();
        let mut missing = false;
        let resolved = {
            let me = &*self;
            resolve_extents(root, sb.blocks_count, MAX_TREE_NODES, &mut |b| {
                nodes.push(b);
                me.block(pi, sb, b, src).ok_or_else(|| {
                    missing = true;
                    NiceError::NotFound(format!("extent block {b}"))
                })
            })
        };
        for b in &nodes {
            self.parts[pi].roles.entry(*b).or_default().push(Role::ExtentNode(ino));
        }
        let extents = match resolved {
            Ok(e) => Some(e),
            Err(_) if missing => None,
            Err(e) => {
                self.log(e);
                return self.remove(pi, ino, out);
            }
        };
        let per = u64::from(sb.block_size / self.sector_size);
        let base = self.parts[pi].part.map_or(0, |p| p.start_lba);
        let mut lbas = Vec::new();
        for e in extents.iter().flatten().filter(|e| !e.unwritten) {
            for b in 0..u64::from(e.len) {
                let first = base + (e.start + b) * per;
                lbas.extend(first..first + per);
            }
        }
        let layout = FileLayout {
            partition: pi,
            inode: ino,
            mode: inode.mode,
            uid: inode.uid,
            size: inode.size,
            is_dir: inode.is_dir(),
            lbas,
            complete: extents.is_some(),
        };
        if inode.is_dir() {
            self.parts[pi].dirs.remove(&ino);
            for e in extents.iter().flatten().filter(|e| !e.unwritten) {
                for b in e.start..e.start + u64::from(e.len) {
                    self.parts[pi].roles.entry(b).or_default().push(Role::DirData(ino));
                    self.learn_dir_block(pi, sb, ino, b, src);
                }
            }
        }
        if self.parts[pi].files.get(&ino) == Some(&layout) {
            return;
        }
        self.unlink_head(pi, ino);
        if layout.complete && !layout.is_dir {
            if let Some(h) = layout.head_lba() {
                self.heads.insert(h, (pi, ino));
            }
        }
        self.parts[pi].files.insert(ino, layout);
        out.push(Learnt::Layout { partition: pi, inode: ino });
    }

    fn learn_dir_block(&mut self, pi: usize, sb: &Superblock, ino: u32, blk: u64, src: &mut Overlay) {
        let Some(bytes) = self.block(pi, sb, blk, src) else { return };
        match parse_dir_block(&bytes, sb.inodes_count) {
            Ok(entries) => {
                self.parts[pi].dirs.entry(ino).or_default().insert(blk, entries);
            }
            Err(e) => self.log(e),
        }
    }

    fn unlink_head(&mut self, pi: usize, ino: u32) {
        if let Some(h) = self.parts[pi].files.get(&ino).and_then(|f| f.head_lba()) {
            if self.heads.get(&h) == Some(&(pi, ino)) {
                self.heads.remove(&h);
            }
        }
    }

    fn remove(&mut self, pi: usize, ino: u32, out: &mut Vec<Learnt>) {
        self.unlink_head(pi, ino);
        self.parts[pi].dirs.remove(&ino);
        if self.parts[pi].files.remove(&ino).is_some() {
            out.push(Learnt::Removed { partition: pi, inode: ino });
        }
    }
}
