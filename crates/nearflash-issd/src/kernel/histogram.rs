//! histogram (Phoenix, Table 1): the byte-value histogram of each colour channel of an RGB bitmap. Input records
//! are 3-byte pixels `[r, g, b]` packed whole into pages; the answer is 3 x 256 counts.

use super::partial::Mergeable;
use super::{Chunk, Kernel, Output, Partial};
use crate::codec::{varint_len, Body, Reader, Writer};
use crate::error::Result;
use crate::pages::PageLayout;
use serde::{Deserialize, Serialize};

/// Bytes per pixel record.
pub const PIXEL_BYTES: usize = 3;

/// Parameters of `histogram` (none).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistogramParams {}

/// Counts per channel (r, g, b) and byte value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Histogram(pub Box<[[u64; 256]; 3]>);

impl Default for Histogram {
    fn default() -> Self {
        Self(Box::new([[0; 256]; 3]))
    }
}

impl Histogram {
    /// Pixels counted.
    pub fn pixels(&self) -> u64 {
        self.0[0].iter().sum()
    }

    fn add_pixels(&mut self, payload: &[u8]) {
        let [r, g, b] = &mut *self.0;
        for px in payload.chunks_exact(PIXEL_BYTES) {
            r[px[0] as usize] += 1;
            g[px[1] as usize] += 1;
            b[px[2] as usize] += 1;
        }
    }
}

impl Mergeable for Histogram {
    fn merge(&mut self, other: Self) -> Result<()> {
        for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
        }
        Ok(())
    }
}

impl Body for Histogram {
    fn body_len(&self) -> usize {
        self.0.iter().flatten().map(|&c| varint_len(c)).sum()
    }
    fn encode_body(&self, w: &mut Writer) {
        self.0.iter().flatten().for_each(|&c| w.varint(c));
    }
    fn decode_body(r: &mut Reader<'_>) -> Result<Self> {
        let mut h = Histogram::default();
        for c in h.0.iter_mut().flatten() {
            *c = r.varint()?;
        }
        Ok(h)
    }
}

/// RGB histogram over pixel pages.
#[derive(Debug, Clone)]
pub struct HistogramKernel {
    layout: PageLayout,
}

impl HistogramKernel {
    pub fn new(_params: &HistogramParams, layout: PageLayout) -> Result<Self> {
        layout.records_per_page(PIXEL_BYTES)?;
        Ok(Self { layout })
    }
}

impl Kernel for HistogramKernel {
    fn name(&self) -> &str {
        "histogram"
    }
    fn layout(&self) -> PageLayout {
        self.layout
    }
    fn empty(&self) -> Partial {
        Partial::Histogram(Histogram::default())
    }
    fn map(&self, chunk: Chunk<'_>) -> Result<Partial> {
        let mut h = Histogram::default();
        for payload in self.layout.record_payloads(chunk.bytes, PIXEL_BYTES)? {
            h.add_pixels(payload?);
        }
        Ok(Partial::Histogram(h))
    }
    fn finish(&self, p: Partial) -> Result<Output> {
        match p {
            Partial::Histogram(h) => Ok(Output::Histogram(h)),
            other => Err(other.wrong_kind(self.name())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::run_serial;
    use crate::pages::pack_records;

    #[test]
    fn counts_each_channel() {
        let layout = PageLayout::new(64).unwrap();
        let pixels = [1u8, 2, 3, 1, 200, 3, 255, 2, 0];
        let pages = pack_records(layout, &pixels, PIXEL_BYTES).unwrap();
        let k = HistogramKernel::new(&HistogramParams {}, layout).unwrap();
        let Output::Histogram(h) = run_serial(&k, &pages).unwrap().output else { panic!("histogram") };
        assert_eq!(h.pixels(), 3);
        assert_eq!((h.0[0][1], h.0[0][255]), (2, 1));
        assert_eq!((h.0[1][2], h.0[1][200]), (2, 1));
        assert_eq!((h.0[2][3], h.0[2][0]), (2, 1));
        let p = Partial::Histogram(h);
        assert_eq!(Partial::decode(&p.encode()).unwrap(), p);
        assert_eq!(p.encode().len(), 769, "768 zero or small counts take one byte each");
    }
}
