//! The NICE firmware extension through the device's command interface: a real ext4 image (mke2fs -d) written with
//! ordinary Writes, then NICE_Write / NICE_Read as Writes and Reads at hyper-addresses (LBA >= C).

use crate::common;

use crate::common::fw::{head_lba, io, said, tree, Setup};
use nearflash_core::ext::{DataBuf, Sqe, Status};
use nearflash_core::nvme::opcode;
use nearflash_core::{Device, DeviceOptions};
use nearflash_nice::firmware::{NiceFirmware, OP_CRC32, OP_SUM};
use nearflash_nice::ops::RESULT_HEADER;
use nearflash_nice::reader::Ext4Reader;
use nearflash_nice::source::MemDisk;

fn filled() -> Setup {
    common::fw::filled(NiceFirmware::new(), false)
}

/// NICE_Write of `op` then NICE_Read at C + `head`: (op, size, inode, value).
fn invoke(s: &mut Setup, head: u64, op: impl Block) -> Result<(u32, u64, u32, u64), Status> {
    common::fw::invoke(s, head, &op.block()).map(|(op, size, ino, value, _)| (op, size, ino, value))
}

/// A NICE_Write block: an op id alone, or whole bytes.
trait Block {
    fn block(&self) -> Vec<u8>;
}

impl Block for u32 {
    fn block(&self) -> Vec<u8> {
        vec![*self as u8]
    }
}

impl Block for &[u8] {
    fn block(&self) -> Vec<u8> {
        self.to_vec()
    }
}

impl<const N: usize> Block for &[u8; N] {
    fn block(&self) -> Vec<u8> {
        self.to_vec()
    }
}

#[test]
fn hyper_address_reads_return_the_in_storage_result_for_every_file() {
    let mut s = filled();
    let files: Vec<_> = s.img.files.iter().filter(|(_, d)| !d.is_empty()).take(40).cloned().collect();
    for (path, content) in &files {
        let head = head_lba(&s, path);
        let (op, size, ino, crc) = invoke(&mut s, head, OP_CRC32).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!((op, size), (OP_CRC32, content.len() as u64), "{path}");
        assert_eq!(ino, common::debugfs_inode(&s.img.img, path), "{path}");
        assert_eq!(crc, u64::from(crc32fast::hash(content)), "{path}: equals the host computing on the same file");
        let (_, _, _, sum) = invoke(&mut s, head, OP_SUM).unwrap();
        assert_eq!(sum, content.iter().map(|&b| u64::from(b)).sum::<u64>(), "{path}");
    }
    // Ordinary reads below C are untouched by the extension.
    let mut back = vec![0u8; s.ss];
    assert!(io(&mut s.dev, opcode::READ, 0, DataBuf::FromDevice(&mut back), 1).is_success());
    assert_eq!(back, s.img.bytes[..s.ss]);
}

