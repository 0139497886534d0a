//! A resource's timeline: the intervals of virtual time during which it is reserved.
//!
//! Every modelled resource (a channel bus, a die, an ECC engine, a controller core, the DRAM port, each direction of
//! the host link, a compute unit) is a `Timeline`. An operation reserves it for a duration at the earliest time it
//! is both ready and free. Reservations may fill gaps left between earlier, later-starting reservations: a short
//! command phase on a channel can slip in before a data transfer that was booked for after a tR. Reservations are
//! never made before the engine's current time, so intervals that ended are pruned.

use super::Time;

#[derive(Debug, Clone, Default)]
pub struct Timeline {
    /// Sorted, disjoint, non-touching reserved intervals `[start, end)`: `busy[head..]` (those before `head` were
    /// pruned; the vector is cleared when all are, and compacted when the pruned half leads). A vector with a head
    /// rather than a `VecDeque`: its last and first intervals, read on every booking, are one index away, and a
    /// search scans one slice.
    busy: Vec<(Time, Time)>,
    head: usize,
    /// At least the longest gap between two consecutive intervals kept (`busy[head..]`; 0 with fewer than two): a
    /// search for a longer duration cannot start between two intervals, so it starts at `ready` or after the last
    /// one, without a scan. A pool member holding a train of bookings ahead of the clock (a controller core taking
    /// each read's short second step while the other runs the long first steps back to back) is searched on every
    /// booking, and no booking fits between the train's cars. Only an interval appended after a gap or inserted
    /// apart before the first raises it; inserting between two, merging and pruning only shorten or drop gaps, so it
    /// stays a bound without being lowered there, and a search that finds it too loose (`find_mut`) makes it exact.
    gap_bound: u64,
    busy_total: u64,
    ops: u64,
}

impl Timeline {
    pub fn new() -> Self {
        Self::default()
    }

    /// The reservations not pruned, in order.
    #[inline]
    fn live(&self) -> &[(Time, Time)] {
        &self.busy[self.head..]
    }

    /// Earliest start `>= ready` at which `[start, start + dur)` is free.
    #[inline]
    pub fn find(&self, ready: Time, dur: u64) -> Time {
        match self.find_unsearched(ready, dur) {
            Some(start) => start,
            None => self.find_among(ready, dur),
        }
    }

    /// `find`'s answer where it needs no search among the intervals, else `None`. Fast paths, inlined into the
    /// callers: everything booked ends by `ready` (most searches, a pool's idle members); or only the last interval
    /// ends after it (a pool's busy members: the booking running, or a run of merged ones), when the answer is
    /// `ready` if it fits before that interval, else its end. Only a search among the intervals pays for a call.
    #[inline]
    pub fn find_unsearched(&self, ready: Time, dur: u64) -> Option<Time> {
        match self.busy.last() {
            Some(&(start, end)) if end > ready && dur > 0 => {
                self.only_last_after(ready).then(|| if ready + dur <= start { ready } else { end })
            }
            _ => Some(ready),
        }
    }

    /// Whether no interval but the last ends after `t` (the last does). Exact whatever was pruned: an interval
    /// before the head ended at or before a pruning point, and the ones kept are sorted.
    #[inline]
    fn only_last_after(&self, t: Time) -> bool {
        let n = self.busy.len();
        n < 2 || self.busy[n - 2].1 <= t
    }

    /// `find` where the last interval ends after `ready`.
    #[inline(never)]
    fn find_among(&self, ready: Time, dur: u64) -> Time {
        if let Some(start) = self.fits_no_gap(ready, dur) {
            return start;
        }
        let mut t = ready;
        let live = self.live();
        let first = first_ending_after(live, t);
        first_fit(&mut t, dur, &live[first..]).unwrap_or(t)
    }

    /// `find`'s answer when `dur` is longer than every gap between two intervals (`gap_bound`), else `None`: the
    /// booking starts at `ready` if it ends before the first interval kept starts (the search never looked at those
    /// pruned), and otherwise after the last one, since from inside an interval or a gap between two it can only
    /// move on past each of the later ones. No search.
    #[inline]
    fn fits_no_gap(&self, ready: Time, dur: u64) -> Option<Time> {
        if dur <= self.gap_bound {
            return None;
        }
        let (first_start, last_end) = (self.busy[self.head].0, self.horizon());
        Some(if ready + dur <= first_start { ready } else { last_end })
    }

