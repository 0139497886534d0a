//! The DLG-x compiler's weight layout (Sec. 4.2, Fig. 5) in the reserved physical area: each kernel of S_k int8
//! bytes is cut into M sub-blocks of ceil(S_k / M) bytes, sub-block j on channel j, at the same page position on
//! every channel so that one address serves all M; a sub-block never straddles a page, and one larger than a page
//! takes contiguous pages of one block (streamed by the read-page-cache-sequential command). A layer's int32
//! biases follow its kernels as one more "kernel".

use crate::error::{CognitiveError, Result};
use crate::network::Layer;
use crate::quant::QModel;

/// The physical area the FTL never uses (per channel: `ways` x `blocks` blocks from `first_block`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReservedArea {
    pub channels: usize,
    pub ways: usize,
    pub first_block: usize,
    pub blocks: usize,
    pub pages_per_block: usize,
    pub page_size: usize,
}

/// A physical page: channel, way, block, page in block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PhysPage {
    pub channel: usize,
    pub way: usize,
    pub block: usize,
    pub page: usize,
}

impl ReservedArea {
    /// Pages per channel.
    pub fn pages_per_channel(&self) -> usize {
        self.ways * self.blocks * self.pages_per_block
    }
    /// The `i`-th page of a channel: blocks in order, ways interleaved per block.
    pub fn page(&self, channel: usize, i: usize) -> Result<PhysPage> {
        if channel >= self.channels || i >= self.pages_per_channel() {
            return Err(CognitiveError::NoSpace(format!(
                "page {i} of channel {channel}: the reserved area has {} pages on each of {} channels",
                self.pages_per_channel(),
                self.channels
            )));
        }
        let seq = i / self.pages_per_block;
        Ok(PhysPage { channel, way: seq % self.ways, block: self.first_block + seq / self.ways, page: i % self.pages_per_block })
    }
    /// Whether `p` lies inside the area.
    pub fn contains(&self, p: PhysPage) -> bool {
        p.channel < self.channels
            && p.way < self.ways
            && (self.first_block..self.first_block + self.blocks).contains(&p.block)
            && p.page < self.pages_per_block
    }
}

/// Where one kernel lies: page index (same on every channel), byte offset in that page, pages spanned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelPlace {
    pub page: usize,
    pub offset: usize,
    pub pages: usize,
}

/// One weighted layer's placement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerPlace {
    pub layer: String,
    pub kernel_bytes: usize,
    pub sub_block: usize,
    /// Output kernels, then the bias block.
    pub kernels: Vec<KernelPlace>,
}

impl LayerPlace {
    /// The bytes the layer holds on each channel, `[start, end)` counted from the channel's first weight page's
    /// first byte: the same span on every channel (sub-blocks sit at the same position). Eq. 3's weight bytes of the
    /// layer per channel, with the alignment gaps of the sub-blocks that did not fit the rest of a page.
    pub fn span(&self, area: &ReservedArea) -> (usize, usize) {
        let ps = area.page_size;
        // one int32 bias per output kernel, cut into M sub-blocks like a kernel
        let bias_sub = ((self.kernels.len() - 1) * 4).div_ceil(area.channels);
        let n = self.kernels.len();
        let end = |i: usize, k: &KernelPlace| k.page * ps + k.offset + if i + 1 == n { bias_sub } else { self.sub_block };
        let first = self.kernels[0];
        (first.page * ps + first.offset, self.kernels.iter().enumerate().map(|(i, k)| end(i, k)).max().unwrap_or(0))
    }
}

/// The whole model's placement: per-channel page index cursor after the last layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightLayout {
    pub area: ReservedArea,
    pub layers: Vec<LayerPlace>,
    pub pages_per_channel: usize,
}

/// Lays out kernels of `kernel_bytes` (count `n`) from page cursor `at` (page, offset).
fn place(area: &ReservedArea, at: &mut (usize, usize), bytes: usize, name: &str) -> Result<KernelPlace> {
    let m = area.channels;
    let sub = bytes.div_ceil(m);
    let ps = area.page_size;
    if sub <= ps {
        if at.1 + sub > ps {
            *at = (at.0 + 1, 0);
        }
        let k = KernelPlace { page: at.0, offset: at.1, pages: 1 };
        at.1 += sub;
        return Ok(k);
    }
    let pages = sub.div_ceil(ps);
    if pages > area.pages_per_block {
        return Err(CognitiveError::Unsupported {
            layer: name.into(),
            why: format!("a {sub}-byte sub-block needs {pages} pages, more than a block's {}", area.pages_per_block),
        });
    }
    let mut start = if at.1 == 0 { at.0 } else { at.0 + 1 };
    if start % area.pages_per_block + pages > area.pages_per_block {
        start = start.div_ceil(area.pages_per_block) * area.pages_per_block; // contiguous within one block
    }
    *at = (start + pages, 0);
    Ok(KernelPlace { page: start, offset: 0, pages })
}

