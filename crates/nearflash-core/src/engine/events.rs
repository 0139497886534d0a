//! The event queue of the device's event loop: events in time order, ties in the order they were scheduled, so
//! that a run repeats exactly.
//!
//! A timing wheel in front of a radix heap. The loop never schedules an event before its clock (one in the past is
//! taken at the clock), and nearly every event falls within a few hundred microseconds of it (a transaction's
//! arrival, a die's sensing, a channel transfer), so those are filed in a ring of [`SLOTS`] slots of 2^[`SLOT_BITS`]
//! ns each, by time: a push is an index and an append, and a pop finds the first non-empty slot from the clock's with
//! a bitmap and takes its earliest event (a slot holds one or two). Events further ahead (a program's or an erase's
//! end) go to the radix heap (`Radix`). Ties keep scheduling order: a slot holds its events in the order they were
//! scheduled, and an event in the radix heap was scheduled before any event of the wheel at the same time (an event
//! goes to the wheel when its time is less than the ring's span ahead of the clock, and the clock only moves on, so
//! a later one at that time goes to the wheel too): at equal times the radix heap's comes first.
//!
//! Counted with callgrind on 4 KiB random reads (cosmos-plus, QD64: 3.27 events per read, 32-63 pending), the radix
//! heap alone spent about 240 instructions per event: events rarely tie, so nearly every pop spread a bucket and
//! each event was filed about 3.7 times.

use super::Time;
use smallvec::SmallVec;

/// Width of a wheel slot: 2^7 = 128 ns.
const SLOT_BITS: u32 = 7;
/// Slots in the wheel (a power of two): 2,048 x 128 ns = 262 us ahead of the clock.
const SLOTS: usize = 2048;
const WORDS: usize = SLOTS / 64;

/// Somewhere events of type `E` can be scheduled (the device's queue takes the events of every layer).
pub trait Schedule<E> {
    fn at(&mut self, t: Time, e: E);
}

/// Pending events, earliest first.
pub struct EventQueue<E> {
    /// `slots[(t >> SLOT_BITS) % SLOTS]`: the events at `t` less than `SLOTS` slots after the clock's, in scheduling
    /// order.
    slots: Box<[Slot<E>; SLOTS]>,
    /// Bit `i % 64` of word `i / 64`: `slots[i]` is not empty.
    filled: [u64; WORDS],
    in_wheel: usize,
    /// Events further ahead.
    far: Radix<E>,
    /// The time of the last event taken (nothing is scheduled before it).
    clock: Time,
    /// Time of the earliest pending event.
    next: Option<Time>,
    len: usize,
    /// Events processed so far.
    processed: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            slots: (0..SLOTS).map(|_| Slot(SmallVec::new())).collect::<Box<[_]>>().try_into().unwrap_or_else(|_| unreachable!()),
            filled: [0; WORDS],
            in_wheel: 0,
            far: Radix::default(),
            clock: Time::ZERO,
            next: None,
            len: 0,
            processed: 0,
        }
    }
}

/// A slot's events in scheduling order, kept inline (one cache line) while there are at most two, as nearly always:
/// with a vector per slot each push and pop missed the cache twice (the vector, then its buffer), since
/// consecutive events fall hundreds of slots apart.
#[repr(align(64))]
struct Slot<E>(SmallVec<[(Time, E); 2]>);

/// The wheel's slot of time `t` (absolute: the ring position is this modulo `SLOTS`).
#[inline]
fn slot(t: Time) -> u64 {
    t.as_ns() >> SLOT_BITS
}

