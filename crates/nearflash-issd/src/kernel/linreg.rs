//! linear_regression (Phoenix, Table 1): least-squares line through (x, y) points. Input records are 2-byte points
//! `[x: u8, y: u8]` (Phoenix's `POINT_T` of two chars, unsigned here). Map sums n, Σx, Σy, Σx², Σy², Σxy exactly
//! in integers, so the answer is the same in any chunking; finish computes, as Phoenix,
//! `slope = (n Σxy - Σx Σy) / (n Σx² - (Σx)²)` and `intercept = (Σy - slope Σx) / n`.

use super::partial::Mergeable;
use super::{Chunk, Kernel, Output, Partial};
use crate::codec::{varint_len, Body, Reader, Writer};
use crate::error::{IssdError, Result};
use crate::pages::PageLayout;
use serde::{Deserialize, Serialize};

/// Bytes per point record.
pub const POINT_BYTES: usize = 2;

/// Parameters of `linear_regression` (none).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinearRegressionParams {}

/// The sufficient statistics of a least-squares fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RegressionSums {
    pub n: u64,
    pub sx: u64,
    pub sy: u64,
    pub sxx: u64,
    pub syy: u64,
    pub sxy: u64,
}

impl RegressionSums {
    fn fields(&self) -> [u64; 6] {
        [self.n, self.sx, self.sy, self.sxx, self.syy, self.sxy]
    }

    fn add_points(&mut self, payload: &[u8]) {
        // local accumulators keep the loop free of stores through self, so it vectorises
        let (mut sx, mut sy, mut sxx, mut syy, mut sxy) = (0u64, 0u64, 0u64, 0u64, 0u64);
        for p in payload.chunks_exact(POINT_BYTES) {
            let (x, y) = (u64::from(p[0]), u64::from(p[1]));
            sx += x;
            sy += y;
            sxx += x * x;
            syy += y * y;
            sxy += x * y;
        }
        self.n += (payload.len() / POINT_BYTES) as u64;
        self.sx += sx;
        self.sy += sy;
        self.sxx += sxx;
        self.syy += syy;
        self.sxy += sxy;
    }

    /// (slope, intercept); `None` when undefined (no points, or every x equal).
    pub fn fit(&self) -> Option<(f64, f64)> {
        let n = i128::from(self.n);
        let (sx, sy) = (i128::from(self.sx), i128::from(self.sy));
        let den = n * i128::from(self.sxx) - sx * sx;
        if n == 0 || den == 0 {
            return None;
        }
        let slope = (n * i128::from(self.sxy) - sx * sy) as f64 / den as f64;
        Some((slope, (sy as f64 - slope * sx as f64) / n as f64))
    }
}

impl Mergeable for RegressionSums {
    fn merge(&mut self, o: Self) -> Result<()> {
        self.n += o.n;
        self.sx += o.sx;
        self.sy += o.sy;
        self.sxx += o.sxx;
        self.syy += o.syy;
        self.sxy += o.sxy;
        Ok(())
    }
}

impl Body for RegressionSums {
    fn body_len(&self) -> usize {
        self.fields().iter().map(|&v| varint_len(v)).sum()
    }
    fn encode_body(&self, w: &mut Writer) {
        self.fields().iter().for_each(|&v| w.varint(v));
    }
    fn decode_body(r: &mut Reader<'_>) -> Result<Self> {
        Ok(Self {
            n: r.varint()?,
            sx: r.varint()?,
            sy: r.varint()?,
            sxx: r.varint()?,
            syy: r.varint()?,
            sxy: r.varint()?,
        })
    }
}

/// The fitted line and the sums behind it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RegressionOutput {
    pub sums: RegressionSums,
    pub slope: Option<f64>,
    pub intercept: Option<f64>,
}

impl Body for RegressionOutput {
    fn body_len(&self) -> usize {
        self.sums.body_len() + 1 + if self.slope.is_some() { 16 } else { 0 }
    }
    fn encode_body(&self, w: &mut Writer) {
        self.sums.encode_body(w);
        match (self.slope, self.intercept) {
            (Some(s), Some(i)) => {
                w.u8(1);
                w.f64(s);
                w.f64(i);
            }
            _ => w.u8(0),
        }
    }
    fn decode_body(r: &mut Reader<'_>) -> Result<Self> {
        let sums = RegressionSums::decode_body(r)?;
        let (slope, intercept) = match r.u8()? {
            0 => (None, None),
            1 => (Some(r.f64()?), Some(r.f64()?)),
            f => return Err(IssdError::Decode(format!("bad fit flag {f}"))),
        };
        Ok(Self { sums, slope, intercept })
    }
}

/// Least-squares fit over point pages.
#[derive(Debug, Clone)]
pub struct LinearRegressionKernel {
    layout: PageLayout,
}

impl LinearRegressionKernel {
    pub fn new(_params: &LinearRegressionParams, layout: PageLayout) -> Result<Self> {
        layout.records_per_page(POINT_BYTES)?;
        Ok(Self { layout })
    }
}

impl Kernel for LinearRegressionKernel {
    fn name(&self) -> &str {
        "linear_regression"
    }
    fn layout(&self) -> PageLayout {
        self.layout
    }
    fn empty(&self) -> Partial {
        Partial::Regression(RegressionSums::default())
    }
    fn map(&self, chunk: Chunk<'_>) -> Result<Partial> {
        let mut s = RegressionSums::default();
        for payload in self.layout.record_payloads(chunk.bytes, POINT_BYTES)? {
            s.add_points(payload?);
        }
        Ok(Partial::Regression(s))
    }
    fn finish(&self, p: Partial) -> Result<Output> {
        let Partial::Regression(sums) = p else {
            return Err(p.wrong_kind(self.name()));
        };
        let fit = sums.fit();
        Ok(Output::Regression(RegressionOutput { sums, slope: fit.map(|f| f.0), intercept: fit.map(|f| f.1) }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::run_serial;
    use crate::pages::pack_records;

    #[test]
    fn recovers_an_exact_line() {
        let layout = PageLayout::new(64).unwrap();
        let pts: Vec<u8> = (0u8..100).flat_map(|x| [x, 2 * x + 7]).collect();
        let pages = pack_records(layout, &pts, POINT_BYTES).unwrap();
        let k = LinearRegressionKernel::new(&LinearRegressionParams {}, layout).unwrap();
        let Output::Regression(o) = run_serial(&k, &pages).unwrap().output else { panic!("regression") };
        assert_eq!(o.sums.n, 100);
        assert_eq!(o.sums.sx, 4950);
        assert!((o.slope.unwrap() - 2.0).abs() < 1e-12);
        assert!((o.intercept.unwrap() - 7.0).abs() < 1e-9);
        let out = Output::Regression(o);
        assert_eq!(Output::decode(&out.encode()).unwrap(), out);
    }

    #[test]
    fn a_vertical_cloud_has_no_fit() {
        let s = RegressionSums { n: 3, sx: 15, sy: 6, sxx: 75, syy: 14, sxy: 30 };
        assert_eq!(s.fit(), None);
        assert_eq!(RegressionSums::default().fit(), None);
    }
}
