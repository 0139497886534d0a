//! The registry of timelines: named groups of identical resources (e.g. `channel` x 8) and pools that pick the
//! member able to start earliest (controller cores, host CPU cores).

use super::{Time, Timeline};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceId(pub u32);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GroupId(pub u32);

#[derive(Debug, Clone)]
struct Group {
    name: String,
    first: u32,
    count: u32,
}

/// Utilisation of a resource group over a time window.
#[derive(Debug, Clone, serde::Serialize)]
pub struct GroupUtilisation {
    pub name: String,
    pub members: u32,
    /// Mean over the members of busy time / window.
    pub mean: f64,
    /// The busiest member's busy time / window.
    pub max: f64,
    pub ops: u64,
}

#[derive(Debug, Clone, Default)]
pub struct Resources {
    timelines: Vec<Timeline>,
    groups: Vec<Group>,
    /// Nothing is booked before this time any more; timelines drop older intervals when next touched.
    now: Time,
}

impl Resources {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `count` resources named `name[i]`; returns the group.
    pub fn add_group(&mut self, name: &str, count: u32) -> GroupId {
        let first = self.timelines.len() as u32;
        self.timelines.extend((0..count).map(|_| Timeline::new()));
        self.groups.push(Group { name: name.to_string(), first, count });
        GroupId(self.groups.len() as u32 - 1)
    }

    /// The group with this name, if registered.
    pub fn group(&self, name: &str) -> Option<GroupId> {
        self.groups.iter().position(|g| g.name == name).map(|i| GroupId(i as u32))
    }

    pub fn group_len(&self, g: GroupId) -> u32 {
        self.groups[g.0 as usize].count
    }

    pub fn group_name(&self, g: GroupId) -> &str {
        &self.groups[g.0 as usize].name
    }

    /// Member `i` of a group.
    #[inline]
    pub fn member(&self, g: GroupId, i: u32) -> ResourceId {
        let grp = &self.groups[g.0 as usize];
        debug_assert!(i < grp.count, "{}[{i}] out of range", grp.name);
        ResourceId(grp.first + i)
    }

    #[inline]
    pub fn timeline(&self, r: ResourceId) -> &Timeline {
        &self.timelines[r.0 as usize]
    }

    #[inline]
    pub fn timeline_mut(&mut self, r: ResourceId) -> &mut Timeline {
        let now = self.now;
        let t = &mut self.timelines[r.0 as usize];
        t.prune(now);
        t
    }

    /// Reserves one resource; returns the start time.
    #[inline]
    pub fn reserve(&mut self, r: ResourceId, ready: Time, dur: u64) -> Time {
        self.timeline_mut(r).reserve(ready, dur)
    }

    /// `reserve`, always inlined: for the ports' one call site (`Port::transfer`, itself a call), where the call
    /// layer cost more than the booking's fast path.
    #[inline(always)]
    pub(crate) fn reserve_inline(&mut self, r: ResourceId, ready: Time, dur: u64) -> Time {
        self.timeline_mut(r).reserve(ready, dur)
    }

    /// Counts use of a resource whose state an event-driven model keeps (`Timeline::tally`).
    #[inline]
    pub fn tally(&mut self, r: ResourceId, busy: u64, ops: u64) {
        self.timelines[r.0 as usize].tally(busy, ops);
    }

    /// Reserves whichever member of the group can start earliest (ties: lowest index); returns (member, start).
    pub fn reserve_any(&mut self, g: GroupId, ready: Time, dur: u64) -> (ResourceId, Time) {
        let best = self.earliest_any(g, ready, dur);
        self.timeline_mut(best.0).commit(best.1, best.1 + dur);
        best
    }

    /// The member of the group that can start `dur` earliest from `ready` (ties: lowest index), and when.
    ///
    /// The lowest member free at `ready` starts earliest: the others' later starts are not searched for (the host
    /// cores' members hold bookings ahead of the clock, which `find` would search; most bookings find one free). A
    /// busy member's start is noted on the way when it needs no search (`Timeline::find_unsearched`: a saturated
    /// pool's members each hold one run of merged bookings, the controller cores under reads), so when none is free
    /// and every start was noted, the earliest is known without a second pass (`earliest_member`) over them. A plain
    /// loop: as an iterator's `find` it was not inlined where two pool bookings are made in one call.
    #[inline(always)]
    fn earliest_any(&mut self, g: GroupId, ready: Time, dur: u64) -> (ResourceId, Time) {
        let grp = &self.groups[g.0 as usize];
        let (first, end) = (grp.first, grp.first + grp.count);
        let mut best = (ResourceId(first), Time::MAX);
        let mut all_noted = true;
        let mut id = first;
        while id < end {
            let t = &self.timelines[id as usize];
            match t.find_unsearched(ready, dur) {
                // Free at `ready` exactly when `find` answers `ready` (`Timeline::free_at`).
                Some(start) if start == ready => return (ResourceId(id), ready),
                Some(start) => {
                    if start < best.1 {
                        best = (ResourceId(id), start);
                    }
                }
                None if t.free_at(ready, dur) => return (ResourceId(id), ready),
                None => all_noted = false,
            }
            id += 1;
        }
        if all_noted {
            best
        } else {
            self.earliest_member(first, end, ready, dur)
        }
    }

