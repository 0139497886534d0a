//! What `deploy(device)` sends to SearSSD through the `DEPLOY` vendor command: the LUNCSR arrays of a graph in
//! storage order and its vectors, in one little-endian blob the firmware checks in full before it changes anything.
//!
//! ```text
//! magic "NDSDPLY1" | metric u8 | dtype u8 | 0 u16 | dim u32 | n u32 | edges u64
//! order[n] u32      storage position -> original id (results and tie-breaking use original ids, as on the host)
//! offsets[n+1] u64  CSR over storage positions
//! neighbours[edges] u32
//! vectors[n x dim]  the index's dtype, storage order (cosine f32 rows already normalised)
//! ```
//!
//! The LUN and BLK arrays are not sent: the firmware derives them from its own geometry (the multi-plane mapping
//! of `luncsr`) and the reserved blocks it programs.

use crate::distance::{Dtype, Metric};
use crate::graph::Adjacency;
use crate::index::Index;
use crate::reorder::{degree_ascending_bfs, random_bfs, relabel, Order};
use crate::study::Reorder;
use crate::NdError;

pub const MAGIC: &[u8; 8] = b"NDSDPLY1";
const HEADER: usize = 8 + 4 + 4 + 4 + 8;

/// A parsed deployment: the graph in storage order and its vectors.
#[derive(Debug)]
pub struct Deployment {
    pub metric: Metric,
    pub dtype: Dtype,
    pub dim: usize,
    pub order: Vec<u32>,
    pub graph: Adjacency,
    pub vectors: Vec<u8>,
}

impl Deployment {
    pub fn len(&self) -> usize {
        self.order.len()
    }
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
    /// Bytes of one stored vector.
    pub fn vector_bytes(&self) -> usize {
        self.dim * self.dtype.bytes()
    }
}

/// The storage order of `index`'s layer 0 under `reorder`.
pub fn storage_order(index: &Index, reorder: Reorder) -> Order {
    match reorder {
        Reorder::None => (0..index.len() as u32).collect(),
        Reorder::DegreeBfs => degree_ascending_bfs(index.layer0()),
        Reorder::RandomBfs(s) => random_bfs(index.layer0(), s),
    }
}

/// The blob `deploy` sends for `index` with vertices numbered by `reorder`.
pub fn encode(index: &Index, reorder: Reorder) -> Result<Vec<u8>, NdError> {
    if index.is_empty() {
        return Err(NdError::Argument("the index is empty: add vectors before deploying it".into()));
    }
    let p = index.params();
    let order = storage_order(index, reorder);
    let graph = relabel(index.layer0(), &order);
    let mut out = Vec::with_capacity(HEADER + index.len() * (12 + p.dim * p.dtype.bytes()) + graph.edges() * 4);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[p.metric.code(), p.dtype.code(), 0, 0]);
    out.extend_from_slice(&(p.dim as u32).to_le_bytes());
    out.extend_from_slice(&(index.len() as u32).to_le_bytes());
    out.extend_from_slice(&(graph.edges() as u64).to_le_bytes());
    order.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
    let mut off = 0u64;
    out.extend_from_slice(&off.to_le_bytes());
    for v in 0..index.len() as u32 {
        graph.for_each(v, |_| off += 1);
        out.extend_from_slice(&off.to_le_bytes());
    }
    for v in 0..index.len() as u32 {
        graph.for_each(v, |u| out.extend_from_slice(&u.to_le_bytes()));
    }
    for &orig in &order {
        match index.vector(orig) {
            crate::VecRef::F32(r) => r.iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            crate::VecRef::U8(r) => out.extend_from_slice(r),
            crate::VecRef::I8(r) => r.iter().for_each(|&x| out.push(x as u8)),
        }
    }
    Ok(out)
}

fn take<'a>(b: &mut &'a [u8], n: usize, what: &str) -> Result<&'a [u8], NdError> {
    if b.len() < n {
        return Err(NdError::Format(format!("deployment truncated in {what}: {n} bytes needed, {} left", b.len())));
    }
    let (h, t) = b.split_at(n);
    *b = t;
    Ok(h)
}

/// Parses and checks a deployment blob (every count, id and the permutation) before anything is allocated from
/// its counts beyond the blob's own length.
pub fn decode(blob: &[u8]) -> Result<Deployment, NdError> {
    decode_with(blob, true)
}

