//! Programs compiled by clang from `examples/programs/*.c`, run through the standard commands on emulated
//! devices: answers checked against references computed here, modelled time proportional to counted
//! instructions, hostile programs refused or stopped with their status while the device stays usable.
//! Tests that need clang print why they skip where it is missing.

use nearflash_core::config::load_preset;
use nearflash_core::nvme::{opcode, DataBuf, Sqe, Status};
use nearflash_core::{Device, DeviceOptions};
use nearflash_programs::host::{self, Ranges};
use nearflash_programs::{status, wire, ProgramsFirmware};
use std::path::Path;
use std::process::Command;

fn examples() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/programs"))
}

/// The object clang makes of `examples/programs/<name>.c`, or None (with the reason printed) without clang.
fn compile(name: &str) -> Option<Vec<u8>> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join(format!("{name}.o"));
    let src = examples().join(format!("{name}.c"));
    match Command::new("clang").args(["-O2", "-target", "bpf", "-c"]).arg(&src).arg("-o").arg(&out).status() {
        Ok(s) if s.success() => Some(std::fs::read(out).unwrap()),
        Ok(s) => panic!("clang failed on {name}.c: {s}"),
        Err(e) => {
            eprintln!("SKIP: clang is not available ({e}); install Debian's clang to run the C examples");
            None
        }
    }
}

fn device(preset: &str, params: serde_json::Value) -> Device {
    let tree = load_preset(preset).unwrap();
    let mut dev = Device::memory(tree, DeviceOptions { seed: 5, materialise: true, ..Default::default() }).unwrap();
    dev.attach(Box::new(ProgramsFirmware::new(params))).unwrap();
    dev.create_queue_pair(1, 32).unwrap();
    dev
}

fn ok(d: host::Done) -> host::Done {
    assert!(d.ok(), "{:?}", d);
    d
}

fn text(bytes: usize, seed: u64) -> Vec<u8> {
    let words = [&b"flash "[..], b"needle ", b"page ", b"die ", b"needles ", b"block\n"];
    let mut s = seed;
    let mut out = Vec::with_capacity(bytes);
    while out.len() < bytes {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        out.extend_from_slice(words[(s >> 33) as usize % words.len()]);
    }
    out.truncate(bytes);
    out
}

fn count(hay: &[u8], pat: &[u8]) -> u64 {
    let (mut i, mut n) = (0, 0);
    while i + pat.len() <= hay.len() {
        if &hay[i..i + pat.len()] == pat {
            n += 1;
            i += pat.len();
        } else {
            i += 1;
        }
    }
    n
}

fn write_blocks(dev: &mut Device, slba: u64, data: &[u8]) {
    let nlb = (data.len() as u64 / dev.lba_bytes()) as u32;
    let cid = dev.next_cid(1);
    let d = dev.execute(1, Sqe::rw(opcode::WRITE, cid, slba, nlb), DataBuf::ToDevice(data)).unwrap();
    assert!(d.status.is_success());
}

fn read_blocks(dev: &mut Device, slba: u64, nlb: u32) -> Vec<u8> {
    let mut out = vec![0u8; (u64::from(nlb) * dev.lba_bytes()) as usize];
    let cid = dev.next_cid(1);
    let d = dev.execute(1, Sqe::rw(opcode::READ, cid, slba, nlb), DataBuf::FromDevice(&mut out)).unwrap();
    assert!(d.status.is_success());
    out
}

fn last_instructions(dev: &Device) -> u64 {
    dev.report().extensions["programs"]["stats"]["last_instructions"].as_u64().unwrap()
}