impl WeightLayout {
    /// Plans the layout of `model`'s weighted body layers.
    pub fn plan(model: &QModel, area: ReservedArea) -> Result<WeightLayout> {
        if area.channels == 0 || area.page_size == 0 || area.pages_per_block == 0 {
            return Err(CognitiveError::invalid("area", "channels, page size and pages per block must be positive"));
        }
        let mut at = (0usize, 0usize);
        let mut layers = Vec::new();
        for (l, q) in model.network.body.iter().filter(|l| l.weight_shape().is_some()).zip(&model.layers) {
            let (wshape, _) = l.weight_shape().unwrap();
            let kb: usize = wshape[1..].iter().product();
            let mut kernels = (0..wshape[0]).map(|_| place(&area, &mut at, kb, &l.label())).collect::<Result<Vec<_>>>()?;
            kernels.push(place(&area, &mut at, q.bias.len() * 4, &l.label())?);
            layers.push(LayerPlace { layer: l.label(), kernel_bytes: kb, sub_block: kb.div_ceil(area.channels), kernels });
        }
        let used = if at.1 == 0 { at.0 } else { at.0 + 1 };
        if used > area.pages_per_channel() {
            return Err(CognitiveError::NoSpace(format!(
                "the weights need {used} pages per channel; the reserved area has {}",
                area.pages_per_channel()
            )));
        }
        Ok(WeightLayout { area, layers, pages_per_channel: used })
    }

    /// The bytes of every page, `[channel][page index]`.
    pub fn pages(&self, model: &QModel) -> Vec<Vec<Vec<u8>>> {
        let m = self.area.channels;
        let mut out = vec![vec![vec![0u8; self.area.page_size]; self.pages_per_channel]; m];
        for (lp, q) in self.layers.iter().zip(&model.layers) {
            let bias: Vec<u8> = q.bias.iter().flat_map(|b| b.to_le_bytes()).collect();
            for (k, kp) in lp.kernels.iter().enumerate() {
                let bytes: Vec<u8> = if k < lp.kernels.len() - 1 {
                    q.weight[k * lp.kernel_bytes..(k + 1) * lp.kernel_bytes].iter().map(|&w| w as u8).collect()
                } else {
                    bias.clone()
                };
                let sub = bytes.len().div_ceil(m);
                for (ch, chunk) in bytes.chunks(sub).enumerate() {
                    write_span(&mut out[ch], kp, chunk, self.area.page_size);
                }
            }
        }
        out
    }

    /// Reassembles kernel `k` of layer `li` (the bias block is `k = out_ch`) from page bytes, as DLG-x streams it.
    pub fn gather(&self, pages: &[Vec<Vec<u8>>], li: usize, k: usize, bytes: usize) -> Vec<u8> {
        let kp = self.layers[li].kernels[k];
        let sub = bytes.div_ceil(self.area.channels);
        let mut out = Vec::with_capacity(bytes);
        for ch in 0..self.area.channels {
            let take = sub.min(bytes - out.len());
            let mut span = Vec::new();
            for p in kp.page..kp.page + kp.pages {
                span.extend_from_slice(&pages[ch][p]);
            }
            out.extend_from_slice(&span[kp.offset..kp.offset + take]);
        }
        out
    }

    /// Physical pages of layer `li`'s weights on every channel (read order).
    pub fn layer_pages(&self, li: usize) -> Result<Vec<PhysPage>> {
        let ks = &self.layers[li].kernels;
        let (first, last) = (ks[0].page, ks.iter().map(|k| k.page + k.pages).max().unwrap());
        let mut v = Vec::new();
        for i in first..last {
            for ch in 0..self.area.channels {
                v.push(self.area.page(ch, i)?);
            }
        }
        Ok(v)
    }
}

fn write_span(pages: &mut [Vec<u8>], kp: &KernelPlace, data: &[u8], ps: usize) {
    let start = kp.page * ps + kp.offset;
    for (i, &b) in data.iter().enumerate() {
        let pos = start + i;
        pages[pos / ps][pos % ps] = b;
    }
}

