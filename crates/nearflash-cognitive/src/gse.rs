//! DLG-x's graph search engine (Sec. 4.3): random initial vertices, a vertex detector (visited bitmap), distance
//! buckets B_0..B_Vfinal plus the ring B_others in the InOut buffer, expansion of the first unexpanded vertex in
//! ascending distance, and a termination counter on the held vertices (a full enough pool whose next vertex is no nearer
//! than its L-th, or a count threshold; `Termination`). Graph pages come from a `PageSource` (flash
//! on the device, generated pages on the host); pages kept on chip (`gse_page_slots`, most recent first) are not
//! read again. Counts pages read and vertices evaluated, the inputs of the GSE timing.

use crate::error::{CognitiveError, Result};
use crate::graph_pages::{Entry, GraphLayout, GraphPages, PageFormat};
use crate::knn::hamming;
use crate::params::CognitiveParams;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::Rc;

/// Where the GSE's graph pages come from.
pub trait PageSource {
    /// Bytes of graph page `page`.
    fn read(&mut self, page: usize) -> Result<Vec<u8>>;
}

impl PageSource for GraphPages<'_> {
    fn read(&mut self, page: usize) -> Result<Vec<u8>> {
        self.page_bytes(page)
    }
}

/// Every page of a layout generated once, as the compiler writes them to flash (worth it for the plain layout,
/// whose pages hold 63 records each; two-hop pages hold one record and are cheap to generate on demand).
#[derive(Debug, Clone)]
pub struct PageImage(pub Vec<Vec<u8>>);

impl PageImage {
    pub fn build(layout: &GraphPages) -> Result<PageImage> {
        use rayon::prelude::*;
        Ok(PageImage((0..layout.pages()).into_par_iter().map(|i| layout.page_bytes(i)).collect::<Result<_>>()?))
    }
}

impl PageSource for &PageImage {
    fn read(&mut self, page: usize) -> Result<Vec<u8>> {
        self.0.get(page).cloned().ok_or_else(|| CognitiveError::invalid("page", format!("{page}; the image has {} pages", self.0.len())))
    }
}

/// What one search did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SearchStats {
    /// Flash page reads (pages not on chip).
    pub pages_read: u64,
    /// Vertices whose distance was computed (passed the visited check).
    pub evaluated: u64,
    /// Neighbour entries looked at (visited or not): the GSE's per-neighbour steps.
    pub neighbour_steps: u64,
    /// Vertices expanded (their neighbour list consumed).
    pub expansions: u64,
}

/// When the termination counter stops a search.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Termination {
    /// When the next vertex to expand is no nearer than the L-th nearest held vertex, L = max(T, pool), or when
    /// the InOut buffer is full.
    Converged { pool: usize },
    /// When the held vertices reach `ratio` x T (at least T).
    Count { ratio: f64 },
}

/// The search knobs, from the parameters.
#[derive(Debug, Clone, Copy)]
pub struct SearchConfig {
    pub v_final: usize,
    pub d_block: usize,
    pub initial_vertices: usize,
    pub termination: Termination,
    pub page_slots: usize,
}

impl SearchConfig {
    pub fn from_params(p: &CognitiveParams) -> SearchConfig {
        SearchConfig {
            v_final: p.v_final(),
            d_block: p.d_block as usize,
            initial_vertices: p.initial_vertices as usize,
            termination: match p.termination.as_str() {
                "count" => Termination::Count { ratio: p.termination_ratio },
                _ => Termination::Converged { pool: p.search_pool as usize },
            },
            page_slots: p.gse_page_slots as usize,
        }
    }

    /// Vertices the InOut buffer holds: the buckets B_0..B_Vfinal and the ring B_others, D_block ids each.
    pub fn capacity(&self) -> usize {
        (self.v_final + 2) * self.d_block
    }

