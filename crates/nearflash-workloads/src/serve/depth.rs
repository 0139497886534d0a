//! The queue depth a served device saw, in virtual time: the time-weighted mean number of the clients' commands in
//! the device (each from the virtual time it could start, the event loop's clock if it was submitted in the loop's
//! past, to its completion), over the virtual time in which at least one was there. Counting instead the commands in
//! flight at each submission would see a client's full depth even when the device served its requests one after the
//! other (every request late, waiting for the one before): the number in flight then is the client's, the number
//! being served is one.

use nearflash_core::engine::Time;
use std::collections::VecDeque;

/// Commands' stays in the device, merged into the time covered by at least one.
#[derive(Debug, Default)]
pub struct DepthMeter {
    /// Sum of the completed commands' stays.
    stay_ns: u128,
    /// Virtual time with at least one command in the device, of the stays merged so far.
    busy_ns: u64,
    /// The end of the merged stays (none merged yet: None).
    covered: Option<Time>,
    /// The stays not yet merged, in the order their commands entered (tickets `first`, `first + 1`, ...; starts
    /// never decrease): each its start and, once the command completed, its end. A stay is merged once every command
    /// that entered before it has completed (a flat queue: no search or allocation per command).
    stays: VecDeque<(Time, Option<Time>)>,
    first: u64,
}

impl DepthMeter {
    /// Command `ticket` entered the device at `start` (tickets are consecutive; a start is never before the start
    /// of a command entered earlier: the host clock and the loop's clock only move forward).
    pub fn enter(&mut self, ticket: u64, start: Time) {
        if self.stays.is_empty() {
            self.first = ticket;
        }
        debug_assert_eq!(ticket, self.first + self.stays.len() as u64, "tickets enter in order");
        debug_assert!(self.stays.back().is_none_or(|&(s, _)| s <= start), "starts never decrease");
        self.stays.push_back((start, None));
    }

    /// Command `ticket`, entered at `start`, completed at `done` (an unknown ticket is ignored).
    pub fn leave(&mut self, ticket: u64, start: Time, done: Time) {
        let Some(i) = ticket.checked_sub(self.first).filter(|&i| i < self.stays.len() as u64) else { return };
        let stay = &mut self.stays[i as usize];
        if stay.1.is_some() || stay.0 != start {
            return;
        }
        let done = done.max(start);
        stay.1 = Some(done);
        self.stay_ns += u128::from(done - start);
        // Stays are merged in the order they started: those before every command still in the device.
        while let Some(&(s, Some(d))) = self.stays.front() {
            self.stays.pop_front();
            self.first += 1;
            self.busy_ns += extend(&mut self.covered, s, d);
        }
    }

    /// The time-weighted mean number in the device over the time with at least one (0 before any completed), and
    /// that time in ns.
    pub fn mean(&self) -> (f64, u64) {
        let mut covered = self.covered;
        let pending = self.stays.iter().filter_map(|&(s, d)| d.map(|d| extend(&mut covered, s, d)));
        let busy = self.busy_ns + pending.sum::<u64>();
        (if busy == 0 { 0.0 } else { self.stay_ns as f64 / busy as f64 }, busy)
    }
}

/// Merges the stay `[start, done]` (starting no earlier than every stay merged before) into the union ending at
/// `covered`; returns the time it adds.
fn extend(covered: &mut Option<Time>, start: Time, done: Time) -> u64 {
    let from = covered.map_or(start, |c| c.max(start));
    let added = done.saturating_since(from);
    *covered = Some(covered.map_or(done, |c| c.max(done)));
    added
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ns: u64) -> Time {
        Time::from_ns(ns)
    }

    #[test]
    fn overlapping_stays_count_twice_and_idle_time_not_at_all() {
        let mut m = DepthMeter::default();
        m.enter(0, t(0));
        m.enter(1, t(0));
        m.enter(2, t(50));
        m.leave(1, t(0), t(100));
        m.leave(2, t(50), t(100));
        m.leave(0, t(0), t(100));
        assert_eq!(m.mean(), (2.5, 100));
        // An idle gap (100..1000) is not part of the mean.
        m.enter(3, t(1000));
        m.leave(3, t(1000), t(1100));
        assert_eq!(m.mean(), (350.0 / 200.0, 200));
    }

    #[test]
    fn commands_served_one_after_the_other_are_depth_one() {
        // Eight clients' reads submitted at once, each starting where the one before completed (late submissions):
        // eight in flight at every submission, one in the device.
        let mut m = DepthMeter::default();
        for i in 0..8 {
            m.enter(i, t(i * 100));
        }
        for i in (0..8).rev() {
            m.leave(i, t(i * 100), t(i * 100 + 100));
        }
        assert_eq!(m.mean(), (1.0, 800));
    }

    #[test]
    fn stays_still_pending_count_in_the_mean() {
        let mut m = DepthMeter::default();
        m.enter(0, t(0));
        m.enter(1, t(10));
        m.leave(1, t(10), t(30)); // pending: command 0 started earlier and is still in the device
        assert_eq!(m.mean(), (1.0, 20));
        m.leave(0, t(0), t(40));
        assert_eq!(m.mean(), (60.0 / 40.0, 40));
        m.leave(7, t(0), t(5)); // never entered: ignored
        assert_eq!(m.mean(), (1.5, 40));
    }
}
