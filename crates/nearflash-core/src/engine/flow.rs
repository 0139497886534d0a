//! Timing plans: a command's timing as a dataflow graph of steps, resolved by the device's event loop.
//!
//! A step waits for its inputs (each an [`At`]: a point in virtual time that may not be known yet), then runs: the
//! owner of the flow (the device) takes each step whose inputs are all known (`pop_ready`) and either resolves it at
//! once (a reservation on a timeline, a join) or later, when an event completes it (a flash transaction, a write
//! admission). Resolving a step makes its dependents' inputs known in turn. The flow itself only keeps the graph: it
//! knows nothing of what a step does (`S` is the owner's step type).
//!
//! Handles are `Copy` and may be kept across commands. A resolved step's slot may be reused once it resolved more
//! than [`RECLAIM_NS`] before the loop's clock (`reclaim`), and is when a new step needs one; a handle to a reused slot reads as "long ago" (value 0 plus its
//! offset): as an input of a join it gives way to the other inputs, and a step that would start before the loop's
//! clock starts at the clock (the owner clamps), which is where it would have started anyway.

use super::Time;
use super::HeadVec;
use std::collections::{HashSet, VecDeque};
use std::ops::Add;

/// How long after its resolution a step's slot is kept for handles that still name it.
pub const RECLAIM_NS: u64 = 100_000_000;

const KNOWN: u32 = u32::MAX;
const NONE: u32 = u32::MAX;
/// Marks an edge's `node` as the payload of a step riding on the edge's source (`Flow::add_rider`), not a node.
const RIDER: u32 = 1 << 31;

/// Inputs a lazy join may have (`Flow::lazy_max_all`); one with more is made at once.
pub const LAZY_INPUTS: usize = 8;

/// Inputs a join's gathering dedups by a scan (`Flow::gather`); past these, by a hash set.
const SCAN: usize = 32;

/// A join described but not made (`Flow::lazy_max_all`): a step added with it (`Flow::add_lazy`) waits for its
/// inputs itself.
#[derive(Clone, Copy, Debug)]
pub enum Lazy {
    /// No join needed: a known time or one step's end.
    At(At),
    Join(LazyJoin),
}

/// The latest of `known` and `n` inputs (distinct, none known when described), behind `hops` joins: the first of
/// them, then joins of it alone with known times (`Flow::lazy_max`). The inputs stay in the flow's list of the last
/// join gathered (`Flow::pending`; a copy here was a 150-byte value moved twice per program), so a lazy join is
/// used before the flow gathers another: `ticket` checks it. Nothing resolves between its description and its use
/// (the device's `program_pages` describes and uses it in one call), so its inputs are waited for without a look.
#[derive(Clone, Copy, Debug)]
pub struct LazyJoin {
    known: Time,
    hops: u8,
    n: u8,
    ticket: u32,
}

/// A point in virtual time: known (`At::at(t)`), or the end of a step plus an offset.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct At {
    node: u32,
    gen: u32,
    /// The time (ns) when known, else the offset (ns) after the step's end.
    t: u64,
}

impl At {
    pub const ZERO: At = At { node: KNOWN, gen: 0, t: 0 };

    /// A known time (`At::at(t)` reads as what it is at every call site, more than a `new` would).
    #[inline]
    #[allow(clippy::self_named_constructors)]
    pub const fn at(t: Time) -> At {
        At { node: KNOWN, gen: 0, t: t.as_ns() }
    }

    /// The time, if it is a known constant (steps' ends are known through [`Flow::value`]).
    #[inline]
    pub fn known(self) -> Option<Time> {
        (self.node == KNOWN).then_some(Time::from_ns(self.t))
    }

    /// Whether this is the end of a step (known or not) rather than a constant.
    #[inline]
    pub fn is_step(self) -> bool {
        self.node != KNOWN
    }
}

impl From<Time> for At {
    fn from(t: Time) -> At {
        At::at(t)
    }
}

impl Default for At {
    fn default() -> At {
        At::ZERO
    }
}

impl Add<u64> for At {
    type Output = At;
    #[inline]
    fn add(self, d: u64) -> At {
        At { t: self.t + d, ..self }
    }
}

impl std::fmt::Debug for At {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.known() {
            Some(t) => write!(f, "At({t})"),
            None => write!(f, "At(step {} + {})", self.node, self.t),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    /// Some inputs are not known yet.
    Waiting,
    /// Inputs known; in the ready queue.
    Ready,
    /// Taken by the owner, not resolved yet.
    Running,
    Resolved,
}

/// A step's place in the graph. Its payload lives apart (`Flow::steps`) and goes back to the payloads' free list
/// when the step resolves, so that what is kept of a resolved step until [`RECLAIM_NS`] later (for handles that
/// still name it) is these 32 bytes: every step of the last 100 ms of virtual time stays in memory, and a node of a
/// payload's size (about 110 bytes) made every step's slot a cache miss when it was reused.
struct Node {
    gen: u32,
    waiting: u32,
    /// Head of the list of steps waiting for this one (`Flow::edges`).
    deps: u32,
    /// Index of the payload in `Flow::steps` (`NONE` once resolved, or for a step made without one).
    step: u32,
    /// While the step waits: its latest known input (its start once all are known). Once resolved: its end.
    t: Time,
    state: State,
    /// Joins this step absorbed (`add_lazy`): once its inputs are known it goes round the ready queue this many
    /// times more before it is taken, where each join would have resolved and made the next ready.
    hops: u8,
}

/// A dependent of a step: `node` waits for this step's end plus `off` (or, with `RIDER` set, a step without a node
/// rides on it: `node` less `RIDER` is its payload).
#[derive(Clone, Copy)]
struct Edge {
    node: u32,
    off: u64,
    next: u32,
}

/// The graph of steps of every command in flight.
pub struct Flow<S> {
    nodes: Vec<Node>,
    /// The payloads of unresolved steps; a slot is reused (last freed first) as soon as its step resolves.
    steps: Vec<S>,
    free_steps: Vec<u32>,
    edges: Vec<Edge>,
    free_edge: u32,
    ready: HeadVec<u32>,
    /// Resolved steps in order of resolution: (value, index, generation), reused from the front.
    resolved: VecDeque<(Time, u32, u32)>,
    /// The loop's clock as of the last `reclaim`: a step resolved `RECLAIM_NS` before it may give up its slot.
    clock: Time,
    /// `max_all`'s list of inputs not known yet, kept between calls so that a join allocates nothing; a lazy join's
    /// inputs until it is used.
    pending: Vec<At>,
    /// Counts the lists `pending` held and the lazy joins used: a lazy join names the list its inputs are in.
    ticket: u32,
}

impl<S: Default> Default for Flow<S> {
    fn default() -> Self {
        Flow {
            nodes: Vec::new(),
            steps: Vec::new(),
            free_steps: Vec::new(),
            edges: Vec::new(),
            free_edge: NONE,
            ready: HeadVec::default(),
            resolved: VecDeque::new(),
            clock: Time::ZERO,
            pending: Vec::new(),
            ticket: 0,
        }
    }
}

impl<S: Default> Flow<S> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Steps whose slot is in use (a reclaimable slot counts until it is reused).
    pub fn live(&self) -> usize {
        self.nodes.len()
    }

