//! A write buffer of a few pages on a device of many planes: 4 KiB random writes spread its room over pages that are
//! not full, so it fills with no program to make room; the device must unstick it (pad those pages, or let a write in
//! over capacity) whenever that happens, not only when a write arrives, and must refuse a buffer too small for one
//! multi-plane program.

use nearflash_core::bench::{run, Pattern, Workload};
use nearflash_core::config::load_preset;
use nearflash_core::ftl::FillPattern;
use nearflash_core::{Device, DeviceOptions};

const KIB: u64 = 1024;

/// The core unit tests' small device (8 dies of 2 planes, 16 KiB pages) with `write_buffer` bytes of buffer.
fn small_device(write_buffer: u64) -> nearflash_core::Result<Device> {
    let mut t = load_preset("cosmos-plus").unwrap();
    for (k, v) in [("channels", "4"), ("chips_per_channel", "2"), ("blocks_per_plane", "64"), ("pages_per_block", "32"),
        ("over_provisioning", "20")] {
        t.set(k, v).unwrap();
    }
    t.set("write_buffer", &format!("{}KiB", write_buffer / KIB)).unwrap();
    Device::memory(t, DeviceOptions::default())
}

fn multi_plane_page(dev: &Device) -> u64 {
    let n = &dev.config().nand;
    n.page_size.0 * n.planes_per_die.0
}

/// Every write completes, with at least one let in over capacity (the stuck state was met), and the FTL is sound.
/// Before the fix these stopped with "workload stalled: no completion pending": a program's end gave its room to
/// waiting writes whose pages were not full, no program was left under way, and every queued command was one of
/// the waiting writes, so no arrival came to find the buffer stuck.
fn writes_run_to_the_end(dev: &mut Device, queue_depth: u32, jobs: u32, seed: u64) {
    let ios = dev.namespace().lbas / 8;
    let w = Workload { pattern: Pattern::RandWrite, block_size: 4096, queue_depth, jobs, ios, span: None, seed, data: false };
    let r = run(dev, &w, None).unwrap_or_else(|e| panic!("QD {queue_depth}, {jobs} job(s), seed {seed}: {e}")).report;
    assert_eq!(r.ops["write"].count, ios);
    assert!(r.sched.buffer_overcommits > 0, "QD {queue_depth}: the buffer was never stuck");
    dev.check_consistency().unwrap();
}

#[test]
fn random_writes_through_a_64_kib_buffer_never_stall() {
    for (queue_depth, jobs, seed) in [(16, 1, 7), (32, 1, 7), (32, 2, 11), (16, 2, 11)] {
        let mut dev = small_device(64 * KIB).unwrap();
        dev.precondition(0.9, FillPattern::Random, 1.0, 3).unwrap();
        writes_run_to_the_end(&mut dev, queue_depth, jobs, seed);
    }
}

#[test]
fn the_smallest_buffer_allowed_runs_and_one_sector_less_is_refused_naming_the_key_and_the_minimum() {
    let probe = small_device(64 * KIB).unwrap();
    let (min, sector) = (multi_plane_page(&probe), probe.lba_bytes());
    let mut dev = small_device(min).unwrap();
    dev.precondition(0.9, FillPattern::Random, 1.0, 3).unwrap();
    writes_run_to_the_end(&mut dev, 32, 2, 7);
    let err = small_device(min - sector).err().expect("a buffer below one multi-plane page is refused").to_string();
    assert!(err.contains("ftl.write_buffer") && err.contains(&format!("{min} B")), "{err}");
}
