//! Bindings of `nearflash_cognitive` as `nearflash._native.cognitive`: Fashion-MNIST loading, the hashing model
//! (float reference and int8 executor), the K-NN graph, graph search under both page layouts, brute force,
//! precision@T, NPE timing, the weight layout and the DLG wire format. Errors raise `InvalidArgument`; the GIL is
//! released while computing.

use crate::convert::{err, rows_array, to_python};
use nearflash_cognitive::fmnist::{self, Part, Split};
use nearflash_cognitive::graph_pages::{Entry, GraphLayout, GraphPages};
use nearflash_cognitive::gse::{self, SearchConfig};
use nearflash_cognitive::knn::{self, KnnGraph};
use nearflash_cognitive::model::{self, Model as RsModel};
use nearflash_cognitive::network::{fashion_hash_cnn, hash_alexnet, Network};
use nearflash_cognitive::params::CognitiveParams;
use nearflash_cognitive::quant::QModel as RsQModel;
use nearflash_cognitive::wire::{ConfigTarget, DlgCommand};
use nearflash_cognitive::{analysis, area, npe, package, retrieval};
use nearflash_core::config::ExtParams;
use nearflash_core::nvme::{Sqe, SQE_BYTES};
use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// Images as a `Split` with dummy labels, checking the width.
fn split_of(images: &PyReadonlyArray2<'_, u8>, pixels: usize) -> PyResult<Split> {
    let shape = images.shape();
    if shape[1] != pixels {
        return Err(err(format!("images: {} bytes per image; the model takes {pixels} (shape (n, {pixels}))", shape[1])));
    }
    let data = images.as_array().iter().copied().collect();
    Ok(Split { images: data, labels: vec![0; shape[0]] })
}

fn params_from(obj: Option<&Bound<'_, PyAny>>) -> PyResult<CognitiveParams> {
    let mut p = CognitiveParams::default();
    if let Some(o) = obj {
        let json: String = o.py().import("json")?.call_method1("dumps", (o,))?.extract()?;
        let v: serde_json::Value = serde_json::from_str(&json).map_err(err)?;
        p.apply_json_object(&v, &[]).map_err(err)?;
    }
    Ok(p)
}

/// Loads Fashion-MNIST's `part` ("train" or "test"): (images uint8 (n, 784), labels uint8 (n,)).
#[pyfunction]
#[pyo3(signature = (part, directory=None, limit=None))]
fn load_fashion_mnist<'py>(
    py: Python<'py>,
    part: &str,
    directory: Option<String>,
    limit: Option<usize>,
) -> PyResult<(Bound<'py, PyArray2<u8>>, Bound<'py, PyArray1<u8>>)> {
    let part = match part {
        "train" => Part::Train,
        "test" => Part::Test,
        other => return Err(err(format!("part: {other:?}; \"train\" or \"test\" allowed"))),
    };
    let dir = directory.map_or_else(fmnist::default_dir, Into::into);
    let mut s = py.allow_threads(|| fmnist::load(&dir, part)).map_err(err)?;
    if let Some(n) = limit {
        s = s.head(n);
    }
    Ok((rows_array(py, s.images, fmnist::PIXELS)?, s.labels.into_pyarray(py)))
}

/// A hashing network with float weights.
#[pyclass(module = "nearflash._native.cognitive")]
pub struct Model {
    inner: RsModel,
}

