//! What the DLG-x compiler hands `DLG_config`: two payloads, both untrusted bytes to the firmware.
//!
//! * Model (`DLG_config` DW12 = 1): `"DLGM" | version u32 | json_len u32 | json | pages u32 | pages x S_page`. The
//!   JSON ([`ModelDescriptor`]) holds the layer list, the per-layer int8 scales and requantisation constants, and
//!   the float classifier head that `DLG_analysis` applies; the pages are the weight layout's (Fig. 5), channel by
//!   channel, for the data area of this device ([`DlgArea`]).
//! * Instructions (DW12 = 0): `"DLGI" | version u32 | json_len u32 | json | count u32 | count x 32 B | pages u32 |
//!   pages x S_page`. The JSON ([`GraphDescriptor`], or `null`) describes the K-NN graph (layout, size, entry
//!   vertices, seed); the instructions embed the weights' physical addresses; the pages are the graph's, in order.
//!
//! Little-endian throughout. Decoding checks every length and field; nothing is trusted to be in range.

use crate::area::DlgArea;
use crate::error::{CognitiveError, Result};
use crate::graph_pages::{Entry, GraphLayout, GraphPages, PageFormat};
use crate::instr::{self, Instr, INSTR_BYTES};
use crate::knn::KnnGraph;
use crate::model::Weights;
use crate::network::{Layer, Network};
use crate::quant::{QModel, QWeights};
use crate::weight_layout::{check_mappable, WeightLayout};
use serde::{Deserialize, Serialize};

pub const MODEL_MAGIC: &[u8; 4] = b"DLGM";
pub const INSTR_MAGIC: &[u8; 4] = b"DLGI";
pub const VERSION: u32 = 1;
/// Largest activation (elements) and weight tensor a descriptor may declare: far above any model DLG-x's 256 KB
/// buffers serve, and small enough that a hostile layer list cannot make the firmware allocate gigabytes.
const MAX_ELEMENTS: usize = 1 << 24;

/// Int8 constants of one weighted body layer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LayerScales {
    pub w_scale: f32,
    pub in_scale: f32,
    pub out_scale: f32,
    pub mult: i32,
    pub shift: u32,
}

/// The classifier head `DLG_analysis` runs on the hash layer's sigmoid: `[classes, bits]` weights and biases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Head {
    pub weight: Vec<f32>,
    pub bias: Vec<f32>,
}

/// The model's description (everything but the int8 weights, which are in the pages).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelDescriptor {
    pub network: Network,
    pub input_scale: f32,
    pub layers: Vec<LayerScales>,
    pub head: Option<Head>,
}

/// The graph's description.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GraphDescriptor {
    pub layout: String,
    pub vertices: usize,
    pub k: usize,
    pub bits: u32,
    /// Seed of the GSE's fallback random draws (query j of a session at address A uses seed + A + j).
    pub seed: u64,
    /// Entry vertices (id, code), loaded into the GSE's registers.
    pub entries: Vec<(u32, u64)>,
}

fn bad(what: &str, why: impl Into<String>) -> CognitiveError {
    CognitiveError::bad_file(what, why)
}

/// A little-endian reader over untrusted bytes.
struct Reader<'a> {
    b: &'a [u8],
    what: &'static str,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.b.len() < n {
            return Err(bad(self.what, format!("truncated: {n} more bytes expected, {} left", self.b.len())));
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }
    fn header(&mut self, magic: &[u8; 4]) -> Result<&'a [u8]> {
        if self.take(4)? != magic {
            return Err(bad(self.what, format!("magic is not {:?}", String::from_utf8_lossy(magic))));
        }
        let v = self.u32()?;
        if v != VERSION {
            return Err(bad(self.what, format!("version {v}; {VERSION} supported")));
        }
        let n = self.u32()? as usize;
        self.take(n)
    }
    /// `count` then `count` items of `size` bytes.
    fn items(&mut self, size: usize) -> Result<Vec<&'a [u8]>> {
        let n = self.u32()? as usize;
        if n.checked_mul(size).is_none_or(|t| t > self.b.len()) {
            return Err(bad(self.what, format!("{n} items of {size} B; only {} bytes left", self.b.len())));
        }
        (0..n).map(|_| self.take(size)).collect()
    }
    fn end(&self) -> Result<()> {
        if !self.b.is_empty() {
            return Err(bad(self.what, format!("{} trailing bytes", self.b.len())));
        }
        Ok(())
    }
}

