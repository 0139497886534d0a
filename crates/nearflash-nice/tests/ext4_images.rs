//! The reader and the learner against real e2fsprogs images, cross-checked with `debugfs`.

use crate::common;

use nearflash_nice::learner::{Learner, Learnt};
use nearflash_nice::reader::Ext4Reader;
use nearflash_nice::source::MemDisk;
use nearflash_nice::NiceError;

const SS: u32 = 4096;

#[test]
fn reader_matches_debugfs_and_file_contents() {
    for features in ["", "^64bit", "^metadata_csum,^64bit,^flex_bg"] {
        let im = common::make_image(features);
        let mut disk = MemDisk::from_image(SS, &im.bytes);
        let mut r = Ext4Reader::open(&mut disk, 0).unwrap();
        assert_eq!(r.sb.desc_size, if features.is_empty() { 64 } else { 32 }, "{features}");
        for (path, content) in &im.files {
            let (ino, levels) = r.lookup(path).unwrap();
            assert_eq!(levels, path.matches('/').count());
            assert_eq!(ino, common::debugfs_inode(&im.img, path), "{path}");
            let inode = r.inode(ino).unwrap();
            assert!(inode.is_regular());
            assert_eq!(inode.size, content.len() as u64);
            assert_eq!(&r.read_file(&inode).unwrap(), content, "{path}");
            assert_eq!(r.file_lbas(&inode).unwrap(), common::debugfs_data_blocks(&im.img, path), "{path}");
            if path != "/sparse.bin" {
                assert_eq!(r.file_lbas(&inode).unwrap(), common::debugfs_blocks(&im.img, path), "{path}");
            }
        }
        assert!(matches!(r.lookup("/no/such"), Err(NiceError::NotFound(_))));
        assert!(matches!(r.lookup("/hello.txt/x"), Err(NiceError::NotFound(_))));
        assert!(matches!(r.lookup("relative"), Err(NiceError::InvalidArgument(_))));
    }
}

fn learn_in_order(bytes: &[u8], order: &[u64], learner: &mut Learner, disk: &mut MemDisk) -> Vec<Learnt> {
    let mut events = Vec::new();
    for &lba in order {
        let s = &bytes[(lba * SS as u64) as usize..((lba + 1) * SS as u64) as usize];
        disk.write(lba, s);
        events.extend(learner.ingest(lba, s, disk).unwrap());
    }
    events
}

fn shuffled(n: u64, seed: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n).collect();
    let mut x = seed | 1;
    for i in (1..v.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
    v
}

/// Whatever order the blocks arrive in, the learner ends knowing every file's inode and LBA list.
#[test]
fn learner_learns_every_file_in_any_write_order() {
    let im = common::make_image("");
    let n = im.bytes.len() as u64 / SS as u64;
    let mut truth = MemDisk::from_image(SS, &im.bytes);
    let mut r = Ext4Reader::open(&mut truth, 0).unwrap();
    let expected: Vec<(String, u32, Vec<u64>)> = im
        .files
        .iter()
        .map(|(p, _)| {
            let ino = r.lookup(p).unwrap().0;
            let inode = r.inode(ino).unwrap();
            (p.clone(), ino, r.file_lbas(&inode).unwrap())
        })
        .collect();
    let orders = [("forward", (0..n).collect::<Vec<_>>()), ("backward", (0..n).rev().collect()), ("shuffled", shuffled(n, 7))];
    for (name, order) in orders {
        let mut disk = MemDisk::new(SS, n);
        let mut l = Learner::new(n, SS).unwrap();
        learn_in_order(&im.bytes, &order, &mut l, &mut disk);
        assert!(l.errors.is_empty(), "{name}: {:?}", l.errors);
        for (path, ino, lbas) in &expected {
            assert_eq!(l.lookup(0, path), Some(*ino), "{name} {path}");
            let f = l.file(0, *ino).unwrap_or_else(|| panic!("{name}: {path} not learnt"));
            assert!(f.complete, "{name} {path}");
            assert_eq!(&f.lbas, lbas, "{name} {path}");
            if let Some(&h) = lbas.first() {
                assert_eq!(l.file_at_head(h).map(|f| f.inode), Some(*ino));
                if lbas.len() > 1 {
                    assert!(l.file_at_head(lbas[1]).is_none(), "only a first page names a file");
                }
            }
        }
        // Metadata written first needs no re-read; written last, the learner re-reads what it skipped.
        if name == "forward" {
            assert!(l.deferred_reads < 16, "forward re-reads {}", l.deferred_reads);
        }
        if name == "backward" {
            assert!(l.deferred_reads > 0);
        }
    }
}

