//! The event queue of the device's event loop: events in time order, ties in the order they were scheduled, so
//! that a run repeats exactly.
//!
//! Events keyed by (time, sequence number) in one `u128`, in a few sorted runs and a binary heap for the rest
//! (`EventQueue`). The loop never schedules an event before its clock (one in the past is taken at the clock). Few
//! events are pending at once (one or two per transaction in flight: 32-63 on 4 KiB random reads at QD64), so they
//! stay in the first-level cache.
//!
//! History, counted with callgrind on 4 KiB random reads (cosmos-plus, QD64, 3.27 events per read): a radix heap
//! alone spent about 240 instructions per event (events rarely tie, so nearly every pop spread a bucket); a timing
//! wheel (2,048 slots of 128 ns, one cache line each) in front of it about 140, but consecutive events fall hundreds
//! of slots apart over its 128 KiB, so its pushes and pops cost about 6 D1 misses per read, a quarter of all. This
//! heap costs about 85 instructions more per event (276 per read) and 6.6 D1 read and 2.3 D1 write misses fewer
//! per read (docs/validation.md, ninth step). Two runs of 32 beside it (the rest overflowing to the heap): 206
//! instructions per read fewer and about as many D1 misses; three or four runs of 32 took every event, for up to
//! 300 fewer instructions but 0.6 more D1 read misses (their rings' lines left the cache between turns), three or
//! four of 16 about 160 fewer (eleventh step). Three runs of 32 (twelfth step, once a read's delivery step was gone
//! and with it 2.4 D1 misses per read): 90 fewer instructions and 0.46 more D1 read misses per read than two.
//! A run for events at the clock (fourteenth step, writes): a GC-steady write's flash transactions mostly enter
//! the scheduler at the clock, where every run's last was in the future, so 61% of its events went through the heap;
//! with it 232 instructions per write fewer (20,000 writes; 229 on 200,000), 13 per read more. A spill run, tried
//! before the heap and looked at only while it holds any: 409 per write fewer again and 37 per read fewer (a
//! write's events still overflow, but into a heap a few events deep). Five runs beside the present one instead of
//! three (every one looked at by every pop): 198 per write fewer than three, 136 per read more; two spill runs: 24
//! per write fewer than one, 29 per read more. A run for the events their callers schedule in time order (a host
//! write's admission when its data is in DRAM, a flash transaction's arrival at the scheduler: every lane's last
//! was later than most of them, so that they went to the heap): 110 per write fewer (-1.1%, twenty-third step),
//! reads unchanged (their transactions' arrivals go there too, paying for the run's look in `pop`).

use super::Time;

/// Somewhere events of type `E` can be scheduled (the device's queue takes the events of every layer).
pub trait Schedule<E> {
    fn at(&mut self, t: Time, e: E);
    /// `at` of an event its caller schedules in time order with others of its kind (`EventQueue::push_ordered`).
    fn at_ordered(&mut self, t: Time, e: E) {
        self.at(t, e);
    }
}

/// Sorted runs beside the heap (see `EventQueue`), and each one's room (a power of two): a full run takes nothing
/// more until an event leaves it, so that the runs' buffers stay few cache lines (5 KiB all together, with the
/// present and spill runs).
const LANES: usize = 3;
const RUN: usize = 32;
/// The run of events scheduled at the loop's clock itself (`EventQueue::push`), after the `LANES` runs.
const PRESENT: usize = LANES;
/// A run for events the `LANES` runs do not take (no run's last is early enough, or the run chosen is full), tried
/// before the heap; `pop` looks at it, as at the present run, only while it holds any (a read's events seldom
/// spill, so reads do not pay for a fifth run's comparison on every event).
const SPILL: usize = LANES + 1;
/// A run for the events their callers schedule in time order (`EventQueue::push_ordered`), looked at by `pop` only
/// while it holds any, as the present and spill runs.
const ORDERED: usize = LANES + 2;
/// Runs in all, the present, spill and ordered ones included; also the index that names the heap
/// (`EventQueue::next_in`).
const RUNS: usize = LANES + 3;

