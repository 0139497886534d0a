//! The index file: a fixed header (magic, format version, kind, metric, dtype, dim, R, ef_construction, alpha,
//! seed, vector count, entry vertex and its level, layer-0 row capacity), the vectors, the layer-0 rows, the upper
//! rows, (version 2) the labels - the next label, a flag, and one i64 per vector where they are not the vertex
//! ids - and a CRC-32 of all that. Version 1 files (no labels) are still read. Loading checks the checksum first and then every count and id against the
//! header before it allocates, so a damaged or hostile file gives an error, never a panic or a huge allocation.
//! Saving writes a temporary file and renames it, so a crash leaves the old file or the new one.

use std::io::Write;
use std::path::Path;
use std::sync::{Mutex, RwLock};

use crate::distance::{Dtype, Metric, Rows};
use crate::graph::Adjacency;
use crate::index::{Index, Kind, Params};
use crate::NdError;

pub const MAGIC: &[u8; 8] = b"NFNDSIDX";
pub const VERSION: u32 = 2;
/// The oldest version this build reads (version 1: no labels section).
pub const OLDEST: u32 = 1;
const HEADER: usize = 8 + 4 + 4 + 4 * 3 + 4 + 8 + 8 + 4 + 4 + 4;
const NO_ENTRY: u32 = u32::MAX;

impl Index {
    /// The index as bytes in the file format.
    pub fn to_bytes(&self) -> Vec<u8> {
        let p = &self.p;
        let entry = *self.entry.read().unwrap();
        let mut b = Vec::with_capacity(HEADER + self.rows.len() * p.dtype.bytes() + self.layer0.len() * 4 * (p.layer0_cap() + 1));
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.extend_from_slice(&[p.kind as u8, p.metric.code(), p.dtype.code(), 0]);
        for v in [p.dim, p.r, p.ef_construction] {
            b.extend_from_slice(&(v as u32).to_le_bytes());
        }
        b.extend_from_slice(&p.alpha.to_le_bytes());
        b.extend_from_slice(&p.seed.to_le_bytes());
        b.extend_from_slice(&(self.len() as u64).to_le_bytes());
        b.extend_from_slice(&entry.map_or(NO_ENTRY, |e| e.0).to_le_bytes());
        b.extend_from_slice(&(entry.map_or(0, |e| e.1) as u32).to_le_bytes());
        b.extend_from_slice(&(p.layer0_cap() as u32).to_le_bytes());
        b.extend_from_slice(&self.rows.to_bytes());
        let cap = p.layer0_cap();
        for v in 0..self.len() as u32 {
            let row = self.layer0.neighbours(v);
            b.extend_from_slice(&(row.len() as u32).to_le_bytes());
            for i in 0..cap {
                b.extend_from_slice(&row.get(i).copied().unwrap_or(0).to_le_bytes());
            }
        }
        for u in &self.upper {
            let levels = u.lock().unwrap();
            b.push(levels.len() as u8);
            for row in levels.iter() {
                b.extend_from_slice(&(row.len() as u32).to_le_bytes());
                row.iter().for_each(|x| b.extend_from_slice(&x.to_le_bytes()));
            }
        }
        b.extend_from_slice(&self.next_label.to_le_bytes());
        match &self.labels {
            None => b.push(0),
            Some(l) => {
                b.push(1);
                l.iter().for_each(|x| b.extend_from_slice(&x.to_le_bytes()));
            }
        }
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// Writes the index to `path` (through a temporary file and a rename).
    pub fn save(&self, path: &Path) -> Result<(), NdError> {
        let tmp = path.with_extension("tmp-save");
        {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&self.to_bytes())?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, path)?;
        Ok(())
    }

    /// Reads an index written by `save`.
    pub fn load(path: &Path) -> Result<Index, NdError> {
        Index::from_bytes(&std::fs::read(path)?)
    }

