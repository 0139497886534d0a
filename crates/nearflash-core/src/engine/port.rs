//! A bandwidth-limited port: one transfer at a time on one timeline, whole nanoseconds rounded up, energy per byte.
//! The host link (each direction) and controller DRAM are ports.

use super::{EnergyAccount, EnergyLedger, ResourceId, Resources, Time};

#[derive(Debug, Clone, Copy)]
pub struct Port {
    resource: ResourceId,
    bytes_per_s: f64,
    account: EnergyAccount,
    pj_per_byte: f64,
    /// The time and energy of the last two sizes moved.
    memo: Memo2,
}

/// The results of a pure computation for the last two keys it was asked for. Most bookings of a port or a core
/// repeat one of two sizes (on the link up a read's data and its completion entry; on the controller cores a
/// command's firmware path and its page step), and a rate's division and rounding cost more than the look-up.
/// Exact: a result is the computation's own, made once per key and kept while the key keeps coming.
#[derive(Debug, Clone, Copy)]
pub struct Memo2 {
    keys: [u64; 2],
    vals: [(u64, f64); 2],
    /// The entry a new key replaces (in turn).
    older: usize,
}

impl Memo2 {
    /// A memo holding `f`'s result for key 0 (no key is ever answered with anything but `f`'s result).
    pub fn new(f: impl Fn(u64) -> (u64, f64)) -> Self {
        Memo2 { keys: [0; 2], vals: [f(0); 2], older: 0 }
    }

    /// `f(key)`, computed only when `key` is not one of the last two asked for.
    #[inline]
    pub fn get(&mut self, key: u64, f: impl FnOnce(u64) -> (u64, f64)) -> (u64, f64) {
        if self.keys[0] == key {
            return self.vals[0];
        }
        if self.keys[1] == key {
            return self.vals[1];
        }
        let v = f(key);
        let i = self.older;
        (self.keys[i], self.vals[i], self.older) = (key, v, 1 - i);
        v
    }
}

impl Port {
    pub fn new(resource: ResourceId, bytes_per_s: f64, account: EnergyAccount, pj_per_byte: f64) -> Self {
        let memo = Memo2::new(|bytes| port_cost(bytes, bytes_per_s, pj_per_byte));
        Port { resource, bytes_per_s, account, pj_per_byte, memo }
    }

    pub fn bytes_per_s(&self) -> f64 {
        self.bytes_per_s
    }

    /// Time to move `bytes`.
    pub fn ns(&self, bytes: u64) -> u64 {
        port_ns(bytes, self.bytes_per_s)
    }

    /// Moves `bytes` through the port from `ready` (or the first gap after it) and charges their energy; returns
    /// when the last byte is through.
    pub fn transfer(&mut self, res: &mut Resources, ledger: &mut EnergyLedger, ready: Time, bytes: u64) -> Time {
        let (bytes_per_s, pj_per_byte) = (self.bytes_per_s, self.pj_per_byte);
        let (d, pj) = self.memo.get(bytes, |b| port_cost(b, bytes_per_s, pj_per_byte));
        let start = res.reserve_inline(self.resource, ready, d);
        ledger.charge(self.account, pj);
        start + d
    }

    /// `transfer` of `bytes`, then at once (from when they are through) of `then_bytes`: the same bookings and
    /// charges as the two calls (nothing else books the port or charges between them), with one look-up of the
    /// port's timeline. Returns when each is through.
    pub fn transfer_then(&mut self, res: &mut Resources, ledger: &mut EnergyLedger, ready: Time, bytes: u64, then_bytes: u64) -> (Time, Time) {
        let (bytes_per_s, pj_per_byte) = (self.bytes_per_s, self.pj_per_byte);
        let (d, pj) = self.memo.get(bytes, |b| port_cost(b, bytes_per_s, pj_per_byte));
        let (d2, pj2) = self.memo.get(then_bytes, |b| port_cost(b, bytes_per_s, pj_per_byte));
        // One pruning: the second's would find nothing more (the clock has not moved).
        let tl = res.timeline_mut(self.resource);
        let first = tl.reserve(ready, d) + d;
        let second = tl.reserve(first, d2) + d2;
        ledger.charge(self.account, pj);
        ledger.charge(self.account, pj2);
        (first, second)
    }
}

/// The time (`port_ns`) and energy (pJ) of moving `bytes`.
fn port_cost(bytes: u64, bytes_per_s: f64, pj_per_byte: f64) -> (u64, f64) {
    (port_ns(bytes, bytes_per_s), pj_per_byte * super::u64_as_f64(bytes))
}