#[test]
fn bad_invocations_are_refused_and_change_nothing() {
    let mut s = filled();
    let head = head_lba(&s, "/hello.txt");
    // Not a file's first page, a directory's block, a wrong op id, a Read before any NICE_Write.
    // Each says why in the device's error log.
    assert_eq!(invoke(&mut s, head + 1, OP_CRC32), Err(Status::INVALID_FIELD));
    said(&mut s.dev, &format!("no file the firmware has learnt starts at LBA {}", head + 1));
    assert_eq!(invoke(&mut s, 0, OP_CRC32), Err(Status::INVALID_FIELD));
    assert_eq!(invoke(&mut s, head, 99), Err(Status::INVALID_FIELD));
    said(&mut s.dev, "op id (block byte 0) = 99: expected 1 (CRC-32)");
    assert_eq!(invoke(&mut s, head, &[3, 16, 0, 0, 1, 0][..]), Err(Status::INVALID_FIELD));
    said(&mut s.dev, "NICE-K dim (block bytes 2..4) = 0: expected 1..=1024");
    assert_eq!(invoke(&mut s, head, &[3, 8][..]), Err(Status::INVALID_FIELD));
    said(&mut s.dev, "NICE-K width (block byte 1) = 8 bits: expected 16 or 32");
    assert_eq!(invoke(&mut s, head, &[6, 9][..]), Err(Status::INVALID_FIELD));
    said(&mut s.dev, "NICE-C network (block byte 1) = 9: expected 0 (LeNet-5) or 1 (MobileNetV2)");
    assert_eq!(invoke(&mut s, head, &[5, b'/', 0][..]), Err(Status::INVALID_FIELD));
    said(&mut s.dev, "binds only at the hyper-address of LBA 0");
    let mut out = vec![0u8; s.ss];
    assert_eq!(io(&mut s.dev, opcode::READ, s.cap + head, DataBuf::FromDevice(&mut out), 1), Status::SEQUENCE_ERROR);
    said(&mut s.dev, "before a NICE_Write bound an op to it");
    // Beyond the advertised 2C.
    assert_eq!(io(&mut s.dev, opcode::READ, 2 * s.cap, DataBuf::FromDevice(&mut out), 1), Status::LBA_OUT_OF_RANGE);
    said(&mut s.dev, &format!("beyond the {} advertised blocks", 2 * s.cap));
    // The FSR mailbox at the hyper-address of LBA 0: a path that is not there, a Read before any path.
    assert_eq!(io(&mut s.dev, opcode::READ, s.cap, DataBuf::FromDevice(&mut out), 1), Status::SEQUENCE_ERROR);
    said(&mut s.dev, "FSR Read before a NICE_Write bound a path");
    assert_eq!(invoke(&mut s, 0, b"\x05/no/such/file\0"), Err(Status::INVALID_FIELD));
    said(&mut s.dev, "FSR path \"/no/such/file\": no regular file of that path");
    // The image is intact.
    let n = s.img.bytes.len() / s.ss;
    let mut all = vec![0u8; n * s.ss];
    for (i, c) in all.chunks_mut(65536).enumerate() {
        let nlb = (c.len() / s.ss) as u32;
        assert!(io(&mut s.dev, opcode::READ, (i * 65536 / s.ss) as u64, DataBuf::FromDevice(c), nlb).is_success());
    }
    assert!(all == s.img.bytes, "refused invocations changed nothing");
    assert_eq!(invoke(&mut s, head, OP_CRC32).unwrap().3, u64::from(crc32fast::hash(b"hello, NICE\n")));
}

#[test]
fn state_survives_close_and_reopen() {
    let img = common::make_image("");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev");
    let head;
    {
        let mut dev = Device::create(&path, tree(), DeviceOptions::default()).unwrap();
        dev.attach(Box::new(NiceFirmware::new())).unwrap();
        dev.create_queue_pair(1, 64).unwrap();
        let mut s = common::fw::fill(dev, img, false);
        let (ss, cap) = (s.ss, s.cap);
        head = head_lba(&s, "/emb/vectors.bin");
        let mut cmd = vec![0u8; ss];
        cmd[0] = OP_CRC32 as u8;
        assert!(io(&mut s.dev, opcode::WRITE, cap + head, DataBuf::ToDevice(&cmd), 1).is_success());
        s.dev.close().unwrap();
        drop(s.img.dir);
    }
    let mut dev = Device::open(&path, DeviceOptions::default()).unwrap();
    dev.attach(Box::new(NiceFirmware::new())).unwrap();
    dev.create_queue_pair(1, 64).unwrap();
    let ss = dev.lba_bytes() as usize;
    let cap = dev.namespace().lbas / 2;
    // The op bound before the close is still bound, and the layout is re-learnt from flash.
    let mut out = vec![0u8; ss];
    assert!(io(&mut dev, opcode::READ, cap + head, DataBuf::FromDevice(&mut out), 1).is_success());
    let crc = u64::from_le_bytes(out[16..24].try_into().unwrap());
    let want = common::make_image("").files.into_iter().find(|(p, _)| p == "/emb/vectors.bin").unwrap().1;
    assert_eq!(crc, u64::from(crc32fast::hash(&want)));
}