#[pymethods]
impl Model {
    /// Reads a safetensors model.
    #[staticmethod]
    fn load(path: &str) -> PyResult<Model> {
        Ok(Model { inner: RsModel::load(std::path::Path::new(path)).map_err(err)? })
    }
    /// Parses a safetensors model from bytes.
    #[staticmethod]
    fn from_bytes(data: &[u8]) -> PyResult<Model> {
        Ok(Model { inner: RsModel::from_safetensors("model bytes", data).map_err(err)? })
    }
    /// A named network ("fashion" or "hash_alexnet") with seeded random weights.
    #[staticmethod]
    #[pyo3(signature = (network, bits=48, seed=1))]
    fn random(network: &str, bits: usize, seed: u64) -> PyResult<Model> {
        Ok(Model { inner: RsModel::random(named_network(network, bits)?, seed).map_err(err)? })
    }
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_safetensors())
    }
    #[getter]
    fn bits(&self) -> PyResult<usize> {
        self.inner.network.bits().map_err(err)
    }
    #[getter]
    fn input_bytes(&self) -> usize {
        self.inner.network.input.iter().product()
    }
    #[getter]
    fn metadata(&self) -> std::collections::BTreeMap<String, String> {
        self.inner.metadata.clone()
    }
    /// The layer list as Python dicts.
    fn layers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.inner.network)
    }
    /// Float hash codes (uint64, bit i = unit i's sigmoid >= 0.5) of images (uint8, (n, input_bytes)).
    fn hash<'py>(&self, py: Python<'py>, images: PyReadonlyArray2<'_, u8>) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let s = split_of(&images, self.input_bytes())?;
        Ok(py.allow_threads(|| retrieval::hash_float(&self.inner, &s)).map_err(err)?.into_pyarray(py))
    }
    /// Float hash-layer pre-activations, (n, bits).
    fn forward<'py>(&self, py: Python<'py>, images: PyReadonlyArray2<'_, u8>) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let s = split_of(&images, self.input_bytes())?;
        let bits = self.bits()?;
        let v: Vec<f32> = py
            .allow_threads(|| (0..s.len()).map(|i| self.inner.forward(s.image(i))).collect::<nearflash_cognitive::Result<Vec<_>>>())
            .map_err(err)?
            .concat();
        rows_array(py, v, bits)
    }
    /// Predicted class of each image (the classifier on the hash layer's sigmoid).
    fn classify<'py>(&self, py: Python<'py>, images: PyReadonlyArray2<'_, u8>) -> PyResult<Bound<'py, PyArray1<u8>>> {
        let s = split_of(&images, self.input_bytes())?;
        let v = py
            .allow_threads(|| {
                (0..s.len())
                    .map(|i| {
                        self.inner.classify(s.image(i)).map(|l| {
                            l.iter().enumerate().fold((0usize, f32::MIN), |b, (j, &x)| if x > b.1 { (j, x) } else { b }).0 as u8
                        })
                    })
                    .collect::<nearflash_cognitive::Result<Vec<u8>>>()
            })
            .map_err(err)?;
        Ok(v.into_pyarray(py))
    }
    /// The int8 model, activation scales calibrated on `calibration` images.
    fn quantise(&self, py: Python<'_>, calibration: PyReadonlyArray2<'_, u8>) -> PyResult<QModel> {
        let s = split_of(&calibration, self.input_bytes())?;
        let imgs: Vec<&[u8]> = (0..s.len()).map(|i| s.image(i)).collect();
        Ok(QModel { inner: py.allow_threads(|| RsQModel::quantise(&self.inner, &imgs)).map_err(err)? })
    }
}

/// The int8 model DLG-x runs.
#[pyclass(module = "nearflash._native.cognitive")]
pub struct QModel {
    inner: RsQModel,
}

