//! The write-back buffer in controller DRAM: a write completes once its data is buffered; space returns when the
//! page holding it has been programmed. When the buffer is full a write waits for the earliest release.

use crate::engine::Time;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

pub struct WriteBuffer {
    capacity: u64,
    used: u64,
    releases: BinaryHeap<Reverse<(Time, u64)>>,
}

impl WriteBuffer {
    pub fn new(capacity_sectors: u64) -> Self {
        WriteBuffer { capacity: capacity_sectors.max(1), used: 0, releases: BinaryHeap::new() }
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Sectors held at the latest admission.
    pub fn used(&self) -> u64 {
        self.used
    }

    fn settle(&mut self, t: Time) {
        while let Some(&Reverse((rt, n))) = self.releases.peek() {
            if rt > t {
                break;
            }
            self.releases.pop();
            self.used = self.used.saturating_sub(n);
        }
    }

    /// Admits `n` sectors arriving at `at`; returns when they fit, or `None` if they cannot fit without more
    /// programs being scheduled (the caller then forces partial pages out and asks again).
    pub fn admit(&mut self, at: Time, n: u64) -> Option<Time> {
        self.settle(at);
        let mut t = at;
        let mut popped = Vec::new();
        let mut used = self.used;
        while used + n > self.capacity {
            let Some(Reverse((rt, k))) = self.releases.pop() else {
                // Not enough scheduled releases: leave the state as it was.
                self.releases.extend(popped.into_iter().map(Reverse));
                return None;
            };
            popped.push((rt, k));
            used = used.saturating_sub(k);
            t = t.max(rt);
        }
        self.used = used + n;
        Some(t)
    }

    /// `n` sectors leave the buffer at `at` (their page was programmed).
    pub fn release(&mut self, at: Time, n: u64) {
        if n > 0 {
            self.releases.push(Reverse((at, n)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_for_the_earliest_release() {
        let mut b = WriteBuffer::new(8);
        assert_eq!(b.admit(0, 6), Some(0));
        b.release(500, 4);
        b.release(200, 2);
        assert_eq!(b.admit(10, 4), Some(200), "needs the release at 200");
        assert_eq!(b.admit(10, 4), Some(500));
        // Everything admitted is still waiting for programs that are not scheduled yet.
        assert_eq!(b.admit(600, 1), None);
        b.release(700, 4);
        b.release(650, 4);
        assert_eq!(b.admit(600, 9), None, "a refused admission leaves the releases in place");
        assert_eq!(b.admit(600, 1), Some(650));
        assert_eq!(b.admit(800, 100), None);
    }
}
