//! The firmware's side of the file-aware page layout (paper Sec. IV-B) on the device: writing each file's OOB
//! doubly linked list into the spare bytes of its pages, locating a file from its first page in at most two flash
//! reads, and streaming it by the links with GC repair.
//!
//! * **Linking.** ext4 writes data before the inode that describes it, so a page's OOB cannot carry its links when
//!   the page is programmed. When the learner reports a file's layout, the firmware writes the records into the
//!   spare bytes of the pages already stored (`ExecCtx::annotate_spare`, charged as a page program per programmed
//!   page, a DRAM write for a page still in the write buffer). A host overwrite of a linked page leaves the new copy
//!   without a record: the firmware sees the write and relinks the file before its next invocation.
//! * **Locating** (`locate`): the head page (FTL-cache hit: no flash read) gives the inode number from its OOB; the
//!   inode's sector (Superblock Table + group descriptors learnt in DRAM) gives size and extents: two flash reads.
//!   A file whose extents spill out of the inode into extent-tree blocks costs one more read per tree block
//!   (counted; `mke2fs` and contiguous writers keep up to four extents in the inode).
//! * **Streaming**: [`FileChain::walk`] follows the successor PPNs and checks every page's record; a link GC broke
//!   (the page there is erased, another LPN's, or carries no record) is re-read through the newest mapping and
//!   marked vulnerable; when all of a file's links are vulnerable the list is rebuilt. Timing: the page reads are
//!   issued together, as in the paper's read path, where the inode gives all data LPAs and the DMA streams them
//!   (Sec. IV-D); the links checked are the same PPNs (a firmware following them only from flash, one page after
//!   another, would serialise one tR per page: not modelled). The repeated read after a mismatch is issued with
//!   them (its flash time is charged, not its dependency).

use crate::chain::{FileChain, Mapping, PageReader};
use crate::ext4::{resolve_extents, Inode};
use crate::learner::{FileLayout, Learner};
use crate::oob::{chain_records, OobRecord, OOB_RECORD_BYTES};
use crate::sched::Fetcher;
use nearflash_core::ext::Time;
use nearflash_core::ext::{ExecCtx, ReadTo, Status};
use nearflash_core::ext::SPARE_BYTES;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// Extent-tree blocks loaded per file at most while locating (bounds the reads a damaged inode can cause).
const MAX_TREE_BLOCKS: usize = 4096;
/// Firmware instructions to parse an inode record and its extents (the paper's "inode interpreter"), assumed.
pub const INODE_PARSE_INSTR: f64 = 1_500.0;
/// Firmware instructions to decode and check one OOB record, assumed: a CRC-32 over 28 bytes and compares.
const OOB_CHECK_INSTR: f64 = 120.0;

/// Data pages of file metadata the firmware keeps in controller DRAM (the paper's "FTL cache"): head pages,
/// inode sectors, directory blocks. FIFO eviction; a host write to a cached LBA drops it.
#[derive(Debug, Clone, Default)]
pub struct PageCache {
    capacity: usize,
    pages: HashMap<u64, Vec<u8>>,
    order: VecDeque<u64>,
    pub hits: u64,
    pub misses: u64,
}

impl PageCache {
    pub fn new(capacity: usize) -> Self {
        PageCache { capacity, ..Default::default() }
    }

    /// Reads sector `lba` through the cache: from DRAM on a hit, else from flash (a counted flash read).
    pub fn read(&mut self, ctx: &mut ExecCtx<'_>, lba: u64, t: Time, flash_reads: &mut u32) -> Result<(Vec<u8>, Time), Status> {
        if let Some(p) = self.pages.get(&lba) {
            self.hits += 1;
            let p = p.clone();
            return Ok((p, ctx.dram(t, ctx.lba_bytes())));
        }
        self.misses += 1;
        let mut buf = vec![0u8; ctx.lba_bytes() as usize];
        let r = ctx.flash_read(t, lba, 1, ReadTo::Dram, &mut buf)?;
        *flash_reads += 1;
        if self.capacity > 0 {
            if self.pages.len() >= self.capacity {
                if let Some(old) = self.order.pop_front() {
                    self.pages.remove(&old);
                }
            }
            self.order.push_back(lba);
            self.pages.insert(lba, buf.clone());
        }
        Ok((buf, r.done))
    }

