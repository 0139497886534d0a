//! Submission/completion queue pairs: creation and deletion rules, queue-full back-pressure, and completions
//! delivered in virtual-time order (ties in submission order) with a phase tag per completion-queue lap.

use super::{field, Cqe, Refusal, Status};
use crate::ctrl::sched::Priority;
use crate::engine::{HeadVec, Time};
use crate::error::{Result, SimError};

struct Sq {
    depth: u32,
    /// The class of its commands' flash work (QPRIO).
    prio: Priority,
    cqid: u16,
    outstanding: u32,
    head: u16,
}

struct Cq {
    depth: u32,
    pending: Pending,
    head: u32,
    phase: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct CqeKey {
    dw0: u32,
    dw1: u32,
    sqid: u16,
    cid: u16,
    status: u16,
}

/// A completion queue's entries not reaped yet, earliest first (ties in the order they were posted): kept sorted
/// rather than in a binary heap, since completions are posted nearly in time order (an append; otherwise a binary
/// search and an insertion), and taking the earliest is a pop from the front (of a `HeadVec`: a `VecDeque`'s ring
/// arithmetic on each posting, look and reap was about 20 instructions a command).
#[derive(Default)]
struct Pending(HeadVec<(Time, CqeKey)>);

impl Pending {
    #[inline]
    fn push(&mut self, time: Time, key: CqeKey) {
        let q = &mut self.0;
        if q.back().is_none_or(|&(t, _)| t <= time) {
            q.push_back((time, key));
        } else {
            // After every entry at `time` or before: those were posted first.
            let i = q.as_slice().partition_point(|&(t, _)| t <= time);
            q.insert(i, (time, key));
        }
    }

    #[inline]
    fn peek_time(&self) -> Option<Time> {
        self.0.front().map(|&(t, _)| t)
    }

    #[inline]
    fn pop(&mut self) -> Option<(Time, CqeKey)> {
        self.0.pop_front()
    }
}

/// A completion as the host sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    pub time: Time,
    pub cqe: Cqe,
}

/// Queues by id: a vector indexed by queue id (ids are small, at most `nvme.max_queues`), looked up several times
/// per command, where a B-tree's search cost more than the rest of a lookup. Iterates in id order, as a B-tree would.
struct ById<T>(Vec<Option<T>>);

impl<T> ById<T> {
    fn new() -> Self {
        ById(Vec::new())
    }

    #[inline]
    fn get(&self, id: &u16) -> Option<&T> {
        self.0.get(usize::from(*id)).and_then(Option::as_ref)
    }

    #[inline]
    fn get_mut(&mut self, id: &u16) -> Option<&mut T> {
        self.0.get_mut(usize::from(*id)).and_then(Option::as_mut)
    }

    #[inline]
    fn contains_key(&self, id: &u16) -> bool {
        self.get(id).is_some()
    }

    fn insert(&mut self, id: u16, v: T) {
        let i = usize::from(id);
        if self.0.len() <= i {
            self.0.resize_with(i + 1, || None);
        }
        self.0[i] = Some(v);
    }

    fn remove(&mut self, id: &u16) -> Option<T> {
        self.0.get_mut(usize::from(*id)).and_then(Option::take)
    }

    /// The ids in use, in order.
    fn ids(&self) -> Vec<u16> {
        self.0.iter().enumerate().filter(|(_, v)| v.is_some()).map(|(i, _)| i as u16).collect()
    }

    fn values(&self) -> impl Iterator<Item = &T> + '_ {
        self.0.iter().flatten()
    }
}

pub struct QueueSet {
    sqs: ById<Sq>,
    cqs: ById<Cq>,
    max_queues: u16,
    max_depth: u32,
}