#[test]
fn grep_over_flash_data_matches_the_host_and_time_follows_instructions() {
    let Some(obj) = compile("grep") else { return };
    for preset in ["cosmos-plus", "samsung-970pro"] {
        let mut dev = device(preset, serde_json::json!({}));
        let lba = dev.lba_bytes() as usize;
        let data = text(64 * lba, 9);
        write_blocks(&mut dev, 0, &data);
        ok(host::load(&mut dev, 1, 1, &obj).unwrap());
        ok(host::activate(&mut dev, 1, 1, true).unwrap());
        ok(host::copy_to_slm(&mut dev, 1, 0, &[(0, 32), (32, 32)]).unwrap());
        let mut back = vec![0u8; data.len()];
        ok(host::read_slm(&mut dev, 1, 0, &mut back).unwrap());
        assert_eq!(back, data, "{preset}: Memory Copy brought the flash data into SLM");
        let mut run = |len: usize| {
            let d = ok(host::execute(&mut dev, 1, 1, &Ranges::Inline(vec![(0, len as u32)]), b"needle", (0, 0)).unwrap());
            (d, last_instructions(&dev))
        };
        let (half, n1) = run(data.len() / 2);
        let (full, n2) = run(data.len());
        assert_eq!(u64::from(half.dw0), count(&data[..data.len() / 2], b"needle"), "{preset}");
        assert_eq!(u64::from(full.dw0), count(&data, b"needle"), "{preset}");
        let insn_ratio = n2 as f64 / n1 as f64;
        let time_ratio = full.latency_ns as f64 / half.latency_ns as f64;
        assert!((1.9..2.1).contains(&insn_ratio), "{preset}: instructions {n1} -> {n2}");
        assert!((time_ratio - insn_ratio).abs() < 0.1, "{preset}: time x{time_ratio:.3} vs instructions x{insn_ratio:.3}");
    }
}

#[test]
fn sparse_lengths_sum_matches_the_reference() {
    let Some(obj) = compile("sls") else { return };
    let mut dev = device("cosmos-plus", serde_json::json!({}));
    let (rows, dim) = (500usize, 16usize);
    let table: Vec<i32> = (0..rows * dim).map(|i| ((i * 37) % 1001) as i32 - 500).collect();
    let idx: Vec<u32> = (0..120).map(|i| ((i * 97) % rows) as u32).collect();
    let lens: Vec<u32> = vec![0, 7, 50, 1, 62];
    let bytes = |v: &[u8]| v.to_vec();
    let t: Vec<u8> = table.iter().flat_map(|x| x.to_le_bytes()).collect();
    let ix: Vec<u8> = idx.iter().flat_map(|x| x.to_le_bytes()).collect();
    let ln: Vec<u8> = lens.iter().flat_map(|x| x.to_le_bytes()).collect();
    let (a, b, c) = (0u64, t.len() as u64, (t.len() + ix.len()) as u64);
    let d = c + ln.len() as u64;
    ok(host::write_slm(&mut dev, 1, a, &bytes(&t)).unwrap());
    ok(host::write_slm(&mut dev, 1, b, &ix).unwrap());
    ok(host::write_slm(&mut dev, 1, c, &ln).unwrap());
    ok(host::load(&mut dev, 1, 2, &obj).unwrap());
    ok(host::activate(&mut dev, 1, 2, true).unwrap());
    let out_len = (lens.len() * dim * 8) as u32;
    let set = ok(host::create_range_set(&mut dev, 1, &[(a, t.len() as u32), (b, ix.len() as u32), (c, ln.len() as u32), (d, out_len)]).unwrap()).dw0;
    let r = ok(host::execute(&mut dev, 1, 2, &Ranges::Set(set as u16), &[], (dim as u64, 0)).unwrap());
    assert_eq!(r.dw0 as usize, lens.len());
    let mut out = vec![0u8; out_len as usize];
    ok(host::read_slm(&mut dev, 1, d, &mut out).unwrap());
    let got: Vec<i64> = out.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect();
    let mut next = 0;
    for (bag, &len) in lens.iter().enumerate() {
        for k in 0..dim {
            let want: i64 = idx[next..next + len as usize].iter().map(|&r| i64::from(table[r as usize * dim + k])).sum();
            assert_eq!(got[bag * dim + k], want, "bag {bag} dim {k}");
        }
        next += len as usize;
    }
}

