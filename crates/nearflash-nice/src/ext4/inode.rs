//! Inode records and extent trees. An inode's `i_block` holds the root of its extent tree (header + 4 entries);
//! deeper trees point at index/leaf blocks elsewhere on disk, which the caller resolves (the learner when those
//! blocks are written or re-read, the reader through its block source).

use super::bytes::{slice, u16_at, u32_at};
use crate::error::{corrupt, Result};

pub const EXTENT_MAGIC: u16 = 0xF30A;
const EXTENTS_FL: u32 = 0x0008_0000;
const INLINE_DATA_FL: u32 = 0x1000_0000;
/// ext4 caps extent trees at depth 5.
pub const MAX_EXTENT_DEPTH: u16 = 5;
/// An initialized extent covers at most 32768 blocks; above that the length encodes an unwritten extent.
const MAX_INIT_LEN: u16 = 32768;

pub const S_IFMT: u16 = 0o170000;
pub const S_IFREG: u16 = 0o100000;
pub const S_IFDIR: u16 = 0o040000;

/// One leaf extent: `len` file blocks from `logical` map to file system blocks from `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub logical: u32,
    pub start: u64,
    pub len: u32,
    /// Unwritten (preallocated) extents read back as zeros.
    pub unwritten: bool,
}

/// A node of an extent tree: leaves give extents, index entries give (first logical block, child block).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExtentNode {
    Leaf(Vec<Extent>),
    Index { depth: u16, children: Vec<(u32, u64)> },
}

/// Parses an extent node (the 60-byte `i_block`, or a whole tree block). `fs_blocks` bounds every block pointer.
pub fn parse_extent_node(b: &[u8], fs_blocks: u64) -> Result<ExtentNode> {
    const W: &str = "extent node";
    let magic = u16_at(b, 0, W)?;
    if magic != EXTENT_MAGIC {
        return Err(corrupt(W, format!("magic {magic:#06x}")));
    }
    let entries = usize::from(u16_at(b, 2, W)?);
    let max = usize::from(u16_at(b, 4, W)?);
    let depth = u16_at(b, 6, W)?;
    if entries > max || 12 + 12 * max > b.len() {
        return Err(corrupt(W, format!("{entries} entries, max {max}, in {} bytes", b.len())));
    }
    if depth > MAX_EXTENT_DEPTH {
        return Err(corrupt(W, format!("depth {depth}")));
    }
    let check = |blk: u64, len: u64| -> Result<()> {
        if blk == 0 || blk.checked_add(len).is_none_or(|end| end > fs_blocks) {
            return Err(corrupt(W, format!("block {blk} (+{len}) outside the file system ({fs_blocks} blocks)")));
        }
        Ok(())
    };
    let mut prev_logical: Option<u64> = None;
    let mut ordered = |logical: u32, len: u64| -> Result<()> {
        if prev_logical.is_some_and(|end| u64::from(logical) < end) {
            return Err(corrupt(W, format!("entries out of order at logical block {logical}")));
        }
        prev_logical = Some(u64::from(logical) + len);
        Ok(())
    };
    if depth == 0 {
        let mut out = Vec::with_capacity(entries);
        for i in 0..entries {
            let e = slice(b, 12 + 12 * i, 12, W)?;
            let logical = u32_at(e, 0, W)?;
            let raw_len = u16_at(e, 4, W)?;
            let start = (u64::from(u16_at(e, 6, W)?) << 32) | u64::from(u32_at(e, 8, W)?);
            let (len, unwritten) = if raw_len > MAX_INIT_LEN { (raw_len - MAX_INIT_LEN, true) } else { (raw_len, false) };
            if len == 0 {
                return Err(corrupt(W, "zero-length extent"));
            }
            check(start, u64::from(len))?;
            ordered(logical, u64::from(len))?;
            out.push(Extent { logical, start, len: u32::from(len), unwritten });
        }
        Ok(ExtentNode::Leaf(out))
    } else {
        let mut children = Vec::with_capacity(entries);
        for i in 0..entries {
            let e = slice(b, 12 + 12 * i, 12, W)?;
            let logical = u32_at(e, 0, W)?;
            let leaf = (u64::from(u16_at(e, 8, W)?) << 32) | u64::from(u32_at(e, 4, W)?);
            check(leaf, 1)?;
            ordered(logical, 1)?;
            children.push((logical, leaf));
        }
        Ok(ExtentNode::Index { depth, children })
    }
}

/// The inode fields NICE uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inode {
    pub mode: u16,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub links: u16,
    pub flags: u32,
    /// `i_generation`: the file version the kernel gives an inode each time it is allocated (NFS's stale-handle
    /// check; 0 from tools that do not set it, such as `mke2fs -d`).
    pub generation: u32,
    /// The raw 60-byte `i_block` (extent root, inline data or a short symlink target).
    pub i_block: [u8; 60],
}

impl Inode {
    pub fn parse(b: &[u8]) -> Result<Self> {
        const W: &str = "inode";
        if b.len() < 128 {
            return Err(corrupt(W, format!("{} bytes, need 128", b.len())));
        }
        let mode = u16_at(b, 0x0, W)?;
        let uid = u32::from(u16_at(b, 0x2, W)?) | (u32::from(u16_at(b, 0x78, W)?) << 16);
        let gid = u32::from(u16_at(b, 0x18, W)?) | (u32::from(u16_at(b, 0x7A, W)?) << 16);
        let size = u64::from(u32_at(b, 0x4, W)?) | (u64::from(u32_at(b, 0x6C, W)?) << 32);
        let links = u16_at(b, 0x1A, W)?;
        let flags = u32_at(b, 0x20, W)?;
        let generation = u32_at(b, 0x64, W)?;
        let mut i_block = [0u8; 60];
        i_block.copy_from_slice(slice(b, 0x28, 60, W)?);
        Ok(Inode { mode, uid, gid, size, links, flags, generation, i_block })
    }

