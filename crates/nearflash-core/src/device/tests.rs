//! Model tests: expectations are derived from the preset parameters, not written as literals.

use super::*;
use crate::bench::{run, Pattern, Workload};
use crate::config::load_preset;
use crate::nvme::{opcode, pages};

fn device(overrides: &[(&str, &str)], materialise: bool) -> Device {
    let mut t = load_preset("cosmos-plus").unwrap();
    for (k, v) in overrides {
        t.set(k, v).unwrap();
    }
    Device::memory(t, DeviceOptions { materialise, ..Default::default() }).unwrap()
}

fn small(extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let base = [
        ("channels", "4"),
        ("chips_per_channel", "2"),
        ("blocks_per_plane", "64"),
        ("pages_per_block", "32"),
        ("over_provisioning", "20"),
    ];
    base.iter().chain(extra).map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

fn dev_with(o: &[(String, String)], materialise: bool) -> Device {
    let o: Vec<(&str, &str)> = o.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    device(&o, materialise)
}

fn bench(dev: &mut Device, pattern: Pattern, bs: u64, qd: u32, ios: u64) -> Report {
    let w = Workload { pattern, block_size: bs, queue_depth: qd, jobs: 1, ios, span: None, seed: 7, data: false };
    run(dev, &w, None).unwrap().report
}

fn flush(dev: &mut Device) -> Done {
    dev.execute(1, Sqe { opcode: opcode::FLUSH, nsid: 1, ..Sqe::default() }, DataBuf::None).unwrap()
}

/// Writes the first `pages` pages' worth of LBAs on queue 1 (created here), flushes them and moves the clock past
/// every program, so the reads a test sends next find idle dies. Returns the sectors per page.
fn written_and_idle(dev: &mut Device, pages: u64) -> u64 {
    dev.create_queue_pair(1, 4).unwrap();
    let spp = dev.config().nand.page_size.0 / dev.lba_bytes();
    let fill = Sqe::rw(opcode::WRITE, 0, 0, (pages * spp) as u32);
    assert!(dev.execute(1, fill, DataBuf::None).unwrap().status.is_success());
    assert!(flush(dev).status.is_success());
    let h = dev.horizon();
    dev.advance_to(h);
    spp
}

#[test]
fn qd1_random_read_latency_is_the_sum_of_its_parts() {
    let mut dev = dev_with(&small(&[]), false);
    dev.precondition(1.0, FillPattern::Sequential, 0.0, 1).unwrap();
    dev.create_queue_pair(1, 4).unwrap();
    let c = &dev.core;
    let t = &c.nand.timing;
    let fw = c.ctrl.instructions_ns(c.ctrl.fw_read + c.ctrl.map_instructions);
    let issue = c.ctrl.instructions_ns(c.ctrl.fw_page);
    let nand = t.t_cmd + t.t_read(0) + t.xfer(4096) + t.t_decode;
    let dram = c.ctrl.dram_ns(2 * 4096);
    let h = &c.host;
    let link = 2 * h.link_latency + h.link_ns(64) + h.link_ns(4096) + h.link_ns(16) + h.link_latency;
    let expect = h.submit_ns() + link + fw + issue + nand + dram + h.complete_ns();
    assert_eq!(dev.config().nand.t_read_msb, None, "LSB and MSB pages read alike in this preset");
    let lbas = dev.namespace().lbas;
    for i in 0..50u64 {
        let lba = (i * 7919 * 13) % lbas;
        let d = dev.execute(1, Sqe::rw(opcode::READ, 0, lba, 1), DataBuf::None).unwrap();
        assert!(d.status.is_success());
        assert_eq!(d.latency_ns, expect, "LBA {lba}");
        dev.advance_to(dev.now() + 1_000_000); // idle gap: nothing queued anywhere
    }
}

/// Sequential 128 KiB reads at depth: bandwidth = the tightest of the channel buses, the dies, the DRAM port
/// (data crosses it twice), the host link and the firmware.
fn seq_read_limit(dev: &Device, bs: u64) -> f64 {
    let cfg = dev.config();
    let c = &dev.core;
    let t = &c.nand.timing;
    let geo = &c.nand.geo;
    let page = f64::from(geo.page_size);
    let channel = f64::from(geo.channels) * t.channel_bw;
    // A command's pages form multi-plane reads only if it spans a whole stripe (every plane once).
    let stripe = u64::from(geo.planes()) * u64::from(geo.page_size);
    let k = if t.multi_plane && bs >= stripe { f64::from(geo.planes_per_die) } else { 1.0 };
    let x = t.xfer((k * page) as u64) as f64;
    let die_period = if t.cache_read {
        (t.t_read(0) + t.t_cache_xfer) as f64
    } else {
        (t.t_cmd as f64) * k + t.t_read(0) as f64 + x
    };
    let dies = f64::from(geo.dies()) * k * page / (die_period * 1e-9);
    let dram = cfg.controller.dram_bandwidth.0 / 2.0;
    let link = c.host.link_bandwidth();
    let pages_per_io = bs as f64 / page;
    let fw_per_io = c.ctrl.instructions_ns(c.ctrl.fw_read + c.ctrl.map_instructions * (bs / 4096) as f64) as f64
        + c.ctrl.instructions_ns(c.ctrl.fw_page * pages_per_io) as f64;
    let fw = f64::from(c.res.group_len(c.ctrl.cores)) * bs as f64 / (fw_per_io * 1e-9);
    channel.min(dies).min(dram).min(link).min(fw)
}

#[test]
fn sequential_read_bandwidth_is_the_tightest_limit() {
    let cases: Vec<Vec<(String, String)>> = vec![
        small(&[]),                                                              // channel / DRAM bound
        small(&[("pcie_lanes", "1")]),                                           // link bound
        small(&[("t_read", "600us"), ("cache_read", "false"), ("multi_plane", "false")]), // die bound
        small(&[("controller.dram_bandwidth", "1GB/s")]),                                   // DRAM bound
    ];
    for o in cases {
        let mut dev = dev_with(&o, false);
        dev.precondition(1.0, FillPattern::Sequential, 0.0, 1).unwrap();
        let r = bench(&mut dev, Pattern::Read, 131072, 64, 3000);
        let got = r.ops["read"].bandwidth_mb_s * 1e6;

        let want = seq_read_limit(&dev, 131072);
        assert!((got / want - 1.0).abs() < 0.02, "{o:?}: {:.1} MB/s, limit {:.1} MB/s", got / 1e6, want / 1e6);
    }
}

#[test]
fn iops_scale_with_queue_depth_until_dies_saturate() {
    // Four dies and a slow array: the dies are the bottleneck (one plane per read: no multi-plane gathering).
    let o = small(&[("channels", "4"), ("chips_per_channel", "1"), ("t_read", "200us"), ("cache_read", "false"), ("multi_plane", "false")]);
    let mut dev = dev_with(&o, false);
    dev.precondition(1.0, FillPattern::Sequential, 0.0, 1).unwrap();
    let t = dev.core.nand.timing.clone();
    let die_limit = f64::from(dev.core.nand.geo.dies()) * 1e9 / (t.t_cmd + t.t_read(0) + t.xfer(4096)) as f64;
    let mut last = 0.0;
    let mut iops = Vec::new();
    for qd in [1u32, 2, 4, 16, 64, 128] {
        let r = bench(&mut dev, Pattern::RandRead, 4096, qd, 4000);
        let v = r.ops["read"].iops;
        assert!(v >= last * 0.98, "IOPS fell from {last} to {v} at QD {qd}");
        last = v;
        iops.push(v);
    }
    assert!(iops[1] / iops[0] > 1.5, "QD2 should nearly double QD1: {iops:?}");
    assert!(iops[0] < die_limit * 0.4, "QD1 is latency bound");
    assert!((iops[5] / die_limit - 1.0).abs() < 0.05, "saturation {} vs die limit {die_limit}", iops[5]);
}

#[test]
fn multi_plane_and_cache_read_give_their_gains() {
    let bw = |mp: &str, cr: &str| {
        let o = small(&[("channels", "1"), ("chips_per_channel", "1"), ("multi_plane", mp), ("cache_read", cr), ("channel_rate", "800MT/s")]);
        let mut dev = dev_with(&o, false);
        dev.precondition(1.0, FillPattern::Sequential, 0.0, 1).unwrap();
        let r = bench(&mut dev, Pattern::Read, 32768, 32, 600);
        (r.ops["read"].bandwidth_mb_s, dev.core.nand.timing.clone())
    };
    let (base, t) = bw("false", "false");
    let (mp, _) = bw("true", "false");
    let (cr, _) = bw("false", "true");
    let x = t.xfer(16384) as f64;
    let tr = t.t_read(0) as f64;
    let cmd = t.t_cmd as f64;
    // One die: per page cmd + tR + x; two planes share tR; cache read overlaps tR with the transfer.
    let want_mp = (cmd + tr + x) / ((2.0 * cmd + tr + 2.0 * x) / 2.0);
    let want_cr = (cmd + tr + x) / (tr + t.t_cache_xfer as f64).max(t.t_cache_xfer as f64 + x);
    assert!((mp / base / want_mp - 1.0).abs() < 0.03, "multi-plane gain {} expected {want_mp}", mp / base);
    assert!((cr / base / want_cr - 1.0).abs() < 0.03, "cache-read gain {} expected {want_cr}", cr / base);
}

#[test]
fn random_writes_at_full_fill_reach_steady_state_with_waf_above_one() {
    let o = small(&[("write_buffer", "256KiB")]);
    let mut dev = dev_with(&o, false);
    dev.precondition(1.0, FillPattern::Random, 1.0, 3).unwrap();
    let lbas = dev.namespace().lbas;
    let mut windows = Vec::new();
    for _ in 0..4 {
        let r = bench(&mut dev, Pattern::RandWrite, 4096, 32, lbas / 2);
        assert!(r.ftl.waf > 1.0, "WAF {}", r.ftl.waf);
        assert!(r.ftl.stats.gc_runs > 0);
        windows.push(r.ops["write"].iops);
    }
    dev.core.ftl.check_consistency().unwrap();
    let (a, b) = (windows[2], windows[3]);
    assert!((a / b - 1.0).abs() < 0.1, "steady state: {windows:?}");
}

/// With blocking GC a host write that finds its plane short of free blocks queues whole victims on the die at
/// once; with GC's transactions served first (`gc_priority = urgent`, MQSim's non-preemptive GC) the host programs
/// behind them, and the writes waiting for the buffer room those programs release, wait for the episode.
/// Incremental GC interleaves the same moves with host programs, so the tail latency falls and the dies stay busier
/// for the same flash work. (With `gc_priority = equal` the scheduler interleaves even blocking GC's moves.)
#[test]
fn incremental_gc_bounds_write_latency_in_steady_state() {
    let run_with = |pacing: &str| {
        let o = small(&[("write_buffer", "1MiB"), ("gc_pacing", pacing), ("gc_priority", "urgent")]);
        let mut dev = dev_with(&o, false);
        dev.precondition(0.9, FillPattern::Random, 1.0, 3).unwrap();
        let lbas = dev.namespace().lbas;
        bench(&mut dev, Pattern::RandWrite, 4096, 32, lbas / 4); // into steady state
        let r = bench(&mut dev, Pattern::RandWrite, 4096, 32, lbas / 2);
        dev.core.ftl.check_consistency().unwrap();
        let die_busy = r.utilisation.iter().find(|u| u.name == "die").expect("die utilisation").mean;
        (r.ops["write"].iops, r.ops["write"].latency.max_us, r.ftl.waf, die_busy)
    };
    let (iops_i, max_i, waf_i, die_i) = run_with("incremental");
    let (iops_b, max_b, waf_b, die_b) = run_with("blocking");
    eprintln!("incremental {iops_i} IOPS max {max_i} us WAF {waf_i} die {die_i}; blocking {iops_b} IOPS max {max_b} us WAF {waf_b} die {die_b}");
    assert!(waf_i > 1.0 && waf_b > 1.0);
    assert!(max_i * 3.0 < max_b, "max latency: incremental {max_i} us, blocking {max_b} us");
    assert!(iops_i > iops_b, "IOPS: incremental {iops_i}, blocking {iops_b}");
    assert!(die_i > die_b, "die utilisation: incremental {die_i}, blocking {die_b}");
}

#[test]
fn data_round_trips_and_errors_are_never_returned_as_data() {
    let mut dev = device(&[], true);
    dev.create_queue_pair(1, 16).unwrap();
    let lb = dev.lba_bytes() as usize;
    let data: Vec<u8> = (0..lb * 8).map(|i| (i % 253) as u8).collect();
    let w = dev.execute(1, Sqe::rw(opcode::WRITE, 0, 100, 8), DataBuf::ToDevice(&data)).unwrap();
    assert!(w.status.is_success());
    let mut out = vec![0u8; lb * 8];
    let r = dev.execute(1, Sqe::rw(opcode::READ, 0, 100, 8), DataBuf::FromDevice(&mut out)).unwrap();
    assert!(r.status.is_success());
    assert_eq!(out, data, "read from the write buffer");
    flush(&mut dev);
    out.fill(0);
    let r_flash = dev.execute(1, Sqe::rw(opcode::READ, 0, 100, 8), DataBuf::FromDevice(&mut out)).unwrap();
    assert_eq!(out, data, "read from flash");
    assert!(r_flash.latency_ns > r.latency_ns, "flash reads take longer than buffer hits: {} vs {}", r_flash.latency_ns, r.latency_ns);
    // Correctable errors cost retries but return the data.
    dev.inject_errors(101, 100).unwrap();
    out.fill(0);
    let slow = dev.execute(1, Sqe::rw(opcode::READ, 0, 100, 8), DataBuf::FromDevice(&mut out)).unwrap();
    assert!(slow.status.is_success() && out == data);
    assert!(slow.latency_ns > r_flash.latency_ns);
    // Beyond every decoder: an error status and no data.
    dev.inject_errors(102, 100_000).unwrap();
    let mut out2 = vec![0xAAu8; lb * 8];
    let bad = dev.execute(1, Sqe::rw(opcode::READ, 0, 100, 8), DataBuf::FromDevice(&mut out2)).unwrap();
    assert_eq!(bad.status, Status::UNRECOVERED_READ_ERROR);
    assert!(out2.iter().all(|&b| b == 0xAA), "no data may be returned with a media error");
    assert_eq!(dev.report().media_errors, 1);
}

#[test]
fn malformed_commands_complete_with_nvme_status() {
    let mut dev = device(&[], false);
    dev.create_queue_pair(1, 8).unwrap();
    let lbas = dev.namespace().lbas;
    let cases = [
        (Sqe::rw(opcode::READ, 0, lbas - 1, 2), Status::LBA_OUT_OF_RANGE),
        (Sqe { opcode: 0x7E, nsid: 1, ..Sqe::default() }, Status::INVALID_OPCODE),
        (Sqe { opcode: 0xF0, nsid: 1, ..Sqe::default() }, Status::INVALID_OPCODE), // unclaimed vendor opcode
        (Sqe { nsid: 9, ..Sqe::rw(opcode::READ, 0, 0, 1) }, Status::INVALID_NAMESPACE),
        (Sqe::rw(opcode::READ, 0, 0, 1024), Status::INVALID_FIELD), // beyond MDTS
    ];
    for (sqe, want) in cases {
        let d = dev.execute(1, sqe, DataBuf::None).unwrap();
        assert_eq!(d.status, want, "{sqe:?}");
    }
    let mut small_buf = vec![0u8; 10];
    let d = dev.execute(1, Sqe::rw(opcode::READ, 0, 0, 1), DataBuf::FromDevice(&mut small_buf)).unwrap();
    assert_eq!(d.status, Status::DATA_TRANSFER_ERROR);
    assert!(dev.submit(7, Sqe::rw(opcode::READ, 1, 0, 1), DataBuf::None).is_err(), "no such queue");
}

#[test]
fn admin_identify_and_logs() {
    let mut dev = device(&[], false);
    let mut page = vec![0u8; 4096];
    let sqe = Sqe { opcode: opcode::ADMIN_IDENTIFY, cdw10: 1, ..Sqe::default() };
    assert!(dev.execute(0, sqe, DataBuf::FromDevice(&mut page)).unwrap().status.is_success());
    assert!(page[24..64].starts_with(b"nearflash cosmos-plus"));
    let sqe = Sqe { opcode: opcode::ADMIN_IDENTIFY, nsid: 1, cdw10: 0, ..Sqe::default() };
    dev.execute(0, sqe, DataBuf::FromDevice(&mut page)).unwrap();
    assert_eq!(u64::from_le_bytes(page[0..8].try_into().unwrap()), dev.namespace().lbas);
    let mut log = vec![0u8; 4096];
    let sqe = Sqe { opcode: opcode::ADMIN_GET_LOG_PAGE, cdw10: 0xCA | (1023 << 16), ..Sqe::default() };
    assert!(dev.execute(0, sqe, DataBuf::FromDevice(&mut log)).unwrap().status.is_success());
    assert!(std::str::from_utf8(&log).unwrap().trim_start().starts_with('{'));
    let sqe = Sqe { opcode: opcode::ADMIN_GET_LOG_PAGE, cdw10: 0x77 | (10 << 16), ..Sqe::default() };
    assert_eq!(dev.execute(0, sqe, DataBuf::None).unwrap().status, Status::INVALID_LOG_PAGE);
}

#[test]
fn an_image_under_a_missing_directory_is_refused_and_nothing_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("missing").join("dev");
    let e = Device::create(&p, load_preset("cosmos-plus").unwrap(), DeviceOptions::default()).err().expect("refused");
    assert!(e.to_string().contains("parent directory") && e.to_string().contains("missing"), "{e}");
    assert!(!dir.path().join("missing").exists(), "no directory was created");
}