#[test]
fn out_of_range_access_is_stopped_and_the_device_stays_usable() {
    let (Some(bad), Some(grep)) = (compile("out_of_range"), compile("grep")) else { return };
    let mut dev = device("samsung-970pro", serde_json::json!({}));
    ok(host::load(&mut dev, 1, 1, &bad).unwrap());
    ok(host::load(&mut dev, 1, 2, &grep).unwrap());
    ok(host::activate(&mut dev, 1, 1, true).unwrap());
    ok(host::activate(&mut dev, 1, 2, true).unwrap());
    ok(host::write_slm(&mut dev, 1, 0, b"a needle and a needle").unwrap());
    let r = host::execute(&mut dev, 1, 1, &Ranges::Inline(vec![(0, 21)]), &[], (0, 0)).unwrap();
    assert_eq!((r.status, r.dw0), (status::INVALID_MEMORY_RANGE_SET, 1), "stopped at the first byte past its range");
    let g = ok(host::execute(&mut dev, 1, 2, &Ranges::Inline(vec![(0, 21)]), b"needle", (0, 0)).unwrap());
    assert_eq!(g.dw0, 2);
    let block = vec![7u8; dev.lba_bytes() as usize];
    write_blocks(&mut dev, 0, &block);
    assert_eq!(read_blocks(&mut dev, 0, 1), block);
}

#[test]
fn command_faults_complete_with_their_status_and_change_nothing() {
    let Some(grep) = compile("grep") else { return };
    let mut dev = device("cosmos-plus", serde_json::json!({"max_programs": 4, "max_range_sets": 1}));
    let q = 1;
    assert_eq!(host::load(&mut dev, q, 7, &grep).unwrap().status, status::INVALID_PROGRAM_INDEX);
    assert_eq!(host::load(&mut dev, q, 5, &grep).unwrap().status, status::PROGRAM_INDEX_NOT_DOWNLOADABLE);
    assert_eq!(host::load(&mut dev, q, 1, b"\x7fELF not really").unwrap().status, status::INVALID_PROGRAM_DATA);
    assert_eq!(host::activate(&mut dev, q, 1, true).unwrap().status, status::NO_PROGRAM);
    ok(host::load(&mut dev, q, 1, &grep).unwrap());
    let run = |dev: &mut Device| host::execute(dev, q, 1, &Ranges::Inline(vec![(0, 8)]), b"x", (0, 0)).unwrap().status;
    assert_eq!(run(&mut dev), status::PROGRAM_NOT_ACTIVATED);
    ok(host::activate(&mut dev, q, 1, true).unwrap());
    assert_eq!(host::unload(&mut dev, q, 1).unwrap().status, status::PROGRAM_IN_USE);
    assert_eq!(host::load(&mut dev, q, 1, &grep).unwrap().status, status::PROGRAM_IN_USE, "no replacing an active program");
    assert_eq!(run(&mut dev), Status::SUCCESS);
    let slm = 64 << 20;
    assert_eq!(host::create_range_set(&mut dev, q, &[(slm - 4, 8)]).unwrap().status, status::INVALID_MEMORY_RANGE_SET);
    assert_eq!(host::create_range_set(&mut dev, q, &[(0, 8), (4, 8)]).unwrap().status, status::OVERLAPPING_MEMORY_RANGES);
    ok(host::create_range_set(&mut dev, q, &[(0, 8)]).unwrap());
    assert_eq!(host::create_range_set(&mut dev, q, &[(16, 8)]).unwrap().status, status::MAX_MEMORY_RANGE_SETS_EXCEEDED);
    assert_eq!(host::delete_range_set(&mut dev, q, 9).unwrap().status, status::INVALID_MEMORY_RANGE_SET_ID);
    let r = host::execute(&mut dev, q, 1, &Ranges::Set(7), b"x", (0, 0)).unwrap();
    assert_eq!(r.status, status::INVALID_MEMORY_RANGE_SET_ID);
    let lbas = dev.namespace().lbas;
    assert_eq!(host::copy_to_slm(&mut dev, q, 0, &[(lbas - 1, 2)]).unwrap().status, Status::LBA_OUT_OF_RANGE);
    assert_eq!(host::copy_to_slm(&mut dev, q, slm - 100, &[(0, 1)]).unwrap().status, Status::LBA_OUT_OF_RANGE);
    let mut big = vec![0u8; 16];
    assert_eq!(host::read_slm(&mut dev, q, slm - 8, &mut big).unwrap().status, Status::LBA_OUT_OF_RANGE);
    let errors = &dev.report().extensions["programs"]["errors"];
    assert!(errors["Invalid Program Data"].as_u64().unwrap() >= 1, "{errors}");
}