/// As `decode`; without `vectors` the blob ends after the neighbour array (the firmware's saved state: the vectors
/// stay on flash).
pub fn decode_with(blob: &[u8], vectors: bool) -> Result<Deployment, NdError> {
    let mut b = blob;
    if take(&mut b, 8, "magic")? != MAGIC {
        return Err(NdError::Format("not a SearSSD deployment (bad magic)".into()));
    }
    let h = take(&mut b, HEADER - 8, "header")?;
    let metric = Metric::from_code(h[0]).ok_or_else(|| NdError::Format(format!("metric code {}", h[0])))?;
    let dtype = Dtype::from_code(h[1]).ok_or_else(|| NdError::Format(format!("dtype code {}", h[1])))?;
    let dim = u32::from_le_bytes(h[4..8].try_into().unwrap()) as usize;
    let n = u32::from_le_bytes(h[8..12].try_into().unwrap()) as usize;
    let edges = u64::from_le_bytes(h[12..20].try_into().unwrap());
    if dim == 0 || dim > 2048 {
        return Err(NdError::Format(format!("dim {dim} outside 1..=2048 (the <Search Page> fv_dim range)")));
    }
    if n == 0 || n >= u32::MAX as usize {
        return Err(NdError::Format(format!("{n} vectors")));
    }
    let vec_bytes = if vectors { (dim * dtype.bytes()) as u128 } else { 0 };
    let need = (n as u128) * (4 + 8 + vec_bytes) + 8 + (edges as u128) * 4;
    if need != b.len() as u128 {
        return Err(NdError::Format(format!("deployment body is {} bytes, its header says {need}", b.len())));
    }
    let edges = edges as usize;
    let order: Vec<u32> =
        take(&mut b, 4 * n, "order")?.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    let mut seen = vec![false; n];
    for &v in &order {
        if v as usize >= n || std::mem::replace(&mut seen[v as usize], true) {
            return Err(NdError::Format(format!("order is not a permutation of 0..{n} (id {v})")));
        }
    }
    let offsets: Vec<u64> =
        take(&mut b, 8 * (n + 1), "offsets")?.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
    if offsets[0] != 0 || offsets[n] != edges as u64 || offsets.windows(2).any(|w| w[0] > w[1]) {
        return Err(NdError::Format("offsets do not rise from 0 to the edge count".into()));
    }
    let nbrs: Vec<u32> =
        take(&mut b, 4 * edges, "neighbours")?.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    if let Some(&u) = nbrs.iter().find(|&&u| u as usize >= n) {
        return Err(NdError::Format(format!("neighbour id {u} beyond {n} vertices")));
    }
    let degree = offsets.windows(2).map(|w| (w[1] - w[0]) as usize).max().unwrap_or(0);
    let mut graph = Adjacency::new(degree.max(1));
    graph.resize(n);
    for v in 0..n {
        let row = &nbrs[offsets[v] as usize..offsets[v + 1] as usize];
        graph.set(v as u32, row);
    }
    let vectors = b.to_vec();
    if dtype == Dtype::F32 && vectors.chunks_exact(4).any(|c| !f32::from_le_bytes(c.try_into().unwrap()).is_finite()) {
        return Err(NdError::Format("a vector holds a NaN or infinite value".into()));
    }
    Ok(Deployment { metric, dtype, dim, order, graph, vectors })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{Kind, Params};
    use crate::Rows;

    fn small() -> Index {
        let p = Params { kind: Kind::Hnsw, metric: Metric::L2, dtype: Dtype::F32, dim: 8, r: 8, ef_construction: 40, alpha: 1.2, seed: 1 };
        let mut ix = Index::new(p).unwrap();
        let x: Vec<f32> = (0..8 * 300).map(|i| ((i * 37 % 101) as f32).sin()).collect();
        ix.add(Rows::F32(x)).unwrap();
        ix
    }

    #[test]
    fn round_trip_and_every_damage_is_refused() {
        let ix = small();
        let blob = encode(&ix, Reorder::DegreeBfs).unwrap();
        let d = decode(&blob).unwrap();
        assert_eq!((d.len(), d.dim, d.graph.edges()), (300, 8, ix.layer0().edges()));
        for cut in [0, 7, 20, blob.len() - 1] {
            assert!(decode(&blob[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = blob.clone();
        bad[HEADER] = 0xFF; // order[0] out of range
        assert!(decode(&bad).is_err());
        let mut nan = blob.clone();
        let at = nan.len() - 4;
        nan[at..].copy_from_slice(&f32::NAN.to_le_bytes());
        assert!(decode(&nan).is_err());
    }
}