    /// `find`, which also makes `gap_bound` exact again when a search it did not spare (the bound reaching `dur`)
    /// found no gap to fit in: the pools' searches (`Resources::reserve_any`), where a core's train of bookings
    /// ahead of the clock keeps its intervals and a gap long since filled or pruned would otherwise keep every
    /// later search scanning them. The same answer as `find`.
    #[inline]
    pub fn find_mut(&mut self, ready: Time, dur: u64) -> Time {
        let start = self.find(ready, dur);
        // The scan ran (`find_among`, not spared by the bound) and reached the end.
        let scanned_in_vain =
            start > ready && dur <= self.gap_bound && !self.only_last_after(ready) && start == self.horizon();
        if scanned_in_vain {
            self.gap_bound = longest_gap(self.live());
        }
        start
    }

    /// Whether `[ready, ready + dur)` is free, i.e. `find(ready, dur) == ready`, without searching for the later
    /// start when it is not: a pool's booking asks this of its members first (`Resources::reserve_any`), and the
    /// host cores hold bookings ahead of the clock whose search `find` would pay for when another member is free.
    #[inline]
    pub fn free_at(&self, ready: Time, dur: u64) -> bool {
        match self.busy.last() {
            Some(&(start, end)) if end > ready && dur > 0 => {
                if self.only_last_after(ready) {
                    return ready + dur <= start;
                }
                // Most often the first interval kept ends after `ready` (pruning leaves the front at the clock):
                // then the booking is free if it ends before that interval starts. Otherwise `ready` lies in an
                // interval or in a gap between two, where nothing longer than `gap_bound` fits; else the second
                // interval kept answers the same way when it ends after `ready` (a host core not booked since the
                // clock passed its first: it exists, as the one before the last ends after `ready`); else a search.
                match self.busy[self.head] {
                    (s, e) if e > ready => ready + dur <= s,
                    _ if dur > self.gap_bound => false,
                    _ => match self.busy[self.head + 1] {
                        (s, e) if e > ready => ready + dur <= s,
                        _ => self.is_free(ready, ready + dur),
                    },
                }
            }
            _ => true,
        }
    }

    /// Whether `[start, end)` overlaps no reservation.
    pub fn is_free(&self, start: Time, end: Time) -> bool {
        if start >= end {
            return true;
        }
        let live = self.live();
        let i = first_ending_after(live, start);
        live.get(i).is_none_or(|&(s, _)| s >= end)
    }

    /// Reserves `dur` at the earliest free time `>= ready`; returns the start. (The same booking as `find` then
    /// `commit`, with one search of the intervals instead of two: this is the simulator's innermost call.) Always
    /// inlined: the gap bound's two appending arms took it past the inliner's threshold at the ports' call sites,
    /// where the call cost more than the fast path (157 instructions per read).
    #[inline(always)]
    pub fn reserve(&mut self, ready: Time, dur: u64) -> Time {
        if dur == 0 {
            return ready;
        }
        // Fast paths, inlined into the callers (most bookings of a port): after everything booked, extending the
        // last interval if it ends at `ready`; or, when only the last interval ends after `ready` and the booking
        // does not fit before it, at its end (extending it). Only a booking among the intervals pays for a call.
        let only_last = self.only_last_after(ready);
        let start = match self.busy.last_mut() {
            // Only the last interval ends after `ready` and the booking does not fit before it: it extends it.
            Some(last) if last.1 > ready && only_last && ready + dur > last.0 => {
                let t = last.1;
                last.1 = t + dur;
                t
            }
            Some(last) if last.1 > ready => return self.reserve_among(ready, dur),
            Some(last) if last.1 == ready => {
                last.1 = ready + dur;
                ready
            }
            Some(last) => {
                let gap = ready - last.1;
                self.push_after_gap(ready, ready + dur, gap);
                ready
            }
            None => {
                self.push_first(ready, ready + dur);
                ready
            }
        };
        self.busy_total += dur;
        self.ops += 1;
        start
    }