#[test]
fn image_persists_across_close_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("dev");
    let tree = load_preset("cosmos-plus").unwrap();
    let lb;
    let data: Vec<u8>;
    {
        let mut dev = Device::create(&p, tree, DeviceOptions::default()).unwrap();
        lb = dev.lba_bytes() as usize;
        data = (0..lb * 4).map(|i| (i * 7 % 256) as u8).collect();
        dev.create_queue_pair(1, 8).unwrap();
        dev.execute(1, Sqe::rw(opcode::WRITE, 0, 1 << 20, 4), DataBuf::ToDevice(&data)).unwrap();
        assert!(Device::open(&p, DeviceOptions::default()).is_err(), "a second opener is refused");
        dev.close().unwrap();
    }
    let mut dev = Device::open(&p, DeviceOptions::default()).unwrap();
    assert!(dev.recovery().is_none(), "clean shutdown needs no recovery");
    dev.create_queue_pair(1, 8).unwrap();
    let mut out = vec![0u8; lb * 4];
    dev.execute(1, Sqe::rw(opcode::READ, 0, 1 << 20, 4), DataBuf::FromDevice(&mut out)).unwrap();
    assert_eq!(out, data);
    let used: u64 = std::fs::read_dir(&p)
        .unwrap()
        .map(|e| {
            use std::os::unix::fs::MetadataExt;
            e.unwrap().metadata().unwrap().blocks() * 512
        })
        .sum();
    assert!(used < 64 << 20, "a 512 GiB image with 16 KiB written occupies {used} bytes");
}

