//! hop (NU-MineBench's HOP halo finder, Table 1) over 3-D particles, records of three little-endian i32
//! coordinates (k-means' point format with dim 3). HOP estimates each particle's density from its neighbours,
//! then "hops" every particle to its densest neighbour until a density peak is reached; particles that end on
//! the same peak form a group, and particles below a density threshold (HOP's delta_outer) join none.
//!
//! Here the density is estimated on a mesh, which makes it a Map/Reduce: the cube `[lo, hi)^3` is cut into
//! `grid^3` cells; Map counts the particles per cell (and sums their coordinates, for the groups' centres of mass),
//! Reduce adds the sparse cell tables, and finish hops every cell holding at least `threshold` particles to the
//! densest of its 27 neighbours (itself included; ties to the lowest cell index), following the chains to the
//! peaks. Groups are listed by peak cell with their particles, cells and coordinate sums. Differences from
//! NU-MineBench's HOP, which works per particle: density by cell counts instead of an SPH kernel over the
//! `nsmooth` nearest neighbours, neighbourhoods of 27 cells instead of the `nhop` nearest particles, no periodic
//! box, and no regrouping of groups across saddle points.

use super::partial::Mergeable;
use super::{Chunk, Kernel, Output, Partial};
use crate::codec::{varint_len, zigzag, Body, Reader, Writer};
use crate::error::{invalid, IssdError, Result};
use crate::pages::PageLayout;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Bytes per particle record.
pub const PARTICLE_BYTES: usize = 12;
/// Largest mesh (cells per axis).
pub const MAX_GRID: usize = 64;

fn one() -> u64 {
    1
}

/// Parameters of `hop`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HopParams {
    /// Cells per axis (1..=64).
    pub grid: usize,
    /// The cube `[lo, hi)` on every axis; particles outside are counted apart.
    pub lo: i32,
    pub hi: i32,
    /// Particles a cell needs to join a group (HOP's delta_outer as a count; at least 1).
    #[serde(default = "one")]
    pub threshold: u64,
}

/// Particles of one cell and the sums of their coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cell {
    pub count: u64,
    pub sum: [i64; 3],
}

impl Cell {
    fn add(&mut self, o: &Cell) {
        self.count += o.count;
        self.sum.iter_mut().zip(o.sum).for_each(|(a, b)| *a += b);
    }
}

/// Occupied cells, sorted by index, and the particles outside the cube.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CellTable {
    pub outside: u64,
    pub cells: Vec<(u32, Cell)>,
}

impl Mergeable for CellTable {
    fn merge(&mut self, o: Self) -> Result<()> {
        self.outside += o.outside;
        let mut merged = Vec::with_capacity(self.cells.len() + o.cells.len());
        let (mut a, mut b) = (std::mem::take(&mut self.cells).into_iter().peekable(), o.cells.into_iter().peekable());
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) if x.0 == y.0 => {
                    let (i, mut c) = a.next().unwrap();
                    c.add(&b.next().unwrap().1);
                    (i, c)
                }
                (Some(x), Some(y)) if x.0 < y.0 => a.next().unwrap(),
                (Some(_), Some(_)) | (None, Some(_)) => b.next().unwrap(),
                (Some(_), None) => a.next().unwrap(),
                (None, None) => break,
            };
            merged.push(next);
        }
        self.cells = merged;
        Ok(())
    }
}

