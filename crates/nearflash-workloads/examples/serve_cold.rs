//! The serving path's cost with cold caches, compiled as the NBD plugin compiles it (the profile applies to this
//! example's crates as to the plugin's; `serve_speed`, a test, is built without it): 4 KiB random reads over the
//! first 8 GiB of a filled image through `Shared::io`, one thread, with `evict_kib` KiB of other memory written
//! between two reads (the kernel's socket work, nbdkit and fio do that in the server, docs/nbd.md).
//! `cargo run --release -p nearflash-workloads --example serve_cold IMAGE [reads] [evict_kib]`
//! (IMAGE: a copy of `benches/nbd_fio.py`'s image, `nearflash create DIR --timing-only --precondition 1.0 --set
//! channels=8 --set blocks_per_plane=128`; it is reopened and closed). Under cachegrind, the lines a read misses are
//! the difference of two runs' misses over the difference of their reads, less the `evict_kib * 16` lines written.

use nearflash_core::{Device, DeviceOptions};
use nearflash_workloads::serve::{cold, ServeConfig, Shared};
use std::path::Path;

fn main() -> nearflash_core::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let image = args.get(1).expect("usage: serve_cold IMAGE [reads] [evict_kib]");
    let reads: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let evict_kib: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1024);
    let dev = Device::open(Path::new(image), DeviceOptions::default())?;
    let span = ((8u64 << 30) / dev.lba_bytes()).min(dev.namespace().lbas);
    let shared = Shared::new(dev, ServeConfig::default())?;
    let conn = shared.connect()?;
    let median = cold::median(cold::timed_random_reads(&shared, conn, span, reads, evict_kib)?);
    println!("{reads} reads, {evict_kib} KiB written between reads: Shared::io {:.2} us median", median.as_secs_f64() * 1e6);
    shared.disconnect(conn);
    match shared.take() {
        Some(d) => d.close(),
        None => Ok(()),
    }
}