    /// The held-vertex count at which a top-`t` search stops at the latest (the `count` rule's threshold, or a
    /// full buffer), and the L of the `converged` rule (0 for `count`); refused where the buffer cannot hold it.
    /// The `converged` rule's L must fit D_block: the ring B_others keeps its last D_block vertices, so at least
    /// that many are always held, while buckets that fill unevenly may drop others.
    pub fn limits(&self, t: usize) -> Result<(usize, usize)> {
        let capacity = self.capacity();
        let (threshold, pool, need, room) = match self.termination {
            Termination::Count { ratio } => {
                let threshold = ((t as f64 * ratio).ceil() as usize).max(t);
                (threshold, 0, threshold, capacity)
            }
            Termination::Converged { pool } => (capacity, pool.max(t), pool.max(t), self.d_block),
        };
        if need > room {
            return Err(CognitiveError::invalid(
                "T",
                format!("{t}: the search must hold {need} vertices, the InOut buffer is sure to hold {room}"),
            ));
        }
        Ok((threshold, pool))
    }
}

struct Queue {
    buckets: Vec<Vec<(u32, bool)>>,
    cursor: Vec<usize>,
    others: VecDeque<(u32, u32, bool)>,
    /// The ring's entries before this one are all expanded (its search resumes here).
    others_cursor: usize,
    d_block: usize,
    held: usize,
}

impl Queue {
    fn push(&mut self, id: u32, d: u32) {
        self.held += 1;
        let b = d as usize;
        if b < self.buckets.len() && self.buckets[b].len() < self.d_block {
            self.buckets[b].push((id, false));
        } else {
            if self.others.len() == self.d_block {
                self.others.pop_front(); // the ring overwrites its oldest entry
                self.others_cursor = self.others_cursor.saturating_sub(1);
                self.held -= 1;
            }
            self.others.push_back((id, d, false));
        }
    }

    /// The first unexpanded vertex in ascending distance, marked expanded, with its distance.
    fn pop_unexpanded(&mut self, expanded: &[bool]) -> Option<(u32, u32)> {
        for b in 0..self.buckets.len() {
            while self.cursor[b] < self.buckets[b].len() {
                let (id, done) = &mut self.buckets[b][self.cursor[b]];
                self.cursor[b] += 1;
                if !*done && !expanded[*id as usize] {
                    *done = true;
                    return Some((*id, b as u32));
                }
            }
        }
        while let Some(e) = self.others.get_mut(self.others_cursor) {
            self.others_cursor += 1;
            if !e.2 && !expanded[e.0 as usize] {
                e.2 = true;
                return Some((e.0, e.1));
            }
        }
        None
    }

    /// Distance of the `l`-th nearest held vertex if it lies in the buckets B_0..B_Vfinal (their fill levels); the
    /// ring B_others keeps arrival order, not distance, so a pool that reaches into it never counts as converged.
    fn kth_distance(&self, l: usize) -> Option<u32> {
        let mut n = 0;
        for (d, b) in self.buckets.iter().enumerate() {
            n += b.len();
            if n >= l {
                return Some(d as u32);
            }
        }
        None
    }

    /// Whether the `converged` rule stops before expanding a vertex at distance `d`.
    fn converged(&self, pool: usize, d: u32) -> bool {
        pool > 0 && self.held >= pool && self.kth_distance(pool).is_some_and(|dl| d >= dl)
    }

    fn top(&self, t: usize) -> Vec<u32> {
        let mut out: Vec<u32> = self.buckets.iter().flatten().map(|e| e.0).take(t).collect();
        if out.len() < t {
            let mut o: Vec<(u32, u32)> = self.others.iter().map(|e| (e.1, e.0)).collect();
            o.sort_unstable();
            out.extend(o.iter().map(|e| e.1).take(t - out.len()));
        }
        out
    }
}

/// Graph pages kept after they are read, least recently used dropped first: the GSE's on-chip page slots, or a
/// host's page cache (which may outlive one search). A hit costs no read.
pub struct PageCache {
    cap: usize,
    clock: u64,
    pages: HashMap<usize, (u64, Rc<Vec<u8>>)>,
    by_use: BTreeMap<u64, usize>,
    /// The pages read from the source, in read order, when recording (`recording`): a host's read trace.
    missed: Option<Vec<usize>>,
}