fn frame(magic: &[u8; 4], json: &[u8], sections: &[(usize, &[u8])]) -> Vec<u8> {
    let mut out = Vec::with_capacity(12 + json.len() + sections.iter().map(|s| 4 + s.1.len()).sum::<usize>());
    out.extend_from_slice(magic);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(json);
    for (count, bytes) in sections {
        out.extend_from_slice(&(*count as u32).to_le_bytes());
        out.extend_from_slice(bytes);
    }
    out
}

impl ModelDescriptor {
    /// The descriptor of an int8 model and the float head of its classifier (if it has one).
    pub fn of(q: &QModel, head: Option<&Weights>) -> ModelDescriptor {
        ModelDescriptor {
            network: q.network.clone(),
            input_scale: q.input_scale,
            layers: q
                .layers
                .iter()
                .map(|l| LayerScales { w_scale: l.w_scale, in_scale: l.in_scale, out_scale: l.out_scale, mult: l.mult, shift: l.shift })
                .collect(),
            head: head.map(|w| Head { weight: w.weight.clone(), bias: w.bias.clone() }),
        }
    }

    /// Checks the layer list and constants the firmware will run.
    pub fn validate(&self) -> Result<()> {
        let what = "model descriptor";
        let net = &self.network;
        let shapes = net.shapes().map_err(|e| bad(what, e.to_string()))?;
        if shapes.iter().any(|s| s.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).is_none_or(|n| n > MAX_ELEMENTS || n == 0)) {
            return Err(bad(what, format!("an activation is empty or above {MAX_ELEMENTS} elements")));
        }
        check_mappable(&net.body)?;
        if !matches!(net.body.last(), Some(Layer::Fc { .. })) {
            return Err(bad(what, "the body must end with the FC hash layer"));
        }
        let bits = net.bits()?;
        if !(1..=64).contains(&bits) {
            return Err(bad(what, format!("a {bits}-bit hash layer; 1 to 64 bits allowed")));
        }
        let weighted: Vec<_> = net.body.iter().filter_map(|l| l.weight_shape()).collect();
        if weighted.len() != self.layers.len() {
            return Err(bad(what, format!("{} weighted layers but {} sets of scales", weighted.len(), self.layers.len())));
        }
        if weighted.iter().any(|(w, _)| w.iter().product::<usize>() > MAX_ELEMENTS) {
            return Err(bad(what, format!("a weight tensor is above {MAX_ELEMENTS} elements")));
        }
        let pos = |v: f32| v.is_finite() && v > 0.0;
        if !pos(self.input_scale) {
            return Err(bad(what, "input_scale must be finite and positive"));
        }
        for (i, l) in self.layers.iter().enumerate() {
            if !(pos(l.w_scale) && pos(l.in_scale) && pos(l.out_scale)) || l.mult <= 0 || !(31..=62).contains(&l.shift) {
                return Err(bad(what, format!("layer {i}: scales must be positive, mult positive, shift 31 to 62")));
            }
        }
        match (&self.head, &net.classifier) {
            (Some(h), Some(Layer::Fc { inputs, outputs, .. })) => {
                if *inputs != bits || h.weight.len() != inputs * outputs || h.bias.len() != *outputs {
                    return Err(bad(what, format!("the head must be {outputs} x {bits} weights and {outputs} biases")));
                }
                if h.weight.iter().chain(&h.bias).any(|v| !v.is_finite()) {
                    return Err(bad(what, "the head holds a non-finite value"));
                }
            }
            (Some(_), _) => return Err(bad(what, "a head is given but the network has no FC classifier")),
            (None, _) => {}
        }
        Ok(())
    }

    /// The int8 model with the given int8 weights and biases per weighted layer (empty: a skeleton whose biases are
    /// zero-filled to their lengths, enough to plan the layout and compile instructions).
    pub fn qmodel(&self, tensors: Option<Vec<(Vec<i8>, Vec<i32>)>>) -> QModel {
        let outs: Vec<usize> = self.network.body.iter().filter_map(|l| l.weight_shape()).map(|(w, _)| w[0]).collect();
        let mut tensors = tensors.map(|t| t.into_iter());
        let layers = self
            .layers
            .iter()
            .zip(outs)
            .map(|(s, out)| {
                let (weight, bias) = tensors.as_mut().and_then(|t| t.next()).unwrap_or_else(|| (Vec::new(), vec![0; out]));
                QWeights { weight, bias, w_scale: s.w_scale, in_scale: s.in_scale, out_scale: s.out_scale, mult: s.mult, shift: s.shift }
            })
            .collect();
        QModel { network: self.network.clone(), input_scale: self.input_scale, layers }
    }
}