    /// `reserve_any` of `dur` from `ready`, then `then` from the first's end (two steps of firmware, one after the
    /// other): the second on the first's member when that member is free for it (the firmware thread carries on with
    /// the command it runs, on its core), else as `reserve_any` from the first's end. Returns the two starts.
    ///
    /// Why not two `reserve_any`s: the second then went to the lowest member free at the first's end, so with a queue
    /// of commands one core ran their long first steps back to back while the other held only their short second
    /// steps, booked ahead with gaps shorter than a first step: a pool of two cores did the work of 1.2
    /// (4 KiB random reads after writes: 162,437 IOPS where steady reads give 274,293; docs/validation.md).
    #[inline]
    pub fn reserve_any_then(&mut self, g: GroupId, ready: Time, dur: u64, then: u64) -> (Time, Time) {
        let (m, s) = self.earliest_any(g, ready, dur);
        let next = s + dur;
        // `m` is free for `[next, next + then)` if nothing of its own starts within it, whether or not `[s, next)` is
        // committed (the two do not overlap): then both are one interval, committed once (two operations).
        if self.timelines[m.0 as usize].free_at(next, then) {
            self.timeline_mut(m).commit_adjacent(s, next, next + then);
            return (s, next);
        }
        self.timeline_mut(m).commit(s, next);
        (s, self.reserve_any(g, next, then).1)
    }

    /// The member of timelines `first..end` that can start earliest after `ready` (ties: lowest index), and when.
    /// (`Timeline::find_mut`: the members' searches keep their gap bounds tight.)
    #[inline]
    fn earliest_member(&mut self, first: u32, end: u32, ready: Time, dur: u64) -> (ResourceId, Time) {
        let mut best = (ResourceId(first), Time::MAX);
        for id in first..end {
            let s = self.timelines[id as usize].find_mut(ready, dur);
            if s < best.1 {
                best = (ResourceId(id), s);
            }
        }
        best
    }

    /// Declares that nothing will be booked before `now` (lazy: each timeline prunes when next booked).
    pub fn prune(&mut self, now: Time) {
        self.now = self.now.max(now);
    }

    /// Latest reservation end over all timelines.
    pub fn horizon(&self) -> Time {
        self.timelines.iter().map(Timeline::horizon).max().unwrap_or(Time::ZERO)
    }

    pub fn reset_stats(&mut self) {
        for t in &mut self.timelines {
            t.reset_stats();
        }
    }

    /// Busy fraction of each group over a window of `window` ns.
    pub fn utilisation(&self, window: u64) -> Vec<GroupUtilisation> {
        self.utilisation_plus(window, &[])
    }