#[test]
fn demand_mapping_costs_translation_reads_on_cmt_misses() {
    let run = |mapping: &str| {
        let o = small(&[("mapping", mapping), ("cmt_size", "64KiB")]);
        let mut dev = dev_with(&o, false);
        dev.precondition(1.0, FillPattern::Sequential, 0.0, 1).unwrap();
        bench(&mut dev, Pattern::RandRead, 4096, 16, 4000)
    };
    let dram = run("dram");
    let demand = run("demand");
    assert_eq!(dram.nand.pages_read, 4000);
    let misses = demand.ftl.cmt_misses.unwrap();
    assert!(misses > 3000, "a 64 KiB CMT over 1 GiB of mappings mostly misses: {misses}");
    assert_eq!(demand.nand.pages_read, 4000 + misses, "one translation-page read per miss");
    assert!(demand.ops["read"].latency.mean_us > dram.ops["read"].latency.mean_us * 1.3);
}

#[test]
fn raw_bit_errors_cost_retries_but_never_corrupt_data() {
    let o = small(&[("rber", "0.006"), ("pages_per_block", "32")]);
    let mut dev = dev_with(&o, true);
    dev.create_queue_pair(1, 8).unwrap();
    let lb = dev.lba_bytes() as usize;
    let data: Vec<u8> = (0..lb * 64).map(|i| (i * 13 % 256) as u8).collect();
    dev.execute(1, Sqe::rw(opcode::WRITE, 0, 0, 64), DataBuf::ToDevice(&data)).unwrap();
    flush(&mut dev);
    let (mut ok, mut failed) = (0, 0);
    for i in 0..64u64 {
        let mut out = vec![0u8; lb];
        let d = dev.execute(1, Sqe::rw(opcode::READ, 0, i, 1), DataBuf::FromDevice(&mut out)).unwrap();
        if d.status.is_success() {
            assert_eq!(out, data[i as usize * lb..(i as usize + 1) * lb]);
            ok += 1;
        } else {
            assert_eq!(d.status, Status::UNRECOVERED_READ_ERROR);
            failed += 1;
        }
    }
    // lambda = 0.006 x 8192 bits = 49 raw errors per 1 KiB codeword: beyond BCH t=40 often, so reads retry.
    let r = dev.report();
    assert!(r.nand.read_retries > 0, "{:?}", r.nand);
    assert_eq!(ok + failed, 64);
    assert_eq!(r.media_errors, failed);
}

/// 500 seeded operations for the model checker (4 bytes each).
fn model_check_ops(seed: u64) -> Vec<u8> {
    use rand::{RngCore, SeedableRng};
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut bytes = vec![0u8; 4 * 500];
    rng.fill_bytes(&mut bytes);
    // Fewer reopens than uniform bytes give (1 in 16 each), so that GC gets to run between them.
    for op in bytes.iter_mut().step_by(4) {
        if *op % 16 >= 14 && rng.next_u32() % 4 != 0 {
            *op = 0;
        }
    }
    bytes
}

/// The model-based checker (`model_check`, also the `device_model` fuzz target) on seeded random operation
/// sequences: writes, reads, trims, flushes, clean reopens and crashes, every read checked against a plain map.
#[test]
fn random_operation_sequences_match_the_model() {
    let mut total = 0;
    for seed in 0..6u64 {
        let bytes = model_check_ops(seed);
        let m = super::model_check::ModelCheck::run(&bytes).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        total += m.ops;
    }
    assert_eq!(total, 6 * 500);
}

/// The same with `ftl.unmapped_read = allocate`: reads of never-written LBAs map pages (metadata only) that
/// GC, trims, writes, clean reopens and crash recovery must all keep consistent; such LBAs still read as zeroes.
#[test]
fn random_operation_sequences_match_the_model_when_reads_allocate() {
    for seed in 10..14u64 {
        let bytes = model_check_ops(seed);
        let mut m = super::model_check::ModelCheck::run_with(&bytes, &[("unmapped_read", "allocate")])
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(m.ops, 500);
        let allocated = m.dev().core.ftl.stats.read_allocated_pages;
        assert!(allocated > 0, "seed {seed}: the final check's reads allocated no page");
    }
}

/// `ftl.unmapped_read`: on a fresh device `zeroes` serves random reads from the mapping table (no flash, and the
/// report has no `read_allocated_pages`: default reports are unchanged); `allocate` senses a page for every read
/// (MQSim's reads of a device without preconditioning), one allocated page per group read first.
#[test]
fn reads_of_a_fresh_device_go_to_flash_only_with_unmapped_read_allocate() {
    let mut t_read = 0;
    let mut run = |policy: &str| {
        let mut dev = dev_with(&small(&[("unmapped_read", policy)]), false);
        t_read = dev.config().nand.t_read.0;
        bench(&mut dev, Pattern::RandRead, 4096, 8, 3000)
    };
    let z = run("zeroes");
    assert_eq!((z.ops["read"].count, z.nand.pages_read), (3000, 0));
    assert!(!z.to_json().contains("read_allocated_pages"));
    let a = run("allocate");
    assert_eq!((a.ops["read"].count, a.nand.pages_read), (3000, 3000), "every 4 KiB read senses one page");
    let pages = a.ftl.stats.read_allocated_pages;
    assert!(pages > 2000 && pages <= 3000, "one page per group read first: {pages}");
    assert_eq!(a.nand.pages_programmed, 0, "allocation programs nothing");
    assert!(a.ops["read"].latency.min_us * 1e3 > t_read as f64, "each read waits for its page's sensing");
}

/// Every input the `device_model` fuzzer once failed on (`fuzz/regressions/device_model`) passes the model check.
#[test]
fn device_model_fuzz_regressions_pass() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions/device_model");
    let mut files: Vec<_> = std::fs::read_dir(&dir).expect("regressions folder").map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(!files.is_empty());
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        // As the fuzz target: long inputs are cut.
        let bytes = &bytes[..bytes.len().min(4 * 400)];
        if let Err(e) = super::model_check::ModelCheck::run(bytes) {
            panic!("{}: {e}", f.display());
        }
    }
}

#[test]
fn bench_refuses_wrapping_spans_and_read_fractions_outside_0_1_and_stops_when_progress_fails() {
    let mut dev = dev_with(&small(&[]), false);
    let base = Workload { pattern: Pattern::RandRead, block_size: 4096, queue_depth: 4, jobs: 1, ios: 1000, span: None, seed: 7, data: false };
    for span in [(u64::MAX, 10), (1 << 63, 1 << 63)] {
        let w = Workload { span: Some(span), ..base.clone() };
        assert!(matches!(run(&mut dev, &w, None), Err(SimError::Config(m)) if m.contains("span")), "span {span:?}");
    }
    for f in [f64::NAN, -0.1, 2.0] {
        let w = Workload { pattern: Pattern::RandRw(f), ..base.clone() };
        assert!(matches!(run(&mut dev, &w, None), Err(SimError::Config(m)) if m.contains("read fraction")), "{f}");
    }
    let mut calls = 0;
    let mut stop = |_: u64, _: u64| -> Result<()> {
        calls += 1;
        Err(SimError::InvalidArgument("interrupted".into()))
    };
    assert!(matches!(run(&mut dev, &base, Some(&mut stop)), Err(SimError::InvalidArgument(m)) if m == "interrupted"));
    assert_eq!(calls, 1, "the run stops at the first failed progress call");
    // the queues were drained: the next run starts cleanly
    assert_eq!(run(&mut dev, &base, None).unwrap().ios, 1000);
}