#[test]
fn nice_k_over_an_embedding_file_equals_a_brute_force_reference() {
    let mut s = filled();
    let content = s.img.files.iter().find(|(p, _)| p == "/emb/vectors.bin").unwrap().1.clone();
    let head = head_lba(&s, "/emb/vectors.bin");
    let (dim, k) = (10usize, 16usize);
    let query: Vec<i32> = (0..dim as i32).map(|i| i * 1000 - 4000).collect();
    let mut cmd = vec![0u8; s.ss];
    cmd[0] = nearflash_nice::firmware::OP_KNN as u8;
    cmd[1] = 16;
    cmd[2..4].copy_from_slice(&(dim as u16).to_le_bytes());
    cmd[4..6].copy_from_slice(&(k as u16).to_le_bytes());
    for (i, q) in query.iter().enumerate() {
        cmd[8 + 4 * i..12 + 4 * i].copy_from_slice(&q.to_le_bytes());
    }
    assert!(io(&mut s.dev, opcode::WRITE, s.cap + head, DataBuf::ToDevice(&cmd), 1).is_success());
    let mut out = vec![0u8; s.ss];
    let d = s.dev.execute(1, Sqe::rw(opcode::READ, 1, s.cap + head, 1), DataBuf::FromDevice(&mut out)).unwrap();
    assert!(d.status.is_success(), "{}", d.status);
    assert_eq!(u64::from_le_bytes(out[16..24].try_into().unwrap()), k as u64);
    let got: Vec<(u64, u32)> = (0..k)
        .map(|j| {
            let o = RESULT_HEADER + 12 * j;
            (u64::from_le_bytes(out[o..o + 8].try_into().unwrap()), u32::from_le_bytes(out[o + 8..o + 12].try_into().unwrap()))
        })
        .collect();
    let mut all: Vec<(u64, u32)> = content
        .chunks(2 * dim)
        .enumerate()
        .map(|(i, row)| {
            let d: i64 = row.chunks(2).zip(&query).map(|(c, &q)| (i64::from(i16::from_le_bytes([c[0], c[1]])) - i64::from(q)).pow(2)).sum();
            (d as u64, i as u32)
        })
        .collect();
    all.sort();
    assert_eq!(got, all[..k].to_vec(), "NICE-K equals the host's brute force on the same file");
    let rep = s.dev.report();
    let text = serde_json::to_string(&rep).unwrap();
    assert!(text.contains("nice.knn"), "the FPGA unit is declared and reported");
    // A shape the file does not have (dim 7: 300000 B is not whole 7 x i16 vectors) is refused, nothing returned.
    cmd[2..4].copy_from_slice(&7u16.to_le_bytes());
    assert!(io(&mut s.dev, opcode::WRITE, s.cap + head, DataBuf::ToDevice(&cmd), 1).is_success());
    let mut out = vec![0xEEu8; s.ss];
    assert_eq!(io(&mut s.dev, opcode::READ, s.cap + head, DataBuf::FromDevice(&mut out), 1), Status::INVALID_FIELD);
    said(&mut s.dev, "NICE-K over a file of 300000 bytes");
}

/// The k nearest rows of an i16 embedding file to `query`, by sorting every distance.
fn brute_i16(content: &[u8], dim: usize, query: &[i32], k: usize) -> Vec<(u64, u32)> {
    let mut all: Vec<(u64, u32)> = content
        .chunks(2 * dim)
        .enumerate()
        .map(|(i, row)| {
            let d: i64 = row.chunks(2).zip(query).map(|(c, &q)| (i64::from(i16::from_le_bytes([c[0], c[1]])) - i64::from(q)).pow(2)).sum();
            (d as u64, i as u32)
        })
        .collect();
    all.sort();
    all.truncate(k);
    all
}

