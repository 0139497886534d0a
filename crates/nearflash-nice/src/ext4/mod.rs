//! ext4 as the firmware needs it, parsed from raw blocks only: superblock, group descriptors, inode records and
//! extent trees, directory blocks. Each parser takes untrusted bytes, checks every field it uses and returns
//! `NiceError::Corrupt` on damage.

pub(crate) mod bytes;
pub mod dir;
pub mod group;
pub mod inode;
pub mod superblock;

pub use dir::{parse_dir_block, DirEntry};
pub use inode::{parse_extent_node, resolve_extents, Extent, ExtentNode, Inode};
pub use superblock::{Superblock, SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE};