/// Time to move `bytes` at `bytes_per_s`, whole nanoseconds rounded up.
fn port_ns(bytes: u64, bytes_per_s: f64) -> u64 {
    if bytes == 0 {
        0
    } else {
        super::ceil_ns(super::u64_as_f64(bytes) * 1e9 / bytes_per_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A port `link` of this rate and energy per byte on its own timeline.
    fn link(bytes_per_s: f64, pj_per_byte: f64) -> (Resources, EnergyLedger, Port) {
        let mut res = Resources::new();
        let mut ledger = EnergyLedger::new();
        let g = res.add_group("link", 1);
        let port = Port::new(res.member(g, 0), bytes_per_s, ledger.account("link"), pj_per_byte);
        (res, ledger, port)
    }

    #[test]
    fn transfers_serialise_and_charge_per_byte() {
        let (mut res, mut ledger, mut port) = link(1e9, 2.0);
        assert_eq!(port.ns(0), 0);
        assert_eq!(port.ns(3), 3);
        assert_eq!(port.ns(1), 1, "rounded up to whole ns");
        let a = port.transfer(&mut res, &mut ledger, Time::ZERO, 1000);
        let b = port.transfer(&mut res, &mut ledger, Time::ZERO, 1000);
        assert_eq!((a, b), (Time::from_ns(1000), Time::from_ns(2000)), "one transfer at a time");
        assert!((ledger.dynamic_joules()["link"] - 4000e-12).abs() < 1e-18);
    }

    #[test]
    fn memo_answers_what_the_computation_answers() {
        let calls = std::cell::Cell::new(0);
        let f = |k: u64| {
            calls.set(calls.get() + 1);
            (k * 3 + 1, k as f64 / 7.0)
        };
        let mut m = Memo2::new(f);
        assert_eq!(calls.get(), 1);
        for k in [0, 5, 9, 5, 9, 5, 0, 0, 12, 9, 12, 1 << 40, 5] {
            assert_eq!(m.get(k, f), f(k));
        }
        // 13 look-ups, each checked against a call of its own: 13 calls, plus the new keys' (5, 9, 0 again after
        // both slots moved on, 12, 9 again, 1 << 40, 5 again) and the one at construction.
        assert_eq!(calls.get(), 1 + 13 + 7);
    }

    #[test]
    fn transfers_of_alternating_sizes_take_what_each_size_takes() {
        let (mut res, mut ledger, mut port) = link(3.3e9, 1.05);
        let mut t = Time::ZERO;
        let mut pj = 0.0;
        for bytes in [4096u64, 16, 4096, 16, 64, 0, 7, 4096, 0] {
            let done = port.transfer(&mut res, &mut ledger, t, bytes);
            assert_eq!(done, t + port.ns(bytes), "{bytes} bytes");
            pj += 1.05 * bytes as f64;
            t = done;
        }
        assert_eq!(ledger.dynamic_joules()["link"], pj * 1e-12);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
        /// `transfer_then` books, returns and charges what `transfer` then `transfer` from the first's end do, whatever
        /// the port's earlier bookings (gaps a transfer fits in or not, bookings far ahead), sizes (zero, repeated,
        /// new ones past the memo's two) and pruning between calls; the port's later bookings agree too.
        #[test]
        fn transfer_then_is_two_transfers(
            ops in proptest::collection::vec((0u8..3, 0u64..5_000, 0u64..4, 0u64..4), 1..120),
        ) {
            let sizes = [0u64, 16, 4096, 1000];
            let (mut res, mut ledger, mut port) = link(3.2e9, 1.5);
            let (mut res2, mut ledger2, mut port2) = (res.clone(), ledger.clone(), port);
            let mut now = 0u64;
            for (kind, at, a, b) in ops {
                let ready = Time::from_ns(now + at);
                let (x, y) = (sizes[a as usize], sizes[b as usize]);
                match kind {
                    // A lone booking, possibly far ahead (leaving gaps before it).
                    0 => {
                        let t = port.transfer(&mut res, &mut ledger, ready + 20_000 * b, x);
                        proptest::prop_assert_eq!(t, port2.transfer(&mut res2, &mut ledger2, ready + 20_000 * b, x));
                    }
                    1 => {
                        let first = port.transfer(&mut res, &mut ledger, ready, x);
                        let second = port.transfer(&mut res, &mut ledger, first, y);
                        proptest::prop_assert_eq!((first, second), port2.transfer_then(&mut res2, &mut ledger2, ready, x, y));
                    }
                    // The clock moves on: both prune.
                    _ => {
                        now += at;
                        res.prune(Time::from_ns(now));
                        res2.prune(Time::from_ns(now));
                    }
                }
                proptest::prop_assert_eq!(ledger.dynamic_joules(), ledger2.dynamic_joules());
            }
            // The same timeline: the same answers to a sweep of later bookings.
            for k in 0..50u64 {
                let ready = Time::from_ns(now + k * 700);
                proptest::prop_assert_eq!(port.transfer(&mut res, &mut ledger, ready, 4096), port2.transfer(&mut res2, &mut ledger2, ready, 4096));
            }
        }
    }
}