#[pymethods]
impl QModel {
    /// Int8 hash codes of images.
    fn hash<'py>(&self, py: Python<'py>, images: PyReadonlyArray2<'_, u8>) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let s = split_of(&images, self.inner.network.input.iter().product())?;
        Ok(py.allow_threads(|| retrieval::hash_int8(&self.inner, &s)).map_err(err)?.into_pyarray(py))
    }
    /// Class of each image by the int8 body and `model`'s float classifier head (what `DLG_analysis` returns).
    fn classify<'py>(&self, py: Python<'py>, images: PyReadonlyArray2<'_, u8>, model: PyRef<'_, Model>) -> PyResult<Bound<'py, PyArray1<u8>>> {
        let s = split_of(&images, self.inner.network.input.iter().product())?;
        let head = match &model.inner.network.classifier {
            Some(l) if model.inner.network == self.inner.network => model.inner.weights.get(&l.label()),
            _ => None,
        }
        .ok_or_else(|| err("model: the network this model was quantised from, with a classifier"))?;
        let head = package::Head { weight: head.weight.clone(), bias: head.bias.clone() };
        let v = py
            .allow_threads(|| (0..s.len()).map(|i| analysis::classify_int8(&self.inner, &head, s.image(i))).collect::<nearflash_cognitive::Result<Vec<u8>>>())
            .map_err(err)?;
        Ok(v.into_pyarray(py))
    }
    /// Everything the int8 executor computes with, for other executors of the same arithmetic: `network` (the
    /// layer list), `input_scale`, and per weighted layer in body order `weight` (int8, the layer's weight shape),
    /// `bias` (int32), `mult` and `shift` (requantisation `round(acc * mult * 2^-shift)`, saturated to +-127).
    fn export<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        let d = pyo3::types::PyDict::new(py);
        d.set_item("network", to_python(py, &self.inner.network)?)?;
        d.set_item("input_scale", self.inner.input_scale)?;
        let shapes = self.inner.network.body.iter().filter_map(|l| l.weight_shape().map(|w| w.0));
        let layers = pyo3::types::PyList::empty(py);
        for (w, shape) in self.inner.layers.iter().zip(shapes) {
            let l = pyo3::types::PyDict::new(py);
            let weight = numpy::ndarray::ArrayD::from_shape_vec(shape, w.weight.clone()).map_err(err)?;
            l.set_item("weight", weight.into_pyarray(py))?;
            l.set_item("bias", w.bias.clone().into_pyarray(py))?;
            l.set_item("mult", w.mult)?;
            l.set_item("shift", w.shift)?;
            layers.append(l)?;
        }
        d.set_item("layers", layers)?;
        Ok(d)
    }
    /// Dequantised hash-layer pre-activations, (n, bits).
    fn forward<'py>(&self, py: Python<'py>, images: PyReadonlyArray2<'_, u8>) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let s = split_of(&images, self.inner.network.input.iter().product())?;
        let bits = self.inner.network.bits().map_err(err)?;
        let v: Vec<f32> = py
            .allow_threads(|| (0..s.len()).map(|i| self.inner.forward(s.image(i)).map(|r| r.1)).collect::<nearflash_cognitive::Result<Vec<_>>>())
            .map_err(err)?
            .concat();
        rows_array(py, v, bits)
    }
}

fn named_network(name: &str, bits: usize) -> PyResult<Network> {
    if !(1..=64).contains(&bits) {
        return Err(err(format!("bits: {bits}; 1 to 64 allowed")));
    }
    match name {
        "fashion" => Ok(fashion_hash_cnn(bits)),
        "hash_alexnet" => Ok(hash_alexnet(bits)),
        other => Err(err(format!("network: {other:?}; \"fashion\" or \"hash_alexnet\" allowed"))),
    }
}

/// The K-NN hash graph over a database's codes.
#[pyclass(module = "nearflash._native.cognitive")]
pub struct Graph {
    inner: KnnGraph,
    codes: Vec<u64>,
    bits: u32,
    /// The GSE's entry vertices (compiled with the graph, kept on chip).
    entries: Vec<Entry>,
    /// The plain layout's pages, generated on first use.
    plain_image: std::sync::OnceLock<gse::PageImage>,
}

impl Graph {
    /// The plain layout's pages, generated once (at the default page size); `None` for other layouts, whose pages
    /// are generated on demand.
    fn plain_pages(&self, gp: &GraphPages<'_>) -> nearflash_cognitive::Result<Option<&gse::PageImage>> {
        if gp.layout != GraphLayout::Plain || gp.page_size != CognitiveParams::default().page_size as usize {
            return Ok(None);
        }
        if self.plain_image.get().is_none() {
            let _ = self.plain_image.set(gse::PageImage::build(gp)?);
        }
        Ok(self.plain_image.get())
    }
}