    /// Drops cached copies of [a, b) (the host wrote them).
    pub fn invalidate(&mut self, a: u64, b: u64) {
        if self.pages.is_empty() {
            return;
        }
        if b - a > self.pages.len() as u64 {
            self.pages.retain(|&l, _| l < a || l >= b);
        } else {
            for l in a..b {
                self.pages.remove(&l);
            }
        }
        let pages = &self.pages;
        self.order.retain(|l| pages.contains_key(l));
    }

    pub fn clear(&mut self) {
        self.pages.clear();
        self.order.clear();
    }
}

/// A file located from its head: what the inode says now, and the flash reads spent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub inode: u32,
    /// The inode's `i_generation` (which allocation of the inode number this file is).
    pub generation: u32,
    pub size: u64,
    pub lbas: Vec<u64>,
    /// Byte offset in the file of each of `lbas` (holes between extents read as zeros).
    pub offsets: Vec<u64>,
    pub flash_reads: u32,
}

impl Located {
    /// The file's bytes from its data sectors in `lbas` order (whole sectors each): holes are zeros, the tail past
    /// the size is cut.
    pub fn assemble(&self, sectors: &[u8], sector: usize) -> Vec<u8> {
        let size = usize::try_from(self.size).unwrap_or(usize::MAX);
        let mut out = vec![0u8; size.min(self.offsets.last().map_or(0, |&o| o as usize + sector))];
        for (i, &off) in self.offsets.iter().enumerate() {
            let off = off as usize;
            if off >= out.len() {
                break;
            }
            let n = sector.min(out.len() - off);
            out[off..off + n].copy_from_slice(&sectors[i * sector..i * sector + n]);
        }
        out.resize(size, 0);
        out
    }
}

/// Locates the file whose first data sector is `head`: the head page's OOB names the inode; the inode's sector gives
/// its extents. `Err(INVALID_FIELD)` when the head carries no first-page record or the inode no longer starts
/// there (changed since it was linked) and when the inode is damaged; a read failure passes its status on. Nothing is
/// processed in either case.
pub fn locate(ctx: &mut ExecCtx<'_>, learner: &Learner, cache: &mut PageCache, head: u64, t: Time) -> Result<(Located, Time), Status> {
    let mut reads = 0u32;
    let (_, t) = cache.read(ctx, head, t, &mut reads)?;
    let rec = OobRecord::decode(&ctx.spare(head)?).map_err(|_| Status::INVALID_FIELD)?;
    let t = ctx.firmware(t, OOB_CHECK_INSTR);
    if !rec.first || u64::from(rec.lpn) != head {
        return Err(Status::INVALID_FIELD);
    }
    let part = usize::from(rec.partition);
    let (lba, off) = learner.inode_sector(part, rec.inode).ok_or(Status::INVALID_FIELD)?;
    let (sector, mut t) = cache.read(ctx, lba, t, &mut reads)?;
    let sb = learner.superblock(part).ok_or(Status::INVALID_FIELD)?;
    let rec_bytes = sector.get(off..off + usize::from(sb.inode_size)).ok_or(Status::INVALID_FIELD)?;
    let inode = Inode::parse(rec_bytes).map_err(|_| Status::INVALID_FIELD)?;
    if !inode.in_use() || !inode.is_regular() {
        return Err(Status::INVALID_FIELD);
    }
    let root = inode.extent_root(sb.blocks_count).map_err(|_| Status::INVALID_FIELD)?.ok_or(Status::INVALID_FIELD)?;
    let (bs, ss) = (u64::from(sb.block_size), ctx.lba_bytes());
    let base = learner.partition_start(part).ok_or(Status::INVALID_FIELD)?;
    let mut failed = None;
    let extents = resolve_extents(root, sb.blocks_count, MAX_TREE_BLOCKS, &mut |b| {
        // An extent-tree block outside the inode: one more read per block (sector by sector).
        let mut out = Vec::with_capacity(bs as usize);
        for s in 0..bs / ss {
            match cache.read(ctx, base + (b * bs) / ss + s, t, &mut reads) {
                Ok((p, done)) => {
                    t = done;
                    out.extend_from_slice(&p);
                }
                Err(e) => {
                    failed = Some(e);
                    return Err(crate::error::corrupt("extent block", "unreadable"));
                }
            }
        }
        Ok(out)
    });
    if let Some(e) = failed {
        return Err(e);
    }
    let extents = extents.map_err(|_| Status::INVALID_FIELD)?;
    let per = bs / ss;
    let (mut lbas, mut offsets) = (Vec::new(), Vec::new());
    for e in extents.iter().filter(|e| !e.unwritten) {
        for b in 0..u64::from(e.len) {
            let first = base + (e.start + b) * per;
            lbas.extend(first..first + per);
            offsets.extend((0..per).map(|s| (u64::from(e.logical) + b) * bs + s * ss));
        }
    }
    if lbas.first() != Some(&head) {
        return Err(Status::INVALID_FIELD);
    }
    let t = ctx.firmware(t, INODE_PARSE_INSTR);
    Ok((Located { inode: rec.inode, generation: inode.generation, size: inode.size, lbas, offsets, flash_reads: reads }, t))
}

