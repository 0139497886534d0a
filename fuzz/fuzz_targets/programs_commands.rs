//! Arbitrary Computational Programs / SLM commands (any submission entry steered to the extension's opcodes,
//! any data buffer) to a device with the `programs` extension and a loaded, active program: every command
//! completes with some status, nothing panics, and the FTL stays consistent.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nearflash_core::config::load_preset;
use nearflash_core::nvme::{DataBuf, Sqe, SQE_BYTES};
use nearflash_core::{Device, DeviceOptions};
use nearflash_programs::program::elf::minimal_object;
use nearflash_programs::wire::opcode;
use nearflash_programs::{host, ProgramsFirmware};
use std::cell::RefCell;

fn device() -> Device {
    let mut t = load_preset("cosmos-plus").unwrap();
    for (k, v) in [("channels", "2"), ("chips_per_channel", "1"), ("blocks_per_plane", "16"), ("pages_per_block", "16"), ("over_provisioning", "40"), ("gc_start_free_blocks", "3"), ("gc_stop_free_blocks", "3")] {
        t.set(k, v).unwrap();
    }
    let mut d = Device::memory(t, DeviceOptions::default()).unwrap();
    let params = serde_json::json!({"slm_bytes": 1, "instruction_budget": 20000});
    d.attach(Box::new(ProgramsFirmware::new(params))).unwrap();
    d.create_queue_pair(1, 32).unwrap();
    // Program 1: r0 = ctx->nranges; exit.
    let text = [[0x79, 0x10, 0, 0, 0, 0, 0, 0], [0x95, 0, 0, 0, 0, 0, 0, 0]].concat();
    assert!(host::load(&mut d, 1, 1, &minimal_object(&text, &[], &[])).unwrap().ok());
    assert!(host::activate(&mut d, 1, 1, true).unwrap().ok());
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
    if data[0] & 1 == 0 {
        sqe.opcode = opcode::ALL[(data[0] >> 1) as usize % opcode::ALL.len()];
        sqe.flags = 0;
    }
    let payload = &data[1 + SQE_BYTES..];
    DEV.with(|d| {
        let mut dev = d.borrow_mut();
        let mut out = vec![0u8; 8 * 1024];
        let buf = if data[0] & 0x80 == 0 { DataBuf::ToDevice(payload) } else { DataBuf::FromDevice(&mut out) };
        let _ = dev.execute(1, sqe, buf);
        dev.check_consistency().unwrap();
    });
});