impl<E: Copy> EventQueue<E> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Schedules `e` at `t`; an event in the past of the loop's clock is taken at the clock.
    #[inline(always)]
    pub fn push(&mut self, t: Time, e: E) {
        let t = t.max(self.clock);
        if slot(t) - slot(self.clock) < SLOTS as u64 {
            let i = slot(t) as usize % SLOTS;
            self.slots[i].0.push((t, e));
            self.filled[i / 64] |= 1 << (i % 64);
            self.in_wheel += 1;
        } else {
            self.far.push(t, e);
        }
        self.len += 1;
        if self.next.is_none_or(|n| t < n) {
            self.next = Some(t);
        }
    }

    /// Time of the next event.
    #[inline]
    pub fn peek_time(&self) -> Option<Time> {
        self.next
    }

    /// Takes the next event, moving the clock to it.
    pub fn pop(&mut self) -> Option<(Time, E)> {
        let t = self.next?;
        let e = if self.far.peek_time() == Some(t) {
            self.far.pop().1
        } else {
            let i = slot(t) as usize % SLOTS;
            let v = &mut self.slots[i].0;
            self.in_wheel -= 1;
            if v.len() == 1 {
                self.filled[i / 64] &= !(1 << (i % 64));
                v.pop().map(|(_, e)| e)
            } else {
                // The first at `t`: the slot's earliest, scheduled first.
                let k = v.iter().position(|&(x, _)| x == t);
                k.map(|k| v.remove(k).1)
            }
            .expect("the next event is in its slot")
        };
        self.clock = t;
        self.len -= 1;
        self.processed += 1;
        self.next = match (self.wheel_next(), self.far.peek_time()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Some((t, e))
    }

    /// Time of the earliest event in the wheel: the earliest of the first non-empty slot from the clock's.
    #[inline]
    fn wheel_next(&self) -> Option<Time> {
        if self.in_wheel == 0 {
            return None;
        }
        let p = slot(self.clock) as usize % SLOTS;
        let w = p / 64;
        let mut i = w;
        let mut bits = self.filled[w] & (!0u64 << (p % 64));
        // Round the ring from the clock's slot; the last word looked at is the first again (its slots before the
        // clock's are the ring's latest).
        for k in 1..=WORDS {
            if bits != 0 {
                break;
            }
            i = (w + k) % WORDS;
            bits = self.filled[i];
        }
        let s = i * 64 + bits.trailing_zeros() as usize;
        self.slots[s].0.iter().map(|&(t, _)| t).min()
    }

    /// Time of the last event taken.
    #[inline]
    pub fn clock(&self) -> Time {
        self.clock
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Events taken since creation.
    pub fn processed(&self) -> u64 {
        self.processed
    }
}

impl<E: Copy, F: Into<E>> Schedule<F> for EventQueue<E> {
    #[inline(always)]
    fn at(&mut self, t: Time, e: F) {
        self.push(t, e.into());
    }
}

/// The events beyond the wheel, in a radix heap: since nothing is scheduled before the last event taken (`base`),
/// events are kept in buckets by the highest bit in which their time differs from it (`now`: the same time). A push
/// is a bucket index and an append; a pop takes from `now` and, when it is empty, spreads the lowest non-empty bucket
/// (which holds the earliest event) over the buckets below it relative to that event's time, the events at that time
/// landing in `now`. Every bucket holds its events in the order they were scheduled (an append keeps that order, and
/// a bucket is spread only into empty buckets), so ties come out in scheduling order without a sequence number. (A
/// crate's radix heap would not keep that order of ties.)
struct Radix<E> {
    /// Events at `base`, in scheduling order, from `head` on.
    now: Vec<(Time, E)>,
    head: usize,
    /// `later[b]`: events whose time differs from `base` first in bit `b`.
    later: [Vec<(Time, E)>; 64],
    /// Bit `b`: `later[b]` is not empty.
    filled: u64,
    /// The buckets' reference time: the time of the last event taken (nothing is scheduled before it).
    base: Time,
    /// Time of the earliest pending event.
    next: Option<Time>,
}

impl<E> Default for Radix<E> {
    fn default() -> Self {
        Radix { now: Vec::new(), head: 0, later: std::array::from_fn(|_| Vec::new()), filled: 0, base: Time::ZERO, next: None }
    }
}

impl<E: Copy> Radix<E> {
    /// Files `e` at `t` (not before `base`) in `now` or its bucket.
    #[inline]
    fn file(&mut self, t: Time, e: E) {
        let x = t.as_ns() ^ self.base.as_ns();
        if x == 0 {
            self.now.push((t, e));
        } else {
            let b = 63 - x.leading_zeros() as usize;
            self.later[b].push((t, e));
            self.filled |= 1 << b;
        }
    }

    /// Schedules `e` at `t` (not before the last event taken).
    fn push(&mut self, t: Time, e: E) {
        debug_assert!(t >= self.base);
        self.file(t, e);
        if self.next.is_none_or(|n| t < n) {
            self.next = Some(t);
        }
    }

    #[inline]
    fn peek_time(&self) -> Option<Time> {
        self.next
    }

    /// Takes the next event (there is one).
    fn pop(&mut self) -> (Time, E) {
        if self.head == self.now.len() {
            let next = self.next.expect("an event to take");
            self.now.clear();
            self.head = 0;
            let b = self.filled.trailing_zeros() as usize;
            self.filled &= !(1 << b);
            self.base = next;
            let spread = std::mem::take(&mut self.later[b]);
            for &(t, e) in &spread {
                self.file(t, e);
            }
            self.later[b] = spread;
            self.later[b].clear();
        }
        let (t, e) = self.now[self.head];
        self.head += 1;
        self.next = if self.head < self.now.len() {
            Some(t)
        } else if self.filled == 0 {
            None
        } else {
            let lowest = &self.later[self.filled.trailing_zeros() as usize];
            lowest.iter().map(|&(t, _)| t).min()
        };
        (t, e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    #[test]
    fn events_come_in_time_order_and_ties_in_scheduling_order() {
        let mut q = EventQueue::new();
        q.push(Time::from_ns(30), 'c');
        q.push(Time::from_ns(10), 'a');
        q.push(Time::from_ns(30), 'd');
        q.push(Time::from_ns(10), 'b');
        let order: Vec<(Time, char)> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, vec![(Time::from_ns(10), 'a'), (Time::from_ns(10), 'b'), (Time::from_ns(30), 'c'), (Time::from_ns(30), 'd')]);
        assert_eq!((q.clock(), q.processed()), (Time::from_ns(30), 4));
    }

    #[test]
    fn an_event_in_the_past_is_taken_at_the_clock() {
        let mut q = EventQueue::new();
        q.push(Time::from_ns(100), 1);
        assert_eq!(q.pop(), Some((Time::from_ns(100), 1)));
        q.push(Time::from_ns(40), 2);
        assert_eq!(q.peek_time(), Some(Time::from_ns(100)));
        assert_eq!(q.pop(), Some((Time::from_ns(100), 2)));
    }

    #[test]
    fn a_tie_between_the_radix_heap_and_the_wheel_keeps_scheduling_order() {
        let mut q = EventQueue::new();
        let t = Time::from_ns(1_000_000);
        q.push(t, 'a'); // beyond the wheel's span: the radix heap
        q.push(Time::from_ns(900_000), 'x');
        assert_eq!(q.pop(), Some((Time::from_ns(900_000), 'x')));
        q.push(t, 'b'); // now within it: the wheel
        q.push(Time::from_ns(999_999), 'y');
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, vec!['y', 'a', 'b']);
    }

    #[test]
    fn times_far_apart_and_at_the_ends_of_the_range() {
        let mut q = EventQueue::new();
        for (i, t) in [u64::MAX, 0, 1 << 63, 5, u64::MAX, 1 << 40, 5].into_iter().enumerate() {
            q.push(Time::from_ns(t), i);
        }
        let order: Vec<usize> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, vec![1, 3, 6, 5, 2, 0, 4]);
        assert!(q.is_empty() && q.peek_time().is_none());
    }

    /// The queue as it was (a binary heap keyed by time and scheduling order), the model the radix heap must agree
    /// with event for event.
    #[derive(Default)]
    struct Reference {
        heap: BinaryHeap<Reverse<(Time, u64, u32)>>,
        seq: u64,
        clock: Time,
    }

    impl Reference {
        fn push(&mut self, t: Time, e: u32) {
            self.seq += 1;
            self.heap.push(Reverse((t.max(self.clock), self.seq, e)));
        }
        fn pop(&mut self) -> Option<(Time, u32)> {
            let Reverse((t, _, e)) = self.heap.pop()?;
            self.clock = t;
            Some((t, e))
        }
        fn peek_time(&self) -> Option<Time> {
            self.heap.peek().map(|Reverse((t, _, _))| *t)
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// Any interleaving of pushes (ahead of the clock by small or large offsets, at it, or before it) and pops
        /// gives the same events at the same times in the same order as the binary heap.
        #[test]
        fn agrees_with_the_binary_heap(ops in prop::collection::vec((0u8..4, 0u64..3, 0u64..5000), 1..800)) {
            let (mut q, mut r) = (EventQueue::new(), Reference::default());
            let mut id = 0u32;
            for (kind, scale, x) in ops {
                if kind == 0 {
                    prop_assert_eq!(q.pop(), r.pop());
                } else {
                    // Offsets of a few ns (ties), of microseconds, and far ahead; some before the clock; some on a
                    // grid of 64 us steps, in and beyond the wheel's span, so that events at one time are filed in
                    // the radix heap and later in the wheel.
                    let off = x << (scale * 12);
                    let t = match kind {
                        1 => Time::from_ns(r.clock.as_ns().saturating_sub(x)),
                        2 => r.clock + off,
                        _ => Time::from_ns((r.clock.as_ns() / 65_536 + x % 8) * 65_536),
                    };
                    q.push(t, id);
                    r.push(t, id);
                    id += 1;
                }
                prop_assert_eq!(q.peek_time(), r.peek_time());
                prop_assert_eq!(q.len(), r.heap.len());
            }
            while let Some(e) = r.pop() {
                prop_assert_eq!(q.pop(), Some(e));
            }
            prop_assert_eq!(q.pop(), None);
        }
    }
}
