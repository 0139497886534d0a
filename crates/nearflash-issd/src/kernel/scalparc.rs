//! scalparc (NU-MineBench's ScalParC, Table 1): the split evaluation of a decision-tree node by the gini index,
//! over labelled records ([`super::labelled`]) whose u8 attributes are treated as ordered (continuous) values.
//! ScalParC sorts attribute lists and sweeps them, counting classes left and right of every split point; with
//! one-byte values the same counts come from a histogram, which makes the sweep a Map/Reduce:
//!
//! * Map counts records per (attribute, value, class) among the records that reach the node (`path`: the tests
//!   `value <= threshold` or `>` from the root);
//! * Reduce adds the histograms;
//! * finish sweeps each attribute's values in order: for every present value `t` with records on both sides,
//!   the split `value <= t` has `gini = (n_L gini_L + n_R gini_R) / n` with `gini_X = 1 - Σ_c (n_{X,c} / n_X)²`
//!   (classes summed in order); the best split of an attribute is its smallest gini (ties to the lowest `t`), the
//!   node's best the smallest over attributes (ties to the lowest attribute), if it is below the node's own gini
//!   (a pure node is a leaf).
//!
//! Histograms are exact integers and the sweep's arithmetic has a fixed order, so the split is the same in any
//! chunking (and equal to a reference doing the same sums).

use super::labelled::Shape;
use super::tally::Tally;
use super::{Chunk, Kernel, Output, Partial};
use crate::codec::{varint_len, Body, Reader, Writer};
use crate::error::{invalid, IssdError, Result};
use crate::pages::PageLayout;
use serde::{Deserialize, Serialize};

/// Values of a one-byte attribute.
const LEVELS: usize = 256;

/// One test on the way from the root to the node: `value[attribute] <= threshold` (left) or `>` (not left).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathStep {
    pub attribute: usize,
    pub threshold: u8,
    pub left: bool,
}

/// Parameters of `scalparc`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScalParcParams {
    pub attributes: usize,
    pub classes: usize,
    /// Tests from the root to the node evaluated (empty: the root).
    #[serde(default)]
    pub path: Vec<PathStep>,
}

/// The best split of one attribute.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct AttributeSplit {
    pub threshold: u8,
    pub gini: f64,
}

/// The node's class counts and gini, each attribute's best split, and the node's best split.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SplitOutput {
    pub classes: usize,
    pub class_counts: Vec<u64>,
    pub node_gini: f64,
    /// Per attribute; `None` where every record has the same value.
    pub splits: Vec<Option<AttributeSplit>>,
    /// The best attribute, and the class counts left of its split.
    pub best: Option<usize>,
    pub left_counts: Vec<u64>,
}

impl Body for SplitOutput {
    fn body_len(&self) -> usize {
        varint_len(self.classes as u64)
            + self.class_counts.iter().map(|&c| varint_len(c)).sum::<usize>()
            + 8
            + varint_len(self.splits.len() as u64)
            + self.splits.iter().map(|s| if s.is_some() { 10 } else { 1 }).sum::<usize>()
            + varint_len(self.best.map_or(0, |b| b as u64 + 1))
            + self.left_counts.iter().map(|&c| varint_len(c)).sum::<usize>()
    }
    fn encode_body(&self, w: &mut Writer) {
        w.varint(self.classes as u64);
        self.class_counts.iter().for_each(|&c| w.varint(c));
        w.f64(self.node_gini);
        w.varint(self.splits.len() as u64);
        for s in &self.splits {
            match s {
                None => w.u8(0),
                Some(s) => {
                    w.u8(1);
                    w.u8(s.threshold);
                    w.f64(s.gini);
                }
            }
        }
        w.varint(self.best.map_or(0, |b| b as u64 + 1));
        self.left_counts.iter().for_each(|&c| w.varint(c));
    }
    fn decode_body(r: &mut Reader<'_>) -> Result<Self> {
        let classes = r.count(1)?;
        let class_counts = (0..classes).map(|_| r.varint()).collect::<Result<Vec<_>>>()?;
        let node_gini = r.f64()?;
        let n = r.count(1)?;
        let splits = (0..n)
            .map(|_| match r.u8()? {
                0 => Ok(None),
                1 => Ok(Some(AttributeSplit { threshold: r.u8()?, gini: r.f64()? })),
                f => Err(IssdError::Decode(format!("bad split flag {f}"))),
            })
            .collect::<Result<Vec<_>>>()?;
        let best = match r.varint()? {
            0 => None,
            b if (b as usize) <= n => Some(b as usize - 1),
            b => return Err(IssdError::Decode(format!("best split {b} of {n} attributes"))),
        };
        let left_counts = match best {
            Some(_) => (0..classes).map(|_| r.varint()).collect::<Result<Vec<_>>>()?,
            None => Vec::new(),
        };
        Ok(Self { classes, class_counts, node_gini, splits, best, left_counts })
    }
}