    #[inline]
    fn handle(&self, idx: u32) -> At {
        At { node: idx, gen: self.nodes[idx as usize].gen, t: 0 }
    }

    /// Whether `at` names a step still in its slot.
    #[inline]
    fn current(&self, at: At) -> bool {
        self.nodes.get(at.node as usize).is_some_and(|n| n.gen == at.gen)
    }

    /// The time `at` stands for, if known (a reclaimed step counts as 0: long ago).
    #[inline]
    pub fn value(&self, at: At) -> Option<Time> {
        if at.node == KNOWN || !self.current(at) {
            return Some(Time::from_ns(at.t));
        }
        let n = &self.nodes[at.node as usize];
        (n.state == State::Resolved).then_some(n.t + at.t)
    }

    /// Whether `at` is not known yet.
    #[inline]
    pub fn pending(&self, at: At) -> bool {
        self.value(at).is_none()
    }

    fn alloc(&mut self, step: S, floor: Time) -> u32 {
        let payload = self.alloc_payload(step);
        self.alloc_node(payload, floor)
    }

    /// A payload slot holding `step` (the last freed first).
    #[inline]
    fn alloc_payload(&mut self, step: S) -> u32 {
        match self.free_steps.pop() {
            Some(p) => {
                self.steps[p as usize] = step;
                p
            }
            None => {
                self.steps.push(step);
                (self.steps.len() - 1) as u32
            }
        }
    }

    /// A node for a step whose payload is `payload` (`NONE`: it has none).
    #[inline]
    fn alloc_node(&mut self, payload: u32, floor: Time) -> u32 {
        let node = Node { gen: 0, waiting: 0, deps: NONE, step: payload, t: floor, state: State::Waiting, hops: 0 };
        // The oldest resolved step's slot, if it resolved `RECLAIM_NS` before the clock: the slot is written here
        // anyway, so reclaiming it now costs no second look at it (a reclaim pass read every node once more, long
        // after it left the cache).
        match self.resolved.front() {
            Some(&(v, i, gen)) if v.saturating_add_ns(RECLAIM_NS) <= self.clock => {
                self.resolved.pop_front();
                let n = &mut self.nodes[i as usize];
                debug_assert!(n.gen == gen && n.state == State::Resolved, "a resolved step is reclaimed once");
                *n = Node { gen: gen.wrapping_add(1), ..node };
                i
            }
            _ => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        }
    }

    /// Makes node `idx` wait for `input` (or folds it into its start when known).
    #[inline(always)]
    fn wire(&mut self, idx: u32, input: At) {
        match self.value(input) {
            Some(t) => {
                let n = &mut self.nodes[idx as usize];
                n.t = n.t.max(t);
            }
            None => self.wait_for(idx, input),
        }
    }

    /// Makes node `idx` wait for `input`, which is not known: a gathered join's input (`pending`), or a step just
    /// added (nothing resolves in between), so no look at its value.
    #[inline(always)]
    fn wait_for(&mut self, idx: u32, input: At) {
        debug_assert!(self.pending(input), "an input waited for is not known");
        self.push_edge(input.node, idx, input.t);
        self.nodes[idx as usize].waiting += 1;
    }

    /// Puts `node` (a node, or a rider's payload with `RIDER`) first in the list of `src`'s dependents, waiting for
    /// its end plus `off`.
    #[inline(always)]
    fn push_edge(&mut self, src: u32, node: u32, off: u64) {
        let src = src as usize;
        let edge = Edge { node, off, next: self.nodes[src].deps };
        let e = match self.free_edge {
            NONE => self.new_edge(edge),
            e => {
                self.free_edge = self.edges[e as usize].next;
                self.edges[e as usize] = edge;
                e
            }
        };
        self.nodes[src].deps = e;
    }

    /// An edge slot more (none free): out of line, so that `wire`'s common path saves no registers for the call.
    #[cold]
    #[inline(never)]
    fn new_edge(&mut self, edge: Edge) -> u32 {
        self.edges.push(edge);
        (self.edges.len() - 1) as u32
    }

    fn arm(&mut self, idx: u32) {
        let n = &mut self.nodes[idx as usize];
        if n.waiting == 0 {
            n.state = State::Ready;
            self.ready.push_back(idx);
        }
    }

    /// A step that starts once every input is known (at the latest of them, and no earlier than `floor`).
    pub fn add(&mut self, step: S, floor: Time, inputs: &[At]) -> At {
        let idx = self.alloc(step, floor);
        for &i in inputs {
            self.wire(idx, i);
        }
        self.arm(idx);
        self.handle(idx)
    }

    /// A join of `inputs`: `add` of `S::default()` (the owner's join), made without a payload (`take_step` gives
    /// `S::default()` for a step without one), so that no payload slot is written and freed.
    fn join(&mut self, floor: Time, inputs: &[At]) -> At {
        let idx = self.alloc_node(NONE, floor);
        for &i in inputs {
            self.wire(idx, i);
        }
        self.arm(idx);
        self.handle(idx)
    }

    /// `join` of inputs none of which is known (what gathering left pending): each waited for without a look at its
    /// value.
    fn join_of_pending(&mut self, known: Time, inputs: &[At]) -> At {
        let idx = self.alloc_node(NONE, known);
        for &i in inputs {
            self.wait_for(idx, i);
        }
        self.arm(idx);
        self.handle(idx)
    }

    /// `add` with one input (its own body: no slice to loop over).
    pub fn add1(&mut self, step: S, floor: Time, input: At) -> At {
        let idx = self.alloc(step, floor);
        self.wire(idx, input);
        self.arm(idx);
        self.handle(idx)
    }

    /// The latest of `a` and `b` (a join step when either is not known).
    pub fn max(&mut self, a: At, b: At) -> At {
        match (self.value(a), self.value(b)) {
            (Some(x), Some(y)) => At::at(x.max(y)),
            _ if a == b => a,
            _ => self.join(Time::ZERO, &[a, b]),
        }
    }

    /// The latest of `times` (`floor` if there are none).
    pub fn max_all(&mut self, floor: Time, times: impl IntoIterator<Item = At>) -> At {
        let known = self.gather(floor, times);
        self.join_pending(known)
    }

    /// `max_all(Time::ZERO, [first, rest...])`, the inputs in a slice (the write path's joins: GC's chain of moves).
    pub fn max_all_of(&mut self, first: At, rest: &[At]) -> At {
        let known = self.gather_of(first, rest);
        self.join_pending(known)
    }

    /// `max_all_of(first, steps)` where `steps` are distinct steps just added (none known yet, none `first`): GC's
    /// chain of its moves' programs. Only `first` may be known or repeated, so the join is wired directly, as
    /// `max_all_of` wires it (`first` if pending, then `steps` in order): no gathering's scan for repeats, no second
    /// look at each input's value.
    pub fn max_all_fresh(&mut self, first: At, steps: &[At]) -> At {
        debug_assert!(
            steps.iter().enumerate().all(|(k, &s)| self.pending(s) && s != first && !steps[..k].contains(&s)),
            "fresh steps are distinct, pending and not `first`"
        );
        if steps.is_empty() {
            return self.max_all_of(first, steps);
        }
        let (floor, first_pending) = match self.value(first) {
            Some(t) => (t, false),
            None => (Time::ZERO, true),
        };
        let idx = self.alloc_node(NONE, floor);
        if first_pending {
            self.wait_for(idx, first);
        }
        for &s in steps {
            self.wait_for(idx, s);
        }
        self.handle(idx)
    }

