//! The event queue of the device's event loop: events in time order, ties in the order they were scheduled, so
//! that a run repeats exactly.

use super::Time;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// Somewhere events of type `E` can be scheduled (the device's queue takes the events of every layer).
pub trait Schedule<E> {
    fn at(&mut self, t: Time, e: E);
}

struct Entry<E> {
    t: Time,
    seq: u64,
    e: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, o: &Self) -> bool {
        (self.t, self.seq) == (o.t, o.seq)
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Entry<E> {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.t, self.seq).cmp(&(o.t, o.seq))
    }
}

/// Pending events, earliest first.
pub struct EventQueue<E> {
    heap: BinaryHeap<Reverse<Entry<E>>>,
    seq: u64,
    /// Time of the last event taken (the loop's clock).
    clock: Time,
    /// Events processed so far.
    processed: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue { heap: BinaryHeap::new(), seq: 0, clock: Time::ZERO, processed: 0 }
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Schedules `e` at `t`; an event in the past of the loop's clock is taken at the clock.
    pub fn push(&mut self, t: Time, e: E) {
        self.seq += 1;
        self.heap.push(Reverse(Entry { t: t.max(self.clock), seq: self.seq, e }));
    }

    /// Time of the next event.
    #[inline]
    pub fn peek_time(&self) -> Option<Time> {
        self.heap.peek().map(|Reverse(en)| en.t)
    }

    /// Takes the next event, moving the clock to it.
    pub fn pop(&mut self) -> Option<(Time, E)> {
        let Reverse(en) = self.heap.pop()?;
        self.clock = en.t;
        self.processed += 1;
        Some((en.t, en.e))
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

impl<E, F: Into<E>> Schedule<F> for EventQueue<E> {
    fn at(&mut self, t: Time, e: F) {
        self.push(t, e.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
