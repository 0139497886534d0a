//! `Time`: an instant of virtual time, in nanoseconds since the device was opened.
//!
//! A newtype rather than a bare `u64` so that a byte count, a count or an LBA cannot be passed where an instant is
//! expected, and an instant cannot be used as a duration. Durations (spans) stay plain `u64` nanoseconds, named
//! `*_ns` or `dur`: every modelled cost is a preset parameter in ns that the code adds to an instant, and a second
//! newtype for them would touch every cost formula without catching anything the instant type does not. So:
//! `Time + ns -> Time`, `Time - ns -> Time`, `Time - Time -> ns`, and nothing else.
//!
//! There is deliberately no `From<u64>` or `Into<u64>`: an instant is made with [`Time::from_ns`] (or `from_us`,
//! `from_ms`) and read with [`Time::as_ns`], so every crossing between a number and an instant is visible. The
//! type costs nothing at run time (`#[repr(transparent)]` over `u64`) and serialises as the plain integer, so
//! reports and JSON do not change.
//!
//! An extension booking controller DRAM with the arguments swapped (a byte count as `ready`) does not compile:
//!
//! ```compile_fail
//! use nearflash_core::ext::{ExecCtx, Time};
//! fn stream(ctx: &mut ExecCtx<'_>, ready: Time, bytes: u64) -> Time {
//!     ctx.dram(bytes, ready)
//! }
//! ```
//!
//! nor does a count or an LBA where an instant is expected, or an instant used as a duration:
//!
//! ```compile_fail
//! use nearflash_core::ext::{ExecCtx, Time};
//! fn wait(ctx: &mut ExecCtx<'_>, lba: u64) -> Time {
//!     ctx.firmware(lba, 100.0)
//! }
//! ```
//!
//! ```compile_fail
//! use nearflash_core::engine::Time;
//! let (a, b) = (Time::from_us(1), Time::from_us(2));
//! let _ = a + b; // adding two instants means nothing
//! ```
//!
//! while the right shapes do:
//!
//! ```
//! use nearflash_core::ext::{ExecCtx, Time};
//! fn stream(ctx: &mut ExecCtx<'_>, ready: Time, bytes: u64) -> Time {
//!     ctx.dram(ready, bytes)
//! }
//! fn wait(ctx: &mut ExecCtx<'_>, ready: Time) -> Time {
//!     ctx.firmware(ready, 100.0)
//! }
//! let start = Time::from_us(1);
//! let done = start + 512; // an instant plus a span in ns
//! assert_eq!(done.as_ns(), 1_512);
//! assert_eq!(done - start, 512); // the span between two instants, in ns
//! ```

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};

/// An instant of virtual time: nanoseconds since the device was opened.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[repr(transparent)]
#[serde(transparent)]
pub struct Time(u64);

impl Time {
    /// The instant the device was opened.
    pub const ZERO: Time = Time(0);
    /// The last representable instant ("never", as a sentinel).
    pub const MAX: Time = Time(u64::MAX);

    /// The instant `ns` nanoseconds after the device was opened.
    #[inline]
    pub const fn from_ns(ns: u64) -> Time {
        Time(ns)
    }

    /// The instant `us` microseconds after the device was opened.
    #[inline]
    pub const fn from_us(us: u64) -> Time {
        Time(us * 1_000)
    }

    /// The instant `ms` milliseconds after the device was opened.
    #[inline]
    pub const fn from_ms(ms: u64) -> Time {
        Time(ms * 1_000_000)
    }

    /// Nanoseconds since the device was opened.
    #[inline]
    pub const fn as_ns(self) -> u64 {
        self.0
    }

    /// Seconds since the device was opened (for reports).
    #[inline]
    pub fn as_s(self) -> f64 {
        self.0 as f64 * 1e-9
    }

    /// Nanoseconds from `earlier` to `self`, 0 if `earlier` is later (a wait that never happened).
    #[inline]
    pub const fn saturating_since(self, earlier: Time) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    /// `ns` nanoseconds earlier, but never before the device was opened.
    #[inline]
    pub const fn saturating_sub_ns(self, ns: u64) -> Time {
        Time(self.0.saturating_sub(ns))
    }

