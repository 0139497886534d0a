//! The serving path timed with cold caches, as the NBD server runs it: 4 KiB random reads through [`Shared::io`] from
//! one thread, with other memory written between two reads (the kernel's socket work, nbdkit and fio do that in the
//! server, docs/nbd.md). Shared by the `serve_cold` example (built as the plugin is, with the profile) and the
//! `serve_speed` test (built without it), so both time the same loop.

use super::{Io, Shared};
use nearflash_core::error::Result;
use std::time::{Duration, Instant};

/// `reads` 4 KiB reads at LBAs drawn from `[0, span)` (a fixed sequence), `evict_kib` KiB written between two of
/// them; the wall time of each `Shared::io` call alone, in the order made.
pub fn timed_random_reads(shared: &Shared, conn: u64, span: u64, reads: u64, evict_kib: usize) -> Result<Vec<Duration>> {
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
        shared.io(conn, Io::Read { lba: (x >> 33) % span.max(1), out: &mut buf })?;
        in_io.push(t.elapsed());
    }
    std::hint::black_box(&other);
    Ok(in_io)
}

/// The median of some call times (zero for none): on shared cores a call the thread was preempted in takes
/// milliseconds, so the median, not the mean, is the call's cost.
pub fn median(mut times: Vec<Duration>) -> Duration {
    times.sort_unstable();
    times.get(times.len() / 2).copied().unwrap_or_default()
}