    /// The latest of `known` and the inputs `gather` left in `self.pending` (a join step if there are any).
    fn join_pending(&mut self, known: Time) -> At {
        let pending = std::mem::take(&mut self.pending);
        let at = match pending.len() {
            0 => At::at(known),
            _ => self.join_of_pending(known, &pending),
        };
        self.pending = pending;
        at
    }

    /// The latest of `floor` and the known ones of `times`; the others, repeats dropped, go to `self.pending` in
    /// order of first occurrence.
    fn gather(&mut self, floor: Time, times: impl IntoIterator<Item = At>) -> Time {
        // Repeats are dropped by a scan while the list is short and by a hash set beyond (an extension command
        // waits on every page it read: a scan of ~10^5 handles each made a SearSSD batch quadratic). Either way
        // `pending` keeps the first occurrences in order, so the join is wired as before.
        let mut known = floor;
        self.ticket = self.ticket.wrapping_add(1);
        let mut pending = std::mem::take(&mut self.pending);
        pending.clear();
        // Made only past `SCAN` inputs (its hasher's keys are a thread-local look-up per set).
        let mut seen: Option<HashSet<At>> = None;
        for t in times {
            match self.value(t) {
                Some(v) => known = known.max(v),
                None if pending.len() < SCAN => {
                    if !pending.contains(&t) {
                        pending.push(t);
                    }
                }
                None => {
                    let seen = seen.get_or_insert_with(HashSet::new);
                    if seen.len() < pending.len() {
                        seen.extend(pending.iter().copied());
                    }
                    if seen.insert(t) {
                        pending.push(t);
                    }
                }
            }
        }
        self.pending = pending;
        known
    }

    /// `gather(Time::ZERO, [first, rest...])` for inputs in a slice: the same known time and the same `pending`, in
    /// the same order, by a plain loop (the chained iterator and the hash set's branch cost ~50 instructions a join
    /// on the write path, where a program joins its slots' arrivals and GC's chain its moves). Past `SCAN` inputs,
    /// `gather` itself.
    fn gather_of(&mut self, first: At, rest: &[At]) -> Time {
        if rest.len() >= SCAN {
            return self.gather(Time::ZERO, std::iter::once(first).chain(rest.iter().copied()));
        }
        let mut known = Time::ZERO;
        self.ticket = self.ticket.wrapping_add(1);
        let mut pending = std::mem::take(&mut self.pending);
        pending.clear();
        // At most `SCAN` inputs: the list stays below `SCAN`, where `gather` scans too.
        self.gather_one(first, &mut known, &mut pending);
        for &t in rest {
            self.gather_one(t, &mut known, &mut pending);
        }
        self.pending = pending;
        known
    }

    /// One input of `gather_of`: its value into `known`, or the handle into `pending` unless there already.
    #[inline(always)]
    fn gather_one(&self, t: At, known: &mut Time, pending: &mut Vec<At>) {
        match self.value(t) {
            Some(v) => *known = (*known).max(v),
            None => {
                if !pending.contains(&t) {
                    pending.push(t);
                }
            }
        }
    }

    /// `max_all` for a step that will be the join's only dependent (`add_lazy`): the join is not made (unless it has
    /// more than [`LAZY_INPUTS`] inputs not known), only described.
    pub fn lazy_max_all(&mut self, floor: Time, times: impl IntoIterator<Item = At>) -> Lazy {
        let known = self.gather(floor, times);
        self.lazy_pending(known)
    }

    /// `lazy_max_all(Time::ZERO, [first, rest...])`, the inputs in a slice (a program's slots' arrivals).
    pub fn lazy_max_all_of(&mut self, first: At, rest: &[At]) -> Lazy {
        let known = self.gather_of(first, rest);
        self.lazy_pending(known)
    }

    /// The join of `known` and the inputs `gather` left in `self.pending`, described (or made, past
    /// [`LAZY_INPUTS`]).
    fn lazy_pending(&mut self, known: Time) -> Lazy {
        match self.pending.len() {
            0 => Lazy::At(At::at(known)),
            n if n <= LAZY_INPUTS => Lazy::Join(LazyJoin { known, hops: 1, n: n as u8, ticket: self.ticket }),
            _ => {
                let pending = std::mem::take(&mut self.pending);
                let at = self.join_of_pending(known, &pending);
                self.pending = pending;
                Lazy::At(at)
            }
        }
    }

    /// `max_all(Time::ZERO, [l, more])` of a lazy `l`, as lazy: with `more` known, one join more in front of the
    /// step (a join of `l`'s join alone); else `l`'s join is made and joined with `more`.
    pub fn lazy_max(&mut self, l: Lazy, more: At) -> Lazy {
        match l {
            Lazy::At(a) => self.lazy_max_all(Time::ZERO, [a, more]),
            Lazy::Join(j) => match self.value(more) {
                Some(v) if j.hops < u8::MAX => Lazy::Join(LazyJoin { known: j.known.max(v), hops: j.hops + 1, ..j }),
                _ => {
                    let a = self.made(j);
                    self.lazy_max_all(Time::ZERO, [a, more])
                }
            },
        }
    }

    /// The join `l` describes, made (a known time or a step's end).
    pub fn made(&mut self, l: LazyJoin) -> At {
        let idx = self.alloc_node(NONE, l.known);
        self.wire_lazy(idx, l);
        self.nodes[idx as usize].hops = l.hops - 1;
        self.arm(idx);
        self.handle(idx)
    }

    /// Makes node `idx` wait for the inputs of lazy join `l`, which are still the list `pending` holds (a lazy join
    /// is used once, before the flow gathers another join's inputs: else this panics, not a wrong graph).
    /// Inlined: every program's step is added through it (`add_lazy`), and its call cost ~15 of its ~140.
    #[inline(always)]
    fn wire_lazy(&mut self, idx: u32, l: LazyJoin) {
        assert_eq!(l.ticket, self.ticket, "a lazy join used twice, or after another join was gathered");
        self.ticket = self.ticket.wrapping_add(1);
        let inputs = std::mem::take(&mut self.pending);
        for &i in &inputs[..usize::from(l.n)] {
            self.wait_for(idx, i);
        }
        self.pending = inputs;
    }

    /// `add1(step, floor, input)` where `input` is a lazy join: the step waits for the join's inputs itself and,
    /// once they are known, goes round the ready queue once for each join it stands in for, so that it is taken
    /// exactly where it would have been behind them (and at the same start: the owner clamps a step's start to
    /// its clock when it takes it, as it did each join's end). A join step costs a node, an edge and its own
    /// resolution; a round trip costs two queue operations.
    pub fn add_lazy(&mut self, step: S, floor: Time, input: Lazy) -> At {
        match input {
            Lazy::At(a) => self.add1(step, floor, a),
            Lazy::Join(j) => {
                let idx = self.alloc(step, floor.max(j.known));
                self.wire_lazy(idx, j);
                self.nodes[idx as usize].hops = j.hops;
                self.arm(idx);
                self.handle(idx)
            }
        }
    }

