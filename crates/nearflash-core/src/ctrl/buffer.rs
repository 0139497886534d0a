//! The write-back buffer in controller DRAM: a write completes once its data is admitted; room returns when the
//! page holding it has been programmed. Admission is event-driven and first come, first served: a write whose data
//! reaches the buffer when it is full (or while earlier writes wait) waits until programs release room.

use std::collections::VecDeque;

pub struct WriteBuffer {
    capacity: u64,
    used: u64,
    /// Admissions waiting for room, in arrival order: (token, sectors).
    waiting: VecDeque<(u32, u64)>,
    /// Sectors that programs under way will release.
    releasing: u64,
    /// Admissions let in over capacity to break a wait no program can end (see `force_head`).
    pub overcommits: u64,
}

impl WriteBuffer {
    pub fn new(capacity_sectors: u64) -> Self {
        WriteBuffer { capacity: capacity_sectors.max(1), used: 0, waiting: VecDeque::new(), releasing: 0, overcommits: 0 }
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Sectors held now.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// `n` sectors (under `token`) reach the buffer: true if admitted now, else they wait their turn. A write larger
    /// than the whole buffer goes in once the buffer is empty (it streams through).
    pub fn offer(&mut self, token: u32, n: u64) -> bool {
        if self.waiting.is_empty() && (self.used + n <= self.capacity || self.used == 0) {
            self.used += n;
            return true;
        }
        self.waiting.push_back((token, n));
        false
    }

    /// A program that will release `n` sectors is under way.
    pub fn releasing(&mut self, n: u64) {
        self.releasing += n;
    }

    /// A program released `n` sectors; the waiting admissions that now fit are admitted, in order, into `admitted`.
    pub fn release(&mut self, n: u64, admitted: &mut Vec<u32>) {
        self.used = self.used.saturating_sub(n);
        self.releasing = self.releasing.saturating_sub(n);
        while let Some(&(token, k)) = self.waiting.front() {
            if self.used + k > self.capacity && self.used > 0 {
                break;
            }
            self.waiting.pop_front();
            self.used += k;
            admitted.push(token);
        }
    }

    /// Whether admissions wait while no program under way will release room.
    pub fn stuck(&self) -> bool {
        !self.waiting.is_empty() && self.releasing == 0
    }

    /// Admits the first waiting admission over capacity (the buffer holds only sectors of pages that wait for
    /// writes queued behind it); returns its token.
    pub fn force_head(&mut self) -> Option<u32> {
        let (token, k) = self.waiting.pop_front()?;
        self.used += k;
        self.overcommits += 1;
        Some(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admissions_wait_in_order_for_released_room() {
        let mut b = WriteBuffer::new(8);
        assert!(b.offer(1, 6));
        assert!(!b.offer(2, 4), "no room");
        assert!(!b.offer(3, 1), "first come, first served: waits behind 2 although it would fit");
        assert!(b.stuck(), "nothing under way releases room");
        b.releasing(4);
        assert!(!b.stuck());
        let mut admitted = Vec::new();
        b.release(2, &mut admitted);
        assert_eq!((admitted.clone(), b.used()), (vec![2], 8), "4 + 4 fits; 3 would need 9");
        b.release(1, &mut admitted);
        assert_eq!((admitted, b.used()), (vec![2, 3], 8));
    }

    #[test]
    fn a_write_larger_than_the_buffer_goes_in_once_it_is_empty() {
        let mut b = WriteBuffer::new(8);
        assert!(b.offer(1, 20), "an empty buffer takes it");
        assert!(!b.offer(2, 20));
        let mut admitted = Vec::new();
        b.release(19, &mut admitted);
        assert!(admitted.is_empty());
        b.release(1, &mut admitted);
        assert_eq!(admitted, vec![2]);
    }

    #[test]
    fn a_stuck_head_is_forced_in() {
        let mut b = WriteBuffer::new(4);
        assert!(b.offer(1, 4));
        assert!(!b.offer(2, 2));
        assert_eq!(b.force_head(), Some(2));
        assert_eq!((b.used(), b.overcommits), (6, 1));
        assert_eq!(b.force_head(), None);
    }
}