    /// `ns` nanoseconds later, or [`Time::MAX`] where that does not fit ("never" stays never).
    #[inline]
    pub const fn saturating_add_ns(self, ns: u64) -> Time {
        Time(self.0.saturating_add(ns))
    }

    /// `ns` nanoseconds later, `None` where that does not fit.
    #[inline]
    pub const fn checked_add_ns(self, ns: u64) -> Option<Time> {
        match self.0.checked_add(ns) {
            Some(t) => Some(Time(t)),
            None => None,
        }
    }
}

/// An instant plus a span (ns) is a later instant.
impl Add<u64> for Time {
    type Output = Time;
    #[inline]
    fn add(self, ns: u64) -> Time {
        Time(self.0 + ns)
    }
}

impl AddAssign<u64> for Time {
    #[inline]
    fn add_assign(&mut self, ns: u64) {
        self.0 += ns;
    }
}

/// An instant minus a span (ns) is an earlier instant.
impl Sub<u64> for Time {
    type Output = Time;
    #[inline]
    fn sub(self, ns: u64) -> Time {
        Time(self.0 - ns)
    }
}

impl SubAssign<u64> for Time {
    #[inline]
    fn sub_assign(&mut self, ns: u64) {
        self.0 -= ns;
    }
}

/// The span (ns) between two instants. Like `u64` subtraction, an earlier minus a later instant is a bug (a panic
/// with overflow checks on); use [`Time::saturating_since`] where a negative span means "none".
impl Sub<Time> for Time {
    type Output = u64;
    #[inline]
    fn sub(self, earlier: Time) -> u64 {
        self.0 - earlier.0
    }
}

/// Nanoseconds, as the plain number (reports and messages read the same as before the newtype).
impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Debug for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_agree_on_units() {
        assert_eq!(Time::from_us(3), Time::from_ns(3_000));
        assert_eq!(Time::from_ms(2), Time::from_us(2_000));
        assert_eq!(Time::from_ns(7).as_ns(), 7);
        assert_eq!(Time::default(), Time::ZERO);
        assert_eq!(Time::from_ms(1500).as_s(), 1.5);
    }

    #[test]
    fn instant_plus_span_and_instant_minus_instant() {
        let t = Time::from_ns(100);
        assert_eq!(t + 50, Time::from_ns(150));
        assert_eq!(t - 40, Time::from_ns(60));
        assert_eq!((t + 50) - t, 50);
        let mut u = t;
        u += 5;
        u -= 2;
        assert_eq!(u, Time::from_ns(103));
    }

    #[test]
    fn saturating_forms_clamp_instead_of_wrapping() {
        let (a, b) = (Time::from_ns(10), Time::from_ns(30));
        assert_eq!(b.saturating_since(a), 20);
        assert_eq!(a.saturating_since(b), 0);
        assert_eq!(a.saturating_sub_ns(25), Time::ZERO);
        assert_eq!(Time::MAX.saturating_add_ns(1), Time::MAX);
        assert_eq!(Time::MAX.checked_add_ns(1), None);
        assert_eq!(a.checked_add_ns(1), Some(Time::from_ns(11)));
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic]
    fn earlier_minus_later_is_a_bug() {
        let _ = Time::from_ns(1) - Time::from_ns(2);
    }

    #[test]
    fn orders_and_prints_as_nanoseconds() {
        let (a, b) = (Time::from_ns(1), Time::from_ns(2));
        assert!(a < b);
        assert_eq!(a.max(b), b);
        assert_eq!(format!("{b} {b:?}"), "2 2");
        assert_eq!(serde_json::to_string(&b).unwrap(), "2");
        assert_eq!(serde_json::from_str::<Time>("42").unwrap(), Time::from_ns(42));
    }

    #[test]
    fn costs_nothing_in_memory() {
        assert_eq!(std::mem::size_of::<Time>(), 8);
        assert_eq!(std::mem::size_of::<Option<(Time, Time)>>(), std::mem::size_of::<Option<(u64, u64)>>());
    }
}