    /// `add1` of a step whose input is known while no step is ready, taken at once (the step `pop_ready` would give
    /// next): its handle, index and start, as `add1` then `pop_ready` return them. None, with nothing added, when a
    /// step is ready or the input is not known. The step has no payload (`take_step` gives `S::default()`): its
    /// owner needs nothing of it when it ends, and its slot is not read again (a cache miss, long after).
    pub fn add_taken(&mut self, floor: Time, input: At) -> Option<(At, u32, Time)> {
        self.add_taken_as(None, floor, input)
    }

    /// `add_taken` of a step that keeps its payload `step` (`step_mut` reaches it; `take_step` gives it back).
    pub fn add_taken_with(&mut self, step: S, floor: Time, input: At) -> Option<(At, u32, Time)> {
        self.add_taken_as(Some(step), floor, input)
    }

    #[inline(always)]
    fn add_taken_as(&mut self, step: Option<S>, floor: Time, input: At) -> Option<(At, u32, Time)> {
        if !self.ready.is_empty() {
            return None;
        }
        let t = self.value(input)?;
        let payload = match step {
            Some(step) => self.alloc_payload(step),
            None => NONE,
        };
        let idx = self.alloc_node(payload, floor);
        let n = &mut self.nodes[idx as usize];
        n.t = n.t.max(t);
        n.state = State::Running;
        let start = n.t;
        Some((self.handle(idx), idx, start))
    }

    /// Takes the next step whose inputs are all known: (handle, index, start). Inlined into the device's drain, its
    /// one caller in the loop (left a call there by the compiler's other choices, it cost GC-steady writes ~200 a write).
    #[inline]
    pub fn pop_ready(&mut self) -> Option<(At, u32, Time)> {
        let mut idx = self.ready.pop_front()?;
        while self.nodes[idx as usize].hops > 0 {
            // Where a join it absorbed would have resolved: to the back of the queue, as the join's end made it.
            self.nodes[idx as usize].hops -= 1;
            self.ready.push_back(idx);
            idx = self.ready.pop_front()?;
        }
        let n = &mut self.nodes[idx as usize];
        n.state = State::Running;
        let ready = n.t;
        Some((self.handle(idx), idx, ready))
    }

    /// Whether a step is waiting to be taken.
    #[inline]
    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// The step of a running node (its payload is left as `S::default()`; `S::default()` for a step without one).
    pub fn take_step(&mut self, idx: u32) -> S {
        match self.nodes[idx as usize].step {
            NONE => S::default(),
            p => std::mem::take(&mut self.steps[p as usize]),
        }
    }

    /// The payload of step `at` if it has one, has not ended (waiting for its inputs, or running) and no step waits
    /// for it: its creator may give it more to do before it ends.
    pub fn unwatched_mut(&mut self, at: At) -> Option<&mut S> {
        if at.t != 0 || !self.current(at) {
            return None;
        }
        let n = &self.nodes[at.node as usize];
        // Indexed only for a step with a payload (`then_some` would index a payload-less step's `NONE` too).
        (matches!(n.state, State::Waiting | State::Running) && n.deps == NONE && n.step != NONE).then(|| &mut self.steps[n.step as usize])
    }

    /// Gives running step `at`, made without a payload (`add_taken`) and with no step waiting for it, the payload
    /// `step`, for its owner to read when it ends (`take_step`); false, with nothing changed, otherwise.
    pub fn give_step(&mut self, at: At, step: S) -> bool {
        if at.t != 0 || !self.current(at) {
            return false;
        }
        let n = &self.nodes[at.node as usize];
        if n.state != State::Running || n.deps != NONE || n.step != NONE {
            return false;
        }
        let payload = self.alloc_payload(step);
        self.nodes[at.node as usize].step = payload;
        true
    }

    /// Running step `idx` goes to the back of the ready queue with its inputs known at `t`, to be taken again
    /// (`pop_ready`) in turn: where a step that waited for its end alone would have been made ready by `resolve`.
    pub fn requeue(&mut self, idx: u32, t: Time) {
        let n = &mut self.nodes[idx as usize];
        debug_assert_eq!(n.state, State::Running, "requeueing a step that is not running");
        n.state = State::Ready;
        n.t = t;
        self.ready.push_back(idx);
    }

    /// A step `step` whose inputs are known at `t`, to the back of the ready queue to be taken in turn
    /// (`pop_ready`): where `requeue` puts a running step, for an owner that kept the step's payload elsewhere while
    /// its work ran (a read's transaction that delivers and completes it: `DeviceCore::flash_read_delivering`).
    pub fn add_ready(&mut self, step: S, t: Time) {
        let idx = self.alloc(step, t);
        self.nodes[idx as usize].state = State::Ready;
        self.ready.push_back(idx);
    }

    /// The payload of a step, to read while it runs.
    pub fn step_mut(&mut self, idx: u32) -> &mut S {
        &mut self.steps[self.nodes[idx as usize].step as usize]
    }

    /// The step `at` names, if it is still running (not resolved, not reclaimed).
    pub fn running(&self, at: At) -> Option<u32> {
        (self.current(at) && self.nodes[at.node as usize].state == State::Running).then_some(at.node)
    }

    /// `add1(step, floor, input)` of a step no step will wait for, where `input` is not known: the step rides on
    /// `input`'s step, as an edge with no node of its own, and gets its node (`ready_rider`) only when that step
    /// resolves, made ready where `add1`'s node would have been (its edge is where `add1`'s was among the step's
    /// dependents); or it goes back to the owner to be run at once (`resolve_taking_rider`). Its start is its input's
    /// value (the owner clamps a start to its clock, as it did `add1`'s `floor`). False, with nothing done, where
    /// `input` is known.
    pub fn add_rider(&mut self, step: S, input: At) -> bool {
        if self.value(input).is_some() {
            return false;
        }
        let payload = self.alloc_payload(step);
        debug_assert!(payload & RIDER == 0, "a payload index below the rider mark");
        self.push_edge(input.node, payload | RIDER, input.t);
        true
    }

    /// `resolve`, except that a step riding on `idx` (`add_rider`) that `pop_ready` would give next (no step is
    /// ready, and it is `idx`'s newest dependent) is given back with its start, to be run at once, with no node.
    pub fn resolve_taking_rider(&mut self, idx: u32, value: Time) -> Option<(S, Time)> {
        let first = self.nodes[idx as usize].deps;
        if first == NONE || self.edges[first as usize].node & RIDER == 0 || !self.ready.is_empty() {
            self.resolve(idx, value);
            return None;
        }
        let Edge { node, off, next } = self.edges[first as usize];
        self.nodes[idx as usize].deps = next;
        self.edges[first as usize].next = self.free_edge;
        self.free_edge = first;
        let payload = node & !RIDER;
        let step = std::mem::take(&mut self.steps[payload as usize]);
        self.free_steps.push(payload);
        self.resolve(idx, value);
        Some((step, value + off))
    }