/// A NICE-K block: op 3 (one query) or op 7 (a batch, `n` in bytes 6..8), padded to whole sectors.
fn knn_block(op: u32, dim: usize, k: usize, queries: &[Vec<i32>], n: u16, ss: usize) -> Vec<u8> {
    let mut b = vec![op as u8, 16];
    b.extend_from_slice(&(dim as u16).to_le_bytes());
    b.extend_from_slice(&(k as u16).to_le_bytes());
    b.extend_from_slice(&n.to_le_bytes());
    b.extend(queries.iter().flatten().flat_map(|q| q.to_le_bytes()));
    b.resize(b.len().div_ceil(ss) * ss, 0);
    b
}

#[test]
fn a_batch_of_queries_shares_one_pass_and_each_answer_equals_the_brute_force() {
    use nearflash_nice::firmware::{OP_KNN, OP_KNN_BATCH};
    let mut s = filled();
    let content = s.img.files.iter().find(|(p, _)| p == "/emb/vectors.bin").unwrap().1.clone();
    let head = head_lba(&s, "/emb/vectors.bin");
    let (dim, k, n) = (10usize, 32usize, 20usize);
    let queries: Vec<Vec<i32>> = (0..n as i32).map(|q| (0..dim as i32).map(|i| (i * 977 + q * 3331) % 9000 - 4500).collect()).collect();
    let read = |s: &mut Setup, sectors: u32| {
        let mut out = vec![0u8; sectors as usize * s.ss];
        let d = s.dev.execute(1, Sqe::rw(opcode::READ, 1, s.cap + head, sectors), DataBuf::FromDevice(&mut out)).unwrap();
        (d.status, d.latency_ns, out)
    };
    // One query per pass (op 3), n times.
    let mut single_ns = 0u64;
    for q in &queries {
        let b = knn_block(OP_KNN, dim, k, std::slice::from_ref(q), 0, s.ss);
        assert!(io(&mut s.dev, opcode::WRITE, s.cap + head, DataBuf::ToDevice(&b), 1).is_success());
        let (st, ns, _) = read(&mut s, 1);
        assert!(st.is_success());
        single_ns += ns;
    }
    // The batch (op 7): one NICE_Write of two sectors, one NICE_Read of the n answers.
    let b = knn_block(OP_KNN_BATCH, dim, k, &queries, n as u16, s.ss);
    let sectors = (b.len() / s.ss) as u32;
    assert!(io(&mut s.dev, opcode::WRITE, s.cap + head, DataBuf::ToDevice(&b), sectors).is_success());
    let out_sectors = (RESULT_HEADER + 12 * n * k).div_ceil(s.ss) as u32;
    let (st, batch_ns, out) = read(&mut s, out_sectors);
    assert!(st.is_success(), "{st}");
    assert_eq!(u64::from_le_bytes(out[16..24].try_into().unwrap()), n as u64, "value = the number of queries");
    for (qi, q) in queries.iter().enumerate() {
        let got: Vec<(u64, u32)> = (0..k)
            .map(|j| {
                let o = RESULT_HEADER + 12 * (qi * k + j);
                (u64::from_le_bytes(out[o..o + 8].try_into().unwrap()), u32::from_le_bytes(out[o + 8..o + 12].try_into().unwrap()))
            })
            .collect();
        assert_eq!(got, brute_i16(&content, dim, q, k), "query {qi}");
    }
    assert!(batch_ns * 4 < single_ns, "one pass for {n} queries ({batch_ns} ns) vs {n} passes ({single_ns} ns)");
    // The answers do not fit a one-sector Read: refused, nothing returned.
    assert_eq!(read(&mut s, 1).0, Status::INVALID_FIELD);
    // No queries, and more than the query buffer holds (max_queries 256), are refused at NICE_Write; the op bound
    // before stays bound and the file is untouched.
    let crc_before = invoke(&mut s, head, OP_CRC32).unwrap().3;
    for (count, qs) in [(0u16, vec![]), (257, vec![queries[0].clone(); 257])] {
        let b = knn_block(OP_KNN_BATCH, dim, k, &qs, count, s.ss);
        let sectors = (b.len() / s.ss) as u32;
        assert_eq!(io(&mut s.dev, opcode::WRITE, s.cap + head, DataBuf::ToDevice(&b), sectors), Status::INVALID_FIELD, "{count} queries");
    }
    // A batch whose block is shorter than its count says is refused too.
    let mut short = knn_block(OP_KNN_BATCH, dim, k, &queries[..2], 200, s.ss);
    short.truncate(s.ss);
    assert_eq!(io(&mut s.dev, opcode::WRITE, s.cap + head, DataBuf::ToDevice(&short), 1), Status::INVALID_FIELD);
    let (st, _, out) = read(&mut s, 1);
    assert!(st.is_success());
    assert_eq!(u64::from_le_bytes(out[16..24].try_into().unwrap()), crc_before, "CRC still bound, file unchanged");
    assert_eq!(crc_before, u64::from(crc32fast::hash(&content)));
}