#[test]
fn a_runaway_loop_is_stopped_by_the_instruction_budget() {
    // while (1) on the stack: r1 = 0; *(r10-8) = r1; loop: r1 = *(r10-8); r1 += 1; *(r10-8) = r1; goto loop
    let prog: Vec<u8> = [
        [0xb7, 0x01, 0, 0, 0, 0, 0, 0],
        [0x7b, 0x1a, 0xf8, 0xff, 0, 0, 0, 0],
        [0x79, 0xa1, 0xf8, 0xff, 0, 0, 0, 0],
        [0x07, 0x01, 0, 0, 1, 0, 0, 0],
        [0x7b, 0x1a, 0xf8, 0xff, 0, 0, 0, 0],
        [0x05, 0x00, 0xfc, 0xff, 0, 0, 0, 0],
        [0x95, 0, 0, 0, 0, 0, 0, 0],
    ]
    .concat();
    let image = nearflash_programs::program::ProgramImage {
        text: prog,
        entry_pc: 0,
        entry_name: "spin".into(),
        rodata: vec![],
        data: vec![],
    };
    let p = nearflash_programs::program::Program::new(image, 100).unwrap();
    let out = p.run(&mut [], &[], (0, 0), 10_000);
    assert_eq!(out.result, Err(nearflash_programs::program::Fault::Budget));
    assert_eq!(out.instructions, 10_000);
}

#[test]
fn a_refused_replacement_keeps_the_loaded_program() {
    let Some(grep) = compile("grep") else { return };
    let mut dev = device("cosmos-plus", serde_json::json!({}));
    ok(host::load(&mut dev, 1, 1, &grep).unwrap());
    assert_eq!(host::load(&mut dev, 1, 1, b"not an object").unwrap().status, status::INVALID_PROGRAM_DATA);
    ok(host::activate(&mut dev, 1, 1, true).unwrap());
    ok(host::write_slm(&mut dev, 1, 0, b"xx needle").unwrap());
    let r = ok(host::execute(&mut dev, 1, 1, &Ranges::Inline(vec![(0, 9)]), b"needle", (0, 0)).unwrap());
    assert_eq!(r.dw0, 1, "the first program still runs");
}

#[test]
fn the_device_defined_sls_runs_on_its_unit_and_cannot_be_replaced() {
    let mut dev = device("cosmos-plus", serde_json::json!({"max_programs": 4}));
    let pind = 5; // the first index after the downloadable slots
    assert_eq!(host::load(&mut dev, 1, pind, b"anything").unwrap().status, status::PROGRAM_INDEX_NOT_DOWNLOADABLE);
    assert_eq!(host::unload(&mut dev, 1, pind).unwrap().status, status::PROGRAM_INDEX_NOT_DOWNLOADABLE);
    assert_eq!(host::activate(&mut dev, 1, 6, true).unwrap().status, status::INVALID_PROGRAM_INDEX);
    let (rows, dim) = (64usize, 8usize);
    let table: Vec<f32> = (0..rows * dim).map(|i| (i % 17) as f32 * 0.5 - 3.0).collect();
    let idx: Vec<u32> = vec![1, 63, 63, 0, 5, 9];
    let lens: Vec<u32> = vec![3, 0, 3];
    let le = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let t = le(&table);
    let ix: Vec<u8> = idx.iter().flat_map(|x| x.to_le_bytes()).collect();
    let ln: Vec<u8> = lens.iter().flat_map(|x| x.to_le_bytes()).collect();
    let (b, c, d) = (t.len() as u64, (t.len() + ix.len()) as u64, (t.len() + ix.len() + ln.len()) as u64);
    for (at, bytes) in [(0, &t), (b, &ix), (c, &ln)] {
        ok(host::write_slm(&mut dev, 1, at, bytes).unwrap());
    }
    let out_len = (lens.len() * dim * 4) as u32;
    let ranges = Ranges::Inline(vec![(0, t.len() as u32), (b, ix.len() as u32), (c, ln.len() as u32), (d, out_len)]);
    assert_eq!(host::execute(&mut dev, 1, pind, &ranges, &[], (dim as u64, 0)).unwrap().status, status::PROGRAM_NOT_ACTIVATED);
    ok(host::activate(&mut dev, 1, pind, true).unwrap());
    let r = ok(host::execute(&mut dev, 1, pind, &ranges, &[], (dim as u64, 0)).unwrap());
    assert_eq!(r.dw0, 3);
    let mut out = vec![0u8; out_len as usize];
    ok(host::read_slm(&mut dev, 1, d, &mut out).unwrap());
    let got: Vec<f32> = out.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    let bag = |ids: &[u32]| (0..dim).map(|k| ids.iter().map(|&i| table[i as usize * dim + k]).sum::<f32>()).collect::<Vec<_>>();
    assert_eq!(got, [bag(&[1, 63, 63]), vec![0.0; dim], bag(&[0, 5, 9])].concat());
    let bad = host::execute(&mut dev, 1, pind, &ranges, &[], (0, 0)).unwrap();
    assert_eq!((bad.status, bad.dw0), (status::INVALID_PROGRAM_DATA, 5), "dim 0 is refused");
    // Row widths whose byte count wraps (4 x 2^62 = 0, 4 x 2^63 = 0) or overflows, or past the output range: refused
    // by name, never a panic (a remainder by a wrapped zero).
    for dim in [1u64 << 62, 1 << 63, u64::MAX, (1 << 62) + 8, out_len as u64 / 4 + 1] {
        let bad = host::execute(&mut dev, 1, pind, &ranges, &[], (dim, 0)).unwrap();
        assert_eq!(bad.status, status::INVALID_PROGRAM_DATA, "dim {dim}");
        assert!(bad.reason.as_deref().unwrap_or("").contains(&format!("dim (cparam1) = {dim}")), "{:?}", bad.reason);
    }
    let mut again = vec![0u8; out_len as usize];
    ok(host::read_slm(&mut dev, 1, d, &mut again).unwrap());
    assert_eq!(again, out, "a refused run leaves the output range as it was");
}