/// Gini impurity of class counts summing to `n` (0 for an empty set).
pub fn gini(counts: &[u64], n: u64) -> f64 {
    let mut g = 1.0;
    if n == 0 {
        return 0.0;
    }
    for &c in counts {
        let p = c as f64 / n as f64;
        g -= p * p;
    }
    g
}

/// Split evaluation of one tree node over labelled-record pages.
#[derive(Debug, Clone)]
pub struct ScalParcKernel {
    layout: PageLayout,
    shape: Shape,
    path: Vec<PathStep>,
}

impl ScalParcKernel {
    pub fn new(params: &ScalParcParams, layout: PageLayout) -> Result<Self> {
        let shape = Shape::new(params.attributes, params.classes, layout)?;
        super::labelled::check_table(params.attributes * LEVELS * params.classes, "scalparc (attributes x 256 x classes)")?;
        if let Some(s) = params.path.iter().find(|s| s.attribute >= params.attributes) {
            return Err(invalid(format!("path tests attribute {} of {}", s.attribute, params.attributes)));
        }
        Ok(Self { layout, shape, path: params.path.clone() })
    }

    fn table_len(&self) -> usize {
        self.shape.attributes * LEVELS * self.shape.classes
    }

    fn reaches_node(&self, values: &[u8]) -> bool {
        self.path.iter().all(|s| (values[s.attribute] <= s.threshold) == s.left)
    }

    /// The best split of one attribute from its (value, class) histogram.
    fn sweep(&self, hist: &[u64], total: &[u64], n: u64) -> Option<(AttributeSplit, Vec<u64>)> {
        let c = self.shape.classes;
        let (mut left, mut right) = (vec![0u64; c], vec![0u64; c]);
        let mut n_left = 0u64;
        let mut best: Option<(AttributeSplit, Vec<u64>)> = None;
        for (t, row) in hist.chunks_exact(c).enumerate() {
            let here: u64 = row.iter().sum();
            if here == 0 {
                continue;
            }
            left.iter_mut().zip(row).for_each(|(l, r)| *l += r);
            n_left += here;
            if n_left == n {
                break;
            }
            right.iter_mut().zip(total.iter().zip(&left)).for_each(|(r, (t, l))| *r = t - l);
            let n_right = n - n_left;
            let g = (n_left as f64 * gini(&left, n_left) + n_right as f64 * gini(&right, n_right)) / n as f64;
            if best.as_ref().is_none_or(|(b, _)| g < b.gini) {
                best = Some((AttributeSplit { threshold: t as u8, gini: g }, left.clone()));
            }
        }
        best
    }
}

