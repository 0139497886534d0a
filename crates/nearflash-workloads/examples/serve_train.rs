//! Profile training for the serving path (`scripts/pgo.sh` runs it instrumented; docs/development.md).
//! `cargo run --release -p nearflash-workloads --example serve_train [reads]`
//!
//! Drives `Shared::io` as nbdkit drives it under `benches/nbd_fio.py`'s fio job, so that the profile knows the NBD
//! plugin's hot path (`nearflash_workloads::serve` and the core's read as the server calls it, on an image opened
//! from its files): a timing-only, filled cosmos-plus reopened from a temporary directory, one connection served at
//! pace none with nbdkit's 64 worker threads, 32 client threads each reading 4 KiB blocks at random over the first
//! 8 GiB (fio at iodepth 32), the status file's snapshot every few thousand reads. Then, so that the rarer paths are
//! in the profile with their true (small) weight rather than taken for never run: a second connection's writes,
//! FUA writes, flushes, trims and Write Zeroes, and a short run at realtime pace.
//! An example, not a test: a test binary's symbols would carry other crate hashes than the plugin's build, and the
//! profile would not match the plugin's functions.

use nearflash_core::config::load_preset;
use nearflash_core::{Device, DeviceOptions, FillPattern};
use nearflash_workloads::serve::{batch_scheduling, Io, Pace, ServeConfig, Shared};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};

/// fio's iodepth in the benchmark: one client thread per request in flight.
const DEPTH: u64 = 32;
/// fio's span in the benchmark (`--size=8g`).
const SPAN_BYTES: u64 = 8 << 30;
/// The status file is rewritten about every 0.4 s while requests arrive: one snapshot per this many reads.
const READS_PER_SNAPSHOT: u64 = 20_000;

fn main() -> nearflash_core::Result<()> {
    let reads: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let dir = std::env::temp_dir().join(format!("nearflash-serve-train-{}", std::process::id()));
    let result = train(&dir, reads);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn train(dir: &Path, reads: u64) -> nearflash_core::Result<()> {
    filled_image(dir)?;
    let shared = Arc::new(serve(dir, Pace::None)?);
    let lbas = shared.with_device(|d| ((SPAN_BYTES / d.lba_bytes()).min(d.namespace().lbas), d.lba_bytes()))?;
    let t = std::time::Instant::now();
    random_reads(&shared, lbas, DEPTH, reads / DEPTH);
    println!("serve_train: {reads} reads at depth {DEPTH} (pace none) in {:.2} s", t.elapsed().as_secs_f64());
    rare_requests(&shared, lbas);
    close(&shared)?;
    let shared = Arc::new(serve(dir, Pace::Realtime)?);
    random_reads(&shared, lbas, 4, 250);
    close(&shared)
}

/// The benchmark's device (cosmos-plus, 8 channels, 128 blocks per plane: 59.5 GiB; fewer blocks leave GC too few),
/// timing-only and filled sequentially, as `nearflash create --timing-only --precondition 1.0` makes it (~10 s).
fn filled_image(dir: &Path) -> nearflash_core::Result<()> {
    let mut tree = load_preset("cosmos-plus")?;
    tree.set("channels", "8")?;
    tree.set("blocks_per_plane", "128")?;
    let mut dev = Device::create(dir, tree, DeviceOptions { materialise: false, ..Default::default() })?;
    dev.precondition(1.0, FillPattern::Sequential, 0.0, 1)?;
    dev.close()
}

/// The image reopened and shared, as the plugin's `get_ready` does (`nearflash serve --pace P --threads 64`).
fn serve(dir: &Path, pace: Pace) -> nearflash_core::Result<Shared> {
    let dev = Device::open(PathBuf::from(dir).as_path(), DeviceOptions::default())?;
    Shared::new(dev, ServeConfig { pace, ..ServeConfig::default() })
}

/// `depth` client threads on one connection, each sending `each` 4 KiB reads at random LBAs below `span`, one
/// after the other (fio at iodepth `depth`), started together so that the first burst is the client's depth.
fn random_reads(shared: &Arc<Shared>, (span, lba_bytes): (u64, u64), depth: u64, each: u64) {
    if shared.pace() == Pace::None {
        batch_scheduling(); // the plugin's connection thread does it; its workers inherit it
    }
    let conn = shared.connect().expect("a free queue");
    let start = Arc::new(Barrier::new(depth as usize));
    let threads: Vec<_> = (0..depth)
        .map(|t| {
            let (s, start) = (Arc::clone(shared), Arc::clone(&start));
            std::thread::spawn(move || {
                let mut buf = vec![0u8; lba_bytes as usize];
                let mut x = 11 + t;
                start.wait();
                for i in 0..each {
                    x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                    let o = s.io(conn, Io::Read { lba: (x >> 33) % span, out: &mut buf }).expect("served");
                    assert!(o.status.is_success(), "read failed: {:?}", o.status);
                    if t == 0 && i % (READS_PER_SNAPSHOT / depth).max(1) == 0 {
                        s.snapshot().expect("a snapshot");
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a client thread");
    }
    shared.disconnect(conn);
}

/// A few hundred of each other request on a second connection, one thread: written, overwritten with FUA, flushed,
/// trimmed, zeroed (with and without deallocation), and read back.
fn rare_requests(shared: &Arc<Shared>, (span, lba_bytes): (u64, u64)) {
    let conn = shared.connect().expect("a free queue");
    let data = vec![0x5au8; lba_bytes as usize * 8];
    let mut buf = vec![0u8; lba_bytes as usize * 8];
    let ok = |io: Io<'_>| {
        let o = shared.io(conn, io).expect("served");
        assert!(o.status.is_success(), "request failed: {:?}", o.status);
    };
    for i in 0..200u64 {
        let lba = (i * 7919 * 8) % (span - 8);
        ok(Io::Write { lba, data: &data, fua: false });
        ok(Io::Write { lba, data: &data[..lba_bytes as usize], fua: true });
        ok(Io::Read { lba, out: &mut buf });
        if i % 4 == 0 {
            ok(Io::Flush);
            ok(Io::Trim { lba, blocks: 8, fua: false });
            ok(Io::Zero { lba, blocks: 8, deallocate: i % 8 == 0, fua: i % 16 == 0 });
        }
    }
    shared.disconnect(conn);
}

/// The device taken back and closed, as the plugin's `unload` does.
fn close(shared: &Shared) -> nearflash_core::Result<()> {
    shared.snapshot()?;
    match shared.take() {
        Some(dev) => dev.close(),
        None => Ok(()),
    }
}