    /// Resolves running step `idx` at `value`: its dependents learn the input.
    pub fn resolve(&mut self, idx: u32, value: Time) {
        let n = &mut self.nodes[idx as usize];
        debug_assert_eq!(n.state, State::Running, "resolving a step that is not running");
        n.state = State::Resolved;
        n.t = value;
        let mut e = std::mem::replace(&mut n.deps, NONE);
        let gen = n.gen;
        let payload = std::mem::replace(&mut n.step, NONE);
        // Dropped now, not at reclaim: the slot is reused while it is still in the cache.
        if payload != NONE {
            self.steps[payload as usize] = S::default();
            self.free_steps.push(payload);
        }
        self.resolved.push_back((value, idx, gen));
        while e != NONE {
            let Edge { node, off, next } = self.edges[e as usize];
            self.edges[e as usize].next = self.free_edge;
            self.free_edge = e;
            if node & RIDER != 0 {
                self.ready_rider(node & !RIDER, value + off);
                e = next;
                continue;
            }
            let d = &mut self.nodes[node as usize];
            d.t = d.t.max(value + off);
            d.waiting -= 1;
            if d.waiting == 0 {
                d.state = State::Ready;
                self.ready.push_back(node);
            }
            e = next;
        }
    }

    /// A node for the riding step whose payload is `payload`, ready to start at `t` (its input's end): in the ready
    /// queue where `add1`'s node would have been made ready.
    #[cold]
    #[inline(never)]
    fn ready_rider(&mut self, payload: u32, t: Time) {
        let r = self.alloc_node(payload, t);
        self.nodes[r as usize].state = State::Ready;
        self.ready.push_back(r);
    }

