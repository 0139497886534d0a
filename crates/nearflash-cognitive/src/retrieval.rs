//! Retrieval evaluation: hash a split with the int8 executor (rayon), and measure precision@T and flash pages per
//! query of the graph search under both layouts beside brute force.

use crate::error::Result;
use crate::fmnist::Split;
use crate::graph_pages::{GraphLayout, GraphPages};
use crate::gse::{brute_force, distance_recall, entry_vertices, precision, search, PageImage, SearchConfig};
use crate::knn::KnnGraph;
use crate::model::{pack_code, Model};
use crate::quant::QModel;
use rayon::prelude::*;

/// Int8 hash codes of every image of `split`.
pub fn hash_int8(q: &QModel, split: &Split) -> Result<Vec<u64>> {
    (0..split.len()).into_par_iter().map(|i| q.hash(split.image(i))).collect()
}

/// Float-model hash codes of every image of `split`.
pub fn hash_float(m: &Model, split: &Split) -> Result<Vec<u64>> {
    (0..split.len()).into_par_iter().map(|i| m.forward(split.image(i)).map(|a| pack_code(&a))).collect()
}

/// Fraction of equal bits between two code lists of `bits` bits.
pub fn bit_agreement(a: &[u64], b: &[u64], bits: u32) -> f64 {
    let diff: u64 = a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones() as u64).sum();
    1.0 - diff as f64 / (a.len() as f64 * bits as f64)
}

/// One T's results.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PrecisionRow {
    pub t: usize,
    pub brute_force: f64,
    pub plain: f64,
    pub two_hop: f64,
    /// Mean flash pages read per query.
    pub plain_pages: f64,
    pub two_hop_pages: f64,
    /// Mean vertices evaluated per query.
    pub plain_evaluated: f64,
    pub two_hop_evaluated: f64,
    /// Recall of the graph search against brute force's top-T (as sets; ties at the cut count as misses).
    pub plain_recall: f64,
    pub two_hop_recall: f64,
    /// Recall with ties at equal distance interchangeable ([`distance_recall`]).
    pub plain_distance_recall: f64,
    pub two_hop_distance_recall: f64,
}

/// Precision@T for each `t` over `queries` (codes, labels) against the database.
#[allow(clippy::too_many_arguments)]
pub fn precision_at(
    graph: &KnnGraph,
    db_codes: &[u64],
    db_labels: &[u8],
    bits: u32,
    page_size: usize,
    q_codes: &[u64],
    q_labels: &[u8],
    ts: &[usize],
    cfg: &SearchConfig,
) -> Result<Vec<PrecisionRow>> {
    let plain = GraphPages::new(GraphLayout::Plain, graph, db_codes, bits, page_size)?;
    let two = GraphPages::new(GraphLayout::TwoHop, graph, db_codes, bits, page_size)?;
    let entries = entry_vertices(db_codes, cfg.initial_vertices, 1);
    let plain_image = PageImage::build(&plain)?;
    ts.iter()
        .map(|&t| {
            let per: Vec<[f64; 11]> = (0..q_codes.len())
                .into_par_iter()
                .map(|i| {
                    let (code, label) = (q_codes[i], q_labels[i]);
                    let bf = brute_force(db_codes, code, t)?;
                    let mut bf_set = vec![false; db_codes.len()];
                    bf.iter().for_each(|&v| bf_set[v as usize] = true);
                    let recall = |ids: &[u32]| ids.iter().filter(|&&v| bf_set[v as usize]).count() as f64 / t as f64;
                    let (p_ids, p_st) = search(&plain.format(), &mut &plain_image, &entries, code, t, cfg, i as u64)?;
                    let (h_ids, h_st) = search(&two.format(), &mut two.clone(), &entries, code, t, cfg, i as u64)?;
                    Ok([
                        precision(&bf, db_labels, label),
                        precision(&p_ids, db_labels, label),
                        precision(&h_ids, db_labels, label),
                        p_st.pages_read as f64,
                        h_st.pages_read as f64,
                        p_st.evaluated as f64,
                        h_st.evaluated as f64,
                        recall(&p_ids),
                        recall(&h_ids),
                        distance_recall(db_codes, code, &p_ids, &bf),
                        distance_recall(db_codes, code, &h_ids, &bf),
                    ])
                })
                .collect::<Result<_>>()?;
            let n = per.len().max(1) as f64;
            let mean = |k: usize| per.iter().map(|r| r[k]).sum::<f64>() / n;
            Ok(PrecisionRow {
                t,
                brute_force: mean(0),
                plain: mean(1),
                two_hop: mean(2),
                plain_pages: mean(3),
                two_hop_pages: mean(4),
                plain_evaluated: mean(5),
                two_hop_evaluated: mean(6),
                plain_recall: mean(7),
                two_hop_recall: mean(8),
                plain_distance_recall: mean(9),
                two_hop_distance_recall: mean(10),
            })
        })
        .collect()
}
