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

    /// Counts use of a resource whose state an event-driven model keeps (`Timeline::tally`).
    #[inline]
    pub fn tally(&mut self, r: ResourceId, busy: u64, ops: u64) {
        self.timelines[r.0 as usize].tally(busy, ops);
    }

    /// Reserves whichever member of the group can start earliest (ties: lowest index); returns (member, start).
    pub fn reserve_any(&mut self, g: GroupId, ready: Time, dur: u64) -> (ResourceId, Time) {
        let grp = &self.groups[g.0 as usize];
        let mut best = (ResourceId(grp.first), Time::MAX);
        for id in grp.first..grp.first + grp.count {
            let s = self.timelines[id as usize].find(ready, dur);
            if s < best.1 {
                best = (ResourceId(id), s);
                if s == ready {
                    break;
                }
            }
        }
        self.timeline_mut(best.0).commit(best.1, best.1 + dur);
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
        let w = window.max(1) as f64;
        self.groups
            .iter()
            .map(|g| {
                let tl = &self.timelines[g.first as usize..(g.first + g.count) as usize];
                let busy: Vec<f64> = tl.iter().map(|t| t.busy_ns() as f64 / w).collect();
                GroupUtilisation {
                    name: g.name.clone(),
                    members: g.count,
                    mean: busy.iter().sum::<f64>() / f64::from(g.count.max(1)),
                    max: busy.iter().copied().fold(0.0, f64::max),
                    ops: tl.iter().map(Timeline::ops).sum(),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