/// A decoded model payload.
#[derive(Debug, Clone)]
pub struct ModelPayload {
    pub descriptor: ModelDescriptor,
    /// Weight pages `[channel][page index]`.
    pub pages: Vec<Vec<Vec<u8>>>,
    pub layout: WeightLayout,
}

/// Encodes the model payload for `area`.
pub fn encode_model(q: &QModel, head: Option<&Weights>, area: &DlgArea) -> Result<Vec<u8>> {
    let layout = WeightLayout::plan(q, area.data_area())?;
    let d = ModelDescriptor::of(q, head);
    d.validate()?;
    let json = serde_json::to_vec(&d).expect("plain data serialises");
    let pages: Vec<u8> = layout.pages(q).into_iter().flatten().flatten().collect();
    let count = layout.pages_per_channel * layout.area.channels;
    Ok(frame(MODEL_MAGIC, &json, &[(count, &pages)]))
}

/// Decodes and checks a model payload against this device's area.
pub fn decode_model(bytes: &[u8], area: &DlgArea) -> Result<ModelPayload> {
    let mut r = Reader { b: bytes, what: "DLG_config model payload" };
    let json = r.header(MODEL_MAGIC)?;
    let descriptor: ModelDescriptor = serde_json::from_slice(json).map_err(|e| bad(r.what, format!("descriptor: {e}")))?;
    descriptor.validate()?;
    let layout = WeightLayout::plan(&descriptor.qmodel(None), area.data_area())?;
    let ps = area.geo.page_size as usize;
    let flat = r.items(ps)?;
    r.end()?;
    let want = layout.pages_per_channel * layout.area.channels;
    if flat.len() != want {
        return Err(bad(r.what, format!("{} weight pages; the layout of this model on this device has {want}", flat.len())));
    }
    let pages = flat.chunks(layout.pages_per_channel.max(1)).map(|ch| ch.iter().map(|p| p.to_vec()).collect()).collect();
    Ok(ModelPayload { descriptor, pages, layout })
}

/// Reads a model's int8 tensors back from its weight pages (`[channel][page]`), as DLG-x streams them.
pub fn gather_tensors(layout: &WeightLayout, skeleton: &QModel, pages: &[Vec<Vec<u8>>]) -> Vec<(Vec<i8>, Vec<i32>)> {
    layout
        .layers
        .iter()
        .enumerate()
        .map(|(li, lp)| {
            let out = skeleton.layers[li].bias.len();
            let weight = (0..out).flat_map(|k| layout.gather(pages, li, k, lp.kernel_bytes)).map(|b| b as i8).collect();
            let bias = layout.gather(pages, li, out, out * 4).chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
            (weight, bias)
        })
        .collect()
}

/// A decoded instruction payload.
#[derive(Debug, Clone)]
pub struct InstrPayload {
    pub instructions: Vec<Instr>,
    pub graph: Option<(GraphDescriptor, PageFormat)>,
    pub graph_pages: Vec<Vec<u8>>,
}

impl GraphDescriptor {
    pub fn format(&self, page_size: usize) -> Result<PageFormat> {
        PageFormat::new(GraphLayout::parse(&self.layout)?, self.vertices, self.k, self.bits, page_size)
    }
    pub fn entries(&self) -> Vec<Entry> {
        self.entries.iter().map(|&(id, code)| Entry { id, code }).collect()
    }
}