#[test]
fn bench_borrows_its_queues_and_never_takes_one_with_commands_in_flight() {
    let mut dev = dev_with(&small(&[]), false);
    let w = Workload { pattern: Pattern::RandRead, block_size: 4096, queue_depth: 4, jobs: 3, ios: 300, span: None, seed: 7, data: false };
    dev.create_queue_pair(2, 9).unwrap();
    dev.create_queue_pair(3, 5).unwrap();
    dev.submit(3, Sqe::rw(opcode::READ, 77, 0, 1), DataBuf::None).unwrap();
    let refused = run(&mut dev, &w, None);
    assert!(matches!(&refused, Err(SimError::InvalidArgument(m)) if m.contains("queue 3 has commands in flight")), "{refused:?}");
    assert_eq!(dev.wait(3).map(|c| c.cqe.cid), Some(77), "the user's command still completes");
    assert_eq!(run(&mut dev, &w, None).unwrap().ios, 300);
    // Given back as they were: queue 1 absent, 2 and 3 at their depths.
    assert_eq!((dev.queue_depth(1), dev.queue_depth(2), dev.queue_depth(3)), (None, Some(9), Some(5)));
    let many = Workload { jobs: dev.config().nvme.max_queues.0 as u32 + 1, ..w.clone() };
    assert!(matches!(run(&mut dev, &many, None), Err(SimError::Config(m)) if m.contains("I/O queues")));
}

#[test]
fn failed_commands_are_kept_in_the_error_information_log() {
    let mut dev = device(&[], false);
    dev.create_queue_pair(1, 16).unwrap();
    let get_log = |dev: &mut Device, lid: u8, bytes: usize| {
        let mut page = vec![0u8; bytes];
        let sqe = Sqe { opcode: opcode::ADMIN_GET_LOG_PAGE, cdw10: u32::from(lid) | (((bytes / 4 - 1) as u32) << 16), ..Sqe::default() };
        assert!(dev.execute(0, sqe, DataBuf::FromDevice(&mut page)).unwrap().status.is_success());
        page
    };
    assert!(get_log(&mut dev, pages::LOG_ERROR_INFO, 64).iter().all(|&b| b == 0), "no error yet");
    let lbas = dev.namespace().lbas;
    let mut out = vec![0u8; dev.lba_bytes() as usize];
    let bad = dev.execute(1, Sqe::rw(opcode::READ, 0, lbas + 5, 1), DataBuf::FromDevice(&mut out)).unwrap();
    assert_eq!(bad.status, Status::LBA_OUT_OF_RANGE);
    let unknown = dev.execute(1, Sqe { opcode: 0xF1, nsid: 1, ..Sqe::default() }, DataBuf::None).unwrap();
    assert_eq!(unknown.status, Status::INVALID_OPCODE);
    let log = get_log(&mut dev, pages::LOG_ERROR_INFO, nvme::ERROR_LOG_ENTRIES * nvme::ERROR_ENTRY_BYTES);
    let (newest, older) = (&log[0..64], &log[64..128]);
    assert_eq!(u64::from_le_bytes(newest[0..8].try_into().unwrap()), 2, "error count");
    assert_eq!(u16::from_le_bytes([newest[10], newest[11]]), unknown.cid);
    assert_eq!(u16::from_le_bytes([newest[12], newest[13]]) >> 1 & 0xFF, 0x01);
    assert_eq!(u16::from_le_bytes([older[8], older[9]]), 1, "submission queue");
    assert_eq!(u64::from_le_bytes(older[16..24].try_into().unwrap()), lbas + 5, "the LBA");
    // the controller says how many entries it keeps, and the reasons page parses (no reason for these two)
    let mut id = vec![0u8; 4096];
    let sqe = Sqe { opcode: opcode::ADMIN_IDENTIFY, cdw10: u32::from(pages::CNS_CONTROLLER), ..Sqe::default() };
    dev.execute(0, sqe, DataBuf::FromDevice(&mut id)).unwrap();
    assert_eq!(usize::from(id[262]) + 1, nvme::ERROR_LOG_ENTRIES);
    assert!(dev.error_reason(1, bad.cid).is_some_and(|r| r.contains(&format!("LBAs {}", lbas + 5))));
}

/// Every way a standard command can be refused, on the admin and I/O queues: each completes with its status and
/// a reason in the error log (`error_reason`).
#[test]
fn every_standard_refusal_carries_its_reason() {
    let mut dev = device(&[], true);
    dev.create_queue_pair(1, 16).unwrap();
    let lb = dev.lba_bytes() as usize;
    let (lbas, mdts) = (dev.namespace().lbas, dev.namespace().max_lbas);
    let page = vec![7u8; lb];
    assert!(dev.execute(1, Sqe::rw(opcode::WRITE, 0, 3, 1), DataBuf::ToDevice(&page)).unwrap().status.is_success());
    flush(&mut dev);
    dev.inject_errors(3, 1_000_000).unwrap();
    let big = vec![0u8; lb * (mdts as usize + 1)];
    let mut out = vec![0u8; lb * 4];
    let rw = |op, slba, nlb| Sqe::rw(op, 0, slba, nlb);
    let with = |sqe: Sqe, f: &dyn Fn(&mut Sqe)| {
        let mut s = sqe;
        f(&mut s);
        s
    };
    let io: Vec<(&str, Sqe, Option<&[u8]>, Status)> = vec![
        ("write beyond MDTS", rw(opcode::WRITE, 0, mdts + 1), Some(&big), Status::INVALID_FIELD),
        ("read beyond MDTS", rw(opcode::READ, 0, mdts + 1), None, Status::INVALID_FIELD),
        ("read past the end", rw(opcode::READ, lbas - 1, 2), None, Status::LBA_OUT_OF_RANGE),
        ("write zeroes past the end", rw(opcode::WRITE_ZEROES, lbas, 1), None, Status::LBA_OUT_OF_RANGE),
        ("reserved CDW12 bits", with(rw(opcode::READ, 0, 1), &|s| s.cdw12 |= 1 << 20), None, Status::INVALID_FIELD),
        ("fused", with(rw(opcode::READ, 0, 1), &|s| s.flags = 1), None, Status::INVALID_FIELD),
        ("SGL", with(rw(opcode::READ, 0, 1), &|s| s.flags = 1 << 6), None, Status::INVALID_FIELD),
        ("namespace 9", with(rw(opcode::READ, 0, 1), &|s| s.nsid = 9), None, Status::INVALID_NAMESPACE),
        ("namespace 0", with(rw(opcode::READ, 0, 1), &|s| s.nsid = 0), None, Status::INVALID_FIELD),
        ("unknown opcode", Sqe { opcode: 0x7E, nsid: 1, ..Sqe::default() }, None, Status::INVALID_OPCODE),
        ("unclaimed vendor opcode", Sqe { opcode: 0xF0, nsid: 1, ..Sqe::default() }, None, Status::INVALID_OPCODE),
        ("write without data", rw(opcode::WRITE, 0, 2), Some(&page), Status::DATA_TRANSFER_ERROR),
        ("DSM reserved bits", Sqe { opcode: opcode::DSM, nsid: 1, cdw10: 1 << 8, ..Sqe::default() }, None, Status::INVALID_FIELD),
        ("DSM without ranges", Sqe { opcode: opcode::DSM, nsid: 1, cdw11: 4, ..Sqe::default() }, None, Status::DATA_TRANSFER_ERROR),
    ];
    for (what, sqe, src, want) in io {
        let data = src.map_or(DataBuf::None, DataBuf::ToDevice);
        let d = dev.execute(1, sqe, data).unwrap();
        assert_eq!(d.status, want, "{what}");
        let reason = dev.error_reason(1, d.cid);
        assert!(reason.as_deref().is_some_and(|r| !r.is_empty()), "{what}: no reason ({reason:?})");
    }
    let far = nvme::encode_dsm_ranges(&[(lbas, 1)]);
    let d = dev.execute(1, Sqe { opcode: opcode::DSM, nsid: 1, cdw11: 4, ..Sqe::default() }, DataBuf::ToDevice(&far)).unwrap();
    assert_eq!(d.status, Status::LBA_OUT_OF_RANGE);
    assert!(dev.error_reason(1, d.cid).is_some_and(|r| r.starts_with("range 0")), "DSM range past the end");
    let d = dev.execute(1, rw(opcode::READ, 0, 4), DataBuf::FromDevice(&mut out[..lb])).unwrap();
    assert_eq!(d.status, Status::DATA_TRANSFER_ERROR);
    assert!(dev.error_reason(1, d.cid).is_some(), "read into a short buffer");
    let d = dev.execute(1, rw(opcode::READ, 3, 1), DataBuf::FromDevice(&mut out)).unwrap();
    assert_eq!(d.status, Status::UNRECOVERED_READ_ERROR);
    assert!(dev.error_reason(1, d.cid).is_some_and(|r| r.contains("ECC")), "uncorrectable read");
    // What a host library returns for it: the status and the device's reason as fields, both in its words.
    let e = dev.command_error("read LBA 3", 1, d.cid, d.status);
    let SimError::Nvme { ref command, sct, sc, reason: Some(ref why), .. } = e else { panic!("{e:?}: no reason") };
    assert_eq!((command.as_str(), sct, sc), ("read LBA 3", 2, 0x81));
    assert!(why.contains("ECC") && e.to_string().starts_with(&format!("read LBA 3 ({why}): ")), "{e}");

    let admin = |opcode, cdw10, cdw11| Sqe { opcode, cdw10, cdw11, ..Sqe::default() };
    let cases: Vec<(&str, Sqe, Status)> = vec![
        ("unknown admin opcode", admin(0x7F, 0, 0), Status::INVALID_OPCODE),
        ("vendor admin opcode", admin(0xC5, 0, 0), Status::INVALID_OPCODE),
        ("unknown log page", admin(opcode::ADMIN_GET_LOG_PAGE, 0x77 | (10 << 16), 0), Status::INVALID_LOG_PAGE),
        ("unaligned log offset", Sqe { cdw12: 2, ..admin(opcode::ADMIN_GET_LOG_PAGE, 0x02 | (10 << 16), 0) }, Status::INVALID_FIELD),
        ("identify CNS 0x7", admin(opcode::ADMIN_IDENTIFY, 0x7, 0), Status::INVALID_FIELD),
        ("identify namespace 5", Sqe { nsid: 5, ..admin(opcode::ADMIN_IDENTIFY, 0, 0) }, Status::INVALID_NAMESPACE),
        ("queue not contiguous", admin(opcode::ADMIN_CREATE_CQ, 2 | (7 << 16), 0), Status::INVALID_FIELD),
        ("queue 1 exists", admin(opcode::ADMIN_CREATE_CQ, 1 | (7 << 16), 1), Status::INVALID_QUEUE_ID),
        ("queue too deep", admin(opcode::ADMIN_CREATE_CQ, 2 | (0xFFFF << 16), 1), Status::INVALID_QUEUE_SIZE),
        ("SQ without its CQ", admin(opcode::ADMIN_CREATE_SQ, 3 | (7 << 16), 1 | (3 << 16)), Status { sct: 1, sc: 0 }),
        ("delete missing SQ", admin(opcode::ADMIN_DELETE_SQ, 9, 0), Status::INVALID_QUEUE_ID),
        ("delete a CQ in use", admin(opcode::ADMIN_DELETE_CQ, 1, 0), Status { sct: 1, sc: 0x0C }),
    ];
    for (what, sqe, want) in cases {
        let d = dev.execute(0, sqe, DataBuf::None).unwrap();
        assert_eq!(d.status, want, "{what}");
        let reason = dev.error_reason(0, d.cid);
        assert!(reason.as_deref().is_some_and(|r| !r.is_empty()), "{what}: no reason ({reason:?})");
    }
    assert!(dev.has_queue(1) && !dev.has_queue(3), "refused queue commands changed nothing");
}