impl Kernel for ScalParcKernel {
    fn name(&self) -> &str {
        "scalparc"
    }
    fn layout(&self) -> PageLayout {
        self.layout
    }
    fn empty(&self) -> Partial {
        Partial::Tally(Tally::zeros(self.table_len()))
    }
    fn map(&self, chunk: Chunk<'_>) -> Result<Partial> {
        let c = self.shape.classes;
        let mut t = Tally::zeros(self.table_len());
        let h = &mut t.0;
        self.shape.for_each(self.layout, chunk.bytes, |values, class| {
            if self.reaches_node(values) {
                for (a, &x) in values.iter().enumerate() {
                    h[(a * LEVELS + x as usize) * c + class] += 1;
                }
            }
            Ok(())
        })?;
        Ok(Partial::Tally(t))
    }
    fn merge(&self, acc: &mut Partial, p: Partial) -> Result<()> {
        match (&*acc, &p) {
            (Partial::Tally(x), Partial::Tally(y)) if x.0.len() == self.table_len() && y.0.len() == x.0.len() => {
                acc.merge(p)
            }
            _ => Err(IssdError::PartialMismatch(format!("scalparc got a {} partial of another shape", p.kind()))),
        }
    }
    fn finish(&self, p: Partial) -> Result<Output> {
        let Partial::Tally(t) = p else {
            return Err(p.wrong_kind(self.name()));
        };
        if t.0.len() != self.table_len() {
            return Err(IssdError::PartialMismatch("scalparc partial of another shape".into()));
        }
        let c = self.shape.classes;
        let per_attr = LEVELS * c;
        // every record reaching the node adds one to each attribute's histogram: attribute 0's sums are the node's
        let mut class_counts = vec![0u64; c];
        for row in t.0[..per_attr].chunks_exact(c) {
            class_counts.iter_mut().zip(row).for_each(|(a, b)| *a += b);
        }
        let n: u64 = class_counts.iter().sum();
        let mut out = SplitOutput { classes: c, node_gini: gini(&class_counts, n), ..Default::default() };
        let mut best_g = f64::INFINITY;
        for (a, hist) in t.0.chunks_exact(per_attr).enumerate() {
            let s = self.sweep(hist, &class_counts, n);
            if let Some((split, left)) = &s {
                // a split must lower the impurity (a pure node is a leaf)
                if split.gini < best_g && split.gini < out.node_gini {
                    best_g = split.gini;
                    out.best = Some(a);
                    out.left_counts = left.clone();
                }
            }
            out.splits.push(s.map(|x| x.0));
        }
        out.class_counts = class_counts;
        Ok(Output::Split(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{run_chunked, run_serial};
    use crate::pages::pack_records;

    #[test]
    fn finds_the_separating_attribute_and_threshold() {
        let layout = PageLayout::new(64).unwrap();
        // attribute 0 is noise, attribute 1 separates: class 0 <= 10 < class 1
        let recs: Vec<u8> = [[5, 1, 0], [9, 10, 0], [5, 3, 0], [9, 11, 1], [5, 200, 1], [7, 50, 1]].concat();
        let pages = pack_records(layout, &recs, 3).unwrap();
        let k = ScalParcKernel::new(&ScalParcParams { attributes: 2, classes: 2, path: vec![] }, layout).unwrap();
        let r = run_chunked(&k, &pages, 1).unwrap();
        assert_eq!(r.output, run_serial(&k, &pages).unwrap().output);
        let Output::Split(o) = r.output else { panic!("split") };
        assert_eq!(o.class_counts, vec![3, 3]);
        assert_eq!(o.node_gini, 0.5);
        assert_eq!(o.best, Some(1));
        assert_eq!(o.splits[1], Some(AttributeSplit { threshold: 10, gini: 0.0 }));
        assert_eq!(o.left_counts, vec![3, 0]);
        // attribute 0: values 5 (0,0,1), 7 (1), 9 (0,1); best is <= 5: left [2,1], right [1,2] -> 4/9
        let s0 = o.splits[0].unwrap();
        assert_eq!(s0.threshold, 5);
        assert!((s0.gini - 4.0 / 9.0).abs() < 1e-15);
        let out = Output::Split(o);
        assert_eq!(Output::decode(&out.encode()).unwrap(), out);
        // the right child of the best split is pure: no split left
        let right = ScalParcParams {
            attributes: 2,
            classes: 2,
            path: vec![PathStep { attribute: 1, threshold: 10, left: false }],
        };
        let k = ScalParcKernel::new(&right, layout).unwrap();
        let Output::Split(o) = run_serial(&k, &pages).unwrap().output else { panic!() };
        assert_eq!((o.class_counts, o.node_gini), (vec![0, 3], 0.0));
        assert_eq!(o.best, None);
        assert_eq!(o.splits[1].unwrap().gini, 0.0, "a split of a pure node is still pure");
    }

    #[test]
    fn bad_parameters_and_partials_are_errors() {
        let layout = PageLayout::new(64).unwrap();
        let p = |path| ScalParcParams { attributes: 2, classes: 2, path };
        assert!(ScalParcKernel::new(&p(vec![PathStep { attribute: 2, threshold: 0, left: true }]), layout).is_err());
        assert!(ScalParcKernel::new(&ScalParcParams { classes: 300, ..p(vec![]) }, layout).is_err());
        let huge = ScalParcParams { attributes: 1000, classes: 256, path: vec![] };
        assert!(ScalParcKernel::new(&huge, PageLayout::new(8192).unwrap()).is_err(), "table too large");
        assert!(ScalParcKernel::new(&ScalParcParams { attributes: 100, ..p(vec![]) }, layout).is_err(), "records do not fit");
        let k = ScalParcKernel::new(&p(vec![]), layout).unwrap();
        assert!(k.finish(Partial::Tally(Tally::zeros(4))).is_err());
        let mut acc = k.empty();
        assert!(k.merge(&mut acc, Partial::Tally(Tally::zeros(4))).is_err());
        assert!(Output::decode(&[9, 2, 0, 0]).is_err(), "truncated gini");
    }
}
