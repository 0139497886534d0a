//! Static scheduling's vertex reordering (NDSearch Sec. VI-A): number vertices so that each vertex's neighbours get
//! nearby numbers, hence nearby slots and shared pages. Degree-ascending BFS (Cuthill-McKee style): the root is a
//! vertex of least degree, and each dequeued vertex numbers its unnumbered neighbours in ascending degree; a
//! random BFS (random root, random neighbour order) is the comparison. The objective is the average vertex
//! bandwidth B(G, f) = (1/n) sum_v max_{u in N(v)} |f(v) - f(u)|.

use std::collections::VecDeque;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::graph::Adjacency;

/// A numbering: `order[k]` is the old id of the vertex numbered `k`.
pub type Order = Vec<u32>;

fn bfs(adj: &Adjacency, roots: &[u32], mut arrange: impl FnMut(&mut Vec<u32>)) -> Order {
    let n = adj.len();
    let mut seen = vec![false; n];
    let mut order = Vec::with_capacity(n);
    let mut queue = VecDeque::new();
    let mut nbrs = Vec::new();
    for &root in roots {
        if seen[root as usize] {
            continue;
        }
        seen[root as usize] = true;
        queue.push_back(root);
        while let Some(v) = queue.pop_front() {
            order.push(v);
            nbrs.clear();
            adj.for_each(v, |u| {
                if !seen[u as usize] {
                    seen[u as usize] = true;
                    nbrs.push(u);
                }
            });
            arrange(&mut nbrs);
            queue.extend(nbrs.iter().copied());
        }
    }
    order
}

/// Degree-ascending BFS; components after the first start from their least-degree vertex.
pub fn degree_ascending_bfs(adj: &Adjacency) -> Order {
    let mut by_degree: Vec<u32> = (0..adj.len() as u32).collect();
    by_degree.sort_by_key(|&v| (adj.degree(v), v));
    bfs(adj, &by_degree, |nb| nb.sort_by_key(|&u| (adj.degree(u), u)))
}

/// BFS from a random root visiting neighbours in random order (seeded).
pub fn random_bfs(adj: &Adjacency, seed: u64) -> Order {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut roots: Vec<u32> = (0..adj.len() as u32).collect();
    roots.shuffle(&mut rng);
    let mut rng2 = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x5eed);
    bfs(adj, &roots, |nb| nb.shuffle(&mut rng2))
}

/// `position[old] = new` for a numbering.
pub fn positions(order: &Order) -> Vec<u32> {
    let mut pos = vec![0u32; order.len()];
    for (k, &v) in order.iter().enumerate() {
        pos[v as usize] = k as u32;
    }
    pos
}

/// The graph renumbered by `order` (rows keep their neighbour order, ids mapped).
pub fn relabel(adj: &Adjacency, order: &Order) -> Adjacency {
    let pos = positions(order);
    let mut out = Adjacency::new(adj.capacity());
    out.resize(adj.len());
    let mut row = Vec::new();
    for (k, &v) in order.iter().enumerate() {
        row.clear();
        adj.for_each(v, |u| row.push(pos[u as usize]));
        out.set(k as u32, &row);
    }
    out
}

/// Average vertex bandwidth B(G, f) of numbering `order` (identity order: the graph as numbered).
pub fn bandwidth(adj: &Adjacency, order: Option<&Order>) -> f64 {
    let n = adj.len();
    if n == 0 {
        return 0.0;
    }
    let pos: Vec<u32> = order.map_or_else(|| (0..n as u32).collect(), positions);
    let total: u64 = (0..n as u32)
        .map(|v| {
            let mut m = 0u64;
            adj.for_each(v, |u| m = m.max((pos[v as usize] as i64 - pos[u as usize] as i64).unsigned_abs()));
            m
        })
        .sum();
    total as f64 / n as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring_with_chords(n: u32) -> Adjacency {
        let mut a = Adjacency::new(3);
        a.resize(n as usize);
        // a ring i -> i +- 1 (plus a chord i -> i + 3 every fifth vertex) under scrambled ids p(i) = 37 i mod n
        let p = |i: u32| (i * 37) % n;
        for i in 0..n {
            let mut r = vec![p((i + 1) % n), p((i + n - 1) % n)];
            if i % 5 == 0 {
                r.push(p((i + 3) % n));
            }
            a.set(p(i), &r);
        }
        a
    }

    #[test]
    fn orders_are_permutations_and_degree_bfs_shrinks_bandwidth() {
        let a = ring_with_chords(101);
        for o in [degree_ascending_bfs(&a), random_bfs(&a, 3)] {
            let mut s = o.clone();
            s.sort();
            assert_eq!(s, (0..101).collect::<Vec<u32>>());
        }
        let before = bandwidth(&a, None);
        let after = bandwidth(&a, Some(&degree_ascending_bfs(&a)));
        assert!(after < before / 4.0, "{before} -> {after}");
        // relabelling realises the numbering
        let o = degree_ascending_bfs(&a);
        assert_eq!(bandwidth(&relabel(&a, &o), None), after);
        // the root has least degree
        assert!(a.degree(o[0]) == 2);
    }

    #[test]
    fn disconnected_graphs_are_numbered_completely() {
        let mut a = Adjacency::new(1);
        a.resize(4);
        a.set(0, &[1]);
        a.set(2, &[3]);
        assert_eq!(degree_ascending_bfs(&a).len(), 4);
        assert_eq!(random_bfs(&a, 1).len(), 4);
    }
}
