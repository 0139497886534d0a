//! The offline K-NN hash graph (the paper's Sec. 4.3, built by the DLG library on host CPUs): every database item's
//! `k` nearest items in Hamming distance, computed exhaustively with rayon. Ties (frequent with 48-bit codes: many
//! items share a code) are broken by a seeded hash of the pair, so that a cluster of equal codes is not wired to its
//! lowest ids only.

use crate::error::{CognitiveError, Result};
use rayon::prelude::*;

/// Hamming distance of two codes.
#[inline]
pub fn hamming(a: u64, b: u64) -> u32 {
    (a ^ b).count_ones()
}

/// Neighbour lists: `k` ids per vertex, nearest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnnGraph {
    pub k: usize,
    pub neighbours: Vec<u32>,
}

impl KnnGraph {
    pub fn len(&self) -> usize {
        self.neighbours.len() / self.k.max(1)
    }
    pub fn is_empty(&self) -> bool {
        self.neighbours.is_empty()
    }
    pub fn of(&self, v: usize) -> &[u32] {
        &self.neighbours[v * self.k..(v + 1) * self.k]
    }
}

/// A splitmix-style mix: the seeded tie-break key of the pair (v, u).
fn tie_key(seed: u64, v: u32, u: u32) -> u64 {
    let mut z = seed ^ ((v as u64) << 32 | u as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Builds the graph over `codes` (`bits` wide) with `k` neighbours per vertex.
pub fn build(codes: &[u64], bits: u32, k: usize, seed: u64) -> Result<KnnGraph> {
    if !(1..=64).contains(&bits) {
        return Err(CognitiveError::invalid("bits", format!("{bits}; 1 to 64 allowed")));
    }
    if k == 0 || k >= codes.len() {
        return Err(CognitiveError::invalid("k", format!("{k}; 1 to {} (database size - 1) allowed", codes.len().saturating_sub(1))));
    }
    if codes.len() > u32::MAX as usize {
        return Err(CognitiveError::invalid("codes", "more than 2^32 items do not fit W_id = 32 bits"));
    }
    let buckets = bits as usize + 1;
    let rows: Vec<Vec<u32>> = (0..codes.len())
        .into_par_iter()
        .map(|v| {
            // counting pass: how many items at each distance, to find the cut distance
            let mut count = vec![0usize; buckets];
            let cv = codes[v];
            for (u, &c) in codes.iter().enumerate() {
                if u != v {
                    count[hamming(cv, c) as usize] += 1;
                }
            }
            let (mut cut, mut below) = (0usize, 0usize);
            while below + count[cut] < k {
                below += count[cut];
                cut += 1;
            }
            let mut near: Vec<(u32, u32)> = Vec::with_capacity(k);
            let mut at_cut: Vec<(u64, u32)> = Vec::with_capacity(count[cut]);
            for (u, &c) in codes.iter().enumerate() {
                if u == v {
                    continue;
                }
                let d = hamming(cv, c) as usize;
                if d < cut {
                    near.push((d as u32, u as u32));
                } else if d == cut {
                    at_cut.push((tie_key(seed, v as u32, u as u32), u as u32));
                }
            }
            near.sort_unstable_by_key(|&(d, u)| (d, tie_key(seed, v as u32, u)));
            at_cut.select_nth_unstable(k - below - 1);
            let mut tail: Vec<(u64, u32)> = at_cut[..k - below].to_vec();
            tail.sort_unstable();
            near.iter().map(|&(_, u)| u).chain(tail.iter().map(|&(_, u)| u)).collect()
        })
        .collect();
    Ok(KnnGraph { k, neighbours: rows.concat() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn neighbours_are_the_k_nearest(codes in prop::collection::vec(0u64..256, 5..60), k in 1usize..4) {
            let g = build(&codes, 8, k, 7).unwrap();
            for v in 0..codes.len() {
                let ns = g.of(v);
                prop_assert_eq!(ns.len(), k);
                prop_assert!(ns.iter().all(|&u| u as usize != v));
                let mut ds: Vec<u32> = (0..codes.len()).filter(|&u| u != v).map(|u| hamming(codes[v], codes[u])).collect();
                ds.sort_unstable();
                let mut got: Vec<u32> = ns.iter().map(|&u| hamming(codes[v], codes[u as usize])).collect();
                prop_assert!(got.windows(2).all(|w| w[0] <= w[1]), "nearest first");
                got.sort_unstable();
                prop_assert_eq!(&got[..], &ds[..k]);
                let mut uniq = ns.to_vec();
                uniq.sort_unstable();
                uniq.dedup();
                prop_assert_eq!(uniq.len(), k);
            }
        }
    }

    #[test]
    fn rejects_bad_arguments() {
        assert!(build(&[1, 2, 3], 8, 3, 0).is_err());
        assert!(build(&[1, 2, 3], 0, 1, 0).is_err());
        assert!(build(&[1, 2, 3], 65, 1, 0).is_err());
        assert!(build(&[1, 2, 3], 8, 0, 0).is_err());
    }

    #[test]
    fn ties_spread_over_a_cluster() {
        let codes = vec![5u64; 200];
        let g = build(&codes, 8, 5, 1).unwrap();
        let mut indeg = vec![0usize; 200];
        g.neighbours.iter().for_each(|&u| indeg[u as usize] += 1);
        assert!(indeg.iter().filter(|&&d| d > 0).count() > 100, "equal codes must not all point to the same few ids");
    }
}