/// Every refusal puts its reason (the field and its allowed range) into the error log, where the host library
/// reads it into `Done::reason`; none changes SLM, the range sets or the program slots. (No program needed.)
#[test]
fn every_refusal_says_why_in_the_error_log_and_changes_nothing() {
    let mut dev = device("cosmos-plus", serde_json::json!({"max_programs": 4, "max_range_sets": 1}));
    let q = 1;
    let slm = 64u64 << 20;
    ok(host::write_slm(&mut dev, q, 0, b"kept").unwrap());
    ok(host::create_range_set(&mut dev, q, &[(0, 8)]).unwrap());
    let lbas = dev.namespace().lbas;
    let mut big = vec![0u8; 16];
    let mut reserved = wire::Command::Identify.encode(dev.next_cid(q));
    reserved.cdw13 = 5;
    let raw = |dev: &mut Device, sqe: Sqe| {
        let d = dev.execute(q, sqe, DataBuf::None).unwrap();
        host::Done { status: d.status, dw0: d.dw0, latency_ns: 0, reason: dev.error_reason(q, d.cid) }
    };
    let cases: Vec<(host::Done, Status, &str)> = vec![
        (host::load(&mut dev, q, 7, b"x").unwrap(), status::INVALID_PROGRAM_INDEX, "PIND 7: expected 1..=4 (downloadable) or 5..=5"),
        (host::load(&mut dev, q, 5, b"x").unwrap(), status::PROGRAM_INDEX_NOT_DOWNLOADABLE, "PIND 5: a device-defined program"),
        (host::load(&mut dev, q, 1, b"\x7fELF not really").unwrap(), status::INVALID_PROGRAM_DATA, "does not verify"),
        (host::activate(&mut dev, q, 1, true).unwrap(), status::NO_PROGRAM, "PIND 1: no program is loaded there"),
        (host::execute(&mut dev, q, 2, &Ranges::Set(1), b"", (0, 0)).unwrap(), status::NO_PROGRAM, "PIND 2: no program"),
        (host::create_range_set(&mut dev, q, &[(slm - 4, 8)]).unwrap(), status::INVALID_MEMORY_RANGE_SET, "inside the 67108864-byte SLM"),
        (host::create_range_set(&mut dev, q, &[(0, 8), (4, 8)]).unwrap(), status::OVERLAPPING_MEMORY_RANGES, "0..8 and 4..12 overlap"),
        (host::create_range_set(&mut dev, q, &[(16, 8)]).unwrap(), status::MAX_MEMORY_RANGE_SETS_EXCEEDED, "all 1 memory range sets are in use"),
        (host::delete_range_set(&mut dev, q, 9).unwrap(), status::INVALID_MEMORY_RANGE_SET_ID, "RSID 9 names no memory range set (existing: 1)"),
        (host::copy_to_slm(&mut dev, q, 0, &[(lbas - 1, 2)]).unwrap(), Status::LBA_OUT_OF_RANGE, "beyond the namespace's"),
        (host::copy_to_slm(&mut dev, q, slm - 100, &[(0, 1)]).unwrap(), Status::LBA_OUT_OF_RANGE, "SDADDR (CDW10-11) 67108764 + 4096 bytes: beyond the 67108864-byte SLM"),
        (host::read_slm(&mut dev, q, slm - 8, &mut big).unwrap(), Status::LBA_OUT_OF_RANGE, "SB (CDW10-11) 67108856 + 16 bytes"),
        (host::write_slm(&mut dev, q, 0, &[]).unwrap(), Status::INVALID_FIELD, "length (CDW12) = 0: expected 1..="),
        (raw(&mut dev, reserved), Status::INVALID_FIELD, "CDW13 (bytes 52..56) = 0x5: reserved for this command, expected 0"),
    ];
    for (i, (d, want, words)) in cases.iter().enumerate() {
        assert_eq!(d.status, *want, "case {i}: {d:?}");
        let reason = d.reason.as_deref().unwrap_or_default();
        assert!(reason.contains(words), "case {i}: {reason:?} does not say {words:?}");
    }
    // the parameter location of a field in the command: CDW10 for Program Activation's PIND
    let d = host::activate(&mut dev, q, 9, true).unwrap();
    let mut page = vec![0u8; 64];
    let get = Sqe { opcode: opcode::ADMIN_GET_LOG_PAGE, cdw10: 0x01 | (15 << 16), ..Sqe::default() };
    assert!(dev.execute(0, get, DataBuf::FromDevice(&mut page)).unwrap().status.is_success());
    assert_eq!((d.status, u16::from_le_bytes([page[14], page[15]])), (status::INVALID_PROGRAM_INDEX, 40), "newest entry's parameter location");
    // nothing changed: SLM keeps its bytes, one set, no program
    let mut back = vec![0u8; 4];
    ok(host::read_slm(&mut dev, q, 0, &mut back).unwrap());
    assert_eq!(&back, b"kept");
    let report = &dev.report().extensions["programs"];
    let loaded = report["programs"].as_array().unwrap().iter().filter(|p| p["device_defined"].is_null()).count();
    assert_eq!((report["range_sets"].as_u64(), loaded), (Some(1), 0), "{report}");
}

