//! `HeadVec`: a first-in first-out list as a vector with a head, for the short queues a command passes through on
//! every event (a completion queue's pending entries, the flow's ready steps).
//!
//! A `VecDeque`'s ring pays wrap-around arithmetic on every push, look and pop (and its `push_back` was a call);
//! here a push is a vector's push and a pop moves the head. The vector is cleared when its last entry is taken, so
//! a queue that empties now and then keeps reusing its first cache lines (a ring walks its whole buffer), and it is
//! compacted when the taken entries are most of it, so each entry is moved at most once per entry taken
//! (`engine::Timeline` keeps its intervals the same way).

/// Entries taken from the front before a compaction is considered (a few moves are not worth a call).
const COMPACT_AFTER: usize = 16;

/// A FIFO list: `entries[head..]`, first in line first.
#[derive(Debug, Clone)]
pub struct HeadVec<T> {
    /// `head < entries.len()`, or both are 0.
    entries: Vec<T>,
    head: usize,
}

impl<T> Default for HeadVec<T> {
    fn default() -> Self {
        HeadVec { entries: Vec::new(), head: 0 }
    }
}

impl<T: Copy> HeadVec<T> {
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.entries.len() - self.head
    }

    /// The entries, first in line first.
    #[inline]
    pub fn as_slice(&self) -> &[T] {
        &self.entries[self.head..]
    }

    #[inline]
    pub fn front(&self) -> Option<&T> {
        self.entries.get(self.head)
    }

    #[inline]
    pub fn back(&self) -> Option<&T> {
        self.entries.last()
    }

    #[inline]
    pub fn push_back(&mut self, x: T) {
        self.entries.push(x);
    }

    /// Inserts `x` before entry `i` (`i <= len()`).
    pub fn insert(&mut self, i: usize, x: T) {
        self.entries.insert(self.head + i, x);
    }

    #[inline]
    pub fn pop_front(&mut self) -> Option<T> {
        let first = *self.entries.get(self.head)?;
        self.head += 1;
        self.taken();
        Some(first)
    }

    /// Takes entry `i` out (`i < len()`).
    pub fn remove(&mut self, i: usize) -> T {
        let x = self.entries.remove(self.head + i);
        if self.head == self.entries.len() {
            self.entries.clear();
            self.head = 0;
        }
        x
    }

    /// After the head moved on: cleared when nothing is left, compacted when the taken entries are most of it.
    #[inline]
    fn taken(&mut self) {
        if self.head == self.entries.len() {
            self.entries.clear();
            self.head = 0;
        } else if self.head >= COMPACT_AFTER && 2 * self.head >= self.entries.len() {
            self.compact();
        }
    }

    #[inline(never)]
    fn compact(&mut self) {
        self.entries.drain(..self.head);
        self.head = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    proptest::proptest! {
        /// The same entries in the same order as a `VecDeque` given the same pushes, pops, insertions and removals,
        /// over runs long enough to clear and compact many times.
        #[test]
        fn behaves_as_a_deque(ops in proptest::collection::vec((0u8..5, 0usize..64), 0..600)) {
            let (mut h, mut d) = (HeadVec::default(), VecDeque::new());
            for (n, (op, arg)) in ops.into_iter().enumerate() {
                match op {
                    0 | 1 => {
                        h.push_back(n);
                        d.push_back(n);
                    }
                    2 => proptest::prop_assert_eq!(h.pop_front(), d.pop_front()),
                    3 => {
                        let i = arg % (d.len() + 1);
                        h.insert(i, n);
                        d.insert(i, n);
                    }
                    _ if !d.is_empty() => {
                        let i = arg % d.len();
                        proptest::prop_assert_eq!(h.remove(i), d.remove(i).unwrap());
                    }
                    _ => {}
                }
                proptest::prop_assert_eq!(h.len(), d.len());
                proptest::prop_assert_eq!(h.is_empty(), d.is_empty());
                proptest::prop_assert_eq!(h.front(), d.front());
                proptest::prop_assert_eq!(h.back(), d.back());
                proptest::prop_assert!(h.as_slice().iter().eq(d.iter()));
            }
        }
    }
}