/// `mqsim_tsu`: host reads wait in the array's issue queue and complete when it has read them. Every read
/// completes, with its data; the run is deterministic; the order differs from booking at submission.
#[test]
fn mqsim_tsu_reads_complete_from_the_issue_queue_deterministically() {
    let run = |policy: &str| {
        let o = small(&[("cache_read", "false"), ("channel_arbitration", policy)]);
        let mut dev = dev_with(&o, false);
        dev.precondition(0.9, FillPattern::Sequential, 0.0, 1).unwrap();
        bench(&mut dev, Pattern::RandRead, 4096, 32, 3000)
    };
    let a = run("mqsim_tsu");
    let r = &a.ops["read"];
    assert_eq!(r.count, 3000);
    // 90% of the LBAs are mapped: the others complete without flash; each mapped read senses one page.
    assert!(a.nand.pages_read > 2500 && a.nand.pages_read < 3000, "{}", a.nand.pages_read);
    assert_eq!(a.to_json(), run("mqsim_tsu").to_json(), "deterministic");
    let d = run("data_first");
    assert_eq!(d.ops["read"].count, 3000);
    assert_ne!(a.elapsed_ns, d.elapsed_ns, "issued on channel-idle events, not booked at submission");
    // Data comes back through the deferred path.
    let o = small(&[("cache_read", "false"), ("channel_arbitration", "mqsim_tsu")]);
    let mut dev = dev_with(&o, true);
    dev.create_queue_pair(1, 8).unwrap();
    let lb = dev.lba_bytes() as usize;
    let data: Vec<u8> = (0..lb * 64).map(|i| (i * 7 % 251) as u8).collect();
    dev.execute(1, Sqe::rw(opcode::WRITE, 0, 0, 64), DataBuf::ToDevice(&data)).unwrap();
    flush(&mut dev);
    let mut out = vec![0u8; lb * 64];
    let done = dev.execute(1, Sqe::rw(opcode::READ, 0, 0, 64), DataBuf::FromDevice(&mut out)).unwrap();
    assert!(done.status.is_success());
    assert_eq!(out, data);
    assert!(done.latency_ns > dev.config().nand.t_read.0, "the read waited for the flash");
}

/// A one-page read's transaction that delivers its data and posts its completion itself books what a delivery
/// step waiting for it books, at the same times in the same order: the same reports with and without it, for reads
/// alone, reads beside GC-steady writes, a fetch window (a completion's post releases a fetch) and MQSim's issue
/// discipline, timing only (no step for it: `DeviceCore::flash_read_delivering`, `delivered`) and with data (its
/// flash step carries them: `deliver_pages`, `then_deliver`). (A host read's transaction ends alone in its event
/// with no step ready, so these runs take the delivery at once; the way through the ready queue is the flow's test,
/// `a_running_step_given_a_payload_and_requeued_is_taken_where_its_dependent_would_have_been`.)
#[test]
fn a_read_step_delivering_itself_reports_what_a_delivery_step_reports() {
    let run = |fused: bool, extra: &[(&str, &str)], pattern: Pattern, data: bool| {
        let mut o = small(&[("write_buffer", "256KiB")]);
        o.extend(extra.iter().map(|(a, b)| (a.to_string(), b.to_string())));
        let mut dev = dev_with(&o, data);
        dev.core.deliver_in_flash_step = fused;
        dev.precondition(0.9, FillPattern::Random, 1.0, 3).unwrap();
        let w = Workload { pattern, block_size: 4096, queue_depth: 32, jobs: 2, ios: 3000, span: None, seed: 7, data };
        serde_json::to_string(&run(&mut dev, &w, None).unwrap().report).unwrap()
    };
    for (extra, pattern, data) in [
        (&[][..], Pattern::RandRead, false),
        (&[][..], Pattern::RandRead, true),
        (&[][..], Pattern::RandRw(0.5), false),
        (&[("fetch_window", "8")][..], Pattern::RandRw(0.7), false),
        (&[("channel_arbitration", "mqsim_tsu"), ("cache_read", "false")][..], Pattern::RandRw(0.7), false),
    ] {
        let fused = run(true, extra, pattern, data);
        assert_eq!(fused, run(false, extra, pattern, data), "{extra:?} {pattern:?} data {data}");
    }
}

/// A channel's use kept in the array until a report (`NandArray::untallied`) is what its timeline counted per
/// transfer: under 4 KiB random reads one operation and one page's data-out time per page read, and nothing once
/// the statistics are reset.
#[test]
fn channel_use_kept_in_the_array_counts_every_transfer() {
    let mut dev = dev_with(&small(&[]), false);
    dev.precondition(0.9, FillPattern::Random, 1.0, 3).unwrap();
    let r = bench(&mut dev, Pattern::RandRead, 4096, 16, 2000);
    let ch = r.utilisation.iter().find(|u| u.name == "channel").expect("channel utilisation");
    assert!(r.nand.pages_read > 1500, "{}", r.nand.pages_read);
    assert_eq!(ch.ops, r.nand.pages_read, "one data-out per page read");
    let busy = ch.mean * f64::from(ch.members) * r.elapsed_ns as f64;
    let want = (r.nand.pages_read * dev.core.nand.timing.xfer(4096)) as f64;
    assert!((busy - want).abs() < 1e-6 * want, "busy {busy} ns, transfers {want} ns");
    dev.reset_stats();
    let ch = dev.report().utilisation.into_iter().find(|u| u.name == "channel").expect("channel utilisation");
    assert_eq!((ch.ops, ch.mean), (0, 0.0));
}

