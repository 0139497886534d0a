//! k-means (NU-MineBench / Phoenix, Table 1). Input records are points of `dim` little-endian i32 coordinates.
//! One kernel object is one iteration with the current centroids as its parameter: Map assigns each point of a
//! chunk to its nearest centroid (squared Euclidean distance, ties to the lowest index) and sums counts and
//! coordinates per cluster; Reduce adds the sums; finish yields the new centroids (floor of sum / count, as
//! Phoenix's integer means; an empty cluster keeps its centroid). Integer arithmetic keeps every iteration
//! exact, so any chunking gives the same centroids. The device runs one Map pass per iteration with a new
//! kernel built from the previous step's centroids ([`KMeansKernel::next`]); [`run_kmeans`] does so on the host.

use super::partial::Mergeable;
use super::{run_parallel, Chunk, Kernel, Output, Partial};
use crate::codec::{varint_len, zigzag, Body, Reader, Writer};
use crate::error::{invalid, malformed, IssdError, Result};
use crate::pages::PageLayout;
use serde::{Deserialize, Serialize};

/// Largest dimension accepted.
pub const MAX_DIM: usize = 64;
/// Coordinates must lie in [-COORD_LIMIT, COORD_LIMIT] so squared distances fit i64 exactly.
pub const COORD_LIMIT: i64 = 1 << 20;

/// Parameters of one `kmeans` iteration: the point dimension and the current centroids.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KMeansParams {
    pub dim: usize,
    pub centroids: Vec<Vec<i32>>,
}

/// Per-cluster counts and coordinate sums, plus the summed squared distance of the assignment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterSums {
    pub dim: usize,
    pub counts: Vec<u64>,
    /// `counts.len() x dim` sums, cluster-major.
    pub sums: Vec<i64>,
    pub sse: i128,
}

impl ClusterSums {
    fn zeros(k: usize, dim: usize) -> Self {
        Self { dim, counts: vec![0; k], sums: vec![0; k * dim], sse: 0 }
    }
}

impl Mergeable for ClusterSums {
    fn merge(&mut self, o: Self) -> Result<()> {
        if self.dim != o.dim || self.counts.len() != o.counts.len() {
            return Err(IssdError::PartialMismatch(format!(
                "k-means partials of shape {}x{} and {}x{}",
                self.counts.len(),
                self.dim,
                o.counts.len(),
                o.dim
            )));
        }
        self.counts.iter_mut().zip(&o.counts).for_each(|(a, b)| *a += b);
        self.sums.iter_mut().zip(&o.sums).for_each(|(a, b)| *a += b);
        self.sse += o.sse;
        Ok(())
    }
}

impl Body for ClusterSums {
    fn body_len(&self) -> usize {
        varint_len(self.dim as u64)
            + varint_len(self.counts.len() as u64)
            + self.counts.iter().map(|&c| varint_len(c)).sum::<usize>()
            + self.sums.iter().map(|&s| varint_len(zigzag(s))).sum::<usize>()
            + 16
    }
    fn encode_body(&self, w: &mut Writer) {
        w.varint(self.dim as u64);
        w.varint(self.counts.len() as u64);
        self.counts.iter().for_each(|&c| w.varint(c));
        self.sums.iter().for_each(|&s| w.svarint(s));
        w.i128(self.sse);
    }
    fn decode_body(r: &mut Reader<'_>) -> Result<Self> {
        let dim = r.varint()? as usize;
        if dim > MAX_DIM {
            return Err(IssdError::Decode(format!("dimension {dim} over {MAX_DIM}")));
        }
        let k = r.count(1 + dim)?;
        let counts = (0..k).map(|_| r.varint()).collect::<Result<Vec<_>>>()?;
        let sums = (0..k * dim).map(|_| r.svarint()).collect::<Result<Vec<_>>>()?;
        Ok(Self { dim, counts, sums, sse: r.i128()? })
    }
}

/// One iteration's result: new centroids, cluster sizes, and the squared error of the assignment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KMeansStep {
    pub dim: usize,
    /// `k x dim` new centroids, cluster-major.
    pub centroids: Vec<i32>,
    pub counts: Vec<u64>,
    /// Σ squared distance of each point to the centroid it was assigned to (the old centroids).
    pub sse: i128,
    /// Whether any centroid changed.
    pub moved: bool,
}

impl KMeansStep {
    pub fn centroid_rows(&self) -> Vec<Vec<i32>> {
        self.centroids.chunks(self.dim.max(1)).map(<[i32]>::to_vec).collect()
    }
}