#[test]
fn every_file_is_processed_correctly_after_gc_moved_its_pages() {
    let mut s = filled();
    let img_lbas = (s.img.bytes.len() / s.ss) as u64;
    let free = s.cap - img_lbas;
    let chunk = vec![0x77u8; 16 * s.ss];
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    // Random overwrites of the free space, three times the capacity: GC must move the file system's pages.
    for _ in 0..(3 * s.cap / 16) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let lba = img_lbas + (x % (free - 16)) / 16 * 16;
        assert!(io(&mut s.dev, opcode::WRITE, lba, DataBuf::ToDevice(&chunk), 16).is_success());
    }
    assert!(s.dev.report().ftl.stats.gc_runs > 0, "GC ran");
    let files: Vec<_> = s.img.files.iter().filter(|(_, d)| !d.is_empty()).step_by(5).cloned().collect();
    for (path, content) in &files {
        let head = head_lba(&s, path);
        let (_, size, _, crc) = invoke(&mut s, head, OP_CRC32).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!((size, crc), (content.len() as u64, u64::from(crc32fast::hash(content))), "{path}");
    }
}

/// (block, byte offset in it) of `path`'s inode per `debugfs imap`.
fn inode_place(img: &std::path::Path, path: &str) -> (u64, usize) {
    let s = common::debugfs(img, &format!("imap {path}"));
    let rest = s.split("located at block ").nth(1).unwrap();
    let (blk, off) = rest.split_once(", offset 0x").unwrap();
    (blk.trim().parse().unwrap(), usize::from_str_radix(off.trim(), 16).unwrap())
}

#[test]
fn a_file_changed_after_nice_write_is_processed_as_it_is_now_and_a_corrupted_inode_is_refused() {
    let mut s = filled();
    let head = head_lba(&s, "/hello.txt");
    let mut cmd = vec![0u8; s.ss];
    cmd[0] = OP_CRC32 as u8;
    assert!(io(&mut s.dev, opcode::WRITE, s.cap + head, DataBuf::ToDevice(&cmd), 1).is_success());
    // The host rewrites the file's data in place (same size) between NICE_Write and NICE_Read.
    let mut block = vec![0u8; s.ss];
    block[..12].copy_from_slice(b"HELLO, nice\n");
    assert!(io(&mut s.dev, opcode::WRITE, head, DataBuf::ToDevice(&block), 1).is_success());
    let mut out = vec![0u8; s.ss];
    assert!(io(&mut s.dev, opcode::READ, s.cap + head, DataBuf::FromDevice(&mut out), 1).is_success());
    assert_eq!(u64::from_le_bytes(out[16..24].try_into().unwrap()), u64::from(crc32fast::hash(b"HELLO, nice\n")));
    // The inode's extent header is overwritten with garbage: the firmware no longer knows a file there.
    let (blk, off) = inode_place(&s.img.img, "/hello.txt");
    let per = 4096 / s.ss as u64;
    let lba = blk * per + off as u64 / s.ss as u64;
    let at = off % s.ss;
    let mut sector = s.img.bytes[lba as usize * s.ss..(lba as usize + 1) * s.ss].to_vec();
    sector[at + 0x28..at + 0x28 + 12].fill(0xA5);
    assert!(io(&mut s.dev, opcode::WRITE, lba, DataBuf::ToDevice(&sector), 1).is_success());
    assert_eq!(invoke(&mut s, head, OP_CRC32), Err(Status::INVALID_FIELD));
    let reason = common::fw::last_reason(&mut s.dev);
    assert!(reason.contains(&format!("LBA {head}")) || reason.contains("damaged"), "{reason:?}");
    // Other files, whose inodes may share that block, are still served.
    let other = s.img.files.iter().find(|(p, _)| p == "/a/b/c/d/e/f/deep.bin").unwrap().1.clone();
    let h = head_lba(&s, "/a/b/c/d/e/f/deep.bin");
    assert_eq!(invoke(&mut s, h, OP_CRC32).unwrap().3, u64::from(crc32fast::hash(&other)));
}

