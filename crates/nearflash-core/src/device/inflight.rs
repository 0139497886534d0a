//! The commands taken and not reaped yet, by submission queue and command identifier: what the device measures when
//! each completes (its submission time, class, bytes and priority), and the identifiers a new command may not reuse.
//!
//! Looked up four times per command (a free identifier, the duplicate check, the entry, the reap), so it is indexed
//! rather than hashed: per queue, the 65,536 identifiers in pages of [`PAGE`] entries, a page made when an identifier
//! in it is first taken and set aside for reuse when its last one is reaped. Identifiers are usually handed out in
//! sequence (`Device::next_cid`), so the commands in flight fill a page or two per queue, and a steady run makes no
//! allocation.

/// Entries per page (identifiers `p * PAGE ..= p * PAGE + PAGE - 1`).
const PAGE: usize = 256;
const PAGES: usize = (u16::MAX as usize + 1) / PAGE;

struct Page<T> {
    entries: [Option<T>; PAGE],
    live: u32,
}

struct Queue<T> {
    pages: Vec<Option<Box<Page<T>>>>,
    live: u32,
}

impl<T> Default for Queue<T> {
    fn default() -> Self {
        Queue { pages: Vec::new(), live: 0 }
    }
}

/// Entries keyed by (queue id, command id).
pub(crate) struct InFlightTable<T> {
    queues: Vec<Queue<T>>,
    /// Emptied pages, kept for reuse.
    spare: Vec<Box<Page<T>>>,
}

impl<T> Default for InFlightTable<T> {
    fn default() -> Self {
        InFlightTable { queues: Vec::new(), spare: Vec::new() }
    }
}

#[inline]
fn split(cid: u16) -> (usize, usize) {
    (usize::from(cid) / PAGE, usize::from(cid) % PAGE)
}

impl<T> InFlightTable<T> {
    /// The entry of command `cid` of queue `sqid`.
    #[inline]
    pub fn get(&self, sqid: u16, cid: u16) -> Option<&T> {
        let (p, i) = split(cid);
        self.queues.get(usize::from(sqid))?.pages.get(p)?.as_ref()?.entries[i].as_ref()
    }

    #[inline]
    pub fn contains(&self, sqid: u16, cid: u16) -> bool {
        self.get(sqid, cid).is_some()
    }

    /// Whether queue `sqid` has any entry.
    #[inline]
    pub fn any_of(&self, sqid: u16) -> bool {
        self.queues.get(usize::from(sqid)).is_some_and(|q| q.live > 0)
    }

    /// Sets the entry of command `cid` of queue `sqid` (the caller has checked that it has none).
    #[inline]
    pub fn insert(&mut self, sqid: u16, cid: u16, v: T) {
        let (p, i) = split(cid);
        let q = usize::from(sqid);
        if self.queues.len() <= q {
            self.queues.resize_with(q + 1, Queue::default);
        }
        let queue = &mut self.queues[q];
        if queue.pages.len() <= p {
            queue.pages.resize_with(p + 1, || None);
        }
        let page = queue.pages[p].get_or_insert_with(|| self.spare.pop().unwrap_or_else(new_page));
        debug_assert!(page.entries[i].is_none(), "command {cid} of queue {sqid} is already in flight");
        if page.entries[i].replace(v).is_none() {
            page.live += 1;
            queue.live += 1;
        }
    }

    /// Takes the entry of command `cid` of queue `sqid` out.
    #[inline]
    pub fn remove(&mut self, sqid: u16, cid: u16) -> Option<T> {
        let (p, i) = split(cid);
        let queue = self.queues.get_mut(usize::from(sqid))?;
        let slot = queue.pages.get_mut(p)?;
        let page = slot.as_mut()?;
        let v = page.entries[i].take()?;
        page.live -= 1;
        queue.live -= 1;
        if page.live == 0 {
            self.spare.extend(slot.take());
        }
        Some(v)
    }
}

/// A page of empty entries. Out of line: inlined, its 6 KiB built on the stack before the move into the box made the
/// frame of every function `insert` is inlined into (`Device::submit`) that deep, and each command then probed and
/// touched three more stack pages (cold lines and TLB entries in the NBD server, whose worker threads' stacks the
/// socket work evicts between requests).
#[cold]
#[inline(never)]
fn new_page<T>() -> Box<Page<T>> {
    Box::new(Page { entries: std::array::from_fn(|_| None), live: 0 })
}

const _: () = assert!(PAGES * PAGE == 1 << 16);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn entries_by_queue_and_command() {
        let mut t: InFlightTable<u64> = InFlightTable::default();
        assert!(!t.contains(3, 7) && !t.any_of(3) && t.remove(3, 7).is_none());
        t.insert(3, 7, 70);
        t.insert(3, 65_535, 1);
        t.insert(1, 7, 10);
        assert_eq!((t.get(3, 7), t.get(1, 7), t.get(3, 65_535), t.get(2, 7)), (Some(&70), Some(&10), Some(&1), None));
        assert!(t.any_of(1) && t.any_of(3) && !t.any_of(0));
        assert_eq!(t.remove(3, 7), Some(70));
        assert_eq!(t.remove(3, 7), None);
        assert_eq!(t.remove(3, 65_535), Some(1));
        assert!(!t.any_of(3) && t.any_of(1));
        assert_eq!(t.spare.len(), 2, "emptied pages are kept");
        t.insert(3, 300, 3);
        assert_eq!((t.spare.len(), t.get(3, 300)), (1, Some(&3)), "a kept page is reused");
    }

    proptest! {
        /// Any sequence of inserts (of absent keys) and removals agrees with a hash map.
        #[test]
        fn agrees_with_a_map(ops in prop::collection::vec((0u16..4, prop_oneof![0u16..600, 65_000u16..=65_535], any::<bool>()), 1..400)) {
            let mut t: InFlightTable<u32> = InFlightTable::default();
            let mut m: HashMap<(u16, u16), u32> = HashMap::new();
            for (n, (q, c, add)) in ops.into_iter().enumerate() {
                if add && !m.contains_key(&(q, c)) {
                    t.insert(q, c, n as u32);
                    m.insert((q, c), n as u32);
                } else {
                    prop_assert_eq!(t.remove(q, c), m.remove(&(q, c)));
                }
                for q in 0..4u16 {
                    prop_assert_eq!(t.any_of(q), m.keys().any(|k| k.0 == q));
                }
                prop_assert_eq!(t.contains(q, c), m.contains_key(&(q, c)));
            }
        }
    }
}