impl Body for CellTable {
    fn body_len(&self) -> usize {
        let mut prev = 0u32;
        varint_len(self.outside)
            + varint_len(self.cells.len() as u64)
            + self
                .cells
                .iter()
                .map(|(i, c)| {
                    let d = varint_len(u64::from(i - prev));
                    prev = *i;
                    d + varint_len(c.count) + c.sum.iter().map(|&s| varint_len(zigzag(s))).sum::<usize>()
                })
                .sum::<usize>()
    }
    fn encode_body(&self, w: &mut Writer) {
        w.varint(self.outside);
        w.varint(self.cells.len() as u64);
        let mut prev = 0u32;
        for (i, c) in &self.cells {
            w.varint(u64::from(i - prev)); // cell indices ascend: store the gaps
            prev = *i;
            w.varint(c.count);
            c.sum.iter().for_each(|&s| w.svarint(s));
        }
    }
    fn decode_body(r: &mut Reader<'_>) -> Result<Self> {
        let outside = r.varint()?;
        let n = r.count(5)?;
        let limit = (MAX_GRID * MAX_GRID * MAX_GRID) as u64;
        let (mut cells, mut prev) = (Vec::with_capacity(n), 0u64);
        for k in 0..n {
            let gap = r.varint()?;
            if k > 0 && gap == 0 {
                return Err(IssdError::Decode("cell indices must ascend".into()));
            }
            prev = prev.checked_add(gap).filter(|&i| i < limit).ok_or_else(|| {
                IssdError::Decode(format!("cell index beyond {limit}"))
            })?;
            let count = r.varint()?;
            cells.push((prev as u32, Cell { count, sum: [r.svarint()?, r.svarint()?, r.svarint()?] }));
        }
        Ok(Self { outside, cells })
    }
}

/// One group: the peak cell (and its particles), the cells and particles that hop to it, their coordinate sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Halo {
    pub peak: u32,
    pub peak_count: u64,
    pub cells: u64,
    pub particles: u64,
    pub sum: [i64; 3],
}

/// The groups (by peak cell) and where the other particles went.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HaloOutput {
    pub grid: u32,
    /// Particles inside the cube.
    pub particles: u64,
    pub outside: u64,
    /// Particles in cells under the threshold (in no group).
    pub below: u64,
    pub groups: Vec<Halo>,
}