/// Pending events, earliest first.
///
/// Most events come in a few streams each scheduled in time order (a transfer's end a fixed time after the
/// present; a sensing's end a page type's fixed time after it; a firmware step's end on the controller's cores),
/// so an event goes to the end of one of `LANES` sorted runs when it is not earlier than that run's last (the run
/// whose last is the latest such, so that the others stay open for earlier ones), and to the binary heap only
/// when no run takes it (the spill run, `SPILL`, included). An event scheduled at the clock itself (a flash
/// transaction entering the scheduler as its step is taken, most of a GC-steady write's arrivals) goes to a run of
/// its own (`PRESENT`): every pending event is at the clock or later, so such events come in key order by
/// themselves, and the run empties before the clock moves on; in the `LANES` runs they found every run's last in
/// the future, and went to the heap. The next event is the least key among the runs' first and the heap's top.
/// Keys are unique (the sequence number), so the order of events is the same as one heap's, whatever holds them.
pub struct EventQueue<E> {
    /// A binary min-heap by key.
    heap: Vec<Entry<E>>,
    /// Runs sorted by key: run `i` in ring `slots[i * RUN..][..RUN]` from `heads[i]`, `lens[i]` long (made with the
    /// first event: filled with copies of it).
    slots: Vec<Entry<E>>,
    heads: [u32; RUNS],
    lens: [u32; RUNS],
    /// Per run, its first event's key (`u128::MAX`: empty).
    fronts: [u128; RUNS],
    /// Per run, its last event's time (0: empty, which takes any event).
    backs: [u64; RUNS],
    /// The least key pending (`u128::MAX`: none) and where it is (`RUNS`: the heap's top).
    next: u128,
    next_in: usize,
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

/// A key's time.
#[inline]
fn time_of(key: u128) -> Time {
    Time::from_ns((key >> 64) as u64)
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: Vec::new(),
            slots: Vec::new(),
            heads: [0; RUNS],
            lens: [0; RUNS],
            fronts: [u128::MAX; RUNS],
            backs: [0; RUNS],
            next: u128::MAX,
            next_in: RUNS,
            seq: 0,
            clock: Time::ZERO,
            processed: 0,
        }
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
        // The run whose last is the latest not after this one. Its last was scheduled earlier (a lower sequence
        // number), so comparing times is enough.
        let tn = t.as_ns();
        let best = if t == self.clock && (self.lens[PRESENT] as usize) < RUN {
            // At the clock: every event of the present run is too (the clock has not moved past them).
            PRESENT
        } else {
            let mut best = RUNS;
            let mut best_back = 0u64;
            for (i, &b) in self.backs[..LANES].iter().enumerate() {
                if b <= tn && b >= best_back {
                    best = i;
                    best_back = b;
                }
            }
            let taken = best < RUNS && (self.lens[best] as usize) < RUN;
            if !taken && self.backs[SPILL] <= tn && (self.lens[SPILL] as usize) < RUN {
                SPILL
            } else {
                best
            }
        };
        let at = if best < RUNS && (self.lens[best] as usize) < RUN {
            self.append(best, key, e);
            best
        } else {
            self.heap_push(key, e);
            RUNS
        };
        if key < self.next {
            self.next = key;
            self.next_in = at;
        }
    }

    /// `push` of an event its caller schedules in time order with the others pushed so (host writes' admissions,
    /// each when its data is in DRAM; flash transactions' arrivals at the scheduler: every lane's last was later
    /// than most of them, and they went to the heap): to the ordered run while it is not earlier than that run's
    /// last and the run has room, else as `push`. Either way the same order of events (keys are unique).
    #[inline(always)]
    pub fn push_ordered(&mut self, t: Time, e: E) {
        let t = t.max(self.clock);
        let tn = t.as_ns();
        if tn < self.backs[ORDERED] || self.lens[ORDERED] as usize >= RUN {
            return self.push(t, e);
        }
        self.seq += 1;
        let key = u128::from(tn) << 64 | u128::from(self.seq);
        self.append(ORDERED, key, e);
        if key < self.next {
            self.next = key;
            self.next_in = ORDERED;
        }
    }

    /// Puts an event at the end of run `run`, which has room and whose last is not later.
    #[inline(always)]
    fn append(&mut self, run: usize, key: u128, e: E) {
        if self.slots.is_empty() {
            self.make_slots(Entry { key, e });
        }
        let len = self.lens[run];
        let slot = (self.heads[run] + len) as usize % RUN;
        self.slots[run * RUN + slot] = Entry { key, e };
        self.lens[run] = len + 1;
        self.backs[run] = time_of(key).as_ns();
        // An empty run's first (its length read once, not its first key compared as a `u128`).
        if len == 0 {
            self.fronts[run] = key;
        }
    }

    /// The runs' rings, made with the first event that goes to one (filled with copies of it): once per queue, out
    /// of line so that `push` keeps no registers for it.
    #[cold]
    #[inline(never)]
    fn make_slots(&mut self, first: Entry<E>) {
        self.slots = vec![first; RUNS * RUN];
    }

    fn heap_push(&mut self, key: u128, e: E) {
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

    /// The heap's top, taken out. Inlined into `pop` (as the compiler mostly chose: where it did not, after unrelated
    /// changes to the write path, the call cost ~26 instructions a GC-steady write).
    #[inline]
    fn heap_pop(&mut self) -> Entry<E> {
        let last = self.heap.pop().expect("the heap holds the next event");
        if self.heap.is_empty() {
            return last;
        }
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
    }

    /// Time of the next event.
    #[inline]
    pub fn peek_time(&self) -> Option<Time> {
        (self.next != u128::MAX).then(|| time_of(self.next))
    }

    /// Takes the next event, moving the clock to it.
    #[inline]
    pub fn pop(&mut self) -> Option<(Time, E)> {
        if self.next == u128::MAX {
            return None;
        }
        let i = self.next_in;
        let top = if i < RUNS {
            let h = self.heads[i] as usize;
            let top = self.slots[i * RUN + h];
            self.lens[i] -= 1;
            if self.lens[i] > 0 {
                let h = (h + 1) % RUN;
                self.heads[i] = h as u32;
                self.fronts[i] = self.slots[i * RUN + h].key;
            } else {
                // Emptied: it takes any event next, from the start of its ring.
                self.heads[i] = 0;
                self.fronts[i] = u128::MAX;
                self.backs[i] = 0;
            }
            top
        } else {
            self.heap_pop()
        };
        // The next: the least of the runs' first and the heap's top (the present run's looked at only when it holds
        // any: most events of a read go elsewhere).
        let (mut next, mut next_in) = match self.heap.first() {
            Some(h) => (h.key, RUNS),
            None => (u128::MAX, RUNS),
        };
        for (j, &f) in self.fronts[..LANES].iter().enumerate() {
            if f < next {
                next = f;
                next_in = j;
            }
        }
        for j in [PRESENT, SPILL, ORDERED] {
            if self.lens[j] != 0 && self.fronts[j] < next {
                next = self.fronts[j];
                next_in = j;
            }
        }
        self.next = next;
        self.next_in = next_in;
        let t = time_of(top.key);
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
        self.heap.len() + self.lens.iter().sum::<u32>() as usize
    }

    pub fn is_empty(&self) -> bool {
        self.next == u128::MAX
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
    #[inline(always)]
    fn at_ordered(&mut self, t: Time, e: F) {
        self.push_ordered(t, e.into());
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
    fn events_at_the_clock_go_to_the_present_run_after_ties_scheduled_before() {
        let mut q = EventQueue::new();
        q.push(Time::from_ns(100), 'a');
        q.push(Time::from_ns(200), 'x'); // a tie at 200 scheduled long before the clock reaches it
        q.push(Time::from_ns(200), 'y');
        assert_eq!(q.pop(), Some((Time::from_ns(100), 'a')));
        q.push(Time::from_ns(100), 'b'); // at the clock
        q.push(Time::from_ns(50), 'c'); // in the past: taken at the clock, after b
        assert_eq!(q.lens[PRESENT], 2);
        assert_eq!(q.pop(), Some((Time::from_ns(100), 'b')));
        q.push(Time::from_ns(100), 'd');
        assert_eq!(q.pop(), Some((Time::from_ns(100), 'c')));
        assert_eq!(q.pop(), Some((Time::from_ns(100), 'd')));
        assert_eq!(q.pop(), Some((Time::from_ns(200), 'x')));
        q.push(Time::from_ns(200), 'z'); // at the clock, after the tie scheduled before it
        assert_eq!(q.lens[PRESENT], 1);
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, vec!['y', 'z']);
        assert!(q.is_empty() && q.lens == [0; RUNS]);
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

    #[test]
    fn streams_in_runs_and_the_rest_in_the_heap() {
        // Six interleaved streams, each in time order (more than there are runs), one event out of order, ties
        // across streams: the same order as the reference, and some events did go to the heap.
        let (mut q, mut r) = (EventQueue::new(), Reference::default());
        let mut id = 0u32;
        let mut both = |q: &mut EventQueue<u32>, r: &mut Reference, t: u64| {
            q.push(Time::from_ns(t), id);
            r.push(Time::from_ns(t), id);
            id += 1;
        };
        // Each earlier than every run's last: one run each, the spill run last, then the heap.
        for t in (0..LANES as u64 + 2).rev() {
            both(&mut q, &mut r, 5000 + t);
        }
        assert_eq!((q.heap.len(), q.lens[SPILL]), (1, 1));
        // One stream in time order fills the run that took the latest of those (it holds one), then goes on in the
        // spill run.
        for t in 0..RUN as u64 + 8 {
            both(&mut q, &mut r, 6000 + t);
        }
        assert_eq!((q.heap.len(), q.lens[SPILL]), (1, 1 + 9));
        for round in 0..50u64 {
            for s in 0..6u64 {
                both(&mut q, &mut r, round * 100 + (s % 3) * 7 + 1000 * (s / 3));
            }
            if round % 7 == 3 {
                both(&mut q, &mut r, round * 50);
                assert_eq!(q.pop(), r.pop());
            }
        }
        assert_eq!(q.len(), r.heap.len());
        while let Some(e) = r.pop() {
            assert_eq!(q.peek_time(), Some(e.0));
            assert_eq!(q.pop(), Some(e));
        }
        assert!(q.pop().is_none() && q.is_empty() && q.lens == [0; RUNS]);
    }

    #[test]
    fn an_ordered_stream_goes_to_its_own_run_while_in_order() {
        let (mut q, mut r) = (EventQueue::new(), Reference::default());
        let mut id = 0u32;
        let mut both = |q: &mut EventQueue<u32>, r: &mut Reference, t: u64, ordered: bool| {
            if ordered {
                q.push_ordered(Time::from_ns(t), id);
            } else {
                q.push(Time::from_ns(t), id);
            }
            r.push(Time::from_ns(t), id);
            id += 1;
        };
        // Every lane's last far ahead (as a program's end leaves it): an admission's time fits no lane.
        for t in [900_000, 800_000, 700_000] {
            both(&mut q, &mut r, t, false);
        }
        for t in [10, 20, 20, 35] {
            both(&mut q, &mut r, t, true);
        }
        assert_eq!((q.lens[ORDERED], q.heap.len()), (4, 0));
        // Earlier than the run's last: where `push` puts it (the spill run here); later ones go on in the run.
        both(&mut q, &mut r, 30, true);
        both(&mut q, &mut r, 40, true);
        assert_eq!((q.lens[ORDERED], q.lens[SPILL], q.heap.len()), (5, 1, 0));
        // A full run takes nothing more.
        for t in 0..RUN as u64 {
            both(&mut q, &mut r, 100 + t, true);
        }
        assert_eq!((q.lens[ORDERED] as usize, q.lens[SPILL], q.heap.len()), (RUN, 1 + 5, 0));
        while let Some(e) = r.pop() {
            assert_eq!(q.pop(), Some(e));
        }
        assert!(q.is_empty() && q.lens == [0; RUNS]);
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
        fn agrees_with_the_binary_heap(ops in prop::collection::vec((0u8..5, 0u64..3, 0u64..5000, any::<bool>()), 1..800)) {
            let (mut q, mut r) = (EventQueue::new(), Reference::default());
            let mut id = 0u32;
            // A stream mostly in time order, as `push_ordered`'s callers schedule (its steps now and then fall
            // behind the clock).
            let mut stream = Time::ZERO;
            for (kind, scale, x, ordered) in ops {
                if kind == 0 {
                    prop_assert_eq!(q.pop(), r.pop());
                } else {
                    // Offsets of a few ns (ties), of microseconds, and far ahead; some before the clock; some on a
                    // grid of 64 us steps, so that many events share a time, scheduled long apart.
                    let off = x << (scale * 12);
                    let t = match kind {
                        1 => Time::from_ns(r.clock.as_ns().saturating_sub(x)),
                        2 => r.clock + off,
                        3 => Time::from_ns((r.clock.as_ns() / 65_536 + x % 8) * 65_536),
                        _ => {
                            stream = Time::from_ns((stream.as_ns() + off % 3000).saturating_sub(if x % 16 == 0 { 5000 } else { 0 }));
                            stream
                        }
                    };
                    // Any event may be pushed as ordered: one earlier than the ordered run's last goes elsewhere.
                    if ordered || kind == 4 {
                        q.push_ordered(t, id);
                    } else {
                        q.push(t, id);
                    }
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
