//! NICE's parsers of untrusted bytes: ext4 structures, OOB records, the partition table, and the learner and
//! reader over a small disk made of the input. None may panic or loop.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nearflash_nice::ext4::{parse_dir_block, parse_extent_node, Inode, Superblock};
use nearflash_nice::learner::Learner;
use nearflash_nice::oob::OobRecord;
use nearflash_nice::reader::Ext4Reader;
use nearflash_nice::source::MemDisk;

const SS: u32 = 4096;

fuzz_target!(|data: &[u8]| {
    let _ = Superblock::parse(data);
    let _ = parse_extent_node(data, 1 << 20);
    let _ = parse_dir_block(data, 1 << 16);
    let _ = Inode::parse(data);
    let _ = OobRecord::decode(data);
    // A disk of at most 64 sectors holding the input (sectors stretched from a short input so that the
    // superblock, descriptors and inode tables land where the parsers look).
    if data.is_empty() || data.len() > 64 * SS as usize {
        return;
    }
    let sectors = (data.len() as u64).div_ceil(u64::from(SS)).max(8);
    let mut image = data.to_vec();
    image.resize((sectors * u64::from(SS)) as usize, 0);
    let mut disk = MemDisk::new(SS, sectors);
    let Ok(mut learner) = Learner::new(sectors, SS) else { return };
    // Written back to front: metadata after data, the learner's deferred path.
    for lba in (0..sectors).rev() {
        let s = &image[(lba * u64::from(SS)) as usize..((lba + 1) * u64::from(SS)) as usize];
        disk.write(lba, s);
        let _ = learner.ingest(lba, s, &mut disk);
    }
    let _ = learner.files().count();
    for ino in 0..64 {
        let _ = learner.inode_sector(0, ino);
    }
    if let Ok(mut r) = Ext4Reader::open(&mut disk, 0) {
        if let Ok((ino, _)) = r.lookup("/a/b") {
            if let Ok(inode) = r.inode(ino) {
                let _ = r.read_file(&inode);
            }
        }
    }
});