impl Body for HaloOutput {
    fn body_len(&self) -> usize {
        [u64::from(self.grid), self.particles, self.outside, self.below, self.groups.len() as u64]
            .iter()
            .map(|&v| varint_len(v))
            .sum::<usize>()
            + self
                .groups
                .iter()
                .map(|g| {
                    [u64::from(g.peak), g.peak_count, g.cells, g.particles].iter().map(|&v| varint_len(v)).sum::<usize>()
                        + g.sum.iter().map(|&s| varint_len(zigzag(s))).sum::<usize>()
                })
                .sum::<usize>()
    }
    fn encode_body(&self, w: &mut Writer) {
        for v in [u64::from(self.grid), self.particles, self.outside, self.below, self.groups.len() as u64] {
            w.varint(v);
        }
        for g in &self.groups {
            [u64::from(g.peak), g.peak_count, g.cells, g.particles].iter().for_each(|&v| w.varint(v));
            g.sum.iter().for_each(|&s| w.svarint(s));
        }
    }
    fn decode_body(r: &mut Reader<'_>) -> Result<Self> {
        let grid = u32::try_from(r.varint()?).map_err(|_| IssdError::Decode("grid over 32 bits".into()))?;
        let (particles, outside, below) = (r.varint()?, r.varint()?, r.varint()?);
        let n = r.count(7)?;
        let groups = (0..n)
            .map(|_| {
                let peak = u32::try_from(r.varint()?).map_err(|_| IssdError::Decode("peak over 32 bits".into()))?;
                Ok(Halo {
                    peak,
                    peak_count: r.varint()?,
                    cells: r.varint()?,
                    particles: r.varint()?,
                    sum: [r.svarint()?, r.svarint()?, r.svarint()?],
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { grid, particles, outside, below, groups })
    }
}

/// Mesh HOP over particle pages.
#[derive(Debug, Clone)]
pub struct HopKernel {
    layout: PageLayout,
    grid: usize,
    lo: i64,
    span: i64,
    threshold: u64,
}

impl HopKernel {
    pub fn new(params: &HopParams, layout: PageLayout) -> Result<Self> {
        if !(1..=MAX_GRID).contains(&params.grid) {
            return Err(invalid(format!("grid must be 1..={MAX_GRID} cells per axis, got {}", params.grid)));
        }
        if params.lo >= params.hi {
            return Err(invalid(format!("the cube needs lo < hi, got [{}, {})", params.lo, params.hi)));
        }
        if params.threshold == 0 {
            return Err(invalid("threshold must be at least 1 particle"));
        }
        layout.records_per_page(PARTICLE_BYTES)?;
        let (lo, hi) = (i64::from(params.lo), i64::from(params.hi));
        Ok(Self { layout, grid: params.grid, lo, span: hi - lo, threshold: params.threshold })
    }

    /// The cell of a particle, or `None` outside the cube.
    fn cell_of(&self, p: [i64; 3]) -> Option<u32> {
        let g = self.grid as i64;
        let mut idx = 0i64;
        for x in p {
            let off = x - self.lo;
            if off < 0 || off >= self.span {
                return None;
            }
            idx = idx * g + off * g / self.span;
        }
        Some(idx as u32)
    }

    /// Hops every cell at or over the threshold to its peak: the groups, and the particles under the threshold.
    fn hop(&self, table: &CellTable) -> (Vec<Halo>, u64) {
        let g = self.grid;
        let mut count = vec![0u64; g * g * g];
        table.cells.iter().for_each(|(i, c)| count[*i as usize] = c.count);
        let key = |i: usize| (count[i], std::cmp::Reverse(i));
        let densest_neighbour = |i: usize| {
            let (x, y, z) = (i / (g * g), i / g % g, i % g);
            let mut best = i;
            for nx in x.saturating_sub(1)..=(x + 1).min(g - 1) {
                for ny in y.saturating_sub(1)..=(y + 1).min(g - 1) {
                    for nz in z.saturating_sub(1)..=(z + 1).min(g - 1) {
                        let j = (nx * g + ny) * g + nz;
                        if key(j) > key(best) {
                            best = j;
                        }
                    }
                }
            }
            best
        };
        let mut below = 0;
        let mut groups: std::collections::BTreeMap<usize, Halo> = Default::default();
        let mut peak_of: HashMap<usize, usize> = HashMap::new();
        for (i, c) in &table.cells {
            if c.count < self.threshold {
                below += c.count;
                continue;
            }
            // follow the chain; every hop raises (count, -index), so it ends at a peak
            let mut chain = vec![*i as usize];
            let peak = loop {
                let at = *chain.last().unwrap();
                if let Some(&p) = peak_of.get(&at) {
                    break p;
                }
                let next = densest_neighbour(at);
                if next == at {
                    break at;
                }
                chain.push(next);
            };
            chain.into_iter().for_each(|j| {
                peak_of.insert(j, peak);
            });
            let h = groups.entry(peak).or_insert(Halo { peak: peak as u32, peak_count: count[peak], ..Default::default() });
            h.cells += 1;
            h.particles += c.count;
            h.sum.iter_mut().zip(c.sum).for_each(|(a, b)| *a += b);
        }
        (groups.into_values().collect(), below)
    }
}

impl Kernel for HopKernel {
    fn name(&self) -> &str {
        "hop"
    }
    fn layout(&self) -> PageLayout {
        self.layout
    }
    fn empty(&self) -> Partial {
        Partial::Cells(CellTable::default())
    }
    fn map(&self, chunk: Chunk<'_>) -> Result<Partial> {
        let mut cells: HashMap<u32, Cell> = HashMap::new();
        let mut outside = 0;
        for payload in self.layout.record_payloads(chunk.bytes, PARTICLE_BYTES)? {
            for rec in payload?.chunks_exact(PARTICLE_BYTES) {
                let mut p = [0i64; 3];
                for (v, b) in p.iter_mut().zip(rec.chunks_exact(4)) {
                    *v = i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                }
                match self.cell_of(p) {
                    None => outside += 1,
                    Some(i) => cells.entry(i).or_default().add(&Cell { count: 1, sum: p }),
                }
            }
        }
        let mut cells: Vec<(u32, Cell)> = cells.into_iter().collect();
        cells.sort_unstable_by_key(|c| c.0);
        Ok(Partial::Cells(CellTable { outside, cells }))
    }
    fn finish(&self, p: Partial) -> Result<Output> {
        let Partial::Cells(t) = p else {
            return Err(p.wrong_kind(self.name()));
        };
        let cells = (self.grid * self.grid * self.grid) as u32;
        if t.cells.last().is_some_and(|c| c.0 >= cells) {
            return Err(IssdError::PartialMismatch(format!("a cell beyond the {cells} of a grid of {}", self.grid)));
        }
        let (groups, below) = self.hop(&t);
        let particles = t.cells.iter().map(|c| c.1.count).sum();
        Ok(Output::Halos(HaloOutput { grid: self.grid as u32, particles, outside: t.outside, below, groups }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{run_chunked, run_serial};
    use crate::pages::pack_records;

    fn particles(pts: &[[i32; 3]]) -> Vec<u8> {
        pts.iter().flat_map(|p| p.iter().flat_map(|v| v.to_le_bytes())).collect()
    }

    #[test]
    fn two_clumps_make_two_groups() {
        let layout = PageLayout::new(64).unwrap();
        // grid 4 over [0, 40): cells of 10; a dense clump at cell (0,0,0) spilling into (1,0,0), one at (3,3,3),
        // a lone particle in (2,0,3) under the threshold, one outside
        let mut pts = vec![[1, 1, 1]; 5];
        pts.extend([[12, 2, 3], [15, 5, 5], [35, 35, 35], [36, 36, 36], [31, 39, 30], [25, 1, 33], [40, 0, 0]]);
        let pages = pack_records(layout, &particles(&pts), PARTICLE_BYTES).unwrap();
        let k = HopKernel::new(&HopParams { grid: 4, lo: 0, hi: 40, threshold: 2 }, layout).unwrap();
        let r = run_chunked(&k, &pages, 1).unwrap();
        assert_eq!(r.output, run_serial(&k, &pages).unwrap().output);
        let Output::Halos(o) = r.output else { panic!("halos") };
        assert_eq!((o.particles, o.outside, o.below), (11, 1, 1));
        assert_eq!(o.groups.len(), 2);
        let (a, b) = (o.groups[0], o.groups[1]);
        assert_eq!((a.peak, a.peak_count, a.cells, a.particles), (0, 5, 2, 7));
        assert_eq!(a.sum, [5 + 27, 5 + 7, 5 + 8]);
        assert_eq!((b.peak, b.peak_count, b.cells, b.particles), (63, 3, 1, 3));
        let out = Output::Halos(o);
        assert_eq!(Output::decode(&out.encode()).unwrap(), out);
    }

    #[test]
    fn bad_parameters_and_partials_are_errors() {
        let layout = PageLayout::new(64).unwrap();
        let p = |grid, lo, hi, threshold| HopParams { grid, lo, hi, threshold };
        assert!(HopKernel::new(&p(0, 0, 10, 1), layout).is_err());
        assert!(HopKernel::new(&p(65, 0, 10, 1), layout).is_err());
        assert!(HopKernel::new(&p(4, 10, 10, 1), layout).is_err());
        assert!(HopKernel::new(&p(4, 0, 10, 0), layout).is_err());
        let k = HopKernel::new(&p(2, i32::MIN, i32::MAX, 1), layout).unwrap();
        let pages = pack_records(layout, &particles(&[[i32::MIN, 0, i32::MAX - 1]]), PARTICLE_BYTES).unwrap();
        let Output::Halos(o) = run_serial(&k, &pages).unwrap().output else { panic!() };
        assert_eq!((o.particles, o.groups[0].peak), (1, 0b011), "extreme coordinates land in corner cells");
        let far = CellTable { outside: 0, cells: vec![(8, Cell { count: 1, sum: [0; 3] })] };
        assert!(k.finish(Partial::Cells(far)).is_err());
        let mut bad = Partial::Cells(CellTable::default()).encode();
        bad.truncate(1);
        assert!(Partial::decode(&bad).is_err());
        // descending cell indices do not decode
        assert!(Partial::decode(&[9, 0, 2, 5, 1, 0, 0, 0, 0, 1, 0, 0, 0]).is_err());
    }
}
