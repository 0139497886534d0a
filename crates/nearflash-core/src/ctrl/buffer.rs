//! The write-back buffer in controller DRAM: a write completes once its data is admitted; room returns when the
//! page holding it has been programmed. Admission is event-driven: a write whose data reaches the buffer when it is
//! full (or while earlier writes wait) waits until programs release room. Waiting writes are let in by their
//! command's scheduling class, as the flash scheduler serves a die (`sched::classes`): urgent-level classes first
//! (oldest first), then the normal level's classes by weighted round robin, background last; within a class, first
//! come, first served. Writes of one class (every queue at the same priority) are thus let in in arrival order.

use crate::ctrl::sched::classes::{ClassTable, Level, Turns, MAX_CLASSES};
use crate::ctrl::sched::ClassId;
use std::collections::VecDeque;

pub struct WriteBuffer {
    capacity: u64,
    used: u64,
    /// Admissions waiting for room, per class, in arrival order: (token, sectors, arrival number).
    waiting: Vec<VecDeque<(u32, u64, u64)>>,
    /// Classes with admissions waiting (bit mask).
    with_work: u32,
    arrivals: u64,
    turns: Turns,
    /// Sectors that programs under way will release.
    releasing: u64,
    /// Admissions let in over capacity to break a wait no program can end (see `force_head`).
    pub overcommits: u64,
}

