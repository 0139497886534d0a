//! Speculative searching (NDSearch Sec. VI-C): while iteration i searches the first-order neighbours of a query's
//! entry vertex, the Pref unit picks second-order neighbours (neighbours of those neighbours) with the most
//! connections to the first-order set, and their distances are computed speculatively; iteration i + 1 reuses the
//! ones it needs. The paper does not give how many are kept: `keep` is the knob (0 turns speculation off).

use std::collections::HashMap;

/// Up to `keep` second-order neighbours of `first` (not in `first`, not rejected by `skip`), most connections to
/// `first` first, ties by id.
pub fn second_order(
    first: &[u32],
    keep: usize,
    mut neighbours: impl FnMut(u32, &mut dyn FnMut(u32)),
    mut skip: impl FnMut(u32) -> bool,
) -> Vec<u32> {
    if keep == 0 || first.is_empty() {
        return Vec::new();
    }
    let mut score: HashMap<u32, u32> = HashMap::new();
    for &u in first {
        neighbours(u, &mut |w| *score.entry(w).or_default() += 1);
    }
    let mut c: Vec<(u32, u32)> =
        score.into_iter().filter(|&(w, _)| !first.contains(&w) && !skip(w)).map(|(w, s)| (s, w)).collect();
    c.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    c.into_iter().take(keep).map(|x| x.1).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn most_connected_second_order_neighbours_win() {
        // 1 -> {10, 11}, 2 -> {10, 12}, 3 -> {10, 11, 2}
        let g = |v: u32, f: &mut dyn FnMut(u32)| {
            let r: &[u32] = match v {
                1 => &[10, 11],
                2 => &[10, 12],
                3 => &[10, 11, 2],
                _ => &[],
            };
            r.iter().for_each(|&x| f(x));
        };
        assert_eq!(second_order(&[1, 2, 3], 2, g, |_| false), vec![10, 11]);
        assert_eq!(second_order(&[1, 2, 3], 9, g, |w| w == 10), vec![11, 12]);
        assert!(second_order(&[1, 2, 3], 0, g, |_| false).is_empty());
    }
}
