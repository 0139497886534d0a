//! The OOB doubly linked list on the device: written by the firmware into the pages' spare bytes once it learns a
//! file, used to locate a file from its first page in at most two flash reads, and repaired after GC moves pages.

use crate::common;

use crate::common::fw::{head_lba, invoke, io, Setup};
use nearflash_core::ext::{DataBuf, Status};
use nearflash_core::nvme::opcode;
use nearflash_core::Device;
use nearflash_nice::firmware::{NiceFirmware, OP_CRC32, OP_FSR, OP_LOCATE};

fn device(cache_pages: usize) -> Device {
    common::fw::device(NiceFirmware::with_cache(cache_pages))
}

fn filled(cache_pages: usize, junk: bool) -> Setup {
    common::fw::filled(NiceFirmware::with_cache(cache_pages), junk)
}

fn stat(dev: &Device, key: &str) -> u64 {
    let rep = serde_json::to_value(dev.report()).unwrap();
    let ext = &rep["extensions"]["nice"];
    ext[key].as_u64().unwrap_or_else(|| panic!("{key} in {ext}"))
}

fn regular_files(s: &Setup) -> Vec<(String, Vec<u8>)> {
    s.img.files.iter().filter(|(p, d)| !d.is_empty() && p != "/sparse.bin").cloned().collect()
}

#[test]
fn every_file_is_located_in_at_most_two_flash_reads_from_its_first_pages_oob() {
    let mut s = filled(0, false);
    let files = regular_files(&s);
    for (path, content) in &files {
        let head = head_lba(&s, path);
        let (op, size, ino, reads, _) = invoke(&mut s, head, &[OP_LOCATE as u8]).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!((op, size), (OP_LOCATE, content.len() as u64), "{path}");
        assert_eq!(ino, common::debugfs_inode(&s.img.img, path), "{path}: the inode number came from the head page's OOB");
        assert_eq!(reads, 2, "{path}: head page + inode sector, no cache");
    }
    // Every page of every regular file got its record; the list was written once per file.
    let pages: u64 = files.iter().map(|(_, d)| (d.len() as u64).div_ceil(s.ss as u64)).sum();
    assert!(stat(&s.dev, "oob_records_written") >= pages, "records for all {pages} file pages");
    assert_eq!(stat(&s.dev, "locate_flash_reads_max"), 2);
    // The sparse file's 12 extents live in an extent-tree block: one more read, counted; its holes read as zeros.
    let head = head_lba(&s, "/sparse.bin");
    assert_eq!(invoke(&mut s, head, &[OP_LOCATE as u8]).unwrap().3, 3);
    let sparse = s.img.files.iter().find(|(p, _)| p == "/sparse.bin").unwrap().1.clone();
    let (_, size, _, crc, _) = invoke(&mut s, head, &[OP_CRC32 as u8]).unwrap();
    assert_eq!((size, crc), (sparse.len() as u64, u64::from(crc32fast::hash(&sparse))), "holes are zeros");
    // With the metadata cache (the paper's FTL cache), a second locate reads no flash.
    let mut s = filled(1024, false);
    let head = head_lba(&s, "/a/b/c/d/e/f/deep.bin");
    let (_, _, _, miss, t_miss) = invoke(&mut s, head, &[OP_LOCATE as u8]).unwrap();
    let (_, _, _, hit, t_hit) = invoke(&mut s, head, &[OP_LOCATE as u8]).unwrap();
    assert_eq!((miss, hit), (2, 0));
    assert!(t_hit < t_miss, "hit {t_hit} ns < miss {t_miss} ns");
}