#[pymethods]
impl Graph {
    /// Builds it (rayon) with `k` neighbours per vertex.
    #[new]
    #[pyo3(signature = (codes, bits=48, k=25, seed=1))]
    fn new(py: Python<'_>, codes: PyReadonlyArray1<'_, u64>, bits: u32, k: usize, seed: u64) -> PyResult<Graph> {
        let codes: Vec<u64> = codes.as_array().iter().copied().collect();
        if bits < 64 && codes.iter().any(|&c| c >> bits != 0) {
            return Err(err(format!("codes: a code has bits above bit {bits}")));
        }
        let inner = py.allow_threads(|| knn::build(&codes, bits, k, seed)).map_err(err)?;
        let entries = gse::entry_vertices(&codes, CognitiveParams::default().initial_vertices as usize, seed);
        Ok(Graph { inner, codes, bits, entries, plain_image: std::sync::OnceLock::new() })
    }
    fn __len__(&self) -> usize {
        self.inner.len()
    }
    #[getter]
    fn k(&self) -> usize {
        self.inner.k
    }
    /// Neighbour ids, (n, k).
    fn neighbours<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<u32>>> {
        rows_array(py, self.inner.neighbours.clone(), self.inner.k)
    }
    /// Pages of the graph in `layout` ("plain" or "two_hop") with 16 KiB pages.
    fn pages(&self, layout: &str) -> PyResult<usize> {
        let p = CognitiveParams::default();
        Ok(GraphPages::new(GraphLayout::parse(layout).map_err(err)?, &self.inner, &self.codes, self.bits, p.page_size as usize).map_err(err)?.pages())
    }
    /// Graph search for the top-`t` ids nearest `query`: (ids uint32, stats dict).
    #[pyo3(signature = (query, t, layout="two_hop", seed=0, params=None))]
    fn search<'py>(
        &self,
        py: Python<'py>,
        query: u64,
        t: usize,
        layout: &str,
        seed: u64,
        params: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyArray1<u32>>, std::collections::HashMap<&'static str, u64>)> {
        let p = params_from(params)?;
        let gp = GraphPages::new(GraphLayout::parse(layout).map_err(err)?, &self.inner, &self.codes, self.bits, p.page_size as usize).map_err(err)?;
        let cfg = SearchConfig::from_params(&p);
        let (ids, st) = py
            .allow_threads(|| {
                match self.plain_pages(&gp)? {
                    Some(mut image) => gse::search(&gp.format(), &mut image, &self.entries, query, t, &cfg, seed),
                    None => gse::search(&gp.format(), &mut gp.clone(), &self.entries, query, t, &cfg, seed),
                }
            })
            .map_err(err)?;
        let stats = [("pages_read", st.pages_read), ("evaluated", st.evaluated), ("neighbour_steps", st.neighbour_steps), ("expansions", st.expansions)];
        Ok((ids.into_pyarray(py), stats.into_iter().collect()))
    }
    /// Graph searches of `queries` one after another on a host that reads the pages from an SSD through a page
    /// cache of `cache_pages` pages, LRU, kept across the queries (`cold`: emptied before each, as when the graph
    /// does not stay in DRAM). Query i draws its fallback vertices with `seed + i`. Returns (ids (n, t) uint32,
    /// per-query stats as arrays: `pages_read` = the cache's misses, `evaluated`, `neighbour_steps`, `expansions`;
    /// and `page_ids`: the pages each query read, in read order, one query after another (`pages_read` splits it)).
    #[pyo3(signature = (queries, t, layout="plain", cache_pages=1, cold=false, seed=0, params=None))]
    #[allow(clippy::too_many_arguments)]
    fn host_search<'py>(
        &self,
        py: Python<'py>,
        queries: PyReadonlyArray1<'_, u64>,
        t: usize,
        layout: &str,
        cache_pages: usize,
        cold: bool,
        seed: u64,
        params: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyArray2<u32>>, std::collections::HashMap<&'static str, Bound<'py, PyArray1<u64>>>)> {
        let p = params_from(params)?;
        if cache_pages == 0 {
            return Err(err("cache_pages: 0; a page cache holds at least 1 page"));
        }
        let gp = GraphPages::new(GraphLayout::parse(layout).map_err(err)?, &self.inner, &self.codes, self.bits, p.page_size as usize).map_err(err)?;
        let cfg = SearchConfig::from_params(&p);
        let qs: Vec<u64> = queries.as_array().iter().copied().collect();
        let (ids, stats, read) = py
            .allow_threads(|| -> nearflash_cognitive::Result<(Vec<u32>, Vec<gse::SearchStats>, Vec<u64>)> {
                let mut image = self.plain_pages(&gp)?;
                let mut generated = gp.clone();
                let mut cache = gse::PageCache::new(cache_pages).recording();
                let (mut ids, mut stats) = (Vec::with_capacity(qs.len() * t), Vec::with_capacity(qs.len()));
                let mut read = Vec::new();
                for (i, &q) in qs.iter().enumerate() {
                    if cold {
                        cache.clear();
                    }
                    let src: &mut dyn gse::PageSource = match image.as_mut() {
                        Some(img) => img,
                        None => &mut generated,
                    };
                    let (found, st) = gse::search_cached(&gp.format(), src, &self.entries, q, t, &cfg, seed.wrapping_add(i as u64), &mut cache)?;
                    ids.extend(found);
                    stats.push(st);
                    read.extend(cache.take_missed().into_iter().map(|p| p as u64));
                }
                Ok((ids, stats, read))
            })
            .map_err(err)?;
        let column = |f: fn(&gse::SearchStats) -> u64| stats.iter().map(f).collect::<Vec<u64>>().into_pyarray(py);
        let out = [
            ("pages_read", column(|s| s.pages_read)),
            ("evaluated", column(|s| s.evaluated)),
            ("neighbour_steps", column(|s| s.neighbour_steps)),
            ("expansions", column(|s| s.expansions)),
            ("page_ids", read.into_pyarray(py)),
        ];
        Ok((rows_array(py, ids, t)?, out.into_iter().collect()))
    }
    /// Precision@T rows (brute force, plain, two-hop; pages and recall) for queries with labels.
    #[pyo3(signature = (labels, queries, query_labels, ts, params=None))]
    fn precision_at<'py>(
        &self,
        py: Python<'py>,
        labels: PyReadonlyArray1<'_, u8>,
        queries: PyReadonlyArray1<'_, u64>,
        query_labels: PyReadonlyArray1<'_, u8>,
        ts: Vec<usize>,
        params: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let p = params_from(params)?;
        let labels: Vec<u8> = labels.as_array().iter().copied().collect();
        let (qc, ql): (Vec<u64>, Vec<u8>) = (queries.as_array().iter().copied().collect(), query_labels.as_array().iter().copied().collect());
        if labels.len() != self.codes.len() || qc.len() != ql.len() {
            return Err(err("labels: one per database item, query_labels one per query"));
        }
        let cfg = SearchConfig::from_params(&p);
        let rows = py
            .allow_threads(|| retrieval::precision_at(&self.inner, &self.codes, &labels, self.bits, p.page_size as usize, &qc, &ql, &ts, &cfg))
            .map_err(err)?;
        to_python(py, &rows)
    }
}

