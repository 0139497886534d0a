//! The serving path's cost with cold caches, compiled as the NBD plugin compiles it (the profile applies to this
//! example's crates as to the plugin's; `serve_speed`, a test, is built without it): 4 KiB random reads over the
//! first 8 GiB of a filled image through `Shared::io`, one thread, with `evict_kib` KiB of other memory written
//! between two reads (the kernel's socket work, nbdkit and fio do that in the server, docs/nbd.md).
//! `cargo run --release -p nearflash-workloads --example serve_cold IMAGE [reads] [evict_kib]`
//! (IMAGE: a copy of `benches/nbd_fio.py`'s image, `nearflash create DIR --timing-only --precondition 1.0 --set
//! channels=8 --set blocks_per_plane=128`; it is reopened and closed). Under cachegrind, the lines a read misses are
//! the difference of two runs' misses over the difference of their reads, less the `evict_kib * 16` lines written.

use nearflash_core::{Device, DeviceOptions};
use nearflash_workloads::serve::{Io, ServeConfig, Shared};
use std::path::Path;
use std::time::Instant;

fn main() -> nearflash_core::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let image = args.get(1).expect("usage: serve_cold IMAGE [reads] [evict_kib]");
    let reads: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let evict_kib: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1024);
    let dev = Device::open(Path::new(image), DeviceOptions::default())?;
    let span = ((8u64 << 30) / dev.lba_bytes()).min(dev.namespace().lbas);
    let shared = Shared::new(dev, ServeConfig::default())?;
    let conn = shared.connect()?;
    let mut buf = vec![0u8; 4096];
    let mut other = vec![0u8; evict_kib << 10];
    let mut x = 11u64;
    let mut in_io = Vec::with_capacity(reads as usize);
    for i in 0..reads {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407); // Knuth's MMIX LCG
        for line in other.chunks_mut(64) {
            line[0] = i as u8;
        }
        let t = Instant::now();
        shared.io(conn, Io::Read { lba: (x >> 33) % span, out: &mut buf })?;
        in_io.push(t.elapsed());
    }
    std::hint::black_box(&other);
    // The median call: on shared cores a call the thread was preempted in takes milliseconds.
    in_io.sort_unstable();
    let median = in_io.get(in_io.len() / 2).copied().unwrap_or_default();
    println!("{reads} reads, {evict_kib} KiB written between reads: Shared::io {:.2} us median", median.as_secs_f64() * 1e6);
    shared.disconnect(conn);
    match shared.take() {
        Some(d) => d.close(),
        None => Ok(()),
    }
}