/// The OOB records of a file at its pages' current physical sectors, written in place. Returns the chain.
pub fn link(ctx: &mut ExecCtx<'_>, file: &FileLayout, t: Time) -> Result<(FileChain, Time), Status> {
    let mut psas = Vec::with_capacity(file.lbas.len());
    for &l in &file.lbas {
        psas.push(ctx.sector_address(l)?.ok_or(Status::INVALID_FIELD)?);
    }
    let part = u8::try_from(file.partition).map_err(|_| Status::INVALID_FIELD)?;
    let recs = chain_records(file.inode, part, 0, &file.lbas, &psas).map_err(|_| Status::INVALID_FIELD)?;
    let done = write_records(ctx, &file.lbas, &recs, t)?;
    let chain = FileChain { inode: file.inode, lpns: file.lbas.clone(), vulnerable: vec![false; file.lbas.len()] };
    Ok((chain, done))
}

fn write_records(ctx: &mut ExecCtx<'_>, lbas: &[u64], recs: &[OobRecord], t: Time) -> Result<Time, Status> {
    let mut done = t;
    for (&l, r) in lbas.iter().zip(recs) {
        let mut spare = [0u8; SPARE_BYTES];
        spare[..OOB_RECORD_BYTES].copy_from_slice(&r.encode());
        done = done.max(ctx.annotate_spare(t, l, &spare)?.1);
    }
    Ok(done)
}

/// The device's mapping and flash as the chain sees them; reads are timed from `t` and their data kept.
struct DeviceView<'a, 'b, 'f, 's> {
    ctx: &'a mut ExecCtx<'b>,
    fetch: &'f mut Fetcher<'s>,
    t: Time,
    done: Time,
    /// Physical sector -> LBA of pages read through the mapping (the walk asks for them by PSA).
    data: BTreeMap<u64, Vec<u8>>,
    /// PSA -> LBA of the file's current copies (from the mapping): a PSA the mapping names is read by LBA, which
    /// also covers copies still in the write buffer.
    current: HashMap<u64, u64>,
    error: Option<Status>,
    reads: u64,
}

/// The newest mapping of a file's pages, taken before the walk (nothing is written during it).
struct Snapshot(HashMap<u64, u64>);

impl Mapping for Snapshot {
    fn ppn(&self, lpn: u64) -> Option<u64> {
        self.0.get(&lpn).copied()
    }
}

impl PageReader for DeviceView<'_, '_, '_, '_> {
    fn read_oob(&mut self, psa: u64) -> Option<OobRecord> {
        let ss = self.ctx.lba_bytes() as usize;
        let spp = u64::from(self.ctx.geometry().sectors_per_page);
        self.reads += 1;
        if let Some(&lba) = self.current.get(&psa) {
            let mut buf = vec![0u8; ss];
            match self.fetch.read(self.ctx, lba, self.t, &mut buf) {
                Ok(done) => self.done = self.done.max(done),
                Err(e) => {
                    self.error = Some(e);
                    return None;
                }
            }
            self.data.insert(psa, buf);
            return OobRecord::decode(&self.ctx.spare(lba).ok()?).ok();
        }
        // A stale link: the page there is read physically (erased, moved or reused since).
        let mut page = vec![0u8; self.ctx.geometry().page_size as usize];
        match self.ctx.read_page(self.t, psa / spp, ReadTo::Dram, &mut page) {
            Ok(r) => self.done = self.done.max(r.done),
            Err(_) => return None,
        }
        let slot = (psa % spp) as usize;
        let spare = self.ctx.page_spare(psa / spp).ok()?.get(slot * SPARE_BYTES..(slot + 1) * SPARE_BYTES)?.to_vec();
        let rec = OobRecord::decode(&spare).ok()?;
        self.data.insert(psa, page[slot * ss..(slot + 1) * ss].to_vec());
        Some(rec)
    }
}

