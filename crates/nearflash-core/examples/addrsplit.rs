//! The per-read address split alone: a physical sector address to its page, slot, plane, die and channel, with the
//! plain geometry (hardware divisions) and with `FastGeometry` (divisors strength-reduced once), alternated in one
//! process over the same random addresses.
//! `cargo run --release -p nearflash-core --example addrsplit [preset] [rounds] [key=value ...]`

use nearflash_core::config::{load_preset, DeviceConfig};
use nearflash_core::nand::{FastGeometry, Geometry};
use std::hint::black_box;

/// Random physical sector addresses below `limit` (xorshift: the same on every run).
fn addresses(limit: u64, n: usize) -> Vec<u64> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % limit
        })
        .collect()
}

/// What a read takes from its address, folded into one number so that none of it is optimised away.
fn split_plain(g: &Geometry, psa: u64) -> u64 {
    let spp = u64::from(g.sectors_per_page);
    let a = g.page_addr(psa / spp);
    let die = g.die_of_plane(a.plane);
    (psa % spp) ^ u64::from(a.page) ^ u64::from(a.block) << 8 ^ u64::from(g.plane_in_die(a.plane)) << 20
        ^ u64::from(die) << 24 ^ u64::from(g.channel_of_die(die)) << 40
}

fn split_fast(g: &FastGeometry, psa: u64) -> u64 {
    let a = g.page_addr(g.ppn_of_psa(psa));
    let die = g.die_of_plane(a.plane);
    u64::from(g.slot_of_psa(psa)) ^ u64::from(a.page) ^ u64::from(a.block) << 8 ^ u64::from(g.plane_in_die(a.plane)) << 20
        ^ u64::from(die) << 24 ^ u64::from(g.channel_of_die(die)) << 40
}

/// This thread's CPU time in seconds: on a shared machine, wall time would count the time others ran.
fn cpu_seconds() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// CPU nanoseconds per split over `psas`, and the folded result.
fn time(psas: &[u64], split: impl Fn(u64) -> u64) -> (f64, u64) {
    let t = cpu_seconds();
    let mut acc = 0u64;
    for _ in 0..16 {
        for &p in psas {
            acc = acc.wrapping_add(split(black_box(p)));
        }
    }
    ((cpu_seconds() - t) * 1e9 / (16 * psas.len()) as f64, acc)
}

fn main() -> nearflash_core::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let mut tree = load_preset(args.get(1).map_or("cosmos-plus", String::as_str))?;
    let rounds: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(6);
    for kv in args.iter().skip(3) {
        let (k, v) = kv.split_once('=').ok_or_else(|| nearflash_core::SimError::InvalidArgument(format!("{kv}: expected key=value")))?;
        tree.set(k, v)?;
    }
    let fast = FastGeometry::from_config(&DeviceConfig::from_tree(&tree)?);
    let plain = fast.plain().clone();
    let psas = addresses(plain.sectors(), 1 << 20);
    for round in 1..=rounds {
        let (p, a) = time(&psas, |x| split_plain(&plain, x));
        let (f, b) = time(&psas, |x| split_fast(&fast, x));
        assert_eq!(a, b, "the two splits differ");
        println!("round {round}: plain {p:.2} ns, reduced {f:.2} ns CPU per split (reduced/plain {:.3})", f / p);
    }
    Ok(())
}
