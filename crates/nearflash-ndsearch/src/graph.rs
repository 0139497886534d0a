//! Neighbour lists of a proximity graph, stored flat (one fixed-capacity row per vertex: count, then ids) so that a
//! search reads one contiguous row per expanded vertex. Rows are atomics: during a parallel build, writers hold
//! the vertex's lock while searches of other threads read rows without locks (a reader may see a row mid-update;
//! every id it can see is a valid vertex, so the search stays correct, as in hnswlib). On x86 a relaxed atomic load
//! is a plain load, so a finished graph is searched at full speed.

use std::sync::atomic::{AtomicU32, Ordering};

/// Fixed-capacity neighbour rows, one per vertex.
#[derive(Debug, Default)]
pub struct Adjacency {
    cap: usize,
    slots: Vec<AtomicU32>,
}

impl Adjacency {
    pub fn new(cap: usize) -> Adjacency {
        Adjacency { cap, slots: Vec::new() }
    }
    /// Most neighbours a row holds.
    pub fn capacity(&self) -> usize {
        self.cap
    }
    pub fn len(&self) -> usize {
        self.slots.len() / (self.cap + 1)
    }
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
    /// Grows to `n` vertices (new rows empty).
    pub fn resize(&mut self, n: usize) {
        let want = n * (self.cap + 1);
        let more = want.saturating_sub(self.slots.len());
        reserve_gently(&mut self.slots, more);
        self.slots.resize_with(want, || AtomicU32::new(0));
    }
    /// Bytes held on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<AtomicU32>()
    }
    /// Number of neighbours of `v`.
    #[inline(always)]
    pub fn degree(&self, v: u32) -> usize {
        (self.slots[v as usize * (self.cap + 1)].load(Ordering::Acquire) as usize).min(self.cap)
    }
    /// Asks the CPU to fetch `v`'s row into cache.
    #[inline(always)]
    pub fn prefetch(&self, v: u32) {
        #[cfg(target_arch = "x86_64")]
        {
            let p = self.slots.as_ptr().wrapping_add(v as usize * (self.cap + 1)) as *const i8;
            for off in (0..(self.cap + 1) * 4).step_by(64) {
                // SAFETY: prefetch never faults, whatever the address.
                unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.wrapping_add(off)) };
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = v;
    }
    /// Calls `f` for every neighbour of `v`, in stored order.
    #[inline(always)]
    pub fn for_each(&self, v: u32, mut f: impl FnMut(u32)) {
        let base = v as usize * (self.cap + 1);
        let n = self.degree(v);
        for s in &self.slots[base + 1..base + 1 + n] {
            f(s.load(Ordering::Relaxed));
        }
    }
    /// `v`'s neighbours as a vector.
    pub fn neighbours(&self, v: u32) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.degree(v));
        self.for_each(v, |u| out.push(u));
        out
    }
    /// Replaces `v`'s row (at most `capacity` ids are kept; callers prune first). Caller holds `v`'s lock.
    pub fn set(&self, v: u32, ids: &[u32]) {
        let base = v as usize * (self.cap + 1);
        let n = ids.len().min(self.cap);
        for (s, &id) in self.slots[base + 1..base + 1 + n].iter().zip(ids) {
            s.store(id, Ordering::Relaxed);
        }
        self.slots[base].store(n as u32, Ordering::Release);
    }
    /// Appends `u` to `v`'s row if there is room; returns whether it did. Caller holds `v`'s lock.
    pub fn push(&self, v: u32, u: u32) -> bool {
        let base = v as usize * (self.cap + 1);
        let n = self.degree(v);
        if n >= self.cap {
            return false;
        }
        self.slots[base + 1 + n].store(u, Ordering::Relaxed);
        self.slots[base].store(n as u32 + 1, Ordering::Release);
        true
    }
    /// Total number of edges.
    pub fn edges(&self) -> usize {
        (0..self.len() as u32).map(|v| self.degree(v)).sum()
    }
}

/// Makes room for `additional` more elements, growing by an eighth at least rather than doubling: an index added
/// to in many small batches keeps at most ~12% spare room (memory per vector is what a large index is judged by),
/// and copying stays amortised O(1).
pub(crate) fn reserve_gently<T>(v: &mut Vec<T>, additional: usize) {
    if v.capacity() - v.len() < additional {
        let want = (v.len() + additional).max(v.capacity() + v.capacity() / 8);
        v.reserve_exact(want - v.len());
    }
}

/// Hands freed heap pages back to the operating system. glibc keeps the buffers an index outgrows (and the copies
/// an add brings in) as free heap, not returned: after ten adds an index held ~2x its own bytes resident (measured,
/// docs/ndsearch.md). Called after an add or a removal, which take far longer than this walk of the heap.
pub(crate) fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of the allocator's arenas; it touches no live allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Prunes distance-sorted candidates `(distance to p, id)` to at most `max` diverse neighbours of `p`: a candidate
/// is kept unless an already kept neighbour `s` has `alpha * d(s, c) < d(p, c)` (Vamana's RobustPrune; with
/// `alpha = 1` it is HNSW's neighbour-selection heuristic, strict as hnswlib's). Strict, so that duplicates of `p`
/// (`d(p, c) = 0`) are kept as neighbours: pruning them collapses a graph of repeated vectors into pieces.
/// `dist(a, b)` measures between vertices.
pub fn robust_prune(
    sorted: &[(f32, u32)],
    alpha: f32,
    max: usize,
    mut dist: impl FnMut(u32, u32) -> f32,
) -> Vec<u32> {
    let mut kept: Vec<u32> = Vec::with_capacity(max);
    for &(dpc, c) in sorted {
        if kept.len() >= max {
            break;
        }
        if kept.contains(&c) {
            continue;
        }
        if kept.iter().all(|&s| alpha * dist(s, c) >= dpc) {
            kept.push(c);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_hold_at_most_their_capacity() {
        let mut a = Adjacency::new(3);
        a.resize(4);
        assert!(a.push(0, 1) && a.push(0, 2) && a.push(0, 3));
        assert!(!a.push(0, 1));
        assert_eq!(a.neighbours(0), vec![1, 2, 3]);
        a.set(1, &[0, 2, 3, 4, 5]);
        assert_eq!(a.neighbours(1), vec![0, 2, 3]);
        assert_eq!(a.edges(), 6);
    }

    #[test]
    fn prune_drops_candidates_shadowed_by_a_kept_one() {
        // points on a line: p = 0, candidates at 1, 2, 10; 2 is nearer to 1 than to p, so it is shadowed.
        let pos = [0.0f32, 1.0, 2.0, -10.0];
        let d = |a: u32, b: u32| (pos[a as usize] - pos[b as usize]).abs();
        let sorted = vec![(1.0, 1), (2.0, 2), (10.0, 3)];
        assert_eq!(robust_prune(&sorted, 1.0, 8, d), vec![1, 3]);
        // a large alpha keeps more
        assert_eq!(robust_prune(&sorted, 3.0, 8, d), vec![1, 2, 3]);
        assert_eq!(robust_prune(&sorted, 3.0, 2, d), vec![1, 2]);
    }

    #[test]
    fn duplicates_of_p_are_kept() {
        // p and candidates 1, 2, 3 at the same point: none shadows another (hnswlib keeps them too).
        let d = |_: u32, _: u32| 0.0f32;
        let sorted = vec![(0.0, 1), (0.0, 2), (0.0, 3)];
        assert_eq!(robust_prune(&sorted, 1.0, 8, d), vec![1, 2, 3]);
        assert_eq!(robust_prune(&sorted, 1.2, 2, d), vec![1, 2]);
    }
}
