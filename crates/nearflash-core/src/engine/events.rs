//! The event queue of the device's event loop: events in time order, ties in the order they were scheduled, so
//! that a run repeats exactly.
//!
//! A binary heap keyed by (time, sequence number) in one `u128`. The loop never schedules an event before its
//! clock (one in the past is taken at the clock). Few events are pending at once (one or two per transaction in
//! flight: 32-63 on 4 KiB random reads at QD64), so the whole heap stays in the first-level cache.
//!
//! History, counted with callgrind on 4 KiB random reads (cosmos-plus, QD64, 3.27 events per read): a radix heap
//! alone spent about 240 instructions per event (events rarely tie, so nearly every pop spread a bucket); a timing
//! wheel (2,048 slots of 128 ns, one cache line each) in front of it about 140, but consecutive events fall hundreds
//! of slots apart over its 128 KiB, so its pushes and pops cost about 6 D1 misses per read, a quarter of all. This
//! heap costs about 85 instructions more per event (276 per read) and 6.6 D1 read and 2.3 D1 write misses fewer
//! per read (docs/validation.md, ninth step).

use super::Time;

/// Somewhere events of type `E` can be scheduled (the device's queue takes the events of every layer).
pub trait Schedule<E> {
    fn at(&mut self, t: Time, e: E);
}

/// Pending events, earliest first.
pub struct EventQueue<E> {
    /// A binary min-heap by key.
    heap: Vec<Entry<E>>,
    /// Events scheduled so far (the last one's sequence number).
    seq: u64,
    /// The time of the last event taken (nothing is scheduled before it).
    clock: Time,
    /// Events processed so far.
    processed: u64,
}

/// An event and its key: its time in the high 64 bits, its sequence number in the low ones, so that one comparison
/// orders by time and ties by scheduling order.
#[derive(Clone, Copy)]
struct Entry<E> {
    key: u128,
    e: E,
}

impl<E> Entry<E> {
    #[inline]
    fn time(&self) -> Time {
        Time::from_ns((self.key >> 64) as u64)
    }
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue { heap: Vec::new(), seq: 0, clock: Time::ZERO, processed: 0 }
    }
}

impl<E: Copy> EventQueue<E> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Schedules `e` at `t`; an event in the past of the loop's clock is taken at the clock.
    #[inline]
    pub fn push(&mut self, t: Time, e: E) {
        let t = t.max(self.clock);
        self.seq += 1;
        let key = u128::from(t.as_ns()) << 64 | u128::from(self.seq);
        let heap = &mut self.heap;
        let mut i = heap.len();
        heap.push(Entry { key, e });
        // Sift up: a hole moves to where the new event belongs.
        while i > 0 {
            let p = (i - 1) / 2;
            if heap[p].key < key {
                break;
            }
            heap[i] = heap[p];
            i = p;
        }
        heap[i] = Entry { key, e };
    }

    /// Time of the next event.
    #[inline]
    pub fn peek_time(&self) -> Option<Time> {
        self.heap.first().map(Entry::time)
    }

    /// Takes the next event, moving the clock to it.
    #[inline]
    pub fn pop(&mut self) -> Option<(Time, E)> {
        let last = self.heap.pop()?;
        let top = if self.heap.is_empty() {
            last
        } else {
            let heap = self.heap.as_mut_slice();
            let n = heap.len();
            let top = heap[0];
            // The root's hole goes down to a leaf along the earlier children (one comparison a level), then the
            // last event goes up from there to its place (rarely far: it is among the latest).
            let mut i = 0;
            let mut c = 1;
            while c + 1 < n {
                c += usize::from(heap[c + 1].key < heap[c].key);
                heap[i] = heap[c];
                i = c;
                c = 2 * i + 1;
            }
            if c + 1 == n {
                heap[i] = heap[c];
                i = c;
            }
            while i > 0 {
                let p = (i - 1) / 2;
                if heap[p].key < last.key {
                    break;
                }
                heap[i] = heap[p];
                i = p;
            }
            heap[i] = last;
            top
        };
        let t = top.time();
        self.clock = t;
        self.processed += 1;
        Some((t, top.e))
    }

    /// Time of the last event taken.
    #[inline]
    pub fn clock(&self) -> Time {
        self.clock
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
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
    fn a_tie_with_an_event_scheduled_long_before_keeps_scheduling_order() {
        let mut q = EventQueue::new();
        let t = Time::from_ns(1_000_000);
        q.push(t, 'a'); // long before its time
        q.push(Time::from_ns(900_000), 'x');
        assert_eq!(q.pop(), Some((Time::from_ns(900_000), 'x')));
        q.push(t, 'b'); // at the same time, scheduled later
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

    /// The queue's rule as std's binary heap keyed by (time, sequence number, event): the model the queue (and its
    /// packed keys and sifting) must agree with event for event.
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
                    // grid of 64 us steps, so that many events share a time, scheduled long apart.
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
