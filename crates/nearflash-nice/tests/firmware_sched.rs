//! NICE's firmware kernel with requests in flight together (paper Sec. IV-C): shared NAND reads between ISC
//! requests and between an ISC request and an ordinary Read, ISC priority, and coroutine scheduling vs polling.

use crate::common;

use nearflash_core::config::{load_preset, ExtParams};
use nearflash_core::ext::{DataBuf, Sqe};
use nearflash_core::nvme::opcode;
use nearflash_core::{Device, DeviceOptions};
use nearflash_nice::firmware::{NiceFirmware, OP_CRC32};
use nearflash_nice::reader::Ext4Reader;
use nearflash_nice::sched::NiceParams;
use nearflash_nice::source::MemDisk;
use std::collections::BTreeMap;

const VECTORS: &str = "/emb/vectors.bin";

struct Setup {
    dev: Device,
    cap: u64,
    ss: usize,
    bytes: Vec<u8>,
}

fn setup(img: &common::Image, params: serde_json::Value) -> Setup {
    let mut t = load_preset("nice-zu7eg").unwrap();
    for (k, v) in [("channels", "2"), ("chips_per_channel", "2"), ("blocks_per_plane", "48"), ("pages_per_block", "64"), ("over_provisioning", "25"), ("write_buffer", "256KiB")] {
        t.set(k, v).unwrap();
    }
    let mut dev = Device::memory(t, DeviceOptions::default()).unwrap();
    let mut p = NiceParams::default();
    p.apply_json_object(&params, &[]).unwrap();
    dev.attach(Box::new(NiceFirmware::with_params(p))).unwrap();
    dev.create_queue_pair(1, 256).unwrap();
    let ss = dev.lba_bytes() as usize;
    let cap = dev.namespace().lbas / 2;
    for (i, chunk) in img.bytes.chunks(65536).enumerate() {
        let d = dev.execute(1, Sqe::rw(opcode::WRITE, 0, (i * 65536 / ss) as u64, (chunk.len() / ss) as u32), DataBuf::ToDevice(chunk)).unwrap();
        assert!(d.status.is_success());
    }
    let d = dev.execute(1, Sqe::rw(opcode::FLUSH, 0, 0, 1), DataBuf::None).unwrap();
    assert!(d.status.is_success());
    let mut s = Setup { dev, cap, ss, bytes: img.bytes.clone() };
    settle(&mut s);
    s
}

/// Lets every program and read still under way finish (nothing else is in flight when a measurement starts).
fn settle(s: &mut Setup) {
    let t = s.dev.now() + 1_000_000_000;
    s.dev.advance_to(t);
}

fn lbas(s: &Setup, path: &str) -> Vec<u64> {
    let mut disk = MemDisk::from_image(s.ss as u32, &s.bytes);
    let mut fs = Ext4Reader::open(&mut disk, 0).unwrap();
    let (ino, _) = fs.lookup(path).unwrap();
    let inode = fs.inode(ino).unwrap();
    fs.file_lbas(&inode).unwrap()
}

fn bind(s: &mut Setup, head: u64, block: &[u8]) {
    let mut cmd = vec![0u8; s.ss];
    cmd[..block.len()].copy_from_slice(block);
    let d = s.dev.execute(1, Sqe::rw(opcode::WRITE, 0, s.cap + head, 1), DataBuf::ToDevice(&cmd)).unwrap();
    assert!(d.status.is_success(), "{}", d.status);
    // The first invocation learns the image and writes the OOB lists (page programs): let that finish.
    settle(s);
}

/// Submits each (lba, nlb, into buffer `i`) Read at the current time; returns each one's latency (ns), in order.
fn reads_together(s: &mut Setup, reads: &[(u64, u32)], bufs: &mut [Vec<u8>]) -> Vec<u64> {
    let now = s.dev.now();
    let mut cid_of = BTreeMap::new();
    for (i, (&(lba, nlb), buf)) in reads.iter().zip(bufs.iter_mut()).enumerate() {
        buf.resize(nlb as usize * s.ss, 0);
        let cid = s.dev.next_cid(1);
        s.dev.submit(1, Sqe::rw(opcode::READ, cid, lba, nlb), DataBuf::FromDevice(buf)).unwrap();
        cid_of.insert(cid, i);
    }
    let mut lat = vec![0; reads.len()];
    while let Some(c) = s.dev.wait(1) {
        assert!(c.cqe.status().is_success(), "{}", c.cqe.status());
        lat[cid_of[&c.cqe.cid]] = c.time - now;
    }
    lat
}