    /// An inode slot in use (a deleted or never used slot has no links and no mode).
    pub fn in_use(&self) -> bool {
        self.links > 0 && self.mode != 0
    }
    pub fn is_dir(&self) -> bool {
        self.mode & S_IFMT == S_IFDIR
    }
    pub fn is_regular(&self) -> bool {
        self.mode & S_IFMT == S_IFREG
    }
    pub fn uses_extents(&self) -> bool {
        self.flags & EXTENTS_FL != 0 && self.flags & INLINE_DATA_FL == 0
    }

    /// The root node of the extent tree, or None for inodes without one (inline data, short symlinks, devices).
    pub fn extent_root(&self, fs_blocks: u64) -> Result<Option<ExtentNode>> {
        if !self.uses_extents() {
            return Ok(None);
        }
        parse_extent_node(&self.i_block, fs_blocks).map(Some)
    }

    /// Whether `uid` may read this file under its mode bits (root may read anything; group membership is not
    /// modelled, so only the owner and "other" classes apply).
    pub fn readable_by(&self, uid: u32) -> bool {
        uid == 0 || (uid == self.uid && self.mode & 0o400 != 0) || self.mode & 0o004 != 0
    }
}

/// Resolves a whole extent tree to its leaf extents, asking `load` for index/leaf blocks; bounded by the depth
/// recorded in each node (which must decrease by one per level) and by `max_blocks` node loads.
pub fn resolve_extents(
    root: ExtentNode,
    fs_blocks: u64,
    max_blocks: usize,
    load: &mut dyn FnMut(u64) -> Result<Vec<u8>>,
) -> Result<Vec<Extent>> {
    let mut out = Vec::new();
    let mut stack = vec![(root, None::<u16>)];
    let mut loads = 0usize;
    while let Some((node, expect)) = stack.pop() {
        match node {
            ExtentNode::Leaf(ext) => {
                if expect.is_some_and(|d| d != 0) {
                    return Err(corrupt("extent node", "leaf where an index level was expected"));
                }
                out.extend(ext)
            }
            ExtentNode::Index { depth, children } => {
                if expect.is_some_and(|d| d != depth) {
                    return Err(corrupt("extent node", format!("depth {depth}, parent expected {expect:?}")));
                }
                for &(_, blk) in children.iter().rev() {
                    loads += 1;
                    if loads > max_blocks {
                        return Err(corrupt("extent tree", format!("more than {max_blocks} nodes")));
                    }
                    let child = parse_extent_node(&load(blk)?, fs_blocks)?;
                    stack.push((child, Some(depth - 1)));
                }
            }
        }
    }
    let mut prev_end = 0u64;
    for (i, e) in out.iter().enumerate() {
        if i > 0 && u64::from(e.logical) < prev_end {
            return Err(corrupt("extent tree", "overlapping extents"));
        }
        prev_end = u64::from(e.logical) + u64::from(e.len);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(entries: &[(u32, u16, u64)]) -> Vec<u8> {
        let mut b = vec![0u8; 60];
        b[0..2].copy_from_slice(&EXTENT_MAGIC.to_le_bytes());
        b[2..4].copy_from_slice(&(entries.len() as u16).to_le_bytes());
        b[4..6].copy_from_slice(&4u16.to_le_bytes());
        for (i, &(l, n, s)) in entries.iter().enumerate() {
            let o = 12 + 12 * i;
            b[o..o + 4].copy_from_slice(&l.to_le_bytes());
            b[o + 4..o + 6].copy_from_slice(&n.to_le_bytes());
            b[o + 6..o + 8].copy_from_slice(&((s >> 32) as u16).to_le_bytes());
            b[o + 8..o + 12].copy_from_slice(&(s as u32).to_le_bytes());
        }
        b
    }

    #[test]
    fn leaf_extents_parse_and_are_checked() {
        let n = parse_extent_node(&leaf(&[(0, 3, 100), (3, 32770, 200)]), 1000).unwrap();
        let ExtentNode::Leaf(e) = n else { panic!() };
        assert_eq!(e[1], Extent { logical: 3, start: 200, len: 2, unwritten: true });
        assert!(parse_extent_node(&leaf(&[(0, 3, 999)]), 1000).is_err(), "runs past the end");
        assert!(parse_extent_node(&leaf(&[(5, 3, 10), (6, 1, 20)]), 1000).is_err(), "overlap");
        assert!(parse_extent_node(&leaf(&[(0, 0, 10)]), 1000).is_err(), "empty");
        let mut b = leaf(&[]);
        b[4] = 5;
        assert!(parse_extent_node(&b, 1000).is_err(), "max beyond i_block");
    }

    #[test]
    fn resolve_rejects_depth_lies_and_loops() {
        // An index node whose child is itself: depth must decrease, so the second visit is refused.
        let mut idx = vec![0u8; 4096];
        idx[0..2].copy_from_slice(&EXTENT_MAGIC.to_le_bytes());
        idx[2..4].copy_from_slice(&1u16.to_le_bytes());
        idx[4..6].copy_from_slice(&340u16.to_le_bytes());
        idx[6..8].copy_from_slice(&1u16.to_le_bytes());
        idx[16..20].copy_from_slice(&7u32.to_le_bytes());
        let root = parse_extent_node(&idx, 100).unwrap();
        let r = resolve_extents(root, 100, 10, &mut |_| Ok(idx.clone()));
        assert!(r.is_err());
    }
}
