//! The pending-SLS-request buffer's entries as a resource (paper §4.1; artifact `AllocateTransBufEntry`): a config
//! takes an entry when it arrives and gives it back when the last result sector has left. With every entry busy,
//! a config waits for the earliest one to be released - the queueing that bounds concurrent NDP requests. An
//! entry whose results have not been asked for yet has no known release time; if all entries are in that state
//! the host broke the config/result protocol and the config is refused (the artifact would assert).

use crate::ndp_command::NdpFault;
use nearflash_core::ext::Time;

/// A request's identity: (table start LBA, request id), both decoded from the commands' SLBA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestKey {
    pub table_start: u64,
    pub request_id: u64,
}

#[derive(Debug, Clone, Copy)]
enum Slot {
    Free { since: Time },
    Held { key: RequestKey, release: Option<Time> },
}

/// Occupancy counters.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct EntryStats {
    pub allocations: u64,
    /// Configs that waited for an entry, and their total wait.
    pub waits: u64,
    pub wait_ns: u64,
    pub refused_full: u64,
}

/// The entries.
#[derive(Debug, Clone)]
pub struct EntryPool {
    slots: Vec<Slot>,
    stats: EntryStats,
}

impl EntryPool {
    /// `n` free entries.
    pub fn new(n: usize) -> Self {
        Self { slots: vec![Slot::Free { since: Time::ZERO }; n.max(1)], stats: EntryStats::default() }
    }

    /// Entries.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Always false (at least one entry).
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Takes an entry for `key`, arriving at `at`: (entry, time it is ours).
    pub fn allocate(&mut self, key: RequestKey, at: Time) -> Result<(usize, Time), NdpFault> {
        if self.holding(key).is_some() {
            return Err(NdpFault::DuplicateRequest);
        }
        let available = |s: &Slot| match *s {
            Slot::Free { since } => Some(since),
            Slot::Held { release, .. } => release,
        };
        let best = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| available(s).map(|t| (t.max(at), i)))
            .min();
        let Some((start, i)) = best else {
            self.stats.refused_full += 1;
            return Err(NdpFault::BufferFull);
        };
        self.slots[i] = Slot::Held { key, release: None };
        self.stats.allocations += 1;
        if start > at {
            self.stats.waits += 1;
            self.stats.wait_ns += start - at;
        }
        Ok((i, start))
    }

    /// The entry holding `key` whose results are still to be read.
    pub fn holding(&self, key: RequestKey) -> Option<usize> {
        self.slots.iter().position(|s| matches!(*s, Slot::Held { key: k, release: None } if k == key))
    }

    /// Entry `i` is released at `at` (its last result sector left, or its config was refused).
    pub fn release(&mut self, i: usize, at: Time) {
        if let Some(s) = self.slots.get_mut(i) {
            *s = match *s {
                Slot::Held { key, .. } => Slot::Held { key, release: Some(at) },
                free => free,
            };
        }
    }

    /// Counters.
    pub fn stats(&self) -> EntryStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(r: u64) -> RequestKey {
        RequestKey { table_start: 0, request_id: r }
    }

    #[test]
    fn waits_for_the_earliest_release_and_refuses_when_all_unread() {
        let mut p = EntryPool::new(2);
        assert_eq!(p.allocate(key(1), Time::from_ns(10)), Ok((0, Time::from_ns(10))));
        assert_eq!(p.allocate(key(1), Time::from_ns(11)), Err(NdpFault::DuplicateRequest));
        assert_eq!(p.allocate(key(2), Time::from_ns(12)), Ok((1, Time::from_ns(12))));
        assert_eq!(p.allocate(key(3), Time::from_ns(13)), Err(NdpFault::BufferFull));
        p.release(1, Time::from_ns(500));
        p.release(0, Time::from_ns(300));
        assert_eq!(p.holding(key(1)), None);
        // Entry 0 frees first (300): the config waits 300 - 20.
        assert_eq!(p.allocate(key(3), Time::from_ns(20)), Ok((0, Time::from_ns(300))));
        assert_eq!(p.allocate(key(4), Time::from_ns(800)), Ok((1, Time::from_ns(800))));
        let s = p.stats();
        assert_eq!((s.allocations, s.waits, s.wait_ns, s.refused_full), (4, 1, 280, 1));
        // A finished request's key may be reused.
        p.release(0, Time::from_ns(900));
        assert!(p.allocate(key(3), Time::from_ns(1000)).is_ok());
    }
}