fn ext(s: &Setup, key: &str) -> u64 {
    s.dev.report().extensions["nice"][key].as_u64().unwrap_or_else(|| panic!("{key}"))
}

fn value(out: &[u8]) -> u64 {
    u64::from_le_bytes(out[16..24].try_into().unwrap())
}

#[test]
fn two_requests_needing_the_same_pages_read_them_from_flash_once() {
    let img = common::make_image("");
    let content = img.files.iter().find(|f| f.0 == VECTORS).unwrap().1.clone();
    for shared in [true, false] {
        let mut s = setup(&img, serde_json::json!({"shared_reads": shared}));
        let file = lbas(&s, VECTORS);
        let head = file[0];
        bind(&mut s, head, &[OP_CRC32 as u8]);
        let before = ext(&s, "isc_flash_sectors");
        let mut bufs = vec![Vec::new(), Vec::new()];
        let h = s.cap + head;
        reads_together(&mut s, &[(h, 1), (h, 1)], &mut bufs);
        for b in &bufs {
            assert_eq!(value(b), u64::from(crc32fast::hash(&content)), "both answers equal the host's");
        }
        let flash = ext(&s, "isc_flash_sectors") - before;
        let n = file.len() as u64;
        if shared {
            assert_eq!((flash, ext(&s, "isc_shared_sectors")), (n, n), "the second request takes every page from the first");
        } else {
            assert_eq!((flash, ext(&s, "isc_shared_sectors")), (2 * n, 0));
        }
        // An ordinary Read of the file issued with an ISC request on it shares the ISC's pages.
        let (first, run) = (file[0], file.iter().zip(&file[1..]).take_while(|(a, b)| **b == **a + 1).count() as u32 + 1);
        let mut bufs = vec![Vec::new(), Vec::new()];
        let h = s.cap + head;
        reads_together(&mut s, &[(h, 1), (first, run)], &mut bufs);
        let n = (run as usize * s.ss).min(content.len());
        assert_eq!(bufs[1][..n], content[..n], "the shared pages are the file's bytes");
        assert_eq!(ext(&s, "host_shared_sectors") > 0, shared);
        assert_eq!(ext(&s, "host_reads_served") > 0, shared, "ordinary Reads go through the kernel only when sharing");
    }
}

#[test]
fn a_host_write_drops_the_held_copy() {
    let img = common::make_image("");
    let mut s = setup(&img, serde_json::json!({}));
    let lba = lbas(&s, "/hello.txt")[0];
    let mut bufs = vec![Vec::new()];
    reads_together(&mut s, &[(lba, 1)], &mut bufs);
    // Rewrite the sector, then read it together with nothing else in flight: the held copy must not be served.
    let new = vec![0x5Au8; s.ss];
    assert!(s.dev.execute(1, Sqe::rw(opcode::WRITE, 0, lba, 1), DataBuf::ToDevice(&new)).unwrap().status.is_success());
    let (cid, mut a, mut b) = (s.dev.next_cid(1), vec![0u8; s.ss], vec![0u8; s.ss]);
    s.dev.submit(1, Sqe::rw(opcode::READ, cid, lba, 1), DataBuf::FromDevice(&mut a)).unwrap();
    let cid = s.dev.next_cid(1);
    s.dev.submit(1, Sqe::rw(opcode::READ, cid, lba, 1), DataBuf::FromDevice(&mut b)).unwrap();
    while s.dev.wait(1).is_some() {}
    assert_eq!((a == new, b == new), (true, true));
}

/// NICE-K over /emb/vectors.bin as 37,500 int16 vectors of D = 4.
fn knn_block() -> Vec<u8> {
    let mut b = vec![3u8, 16];
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&8u16.to_le_bytes());
    b.extend_from_slice(&[0, 0]);
    for q in [100i32, -50, 7, 3000] {
        b.extend_from_slice(&q.to_le_bytes());
    }
    b
}

