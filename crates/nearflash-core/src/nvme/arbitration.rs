//! Submission-queue arbitration (NVMe Base Specification 2.0, 3.4.4): which submitted command the controller fetches
//! next when it can take one.
//!
//! - **Round robin**: every I/O submission queue in turn, up to the arbitration burst of commands each.
//! - **Weighted round robin with urgent priority class**: the urgent queues strictly first (round robin among them);
//!   then the high, medium and low classes by weighted round robin (each class fetches up to its weight in commands
//!   per round, `weight_*` = the spec's HPW/MPW/LPW + 1), round robin among a class's queues, up to the burst each.
//!
//! Arbitration only decides when the controller has fewer free command slots than commands wait
//! (`nvme.fetch_window`, the [`Fetcher`]); the priority of a command's queue also becomes the class of its flash work.

use crate::config::DeviceConfig;
use crate::ctrl::sched::Priority;
use crate::engine::Time;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

/// How the controller picks the next submission queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    RoundRobin,
    /// Weighted round robin with the urgent class: weights of the high, medium and low classes.
    Weighted([u32; 3]),
}

impl Mechanism {
    /// The mechanism a configuration selects (`nvme.arbitration` and its weights).
    pub fn of(cfg: &DeviceConfig) -> Mechanism {
        match cfg.nvme.arbitration.0.as_str() {
            "weighted" => Mechanism::Weighted(cfg.priority_weights()),
            _ => Mechanism::RoundRobin,
        }
    }
}

/// One priority class's queues, served round robin.
#[derive(Debug, Default)]
struct Ring {
    sqs: Vec<u16>,
    next: usize,
    /// Commands the current queue may still take in its turn.
    burst_left: u32,
}

impl Ring {
    /// The next queue with commands (`has`), charging one of its burst: the current queue goes on while its burst
    /// lasts and it has commands, then the turn passes on.
    fn take(&mut self, burst: u32, has: impl Fn(u16) -> bool) -> Option<u16> {
        let n = self.sqs.len();
        for _ in 0..n {
            let i = self.next % n;
            let q = self.sqs[i];
            if has(q) {
                if self.burst_left == 0 {
                    self.burst_left = burst;
                }
                self.burst_left -= 1;
                if self.burst_left == 0 {
                    self.next = (i + 1) % n;
                }
                return Some(q);
            }
            self.next = (i + 1) % n;
            self.burst_left = 0;
        }
        None
    }

    fn has_work(&self, has: impl Fn(u16) -> bool) -> bool {
        self.sqs.iter().any(|&q| has(q))
    }
}

/// The arbiter: queues, their priorities and the commands waiting to be fetched (by the caller's token).
#[derive(Debug)]
pub struct Arbiter {
    mechanism: Mechanism,
    burst: u32,
    /// Urgent, high, medium, low (round robin: everything in `rings[2]`).
    rings: [Ring; 4],
    waiting: BTreeMap<u16, VecDeque<u32>>,
    /// Weighted round robin among high, medium, low: the class whose turn it is and its credit left.
    class: usize,
    credit: u32,
}

impl Arbiter {
    pub fn new(mechanism: Mechanism, burst: u32) -> Self {
        // The first weighted round starts with the high class (the turn moves on from low).
        Arbiter { mechanism, burst: burst.max(1), rings: Default::default(), waiting: BTreeMap::new(), class: 3, credit: 0 }
    }

    fn ring_of(&self, p: Priority) -> usize {
        match self.mechanism {
            Mechanism::RoundRobin => 2,
            Mechanism::Weighted(_) => p as usize,
        }
    }

    /// Queue `sqid` of priority `p` now exists.
    pub fn add_queue(&mut self, sqid: u16, p: Priority) {
        let r = self.ring_of(p);
        self.rings[r].sqs.push(sqid);
        self.waiting.entry(sqid).or_default();
    }

    /// Queue `sqid` is gone (its commands must have been fetched).
    pub fn remove_queue(&mut self, sqid: u16) {
        for r in &mut self.rings {
            if let Some(i) = r.sqs.iter().position(|&q| q == sqid) {
                r.sqs.remove(i);
                if r.next > i {
                    r.next -= 1;
                }
            }
        }
        self.waiting.remove(&sqid);
    }

    /// A command (`token`) was submitted on `sqid`.
    pub fn submitted(&mut self, sqid: u16, token: u32) {
        self.waiting.entry(sqid).or_default().push_back(token);
    }