impl Body for KMeansStep {
    fn body_len(&self) -> usize {
        varint_len(self.dim as u64)
            + varint_len(self.counts.len() as u64)
            + self.centroids.iter().map(|&c| varint_len(zigzag(c.into()))).sum::<usize>()
            + self.counts.iter().map(|&c| varint_len(c)).sum::<usize>()
            + 17
    }
    fn encode_body(&self, w: &mut Writer) {
        w.varint(self.dim as u64);
        w.varint(self.counts.len() as u64);
        self.centroids.iter().for_each(|&c| w.svarint(c.into()));
        self.counts.iter().for_each(|&c| w.varint(c));
        w.i128(self.sse);
        w.u8(self.moved.into());
    }
    fn decode_body(r: &mut Reader<'_>) -> Result<Self> {
        let dim = r.varint()? as usize;
        if dim > MAX_DIM {
            return Err(IssdError::Decode(format!("dimension {dim} over {MAX_DIM}")));
        }
        let k = r.count(1 + dim)?;
        let centroids = (0..k * dim)
            .map(|_| i32::try_from(r.svarint()?).map_err(|_| IssdError::Decode("centroid over 32 bits".into())))
            .collect::<Result<Vec<_>>>()?;
        let counts = (0..k).map(|_| r.varint()).collect::<Result<Vec<_>>>()?;
        Ok(Self { dim, centroids, counts, sse: r.i128()?, moved: r.u8()? != 0 })
    }
}

/// One k-means iteration over point pages.
#[derive(Debug, Clone)]
pub struct KMeansKernel {
    layout: PageLayout,
    dim: usize,
    centroids: Vec<i64>,
}

impl KMeansKernel {
    pub fn new(params: &KMeansParams, layout: PageLayout) -> Result<Self> {
        let dim = params.dim;
        if !(1..=MAX_DIM).contains(&dim) {
            return Err(invalid(format!("k-means dimension {dim} outside 1..={MAX_DIM}")));
        }
        layout.records_per_page(4 * dim)?;
        if params.centroids.is_empty() {
            return Err(invalid("k-means needs at least one centroid"));
        }
        let mut centroids = Vec::with_capacity(params.centroids.len() * dim);
        for c in &params.centroids {
            if c.len() != dim {
                return Err(invalid(format!("centroid of {} coordinates, dimension is {dim}", c.len())));
            }
            if c.iter().any(|&v| i64::from(v).abs() > COORD_LIMIT) {
                return Err(invalid(format!("centroid coordinates must lie within ±{COORD_LIMIT}")));
            }
            centroids.extend(c.iter().map(|&v| i64::from(v)));
        }
        Ok(Self { layout, dim, centroids })
    }

    /// Bytes per point record.
    pub fn point_bytes(&self) -> usize {
        4 * self.dim
    }

    pub fn k(&self) -> usize {
        self.centroids.len() / self.dim
    }

    /// The kernel of the next iteration, from this iteration's step.
    pub fn next(&self, step: &KMeansStep) -> Result<Self> {
        let params = KMeansParams { dim: self.dim, centroids: step.centroid_rows() };
        Self::new(&params, self.layout)
    }

    fn assign(&self, payload: &[u8], acc: &mut ClusterSums) -> Result<()> {
        let dim = self.dim;
        let mut p = [0i64; MAX_DIM];
        for rec in payload.chunks_exact(4 * dim) {
            for (v, b) in p.iter_mut().zip(rec.chunks_exact(4)) {
                *v = i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]]));
            }
            let p = &p[..dim];
            if p.iter().any(|v| v.abs() > COORD_LIMIT) {
                return Err(malformed(format!("point coordinate outside ±{COORD_LIMIT}")));
            }
            let (mut best, mut best_d) = (0, i64::MAX);
            for (j, c) in self.centroids.chunks_exact(dim).enumerate() {
                let d: i64 = p.iter().zip(c).map(|(a, b)| (a - b) * (a - b)).sum();
                if d < best_d {
                    (best, best_d) = (j, d);
                }
            }
            acc.counts[best] += 1;
            acc.sums[best * dim..(best + 1) * dim].iter_mut().zip(p).for_each(|(s, v)| *s += v);
            acc.sse += i128::from(best_d);
        }
        Ok(())
    }
}

impl Kernel for KMeansKernel {
    fn name(&self) -> &str {
        "kmeans"
    }
    fn layout(&self) -> PageLayout {
        self.layout
    }
    fn empty(&self) -> Partial {
        Partial::Clusters(ClusterSums::zeros(self.k(), self.dim))
    }
    fn map(&self, chunk: Chunk<'_>) -> Result<Partial> {
        let mut acc = ClusterSums::zeros(self.k(), self.dim);
        for payload in self.layout.record_payloads(chunk.bytes, self.point_bytes())? {
            self.assign(payload?, &mut acc)?;
        }
        Ok(Partial::Clusters(acc))
    }
    fn finish(&self, p: Partial) -> Result<Output> {
        let Partial::Clusters(s) = p else {
            return Err(p.wrong_kind(self.name()));
        };
        if s.dim != self.dim || s.counts.len() != self.k() {
            return Err(IssdError::PartialMismatch("k-means partial of another shape".into()));
        }
        let mut centroids = Vec::with_capacity(self.centroids.len());
        for (j, &n) in s.counts.iter().enumerate() {
            for d in 0..self.dim {
                let old = self.centroids[j * self.dim + d];
                // a mean of in-range coordinates stays in range, so it fits i32
                let v = if n == 0 { old } else { s.sums[j * self.dim + d].div_euclid(n as i64) };
                centroids.push(v as i32);
            }
        }
        let moved = centroids.iter().zip(&self.centroids).any(|(&a, &b)| i64::from(a) != b);
        Ok(Output::Clusters(KMeansStep { dim: self.dim, centroids, counts: s.counts, sse: s.sse, moved }))
    }
}