#[test]
fn memory_copy_reads_flash_in_the_programs_class_at_the_level_asked_for() {
    for level in ["normal", "background", "urgent"] {
        let mut dev = device("cosmos-plus", serde_json::json!({"exec_class_level": level}));
        let lba = dev.lba_bytes() as usize;
        write_blocks(&mut dev, 0, &text(32 * lba, 3));
        // Flushed, so that the copy reads flash rather than the write buffer.
        let cid = dev.next_cid(1);
        assert!(dev.execute(1, Sqe { opcode: opcode::FLUSH, nsid: 1, cid, ..Sqe::default() }, DataBuf::None).unwrap().status.is_success());
        dev.reset_stats();
        ok(host::copy_to_slm(&mut dev, 1, 0, &[(0, 32)]).unwrap());
        let classes = dev.report().sched.stats.classes;
        let exec = classes.get("programs.exec").map_or(0, |c| c.transactions);
        assert!(exec > 0, "{level}: Memory Copy's reads are programs.exec transactions: {classes:?}");
        assert_eq!(classes.get("medium").map_or(0, |c| c.transactions), 0, "{level}: none in its queue's class");
    }
    // A level that is not one of the three is refused at attach, naming the parameter.
    let mut dev = Device::memory(load_preset("cosmos-plus").unwrap(), DeviceOptions::default()).unwrap();
    let err = dev.attach(Box::new(ProgramsFirmware::new(serde_json::json!({"exec_class_level": "idle"})))).unwrap_err();
    assert!(err.to_string().contains("exec_class_level"), "{err}");
}