/// Layers the compiler maps (names the first it cannot).
pub fn check_mappable(layers: &[Layer]) -> Result<()> {
    for l in layers {
        if let Layer::Conv { kernel, stride, .. } = l {
            if *kernel > 15 || *stride > 15 {
                return Err(CognitiveError::Unsupported { layer: l.label(), why: "kernel and stride up to 15 (4-bit instruction fields)".into() });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Model;
    use crate::network::{fashion_hash_cnn, hash_alexnet};

    fn area(channels: usize) -> ReservedArea {
        ReservedArea { channels, ways: 8, first_block: 1000, blocks: 24, pages_per_block: 256, page_size: 16384 }
    }

    #[test]
    fn kernels_roundtrip_through_pages() {
        let m = Model::random(fashion_hash_cnn(48), 2).unwrap();
        let q = QModel::quantise(&m, &[&[128u8; 784]]).unwrap();
        let wl = WeightLayout::plan(&q, area(8)).unwrap();
        let pages = wl.pages(&q);
        for (li, lp) in wl.layers.iter().enumerate() {
            for k in [0, lp.kernels.len() - 2] {
                let got = wl.gather(&pages, li, k, lp.kernel_bytes);
                let want: Vec<u8> = q.layers[li].weight[k * lp.kernel_bytes..(k + 1) * lp.kernel_bytes].iter().map(|&w| w as u8).collect();
                assert_eq!(got, want, "{} kernel {k}", lp.layer);
            }
            let bias = wl.gather(&pages, li, lp.kernels.len() - 1, q.layers[li].bias.len() * 4);
            assert_eq!(bias, q.layers[li].bias.iter().flat_map(|b| b.to_le_bytes()).collect::<Vec<u8>>());
            // sub-blocks of S_k / M: conv2 kernel is 400 B -> 50 B per channel
            if lp.layer == "conv2" {
                assert_eq!(lp.sub_block, 50);
            }
        }
        assert!(wl.layer_pages(0).unwrap().iter().all(|p| wl.area.contains(*p)));
        // the layers' spans follow each other and hold every kernel and bias sub-block (Eq. 3's bytes per channel)
        let mut at = 0;
        for (lp, q) in wl.layers.iter().zip(&q.layers) {
            assert_eq!(q.bias.len(), lp.kernels.len() - 1, "{}: one bias per kernel", lp.layer);
            let (start, end) = lp.span(&wl.area);
            assert!(start >= at, "{}: {start} after the previous layer's end {at}", lp.layer);
            let bytes = (q.weight.len() / lp.kernel_bytes) * lp.sub_block + (q.bias.len() * 4).div_ceil(8);
            assert!(end - start >= bytes && end - start < bytes + wl.area.page_size, "{}: {start}..{end} holds {bytes} B", lp.layer);
            at = end;
        }
        // nothing of the model lies outside the spans: zero every byte outside them and the kernels still gather
        let mut pages = wl.pages(&q);
        for ch in pages.iter_mut() {
            let flat: Vec<bool> = (0..wl.pages_per_channel * wl.area.page_size)
                .map(|b| wl.layers.iter().any(|lp| (lp.span(&wl.area).0..lp.span(&wl.area).1).contains(&b)))
                .collect();
            for (p, page) in ch.iter_mut().enumerate() {
                for (i, byte) in page.iter_mut().enumerate() {
                    if !flat[p * wl.area.page_size + i] {
                        *byte = 0;
                    }
                }
            }
        }
        assert_eq!(crate::package::gather_tensors(&wl, &q, &pages), crate::package::gather_tensors(&wl, &q, &wl.pages(&q)));
    }

    #[test]
    fn big_kernels_take_contiguous_pages_in_one_block() {
        use crate::network::{Layer, Network};
        let net = Network {
            input: [1, 200, 200],
            body: vec![Layer::Flatten, Layer::Fc { name: "wide".into(), inputs: 40_000, outputs: 9 }],
            classifier: None,
        };
        let m = Model::random(net, 2).unwrap();
        let q = QModel::quantise(&m, &[&vec![100u8; 40_000]]).unwrap();
        let small = ReservedArea { channels: 1, ways: 1, blocks: 5, pages_per_block: 8, ..area(1) };
        let wl = WeightLayout::plan(&q, small).unwrap();
        let ks = &wl.layers[0].kernels;
        assert_eq!(ks[0].pages, 3); // 40000 B on one channel = 3 pages of 16 KiB
        for k in &ks[..9] {
            assert!(k.page % 8 + k.pages <= 8, "within one block: {k:?}");
        }
        assert_eq!(wl.gather(&wl.pages(&q), 0, 4, 40_000), q.layers[0].weight[4 * 40_000..5 * 40_000].iter().map(|&w| w as u8).collect::<Vec<_>>());
        // nine 3-page kernels take 5 blocks of 8 pages (2 per block): 1 block is too few
        assert!(WeightLayout::plan(&q, ReservedArea { blocks: 1, ..small }).is_err());
        // a 3-page sub-block does not fit a 2-page block
        assert!(WeightLayout::plan(&q, ReservedArea { pages_per_block: 2, ..small }).is_err());
        let _ = hash_alexnet(48);
    }
}
