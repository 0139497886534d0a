//! Programs that read flash (issue 25), following pointers they find there: a walker reads 8 bytes at a block and
//! byte offset it is given, takes them as the next block, and goes on until a helper returns an error or the run
//! is stopped. The blocks hold the fuzzer's bytes (pointers into, out of and around the LBA range named at
//! Execute, a block's ECC beyond repair); the walker reads with `nf_read`, or with `nf_read_start` +
//! `nf_read_wait`. Every run completes with one of the statuses docs/programs.md specifies, no read leaves its
//! range, the read budget holds, and the device reads, writes and stays consistent afterwards.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nearflash_core::config::load_preset;
use nearflash_core::nvme::{opcode, DataBuf, Sqe, Status};
use nearflash_core::{Device, DeviceOptions};
use nearflash_programs::program::elf::minimal_object;
use nearflash_programs::status;
use nearflash_programs::{host, ProgramsFirmware};
use std::cell::RefCell;

const READ_BUDGET: u64 = 64;
/// Blocks the fuzzer's bytes fill (from LBA 0).
const BLOCKS: usize = 4;

fn insn(opc: u8, dst: u8, src: u8, off: i16, imm: i32) -> [u8; 8] {
    let mut b = [opc, dst | (src << 4), 0, 0, 0, 0, 0, 0];
    b[2..4].copy_from_slice(&off.to_le_bytes());
    b[4..8].copy_from_slice(&imm.to_le_bytes());
    b
}

/// r7 = cparam1 (block), r8 = cparam2 (byte offset); loop { r0 = read(r7, r8, r10 - 8, 8); if r0 < 0 exit;
/// r7 = *(u64 *)(r10 - 8) }. `ahead`: the read is nf_read_start then nf_read_wait.
fn walker(ahead: bool) -> Vec<u8> {
    let mut t = vec![
        insn(0xbf, 6, 1, 0, 0),
        insn(0x79, 7, 6, 8, 0),
        insn(0x79, 8, 6, 16, 0),
        insn(0xbf, 1, 7, 0, 0),
        insn(0xbf, 2, 8, 0, 0),
        insn(0xbf, 3, 10, 0, 0),
        insn(0x07, 3, 0, 0, -8),
        insn(0xb7, 4, 0, 0, 8),
    ];
    if ahead {
        t.extend([insn(0x85, 0, 0, 0, 2), insn(0xbf, 1, 0, 0, 0), insn(0x85, 0, 0, 0, 3)]);
    } else {
        t.push(insn(0x85, 0, 0, 0, 1));
    }
    let back = -(t.len() as i16); // the ja is at t.len() + 2 and goes back to instruction 3
    t.extend([insn(0xc5, 0, 0, 2, 0), insn(0x79, 7, 10, -8, 0), insn(0x05, 0, 0, back, 0), insn(0x95, 0, 0, 0, 0)]);
    minimal_object(&t.concat(), &[], &[])
}

fn device() -> Device {
    let mut t = load_preset("cosmos-plus").unwrap();
    for (k, v) in [("channels", "2"), ("chips_per_channel", "1"), ("blocks_per_plane", "16"), ("pages_per_block", "16"), ("over_provisioning", "40"), ("gc_start_free_blocks", "3"), ("gc_stop_free_blocks", "3")] {
        t.set(k, v).unwrap();
    }
    let mut d = Device::memory(t, DeviceOptions { materialise: true, ..Default::default() }).unwrap();
    let params = serde_json::json!({"slm_bytes": 1, "instruction_budget": 20000, "read_budget": READ_BUDGET});
    d.attach(Box::new(ProgramsFirmware::new(params))).unwrap();
    d.create_queue_pair(1, 32).unwrap();
    for (pind, ahead) in [(1, false), (2, true)] {
        assert!(host::load(&mut d, 1, pind, &walker(ahead)).unwrap().ok());
        assert!(host::activate(&mut d, 1, pind, true).unwrap().ok());
    }
    d
}

thread_local! {
    static DEV: RefCell<Device> = RefCell::new(device());
}

fuzz_target!(|data: &[u8]| {
    // [mode][block u8][offset u16][extent: first u8, blocks u8][error block u8][block bytes...]
    if data.len() < 7 {
        return;
    }
    let (mode, start, offset) = (data[0], u64::from(data[1]), u64::from(u16::from_le_bytes([data[2], data[3]])));
    let extent = (u64::from(data[4] % 8), u64::from(data[5] % 8) + 1);
    DEV.with(|d| {
        let mut dev = d.borrow_mut();
        let lba = dev.lba_bytes() as usize;
        let mut blocks = vec![0u8; BLOCKS * lba];
        let n = blocks.len();
        for (i, b) in data[7..].iter().enumerate() {
            blocks[i % n] ^= *b;
        }
        assert!(dev.execute(1, Sqe::rw(opcode::WRITE, 0, 0, BLOCKS as u32), DataBuf::ToDevice(&blocks)).unwrap().status.is_success());
        if mode & 4 != 0 {
            assert!(dev.execute(1, Sqe { opcode: opcode::FLUSH, nsid: 1, ..Sqe::default() }, DataBuf::None).unwrap().status.is_success());
            dev.inject_errors(u64::from(data[6]) % BLOCKS as u64, 100_000).unwrap();
        }
        let pind = 1 + u16::from(mode & 1);
        let r = host::execute_reading(&mut dev, 1, pind, &host::Ranges::Inline(vec![]), &[extent], &[], (start, offset)).unwrap();
        let allowed = [Status::SUCCESS, Status::LBA_OUT_OF_RANGE, status::INSUFFICIENT_RESOURCES, status::INVALID_MEMORY_RANGE_SET];
        assert!(allowed.contains(&r.status), "{:?} {:?}", r.status, r.reason);
        let stats = dev.report().extensions["programs"]["stats"].clone();
        assert!(stats["last_flash_reads"].as_u64().unwrap() <= READ_BUDGET);
        // Still usable: a write and a read of the same block agree, and the FTL is consistent.
        let block = vec![mode; lba];
        assert!(dev.execute(1, Sqe::rw(opcode::WRITE, 0, 7, 1), DataBuf::ToDevice(&block)).unwrap().status.is_success());
        let mut back = vec![0u8; lba];
        assert!(dev.execute(1, Sqe::rw(opcode::READ, 0, 7, 1), DataBuf::FromDevice(&mut back)).unwrap().status.is_success());
        assert_eq!(back, block);
        dev.check_consistency().unwrap();
    });
});