    /// `reserve` where the last interval ends after `ready`.
    #[inline(never)]
    fn reserve_among(&mut self, ready: Time, dur: u64) -> Time {
        let mut t = ready;
        let live = &self.busy[self.head..];
        let first = first_ending_after(live, t);
        let mut at = live.len();
        for (j, &(s, e)) in live.iter().enumerate().skip(first) {
            if t + dur <= s {
                at = j;
                break;
            }
            t = t.max(e);
        }
        // `[t, t + dur)` lies between interval `at - 1` (ending at or before `t`) and interval `at` (if any).
        let end = t + dur;
        self.busy_total += dur;
        self.ops += 1;
        let touches_prev = at > 0 && live[at - 1].1 == t;
        let touches_next = at < live.len() && live[at].0 == end;
        let (at, len) = (self.head + at, self.busy.len());
        match (touches_prev, touches_next) {
            (true, true) => {
                self.busy[at - 1].1 = self.busy[at].1;
                self.busy.remove(at);
            }
            (true, false) => self.busy[at - 1].1 = end,
            (false, true) => self.busy[at].0 = t,
            (false, false) if at == len => self.busy.push((t, end)),
            (false, false) => self.insert_before(at, (t, end)),
        }
        t
    }

    /// Books `[start, end)`, which the caller has checked is free.
    #[inline]
    pub fn commit(&mut self, start: Time, end: Time) {
        if start >= end {
            return;
        }
        debug_assert!(self.is_free(start, end), "double booking [{start}, {end})");
        self.busy_total += end - start;
        self.ops += 1;
        // Append fast path (inlined into the callers; an insertion among the intervals pays for a call).
        match self.busy.last_mut() {
            Some(last) if last.1 == start => last.1 = end,
            Some(last) if last.1 > start => self.insert(start, end),
            Some(last) => {
                let gap = start - last.1;
                self.push_after_gap(start, end, gap);
            }
            None => self.push_first(start, end),
        }
    }

    /// Appends `[start, end)` to an empty timeline: no gap between intervals.
    #[inline]
    fn push_first(&mut self, start: Time, end: Time) {
        self.busy.push((start, end));
        self.gap_bound = 0;
    }

    /// Appends `[start, end)` `gap` ns after the last interval (`gap > 0`).
    #[inline]
    fn push_after_gap(&mut self, start: Time, end: Time, gap: u64) {
        self.busy.push((start, end));
        self.gap_bound = self.gap_bound.max(gap);
    }

    /// `commit(start, mid)` then `commit(mid, end)` (two adjacent bookings, both free): one interval, each booking
    /// counted as an operation.
    #[inline]
    pub fn commit_adjacent(&mut self, start: Time, mid: Time, end: Time) {
        self.commit(start, end);
        self.ops += u64::from(start < mid && mid < end);
    }

    /// `commit`'s booking of a free `[start, end)` that starts before the last interval ends.
    #[inline(never)]
    fn insert(&mut self, start: Time, end: Time) {
        // First interval ending at or after `start`: it may end exactly at `start` (then we extend it).
        let live = &self.busy[self.head..];
        let i = match live.first() {
            Some(&(_, e)) if e >= start => 0,
            _ => live.partition_point(|&(_, e)| e < start),
        };
        let touches_prev = i < live.len() && live[i].1 == start;
        let next = if touches_prev { i + 1 } else { i };
        let touches_next = next < live.len() && live[next].0 == end;
        let (i, next) = (self.head + i, self.head + next);
        match (touches_prev, touches_next) {
            (true, true) => {
                self.busy[i].1 = self.busy[next].1;
                self.busy.remove(next);
            }
            (true, false) => self.busy[i].1 = end,
            (false, true) => self.busy[next].0 = start,
            (false, false) => self.insert_before(next, (start, end)),
        }
    }

    /// Inserts `interval` before `busy[at]`, apart from it and from the one before. Between two intervals it
    /// splits a gap into shorter ones; before the first kept it makes a gap, which the bound must cover.
    #[inline]
    fn insert_before(&mut self, at: usize, interval: (Time, Time)) {
        self.gap_bound = self.gap_bound.max(self.busy[at].0 - interval.1);
        self.busy.insert(at, interval);
    }