/// A host Write's admission scheduled at once (`DeviceCore::admit_at_once`) is scheduled where the drain after its
/// submission would have scheduled it: the same reports with and without it, for GC-steady random writes (with and
/// without data), a mix with reads, a fetch window (which drains steps before the write's admission) and MQSim's
/// issue discipline.
#[test]
fn a_write_admitted_at_once_reports_what_an_admission_step_reports() {
    let run = |at_once: bool, extra: &[(&str, &str)], pattern: Pattern, data: bool| {
        let mut o = small(&[("write_buffer", "256KiB")]);
        o.extend(extra.iter().map(|(a, b)| (a.to_string(), b.to_string())));
        let mut dev = dev_with(&o, data);
        dev.core.admit_writes_at_once = at_once;
        dev.precondition(0.9, FillPattern::Random, 1.0, 3).unwrap();
        let ios = dev.namespace().lbas / 8;
        let w = Workload { pattern, block_size: 4096, queue_depth: 32, jobs: 2, ios, span: None, seed: 7, data };
        serde_json::to_string(&run(&mut dev, &w, None).unwrap().report).unwrap()
    };
    for (extra, pattern, data) in [
        (&[][..], Pattern::RandWrite, false),
        (&[][..], Pattern::RandWrite, true),
        (&[][..], Pattern::RandRw(0.3), false),
        (&[("fetch_window", "8")][..], Pattern::RandRw(0.3), false),
        (&[("channel_arbitration", "mqsim_tsu"), ("cache_read", "false")][..], Pattern::RandRw(0.3), false),
    ] {
        let stepped = run(false, extra, pattern, data);
        assert_eq!(run(true, extra, pattern, data), stepped, "{extra:?} {pattern:?} data {data}");
    }
}

/// A completion riding on the step it waits for (`DeviceCore::complete`, `Flow::add_rider`), and posted at once where
/// a write's admission lets it in with no step ready (`DeviceCore::admitted`), posts what a completion step posts:
/// the same reports with and without it, for GC-steady random writes (with and without data, and with a buffer so
/// small that it gets stuck and lets writes in by force), a mix with reads, 128 KiB reads (a join's completion), a
/// fetch window (where no posting is taken at once) and MQSim's issue discipline.
#[test]
fn a_riding_completion_reports_what_a_completion_step_reports() {
    let run = |ride: bool, buffer: &str, extra: &[(&str, &str)], pattern: Pattern, block_size: u64, data: bool| {
        let mut o = small(&[("write_buffer", buffer)]);
        o.extend(extra.iter().map(|(a, b)| (a.to_string(), b.to_string())));
        let mut dev = dev_with(&o, data);
        dev.core.completions_ride = ride;
        dev.precondition(0.9, FillPattern::Random, 1.0, 3).unwrap();
        let ios = dev.namespace().lbas / 8;
        let w = Workload { pattern, block_size, queue_depth: 32, jobs: 2, ios, span: None, seed: 7, data };
        serde_json::to_string(&run(&mut dev, &w, None).unwrap().report).unwrap()
    };
    for (buffer, extra, pattern, block_size, data) in [
        ("256KiB", &[][..], Pattern::RandWrite, 4096, false),
        ("256KiB", &[][..], Pattern::RandWrite, 4096, true),
        ("64KiB", &[][..], Pattern::RandWrite, 4096, false),
        ("256KiB", &[][..], Pattern::RandRw(0.3), 4096, false),
        ("256KiB", &[][..], Pattern::RandRead, 131072, false),
        ("256KiB", &[("fetch_window", "8")][..], Pattern::RandRw(0.3), 4096, false),
        ("256KiB", &[("channel_arbitration", "mqsim_tsu"), ("cache_read", "false")][..], Pattern::RandRw(0.3), 4096, false),
    ] {
        let stepped = run(false, buffer, extra, pattern, block_size, data);
        assert_eq!(run(true, buffer, extra, pattern, block_size, data), stepped, "{buffer} {extra:?} {pattern:?} {block_size} data {data}");
    }
}

#[test]
fn reap_next_takes_completions_in_time_order_without_moving_the_clock() {
    let mut dev = dev_with(&small(&[]), false);
    dev.precondition(1.0, FillPattern::Sequential, 0.0, 1).unwrap();
    dev.create_queue_pair(1, 16).unwrap();
    dev.reset_stats();
    let t0 = dev.now();
    for i in 0..8u64 {
        let mut sqe = Sqe::rw(opcode::READ, 0, i * 4099 % dev.namespace().lbas, 1);
        sqe.cid = dev.next_cid(1);
        dev.submit(1, sqe, DataBuf::None).unwrap();
    }
    let mut last = t0;
    for _ in 0..8 {
        let c = dev.reap_next(1).expect("a completion is pending");
        assert!(c.time >= last && c.time > t0);
        last = c.time;
        assert_eq!(dev.now(), t0, "the host clock stays where the commands were submitted");
    }
    assert!(dev.reap_next(1).is_none());
    let r = dev.report();
    assert_eq!(r.ops["read"].count, 8);
    assert_eq!(r.elapsed_ns, last - t0, "the window ends at the last completion");
}

/// Program/erase suspension is a separable part of the scheduler: with no read ever meeting a program or erase on
/// its die, a device with suspension on reports exactly what one without it reports.
#[test]
fn suspension_on_and_off_give_identical_reports_when_no_read_meets_a_program() {
    let run = |suspend: &str, pattern: Pattern| {
        let o = small(&[("write_buffer", "256KiB"), ("suspend", suspend)]);
        let mut dev = dev_with(&o, false);
        dev.precondition(0.9, FillPattern::Random, 1.0, 3).unwrap();
        let lbas = dev.namespace().lbas;
        serde_json::to_string(&bench(&mut dev, pattern, 4096, 16, lbas / 8)).unwrap()
    };
    // Writes alone: GC's reads meet programs but never suspend them (with erase suspension on, host programs would
    // suspend GC's erases: `program` only). Reads alone: nothing is programmed.
    for (pattern, suspend) in [(Pattern::RandWrite, "program"), (Pattern::RandRead, "both")] {
        let off = run("none", pattern);
        assert_eq!(off, run(suspend, pattern), "{pattern:?}");
    }
}

/// With reads and GC-steady writes mixed, suspension lets reads in ahead of programs: their mean and median
/// latency fall (on this small device the tail is set by 3.5 ms erases, which only erase suspension shortens), and
/// programs are suspended at most `max_suspensions` times each.
#[test]
fn suspension_cuts_the_read_latency_under_writes() {
    let run = |suspend: &str| {
        let o = small(&[("write_buffer", "256KiB"), ("suspend", suspend)]);
        let mut dev = dev_with(&o, false);
        dev.precondition(0.9, FillPattern::Random, 1.0, 3).unwrap();
        let lbas = dev.namespace().lbas;
        bench(&mut dev, Pattern::RandRw(0.7), 4096, 32, lbas / 8)
    };
    let (off, program, both) = (run("none"), run("program"), run("both"));
    let read = |r: &Report| r.ops["read"].latency.clone();
    assert!(read(&program).mean_us < 0.6 * read(&off).mean_us, "mean {:?} vs {:?}", read(&program), read(&off));
    assert!(read(&program).p50_us < 0.5 * read(&off).p50_us);
    assert!(read(&both).p99_us < read(&program).p99_us, "erase suspension shortens the tail: {:?} vs {:?}", read(&both), read(&program));
    let s = &program.sched.stats.suspension;
    assert!(s.program.suspensions > 0 && s.program.max_per_op <= 4 && s.erase.suspensions == 0, "{s:?}");
    assert!(both.sched.stats.suspension.erase.suspensions > 0);
    assert_eq!(off.sched.stats.suspension.program.suspensions, 0);
}