/// Compiles a deployment for `device` (the DLG-x compiler, on the host): the model payload (descriptor and weight
/// pages) and the instruction payload (instructions with the weights' physical addresses, and the graph's pages in
/// `layout` if a graph is given), for the two `DLG_config` calls. Raises if the model or graph does not fit the
/// device's reserved area.
#[pyfunction]
#[pyo3(signature = (device, qmodel, model, graph=None, layout="two_hop", seed=1))]
fn compile_deployment<'py>(
    py: Python<'py>,
    mut device: PyRefMut<'_, crate::device::PyDevice>,
    qmodel: PyRef<'_, QModel>,
    model: PyRef<'_, Model>,
    graph: Option<PyRef<'_, Graph>>,
    layout: &str,
    seed: u64,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let dev = crate::device::device_mut(&mut device)?;
    let area = area::DlgArea::of(dev.config()).map_err(err)?;
    if qmodel.inner.network != model.inner.network {
        return Err(err("model: not the network qmodel was quantised from"));
    }
    let head = match &model.inner.network.classifier {
        Some(l) => model.inner.weights.get(&l.label()),
        None => None,
    };
    let layout = GraphLayout::parse(layout).map_err(err)?;
    let q = &qmodel.inner;
    let graph: Option<&Graph> = graph.as_deref();
    let (m, i) = py
        .allow_threads(|| -> nearflash_cognitive::Result<_> {
            let m = package::encode_model(q, head, &area)?;
            let i = match graph {
                None => package::encode_instructions(q, &area, None)?,
                Some(g) => {
                    let gp = GraphPages::new(layout, &g.inner, &g.codes, g.bits, area.geo.page_size as usize)?;
                    package::encode_instructions(q, &area, Some((&gp, g.bits, &g.entries, seed)))?
                }
            };
            Ok((m, i))
        })
        .map_err(err)?;
    Ok((PyBytes::new(py, &m), PyBytes::new(py, &i)))
}