#[test]
fn fsr_isc_walks_the_path_one_level_at_a_time() {
    let mut s = filled(0, false);
    // A Read of the mailbox before any path was bound.
    let mut out = vec![0u8; s.ss];
    assert_eq!(io(&mut s.dev, opcode::READ, s.cap, DataBuf::FromDevice(&mut out), 1), Status::SEQUENCE_ERROR);
    // Hostile path blocks: none, not UTF-8, relative, thousands of components, an over-long name.
    let deep = "/a".repeat(2000);
    let long = format!("/{}", "x".repeat(3000));
    for bad in [&b""[..], b"\xff\xfe", b"relative/x", deep.as_bytes(), long.as_bytes()] {
        let mut b = vec![OP_FSR as u8];
        b.extend_from_slice(bad);
        b.push(0);
        assert!(b.len() <= s.ss);
        assert_eq!(invoke(&mut s, 0, &b).map(|r| r.0), Err(Status::INVALID_FIELD), "{}", String::from_utf8_lossy(bad));
    }
    let mut nul_less = vec![b'/'; s.ss];
    nul_less[0] = OP_FSR as u8;
    assert_eq!(io(&mut s.dev, opcode::WRITE, s.cap, DataBuf::ToDevice(&nul_less), 1), Status::INVALID_FIELD, "no terminating NUL");
    let path = "/a/b/c/d/e/f/deep.bin";
    let mut block = vec![OP_FSR as u8];
    block.extend_from_slice(path.as_bytes());
    block.push(0);
    let (op, size, ino, reads, t_fsr) = invoke(&mut s, 0, &block).unwrap();
    assert_eq!((op, size, ino), (OP_FSR, 9000, common::debugfs_inode(&s.img.img, path)));
    // 7 directories (root..f): each needs its inode-table block (shared here) and its directory block.
    assert!((8..=15).contains(&reads), "{reads} reads for 7 levels");
    let head = head_lba(&s, path);
    let (_, _, _, nice_reads, t_nice) = invoke(&mut s, head, &[OP_LOCATE as u8]).unwrap();
    assert!(nice_reads == 2 && t_nice < t_fsr, "NICE {t_nice} ns ({nice_reads} reads) vs FSR {t_fsr} ns ({reads} reads)");
    // Unknown paths, relative paths and a directory are refused.
    for bad in ["/a/nope", "a/b", "/a/b"] {
        let mut b = vec![OP_FSR as u8];
        b.extend_from_slice(bad.as_bytes());
        b.push(0);
        assert_eq!(invoke(&mut s, 0, &b).map(|r| r.0), Err(Status::INVALID_FIELD), "{bad}");
    }
    // FSR's mailbox takes only FSR, and FSR is not bound to a file's head.
    assert_eq!(invoke(&mut s, 0, &[OP_CRC32 as u8]).map(|r| r.0), Err(Status::INVALID_FIELD));
    assert_eq!(invoke(&mut s, head, &block).map(|r| r.0), Err(Status::INVALID_FIELD));
}

#[test]
fn random_overwrites_through_gc_break_links_that_are_detected_and_repaired() {
    let mut s = filled(0, true);
    let files = regular_files(&s);
    let heads: Vec<u64> = files.iter().map(|(p, _)| head_lba(&s, p)).collect();
    // Link every file (the first invocation learns and writes the lists).
    for (h, (p, d)) in heads.iter().zip(&files) {
        assert_eq!(invoke(&mut s, *h, &[OP_CRC32 as u8]).unwrap().3, u64::from(crc32fast::hash(d)), "{p}");
    }
    assert_eq!(stat(&s.dev, "link_mismatches"), 0, "fresh lists have no stale links");
    // Random overwrites of the junk and free space, three times the capacity: GC moves the file system's pages.
    let img_lbas = (s.img.bytes.len() / s.ss) as u64;
    let free = s.cap - img_lbas;
    let chunk = vec![0x77u8; 16 * s.ss];
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for _ in 0..(3 * s.cap / 16) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let lba = img_lbas + (x % (free - 16)) / 16 * 16;
        assert!(io(&mut s.dev, opcode::WRITE, lba, DataBuf::ToDevice(&chunk), 16).is_success());
    }
    assert!(s.dev.report().ftl.stats.gc_runs > 0, "GC ran");
    for round in 0..2 {
        let before = stat(&s.dev, "link_mismatches");
        for (h, (p, d)) in heads.iter().zip(&files) {
            let (_, size, _, crc, _) = invoke(&mut s, *h, &[OP_CRC32 as u8]).unwrap_or_else(|e| panic!("{p}: {e}"));
            assert_eq!((size, crc), (d.len() as u64, u64::from(crc32fast::hash(d))), "round {round}: {p}");
        }
        let found = stat(&s.dev, "link_mismatches") - before;
        if round == 0 {
            assert!(found > 0, "GC moved linked pages: stale PPN links were detected");
            assert!(stat(&s.dev, "list_rebuilds") > 0, "files whose every link went stale had their list rebuilt");
        } else {
            assert_eq!(found, 0, "vulnerable links are not followed again, rebuilt lists are fresh");
        }
    }
}

#[test]
fn files_whose_inodes_arrive_before_their_data_are_linked_once_the_data_is_written() {
    let img = common::make_image("");
    let mut dev = device(0);
    let ss = dev.lba_bytes() as usize;
    let cap = dev.namespace().lbas / 2;
    let per = 65536 / ss;
    let chunks: Vec<Vec<u8>> = img.bytes.chunks(65536).map(<[u8]>::to_vec).collect();
    let split = chunks.len() / 8; // the inode tables, not yet most of the data
    for (i, c) in chunks.iter().enumerate() {
        if i == split {
            // An invocation in between makes the firmware learn now: it sees inodes whose data is not written yet.
            let mut out = vec![0u8; ss];
            assert_eq!(io(&mut dev, opcode::READ, cap + 1, DataBuf::FromDevice(&mut out), 1), Status::INVALID_FIELD);
        }
        assert!(io(&mut dev, opcode::WRITE, (i * per) as u64, DataBuf::ToDevice(c), (c.len() / ss) as u32).is_success());
    }
    let mut s = Setup { dev, cap, ss, img };
    for (path, content) in regular_files(&s) {
        let head = head_lba(&s, &path);
        let (_, size, _, crc, _) = invoke(&mut s, head, &[OP_CRC32 as u8]).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!((size, crc), (content.len() as u64, u64::from(crc32fast::hash(&content))), "{path}");
    }
}