/// The priority of a submission queue (QPRIO) is the class of its commands' flash work: a read from an urgent queue
/// submitted behind 16 reads from a low-priority queue, all on one die, waits for at most the read in progress, while
/// the low queue's reads wait for one another.
#[test]
fn an_urgent_queues_read_overtakes_low_priority_reads_queued_on_its_die() {
    let mut dev = device(&[("channels", "1"), ("chips_per_channel", "1"), ("blocks_per_plane", "32"), ("pages_per_block", "16"), ("over_provisioning", "35")], false);
    let spp = written_and_idle(&mut dev, 64);
    let alone = dev.execute(1, Sqe::rw(opcode::READ, 0, 0, 1), DataBuf::None).unwrap().latency_ns;
    dev.create_queue_pair_with(2, 32, Priority::Low).unwrap();
    dev.create_queue_pair_with(3, 4, Priority::Urgent).unwrap();
    for i in 0..16u64 {
        dev.submit(2, Sqe::rw(opcode::READ, i as u16, (2 + i) * spp, 1), DataBuf::None).unwrap();
    }
    let t0 = dev.now();
    dev.submit(3, Sqe::rw(opcode::READ, 99, 40 * spp, 1), DataBuf::None).unwrap();
    let urgent = dev.wait(3).unwrap().time - t0;
    let mut last_low = 0;
    while let Some(c) = dev.wait(2) {
        last_low = last_low.max(c.time - t0);
    }
    assert!(urgent <= 2 * alone + alone / 4, "urgent read {urgent} ns, one read alone {alone} ns");
    assert!(last_low > 2 * urgent, "the low queue's reads wait for one another: {last_low} ns vs {urgent} ns");
}

/// Two queues of different priorities are two classes on the flash queues, weighted by `nvme.weight_*`: with the
/// default unlimited fetch (submission-queue arbitration never binds), 8 reads of a low queue submitted before 8 reads
/// of a high queue, all on one single-plane die, complete in the die's weighted turns. The first low read finds the
/// die idle; then high takes `weight_high` reads per turn and low one: with the presets' 4:1, H x4, L, H x4, then the
/// six low reads left; with `weight_high = 2`, (H x2, L) three times, H x2, then the four low left. The report keeps each queue's
/// completions apart, with its priority.
#[test]
fn two_queues_priorities_share_their_die_by_the_nvme_weights_and_are_reported_per_queue() {
    let order = |weight_high: &str| {
        let geometry = [("channels", "1"), ("chips_per_channel", "1"), ("planes_per_die", "1"), ("blocks_per_plane", "32"), ("pages_per_block", "16"), ("over_provisioning", "35")];
        let mut dev = device(&[&geometry[..], &[("nvme.weight_high", weight_high)]].concat(), false);
        let spp = written_and_idle(&mut dev, 64);
        dev.create_queue_pair_with(2, 32, Priority::Low).unwrap();
        dev.create_queue_pair_with(3, 32, Priority::High).unwrap();
        for (q, first) in [(2u16, 2u64), (3, 20)] {
            for i in 0..8u64 {
                dev.submit(q, Sqe::rw(opcode::READ, i as u16, (first + i) * spp, 1), DataBuf::None).unwrap();
            }
        }
        let mut order = Vec::new();
        while let Some((q, t)) = dev.next_completion(&[2, 3]) {
            dev.advance_to(t);
            dev.reap(q).unwrap();
            order.push(q);
        }
        let r = dev.report();
        let read = |q: u16| (r.queues[&q].priority, r.queues[&q].ops["read"].count, r.queues[&q].ops["read"].latency.mean_us);
        let ((p_low, n_low, mean_low), (p_high, n_high, mean_high)) = (read(2), read(3));
        assert_eq!((p_low, n_low, p_high, n_high), (Priority::Low, 8, Priority::High, 8));
        assert!(mean_high < mean_low, "high {mean_high} us, low {mean_low} us");
        assert_eq!(r.priorities[&Priority::Low]["read"].count, 8);
        order
    };
    assert_eq!(order("4"), [2, 3, 3, 3, 3, 2, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2]);
    assert_eq!(order("2"), [[2, 3, 3].repeat(4), vec![2; 4]].concat());
}

/// Submission-queue arbitration decides which waiting command takes a command slot (`nvme.fetch_window`). With one
/// slot, commands run one at a time in the order they are fetched: under weighted round robin (NVMe 2.0, 3.4.4.2) the
/// urgent queue's commands all go first, then rounds of high x3, medium x2, low x1 (the weights set here); under
/// round robin the queues take turns, one command each (burst 1). The first command takes the free slot when
/// submitted, before arbitration has anything to choose from.
#[test]
fn arbitration_fetches_urgent_first_then_by_weight_into_a_limited_window() {
    let order = |mechanism: &str| {
        let o = small(&[
            ("nvme.arbitration", mechanism),
            ("weight_high", "3"),
            ("weight_medium", "2"),
            ("weight_low", "1"),
            ("fetch_window", "1"),
        ]);
        let mut dev = dev_with(&o, false);
        dev.precondition(0.5, FillPattern::Sequential, 0.0, 1).unwrap();
        let queues = [(1, Priority::Low), (2, Priority::Medium), (3, Priority::High), (4, Priority::Urgent)];
        for (q, p) in queues {
            dev.create_queue_pair_with(q, 64, p).unwrap();
        }
        for (q, _) in queues {
            for i in 0..12u16 {
                let lba = u64::from(q) * 4099 + u64::from(i) * 613;
                dev.submit(q, Sqe::rw(opcode::READ, i, lba, 1), DataBuf::None).unwrap();
            }
        }
        let mut order = Vec::new();
        let mut last = Time::ZERO;
        while let Some((q, t)) = dev.next_completion(&[1, 2, 3, 4]) {
            assert!(t > last, "one slot: commands complete one at a time");
            last = t;
            dev.advance_to(t);
            dev.reap(q).unwrap();
            order.push(q);
        }
        assert_eq!(order.len(), 48);
        order
    };
    let wrr = order("weighted");
    assert_eq!(wrr[0], 1, "the first command found a free slot");
    assert_eq!(&wrr[1..13], &[4; 12], "urgent strictly first");
    let rounds: Vec<u16> = [3, 3, 3, 2, 2, 1].repeat(4);
    assert_eq!(&wrr[13..37], &rounds[..], "high:medium:low = 3:2:1 over four rounds");
    let rest = &wrr[37..];
    assert_eq!((rest.iter().filter(|&&q| q == 2).count(), rest.iter().filter(|&&q| q == 1).count()), (4, 7));
    let rr = order("round_robin");
    assert_eq!(&rr[..9], &[1, 1, 2, 3, 4, 1, 2, 3, 4], "round robin: each queue in turn, priorities ignored");
}

#[test]
fn the_earliest_completion_among_queues_before_a_limit_never_runs_the_loop_past_either() {
    let mut dev = dev_with(&small(&[]), false);
    dev.precondition(1.0, FillPattern::Sequential, 0.0, 1).unwrap();
    for q in 1..=3 {
        dev.create_queue_pair(q, 16).unwrap();
    }
    // Queue 1 reads 8 pages, queue 2 one.
    let ch = u64::from(dev.core.nand.geo.channels);
    let spp = u64::from(dev.core.nand.geo.sectors_per_page);
    for i in 0..8u64 {
        dev.submit(1, Sqe::rw(opcode::READ, i as u16, i * ch * spp * 4, 1), DataBuf::None).unwrap();
    }
    dev.submit(2, Sqe::rw(opcode::READ, 0, spp, 1), DataBuf::None).unwrap();
    // Nothing completes before a limit just after the submissions: None, and a submission at the limit is not late.
    let limit = dev.now() + 1;
    assert_eq!(dev.next_completion_before_any(&[1, 2], limit), None);
    dev.advance_to(limit);
    dev.submit(3, Sqe::rw(opcode::READ, 0, 2 * spp, 1), DataBuf::None).unwrap();
    assert_eq!(dev.report().sched.late_submissions, 0);
    // Among both queues the loop stops at the earliest completion of either, so that queue's next command,
    // submitted then, is not late either.
    let (q, first) = dev.next_completion_before_any(&[1, 2], Time::MAX).unwrap();
    let other = 3 - q;
    assert_eq!(dev.next_completion_before_any(&[other], first), None);
    dev.advance_to(first);
    dev.submit(q, Sqe::rw(opcode::READ, 9, 3 * spp, 1), DataBuf::None).unwrap();
    assert_eq!(dev.report().sched.late_submissions, 0);
    assert!(dev.next_completion_time(other).unwrap() >= first);
}

