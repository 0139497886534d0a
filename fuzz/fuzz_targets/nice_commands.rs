//! Arbitrary commands to a device with the NICE firmware attached: ordinary Writes of arbitrary bytes near the
//! start of the device (the learner takes them for ext4 metadata and data), NICE_Writes of arbitrary op blocks and
//! NICE_Reads at arbitrary hyper-addresses (every op, the CNN op with whatever "weights" the bytes make), and
//! ordinary Reads through the firmware kernel. Every command completes with some status; the FTL stays consistent.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nearflash_core::config::load_preset;
use nearflash_core::nvme::{opcode, DataBuf, Sqe};
use nearflash_core::{Device, DeviceOptions};
use std::cell::RefCell;

fn device() -> Device {
    let mut t = load_preset("nice-zu7eg").unwrap();
    for (k, v) in [("channels", "2"), ("chips_per_channel", "1"), ("blocks_per_plane", "32"), ("pages_per_block", "16"), ("over_provisioning", "40"), ("write_buffer", "64KiB")] {
        t.set(k, v).unwrap();
    }
    let mut d = Device::memory(t, DeviceOptions::default()).unwrap();
    d.attach(Box::new(nearflash_nice::firmware::NiceFirmware::with_cache(8))).unwrap();
    d.create_queue_pair(1, 32).unwrap();
    d
}

thread_local! {
    static DEV: RefCell<Device> = RefCell::new(device());
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    DEV.with(|d| {
        let mut dev = d.borrow_mut();
        let ss = dev.lba_bytes() as usize;
        let cap = dev.namespace().lbas / 2;
        // Small LBAs, where a file system's metadata and first files would be.
        let lba = u64::from(data[1]) + (u64::from(data[2] & 3) << 8);
        let payload = &data[3..];
        let mut block = vec![0u8; ss];
        let n = payload.len().min(ss);
        block[..n].copy_from_slice(&payload[..n]);
        let mut out = vec![0u8; ss];
        let (op, slba, buf) = match data[0] & 3 {
            0 => (opcode::WRITE, lba, DataBuf::ToDevice(&block)),
            1 => (opcode::WRITE, cap + lba, DataBuf::ToDevice(&block)),
            2 => (opcode::READ, cap + lba, DataBuf::FromDevice(&mut out)),
            _ => (opcode::READ, lba, DataBuf::FromDevice(&mut out)),
        };
        if let Ok(done) = dev.execute(1, Sqe::rw(op, 0, slba, 1), buf) {
            assert!(done.completed_at.as_ns() >= done.latency_ns);
        }
        dev.check_consistency().unwrap();
    });
});