    /// Parses the file format; every inconsistency is an `NdError::Format`.
    pub fn from_bytes(b: &[u8]) -> Result<Index, NdError> {
        let bad = |m: &str| NdError::Format(m.to_string());
        if b.len() < HEADER + 4 || &b[..8] != MAGIC {
            return Err(bad("not a nearflash ndsearch index (bad magic or shorter than the header)"));
        }
        let (body, crc) = b.split_at(b.len() - 4);
        if crc32fast::hash(body) != u32::from_le_bytes(crc.try_into().unwrap()) {
            return Err(bad("checksum mismatch: the file is damaged or truncated"));
        }
        let mut r = Reader { b: body, at: 8 };
        let version = r.u32()?;
        if !(OLDEST..=VERSION).contains(&version) {
            return Err(NdError::Format(format!("format version {version}, this build reads {OLDEST}..={VERSION}")));
        }
        let codes = r.take(4)?;
        let kind = [Kind::Hnsw, Kind::Vamana].get(codes[0] as usize).copied().ok_or_else(|| bad("unknown kind"))?;
        let metric = Metric::from_code(codes[1]).ok_or_else(|| bad("unknown metric"))?;
        let dtype = Dtype::from_code(codes[2]).ok_or_else(|| bad("unknown dtype"))?;
        let (dim, rr, efc) = (r.u32()? as usize, r.u32()? as usize, r.u32()? as usize);
        let alpha = f32::from_bits(r.u32()?);
        let seed = r.u64()?;
        let p = Params { kind, metric, dtype, dim, r: rr, ef_construction: efc, alpha, seed };
        p.validate().map_err(|e| NdError::Format(format!("header: {e}")))?;
        let n = r.u64()?;
        let (entry, top, cap) = (r.u32()?, r.u32()? as usize, r.u32()? as usize);
        if cap != p.layer0_cap() {
            return Err(bad("layer-0 row capacity disagrees with kind and R"));
        }
        let n = usize::try_from(n).ok().filter(|&n| n < u32::MAX as usize).ok_or_else(|| bad("vector count too large"))?;
        let vec_bytes = n.checked_mul(dim).and_then(|x| x.checked_mul(dtype.bytes())).ok_or_else(|| bad("size overflow"))?;
        let row_bytes = n.checked_mul(4 * (cap + 1)).ok_or_else(|| bad("size overflow"))?;
        if r.left() < vec_bytes.saturating_add(row_bytes).saturating_add(n) {
            return Err(bad("the file is shorter than its header says"));
        }
        let rows = Rows::from_bytes(dtype, r.take(vec_bytes)?);
        if let Rows::F32(v) = &rows {
            if v.iter().any(|x| !x.is_finite()) {
                return Err(bad("a stored vector holds NaN or infinity"));
            }
        }
        let mut layer0 = Adjacency::new(cap);
        layer0.resize(n);
        let mut ids = Vec::with_capacity(cap);
        for v in 0..n as u32 {
            let count = r.u32()? as usize;
            if count > cap {
                return Err(bad("a layer-0 row is longer than its capacity"));
            }
            ids.clear();
            for i in 0..cap {
                let id = r.u32()?;
                if i < count {
                    if id as usize >= n {
                        return Err(bad("a neighbour id is out of range"));
                    }
                    ids.push(id);
                }
            }
            layer0.set(v, &ids);
        }
        let mut levels: Vec<Vec<Vec<u32>>> = Vec::with_capacity(n);
        for _ in 0..n {
            let nl = r.take(1)?[0] as usize;
            if nl > 16 || (kind == Kind::Vamana && nl > 0) {
                return Err(bad("a vertex has an impossible number of upper levels"));
            }
            let mut lv = Vec::with_capacity(nl);
            for _ in 0..nl {
                let count = r.u32()? as usize;
                if count > p.r {
                    return Err(bad("an upper row is longer than R"));
                }
                let row = (0..count).map(|_| r.u32()).collect::<Result<Vec<u32>, _>>()?;
                lv.push(row);
            }
            levels.push(lv);
        }
        let (next_label, labels) = if version >= 2 {
            let next = r.u64()? as i64;
            let labels = match r.take(1)?[0] {
                0 => None,
                1 => {
                    if r.left() < n.saturating_mul(8) {
                        return Err(bad("the file is shorter than its labels"));
                    }
                    Some((0..n).map(|_| r.u64().map(|x| x as i64)).collect::<Result<Vec<i64>, _>>()?)
                }
                _ => return Err(bad("unknown labels flag")),
            };
            (next, labels)
        } else {
            (n as i64, None)
        };
        match &labels {
            None if next_label < n as i64 => return Err(bad("the next label is below the vector count")),
            Some(l) => {
                let mut seen = std::collections::HashSet::with_capacity(l.len());
                if l.iter().any(|&x| x < 0 || x >= next_label || !seen.insert(x)) {
                    return Err(bad("a label is negative, repeated or not below the next label"));
                }
            }
            None => {}
        }
        if r.left() != 0 {
            return Err(bad("trailing bytes after the graph"));
        }
        // An upper row may only point at vertices that live on that level.
        for lv in &levels {
            for (l, row) in lv.iter().enumerate() {
                if row.iter().any(|&u| u as usize >= n || levels[u as usize].len() <= l) {
                    return Err(bad("an upper-level neighbour is out of range or not on that level"));
                }
            }
        }
        let entry = match (entry, n) {
            (NO_ENTRY, 0) => None,
            (e, _) if (e as usize) < n => {
                let want = if kind == Kind::Hnsw { levels[e as usize].len() } else { 0 };
                if top != want {
                    return Err(bad("the entry vertex's level disagrees with its rows"));
                }
                Some((e, top))
            }
            _ => return Err(bad("the entry vertex is out of range")),
        };
        Ok(Index {
            p,
            rows,
            layer0,
            upper: levels.into_iter().map(Mutex::new).collect(),
            entry: RwLock::new(entry),
            labels,
            next_label,
            generation: 0,
        })
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], NdError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len());
        let end = end.ok_or_else(|| NdError::Format("the file ends early".into()))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, NdError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64, NdError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn left(&self) -> usize {
        self.b.len() - self.at
    }
}