/// Encodes the instruction payload: `q`'s instructions for its layout on `area`, and the graph (if any).
pub fn encode_instructions(q: &QModel, area: &DlgArea, graph: Option<(&GraphPages, u32, &[Entry], u64)>) -> Result<Vec<u8>> {
    let layout = WeightLayout::plan(q, area.data_area())?;
    let ins: Vec<u8> = instr::compile(q, &layout)?.iter().flat_map(|i| i.encode()).collect();
    let count = ins.len() / INSTR_BYTES;
    let (desc, pages) = match graph {
        None => (None, Vec::new()),
        Some((gp, bits, entries, seed)) => {
            let cap = area.graph_capacity(layout.pages_per_channel);
            if gp.pages() > cap {
                return Err(CognitiveError::NoSpace(format!(
                    "database: {} vertices take {} {} graph pages; the reserved area holds {cap} after the weights \
                     (raise ftl.ext_reserved_blocks or use a smaller database)",
                    gp.graph.len(),
                    gp.pages(),
                    gp.layout.name()
                )));
            }
            let d = GraphDescriptor {
                layout: gp.layout.name().into(),
                vertices: gp.graph.len(),
                k: gp.graph.k,
                bits,
                seed,
                entries: entries.iter().map(|e| (e.id, e.code)).collect(),
            };
            (Some(d), (0..gp.pages()).map(|i| gp.page_bytes(i)).collect::<Result<Vec<_>>>()?.concat())
        }
    };
    let n_pages = pages.len() / area.geo.page_size as usize;
    let json = serde_json::to_vec(&desc).expect("plain data serialises");
    Ok(frame(INSTR_MAGIC, &json, &[(count, &ins), (n_pages, &pages)]))
}

/// Decodes an instruction payload; the graph's shape and entries are checked, its pages decoded record by record.
pub fn decode_instructions(bytes: &[u8], area: &DlgArea, weight_pages_per_channel: usize) -> Result<InstrPayload> {
    let mut r = Reader { b: bytes, what: "DLG_config instruction payload" };
    let json = r.header(INSTR_MAGIC)?;
    let desc: Option<GraphDescriptor> = serde_json::from_slice(json).map_err(|e| bad(r.what, format!("graph descriptor: {e}")))?;
    let instructions = r.items(INSTR_BYTES)?.into_iter().map(Instr::decode).collect::<Result<Vec<_>>>()?;
    let ps = area.geo.page_size as usize;
    let graph_pages: Vec<Vec<u8>> = r.items(ps)?.into_iter().map(<[u8]>::to_vec).collect();
    r.end()?;
    let graph = match desc {
        None if graph_pages.is_empty() => None,
        None => return Err(bad(r.what, "graph pages without a graph descriptor")),
        Some(d) => {
            let f = d.format(ps)?;
            if graph_pages.len() != f.pages() {
                return Err(bad(r.what, format!("{} graph pages; {} vertices in the {} layout take {}", graph_pages.len(), d.vertices, d.layout, f.pages())));
            }
            let cap = area.graph_capacity(weight_pages_per_channel);
            if f.pages() > cap {
                return Err(CognitiveError::NoSpace(format!("the graph's {} pages; the reserved area holds {cap} after the weights", f.pages())));
            }
            if d.entries.is_empty() || d.entries.iter().any(|&(id, code)| id as usize >= d.vertices || (d.bits < 64 && code >> d.bits != 0)) {
                return Err(bad(r.what, "entry vertices must be non-empty ids below the vertex count with codes of the graph's width"));
            }
            for v in 0..d.vertices as u32 {
                f.decode_record(&graph_pages[f.page_of(v)], v)?;
            }
            Some((d, f))
        }
    };
    Ok(InstrPayload { instructions, graph, graph_pages })
}