    /// Commands waiting to be fetched.
    pub fn waiting(&self) -> usize {
        self.waiting.values().map(VecDeque::len).sum()
    }

    /// The next command to fetch: (queue, token).
    pub fn next_command(&mut self) -> Option<(u16, u32)> {
        let waiting = &self.waiting;
        let has = |q: u16| waiting.get(&q).is_some_and(|w| !w.is_empty());
        let burst = self.burst;
        let sqid = match self.mechanism {
            Mechanism::RoundRobin => self.rings[2].take(burst, has)?,
            Mechanism::Weighted(weights) => {
                if let Some(q) = self.rings[0].take(burst, has) {
                    q
                } else {
                    // Weighted round robin over high (1), medium (2), low (3), skipping classes with nothing.
                    let mut found = None;
                    for _ in 0..4 {
                        if self.credit > 0 && self.rings[self.class].has_work(has) {
                            self.credit -= 1;
                            found = self.rings[self.class].take(burst, has);
                            break;
                        }
                        self.class = self.class % 3 + 1;
                        self.credit = weights[self.class - 1];
                    }
                    found?
                }
            }
        };
        let token = self.waiting.get_mut(&sqid)?.pop_front()?;
        Some((sqid, token))
    }
}

/// Command fetch with a limited number of command slots (`nvme.fetch_window`): a command whose doorbell rang is
/// fetched at once into a free slot, or waits until a command in service completes, when the arbiter picks which
/// waiting command takes the slot.
#[derive(Debug)]
pub struct Fetcher {
    arbiter: Arbiter,
    /// No limit: every command is fetched when asked (the arbiter is never consulted).
    unlimited: bool,
    /// When each free slot became free, earliest first.
    free_at: BinaryHeap<Reverse<Time>>,
}

impl Fetcher {
    /// `window` command slots (0: no limit).
    pub fn new(mechanism: Mechanism, burst: u32, window: u32) -> Self {
        Fetcher {
            arbiter: Arbiter::new(mechanism, burst),
            unlimited: window == 0,
            free_at: (0..window).map(|_| Reverse(Time::ZERO)).collect(),
        }
    }

    pub fn add_queue(&mut self, sqid: u16, p: Priority) {
        self.arbiter.add_queue(sqid, p);
    }

    pub fn remove_queue(&mut self, sqid: u16) {
        self.arbiter.remove_queue(sqid);
    }

    /// Whether fetching is unlimited (nothing ever waits).
    pub fn is_unlimited(&self) -> bool {
        self.unlimited
    }

    /// Commands waiting for a slot.
    pub fn waiting(&self) -> usize {
        self.arbiter.waiting()
    }

    /// Command `token` of `sqid`, whose doorbell rang, asks to be fetched at `ready`: the time it is fetched if a
    /// slot is free, else None (it waits for `release`).
    pub fn request(&mut self, sqid: u16, token: u32, ready: Time) -> Option<Time> {
        if self.unlimited {
            return Some(ready);
        }
        match self.free_at.pop() {
            Some(Reverse(free)) => Some(ready.max(free)),
            None => {
                self.arbiter.submitted(sqid, token);
                None
            }
        }
    }