#[test]
fn learner_finds_a_partition_behind_an_mbr() {
    let im = common::make_image("");
    let start = 8u64;
    let fs_sectors = im.bytes.len() as u64 / SS as u64;
    let n = start + fs_sectors;
    let mut bytes = vec![0u8; (n * SS as u64) as usize];
    bytes[(start * SS as u64) as usize..].copy_from_slice(&im.bytes);
    bytes[510] = 0x55;
    bytes[511] = 0xAA;
    bytes[0x1BE + 4] = 0x83;
    bytes[0x1BE + 8..0x1BE + 12].copy_from_slice(&(start as u32).to_le_bytes());
    bytes[0x1BE + 12..0x1BE + 16].copy_from_slice(&(fs_sectors as u32).to_le_bytes());
    // The file system first, the partition table last: everything is relearnt at the new offset.
    let order: Vec<u64> = (1..n).chain([0]).collect();
    let mut disk = MemDisk::new(SS, n);
    let mut l = Learner::new(n, SS).unwrap();
    learn_in_order(&bytes, &order, &mut l, &mut disk);
    assert_eq!(l.superblock_table()[0].start_lba, start);
    let ino = l.lookup(0, "/emb/vectors.bin").unwrap();
    let mut r = Ext4Reader::open(&mut disk, start).unwrap();
    let inode = r.inode(ino).unwrap();
    let lbas = r.file_lbas(&inode).unwrap();
    assert_eq!(l.file(0, ino).unwrap().lbas, lbas);
    assert_eq!(lbas[0], start + common::debugfs_blocks(&im.img, "/emb/vectors.bin")[0]);
}

#[test]
fn corrupt_metadata_is_logged_and_ignored() {
    let im = common::make_image("^metadata_csum");
    let n = im.bytes.len() as u64 / SS as u64;
    // A damaged superblock: nothing is learnt, the error is kept.
    let mut bad = im.bytes.clone();
    bad[1024 + 0x38] = 0;
    let mut disk = MemDisk::new(SS, n);
    let mut l = Learner::new(n, SS).unwrap();
    learn_in_order(&bad, &(0..n).collect::<Vec<_>>(), &mut l, &mut disk);
    assert_eq!(l.files().count(), 0);
    assert!(matches!(l.errors.first(), Some(NiceError::Corrupt { what: "superblock", .. })));
    // A damaged extent header of one inode: that file is dropped, the others are learnt.
    let mut truth = MemDisk::from_image(SS, &im.bytes);
    let mut r = Ext4Reader::open(&mut truth, 0).unwrap();
    let victim = r.lookup("/hello.txt").unwrap().0;
    let other = r.lookup("/emb/vectors.bin").unwrap().0;
    let (g, off) = r.sb.inode_location(victim).unwrap();
    let table = {
        let blk = r.block(r.sb.gdt_block()).unwrap();
        u32::from_le_bytes(blk[g as usize * 32 + 8..g as usize * 32 + 12].try_into().unwrap()) as u64
    };
    let mut bad = im.bytes.clone();
    bad[(table * 4096 + off + 0x28) as usize] ^= 0xFF;
    let mut disk = MemDisk::new(SS, n);
    let mut l = Learner::new(n, SS).unwrap();
    learn_in_order(&bad, &(0..n).collect::<Vec<_>>(), &mut l, &mut disk);
    assert!(l.file(0, victim).is_none());
    assert!(l.file(0, other).unwrap().complete);
    assert!(l.errors.iter().any(|e| matches!(e, NiceError::Corrupt { what: "extent node", .. })));
    // Malformed calls are refused.
    assert!(l.ingest(0, &[0u8; 100], &mut disk).is_err());
    assert!(l.ingest(n, &[0u8; 4096], &mut disk).is_err());
    assert!(Learner::new(0, 4096).is_err() && Learner::new(8, 1000).is_err());
}

