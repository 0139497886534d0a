//! The NICE firmware on a small device, shared by the firmware tests: NICE's board (4 KiB pages, 416 B OOB, quad
//! A53) shrunk to a few MiB, a mke2fs image written through ordinary Writes, and NICE_Write / NICE_Read at
//! hyper-addresses.

use nearflash_core::config::{load_preset, ConfigTree};
use nearflash_core::ext::{DataBuf, Sqe, Status};
use nearflash_core::nvme::opcode;
use nearflash_core::{Device, DeviceOptions};
use nearflash_nice::firmware::NiceFirmware;
use nearflash_nice::reader::Ext4Reader;
use nearflash_nice::source::MemDisk;

/// The shrunk `nice-zu7eg` preset the firmware tests run on.
pub fn tree() -> ConfigTree {
    let mut t = load_preset("nice-zu7eg").unwrap();
    for (k, v) in [("channels", "2"), ("chips_per_channel", "1"), ("blocks_per_plane", "96"), ("pages_per_block", "64"), ("over_provisioning", "25"), ("write_buffer", "256KiB")] {
        t.set(k, v).unwrap();
    }
    t
}

/// A memory device on [`tree`] with `fw` attached and queue pair 1 (depth 64).
pub fn device(fw: NiceFirmware) -> Device {
    let mut dev = Device::memory(tree(), DeviceOptions::default()).unwrap();
    dev.attach(Box::new(fw)).unwrap();
    dev.create_queue_pair(1, 64).unwrap();
    dev
}

/// One synchronous command on queue 1: its status.
pub fn io(dev: &mut Device, op: u8, lba: u64, data: DataBuf<'_>, nlb: u32) -> Status {
    dev.execute(1, Sqe::rw(op, 1, lba, nlb), data).unwrap().status
}

/// The device's reason for the last failed command, from its error log (Get Log Page 0xC1, newest entry first).
#[allow(dead_code)]
pub fn last_reason(dev: &mut Device) -> String {
    let mut page = vec![0u8; 64 * 1024];
    let sqe = Sqe { opcode: opcode::ADMIN_GET_LOG_PAGE, cdw10: 0xC1 | (((page.len() / 4 - 1) as u32) << 16), ..Sqe::default() };
    assert!(dev.execute(0, sqe, DataBuf::FromDevice(&mut page)).unwrap().status.is_success());
    let end = page.iter().position(|&b| b == 0).unwrap_or(page.len());
    let rows: serde_json::Value = serde_json::from_slice(&page[..end]).unwrap();
    rows[0]["reason"].as_str().unwrap_or_default().to_string()
}

/// Asserts that the last failed command's reason says `words`.
#[allow(dead_code)]
pub fn said(dev: &mut Device, words: &str) {
    let reason = last_reason(dev);
    assert!(reason.contains(words), "{reason:?} does not say {words:?}");
}

pub struct Setup {
    pub dev: Device,
    /// The capacity C (the firmware advertises 2C).
    pub cap: u64,
    /// Sector size in bytes.
    pub ss: usize,
    pub img: super::Image,
}

/// Writes `img` through the block interface in 64 KiB chunks, in file order, as `dd` would; with `junk`, each chunk
/// is followed by a chunk of junk at the top of the device, so that the file system's pages share flash blocks with
/// data that is overwritten later (GC then moves the file system's pages).
pub fn fill(mut dev: Device, img: super::Image, junk: bool) -> Setup {
    let ss = dev.lba_bytes() as usize;
    let cap = dev.namespace().lbas / 2;
    assert!((img.bytes.len() / ss) as u64 <= cap, "the image fits the device");
    let per = 65536 / ss;
    for (i, chunk) in img.bytes.chunks(65536).enumerate() {
        let st = io(&mut dev, opcode::WRITE, (i * per) as u64, DataBuf::ToDevice(chunk), (chunk.len() / ss) as u32);
        assert!(st.is_success(), "{st}");
        if junk {
            let at = cap - ((i + 1) * per) as u64;
            assert!(io(&mut dev, opcode::WRITE, at, DataBuf::ToDevice(&vec![0x33u8; 65536]), per as u32).is_success());
        }
    }
    Setup { dev, cap, ss, img }
}

/// A fresh device with `fw`, the test image written into it (see [`fill`]).
pub fn filled(fw: NiceFirmware, junk: bool) -> Setup {
    fill(device(fw), super::make_image(""), junk)
}

/// The LBA of `path`'s first data sector (its hyper-address is C + this), by the crate's reader on the image.
pub fn head_lba(s: &Setup, path: &str) -> u64 {
    let mut disk = MemDisk::from_image(s.ss as u32, &s.img.bytes);
    let mut fs = Ext4Reader::open(&mut disk, 0).unwrap();
    let (ino, _) = fs.lookup(path).unwrap();
    let inode = fs.inode(ino).unwrap();
    fs.file_lbas(&inode).unwrap()[0]
}

/// NICE_Write `block` then NICE_Read at hyper-address C + `at`: (op, size, inode, value, latency of the read).
pub fn invoke(s: &mut Setup, at: u64, block: &[u8]) -> Result<(u32, u64, u32, u64, u64), Status> {
    let mut cmd = vec![0u8; s.ss];
    cmd[..block.len()].copy_from_slice(block);
    let st = io(&mut s.dev, opcode::WRITE, s.cap + at, DataBuf::ToDevice(&cmd), 1);
    if !st.is_success() {
        return Err(st);
    }
    let mut out = vec![0u8; s.ss];
    let c = s.dev.execute(1, Sqe::rw(opcode::READ, 1, s.cap + at, 1), DataBuf::FromDevice(&mut out)).unwrap();
    if !c.status.is_success() {
        return Err(c.status);
    }
    let u32_at = |o: usize| u32::from_le_bytes(out[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(out[o..o + 8].try_into().unwrap());
    Ok((u32_at(0), u64_at(4), u32_at(12), u64_at(16), c.latency_ns))
}