/// The first `k` points of a paged point input, as initial centroids (deterministic).
pub fn initial_centroids(layout: PageLayout, data: &[u8], dim: usize, k: usize) -> Result<Vec<Vec<i32>>> {
    let mut out = Vec::with_capacity(k);
    for payload in layout.record_payloads(data, 4 * dim)? {
        for rec in payload?.chunks_exact(4 * dim) {
            if out.len() == k {
                return Ok(out);
            }
            out.push(rec.chunks_exact(4).map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect());
        }
    }
    if out.len() < k {
        return Err(invalid(format!("{k} centroids requested from {} points", out.len())));
    }
    Ok(out)
}

/// Iterations of a host-side k-means run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KMeansRun {
    pub steps: Vec<KMeansStep>,
    /// Whether the last step left every centroid in place.
    pub converged: bool,
}

/// Runs up to `max_iterations` k-means iterations (stopping when no centroid moves), each a parallel pass.
pub fn run_kmeans(
    first: &KMeansParams,
    layout: PageLayout,
    data: &[u8],
    max_iterations: usize,
    pages_per_chunk: usize,
) -> Result<KMeansRun> {
    let mut kernel = KMeansKernel::new(first, layout)?;
    let mut steps: Vec<KMeansStep> = Vec::new();
    for _ in 0..max_iterations {
        let Output::Clusters(step) = run_parallel(&kernel, data, pages_per_chunk)?.output else {
            return Err(IssdError::PartialMismatch("k-means produced a non-cluster output".into()));
        };
        kernel = kernel.next(&step)?;
        let moved = step.moved;
        steps.push(step);
        if !moved {
            break;
        }
    }
    let converged = steps.last().is_some_and(|s| !s.moved);
    Ok(KMeansRun { steps, converged })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pages::pack_records;

    fn points(pts: &[[i32; 2]]) -> Vec<u8> {
        pts.iter().flat_map(|p| p.iter().flat_map(|v| v.to_le_bytes())).collect()
    }

    #[test]
    fn two_blobs_converge_to_their_means() {
        let layout = PageLayout::new(64).unwrap();
        let pts = [[0, 0], [2, 0], [0, 2], [2, 2], [100, 100], [102, 100], [100, 102], [102, 102]];
        let data = pack_records(layout, &points(&pts), 8).unwrap();
        let first = KMeansParams { dim: 2, centroids: vec![vec![0, 0], vec![2, 2]] };
        let run = run_kmeans(&first, layout, &data, 10, 1).unwrap();
        assert!(run.converged);
        let last = run.steps.last().unwrap();
        assert_eq!(last.centroid_rows(), vec![vec![1, 1], vec![101, 101]]);
        assert_eq!(last.counts, vec![4, 4]);
        assert_eq!(last.sse, 8 * 2);
        let out = Output::Clusters(last.clone());
        assert_eq!(Output::decode(&out.encode()).unwrap(), out);
        assert_eq!(initial_centroids(layout, &data, 2, 2).unwrap(), vec![vec![0, 0], vec![2, 0]]);
    }

    #[test]
    fn bad_shapes_and_coordinates_are_errors() {
        let layout = PageLayout::new(64).unwrap();
        let mk = |dim, centroids| KMeansParams { dim, centroids };
        assert!(KMeansKernel::new(&mk(0, vec![vec![]]), layout).is_err());
        assert!(KMeansKernel::new(&mk(2, vec![]), layout).is_err());
        assert!(KMeansKernel::new(&mk(2, vec![vec![1]]), layout).is_err());
        assert!(KMeansKernel::new(&mk(1, vec![vec![i32::MAX]]), layout).is_err());
        let k = KMeansKernel::new(&mk(2, vec![vec![0, 0]]), layout).unwrap();
        let data = pack_records(layout, &points(&[[i32::MAX, 0]]), 8).unwrap();
        assert!(k.map(Chunk::new(0, &data)).is_err());
        let mut a = ClusterSums::zeros(2, 2);
        assert!(a.merge(ClusterSums::zeros(3, 2)).is_err());
    }
}