impl PageCache {
    /// A cache of `cap` pages (at least one).
    pub fn new(cap: usize) -> PageCache {
        PageCache { cap: cap.max(1), clock: 0, pages: HashMap::new(), by_use: BTreeMap::new(), missed: None }
    }

    /// The same cache, also recording which pages it reads from the source (`take_missed`).
    pub fn recording(mut self) -> PageCache {
        self.missed = Some(Vec::new());
        self
    }

    /// The pages read from the source since the last call, in read order (empty when not recording).
    pub fn take_missed(&mut self) -> Vec<usize> {
        self.missed.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Empties it (a cold cache).
    pub fn clear(&mut self) {
        self.pages.clear();
        self.by_use.clear();
    }

    fn get(&mut self, src: &mut dyn PageSource, page: usize, stats: &mut SearchStats) -> Result<Rc<Vec<u8>>> {
        self.clock += 1;
        let bytes = match self.pages.get_mut(&page) {
            Some((used, bytes)) => {
                self.by_use.remove(used);
                *used = self.clock;
                bytes.clone()
            }
            None => {
                stats.pages_read += 1;
                if let Some(missed) = self.missed.as_mut() {
                    missed.push(page);
                }
                let bytes = Rc::new(src.read(page)?);
                if self.pages.len() == self.cap {
                    let (_, old) = self.by_use.pop_first().expect("a full cache has pages");
                    self.pages.remove(&old);
                }
                self.pages.insert(page, (self.clock, bytes.clone()));
                bytes
            }
        };
        self.by_use.insert(self.clock, page);
        Ok(bytes)
    }
}

/// The initial vertices: a seeded sample the compiler picks, whose (id, code) it writes into the instruction area
/// so that DLG_config loads them into the GSE's registers (NSG likewise starts from a fixed navigating node);
/// a search evaluates them without flash reads.
pub fn entry_vertices(codes: &[u64], count: usize, seed: u64) -> Vec<Entry> {
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed ^ 0xE7);
    let n = codes.len();
    let mut ids: Vec<u32> = (0..count.min(n)).map(|_| rng.gen_range(0..n as u32)).collect();
    ids.sort_unstable();
    ids.dedup();
    ids.into_iter().map(|id| Entry { id, code: codes[id as usize] }).collect()
}

/// Searches the top-`t` vertices nearest to `query`, starting from `entries`. `seed` picks further random vertices
/// if the reachable part of the graph runs out before the termination counter fires. Pages stay in the GSE's
/// `page_slots` for the search.
pub fn search(
    layout: &PageFormat,
    src: &mut dyn PageSource,
    entries: &[Entry],
    query: u64,
    t: usize,
    cfg: &SearchConfig,
    seed: u64,
) -> Result<(Vec<u32>, SearchStats)> {
    search_cached(layout, src, entries, query, t, cfg, seed, &mut PageCache::new(cfg.page_slots))
}

