//! Arbitrary Computational Programs / SLM commands (any submission entry steered to the extension's opcodes,
//! any data buffer) to a device with the `programs` extension where every program slot holds something: a program
//! in each downloadable slot (1..=MAX_PROGRAMS, all but the last active) and the device-defined `sls_f32` active at
//! the index after them, with a valid SparseLengthsSum layout in SLM (fuzz/seeds.py runs it). Every command
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

/// Downloadable slots; the device-defined programs follow (`sls_f32` at MAX_PROGRAMS + 1).
const MAX_PROGRAMS: u16 = 4;
/// Where the SparseLengthsSum layout lies in SLM (fuzz/seeds.py: `sls_f32`): a 4 x 4 f32 table, one index (3),
/// one length (1) and a 4-float output.
const SLS_AT: u64 = 4096;

fn device() -> Device {
    let mut t = load_preset("cosmos-plus").unwrap();
    for (k, v) in [("channels", "2"), ("chips_per_channel", "1"), ("blocks_per_plane", "16"), ("pages_per_block", "16"), ("over_provisioning", "40"), ("gc_start_free_blocks", "3"), ("gc_stop_free_blocks", "3")] {
        t.set(k, v).unwrap();
    }
    let mut d = Device::memory(t, DeviceOptions::default()).unwrap();
    let params = serde_json::json!({"slm_bytes": 1, "instruction_budget": 20000, "max_programs": MAX_PROGRAMS});
    d.attach(Box::new(ProgramsFirmware::new(params))).unwrap();
    d.create_queue_pair(1, 32).unwrap();
    // Programs: r0 = ctx->nranges (slot 1), r0 = *(u8 *)ctx->range[0] (slot 2), r0 = cparam1 (slot 3), and the
    // first again, loaded but not active (slot 4).
    let texts = [
        [[0x79, 0x10, 0, 0, 0, 0, 0, 0], [0x95, 0, 0, 0, 0, 0, 0, 0]].concat(),
        [[0x79, 0x11, 40, 0, 0, 0, 0, 0], [0x71, 0x10, 0, 0, 0, 0, 0, 0], [0x95, 0, 0, 0, 0, 0, 0, 0]].concat(),
        [[0x79, 0x10, 8, 0, 0, 0, 0, 0], [0x95, 0, 0, 0, 0, 0, 0, 0]].concat(),
        [[0x79, 0x10, 0, 0, 0, 0, 0, 0], [0x95, 0, 0, 0, 0, 0, 0, 0]].concat(),
    ];
    for (pind, text) in (1..).zip(&texts) {
        assert!(host::load(&mut d, 1, pind, &minimal_object(text, &[], &[])).unwrap().ok());
        if pind < MAX_PROGRAMS {
            assert!(host::activate(&mut d, 1, pind, true).unwrap().ok());
        }
    }
    assert!(host::activate(&mut d, 1, MAX_PROGRAMS + 1, true).unwrap().ok(), "sls_f32");
    let table: Vec<u8> = (0..16u32).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let layout = [table, 3u32.to_le_bytes().to_vec(), 1u32.to_le_bytes().to_vec()].concat();
    assert!(host::write_slm(&mut d, 1, SLS_AT, &layout).unwrap().ok());
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