/// What streaming a file cost and found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamStats {
    pub page_reads: u64,
    pub mismatches: u64,
    pub rebuilt: bool,
}

/// Streams the file of `chain` (in partition `partition`) by its OOB links: its bytes (whole sectors), when done,
/// and what it cost. A file whose every link turned out stale gets its list rebuilt in the spare bytes. The pages
/// are read through `fetch` (who issues them, in what windows, shared with other requests: `sched.rs`).
pub fn stream(ctx: &mut ExecCtx<'_>, chain: &mut FileChain, partition: u8, t: Time, fetch: &mut Fetcher<'_>) -> Result<(Vec<u8>, Time, StreamStats), Status> {
    let mut map = HashMap::new();
    let mut current = HashMap::new();
    for &l in &chain.lpns {
        let psa = ctx.sector_address(l)?.ok_or(Status::INVALID_FIELD)?;
        map.insert(l, psa);
        current.insert(psa, l);
    }
    let map = Snapshot(map);
    let ss = ctx.lba_bytes() as usize;
    let mut view = DeviceView { ctx, fetch, t, done: t, data: BTreeMap::new(), current, error: None, reads: 0 };
    let walk = chain.walk(&map, &mut view);
    let (data, read_done, error) = (std::mem::take(&mut view.data), view.done, view.error);
    if let Some(e) = error {
        return Err(e);
    }
    let walk = walk.map_err(|_| Status::INTERNAL_ERROR)?;
    let mut bytes = Vec::with_capacity(walk.ppns.len() * ss);
    for p in &walk.ppns {
        bytes.extend_from_slice(data.get(p).ok_or(Status::INTERNAL_ERROR)?);
    }
    let done = ctx.firmware(read_done, OOB_CHECK_INSTR * walk.page_reads as f64);
    let mut stats = StreamStats { page_reads: walk.page_reads, mismatches: walk.mismatches, rebuilt: false };
    if chain.needs_rebuild() {
        let recs = chain.rebuild(&map, partition, 0).map_err(|_| Status::INTERNAL_ERROR)?;
        let lpns = chain.lpns.clone();
        write_records(ctx, &lpns, &recs, done)?;
        stats.rebuilt = true;
    }
    Ok((bytes, done, stats))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assembly_puts_sectors_at_their_offsets_with_zero_holes_and_cuts_the_tail() {
        let loc = Located { inode: 12, generation: 0, size: 10, lbas: vec![7, 9], offsets: vec![0, 6], flash_reads: 2 };
        let sectors = [1u8, 1, 1, 1, 2, 2, 2, 2];
        assert_eq!(loc.assemble(&sectors, 4), vec![1, 1, 1, 1, 0, 0, 2, 2, 2, 2]);
        // A size beyond the last data sector: a trailing hole.
        let loc = Located { size: 14, ..loc };
        assert_eq!(loc.assemble(&sectors, 4), vec![1, 1, 1, 1, 0, 0, 2, 2, 2, 2, 0, 0, 0, 0]);
        // A size inside the first sector: the rest is cut.
        let loc = Located { size: 3, ..loc };
        assert_eq!(loc.assemble(&sectors, 4), vec![1, 1, 1]);
        let empty = Located { size: 0, lbas: vec![], offsets: vec![], ..loc };
        assert!(empty.assemble(&[], 4).is_empty());
    }

    #[test]
    fn the_metadata_cache_drops_what_the_host_overwrites() {
        let mut c = PageCache::new(2);
        for l in [1u64, 2, 3] {
            c.order.push_back(l);
            c.pages.insert(l, vec![l as u8]);
        }
        c.invalidate(2, 3);
        assert_eq!((c.pages.len(), c.order.iter().copied().collect::<Vec<_>>()), (2, vec![1, 3]));
        c.invalidate(0, 100);
        assert!(c.pages.is_empty() && c.order.is_empty());
    }
}