    /// Drops reservations that ended at or before `now`; nothing will be booked before `now` again.
    #[inline]
    pub fn prune(&mut self, now: Time) {
        // Everything ended (most bookings of a port, a pool's idle member): cleared without a scan or a call.
        match self.busy.last() {
            Some(&(_, end)) if end <= now => {
                self.busy.clear();
                self.head = 0;
                return;
            }
            None => return,
            Some(_) => {}
        }
        // The last ends after `now`: the first interval that does is found within the vector, and some are left.
        let h = self.head + self.busy[self.head..].iter().position(|&(_, e)| e > now).unwrap_or(0);
        if h >= 16 && 2 * h >= self.busy.len() {
            self.compact(h);
        } else {
            self.head = h;
        }
    }

    /// `prune` found the intervals before `h` ended, at least half of them: they are dropped (each interval is moved
    /// at most once per interval dropped: amortised O(1)).
    #[inline(never)]
    fn compact(&mut self, h: usize) {
        self.busy.drain(..h);
        self.head = 0;
    }

    /// End of the last reservation (0 if none).
    pub fn horizon(&self) -> Time {
        self.busy.last().map_or(Time::ZERO, |&(_, e)| e)
    }

    /// Counts `busy` ns of use and `ops` operations without booking an interval (resources whose state is kept by an
    /// event-driven model, the flash array's dies and channels, report their use here).
    pub fn tally(&mut self, busy: u64, ops: u64) {
        self.busy_total += busy;
        self.ops += ops;
    }

    /// Total reserved time since creation (for utilisation).
    pub fn busy_ns(&self) -> u64 {
        self.busy_total
    }

    /// Number of reservations since creation.
    pub fn ops(&self) -> u64 {
        self.ops
    }

    /// Forgets statistics (not reservations).
    pub fn reset_stats(&mut self) {
        self.busy_total = 0;
        self.ops = 0;
    }
}

/// Index of the first interval of `busy` ending after `t` (the length if none). A third of the searches start before
/// the first interval ends (at the engine's clock, where pruning leaves the front): one comparison answers those
/// without the binary search over a backlog of hundreds.
#[inline]
fn first_ending_after(busy: &[(Time, Time)], t: Time) -> usize {
    match busy.first() {
        Some(&(_, e)) if e > t => 0,
        _ => busy.partition_point(|&(_, e)| e <= t),
    }
}

/// The longest gap between two consecutive intervals of `busy` (0 with fewer than two).
fn longest_gap(busy: &[(Time, Time)]) -> u64 {
    busy.windows(2).map(|w| w[1].0 - w[0].1).max().unwrap_or(0)
}

/// The scan of `find`: the first gap of at least `dur` at or after `*t`, trying the gap before each interval of
/// `busy` in turn; when none fits, `*t` is left at the end of the last one.
#[inline]
fn first_fit(t: &mut Time, dur: u64, busy: &[(Time, Time)]) -> Option<Time> {
    for &(s, e) in busy {
        if *t + dur <= s {
            return Some(*t);
        }
        *t = (*t).max(e);
    }
    None
}

#[cfg(test)]
impl Timeline {
    /// All reservations in order (tests).
    fn intervals(&self) -> Vec<(Time, Time)> {
        self.live().to_vec()
    }