/// The graph pages of `graph` over `codes` in `layout`, ready for `encode_instructions`.
pub fn graph_pages<'a>(graph: &'a KnnGraph, codes: &'a [u64], bits: u32, layout: GraphLayout, page_size: usize) -> Result<GraphPages<'a>> {
    GraphPages::new(layout, graph, codes, bits, page_size)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Model;
    use crate::network::fashion_hash_cnn;
    use nearflash_core::ext::Geometry;

    pub(crate) fn area() -> DlgArea {
        let geo = Geometry {
            channels: 4,
            chips_per_channel: 2,
            dies_per_chip: 1,
            planes_per_die: 2,
            blocks_per_plane: 64,
            pages_per_block: 32,
            page_size: 16384,
            sector_size: 4096,
            sectors_per_page: 4,
            bits_per_cell: 2,
        };
        DlgArea::new(geo, 2).unwrap()
    }

    #[test]
    fn model_roundtrips_and_damage_is_refused() {
        let m = Model::random(fashion_hash_cnn(48), 3).unwrap();
        let q = QModel::quantise(&m, &[&[77u8; 784]]).unwrap();
        let head = &m.weights["classifier"];
        let a = area();
        let bytes = encode_model(&q, Some(head), &a).unwrap();
        let p = decode_model(&bytes, &a).unwrap();
        let back = p.descriptor.qmodel(Some(gather_tensors(&p.layout, &p.descriptor.qmodel(None), &p.pages)));
        assert_eq!(back, q, "the weights come back from the pages bit for bit");
        assert_eq!(p.descriptor.head.as_ref().unwrap().weight, head.weight);
        for cut in [0, 3, 11, 40, bytes.len() - 1] {
            assert!(decode_model(&bytes[..cut], &a).is_err(), "truncated at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode_model(&longer, &a).is_err());
        let mut b = bytes.clone();
        b[0] = b'X';
        assert!(decode_model(&b, &a).is_err());
        // a layer list that does not match its scales
        let mut d = p.descriptor.clone();
        d.layers.pop();
        assert!(d.validate().is_err());
        let mut d = p.descriptor.clone();
        d.layers[0].shift = 7;
        assert!(d.validate().is_err());
        let mut d = p.descriptor.clone();
        d.network.input = [1, 1 << 20, 1 << 20];
        assert!(d.validate().is_err());
    }

    #[test]
    fn instructions_and_graph_roundtrip_and_capacity_is_checked() {
        let m = Model::random(fashion_hash_cnn(48), 3).unwrap();
        let q = QModel::quantise(&m, &[&[77u8; 784]]).unwrap();
        let a = area();
        let codes: Vec<u64> = (0..200u64).map(|i| (i * 0x9E37_79B9_7F4A) & 0xFFFF_FFFF_FFFF).collect();
        let g = crate::knn::build(&codes, 48, 25, 1).unwrap();
        let gp = graph_pages(&g, &codes, 48, GraphLayout::TwoHop, 16384).unwrap();
        let entries = crate::gse::entry_vertices(&codes, 8, 1);
        let bytes = encode_instructions(&q, &a, Some((&gp, 48, &entries, 9))).unwrap();
        let wl = WeightLayout::plan(&q, a.data_area()).unwrap();
        let p = decode_instructions(&bytes, &a, wl.pages_per_channel).unwrap();
        assert_eq!(p.instructions, instr::compile(&q, &wl).unwrap());
        let (d, f) = p.graph.unwrap();
        assert_eq!((d.vertices, d.k, d.seed, f.pages()), (200, 25, 9, 200));
        assert_eq!(p.graph_pages[5], gp.page_bytes(5).unwrap());
        // a damaged graph page is refused
        let json_len = u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize;
        let first_page = 12 + json_len + 4 + p.instructions.len() * INSTR_BYTES + 4;
        let mut b = bytes.clone();
        b[first_page + 16384 * 3] ^= 0xFF;
        assert!(decode_instructions(&b, &a, wl.pages_per_channel).is_err());
        // too large a database for the area
        let big: Vec<u64> = (0..2000u64).map(|i| (i * 0x9E37_79B9_7F4A) & 0xFFFF_FFFF_FFFF).collect();
        let gb = crate::knn::build(&big, 48, 25, 1).unwrap();
        let gpb = graph_pages(&gb, &big, 48, GraphLayout::TwoHop, 16384).unwrap();
        let e = encode_instructions(&q, &a, Some((&gpb, 48, &entries, 1))).unwrap_err();
        assert!(matches!(e, CognitiveError::NoSpace(_)), "{e}");
    }
}