    /// `utilisation`, with use that models keep apart until then added to their groups (`extra`: per group, each
    /// member's busy ns and the operations).
    pub fn utilisation_plus(&self, window: u64, extra: &[(GroupId, &[u64], u64)]) -> Vec<GroupUtilisation> {
        let w = window.max(1) as f64;
        self.groups
            .iter()
            .enumerate()
            .map(|(gi, g)| {
                let tl = &self.timelines[g.first as usize..(g.first + g.count) as usize];
                let (more, more_ops) = match extra.iter().find(|e| e.0 .0 as usize == gi) {
                    Some(&(_, busy, ops)) => (busy, ops),
                    None => (&[][..], 0),
                };
                let busy: Vec<f64> =
                    tl.iter().enumerate().map(|(i, t)| (t.busy_ns() + more.get(i).copied().unwrap_or(0)) as f64 / w).collect();
                GroupUtilisation {
                    name: g.name.clone(),
                    members: g.count,
                    mean: busy.iter().sum::<f64>() / f64::from(g.count.max(1)),
                    max: busy.iter().copied().fold(0.0, f64::max),
                    ops: tl.iter().map(Timeline::ops).sum::<u64>() + more_ops,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The earliest start `>= ready` of `dur` among naive intervals (candidates: `ready` and every end after it).
    fn naive_find(busy: &[(u64, u64)], ready: u64, dur: u64) -> u64 {
        let fits = |c: u64| dur == 0 || busy.iter().all(|&(a, b)| c + dur <= a || c >= b);
        std::iter::once(ready).chain(busy.iter().map(|&(_, b)| b).filter(|&b| b > ready)).filter(|&c| fits(c)).min().unwrap()
    }

    /// A naive pool booking: the member that can start earliest (ties: lowest index) takes `[start, start + dur)`;
    /// returns the member and the start.
    fn naive_pool_booking(naive: &mut [Vec<(u64, u64)>], ready: u64, dur: u64) -> (usize, u64) {
        let starts: Vec<u64> = naive.iter().map(|b| naive_find(b, ready, dur)).collect();
        let best = starts.iter().copied().min().unwrap();
        let want = starts.iter().position(|&x| x == best).unwrap();
        if dur > 0 {
            naive[want].push((best, best + dur));
        }
        (want, best)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// A pool's booking is the member that can start earliest, ties to the lowest index, at that start, whatever
        /// its members' bookings (gaps left by later-starting ones, single bookings of one member, pruning).
        #[test]
        fn pool_booking_agrees_with_a_naive_scan(
            members in 1u32..5,
            ops in prop::collection::vec((0u8..5, 0u64..400, 0u64..80, 0u32..4), 1..300),
        ) {
            let mut r = Resources::new();
            r.add_group("other", 2);
            let pool = r.add_group("pool", members);
            let mut naive: Vec<Vec<(u64, u64)>> = vec![Vec::new(); members as usize];
            let mut now = 0u64;
            for (kind, at, dur, m) in ops {
                let ready = now + at;
                match kind {
                    // A booking on one member (a core's serialised work, `Controller::run_on`).
                    0 => {
                        let m = m % members;
                        let s = r.reserve(r.member(pool, m), Time::from_ns(ready), dur);
                        let want = naive_find(&naive[m as usize], ready, dur);
                        prop_assert_eq!(s, Time::from_ns(want));
                        if dur > 0 {
                            naive[m as usize].push((want, want + dur));
                        }
                    }
                    // The engine's clock moves on.
                    1 => {
                        now += at / 8;
                        r.prune(Time::from_ns(now));
                    }
                    // Two bookings, the second from the first's end, in one call (the controller's firmware steps).
                    3 => {
                        let then = at % 61;
                        let (s, s2) = r.reserve_any_then(pool, Time::from_ns(ready), dur, then);
                        let (m, first) = naive_pool_booking(&mut naive, ready, dur);
                        prop_assert_eq!(s, Time::from_ns(first));
                        // The second on the first's member when it is free from the first's end, else a pool booking.
                        let next = first + dur;
                        let second = if naive_find(&naive[m], next, then) == next {
                            if then > 0 {
                                naive[m].push((next, next + then));
                            }
                            next
                        } else {
                            naive_pool_booking(&mut naive, next, then).1
                        };
                        prop_assert_eq!(s2, Time::from_ns(second));
                    }
                    _ => {
                        let (id, s) = r.reserve_any(pool, Time::from_ns(ready), dur);
                        let starts: Vec<u64> = naive.iter().map(|b| naive_find(b, ready, dur)).collect();
                        let best = starts.iter().copied().min().unwrap();
                        let want = starts.iter().position(|&x| x == best).unwrap() as u32;
                        prop_assert_eq!((id, s), (r.member(pool, want), Time::from_ns(best)));
                        if dur > 0 {
                            naive[want as usize].push((best, best + dur));
                        }
                    }
                }
            }
            let u = r.utilisation(1);
            let booked: u64 = naive.iter().flatten().map(|&(a, b)| b - a).sum();
            prop_assert_eq!((u[1].mean * f64::from(members)).round() as u64, booked);
            // Each booking of a positive duration is an operation, whether or not it merged with its neighbours.
            prop_assert_eq!(u[1].ops, naive.iter().map(Vec::len).sum::<usize>() as u64);
        }
    }

    #[test]
    fn pool_picks_the_earliest_member() {
        let mut r = Resources::new();
        let cores = r.add_group("core", 2);
        let (a, s0) = r.reserve_any(cores, Time::ZERO, 100);
        let (b, s1) = r.reserve_any(cores, Time::ZERO, 100);
        let (_, s2) = r.reserve_any(cores, Time::ZERO, 100);
        assert_ne!(a, b);
        assert_eq!((s0, s1, s2), (Time::ZERO, Time::ZERO, Time::from_ns(100)));
        let u = r.utilisation(200);
        assert_eq!(u[0].name, "core");
        assert!((u[0].mean - 0.75).abs() < 1e-12 && (u[0].max - 1.0).abs() < 1e-12);
    }

    #[test]
    fn use_kept_apart_counts_as_if_tallied() {
        let mut r = Resources::new();
        let a = r.add_group("a", 1);
        let dies = r.add_group("die", 3);
        let channels = r.add_group("channel", 2);
        r.tally(r.member(dies, 1), 50, 2);
        r.tally(r.member(channels, 0), 20, 1);
        let mut tallied = r.clone();
        tallied.tally(tallied.member(dies, 0), 30, 0);
        tallied.tally(tallied.member(dies, 2), 100, 3);
        tallied.tally(tallied.member(channels, 1), 70, 4);
        let plus = r.utilisation_plus(200, &[(dies, &[30, 0, 100], 3), (channels, &[0, 70], 4)]);
        let want = tallied.utilisation(200);
        assert_eq!(plus.len(), want.len());
        for (p, w) in plus.iter().zip(&want) {
            assert_eq!((&p.name, p.members, p.mean, p.max, p.ops), (&w.name, w.members, w.mean, w.max, w.ops));
        }
        assert_eq!((plus[1].ops, plus[1].max), (5, 0.5));
        assert_eq!((plus[2].ops, plus[2].max), (5, 0.35));
        assert_eq!(r.utilisation(200)[0].ops, r.utilisation_plus(200, &[(a, &[], 0)])[0].ops);
    }
}
