//! Simulator speed: simulated I/Os per wall-clock second for the workloads the platform issue names.
//! `cargo run --release -p nearflash-core --example simspeed [preset] [fill] [case index] [key=value ...]`
//! (`SIMSPEED_IOS` sets the I/Os per case, 1,000,000 by default: fewer for instruction counts under callgrind;
//! `SIMSPEED_GO=path`: after each case's set-up print `READY` and wait until `path` exists, so that callgrind can be
//! switched on for the run alone with `callgrind_control -i on`).
//!
//! Cases 0-4 are the platform issue's; 5 and 6 are reads among writes (issue 24's workloads, counted since the
//! seventeenth step): 5 reads a 2 GiB span just written by 128 KiB sequential writes after the preconditioning (the
//! first read run after writes, which `benches/simspeed.py` throws away as warm-up and trace replay lives in), 6 is
//! a 70/30 random read/write mix on the GC-steady device of case 3.

use nearflash_core::bench::{run, Pattern, Workload};
use nearflash_core::config::load_preset;
use nearflash_core::ftl::FillPattern;
use nearflash_core::{Device, DeviceOptions};
use std::time::Instant;

fn main() -> nearflash_core::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let preset = args.get(1).map_or("cosmos-plus", String::as_str);
    let fill: f64 = args.get(2).map_or(0.1, |s| s.parse().unwrap_or(0.1));
    let only: Option<usize> = args.get(3).and_then(|s| s.parse().ok());
    for (i, (name, pattern, bs, qd, data, prefill, written_span)) in [
        ("4K randread QD64", Pattern::RandRead, 4096u64, 64u32, false, FillPattern::Sequential, None),
        ("4K randread QD64 (data)", Pattern::RandRead, 4096, 64, true, FillPattern::Sequential, None),
        ("128K read QD32", Pattern::Read, 131072, 32, false, FillPattern::Sequential, None),
        ("4K randwrite QD32 GC steady", Pattern::RandWrite, 4096, 32, false, FillPattern::Random, None),
        ("4K randwrite QD32 GC steady (data)", Pattern::RandWrite, 4096, 32, true, FillPattern::Random, None),
        ("4K randread QD64 after writes", Pattern::RandRead, 4096, 64, false, FillPattern::Sequential, Some(2 << 30)),
        ("4K randrw 70/30 QD32 GC steady", Pattern::RandRw(0.7), 4096, 32, false, FillPattern::Random, None),
    ]
    .into_iter()
    .enumerate()
    {
        if only.is_some_and(|o| o != i) {
            continue;
        }
        let mut tree = load_preset(preset)?;
        for kv in args.iter().skip(4) {
            let (k, v) = kv.split_once('=').ok_or_else(|| nearflash_core::SimError::InvalidArgument(format!("{kv}: expected key=value")))?;
            tree.set(k, v)?;
        }
        let mut dev = Device::memory(tree, DeviceOptions { materialise: data, ..Default::default() })?;
        let t = Instant::now();
        dev.precondition(fill, prefill, 1.0, 1)?;
        let pre = t.elapsed().as_secs_f64();
        let mut lbas = (dev.namespace().lbas as f64 * fill) as u64 / 32 * 32;
        if let Some(bytes) = written_span {
            lbas = write_span(&mut dev, bytes)?;
        }
        if let Ok(go) = std::env::var("SIMSPEED_GO") {
            println!("READY");
            while !std::path::Path::new(&go).exists() {
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
        }
        let ios = std::env::var("SIMSPEED_IOS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
        let w = Workload { pattern, block_size: bs, queue_depth: qd, jobs: 1, ios, span: Some((0, lbas)), seed: 1, data };
        let r = run(&mut dev, &w, None)?;
        let op = r.report.ops.values().next().unwrap();
        let die = r.report.utilisation.iter().find(|u| u.name == "die").map_or(0.0, |u| u.mean);
        println!(
            "{name:30} {:>10.0} sim IO/s wall | {:>9.0} IOPS {:>8.1} MB/s p99 {:>8.1} max {:>9.0} us | WAF {:.2} \
             GC stalls {} | dies {:.0}% busy | precondition {pre:.1}s",
            r.sim_ios_per_s, op.iops, op.bandwidth_mb_s, op.latency.p99_us, op.latency.max_us, r.report.ftl.waf,
            r.report.ftl.stats.gc_stalls, die * 100.0
        );
    }
    Ok(())
}

/// Writes the first `bytes` of the namespace with 128 KiB sequential writes at QD 32, as `benches/simspeed.py`
/// prepares its read cases (part of the set-up, before `READY`); returns the span in LBAs.
fn write_span(dev: &mut Device, bytes: u64) -> nearflash_core::Result<u64> {
    const BS: u64 = 131072;
    let span = bytes / dev.lba_bytes() / 32 * 32;
    let ios = span * dev.lba_bytes() / BS;
    let (pattern, span_range) = (Pattern::Write, Some((0, span)));
    let w = Workload { pattern, block_size: BS, queue_depth: 32, ios, span: span_range, ..Default::default() };
    run(dev, &w, None)?;
    Ok(span)
}