impl QueueSet {
    /// Queue set with the admin pair (queue 0) of `admin_depth` entries.
    pub fn new(max_queues: u16, max_depth: u32, admin_depth: u32) -> Self {
        let mut q = QueueSet { sqs: ById::new(), cqs: ById::new(), max_queues, max_depth };
        q.cqs.insert(0, Cq { depth: admin_depth, pending: Pending::default(), head: 0, phase: true });
        q.sqs.insert(0, Sq { depth: admin_depth, prio: Priority::Medium, cqid: 0, outstanding: 0, head: 0 });
        q
    }

    pub fn create_cq(&mut self, qid: u16, size: u32) -> std::result::Result<(), Refusal> {
        self.check_new_qid(qid, self.cqs.contains_key(&qid), "completion")?;
        self.check_size(size)?;
        self.cqs.insert(qid, Cq { depth: size, pending: Pending::default(), head: 0, phase: true });
        Ok(())
    }

    pub fn create_sq(&mut self, qid: u16, size: u32, cqid: u16, prio: Priority) -> std::result::Result<(), Refusal> {
        self.check_new_qid(qid, self.sqs.contains_key(&qid), "submission")?;
        if cqid == 0 || !self.cqs.contains_key(&cqid) {
            let why = format!("CQID = {cqid}: no I/O completion queue {cqid} to attach the submission queue to");
            return Err(Refusal::new(Status { sct: 1, sc: 0x00 }, Some(field::CDW11), why)); // Completion Queue Invalid
        }
        self.check_size(size)?;
        self.sqs.insert(qid, Sq { depth: size, prio, cqid, outstanding: 0, head: 0 });
        Ok(())
    }

    /// The priority of submission queue `sqid` (medium if it does not exist).
    pub fn priority(&self, sqid: u16) -> Priority {
        self.sqs.get(&sqid).map_or(Priority::Medium, |q| q.prio)
    }

    fn check_new_qid(&self, qid: u16, exists: bool, kind: &str) -> std::result::Result<(), Refusal> {
        let why = if qid == 0 {
            "queue 0 is the admin queue".to_owned()
        } else if qid > self.max_queues {
            format!("the device has I/O queues 1..={}", self.max_queues)
        } else if exists {
            format!("{kind} queue {qid} exists already")
        } else {
            return Ok(());
        };
        Err(Refusal::new(Status::INVALID_QUEUE_ID, Some(field::CDW10), format!("QID = {qid}: {why}")))
    }

    fn check_size(&self, size: u32) -> std::result::Result<(), Refusal> {
        if (2..=self.max_depth).contains(&size) {
            return Ok(());
        }
        let why = format!("a queue of {size} entries: queues hold 2..={} entries", self.max_depth);
        Err(Refusal::new(Status::INVALID_QUEUE_SIZE, Some(field::CDW10), why))
    }

    pub fn delete_sq(&mut self, qid: u16) -> std::result::Result<(), Refusal> {
        if qid == 0 || self.sqs.remove(&qid).is_none() {
            return Err(Refusal::new(Status::INVALID_QUEUE_ID, Some(field::CDW10), format!("QID = {qid}: no I/O submission queue {qid}")));
        }
        Ok(())
    }

    pub fn delete_cq(&mut self, qid: u16) -> std::result::Result<(), Refusal> {
        if qid == 0 || !self.cqs.contains_key(&qid) {
            return Err(Refusal::new(Status::INVALID_QUEUE_ID, Some(field::CDW10), format!("QID = {qid}: no I/O completion queue {qid}")));
        }
        if self.sqs.values().any(|s| s.cqid == qid) {
            let why = format!("completion queue {qid} still serves a submission queue: delete that first");
            return Err(Refusal::new(Status { sct: 1, sc: 0x0C }, Some(field::CDW10), why)); // Invalid Queue Deletion
        }
        self.cqs.remove(&qid);
        Ok(())
    }

    pub fn sq_exists(&self, qid: u16) -> bool {
        self.sqs.contains_key(&qid)
    }

    /// Depth of a submission queue.
    pub fn sq_depth(&self, qid: u16) -> Option<u32> {
        self.sqs.get(&qid).map(|s| s.depth)
    }

