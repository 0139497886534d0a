//! Virtual time: a nanosecond clock, resource timelines, the energy ledger and seeded random streams.
//!
//! The engine is deliberately small: reservation timelines for resources that serve requests as they come (link,
//! cores, DRAM, compute units), an event queue for the device's event loop, and timing plans (`flow`): each
//! command's timing as a graph of steps whose ends (`At`) become known as the loop resolves them. Given the same
//! inputs and seed, every event and reservation and therefore every reported number is identical.

mod energy;
pub mod events;
pub mod flow;
mod fasthash;
mod fifo;
mod port;
mod resources;
mod rng;
mod time;
mod timeline;

pub use energy::{EnergyAccount, EnergyLedger};
pub use events::{EventQueue, Schedule};
pub use flow::{At, Flow, Lazy, LazyJoin};
pub use fasthash::{IntHasher, IntMap};
pub use fifo::HeadVec;
pub use port::{Memo2, Port};
pub use resources::{GroupId, GroupUtilisation, ResourceId, Resources};
pub use rng::{rng_stream, Rng};
pub use time::Time;
pub use timeline::Timeline;

/// `x` ns rounded up to whole nanoseconds, exactly `x.ceil() as u64` (0 for NaN and negatives, `u64::MAX` past
/// its range), without the call to a library `ceil` that the baseline x86-64 target makes: every duration computed
/// from a rate goes through here.
#[inline]
pub fn ceil_ns(x: f64) -> u64 {
    // In [0, 2^63) (every duration a run computes) the signed conversions, one instruction each on x86-64, give
    // what the unsigned ones give (about a dozen instructions each there, with their saturation): the same value.
    // Two comparisons, not `Range::contains`: that form counted 24 instructions more a read (plain build).
    #[allow(clippy::manual_range_contains)]
    if x >= 0.0 && x < I64_END {
        let t = x as i64;
        return (t + i64::from((t as f64) < x)) as u64;
    }
    let t = x as u64;
    t.saturating_add(u64::from((t as f64) < x))
}

/// 2^63 as an `f64`: the first value past `i64`'s range.
const I64_END: f64 = 9_223_372_036_854_775_808.0;

/// `x as f64` (rounded to nearest, as `as` does), through the signed conversion (one instruction on x86-64, about
/// six for the unsigned one) when `x` is in `i64`'s range: byte counts and durations, converted on every booking.
#[inline]
pub fn u64_as_f64(x: u64) -> f64 {
    match i64::try_from(x) {
        Ok(i) => i as f64,
        Err(_) => x as f64,
    }
}

/// Converts nanoseconds to seconds for reports.
pub fn ns_to_s(ns: u64) -> f64 {
    ns as f64 * 1e-9
}

#[cfg(test)]
mod tests {
    use super::{ceil_ns, u64_as_f64};
    use proptest::prelude::*;

    #[test]
    fn ceil_ns_at_the_edges() {
        for x in [0.0, -0.0, 0.5, 1.0, 1.000_000_1, 2.5e9, 9_007_199_254_740_993.0, -3.7, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1.9e19, 1e300] {
            assert_eq!(ceil_ns(x), x.ceil() as u64, "{x}");
        }
        // Both sides of 2^63, where the fast path ends.
        for x in [9.223_372_036_854_775e18, 9_223_372_036_854_775_808.0, 9.223_372_036_854_777e18, f64::MIN_POSITIVE, -f64::MIN_POSITIVE, 4_503_599_627_370_495.5] {
            assert_eq!(ceil_ns(x), x.ceil() as u64, "{x}");
        }
        for x in [0, 1, (1 << 53) + 1, i64::MAX as u64, 1 << 63, u64::MAX] {
            assert_eq!(u64_as_f64(x).to_bits(), (x as f64).to_bits(), "{x}");
        }
    }

    proptest! {
        #[test]
        fn ceil_ns_is_ceil(x in any::<f64>(), bytes in 0u64..1 << 40, rate in 1.0f64..1e12) {
            prop_assert_eq!(ceil_ns(x), x.ceil() as u64);
            let y = bytes as f64 * 1e9 / rate;
            prop_assert_eq!(ceil_ns(y), y.ceil() as u64);
        }

        #[test]
        fn u64_as_f64_is_as(x in any::<u64>(), shift in 0u32..64) {
            prop_assert_eq!(u64_as_f64(x).to_bits(), (x as f64).to_bits());
            let y = x >> shift;
            prop_assert_eq!(u64_as_f64(y).to_bits(), (y as f64).to_bits());
        }
    }
}
