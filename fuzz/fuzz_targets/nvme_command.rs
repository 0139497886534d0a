//! Whole-device command execution: arbitrary SQEs with arbitrary data buffers, on the admin or an I/O queue of a
//! small device. Every command must complete (with some status) and the device must stay consistent.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nearflash_core::config::load_preset;
use nearflash_core::nvme::DataBuf;
use nearflash_core::nvme::{Sqe, SQE_BYTES};
use nearflash_core::{Device, DeviceOptions};
use std::cell::RefCell;

fn small_device() -> Device {
    let mut t = load_preset("cosmos-plus").unwrap();
    for (k, v) in [
        ("channels", "2"),
        ("chips_per_channel", "1"),
        ("blocks_per_plane", "16"),
        ("pages_per_block", "16"),
        ("over_provisioning", "40"),
        ("gc_start_free_blocks", "3"),
        ("gc_stop_free_blocks", "3"),
    ] {
        t.set(k, v).unwrap();
    }
    let mut d = Device::memory(t, DeviceOptions::default()).unwrap();
    d.create_queue_pair(1, 32).unwrap();
    d
}

thread_local! {
    static DEV: RefCell<Device> = RefCell::new(small_device());
}

fuzz_target!(|data: &[u8]| {
    if data.len() < SQE_BYTES + 1 {
        return;
    }
    let raw: &[u8; SQE_BYTES] = data[1..1 + SQE_BYTES].try_into().unwrap();
    let sqe = Sqe::from_bytes(raw);
    let payload = &data[1 + SQE_BYTES..];
    let mode = data[0];
    DEV.with(|d| {
        let mut dev = d.borrow_mut();
        // Queue management commands may delete the I/O queue; keep it for the next input.
        let qid = if mode & 1 == 0 { 0 } else { 1 };
        if !dev.has_queue(1) {
            let _ = dev.create_queue_pair(1, 32);
        }
        let mut out = vec![0u8; payload.len().min(1 << 20)];
        let buf = match mode >> 1 & 3 {
            0 => DataBuf::None,
            1 => DataBuf::ToDevice(payload),
            _ => DataBuf::FromDevice(&mut out),
        };
        if dev.has_queue(qid) {
            if let Ok(done) = dev.execute(qid, sqe, buf) {
                assert!(done.latency_ns > 0);
            }
        }
        dev.check_consistency().unwrap();
    });
});