    /// A command in service completed at `t`: the waiting command the arbiter fetches into its slot, if any.
    pub fn release(&mut self, t: Time) -> Option<u32> {
        if self.unlimited {
            return None;
        }
        match self.arbiter.next_command() {
            Some((_, token)) => Some(token),
            None => {
                self.free_at.push(Reverse(t));
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fetcher_holds_its_window_and_hands_freed_slots_to_the_arbiter() {
        let mut f = Fetcher::new(Mechanism::Weighted([2, 1, 1]), 1, 2);
        for (q, p) in [(1, Priority::Low), (2, Priority::Urgent), (3, Priority::High)] {
            f.add_queue(q, p);
        }
        assert_eq!(f.request(1, 10, Time::from_ns(100)), Some(Time::from_ns(100)), "a free slot: fetched when asked");
        assert_eq!(f.request(1, 11, Time::from_ns(120)), Some(Time::from_ns(120)));
        assert_eq!(f.request(1, 12, Time::from_ns(130)), None, "both slots taken");
        assert_eq!(f.request(3, 30, Time::from_ns(140)), None);
        assert_eq!(f.request(2, 20, Time::from_ns(150)), None);
        assert_eq!(f.waiting(), 3);
        assert_eq!(f.release(Time::from_ns(500)), Some(20), "urgent first");
        assert_eq!(f.release(Time::from_ns(600)), Some(30), "then high before low");
        assert_eq!(f.release(Time::from_ns(700)), Some(12));
        assert_eq!(f.release(Time::from_ns(800)), None, "nothing waits: the slot is free from 800");
        assert_eq!(f.request(3, 31, Time::from_ns(750)), Some(Time::from_ns(800)), "a slot freed at 800 serves a command asking at 750 from then");
        let mut open = Fetcher::new(Mechanism::RoundRobin, 1, 0);
        let mut tree = crate::config::load_preset("cosmos-plus").unwrap();
        assert_eq!(Mechanism::of(&DeviceConfig::from_tree(&tree).unwrap()), Mechanism::RoundRobin, "the presets' default");
        tree.set("nvme.arbitration", "weighted").unwrap();
        assert_eq!(Mechanism::of(&DeviceConfig::from_tree(&tree).unwrap()), Mechanism::Weighted([4, 2, 1]));
        assert!((0..1000).all(|i| open.request(1, i, Time::from_ns(u64::from(i))) == Some(Time::from_ns(u64::from(i)))), "no limit");
        assert_eq!(open.release(Time::from_ns(5)), None);
    }

    fn drain(a: &mut Arbiter) -> Vec<u16> {
        std::iter::from_fn(|| a.next_command().map(|(q, _)| q)).collect()
    }

    #[test]
    fn round_robin_takes_a_burst_from_each_queue_in_turn() {
        let mut a = Arbiter::new(Mechanism::RoundRobin, 2);
        for q in 1..=3 {
            a.add_queue(q, Priority::ALL[q as usize % 4]);
            for t in 0..4 {
                a.submitted(q, t);
            }
        }
        assert_eq!(drain(&mut a), vec![1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3]);
        // A queue that runs dry hands its turn on.
        a.submitted(2, 9);
        a.submitted(3, 9);
        a.submitted(3, 10);
        a.submitted(3, 11);
        assert_eq!(drain(&mut a), vec![2, 3, 3, 3]);
    }

    #[test]
    fn weighted_round_robin_serves_urgent_first_then_weights() {
        let mut a = Arbiter::new(Mechanism::Weighted([3, 2, 1]), 1);
        let prios = [(1, Priority::High), (2, Priority::Medium), (3, Priority::Low), (4, Priority::Urgent)];
        for (q, p) in prios {
            a.add_queue(q, p);
            for t in 0..6 {
                a.submitted(q, t);
            }
        }
        let order = drain(&mut a);
        assert_eq!(&order[..6], &[4; 6], "urgent strictly first");
        assert_eq!(&order[6..12], &[1, 1, 1, 2, 2, 3], "then high x3, medium x2, low x1");
        assert_eq!(&order[12..18], &[1, 1, 1, 2, 2, 3]);
        assert_eq!(&order[18..], &[2, 2, 3, 3, 3, 3], "high done: the others share");
        assert_eq!(a.waiting(), 0);
    }

    #[test]
    fn a_class_weight_is_shared_by_its_queues_round_robin_with_the_burst() {
        // Two high queues and one low queue, weights high 2 / low 1. A weight counts commands of the class, not of
        // each queue (NVMe 2.0, 3.4.4.2): with burst 1 the high class's two commands per round are one from each high
        // queue; with burst 2 one high queue takes both, and the other has the next round.
        let order = |burst| {
            let mut a = Arbiter::new(Mechanism::Weighted([2, 1, 1]), burst);
            for (q, p) in [(1, Priority::High), (2, Priority::High), (3, Priority::Low)] {
                a.add_queue(q, p);
                for t in 0..4 {
                    a.submitted(q, t);
                }
            }
            drain(&mut a)
        };
        assert_eq!(order(1), [1, 2, 3].repeat(4));
        assert_eq!(order(2), [1, 1, 3, 2, 2, 3].repeat(2));
    }

    #[test]
    fn removed_queues_leave_the_rotation() {
        let mut a = Arbiter::new(Mechanism::RoundRobin, 1);
        for q in 1..=3 {
            a.add_queue(q, Priority::Medium);
            a.submitted(q, 0);
            a.submitted(q, 1);
        }
        assert_eq!(a.next_command().map(|x| x.0), Some(1));
        a.remove_queue(2);
        assert_eq!(drain(&mut a), vec![3, 1, 3]);
    }
}