/// Measurement, not a check (`cargo test --release -p nearflash-nice --test integration firmware_hyper:: -- --ignored --nocapture`):
/// NICE-K over /emb/vectors.bin in storage (NICE_Write + NICE_Read, learning already done) against the host reading
/// the same file with ordinary Reads (its compute not counted: a lower bound on HOST-ISC), in the same run.
#[test]
#[ignore]
fn measure_nice_k_against_host_reads() {
    let mut s = filled();
    let head = head_lba(&s, "/hello.txt");
    invoke(&mut s, head, OP_CRC32).unwrap(); // first invocation pays for learning from flash
    let mut disk = MemDisk::from_image(s.ss as u32, &s.img.bytes);
    let mut fs = Ext4Reader::open(&mut disk, 0).unwrap();
    let (ino, _) = fs.lookup("/emb/vectors.bin").unwrap();
    let inode = fs.inode(ino).unwrap();
    let lbas = fs.file_lbas(&inode).unwrap();
    let mut cmd = vec![0u8; s.ss];
    cmd[0] = nearflash_nice::firmware::OP_KNN as u8;
    cmd[1] = 16;
    cmd[2..4].copy_from_slice(&10u16.to_le_bytes());
    cmd[4..6].copy_from_slice(&16u16.to_le_bytes());
    let w = s.dev.execute(1, Sqe::rw(opcode::WRITE, 1, s.cap + lbas[0], 1), DataBuf::ToDevice(&cmd)).unwrap();
    let mut out = vec![0u8; s.ss];
    let r = s.dev.execute(1, Sqe::rw(opcode::READ, 1, s.cap + lbas[0], 1), DataBuf::FromDevice(&mut out)).unwrap();
    let nice_ns = w.latency_ns + r.latency_ns;
    let mut host_ns = 0;
    let mut buf = vec![0u8; s.ss];
    for &l in &lbas {
        host_ns += s.dev.execute(1, Sqe::rw(opcode::READ, 1, l, 1), DataBuf::FromDevice(&mut buf)).unwrap().latency_ns;
    }
    println!("file {} sectors: NICE-K in storage {} ns (write {} + read {}), host 1-block reads at QD1 {} ns, ratio host/NICE {:.2}",
        lbas.len(), nice_ns, w.latency_ns, r.latency_ns, host_ns, host_ns as f64 / nice_ns as f64);
}

#[test]
fn the_registered_extension_refuses_parameters_it_does_not_have() {
    let cfg = nearflash_core::config::DeviceConfig::from_tree(&tree()).unwrap();
    assert!(nearflash_core::ext::build("nice", &serde_json::json!({}), &cfg).is_ok());
    let e = nearflash_core::ext::build("nice", &serde_json::json!({"x": 1}), &cfg).err().unwrap().to_string();
    assert!(e.contains("unknown parameter"), "{e}");
    assert!(nearflash_core::ext::build("nice", &serde_json::json!({"ftl_cache_pages": 0}), &cfg).is_ok());
    for bad in [serde_json::json!({"ftl_cache_pages": -1}), serde_json::json!({"ftl_cache_pages": "many"}), serde_json::json!([1])] {
        assert!(nearflash_core::ext::build("nice", &bad, &cfg).is_err(), "{bad}");
    }
}