#[test]
fn host_open_checks_permissions_and_gives_hyper_addresses() {
    use nearflash_nice::host::{split_hyper, HeadTable, OpenFlag};
    let im = common::make_image("");
    // Make one file private to uid 1000 and one world readable, as debugfs can on the image itself.
    for cmd in ["sif /hello.txt mode 0100600", "sif /hello.txt uid 1000", "sif /emb/vectors.bin mode 0100644"] {
        let out = std::process::Command::new("debugfs").args(["-w", "-R", cmd]).arg(&im.img).output().unwrap();
        assert!(out.status.success());
    }
    let bytes = std::fs::read(&im.img).unwrap();
    let cap = bytes.len() as u64 / SS as u64;
    let mut disk = MemDisk::from_image(SS, &bytes);
    let mut fs = Ext4Reader::open(&mut disk, 0).unwrap();
    let mut other = HeadTable::new(cap, 2000).unwrap();
    assert!(matches!(other.open(&mut fs, "/hello.txt", OpenFlag::ReadOnly), Err(NiceError::PermissionDenied(_))));
    assert!(other.is_empty(), "a refused open inserts nothing");
    let f = other.open(&mut fs, "/emb/vectors.bin", OpenFlag::ReadOnly).unwrap();
    assert_eq!(f.head_lba, common::debugfs_blocks(&im.img, "/emb/vectors.bin")[0]);
    assert_eq!(other.hyper_address("/emb/vectors.bin").unwrap(), f.head_lba + cap);
    assert_eq!(split_hyper(f.head_lba + cap, cap), Some((f.head_lba, true)));
    assert_eq!(split_hyper(5, cap), Some((5, false)));
    assert_eq!(split_hyper(2 * cap, cap), None);
    let mut owner = HeadTable::new(cap, 1000).unwrap();
    assert!(owner.open(&mut fs, "/hello.txt", OpenFlag::ReadOnly).is_ok());
    assert!(owner.open(&mut fs, "/emb", OpenFlag::ReadOnly).is_err(), "directory");
    assert!(owner.open(&mut fs, "/empty", OpenFlag::ReadOnly).is_err(), "no data");
    assert!(owner.hyper_address("/never/opened").is_err());
    assert!(OpenFlag::from_posix(2).is_err() && HeadTable::new(0, 0).is_err());
}

/// Fig. 12's read counts: a path walk from the root (FSR-ISC) reads blocks for every directory level, NICE's
/// locate reads two pages whatever the depth.
#[test]
fn path_walk_reads_grow_with_depth_nice_locate_reads_two() {
    use nearflash_nice::chain::{locate, Mapping, PageReader};
    use nearflash_nice::oob::{chain_records, OobRecord};
    use std::collections::HashMap;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let mut p = root.clone();
    let mut paths = Vec::new();
    for depth in 1..=20 {
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("f.bin"), vec![depth as u8; 5000]).unwrap();
        paths.push((depth, format!("/{}f.bin", "d/".repeat(depth - 1))));
        p = p.join("d");
    }
    let img = dir.path().join("fs.img");
    let out = std::process::Command::new("mke2fs")
        .args(["-q", "-F", "-t", "ext4", "-b", "4096", "-d"])
        .arg(&root)
        .arg(&img)
        .arg("4M")
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut disk = MemDisk::from_image(SS, &std::fs::read(&img).unwrap());
    let mut r = Ext4Reader::open(&mut disk, 0).unwrap();
    struct Flash(HashMap<u64, OobRecord>);
    impl PageReader for Flash {
        fn read_oob(&mut self, ppn: u64) -> Option<OobRecord> {
            self.0.get(&ppn).copied()
        }
    }
    struct Identity;
    impl Mapping for Identity {
        fn ppn(&self, lpn: u64) -> Option<u64> {
            Some(lpn)
        }
    }
    for (depth, path) in paths {
        r.block_reads = 0;
        let (ino, levels) = r.lookup(&path).unwrap();
        let walk_reads = r.block_reads;
        assert_eq!(levels, depth);
        // Per level: the directory's inode-table block and its one data block (FSR-ISC counts one flash read per
        // level, keeping the inode table cached).
        assert_eq!(walk_reads, 2 * depth as u64, "{path}");
        let inode = r.inode(ino).unwrap();
        let lbas = r.file_lbas(&inode).unwrap();
        let recs = chain_records(ino, 0, 0, &lbas, &lbas).unwrap();
        let mut flash = Flash(lbas.iter().copied().zip(recs).collect());
        let (located, chain) = locate(lbas[0], &Identity, &mut flash, &mut |i| (i == ino).then(|| lbas.clone())).unwrap();
        assert_eq!((located.flash_reads, located.inode), (2, ino));
        assert_eq!(chain.lpns, lbas);
    }
}