    /// Lets the slots of steps resolved more than [`RECLAIM_NS`] before `clock` be reused: each is taken, oldest
    /// first, when a new step needs a slot (until then its handles still read its value).
    #[inline]
    pub fn reclaim(&mut self, clock: Time) {
        self.clock = self.clock.max(clock);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default, Debug, PartialEq, Clone, Copy)]
    enum Step {
        #[default]
        Join,
        Wait,
        Book(u64),
    }

    /// Runs every ready step: joins resolve at their start, bookings `d` later, waits stay running.
    fn run(f: &mut Flow<Step>) -> Vec<u32> {
        let mut waiting = Vec::new();
        while let Some((_, idx, ready)) = f.pop_ready() {
            match f.take_step(idx) {
                Step::Join => f.resolve(idx, ready),
                Step::Book(d) => f.resolve(idx, ready + d),
                Step::Wait => waiting.push(idx),
            }
        }
        waiting
    }

    #[test]
    fn known_inputs_make_known_times_without_steps() {
        let mut f: Flow<Step> = Flow::new();
        assert_eq!(f.max(At::at(Time::from_ns(5)), At::at(Time::from_ns(9))), At::at(Time::from_ns(9)));
        assert_eq!(f.max_all(Time::from_ns(3), [At::at(Time::from_ns(1)), At::at(Time::from_ns(2))]), At::at(Time::from_ns(3)));
        assert_eq!(At::at(Time::from_ns(5)) + 10, At::at(Time::from_ns(15)));
        assert_eq!(f.live(), 0);
    }

    #[test]
    fn a_chain_resolves_when_its_first_step_does() {
        let mut f: Flow<Step> = Flow::new();
        let w = f.add1(Step::Wait, Time::ZERO, At::at(Time::from_ns(100)));
        let b = f.add1(Step::Book(50), Time::ZERO, w + 7);
        let j = f.max(b, At::at(Time::from_ns(1000)));
        let waiting = run(&mut f);
        assert_eq!(waiting.len(), 1);
        assert!(f.pending(b) && f.pending(j));
        f.resolve(waiting[0], Time::from_ns(400));
        assert!(run(&mut f).is_empty());
        assert_eq!(f.value(w), Some(Time::from_ns(400)));
        assert_eq!(f.value(b), Some(Time::from_ns(457)), "starts at the wait's end + 7, books 50");
        assert_eq!(f.value(j), Some(Time::from_ns(1000)));
        assert_eq!(f.value(j + 5), Some(Time::from_ns(1005)));
    }

    #[test]
    fn a_step_taken_at_once_is_what_add_then_pop_ready_give() {
        let (mut f, mut g): (Flow<Step>, Flow<Step>) = (Flow::new(), Flow::new());
        let w = f.add1(Step::Wait, Time::ZERO, At::ZERO);
        let v = g.add1(Step::Wait, Time::ZERO, At::ZERO);
        let (iw, iv) = (run(&mut f)[0], run(&mut g)[0]);
        f.resolve(iw, Time::from_ns(40));
        g.resolve(iv, Time::from_ns(40));
        for (floor, input) in [(Time::from_ns(10), w + 5), (Time::from_ns(90), w + 5), (Time::from_ns(3), At::at(Time::from_ns(7)))] {
            let a = f.add1(Step::Wait, floor, input);
            let popped = f.pop_ready().expect("ready");
            let taken = g.add_taken(floor, if input.is_step() { v + 5 } else { input }).expect("taken");
            assert_eq!((popped.0.node, popped.1, popped.2), (taken.0.node, taken.1, taken.2));
            assert_eq!(a, popped.0);
            assert_eq!((f.take_step(popped.1), g.take_step(taken.1)), (Step::Wait, Step::Join), "no payload: the default");
            assert!(f.pending(a) && g.pending(taken.0) && !g.has_ready());
            f.resolve(popped.1, Time::from_ns(100));
            g.resolve(taken.1, Time::from_ns(100));
        }
        // Not taken: an input not known, or another step ready first.
        let pending = g.add1(Step::Wait, Time::ZERO, At::ZERO);
        let idx = g.pop_ready().unwrap().1;
        let live = g.live();
        assert!(g.add_taken(Time::ZERO, pending).is_none());
        g.add1(Step::Book(1), Time::ZERO, At::ZERO);
        assert!(g.add_taken(Time::ZERO, At::ZERO).is_none());
        assert_eq!(g.live(), live + 1, "nothing added by a refused take");
        g.resolve(idx, Time::from_ns(1));
    }

    /// Pops every ready step in order, as the device's loop does (joins resolve at their start clamped to `clock`,
    /// bookings `d` after it, waits stay running): (payload, start) in the order taken.
    fn run_log(f: &mut Flow<Step>, clock: Time, log: &mut Vec<(Step, Time)>) -> Vec<u32> {
        let mut waiting = Vec::new();
        while let Some((_, idx, ready)) = f.pop_ready() {
            let ready = ready.max(clock);
            let step = f.take_step(idx);
            log.push((step, ready));
            match step {
                Step::Join => f.resolve(idx, ready),
                Step::Book(d) => f.resolve(idx, ready + d),
                Step::Wait => waiting.push(idx),
            }
        }
        waiting
    }

    #[test]
    fn a_running_step_given_a_payload_and_requeued_is_taken_where_its_dependent_would_have_been() {
        // Three flows alike, except that the step behind work r is a dependent of r's step in one (`add1`), r's own
        // payload in another (`give_step`, then `requeue` at r's end), and in the third r is no step and the step is
        // added ready at r's end (`add_ready`): the same bookings at the same starts in the same order, whichever of
        // r and another running step x ends first, and r (a step) ends at the booking's end.
        for r_first in [true, false] {
            let (mut f, mut g, mut h): (Flow<Step>, Flow<Step>, Flow<Step>) = (Flow::new(), Flow::new(), Flow::new());
            let (mut lf, mut lg, mut lh) = (Vec::new(), Vec::new(), Vec::new());
            let floor = Time::from_ns(20);
            let mut x = [0; 3];
            for (i, flow) in [&mut f, &mut g, &mut h].into_iter().enumerate() {
                let (at, idx, _) = flow.add_taken(floor, At::ZERO).unwrap();
                flow.add1(Step::Book(3), floor, at);
                x[i] = idx;
            }
            let (rf, irf, _) = f.add_taken(floor, At::ZERO).unwrap();
            let (rg, irg, _) = g.add_taken(floor, At::ZERO).unwrap();
            let d = f.add1(Step::Book(10), floor, rf);
            assert!(g.give_step(rg, Step::Book(10)));
            let mut ends = |r: bool| {
                if r {
                    f.resolve(irf, Time::from_ns(60));
                    let step = g.take_step(irg);
                    assert_eq!(step, Step::Book(10), "its payload, taken at its end");
                    *g.step_mut(irg) = step;
                    g.requeue(irg, Time::from_ns(60));
                    h.add_ready(Step::Book(10), Time::from_ns(60));
                } else {
                    for (flow, idx) in [&mut f, &mut g, &mut h].into_iter().zip(x) {
                        flow.resolve(idx, Time::from_ns(50));
                    }
                }
            };
            ends(r_first);
            ends(!r_first);
            run_log(&mut f, Time::from_ns(30), &mut lf);
            run_log(&mut g, Time::from_ns(30), &mut lg);
            run_log(&mut h, Time::from_ns(30), &mut lh);
            assert_eq!((&lf, &lf), (&lg, &lh), "r first: {r_first}");
            assert_eq!(lf.len(), 2);
            assert_eq!((f.value(d), g.value(rg)), (Some(Time::from_ns(70)), Some(Time::from_ns(70))));
        }
        // Refused, with nothing changed: a known time, a step something waits for, one with a payload, one ended.
        let mut g: Flow<Step> = Flow::new();
        assert!(!g.give_step(At::at(Time::from_ns(5)), Step::Book(1)));
        let (watched, iw, _) = g.add_taken(Time::ZERO, At::ZERO).unwrap();
        g.add1(Step::Join, Time::ZERO, watched);
        assert!(!g.give_step(watched, Step::Book(1)));
        let (r, ir, _) = g.add_taken(Time::ZERO, At::ZERO).unwrap();
        assert!(g.give_step(r, Step::Book(1)));
        assert!(!g.give_step(r, Step::Book(2)), "it has one");
        assert!(!g.give_step(r + 1, Step::Book(2)), "an offset handle");
        assert_eq!(g.take_step(ir), Step::Book(1));
        g.resolve(ir, Time::from_ns(9));
        assert!(!g.give_step(r, Step::Book(1)), "ended");
        g.resolve(iw, Time::from_ns(1));
    }

    #[test]
    fn a_riding_step_is_taken_where_its_add1_step_would_have_been() {
        // Two flows alike, except that a step waiting for running step w alone is `add1`'s in one and rides on w in
        // the other (`add_rider`), with dependents of w wired before and after it, with or without another step
        // ready when w ends, and with an offset or not: the same steps at the same starts in the same order. Taken
        // back at once (`resolve_taking_rider`) only where `pop_ready` would give it next.
        for (before, after, other_ready, off) in [(0, 0, false, 0), (2, 0, false, 4), (0, 2, false, 0), (1, 1, false, 0), (2, 0, true, 0), (0, 0, true, 3)] {
            let (mut f, mut g): (Flow<Step>, Flow<Step>) = (Flow::new(), Flow::new());
            let (mut lf, mut lg) = (Vec::new(), Vec::new());
            let (floor, clock) = (Time::from_ns(20), Time::from_ns(30));
            let (wf, iwf, _) = f.add_taken(floor, At::ZERO).unwrap();
            let (wg, iwg, _) = g.add_taken(floor, At::ZERO).unwrap();
            for i in 0..before {
                f.add1(Step::Book(i), floor, wf);
                g.add1(Step::Book(i), floor, wg);
            }
            f.add1(Step::Book(100), floor, wf + off);
            assert!(g.add_rider(Step::Book(100), wg + off));
            for i in 0..after {
                f.add1(Step::Book(10 + i), floor, wf);
                g.add1(Step::Book(10 + i), floor, wg);
            }
            if other_ready {
                f.add1(Step::Book(50), floor, At::at(Time::from_ns(5)));
                g.add1(Step::Book(50), floor, At::at(Time::from_ns(5)));
            }
            f.resolve(iwf, Time::from_ns(60));
            let taken = g.resolve_taking_rider(iwg, Time::from_ns(60));
            assert_eq!(taken.is_some(), after == 0 && !other_ready, "{before} {after} {other_ready}");
            if let Some((step, start)) = taken {
                lg.push((step, start.max(clock)));
            }
            run_log(&mut f, clock, &mut lf);
            run_log(&mut g, clock, &mut lg);
            assert_eq!(lf, lg, "{before} {after} {other_ready} {off}");
            assert_eq!(lf.len() as u64, before + after + 1 + u64::from(other_ready));
        }
        // A known input: refused (`add1` folds it).
        let mut g: Flow<Step> = Flow::new();
        assert!(!g.add_rider(Step::Book(1), At::at(Time::from_ns(5))));
    }

    #[test]
    fn a_lazy_join_takes_its_step_where_the_join_would_have() {
        // Two flows built alike, except that the steps behind joins are made with `max_all` + `add1` in one and
        // `lazy_max_all` / `lazy_max` + `add_lazy` in the other: the same steps must be taken in the same order at
        // the same starts, whatever order the inputs end in and whatever else their ends make ready.
        for order in [[0usize, 1, 2, 3], [3, 2, 1, 0], [1, 3, 0, 2], [2, 0, 3, 1]] {
            let (mut f, mut g): (Flow<Step>, Flow<Step>) = (Flow::new(), Flow::new());
            let (mut lf, mut lg) = (Vec::new(), Vec::new());
            let wf: Vec<At> = (0..4).map(|_| f.add1(Step::Wait, Time::ZERO, At::ZERO)).collect();
            let wg: Vec<At> = (0..4).map(|_| g.add1(Step::Wait, Time::ZERO, At::ZERO)).collect();
            let (idf, idg) = (run_log(&mut f, Time::ZERO, &mut lf), run_log(&mut g, Time::ZERO, &mut lg));
            let known = At::at(Time::from_ns(7));
            // A step behind a join of three inputs (one repeated, one known); one behind that join and a known time
            // (two joins); one behind a join of a join and a pending input; steps that share the inputs.
            let j = f.max_all(Time::from_ns(3), [wf[0], wf[1], wf[0], known]);
            f.add1(Step::Book(1), Time::from_ns(2), j);
            let l = g.lazy_max_all(Time::from_ns(3), [wg[0], wg[1], wg[0], known]);
            g.add_lazy(Step::Book(1), Time::from_ns(2), l);
            f.add1(Step::Book(2), Time::ZERO, wf[1]);
            g.add1(Step::Book(2), Time::ZERO, wg[1]);
            let j = f.max_all(Time::ZERO, [wf[2], wf[3]]);
            let j2 = f.max_all(Time::ZERO, [j, At::at(Time::from_ns(900))]);
            f.add1(Step::Book(3), Time::ZERO, j2);
            let l = g.lazy_max_all(Time::ZERO, [wg[2], wg[3]]);
            let l2 = g.lazy_max(l, At::at(Time::from_ns(900)));
            g.add_lazy(Step::Book(3), Time::ZERO, l2);
            let j = f.max_all(Time::ZERO, [wf[0], wf[3]]);
            let j2 = f.max_all(Time::ZERO, [j, wf[2]]);
            f.add1(Step::Book(4), Time::ZERO, j2);
            let l = g.lazy_max_all(Time::ZERO, [wg[0], wg[3]]);
            let l2 = g.lazy_max(l, wg[2]);
            g.add_lazy(Step::Book(4), Time::ZERO, l2);
            assert!(f.live() > g.live(), "fewer steps made");
            for (k, &i) in order.iter().enumerate() {
                let (t, clock) = (Time::from_ns(100 * (k as u64 + 1)), Time::from_ns(100 * k as u64 + 50));
                f.resolve(idf[i], t);
                g.resolve(idg[i], t);
                run_log(&mut f, clock, &mut lf);
                run_log(&mut g, clock, &mut lg);
            }
            let books = |l: &[(Step, Time)]| l.iter().filter(|(s, _)| *s != Step::Join).copied().collect::<Vec<_>>();
            assert_eq!(books(&lf), books(&lg), "order {order:?}");
            assert_eq!(books(&lg).len(), 8, "4 waits and 4 bookings");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

        /// `gather_of` (a slice) leaves what `gather` (an iterator) does: the same known time and the same pending
        /// handles in the same order, over known times, resolved and pending steps, offsets and repeats, on both
        /// sides of the scan's limit (`SCAN`); and `max_all_of` / `lazy_max_all_of` wire joins alike.
        #[test]
        fn gathering_a_slice_is_gathering_its_iterator(picks in proptest::collection::vec((0usize..8, 0u64..3), 1..40)) {
            let mut f: Flow<Step> = Flow::new();
            let waits: Vec<At> = (0..4).map(|_| f.add1(Step::Wait, Time::ZERO, At::ZERO)).collect();
            let done: Vec<At> = (0..2).map(|k| f.add1(Step::Book(10 * k + 5), Time::ZERO, At::ZERO)).collect();
            let idle = run(&mut f);
            let input = |(i, off): (usize, u64)| match i {
                0..=3 => waits[i] + off,
                4 | 5 => done[i - 4] + off,
                _ => At::at(Time::from_ns(3 + 7 * i as u64 + off)),
            };
            let times: Vec<At> = picks.into_iter().map(input).collect();
            let (first, rest) = (times[0], &times[1..]);
            let known = f.gather(Time::ZERO, times.iter().copied());
            let pending = f.pending.clone();
            proptest::prop_assert_eq!(f.gather_of(first, rest), known);
            proptest::prop_assert_eq!(&f.pending, &pending);
            let mut g: Flow<Step> = Flow::new();
            let gw: Vec<At> = (0..4).map(|_| g.add1(Step::Wait, Time::ZERO, At::ZERO)).collect();
            let gd: Vec<At> = (0..2).map(|k| g.add1(Step::Book(10 * k + 5), Time::ZERO, At::ZERO)).collect();
            let gidle = run(&mut g);
            proptest::prop_assert_eq!((&gw, &gd), (&waits, &done));
            proptest::prop_assert_eq!(f.max_all(Time::ZERO, times.iter().copied()), g.max_all_of(first, rest));
            let (lf, lg) = (f.lazy_max_all(Time::ZERO, times.iter().copied()), g.lazy_max_all_of(first, rest));
            f.add_lazy(Step::Book(1), Time::ZERO, lf);
            g.add_lazy(Step::Book(1), Time::ZERO, lg);
            let (mut logf, mut logg) = (Vec::new(), Vec::new());
            for (k, (&i, &j)) in idle.iter().zip(&gidle).enumerate() {
                f.resolve(i, Time::from_ns(50 * (k as u64 + 1)));
                g.resolve(j, Time::from_ns(50 * (k as u64 + 1)));
                run_log(&mut f, Time::ZERO, &mut logf);
                run_log(&mut g, Time::ZERO, &mut logg);
            }
            proptest::prop_assert_eq!(logf, logg);
        }

        /// `max_all_fresh` (GC's join of its programs) wires the join `max_all_of` does: the same steps are taken
        /// at the same starts in the same order, whatever `first` is (zero, known, a resolved or a pending step,
        /// with an offset) and whichever inputs the fresh steps wait for (`first`'s own among them).
        #[test]
        fn a_join_of_fresh_steps_runs_as_a_gathered_one(
            kind in 0usize..4,
            off in 0u64..3,
            fresh in proptest::collection::vec(0usize..5, 0..7),
            order in proptest::strategy::Strategy::prop_shuffle(proptest::sample::subsequence(vec![0usize, 1, 2], 3)),
        ) {
            let twin = |gathered: bool| {
                let mut f: Flow<Step> = Flow::new();
                let waits: Vec<At> = (0..3).map(|_| f.add1(Step::Wait, Time::ZERO, At::ZERO)).collect();
                let done = f.add1(Step::Book(5), Time::ZERO, At::ZERO);
                let idle = run(&mut f);
                let first = match kind {
                    0 => At::ZERO,
                    1 => At::at(Time::from_ns(1000 + off)), // later than every step's end
                    2 => done + off,
                    _ => waits[0] + off,
                };
                let inputs = [waits[0], waits[1], waits[2], done, At::at(Time::from_ns(2))];
                let steps: Vec<At> =
                    fresh.iter().enumerate().map(|(k, &i)| f.add1(Step::Book(10 + k as u64), Time::ZERO, inputs[i])).collect();
                let j = if gathered { f.max_all_of(first, &steps) } else { f.max_all_fresh(first, &steps) };
                f.add1(Step::Book(100), Time::ZERO, j);
                let mut log = Vec::new();
                run_log(&mut f, Time::ZERO, &mut log);
                for (k, &i) in order.iter().enumerate() {
                    f.resolve(idle[i], Time::from_ns(50 * (k as u64 + 1)));
                    run_log(&mut f, Time::ZERO, &mut log);
                }
                (f.value(j), log)
            };
            let (gathered, fresh) = (twin(true), twin(false));
            proptest::prop_assert!(gathered.0.is_some(), "every step ran");
            proptest::prop_assert_eq!(fresh, gathered);
        }

        /// A list of inputs whose repeats are only dropped where adjacent (`Ftl::program`'s arrivals) gathers as the
        /// same list with every repeat dropped (what `program` listed before): the same known time, the same
        /// pending handles in the same order, so the same join; and it has one entry exactly when that list has
        /// one (the sink's join-free case).
        #[test]
        fn inputs_repeated_apart_gather_as_inputs_listed_once(picks in proptest::collection::vec((0usize..8, 0u64..2), 1..40)) {
            let mut f: Flow<Step> = Flow::new();
            let waits: Vec<At> = (0..4).map(|_| f.add1(Step::Wait, Time::ZERO, At::ZERO)).collect();
            let done: Vec<At> = (0..2).map(|k| f.add1(Step::Book(10 * k + 5), Time::ZERO, At::ZERO)).collect();
            run(&mut f);
            let input = |(i, off): (usize, u64)| match i {
                0..=3 => waits[i] + off,
                4 | 5 => done[i - 4] + off,
                _ => At::at(Time::from_ns(3 + 7 * i as u64 + off)),
            };
            let times: Vec<At> = picks.into_iter().map(input).collect();
            let (mut once, mut apart) = (Vec::new(), Vec::new());
            for &t in &times {
                if !once.contains(&t) {
                    once.push(t);
                }
                if apart.last() != Some(&t) {
                    apart.push(t);
                }
            }
            proptest::prop_assert_eq!(once.len() == 1, apart.len() == 1);
            let floor = At::at(Time::from_ns(20));
            let known = f.gather_of(floor, &once);
            let pending = f.pending.clone();
            proptest::prop_assert_eq!(f.gather_of(floor, &apart), known);
            proptest::prop_assert_eq!(&f.pending, &pending);
            // The lazy joins alike but for their tickets (each gathering takes a new one).
            let described = |l: Lazy| match l {
                Lazy::At(a) => (Some(a), None),
                Lazy::Join(j) => (None, Some((j.known, j.hops, j.n))),
            };
            let lo = described(f.lazy_max_all_of(floor, &once));
            proptest::prop_assert_eq!(described(f.lazy_max_all_of(floor, &apart)), lo);
        }
    }

    #[test]
    #[should_panic(expected = "a lazy join used twice")]
    fn a_lazy_join_used_after_another_gathering_panics() {
        let mut f: Flow<Step> = Flow::new();
        let (a, b) = (f.add1(Step::Wait, Time::ZERO, At::ZERO), f.add1(Step::Wait, Time::ZERO, At::ZERO));
        let l = f.lazy_max_all(Time::ZERO, [a, b]);
        let _ = f.max_all(Time::ZERO, [b, a]);
        f.add_lazy(Step::Book(1), Time::ZERO, l);
    }

    #[test]
    #[should_panic(expected = "a lazy join used twice")]
    fn a_lazy_join_used_twice_panics() {
        let mut f: Flow<Step> = Flow::new();
        let (a, b) = (f.add1(Step::Wait, Time::ZERO, At::ZERO), f.add1(Step::Wait, Time::ZERO, At::ZERO));
        let Lazy::Join(j) = f.lazy_max_all(Time::ZERO, [a, b]) else { panic!("two pending inputs: a lazy join") };
        f.add_lazy(Step::Book(1), Time::ZERO, Lazy::Join(j));
        f.add_lazy(Step::Book(2), Time::ZERO, Lazy::Join(j));
    }

    #[test]
    fn a_join_waits_for_every_input() {
        let mut f: Flow<Step> = Flow::new();
        let a = f.add1(Step::Wait, Time::ZERO, At::ZERO);
        let b = f.add1(Step::Wait, Time::ZERO, At::ZERO);
        let j = f.max_all(Time::from_ns(10), [a, b + 3, a]);
        assert!(f.unwatched_mut(j).is_none(), "a join has no payload to give more to do");
        let w = run(&mut f);
        f.resolve(w[0], Time::from_ns(20));
        run(&mut f);
        assert!(f.pending(j));
        f.resolve(w[1], Time::from_ns(15));
        run(&mut f);
        assert_eq!(f.value(j), Some(Time::from_ns(20)), "max(20, 15 + 3, floor 10)");
    }

    #[test]
    fn a_join_of_many_repeated_inputs_waits_on_each_once_in_linear_time() {
        // 100,000 distinct pending inputs, each given three times (a scan per input took ~10^10 steps here).
        let mut f: Flow<Step> = Flow::new();
        let waits: Vec<At> = (0..100_000).map(|_| f.add1(Step::Wait, Time::ZERO, At::ZERO)).collect();
        let j = f.max_all(Time::from_ns(1), waits.iter().flat_map(|&w| [w, w + 2, w]));
        let w = run(&mut f);
        for (i, &idx) in w.iter().enumerate() {
            f.resolve(idx, Time::from_ns(i as u64));
        }
        run(&mut f);
        assert_eq!(f.value(j), Some(Time::from_ns(99_999 + 2)), "the latest input, its offset included");
    }

    #[test]
    fn a_resolved_steps_payload_slot_is_reused_at_once_and_its_value_kept() {
        let mut f: Flow<Step> = Flow::new();
        let a = f.add1(Step::Book(10), Time::ZERO, At::at(Time::from_ns(5)));
        run(&mut f);
        let b = f.add1(Step::Book(3), Time::ZERO, a);
        run(&mut f);
        assert_eq!(f.steps.len(), 1, "b's payload took a's slot, freed when a resolved");
        assert_eq!((f.value(a), f.value(b)), (Some(Time::from_ns(15)), Some(Time::from_ns(18))));
        assert_eq!(f.live(), 2, "the nodes stay until RECLAIM_NS after their ends");
    }

    #[test]
    fn reclaimed_slots_read_as_long_ago_and_are_reused() {
        let mut f: Flow<Step> = Flow::new();
        let a = f.add1(Step::Book(10), Time::ZERO, At::at(Time::from_ns(5)));
        run(&mut f);
        assert_eq!(f.value(a), Some(Time::from_ns(15)));
        f.reclaim(Time::from_ns(15 + RECLAIM_NS - 1));
        let b = f.add1(Step::Book(1), Time::ZERO, At::at(Time::from_ns(20)));
        assert_ne!(b.node, a.node, "kept until RECLAIM_NS after its end");
        assert_eq!((f.value(a), f.live()), (Some(Time::from_ns(15)), 2));
        run(&mut f);
        f.reclaim(Time::from_ns(15 + RECLAIM_NS));
        assert_eq!(f.value(a), Some(Time::from_ns(15)), "reclaimable, not reused yet: still its value");
        let c = f.add1(Step::Wait, Time::ZERO, At::ZERO);
        assert_eq!((c.node, f.live()), (a.node, 2), "the oldest slot reused, no new one");
        assert_eq!(f.value(a + 4), Some(Time::from_ns(4)), "the old handle is long ago");
        assert!(f.pending(c));
        let j = f.max(a + 4, c);
        assert!(f.pending(j), "a join with a stale handle waits for the other input");
        let d = f.add1(Step::Wait, Time::ZERO, At::ZERO);
        assert_ne!(d.node, b.node, "b resolved at 21 ns: 21 ns + RECLAIM_NS is after the clock, kept");
        assert_eq!(f.value(b), Some(Time::from_ns(21)));
    }
}