/// Recall of `returned` against brute force's top-T `bf` with ties at equal distance interchangeable: the
/// fraction of `returned` no farther from `query` than brute force's T-th nearest.
#[pyfunction]
fn distance_recall(codes: PyReadonlyArray1<'_, u64>, query: u64, returned: PyReadonlyArray1<'_, u32>, bf: PyReadonlyArray1<'_, u32>) -> PyResult<f64> {
    let (c, r, b) = (codes.as_slice().map_err(err)?, returned.as_slice().map_err(err)?, bf.as_slice().map_err(err)?);
    if let Some(bad) = r.iter().chain(b).find(|&&i| i as usize >= c.len()) {
        return Err(err(format!("ids: {bad} is not an index into the {} codes", c.len())));
    }
    if b.is_empty() || r.len() > b.len() {
        return Err(err(format!("returned: {} ids against brute force's {}; bf holds the top-T (T >= 1), returned at most T", r.len(), b.len())));
    }
    Ok(gse::distance_recall(c, query, r, b))
}

/// Brute-force top-`t` ids by Hamming distance (ties by id).
#[pyfunction]
fn brute_force<'py>(py: Python<'py>, codes: PyReadonlyArray1<'_, u64>, query: u64, t: usize) -> PyResult<Bound<'py, PyArray1<u32>>> {
    let c: Vec<u64> = codes.as_array().iter().copied().collect();
    Ok(py.allow_threads(|| gse::brute_force(&c, query, t)).map_err(err)?.into_pyarray(py))
}

/// NPE timing of a named network per layer (Eqs. 2-4), as dicts.
#[pyfunction]
#[pyo3(signature = (network="hash_alexnet", bits=48, params=None))]
fn npe_timing<'py>(py: Python<'py>, network: &str, bits: usize, params: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
    let p = params_from(params)?;
    let t = npe::timing(&named_network(network, bits)?, &p).map_err(err)?;
    let rows: Vec<serde_json::Value> = t
        .iter()
        .map(|l| {
            serde_json::json!({"layer": l.layer, "compute_cycles": l.compute_cycles, "data_cycles": l.data_cycles,
            "cycles": l.cycles, "weight_bytes": l.weight_bytes, "compute_bound": l.compute_bound})
        })
        .collect();
    to_python(py, &rows)
}

