//! Arbitrary commands to a device with the iSSD and RecSSD firmware attached: vendor opcodes, NDP-flagged
//! Reads/Writes, and their data buffers. Every command completes with some status; the FTL stays consistent.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nearflash_core::config::load_preset;
use nearflash_core::nvme::DataBuf;
use nearflash_core::nvme::{Sqe, SQE_BYTES};
use nearflash_core::{Device, DeviceOptions};
use std::cell::RefCell;

fn device() -> Device {
    let mut t = load_preset("cosmos-plus").unwrap();
    for (k, v) in [("channels", "2"), ("chips_per_channel", "1"), ("blocks_per_plane", "16"), ("pages_per_block", "16"), ("over_provisioning", "40"), ("gc_start_free_blocks", "3"), ("gc_stop_free_blocks", "3")] {
        t.set(k, v).unwrap();
    }
    let mut d = Device::memory(t, DeviceOptions::default()).unwrap();
    d.attach(Box::new(nearflash_issd::agent::IssdExtension::new(serde_json::json!({})).unwrap())).unwrap();
    d.attach(Box::new(nearflash_recssd::firmware::RecssdFirmware::new(serde_json::json!({})))).unwrap();
    d.create_queue_pair(1, 32).unwrap();
    d
}

thread_local! {
    static DEV: RefCell<Device> = RefCell::new(device());
}

fuzz_target!(|data: &[u8]| {
    if data.len() < SQE_BYTES + 1 {
        return;
    }
    let mut sqe = Sqe::from_bytes(data[1..1 + SQE_BYTES].try_into().unwrap());
    // Steer most inputs to the extensions: vendor opcodes or the NDP flag on Reads/Writes.
    match data[0] & 3 {
        0 => sqe.opcode |= 0x80,
        1 => {
            sqe.opcode = 0x01 + (data[0] >> 2 & 1);
            sqe.cdw12 = (sqe.cdw12 & 0xFFFF) | 1 << 16;
        }
        _ => {}
    }
    let payload = &data[1 + SQE_BYTES..];
    DEV.with(|d| {
        let mut dev = d.borrow_mut();
        let mut out = vec![0u8; 64 * 1024];
        let buf = if data[0] & 4 == 0 { DataBuf::ToDevice(payload) } else { DataBuf::FromDevice(&mut out) };
        if let Ok(done) = dev.execute(1, sqe, buf) {
            assert!(done.completed_at.as_ns() >= done.latency_ns);
        }
        dev.check_consistency().unwrap();
    });
});