/// `isc` NICE-K requests on the file, then, `gap_ns` later, `n` ordinary 4-block Reads: (mean ordinary latency,
/// mean ISC latency), ns.
fn mixed(s: &mut Setup, isc: usize, gap_ns: u64, n: usize) -> (f64, f64) {
    let head = lbas(s, VECTORS)[0];
    bind(s, head, &knn_block());
    let t0 = s.dev.now();
    let mut sent = BTreeMap::new();
    let mut bufs = vec![vec![0u8; 4 * s.ss]; isc + n];
    let (isc_bufs, io_bufs) = bufs.split_at_mut(isc);
    for (i, b) in isc_bufs.iter_mut().enumerate() {
        let cid = s.dev.next_cid(1);
        s.dev.submit(1, Sqe::rw(opcode::READ, cid, s.cap + head, 1), DataBuf::FromDevice(&mut b[..s.ss])).unwrap();
        sent.insert(cid, (true, t0, i));
    }
    s.dev.advance_to(t0 + gap_ns);
    for (i, b) in io_bufs.iter_mut().enumerate() {
        let cid = s.dev.next_cid(1);
        s.dev.submit(1, Sqe::rw(opcode::READ, cid, 16 + 4 * i as u64, 4), DataBuf::FromDevice(b)).unwrap();
        sent.insert(cid, (false, t0 + gap_ns, i));
    }
    let (mut io, mut ic) = (Vec::new(), Vec::new());
    while let Some(c) = s.dev.wait(1) {
        assert!(c.cqe.status().is_success());
        let (is_isc, at, _) = sent[&c.cqe.cid];
        if is_isc { ic.push(c.time - at) } else { io.push(c.time - at) }
    }
    let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len() as f64;
    (mean(&io), mean(&ic))
}

#[test]
fn polling_firmware_holds_the_a53_cores_and_coroutines_free_them() {
    let img = common::make_image("");
    let mut co = setup(&img, serde_json::json!({}));
    let mut poll = setup(&img, serde_json::json!({"scheduling": "polling"}));
    // Eight NICE-K requests on one file (its pages read once, shared): more than the four A53 cores. Polling, the
    // last four wait for a core and then spin on it; ordinary Reads 2 ms later find every core spinning.
    let (io_co, isc_co) = mixed(&mut co, 8, 2_000_000, 16);
    let (io_poll, isc_poll) = mixed(&mut poll, 8, 2_000_000, 16);
    assert_eq!(ext(&co, "polling_ns"), 0);
    assert!(ext(&poll, "polling_ns") > 0);
    assert!(isc_poll > 1.3 * isc_co, "run to completion serialises ISC requests beyond the cores: {isc_poll} vs {isc_co} ns");
    assert!(io_poll > 2.0 * io_co, "ordinary Reads wait for a spinning core: {io_poll} vs {io_co} ns");
    // Both answer the same.
    let head = lbas(&co, VECTORS)[0];
    let mut a = vec![Vec::new()];
    let mut b = vec![Vec::new()];
    let (h1, h2) = (co.cap + head, poll.cap + head);
    reads_together(&mut co, &[(h1, 1)], &mut a);
    reads_together(&mut poll, &[(h2, 1)], &mut b);
    assert_eq!(a, b);
}


#[test]
fn wake_up_is_a_choice_apart_from_the_scheduler() {
    let img = common::make_image("");
    let mut co = setup(&img, serde_json::json!({}));
    let mut co_poll = setup(&img, serde_json::json!({"wake": "polling"}));
    let mut poll = setup(&img, serde_json::json!({"scheduling": "polling"}));
    let mut poll_irq = setup(&img, serde_json::json!({"scheduling": "polling", "wake": "interrupt"}));
    let (io_co, _) = mixed(&mut co, 8, 2_000_000, 16);
    let (io_co_poll, _) = mixed(&mut co_poll, 8, 2_000_000, 16);
    mixed(&mut poll, 8, 2_000_000, 16);
    mixed(&mut poll_irq, 8, 2_000_000, 16);
    // Coroutines whose waits are polled book an A53 core per request: ordinary Reads lose cores as with polling.
    assert_eq!(ext(&co, "polling_ns"), 0);
    assert!(ext(&co_poll, "polling_ns") > 0);
    assert!(io_co_poll > 1.5 * io_co, "polled waits hold the cores: {io_co_poll} vs {io_co} ns");
    // Run to completion woken by the FPGA's interrupt spins on its transfers only, not through NICE-K's compute.
    assert!(ext(&poll_irq, "polling_ns") > 0 && ext(&poll_irq, "polling_ns") < ext(&poll, "polling_ns"));
    // All four answer the same.
    let head = lbas(&co, VECTORS)[0];
    let mut outs = Vec::new();
    for s in [&mut co, &mut co_poll, &mut poll, &mut poll_irq] {
        let mut b = vec![Vec::new()];
        let h = s.cap + head;
        reads_together(s, &[(h, 1)], &mut b);
        outs.push(b);
    }
    assert!(outs.windows(2).all(|w| w[0] == w[1]));
    let mut p = NiceParams::default();
    assert!(p.apply_json_object(&serde_json::json!({"wake": "sometimes"}), &[]).is_err(), "an unknown wake-up");
}