/// Every parameter: (name, default, unit, source).
#[pyfunction]
fn parameters() -> Vec<(&'static str, &'static str, &'static str, &'static str)> {
    CognitiveParams::DOCS.to_vec()
}

/// Encodes a DLG library call as a 64-byte submission entry.
#[pyfunction]
#[pyo3(signature = (name, address, size, dw12=0, cid=0, nsid=1))]
fn encode_command<'py>(py: Python<'py>, name: &str, address: u32, size: u32, dw12: u32, cid: u16, nsid: u32) -> PyResult<Bound<'py, PyBytes>> {
    let cmd = match name {
        "DLG_config" => DlgCommand::Config {
            address,
            size,
            target: match dw12 {
                0 => ConfigTarget::Instructions,
                1 => ConfigTarget::Model,
                o => return Err(err(format!("dw12: {o}; DLG_config takes 0 (instructions) or 1 (model)"))),
            },
        },
        "DLG_hashing" => DlgCommand::Hashing { address, size, bits: dw12 },
        "DLG_index" => DlgCommand::Index { address, size, t: dw12 },
        "DLG_analysis" => DlgCommand::Analysis { address, size, user: dw12 },
        "SSD_read" => DlgCommand::SsdRead { address, size },
        "SSD_write" => DlgCommand::SsdWrite { address, size },
        other => return Err(err(format!("name: {other:?}; one of DLG_config, DLG_hashing, DLG_index, DLG_analysis, SSD_read, SSD_write"))),
    };
    Ok(PyBytes::new(py, &cmd.encode(cid, nsid).map_err(err)?.to_bytes()))
}

/// Decodes a 64-byte submission entry: (name, opcode, dw10, dw11, dw12).
#[pyfunction]
fn decode_command(data: &[u8]) -> PyResult<(&'static str, u8, u32, u32, u32)> {
    let b: &[u8; SQE_BYTES] = data.try_into().map_err(|_| err(format!("data: {} bytes; a submission entry is {SQE_BYTES}", data.len())))?;
    let cmd = DlgCommand::decode(&Sqe::from_bytes(b)).map_err(err)?;
    let name = match cmd {
        DlgCommand::Config { .. } => "DLG_config",
        DlgCommand::Hashing { .. } => "DLG_hashing",
        DlgCommand::Index { .. } => "DLG_index",
        DlgCommand::Analysis { .. } => "DLG_analysis",
        DlgCommand::SsdRead { .. } => "SSD_read",
        DlgCommand::SsdWrite { .. } => "SSD_write",
    };
    let (a, s, d) = cmd.dwords();
    Ok((name, cmd.opcode(), a, s, d))
}

/// Path of the model shipped in the source tree.
#[pyfunction]
fn shipped_model_path() -> String {
    model::shipped_path().display().to_string()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let sub = PyModule::new(m.py(), "cognitive")?;
    sub.add_function(wrap_pyfunction!(load_fashion_mnist, &sub)?)?;
    sub.add_function(wrap_pyfunction!(brute_force, &sub)?)?;
    sub.add_function(wrap_pyfunction!(distance_recall, &sub)?)?;
    sub.add_function(wrap_pyfunction!(npe_timing, &sub)?)?;
    sub.add_function(wrap_pyfunction!(parameters, &sub)?)?;
    sub.add_function(wrap_pyfunction!(encode_command, &sub)?)?;
    sub.add_function(wrap_pyfunction!(decode_command, &sub)?)?;
    sub.add_function(wrap_pyfunction!(shipped_model_path, &sub)?)?;
    sub.add_function(wrap_pyfunction!(compile_deployment, &sub)?)?;
    sub.add_class::<Model>()?;
    sub.add_class::<QModel>()?;
    sub.add_class::<Graph>()?;
    m.add_submodule(&sub)?;
    Ok(())
}