    /// Commands submitted to `sqid` whose completions the host has not reaped.
    pub fn outstanding(&self, sqid: u16) -> u32 {
        self.sqs.get(&sqid).map_or(0, |s| s.outstanding)
    }

    /// Takes a slot in `sqid` for a new command (a ring of depth N holds N - 1 entries).
    pub fn take_slot(&mut self, sqid: u16) -> Result<()> {
        let sq = self
            .sqs
            .get_mut(&sqid)
            .ok_or_else(|| SimError::InvalidArgument(format!("submission queue {sqid} does not exist")))?;
        if sq.outstanding + 1 >= sq.depth {
            return Err(SimError::InvalidArgument(format!(
                "submission queue {sqid} is full: {} commands outstanding, the most its {} entries hold (a ring holds one fewer than its entries); reap completions first",
                sq.outstanding,
                sq.depth
            )));
        }
        sq.outstanding += 1;
        // The ring's next index (`head` < `depth`): without a division per command.
        let next = u32::from(sq.head) + 1;
        sq.head = if next == sq.depth { 0 } else { next as u16 };
        Ok(())
    }

    /// Posts the completion of a command from `sqid` at `time`. Inlined into the device's one loop that posts.
    #[inline]
    pub fn post(&mut self, sqid: u16, time: Time, cid: u16, status: Status, dw0: u32, dw1: u32) {
        let Some(sq) = self.sqs.get(&sqid) else { return };
        let cqid = sq.cqid;
        let key = CqeKey { dw0, dw1, sqid, cid, status: status.field() };
        if let Some(cq) = self.cqs.get_mut(&cqid) {
            cq.pending.push(time, key);
        }
    }

    /// Earliest pending completion time on the CQ that `sqid` completes to.
    pub fn next_time(&self, sqid: u16) -> Option<Time> {
        let cqid = self.sqs.get(&sqid)?.cqid;
        self.cqs.get(&cqid)?.pending.peek_time()
    }

    /// Reaps the earliest completion on `sqid`'s CQ if it happened at or before `now`. Inlined: once per command,
    /// and the call's saved registers and the completion returned through memory were about a third of it.
    #[inline]
    pub fn reap(&mut self, sqid: u16, now: Time) -> Option<Completion> {
        let cqid = self.sqs.get(&sqid)?.cqid;
        let sq_head = self.sqs.get(&sqid)?.head;
        let cq = self.cqs.get_mut(&cqid)?;
        if cq.pending.peek_time()? > now {
            return None;
        }
        let (time, k) = cq.pending.pop()?;
        let phase = u16::from(cq.phase);
        cq.head += 1;
        if cq.head == cq.depth {
            cq.head = 0;
            cq.phase = !cq.phase;
        }
        if let Some(sq) = self.sqs.get_mut(&k.sqid) {
            sq.outstanding = sq.outstanding.saturating_sub(1);
        }
        let cqe = Cqe { dw0: k.dw0, dw1: k.dw1, sq_head, sq_id: k.sqid, cid: k.cid, status: (k.status << 1) | phase };
        Some(Completion { time, cqe })
    }

