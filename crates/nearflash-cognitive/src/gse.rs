//! DLG-x's graph search engine (Sec. 4.3): random initial vertices, a vertex detector (visited bitmap), distance
//! buckets B_0..B_Vfinal plus the ring B_others in the InOut buffer, expansion of the first unexpanded vertex in
//! ascending distance, and a termination counter on the held vertices. Graph pages come from a `PageSource` (flash
//! on the device, generated pages on the host); pages kept on chip (`gse_page_slots`, most recent first) are not
//! read again. Counts pages read and vertices evaluated, the inputs of the GSE timing.

use crate::error::{CognitiveError, Result};
use crate::graph_pages::{Entry, GraphLayout, GraphPages, PageFormat};
use crate::knn::hamming;
use crate::params::CognitiveParams;
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;

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

/// The search knobs, from the parameters.
#[derive(Debug, Clone, Copy)]
pub struct SearchConfig {
    pub v_final: usize,
    pub d_block: usize,
    pub initial_vertices: usize,
    pub termination_ratio: f64,
    pub page_slots: usize,
}

impl SearchConfig {
    pub fn from_params(p: &CognitiveParams) -> SearchConfig {
        SearchConfig {
            v_final: p.v_final(),
            d_block: p.d_block as usize,
            initial_vertices: p.initial_vertices as usize,
            termination_ratio: p.termination_ratio,
            page_slots: p.gse_page_slots as usize,
        }
    }
}

struct Queue {
    buckets: Vec<Vec<(u32, bool)>>,
    cursor: Vec<usize>,
    others: VecDeque<(u32, u32, bool)>,
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
                self.held -= 1;
            }
            self.others.push_back((id, d, false));
        }
    }

    /// The first unexpanded vertex in ascending distance, marked expanded.
    fn pop_unexpanded(&mut self, expanded: &[bool]) -> Option<u32> {
        for b in 0..self.buckets.len() {
            while self.cursor[b] < self.buckets[b].len() {
                let (id, done) = &mut self.buckets[b][self.cursor[b]];
                self.cursor[b] += 1;
                if !*done && !expanded[*id as usize] {
                    *done = true;
                    return Some(*id);
                }
            }
        }
        self.others.iter_mut().find(|e| !e.2 && !expanded[e.0 as usize]).map(|e| {
            e.2 = true;
            e.0
        })
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

/// On-chip page slots, most recently used first.
struct Slots {
    pages: VecDeque<(usize, Vec<u8>)>,
    cap: usize,
}

impl Slots {
    fn get(&mut self, src: &mut dyn PageSource, page: usize, stats: &mut SearchStats) -> Result<Vec<u8>> {
        if let Some(i) = self.pages.iter().position(|p| p.0 == page) {
            let p = self.pages.remove(i).unwrap();
            self.pages.push_front(p);
        } else {
            stats.pages_read += 1;
            let bytes = src.read(page)?;
            if self.pages.len() == self.cap {
                self.pages.pop_back();
            }
            self.pages.push_front((page, bytes));
        }
        Ok(self.pages[0].1.clone())
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
/// if the reachable part of the graph runs out before the termination counter fires.
pub fn search(
    layout: &PageFormat,
    src: &mut dyn PageSource,
    entries: &[Entry],
    query: u64,
    t: usize,
    cfg: &SearchConfig,
    seed: u64,
) -> Result<(Vec<u32>, SearchStats)> {
    let n = layout.vertices;
    if t == 0 || t > n {
        return Err(CognitiveError::invalid("T", format!("{t}; 1 to {n} (the database size) allowed")));
    }
    let capacity = (cfg.v_final + 2) * cfg.d_block;
    let threshold = ((t as f64 * cfg.termination_ratio).ceil() as usize).max(t);
    if threshold > capacity {
        return Err(CognitiveError::invalid(
            "T",
            format!("{t}: the termination threshold {threshold} exceeds the InOut buffer's {capacity} vertex slots"),
        ));
    }
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut q = Queue {
        buckets: vec![Vec::new(); cfg.v_final + 1],
        cursor: vec![0; cfg.v_final + 1],
        others: VecDeque::new(),
        d_block: cfg.d_block,
        held: 0,
    };
    let mut visited = vec![false; n];
    let mut expanded = vec![false; n];
    let mut slots = Slots { pages: VecDeque::new(), cap: cfg.page_slots.max(1) };
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
        let Some(v) = q.pop_unexpanded(&expanded) else {
            // nothing left to expand (a disconnected component): draw random vertices, read from flash
            if seeded >= n {
                break;
            }
            for _ in 0..cfg.initial_vertices.max(1) {
                let v = rng.gen_range(0..n as u32);
                seeded += 1;
                if visited[v as usize] {
                    continue;
                }
                let page = slots.get(src, layout.page_of(v), &mut st)?;
                let rec = layout.decode_record(&page, v)?;
                visited[v as usize] = true;
                st.evaluated += 1;
                q.push(v, hamming(query, rec[0].code));
            }
            continue;
        };
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
    let mut by_d: Vec<Vec<u32>> = vec![Vec::new(); 65];
    codes.iter().enumerate().for_each(|(i, &c)| by_d[hamming(query, c) as usize].push(i as u32));
    Ok(by_d.into_iter().flatten().take(t).collect())
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
    }
}