    /// Panics unless the intervals are what the search relies on.
    fn check_invariants(&self) {
        let iv = self.intervals();
        assert!(iv.iter().all(|&(s, e)| s < e), "empty interval in {iv:?}");
        assert!(iv.windows(2).all(|w| w[0].1 < w[1].0), "unsorted, overlapping or touching: {iv:?}");
        assert!(longest_gap(&iv) <= self.gap_bound, "gap bound {} below a gap of {iv:?}", self.gap_bound);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The timeline as it was before its search loop was split in two (a scan of the chained halves of the
    /// deque), kept verbatim as the model the new one must agree with on every call.
    mod reference {
        use super::Time;
        use std::collections::VecDeque;

        #[derive(Debug, Clone, Default)]
        pub struct Timeline {
            pub busy: VecDeque<(Time, Time)>,
            busy_total: u64,
            ops: u64,
        }

        impl Timeline {
            pub fn new() -> Self {
                Self::default()
            }

            /// Earliest start `>= ready` at which `[start, start + dur)` is free.
            pub fn find(&self, ready: Time, dur: u64) -> Time {
                let mut t = ready;
                if dur == 0 {
                    return t;
                }
                // Fast path: everything booked ends before `ready`.
                match self.busy.back() {
                    None => return t,
                    Some(&(_, end)) if end <= t => return t,
                    _ => {}
                }
                let first = self.busy.partition_point(|&(_, end)| end <= t);
                // A busy die's backlog can hold many intervals: scan the deque's two halves as plain slices.
                let (a, b) = self.busy.as_slices();
                let (a, b) = if first < a.len() { (&a[first..], b) } else { (&[][..], &b[first - a.len()..]) };
                for &(s, e) in a.iter().chain(b) {
                    if t + dur <= s {
                        return t;
                    }
                    t = t.max(e);
                }
                t
            }

            /// Whether `[start, end)` overlaps no reservation.
            pub fn is_free(&self, start: Time, end: Time) -> bool {
                if start >= end {
                    return true;
                }
                let i = self.busy.partition_point(|&(_, e)| e <= start);
                self.busy.get(i).is_none_or(|&(s, _)| s >= end)
            }

            /// Reserves `dur` at the earliest free time `>= ready`; returns the start. (The same booking as `find` then
            /// `commit`, with one search of the intervals instead of two: this is the simulator's innermost call.)
            pub fn reserve(&mut self, ready: Time, dur: u64) -> Time {
                if dur == 0 {
                    return ready;
                }
                let mut t = ready;
                let first = match self.busy.back() {
                    Some(&(_, end)) if end > t => self.busy.partition_point(|&(_, end)| end <= t),
                    _ => self.busy.len(),
                };
                let mut at = self.busy.len();
                for j in first..self.busy.len() {
                    let (s, e) = self.busy[j];
                    if t + dur <= s {
                        at = j;
                        break;
                    }
                    t = t.max(e);
                }
                // `[t, t + dur)` lies between interval `at - 1` (ending at or before `t`) and interval `at` (if any).
                let end = t + dur;
                self.busy_total += dur;
                self.ops += 1;
                let touches_prev = at > 0 && self.busy[at - 1].1 == t;
                let touches_next = at < self.busy.len() && self.busy[at].0 == end;
                match (touches_prev, touches_next) {
                    (true, true) => {
                        self.busy[at - 1].1 = self.busy[at].1;
                        self.busy.remove(at);
                    }
                    (true, false) => self.busy[at - 1].1 = end,
                    (false, true) => self.busy[at].0 = t,
                    (false, false) => self.busy.insert(at, (t, end)),
                }
                t
            }

            /// Books `[start, end)`, which the caller has checked is free.
            pub fn commit(&mut self, start: Time, end: Time) {
                if start >= end {
                    return;
                }
                debug_assert!(self.is_free(start, end), "double booking [{start}, {end})");
                self.busy_total += end - start;
                self.ops += 1;
                // Append fast path.
                if let Some(last) = self.busy.back_mut() {
                    if last.1 == start {
                        last.1 = end;
                        return;
                    }
                    if last.1 < start {
                        self.busy.push_back((start, end));
                        return;
                    }
                } else {
                    self.busy.push_back((start, end));
                    return;
                }
                // First interval ending at or after `start`: it may end exactly at `start` (then we extend it).
                let i = self.busy.partition_point(|&(_, e)| e < start);
                let touches_prev = i < self.busy.len() && self.busy[i].1 == start;
                let next = if touches_prev { i + 1 } else { i };
                let touches_next = next < self.busy.len() && self.busy[next].0 == end;
                match (touches_prev, touches_next) {
                    (true, true) => {
                        self.busy[i].1 = self.busy[next].1;
                        self.busy.remove(next);
                    }
                    (true, false) => self.busy[i].1 = end,
                    (false, true) => self.busy[next].0 = start,
                    (false, false) => self.busy.insert(next, (start, end)),
                }
            }

            /// Drops reservations that ended at or before `now`; nothing will be booked before `now` again.
            pub fn prune(&mut self, now: Time) {
                while let Some(&(_, e)) = self.busy.front() {
                    if e <= now {
                        self.busy.pop_front();
                    } else {
                        break;
                    }
                }
            }

            pub fn busy_ns(&self) -> u64 {
                self.busy_total
            }

            pub fn ops(&self) -> u64 {
                self.ops
            }
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Find(u64, u64),
        /// `find_mut`, the pools' search (which may tighten the gap bound).
        FindMut(u64, u64),
        Reserve(u64, u64),
        /// `find` then `commit` of its answer, as the NAND model books multi-resource operations.
        FindCommit(u64, u64),
        /// `commit` of any free interval (not necessarily the earliest fit).
        CommitIfFree(u64, u64),
        IsFree(u64, u64),
        Prune(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        // Short durations build long backlogs with small gaps; long ones must skip past them.
        let dur = prop_oneof![4 => 0u64..30, 1 => 0u64..400];
        prop_oneof![
            3 => (0u64..3000, dur.clone()).prop_map(|(r, d)| Op::Find(r, d)),
            2 => (0u64..3000, dur.clone()).prop_map(|(r, d)| Op::FindMut(r, d)),
            3 => (0u64..3000, dur.clone()).prop_map(|(r, d)| Op::Reserve(r, d)),
            3 => (0u64..3000, dur.clone()).prop_map(|(r, d)| Op::FindCommit(r, d)),
            2 => (0u64..3000, dur).prop_map(|(r, d)| Op::CommitIfFree(r, d)),
            1 => (0u64..3000, 0u64..50).prop_map(|(r, d)| Op::IsFree(r, d)),
            1 => (0u64..60).prop_map(Op::Prune),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// Any sequence of calls gives the same answers and the same reservations as the reference model (times
        /// are offsets from the pruning point, which only advances, as the engine's clock does).
        #[test]
        fn agrees_with_reference_model(ops in prop::collection::vec(op(), 1..600)) {
            let (mut new, mut old) = (Timeline::new(), reference::Timeline::new());
            let mut now = 0;
            for op in ops {
                match op {
                    Op::Find(r, d) => {
                        let (ready, s) = (Time::from_ns(now + r), old.find(Time::from_ns(now + r), d));
                        prop_assert_eq!(new.find(ready, d), s);
                        prop_assert_eq!(new.free_at(ready, d), s == ready, "free_at is find's answer being `ready`");
                    }
                    Op::FindMut(r, d) => {
                        prop_assert_eq!(new.find_mut(Time::from_ns(now + r), d), old.find(Time::from_ns(now + r), d));
                    }
                    Op::Reserve(r, d) => prop_assert_eq!(new.reserve(Time::from_ns(now + r), d), old.reserve(Time::from_ns(now + r), d)),
                    Op::FindCommit(r, d) => {
                        let s = old.find(Time::from_ns(now + r), d);
                        prop_assert_eq!(new.find(Time::from_ns(now + r), d), s);
                        new.commit(s, s + d);
                        old.commit(s, s + d);
                    }
                    Op::CommitIfFree(r, d) => {
                        let (s, e) = (now + r, now + r + d);
                        prop_assert_eq!(new.is_free(Time::from_ns(s), Time::from_ns(e)), old.is_free(Time::from_ns(s), Time::from_ns(e)));
                        if old.is_free(Time::from_ns(s), Time::from_ns(e)) {
                            new.commit(Time::from_ns(s), Time::from_ns(e));
                            old.commit(Time::from_ns(s), Time::from_ns(e));
                        }
                    }
                    Op::IsFree(r, d) => prop_assert_eq!(new.is_free(Time::from_ns(now + r), Time::from_ns(now + r + d)), old.is_free(Time::from_ns(now + r), Time::from_ns(now + r + d))),
                    Op::Prune(dt) => {
                        now += dt;
                        new.prune(Time::from_ns(now));
                        old.prune(Time::from_ns(now));
                    }
                }
                new.check_invariants();
                prop_assert_eq!(new.intervals(), old.busy.iter().copied().collect::<Vec<_>>());
                prop_assert_eq!((new.busy_ns(), new.ops()), (old.busy_ns(), old.ops()));
            }
        }
    }

    /// The first start `>= ready` of `dur` by the plain scan over `live` (the search before the gap bound).
    fn plain_scan(live: &[(Time, Time)], ready: Time, dur: u64) -> Time {
        let mut t = ready;
        if dur == 0 {
            return t;
        }
        for &(s, e) in live.iter().filter(|&&(_, e)| e > ready) {
            if t + dur <= s {
                return t;
            }
            t = t.max(e);
        }
        t
    }

    /// A train of bookings ahead of the clock as a controller core holds them: cars of `car` ns every `car + gap`
    /// ns, some coupled (no gap), from `at`.
    fn train(at: u64, car: u64, gap: u64, cars: usize, coupled: &[bool]) -> Timeline {
        let mut t = Timeline::new();
        let mut s = at;
        for i in 0..cars {
            t.commit(Time::from_ns(s), Time::from_ns(s + car));
            s += car + if coupled.get(i).copied().unwrap_or(false) { 0 } else { gap };
        }
        t
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// Over trains with gaps just shorter or longer than the searches (the bound spares the scan, or not), with
        /// bookings, gaps filled and the clock moving on between searches, `find`, `find_mut` and `free_at` give the
        /// plain scan's answers, and the bound stays at least every gap.
        #[test]
        fn searches_agree_with_the_plain_scan_over_trains(
            (car, gap) in (1u64..50, 1u64..60),
            coupled in prop::collection::vec(any::<bool>(), 0..40),
            cars in 1usize..40,
            steps in prop::collection::vec((0u8..4, 0u64..3000, 0u64..80), 1..200),
        ) {
            let mut t = train(100, car, gap, cars, &coupled);
            let mut now = 0u64;
            for (kind, at, dur) in steps {
                let ready = Time::from_ns(now + at % 2500);
                let want = plain_scan(&t.intervals(), ready, dur);
                prop_assert_eq!(t.find(ready, dur), want);
                prop_assert_eq!(t.free_at(ready, dur), want == ready);
                match kind {
                    0 => prop_assert_eq!(t.find_mut(ready, dur), want),
                    1 => prop_assert_eq!(t.reserve(ready, dur), want),
                    2 => {
                        now += at % 97;
                        t.prune(Time::from_ns(now));
                    }
                    _ => t.commit(want, want + dur),
                }
                t.check_invariants();
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// `free_at` past the first interval kept (a timeline not pruned since the clock passed it, as a host core's
        /// with completions booked ahead) answers as the search it spares (`is_free`), whichever later interval
        /// `ready` falls in or before: the second kept answering, or not.
        #[test]
        fn free_at_past_the_head_agrees_with_is_free(
            (car, gap) in (1u64..50, 1u64..60),
            coupled in prop::collection::vec(any::<bool>(), 0..12),
            cars in 3usize..12,
            pruned in 0u64..200,
            probes in prop::collection::vec((0u64..600, 0u64..80), 1..60),
        ) {
            let mut t = train(100, car, gap, cars, &coupled);
            t.prune(Time::from_ns(pruned));
            for (at, dur) in probes {
                let ready = Time::from_ns(pruned + at);
                prop_assert_eq!(t.free_at(ready, dur), t.is_free(ready, ready + dur));
            }
        }
    }

    #[test]
    fn a_train_is_searched_without_a_scan_and_the_bound_tightens() {
        // Cars of 10 ns every 30 ns: a search of 25 ns fits in no gap (20 ns), so it starts after the last car.
        let mut t = train(0, 10, 20, 8, &[]);
        assert_eq!(t.gap_bound, 20);
        assert_eq!(t.find(Time::from_ns(5), 25), Time::from_ns(220));
        assert_eq!(t.find(Time::from_ns(5), 20), Time::from_ns(10));
        assert!(!t.free_at(Time::from_ns(45), 21) && t.free_at(Time::from_ns(40), 20));
        // Filling the gaps leaves the bound loose; a pool's search that scans in vain makes it exact.
        for k in 0..6 {
            t.commit(Time::from_ns(30 * k + 10), Time::from_ns(30 * k + 30));
        }
        t.commit(Time::from_ns(195), Time::from_ns(210));
        let kept = vec![(Time::ZERO, Time::from_ns(190)), (Time::from_ns(195), Time::from_ns(220))];
        assert_eq!((t.intervals(), t.gap_bound), (kept, 20));
        assert_eq!(t.find_mut(Time::from_ns(5), 10), Time::from_ns(220));
        assert_eq!(t.gap_bound, 5);
        // Now the bound spares the search for anything longer than 5 ns.
        assert_eq!(t.find(Time::from_ns(5), 6), Time::from_ns(220));
        assert_eq!(t.find(Time::from_ns(189), 5), Time::from_ns(190));
    }

    #[test]
    fn fills_gaps_before_later_bookings() {
        let mut t = Timeline::new();
        assert_eq!(t.reserve(Time::from_ns(100), 50), Time::from_ns(100)); // data phase booked for later
        assert_eq!(t.reserve(Time::ZERO, 10), Time::ZERO); // command phase slips in before
        assert_eq!(t.reserve(Time::ZERO, 95), Time::from_ns(150)); // does not fit in [10, 100)
        assert_eq!(t.reserve(Time::from_ns(10), 90), Time::from_ns(10)); // fits exactly
        assert_eq!(t.busy_ns(), 50 + 10 + 95 + 90);
        assert_eq!(t.horizon(), Time::from_ns(245));
        assert!(!t.is_free(Time::ZERO, Time::from_ns(1)) && t.is_free(Time::from_ns(245), Time::from_ns(300)));
    }

    #[test]
    fn pruning_keeps_future_reservations() {
        let mut t = Timeline::new();
        t.reserve(Time::ZERO, 10);
        t.reserve(Time::from_ns(20), 10);
        t.prune(Time::from_ns(15));
        assert_eq!(t.reserve(Time::from_ns(15), 5), Time::from_ns(15));
        assert_eq!(t.reserve(Time::from_ns(15), 10), Time::from_ns(30));
    }

    proptest! {
        /// Whatever the order of requests, reservations never overlap and never start before they are ready.
        #[test]
        fn reservations_never_overlap(reqs in prop::collection::vec((0u64..1000, 1u64..100), 1..60)) {
            let mut t = Timeline::new();
            let mut booked: Vec<(u64, u64)> = Vec::new();
            for (ready, dur) in reqs {
                let s = t.reserve(Time::from_ns(ready), dur);
                prop_assert!(s >= Time::from_ns(ready));
                for &(a, b) in &booked {
                    prop_assert!(s + dur <= Time::from_ns(a) || s >= Time::from_ns(b), "overlap [{s},{}) with [{a},{b})", s + dur);
                }
                // Earliest: no candidate start in [ready, s) fits (candidates are `ready` and booked ends).
                let fits = |c: u64| booked.iter().all(|&(a, b)| c + dur <= a || c >= b);
                let earlier = std::iter::once(ready).chain(booked.iter().map(|&(_, b)| b));
                for c in earlier.filter(|&c| c >= ready && c < s.as_ns()) {
                    prop_assert!(!fits(c), "could have started at {c}, started at {s}");
                }
                booked.push((s.as_ns(), (s + dur).as_ns()));
            }
            prop_assert_eq!(t.busy_ns(), booked.iter().map(|&(a, b)| b - a).sum::<u64>());
        }

        /// `reserve` books exactly what `find` followed by `commit` books (the intervals, merged, and the starts).
        #[test]
        fn reserve_equals_find_then_commit(reqs in prop::collection::vec((0u64..400, 0u64..60), 1..80)) {
            let (mut a, mut b) = (Timeline::new(), Timeline::new());
            for (ready, dur) in reqs {
                let s = b.find(Time::from_ns(ready), dur);
                b.commit(s, s + dur);
                prop_assert_eq!(a.reserve(Time::from_ns(ready), dur), s);
                prop_assert_eq!(a.intervals(), b.intervals());
            }
            prop_assert_eq!((a.busy_ns(), a.ops()), (b.busy_ns(), b.ops()));
        }
    }
}