/// [`search`] with pages kept in `cache` (which may hold pages of earlier searches: a host's page cache);
/// `pages_read` counts its misses.
#[allow(clippy::too_many_arguments)]
pub fn search_cached(
    layout: &PageFormat,
    src: &mut dyn PageSource,
    entries: &[Entry],
    query: u64,
    t: usize,
    cfg: &SearchConfig,
    seed: u64,
    slots: &mut PageCache,
) -> Result<(Vec<u32>, SearchStats)> {
    let n = layout.vertices;
    if t == 0 || t > n {
        return Err(CognitiveError::invalid("T", format!("{t}; 1 to {n} (the database size) allowed")));
    }
    let (threshold, pool) = cfg.limits(t)?;
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut q = Queue {
        buckets: vec![Vec::new(); cfg.v_final + 1],
        cursor: vec![0; cfg.v_final + 1],
        others: VecDeque::new(),
        others_cursor: 0,
        d_block: cfg.d_block,
        held: 0,
    };
    let mut visited = vec![false; n];
    let mut expanded = vec![false; n];
    let mut st = SearchStats::default();
    let mut seeded = 0usize;
    let k = layout.k;
    for e in entries {
        if (e.id as usize) < n && !visited[e.id as usize] {
            visited[e.id as usize] = true;
            st.evaluated += 1;
            q.push(e.id, hamming(query, e.code));
        }
    }
    while q.held < threshold {
        let Some((v, dv)) = q.pop_unexpanded(&expanded) else {
            // nothing left to expand (a disconnected component): draw random vertices, read from flash, unless the
            // pool is already full
            if seeded >= n || (pool > 0 && q.held >= pool) {
                break;
            }
            for _ in 0..cfg.initial_vertices.max(1) {
                // a random vertex, or the first unvisited one after it (the visited bitmap's next free bit)
                let r = rng.gen_range(0..n);
                seeded += 1;
                let Some(v) = (r..n).chain(0..r).find(|&v| !visited[v]).map(|v| v as u32) else { break };
                let page = slots.get(src, layout.page_of(v), &mut st)?;
                let rec = layout.decode_record(&page, v)?;
                visited[v as usize] = true;
                st.evaluated += 1;
                q.push(v, hamming(query, rec[0].code));
            }
            continue;
        };
        if q.converged(pool, dv) {
            break;
        }
        expanded[v as usize] = true;
        st.expansions += 1;
        let page = slots.get(src, layout.page_of(v), &mut st)?;
        let rec = layout.decode_record(&page, v)?;
        let mut visit = |e: &Entry, st: &mut SearchStats, q: &mut Queue| {
            st.neighbour_steps += 1;
            if !visited[e.id as usize] {
                visited[e.id as usize] = true;
                st.evaluated += 1;
                q.push(e.id, hamming(query, e.code));
            }
        };
        rec[1..=k].iter().for_each(|e| visit(e, &mut st, &mut q));
        if layout.layout == GraphLayout::TwoHop {
            for (i, u) in rec[1..=k].iter().enumerate() {
                if expanded[u.id as usize] {
                    continue;
                }
                expanded[u.id as usize] = true;
                st.expansions += 1;
                rec[1 + k + i * k..1 + k + (i + 1) * k].iter().for_each(|e| visit(e, &mut st, &mut q));
            }
        }
    }
    Ok((q.top(t), st))
}

/// Brute-force top-`t` by Hamming distance over all codes (ties by id).
pub fn brute_force(codes: &[u64], query: u64, t: usize) -> Result<Vec<u32>> {
    if t == 0 || t > codes.len() {
        return Err(CognitiveError::invalid("T", format!("{t}; 1 to {} (the database size) allowed", codes.len())));
    }
    // two passes: count the codes at each distance, then place only those that make the top-t (by distance, ties by
    // id), in order
    let mut count = [0usize; 65];
    codes.iter().for_each(|&c| count[hamming(query, c) as usize] += 1);
    let mut offset = [usize::MAX; 65];
    let mut at = 0;
    for (d, &k) in count.iter().enumerate() {
        if at >= t {
            break;
        }
        offset[d] = at;
        at += k;
    }
    let mut out = vec![0u32; t];
    for (i, &c) in codes.iter().enumerate() {
        let slot = &mut offset[hamming(query, c) as usize];
        if *slot < t {
            out[*slot] = i as u32;
            *slot += 1;
        }
    }
    Ok(out)
}

/// Recall against brute force's top-T (`bf`) with ties interchangeable: the fraction of `returned` ids no farther
/// from `query` than brute force's T-th nearest. (Which of several codes at the same distance brute force lists
/// first is its tie order, not a quality: on 60k Fashion-MNIST codes hundreds can share the T-th distance.)
pub fn distance_recall(codes: &[u64], query: u64, returned: &[u32], bf: &[u32]) -> f64 {
    let Some(&last) = bf.last() else { return 0.0 };
    let d_t = hamming(query, codes[last as usize]);
    returned.iter().filter(|&&i| hamming(query, codes[i as usize]) <= d_t).count() as f64 / bf.len() as f64
}