/// The earliest completion among queues, as `next_completion` answers it while it looks the queues up again only
/// when a completion posted may come before the earliest it knows (`posting_keeps_earliest`), is every time the one
/// a fresh look at all of them finds, over a long mix of reads and writes on three queues (completions posted in
/// and out of time order, and to every queue).
#[test]
fn the_earliest_completion_among_queues_matches_a_fresh_look_after_every_posting() {
    use rand::Rng as _;
    let mut dev = dev_with(&small(&[]), false);
    dev.precondition(0.8, FillPattern::Random, 0.0, 1).unwrap();
    let lbas = dev.namespace().lbas;
    let sqids = [1u16, 2, 3];
    for &q in &sqids {
        dev.create_queue_pair(q, 16).unwrap();
    }
    let mut rng = crate::engine::rng_stream(5, "earliest-completion");
    let submit = |dev: &mut Device, q: u16, rng: &mut crate::engine::Rng| {
        let op = if rng.gen_range(0..4) == 0 { opcode::WRITE } else { opcode::READ };
        let cid = dev.next_cid(q);
        dev.submit(q, Sqe { cid, ..Sqe::rw(op, 0, rng.gen_range(0..lbas), 1) }, DataBuf::None).unwrap();
    };
    for &q in &sqids {
        for _ in 0..(4 * q) {
            submit(&mut dev, q, &mut rng);
        }
    }
    for _ in 0..3000 {
        let (q, t) = dev.next_completion(&sqids).expect("commands in flight");
        let fresh = sqids.iter().enumerate().filter_map(|(i, &s)| dev.queues.next_time(s).map(|t| (t, i))).min();
        assert_eq!(Some((t, sqids.iter().position(|&s| s == q).unwrap())), fresh);
        dev.advance_to(t);
        dev.reap(q).expect("the completion found");
        submit(&mut dev, q, &mut rng);
    }
}

/// The small device (with `extra`) filled to 90% at random, then 1/`part` of its LBAs written at random (4 KiB, QD
/// 32: GC steady state), with queue 1 made for the next command.
fn gc_steady_writes(extra: &[(&str, &str)], part: u64) -> (Device, Report) {
    let mut dev = dev_with(&small(extra), false);
    dev.precondition(0.9, FillPattern::Random, 1.0, 3).unwrap();
    let lbas = dev.namespace().lbas;
    let r = bench(&mut dev, Pattern::RandWrite, 4096, 32, lbas / part);
    assert!(r.ftl.stats.gc_runs > 0, "{extra:?}: GC ran");
    dev.create_queue_pair(1, 4).unwrap();
    (dev, r)
}

/// With MQSim's GC rules (`controller.gc_priority = urgent`: GC's transactions first; `ftl.gc_free = erased`: a block
/// is free once its erase has ended) a Flush after GC-steady writes waits for the flash work of the host data the
/// write buffer holds and of GC's current victims, no more. Bound, from the preset's parameters, per die (8 dies, 2
/// planes, 32-page blocks; every program counted single-plane): the buffer's 4 MiB is 256 pages of 16 KiB, 32 per
/// die; each host page costs the die its program, the (WAF - 1) pages GC moves for it (a read and a program each)
/// and WAF / pages_per_block of an erase; GC's current victims (one per plane, 2 per die) owe at most their moves,
/// (1 - 1/WAF) of a block each, which urgent GC puts first. Here 32 x 3.9 ms + 2 x 20.1 x 1.36 ms = 0.18 s at WAF
/// 2.69, with slack x 1.25: 0.22 s; measured 0.11 s. The presets' GC (`equal`, `issued`) runs a victim or more
/// behind the host on the dies, and its Flush waits for that backlog too (0.39 s here, above the bound).
#[test]
fn a_flush_after_gc_steady_writes_is_bounded_with_mqsim_gc_rules() {
    let flush_after_writes = |extra: &[(&str, &str)]| {
        let (mut dev, r) = gc_steady_writes(&[[("write_buffer", "4MiB")].as_slice(), extra].concat(), 2);
        let f = flush(&mut dev);
        assert!(f.status.is_success());
        assert_eq!(dev.core.ftl.buffered_sectors(), 0, "{extra:?}: the flush programmed every buffered sector");
        dev.core.ftl.check_consistency().unwrap();
        let c = dev.config();
        let (n, ppb) = (&c.nand, f64::from(c.nand.pages_per_block.0 as u32));
        let ms = |ns: u64| ns as f64 / 1e6;
        let (t_prog, t_read, t_erase) = (ms(n.t_prog.0), ms(n.t_read.0), ms(n.t_erase.0));
        let dies = (n.channels.0 * n.chips_per_channel.0 * n.dies_per_chip.0) as f64;
        let pages_per_die = c.ftl.write_buffer.0 as f64 / f64::from(n.page_size.0 as u32) / dies;
        let waf = r.ftl.waf;
        let per_host_page = t_prog + (waf - 1.0) * (t_read + t_prog) + waf / ppb * t_erase;
        let victims = n.planes_per_die.0 as f64 * ppb * (1.0 - 1.0 / waf) * (t_read + t_prog);
        let bound = 1.25 * (pages_per_die * per_host_page + victims);
        eprintln!("{extra:?}: flush {:.1} ms, WAF {waf:.2}, bound {bound:.1} ms", ms(f.latency_ns));
        (ms(f.latency_ns), bound)
    };
    let (mqsim, bound) = flush_after_writes(&[("gc_priority", "urgent"), ("gc_free", "erased")]);
    assert!(mqsim < bound, "urgent GC, erased blocks: the flush took {mqsim:.1} ms, bound {bound:.1} ms");
    let (preset, bound) = flush_after_writes(&[]);
    assert!(preset > bound, "the presets' GC runs behind the host: the flush took {preset:.1} ms, bound {bound:.1} ms");
}

/// A Flush makes the host's acknowledged writes durable; the pages GC is moving are durable where they are (a victim
/// is erased only after its moves), so a Flush after GC-steady writes waits for the host's pages only: it ends
/// before the programs GC had in flight, and leaves nothing in the write buffer.
#[test]
fn a_flush_during_gc_waits_for_host_programs_only() {
    let (mut dev, _) = gc_steady_writes(&[("write_buffer", "256KiB")], 4);
    let in_flight = dev.core.programs_in_flight();
    let start = dev.now();
    let f = flush(&mut dev);
    assert!(f.status.is_success());
    assert_eq!(dev.core.ftl.buffered_sectors(), 0, "the flush programmed every buffered sector");
    let flushed = start + f.latency_ns;
    let last = in_flight.iter().map(|&p| dev.core.wait_for(p)).max().expect("programs in flight at the flush");
    assert!(flushed < last, "the flush ended at {flushed} ns, GC's last program at {last} ns");
    dev.core.ftl.check_consistency().unwrap();
}

/// The arrays answer as a map from page to its last program's end: across blocks, rewrites of a page, pruning
/// (which gives back only arrays with nothing pending) and the reuse of a given-back array by another block.
#[test]
fn programming_answers_as_a_map_of_last_program_ends() {
    use super::programming::Programming;
    use crate::engine::{At, Flow, Time};
    let mut flow: Flow<()> = Flow::new();
    let mut p = Programming::new(4);
    let mut map = std::collections::HashMap::new();
    let check = |p: &Programming, map: &std::collections::HashMap<u64, At>, flow: &Flow<()>| {
        for ppn in 0..64u64 {
            let a = p.get(ppn).is_some_and(|e| flow.pending(e));
            let b = map.get(&ppn).is_some_and(|&e| flow.pending(e));
            assert_eq!(a, b, "page {ppn}");
        }
    };
    // Pending steps (never resolved: nothing takes them from the ready queue) and known times.
    let pend: Vec<At> = (0..6).map(|_| flow.add((), Time::ZERO, &[])).collect();
    assert!(pend.iter().all(|&a| flow.pending(a)));
    let known = At::at(Time::from_ns(5));
    for (ppn, done) in [(0, pend[0]), (1, known), (5, pend[1]), (9, known), (10, known), (63, pend[2]), (1, pend[3])] {
        p.insert(ppn, done, &flow);
        map.insert(ppn, done);
        check(&p, &map, &flow);
    }
    assert_eq!(p.held(), 4);
    // Blocks 2 (pages 8..12) holds only known times: it gives its array back; the others keep theirs.
    p.prune(&flow);
    check(&p, &map, &flow);
    assert_eq!(p.held(), 3);
    assert_eq!(p.get(9), None);
    // A rewrite of a page pending before with a known time lets its block go.
    for (ppn, done) in [(5, known), (0, known), (1, known)] {
        p.insert(ppn, done, &flow);
        map.insert(ppn, done);
    }
    p.prune(&flow);
    check(&p, &map, &flow);
    assert_eq!(p.held(), 1, "only block 15 (page 63) has a pending program");
    // The freed arrays are reused by other blocks; their stale entries read as ended.
    for (ppn, done) in [(20, pend[4]), (33, known), (46, pend[5])] {
        p.insert(ppn, done, &flow);
        map.insert(ppn, done);
        check(&p, &map, &flow);
    }
    assert_eq!(p.held(), 4);
    let mut pending = p.pending(&flow);
    let mut expect: Vec<At> = map.values().copied().filter(|&e| flow.pending(e)).collect();
    let key = |a: &At| format!("{a:?}");
    pending.sort_by_key(key);
    expect.sort_by_key(key);
    assert_eq!(pending, expect);
}