    pub fn sq_ids(&self) -> Vec<u16> {
        self.sqs.ids()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_rules_and_time_order() {
        let mut q = QueueSet::new(4, 64, 32);
        assert_eq!(q.create_sq(1, 8, 1, Priority::Medium).map_err(|r| r.status), Err(Status { sct: 1, sc: 0 }));
        q.create_cq(1, 8).unwrap();
        assert_eq!(q.create_cq(1, 8).map_err(|r| r.status), Err(Status::INVALID_QUEUE_ID));
        assert_eq!(q.create_cq(2, 1000).map_err(|r| r.status), Err(Status::INVALID_QUEUE_SIZE));
        q.create_sq(1, 4, 1, Priority::Medium).unwrap();
        for _ in 0..3 {
            q.take_slot(1).unwrap();
        }
        let full = q.take_slot(1).unwrap_err().to_string();
        assert!(full.contains("3 commands outstanding, the most its 4 entries hold"), "depth 4 holds 3: {full}");
        q.post(1, Time::from_ns(300), 1, Status::SUCCESS, 0, 0);
        q.post(1, Time::from_ns(100), 2, Status::LBA_OUT_OF_RANGE, 0, 0);
        q.post(1, Time::from_ns(100), 3, Status::SUCCESS, 0, 0);
        assert!(q.reap(1, Time::from_ns(50)).is_none());
        let a = q.reap(1, Time::from_ns(1000)).unwrap();
        let b = q.reap(1, Time::from_ns(1000)).unwrap();
        let c = q.reap(1, Time::from_ns(1000)).unwrap();
        assert_eq!((a.cqe.cid, b.cqe.cid, c.cqe.cid), (2, 3, 1));
        assert_eq!(a.cqe.status(), Status::LBA_OUT_OF_RANGE);
        assert_eq!(a.cqe.status & 1, 1, "phase tag of the first lap");
        assert_eq!(q.delete_cq(1).map_err(|r| r.status), Err(Status { sct: 1, sc: 0x0C }));
        q.delete_sq(1).unwrap();
        q.delete_cq(1).unwrap();
    }

    proptest::proptest! {
        /// Completions come out earliest first, ties in the order they were posted (as a binary heap of
        /// (time, posting order) gave them), however the times were posted.
        #[test]
        fn pending_is_earliest_first_then_posting_order(times in proptest::collection::vec(0u64..40, 0..60), pops in 0usize..60) {
            let mut p = Pending::default();
            let mut model: Vec<(u64, u16)> = Vec::new();
            let key = |cid| CqeKey { dw0: 0, dw1: 0, sqid: 1, cid, status: 0 };
            for (i, &t) in times.iter().enumerate() {
                p.push(Time::from_ns(t), key(i as u16));
                model.push((t, i as u16));
                if i == pops {
                    // Some taken halfway: later postings land among the rest.
                    for _ in 0..3 {
                        let want = model.iter().copied().min();
                        model.retain(|&m| Some(m) != want);
                        proptest::prop_assert_eq!(p.pop().map(|(t, k)| (t.as_ns(), k.cid)), want);
                    }
                }
            }
            model.sort();
            let got: Vec<(u64, u16)> = std::iter::from_fn(|| p.pop()).map(|(t, k)| (t.as_ns(), k.cid)).collect();
            proptest::prop_assert_eq!(got, model);
        }

        /// The same order with postings and reaps interleaved at length (the taken entries cleared when none is
        /// left, compacted when they are most of the list), times posted in a window that moves on as completions
        /// do, so that most land last and some among the rest.
        #[test]
        fn pending_keeps_its_order_over_long_runs(ops in proptest::collection::vec((0u8..3, 0u64..30), 0..400)) {
            let mut p = Pending::default();
            let mut model: Vec<(u64, u16)> = Vec::new();
            let (mut now, mut cid) = (0u64, 0u16);
            for (op, dt) in ops {
                if op < 2 {
                    p.push(Time::from_ns(now + dt), CqeKey { dw0: 0, dw1: 0, sqid: 1, cid, status: 0 });
                    model.push((now + dt, cid));
                    cid = cid.wrapping_add(1);
                } else {
                    // The earliest, the first posted among equals (`min_by_key` keeps the first of equal keys).
                    let want = model.iter().copied().min_by_key(|&(t, _)| t);
                    model.retain(|&m| Some(m) != want);
                    proptest::prop_assert_eq!(p.pop().map(|(t, k)| (t.as_ns(), k.cid)), want);
                    now = want.map_or(now, |w| w.0);
                }
                proptest::prop_assert_eq!(p.peek_time().map(|t| t.as_ns()), model.iter().map(|m| m.0).min());
            }
        }
    }
}