/// Fraction of `returned` ids whose label equals `label`.
pub fn precision(returned: &[u32], labels: &[u8], label: u8) -> f64 {
    if returned.is_empty() {
        return 0.0;
    }
    returned.iter().filter(|&&i| labels[i as usize] == label).count() as f64 / returned.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knn;

    fn clustered(n: usize) -> (Vec<u64>, Vec<u8>) {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
        let centres: Vec<u64> = (0..10).map(|_| rng.gen::<u64>() & 0xFFFF_FFFF_FFFF).collect();
        let mut codes = Vec::new();
        let mut labels = Vec::new();
        for i in 0..n {
            let c = i % 10;
            let mut code = centres[c];
            for _ in 0..rng.gen_range(0..6) {
                code ^= 1 << rng.gen_range(0..48);
            }
            codes.push(code);
            labels.push(c as u8);
        }
        (codes, labels)
    }

    #[test]
    fn graph_search_finds_what_brute_force_finds() {
        let (codes, labels) = clustered(3000);
        let g = knn::build(&codes, 48, 25, 1).unwrap();
        let cfg = SearchConfig::from_params(&CognitiveParams::default());
        let mut pages_read = [0u64; 2];
        for (li, layout) in [GraphLayout::Plain, GraphLayout::TwoHop].into_iter().enumerate() {
            let mut gp = GraphPages::new(layout, &g, &codes, 48, 16384).unwrap();
            let lay = gp.clone();
            let mut prec = 0.0;
            let entries = entry_vertices(&codes, cfg.initial_vertices, 1);
            for qi in 0..20 {
                let query = codes[qi * 7] ^ 0b101;
                let (ids, st) = search(&lay.format(), &mut gp, &entries, query, 50, &cfg, qi as u64).unwrap();
                assert_eq!(ids.len(), 50);
                let mut u = ids.clone();
                u.sort_unstable();
                u.dedup();
                assert_eq!(u.len(), 50, "no duplicates");
                prec += precision(&ids, &labels, labels[qi * 7]);
                pages_read[li] += st.pages_read;
                assert!(st.evaluated as usize >= 50);
            }
            assert!(prec / 20.0 > 0.95, "{layout:?}: precision {}", prec / 20.0);
        }
        assert!(pages_read[0] > 2 * pages_read[1], "two-hop reads fewer pages: {pages_read:?}");
        let bf = brute_force(&codes, codes[0], 50).unwrap();
        assert_eq!(precision(&bf, &labels, labels[0]), 1.0);
    }

    #[test]
    fn rejects_bad_t_and_is_deterministic() {
        let (codes, _) = clustered(200);
        let g = knn::build(&codes, 48, 25, 1).unwrap();
        let cfg = SearchConfig::from_params(&CognitiveParams::default());
        let mut gp = GraphPages::new(GraphLayout::Plain, &g, &codes, 48, 16384).unwrap();
        let lay = gp.clone();
        let e = entry_vertices(&codes, 8, 1);
        assert!(search(&lay.format(), &mut gp, &e, 0, 0, &cfg, 0).is_err());
        assert!(search(&lay.format(), &mut gp, &e, 0, 201, &cfg, 0).is_err());
        assert!(brute_force(&codes, 0, 0).is_err());
        let a = search(&lay.format(), &mut gp, &e, 77, 30, &cfg, 5).unwrap();
        let b = search(&lay.format(), &mut gp, &e, 77, 30, &cfg, 5).unwrap();
        assert_eq!(a, b);
        // no entries at all: the search draws random vertices from flash and still answers
        let (ids, st) = search(&lay.format(), &mut gp, &[], 77, 30, &cfg, 5).unwrap();
        assert_eq!(ids.len(), 30);
        assert!(st.pages_read > 0);
        let cfg2 = SearchConfig { d_block: 10, ..cfg };
        assert!(search(&lay.format(), &mut gp, &e, 0, 150, &cfg2, 0).is_err(), "threshold beyond the buffer");
        let cfg3 = SearchConfig { termination: Termination::Count { ratio: 4.0 }, ..cfg2 };
        assert!(search(&lay.format(), &mut gp, &e, 0, 50, &cfg3, 0).is_err(), "4T beyond the buffer");
        assert!(search(&lay.format(), &mut gp, &e, 0, 30, &cfg3, 0).is_ok());
    }

    #[test]
    fn converged_rule_keeps_searching_where_the_count_rule_stops_after_one_page() {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(9);
        // 10 classes of 40 sub-classes each (a few bits apart), items a few bits from their sub-class
        let mut flip = |c: u64, n: usize| (0..n).fold(c, |c, _| c ^ (1u64 << rng.gen_range(0..48)));
        let centres: Vec<u64> = (0..10).map(|i| flip(0, 24 + i)).collect();
        let subs: Vec<u64> = (0..400).map(|i| flip(centres[i % 10], 6)).collect();
        let codes: Vec<u64> = (0..4000).map(|i| flip(subs[i % 400], i % 4)).collect();
        let g = knn::build(&codes, 48, 25, 1).unwrap();
        let conv = SearchConfig::from_params(&CognitiveParams::default());
        assert_eq!(conv.termination, Termination::Converged { pool: 32 });
        let count = SearchConfig { termination: Termination::Count { ratio: 4.0 }, ..conv };
        let entries = entry_vertices(&codes, conv.initial_vertices, 1);
        let mut gp = GraphPages::new(GraphLayout::TwoHop, &g, &codes, 48, 16384).unwrap();
        let lay = gp.format();
        let (mut good, mut pages) = ([0.0; 2], [0u64; 2]);
        for qi in 0..30u64 {
            let query = codes[(qi * 131) as usize] ^ (0b1011 << (qi % 40));
            for (k, cfg) in [conv, count].iter().enumerate() {
                let (ids, st) = search(&lay, &mut gp, &entries, query, 10, cfg, qi).unwrap();
                let bf = brute_force(&codes, query, 10).unwrap();
                good[k] += distance_recall(&codes, query, &ids, &bf) / 30.0;
                pages[k] += st.pages_read;
            }
        }
        assert!(good[0] > good[1] + 0.1, "converged {:.3} vs count {:.3}", good[0], good[1]);
        assert!(pages[0] > pages[1], "the price: more pages {pages:?}");
    }

    #[test]
    fn the_pools_distance_comes_from_the_buckets_only() {
        let mut q = Queue { buckets: vec![Vec::new(); 3], cursor: vec![0; 3], others: VecDeque::new(), others_cursor: 0, d_block: 2, held: 0 };
        for (id, d) in [(0, 5), (1, 0), (2, 9), (3, 2), (4, 1), (6, 1)] {
            q.push(id, d);
        }
        // B_1 is full after two: the third at distance 1 goes to the ring, whose two slots drop distance 5
        q.push(7, 1);
        assert_eq!((q.held, q.others.len()), (6, 2));
        assert_eq!((q.kth_distance(1), q.kth_distance(3), q.kth_distance(4), q.kth_distance(5)), (Some(0), Some(1), Some(2), None));
        q.push(8, 3); // and then distance 9
        assert_eq!(q.held, 6);
        assert!(q.converged(3, 1) && q.converged(3, 2) && !q.converged(4, 1) && !q.converged(5, 64) && !q.converged(0, 9));
    }

    #[test]
    fn a_page_cache_kept_across_searches_reads_each_page_once() {
        let (codes, _) = clustered(2000);
        let g = knn::build(&codes, 48, 25, 1).unwrap();
        let cfg = SearchConfig::from_params(&CognitiveParams::default());
        let mut gp = GraphPages::new(GraphLayout::Plain, &g, &codes, 48, 16384).unwrap();
        let (lay, pages) = (gp.format(), gp.pages());
        let e = entry_vertices(&codes, 32, 1);
        let mut big = PageCache::new(pages);
        let (a, first) = search_cached(&lay, &mut gp, &e, codes[5], 200, &cfg, 1, &mut big).unwrap();
        let (b, again) = search_cached(&lay, &mut gp, &e, codes[5], 200, &cfg, 1, &mut big).unwrap();
        assert_eq!(a, b, "the cache changes what is read, not what is found");
        assert!(first.pages_read > 0 && first.pages_read <= pages as u64 && again.pages_read == 0);
        let (_, slots) = search(&lay, &mut gp, &e, codes[5], 200, &cfg, 1).unwrap();
        assert!(slots.pages_read >= first.pages_read, "16 slots re-read what a page cache keeps");
        big.clear();
        assert_eq!(search_cached(&lay, &mut gp, &e, codes[5], 200, &cfg, 1, &mut big).unwrap().1, first);
        let (_, one) = search_cached(&lay, &mut gp, &e, codes[5], 200, &cfg, 1, &mut PageCache::new(1)).unwrap();
        assert!(one.pages_read >= slots.pages_read);
        let mut traced = PageCache::new(pages).recording();
        search_cached(&lay, &mut gp, &e, codes[5], 200, &cfg, 1, &mut traced).unwrap();
        let read = traced.take_missed();
        assert_eq!(read.len() as u64, first.pages_read, "the trace lists every page read, once each");
        assert_eq!(read.iter().collect::<std::collections::HashSet<_>>().len(), read.len());
        assert!(read.iter().all(|&p| p < pages) && traced.take_missed().is_empty() && big.take_missed().is_empty());
    }

    proptest::proptest! {
        /// Brute force is the sort of every id by (distance, id), cut at t.
        #[test]
        fn brute_force_is_the_sorted_prefix(codes in proptest::collection::vec(0u64..1 << 12, 1..300), query in 0u64..1 << 12, t in 1usize..300) {
            let t = t.min(codes.len());
            let mut all: Vec<(u32, u32)> = codes.iter().enumerate().map(|(i, &c)| (hamming(query, c), i as u32)).collect();
            all.sort_unstable();
            proptest::prop_assert_eq!(brute_force(&codes, query, t).unwrap(), all.iter().take(t).map(|e| e.1).collect::<Vec<_>>());
        }

        /// A pool as large as the database makes the search exhaustive: the top-T are brute force's by distance, on
        /// any graph (disconnected ones too: the search draws random vertices until the pool is full).
        #[test]
        fn a_pool_of_the_whole_database_is_exact(
            codes in proptest::collection::vec(0u64..1 << 16, 30..120),
            k in 1usize..6,
            t in 1usize..30,
            query in 0u64..1 << 16,
            two_hop in proptest::bool::ANY,
        ) {
            let n = codes.len();
            let g = knn::build(&codes, 16, k.min(n - 1), 1).unwrap();
            let layout = if two_hop { GraphLayout::TwoHop } else { GraphLayout::Plain };
            let mut gp = GraphPages::new(layout, &g, &codes, 16, 16384).unwrap();
            let lay = gp.format();
            let cfg = SearchConfig { v_final: 4, d_block: n, initial_vertices: 2, termination: Termination::Converged { pool: n }, page_slots: 4 };
            let entries = entry_vertices(&codes, 2, 7);
            let (ids, _) = search(&lay, &mut gp, &entries, query, t.min(n), &cfg, 3).unwrap();
            let d = |ids: &[u32]| ids.iter().map(|&i| hamming(query, codes[i as usize])).collect::<Vec<_>>();
            proptest::prop_assert_eq!(d(&ids), d(&brute_force(&codes, query, t.min(n)).unwrap()));
        }
    }
}