impl WriteBuffer {
    pub fn new(capacity_sectors: u64) -> Self {
        WriteBuffer {
            capacity: capacity_sectors.max(1),
            used: 0,
            waiting: (0..MAX_CLASSES).map(|_| VecDeque::new()).collect(),
            with_work: 0,
            arrivals: 0,
            turns: Turns::default(),
            releasing: 0,
            overcommits: 0,
        }
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Sectors held now.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// `n` sectors (under `token`, of a command of `class`) reach the buffer: true if admitted now, else they wait
    /// their turn. A write larger than the whole buffer goes in once the buffer is empty (it streams through).
    pub fn offer(&mut self, token: u32, n: u64, class: ClassId) -> bool {
        if self.with_work == 0 && (self.used + n <= self.capacity || self.used == 0) {
            self.used += n;
            return true;
        }
        self.arrivals += 1;
        self.waiting[class.0 as usize].push_back((token, n, self.arrivals));
        self.with_work |= 1 << class.0;
        false
    }

    /// A program that will release `n` sectors is under way.
    pub fn releasing(&mut self, n: u64) {
        self.releasing += n;
    }

    /// The class whose waiting admission goes next, and the round robin's state once it has gone.
    fn next_class(&self, table: &ClassTable) -> Option<(usize, Turns)> {
        let mut turns = self.turns;
        let oldest = |mask: u32| {
            (0..MAX_CLASSES).filter(|&c| mask & (1 << c) != 0).min_by_key(|&c| self.waiting[c].front().map_or(u64::MAX, |w| w.2))
        };
        let urgent = self.with_work & table.mask(Level::Urgent);
        let normal = self.with_work & table.mask(Level::Normal);
        let class = if urgent != 0 {
            oldest(urgent)?
        } else if normal != 0 {
            turns.next(normal, table).0 as usize
        } else {
            oldest(self.with_work)?
        };
        Some((class, turns))
    }

    /// Takes the head of `class`'s waiting admissions.
    fn pop(&mut self, class: usize) -> (u32, u64) {
        let (token, k, _) = self.waiting[class].pop_front().expect("a class with work has a head");
        if self.waiting[class].is_empty() {
            self.with_work &= !(1 << class);
        }
        self.used += k;
        (token, k)
    }

    /// A program released `n` sectors; the waiting admissions that now fit are admitted, in their classes' order
    /// (`table`: the device's classes), into `admitted`.
    pub fn release(&mut self, n: u64, admitted: &mut Vec<u32>, table: &ClassTable) {
        self.used = self.used.saturating_sub(n);
        self.releasing = self.releasing.saturating_sub(n);
        while let Some((class, turns)) = self.next_class(table) {
            let k = self.waiting[class].front().expect("a class with work has a head").1;
            if self.used + k > self.capacity && self.used > 0 {
                break;
            }
            self.turns = turns;
            admitted.push(self.pop(class).0);
        }
    }

    /// Whether admissions wait while no program under way will release room.
    pub fn stuck(&self) -> bool {
        self.with_work != 0 && self.releasing == 0
    }

    /// Admits the next waiting admission over capacity (the buffer holds only sectors of pages that wait for
    /// writes queued behind it); returns its token.
    pub fn force_head(&mut self, table: &ClassTable) -> Option<u32> {
        let (class, turns) = self.next_class(table)?;
        self.turns = turns;
        self.overcommits += 1;
        Some(self.pop(class).0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctrl::sched::Priority;

    fn table() -> ClassTable {
        ClassTable::new([4, 2, 1], Level::Normal)
    }

    const MEDIUM: ClassId = ClassId(2);

    #[test]
    fn admissions_wait_in_order_for_released_room() {
        let (mut b, t) = (WriteBuffer::new(8), table());
        assert!(b.offer(1, 6, MEDIUM));
        assert!(!b.offer(2, 4, MEDIUM), "no room");
        assert!(!b.offer(3, 1, MEDIUM), "first come, first served: waits behind 2 although it would fit");
        assert!(b.stuck(), "nothing under way releases room");
        b.releasing(4);
        assert!(!b.stuck());
        let mut admitted = Vec::new();
        b.release(2, &mut admitted, &t);
        assert_eq!((admitted.clone(), b.used()), (vec![2], 8), "4 + 4 fits; 3 would need 9");
        b.release(1, &mut admitted, &t);
        assert_eq!((admitted, b.used()), (vec![2, 3], 8));
    }

    #[test]
    fn a_write_larger_than_the_buffer_goes_in_once_it_is_empty() {
        let (mut b, t) = (WriteBuffer::new(8), table());
        assert!(b.offer(1, 20, MEDIUM), "an empty buffer takes it");
        assert!(!b.offer(2, 20, MEDIUM));
        let mut admitted = Vec::new();
        b.release(19, &mut admitted, &t);
        assert!(admitted.is_empty());
        b.release(1, &mut admitted, &t);
        assert_eq!(admitted, vec![2]);
    }

    #[test]
    fn a_stuck_head_is_forced_in() {
        let (mut b, t) = (WriteBuffer::new(4), table());
        assert!(b.offer(1, 4, MEDIUM));
        assert!(!b.offer(2, 2, MEDIUM));
        assert_eq!(b.force_head(&t), Some(2));
        assert_eq!((b.used(), b.overcommits), (6, 1));
        assert_eq!(b.force_head(&t), None);
    }

    #[test]
    fn waiting_writes_go_in_by_priority_class() {
        let t = table();
        let mut b = WriteBuffer::new(1);
        assert!(b.offer(0, 1, MEDIUM));
        // Five medium writes wait, then a low, a high and an urgent one.
        for token in 1..=5 {
            assert!(!b.offer(token, 1, Priority::Medium.class()));
        }
        assert!(!b.offer(10, 1, Priority::Low.class()));
        assert!(!b.offer(20, 1, Priority::High.class()));
        assert!(!b.offer(21, 1, Priority::High.class()));
        assert!(!b.offer(30, 1, Priority::Urgent.class()));
        let mut admitted = Vec::new();
        for _ in 0..9 {
            b.release(1, &mut admitted, &t);
        }
        // Urgent strictly first; then high, medium and low take turns by their weights (4:2:1), each class in order.
        assert_eq!(admitted, vec![30, 20, 21, 1, 2, 10, 3, 4, 5]);
        assert_eq!(b.force_head(&t), None);
    }
}
