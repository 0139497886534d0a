//! Bindings of `nearflash_ndsearch` as the submodule `nearflash._native.ndsearch`: the graph index (build, search,
//! save/load) over numpy arrays, with the GIL released and the work on a rayon pool of the requested size.
//! Format errors raise `ImageError`, argument errors `InvalidArgument`, file I/O errors `HostIoError`.

use std::path::PathBuf;
use std::sync::Arc;

use crate::convert::{err, rows_array, to_python};
use nearflash_core::config::ExtParams;
use nearflash_ndsearch::luncsr::Geometry;
use nearflash_ndsearch::baselines::{BaselineParams, Design};
use nearflash_ndsearch::hosts::{self, HostParams};
use nearflash_ndsearch::study::{run_batch_as, Reorder, Variant};
use nearflash_ndsearch::timing::{FlashTiming, SearssdParams};
use pyo3::types::PyDict;
use crate::device::{device_mut, PyDevice};
use crate::errors::{host_io_err, to_py as to_py_core, ImageError};
use nearflash_core::nvme::{DataBuf, Sqe, Status};
use nearflash_ndsearch::deploy::encode;
use nearflash_ndsearch::firmware;
use nearflash_ndsearch::{Dtype, Index as RsIndex, Kind, Metric, NdError, Params, Rows};
use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::prelude::*;

fn nd_err(e: NdError) -> PyErr {
    match e {
        NdError::Argument(_) => err(e),
        NdError::Format(_) => ImageError::new_err(e.to_string()),
        NdError::Io(ref io) => host_io_err(io, e.to_string()),
    }
}

/// A 2-D numpy array of the index's dtype as owned rows; `dim` checks the width.
fn rows_of(x: &Bound<'_, PyAny>, dtype: Dtype, dim: usize, what: &str) -> PyResult<Rows> {
    fn take<T: numpy::Element + Copy>(a: PyReadonlyArray2<'_, T>, dim: usize, what: &str) -> PyResult<Vec<T>> {
        if a.shape()[1] != dim {
            return Err(err(format!("{what} has {} columns, the index has dim {dim}", a.shape()[1])));
        }
        Ok(match a.as_slice() {
            Ok(s) => s.to_vec(),
            Err(_) => a.as_array().iter().copied().collect(),
        })
    }
    let wrong = || err(format!("{what} must be a 2-D numpy array of {}", dtype.name()));
    Ok(match dtype {
        Dtype::F32 => Rows::F32(take(x.extract::<PyReadonlyArray2<f32>>().map_err(|_| wrong())?, dim, what)?),
        Dtype::U8 => Rows::U8(take(x.extract::<PyReadonlyArray2<u8>>().map_err(|_| wrong())?, dim, what)?),
        Dtype::I8 => Rows::I8(take(x.extract::<PyReadonlyArray2<i8>>().map_err(|_| wrong())?, dim, what)?),
    })
}

/// A graph vector index (HNSW or Vamana) over float32, uint8 or int8 vectors.
#[pyclass(module = "nearflash._native.ndsearch", name = "Index")]
pub struct PyIndex {
    pub(crate) inner: RsIndex,
    pool: Option<(usize, Arc<rayon::ThreadPool>)>,
}

impl PyIndex {
    /// Runs `f` on a pool of `threads` threads (None: rayon's global pool), without the GIL.
    fn on_pool<T: Send>(&mut self, py: Python<'_>, threads: Option<usize>, f: impl FnOnce(&mut RsIndex) -> T + Send) -> PyResult<T> {
        let Some(t) = threads else { return Ok(py.allow_threads(|| f(&mut self.inner))) };
        if t == 0 || t > 1024 {
            return Err(err(format!("threads must be in 1..=1024 or None, not {t}")));
        }
        if self.pool.as_ref().is_none_or(|(n, _)| *n != t) {
            let p = rayon::ThreadPoolBuilder::new().num_threads(t).build().map_err(err)?;
            self.pool = Some((t, Arc::new(p)));
        }
        let pool = self.pool.as_ref().unwrap().1.clone();
        let inner = &mut self.inner;
        Ok(py.allow_threads(|| pool.install(|| f(inner))))
    }
}

#[pymethods]
impl PyIndex {
    #[new]
    #[pyo3(signature = (dim, metric = "l2", kind = "hnsw", r = 16, ef_construction = 200, dtype = "float32", alpha = 1.2, seed = 0))]
    #[allow(clippy::too_many_arguments)]
    fn new(dim: usize, metric: &str, kind: &str, r: usize, ef_construction: usize, dtype: &str, alpha: f32, seed: u64) -> PyResult<Self> {
        let p = Params {
            kind: Kind::parse(kind).map_err(nd_err)?,
            metric: Metric::parse(metric).map_err(nd_err)?,
            dtype: Dtype::parse(dtype).map_err(nd_err)?,
            dim,
            r,
            ef_construction,
            alpha,
            seed,
        };
        Ok(PyIndex { inner: RsIndex::new(p).map_err(nd_err)?, pool: None })
    }

    /// Adds the rows of `x` (n x dim, the index's dtype) and links them into the graph.
    #[pyo3(signature = (x, threads = None))]
    fn add(&mut self, py: Python<'_>, x: &Bound<'_, PyAny>, threads: Option<usize>) -> PyResult<()> {
        let p = *self.inner.params();
        let rows = rows_of(x, p.dtype, p.dim, "x")?;
        self.on_pool(py, threads, move |i| i.add(rows))?.map_err(nd_err)
    }

    /// `add` under the int64 labels `ids` (one per row).
    #[pyo3(signature = (x, ids, threads = None))]
    fn add_with_ids(&mut self, py: Python<'_>, x: &Bound<'_, PyAny>, ids: PyReadonlyArray1<'_, i64>, threads: Option<usize>) -> PyResult<()> {
        let p = *self.inner.params();
        let rows = rows_of(x, p.dtype, p.dim, "x")?;
        let ids = ids.as_array().to_vec();
        self.on_pool(py, threads, move |i| i.add_with_ids(rows, Some(&ids)))?.map_err(nd_err)
    }

    /// Removes the vectors with these labels and repairs the graph; returns how many were removed.
    fn remove_ids(&mut self, py: Python<'_>, ids: PyReadonlyArray1<'_, i64>) -> PyResult<usize> {
        let ids = ids.as_array().to_vec();
        self.on_pool(py, None, move |i| i.remove_ids(&ids))
    }

    /// The index in its file format (for pickling).
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, pyo3::types::PyBytes> {
        let b = py.allow_threads(|| self.inner.to_bytes());
        pyo3::types::PyBytes::new(py, &b)
    }

    #[staticmethod]
    fn from_bytes(py: Python<'_>, raw: &[u8]) -> PyResult<Self> {
        let inner = py.allow_threads(|| RsIndex::from_bytes(raw)).map_err(nd_err)?;
        Ok(PyIndex { inner, pool: None })
    }

    /// Bytes held on the heap (vectors, graph rows, per-vertex state, labels).
    fn memory_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }

    #[getter]
    fn generation(&self) -> u64 {
        self.inner.generation()
    }

    /// The `k` nearest stored vectors of each row of `q`: (distances float32, ids int64), both nq x k.
    #[pyo3(signature = (q, k, ef = 64, threads = None))]
    #[allow(clippy::type_complexity)]
    fn search<'py>(
        &mut self,
        py: Python<'py>,
        q: &Bound<'py, PyAny>,
        k: usize,
        ef: usize,
        threads: Option<usize>,
    ) -> PyResult<(Bound<'py, PyArray2<f32>>, Bound<'py, PyArray2<i64>>)> {
        let p = *self.inner.params();
        let rows = rows_of(q, p.dtype, p.dim, "q")?;
        let (d, i) = self.on_pool(py, threads, move |ix| ix.search(rows, k, ef))?.map_err(nd_err)?;
        Ok((rows_array(py, d, k)?, rows_array(py, i, k)?))
    }

    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        py.allow_threads(|| self.inner.save(&path)).map_err(nd_err)
    }

    #[staticmethod]
    fn load(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let inner = py.allow_threads(|| RsIndex::load(&path)).map_err(nd_err)?;
        Ok(PyIndex { inner, pool: None })
    }

    /// Layer 0 as CSR: (offsets int64 of length n+1, neighbour ids int64).
    fn layer0_csr<'py>(&self, py: Python<'py>) -> (Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<i64>>) {
        let g = self.inner.layer0();
        let mut offs = Vec::with_capacity(g.len() + 1);
        let mut nb = Vec::with_capacity(g.edges());
        offs.push(0i64);
        for v in 0..g.len() as u32 {
            g.for_each(v, |u| nb.push(u as i64));
            offs.push(nb.len() as i64);
        }
        (offs.into_pyarray(py), nb.into_pyarray(py))
    }

    #[getter]
    fn ntotal(&self) -> usize {
        self.inner.len()
    }
    #[getter]
    fn dim(&self) -> usize {
        self.inner.params().dim
    }
    #[getter]
    fn metric(&self) -> &'static str {
        self.inner.params().metric.name()
    }
    #[getter]
    fn kind(&self) -> &'static str {
        self.inner.params().kind.name()
    }
    #[getter]
    fn dtype(&self) -> &'static str {
        self.inner.params().dtype.name()
    }
    #[getter(R)]
    fn r(&self) -> usize {
        self.inner.params().r
    }
    #[getter]
    fn ef_construction(&self) -> usize {
        self.inner.params().ef_construction
    }
    #[getter]
    fn alpha(&self) -> f32 {
        self.inner.params().alpha
    }
    #[getter]
    fn seed(&self) -> u64 {
        self.inner.params().seed
    }
}

/// SearSSD's geometry from an optional dict (keys of `Geometry`; missing keys keep the searssd values).
fn geometry(g: Option<&Bound<'_, PyDict>>) -> PyResult<Geometry> {
    let mut out = Geometry::SEARSSD;
    for (k, v) in g.into_iter().flat_map(|d| d.iter()) {
        let key: String = k.extract()?;
        let val: usize = v.extract().map_err(|_| err(format!("geometry {key} must be a positive integer")))?;
        match key.as_str() {
            "luns" => out.luns = val,
            "planes_per_lun" => out.planes_per_lun = val,
            "blocks_per_plane" => out.blocks_per_plane = val,
            "pages_per_block" => out.pages_per_block = val,
            "page_bytes" => out.page_bytes = val,
            _ => return Err(err(format!("unknown geometry key {key:?}"))),
        }
    }
    out.validate().map_err(nd_err)?;
    Ok(out)
}

/// One lock-step SearSSD batch modelled on the host: (report dict, distances nq x k, ids nq x k).
#[pyfunction]
#[pyo3(signature = (index, q, k, ef = 64, reorder = "degree", dynamic = true, params = None, geometry = None, seed = 0, design = "searssd", multiplane = true, baseline = None, hosts = None))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn searssd_batch<'py>(
    py: Python<'py>,
    index: &PyIndex,
    q: &Bound<'py, PyAny>,
    k: usize,
    ef: usize,
    reorder: &str,
    dynamic: bool,
    params: Option<&str>,
    geometry: Option<&Bound<'py, PyDict>>,
    seed: u64,
    design: &str,
    multiplane: bool,
    baseline: Option<&str>,
    hosts: Option<&str>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyArray2<f32>>, Bound<'py, PyArray2<i64>>)> {
    let p = *index.inner.params();
    let rows = rows_of(q, p.dtype, p.dim, "q")?;
    let reorder = match reorder {
        "none" => Reorder::None,
        "degree" => Reorder::DegreeBfs,
        "random" => Reorder::RandomBfs(seed),
        other => return Err(err(format!("reorder must be 'none', 'degree' or 'random', not {other:?}"))),
    };
    let mut sp = SearssdParams::default();
    if let Some(js) = params {
        let v: serde_json::Value = serde_json::from_str(js).map_err(err)?;
        sp.apply_json_object(&v, &[]).map_err(err)?;
    }
    let design = Design::parse(design).ok_or_else(|| {
        let names: Vec<&str> = Design::ALL.iter().map(|d| d.name()).collect();
        err(format!("design must be one of {names:?}, not {design:?}"))
    })?;
    let mut bp = BaselineParams::default();
    if let Some(js) = baseline {
        let v: serde_json::Value = serde_json::from_str(js).map_err(err)?;
        bp.apply_json_object(&v, &[]).map_err(err)?;
    }
    let mut hp = HostParams::default();
    if let Some(js) = hosts {
        let v: serde_json::Value = serde_json::from_str(js).map_err(err)?;
        hp.apply_json_object(&v, &[]).map_err(err)?;
    }
    let variant = Variant { design, multiplane };
    let g = self::geometry(geometry)?;
    if ef == 0 || ef > nearflash_ndsearch::index::MAX_EF {
        return Err(err(format!("ef must be in 1..={}, not {ef}", nearflash_ndsearch::index::MAX_EF)));
    }
    let rep = py
        .allow_threads(|| run_batch_as(&index.inner, rows, k, ef, reorder, dynamic, g, &sp, &FlashTiming::SEARSSD, variant, &bp))
        .map_err(nd_err)?;
    let d: Vec<f32> = rep.distances.iter().flat_map(|r| r.iter().copied().chain(std::iter::repeat(f32::INFINITY)).take(k)).collect();
    let ix = &index.inner;
    let i: Vec<i64> = rep.ids.iter().flat_map(|r| r.iter().map(|&v| ix.label(v)).chain(std::iter::repeat(-1)).take(k)).collect();
    let report = to_python(py, &rep)?;
    report.set_item("hosts", to_python(py, &hosts::costs(&hp, &rep.host_work))?)?;
    Ok((report, rows_array(py, d, k)?, rows_array(py, i, k)?))
}


fn reorder_of(reorder: &str, seed: u64) -> PyResult<Reorder> {
    Ok(match reorder {
        "none" => Reorder::None,
        "degree" => Reorder::DegreeBfs,
        "random" => Reorder::RandomBfs(seed),
        other => return Err(err(format!("reorder must be 'none', 'degree' or 'random', not {other:?}"))),
    })
}

/// The attached SearSSD firmware's device, or a clear error where the device has none.
fn searssd_device(dev: &mut PyDevice) -> PyResult<&mut nearflash_core::Device> {
    let d = device_mut(dev)?;
    if !d.extensions().iter().any(|n| n == firmware::NAME) {
        return Err(err(format!(
            "the device has no '{}' firmware: attach it first (device.attach('{}')), with ftl.ext_reserved_blocks > 0",
            firmware::NAME,
            firmware::NAME
        )));
    }
    Ok(d)
}

/// Runs a vendor command; a failed status raises `NvmeError` (via `to_py`) naming `what`.
fn vendor(d: &mut nearflash_core::Device, qid: u16, op: u8, data: DataBuf<'_>, what: &str) -> PyResult<nearflash_core::Done> {
    let done = d.execute(qid, Sqe { opcode: op, nsid: 1, ..Sqe::default() }, data).map_err(to_py_core)?;
    if !done.status.is_success() {
        return Err(to_py_core(d.command_error(what, qid, done.cid, done.status)));
    }
    Ok(done)
}

/// Deploys `index` onto the device's SearSSD firmware (LUNCSR in controller DRAM, vectors in the reserved blocks):
/// (vectors deployed, latency ns). An index the reserved area cannot hold raises `InvalidArgument`.
#[pyfunction]
#[pyo3(signature = (dev, qid, index, reorder = "degree", seed = 0))]
fn device_deploy(py: Python<'_>, dev: &mut PyDevice, qid: u16, index: &PyIndex, reorder: &str, seed: u64) -> PyResult<(u32, u64)> {
    let reorder = reorder_of(reorder, seed)?;
    let d = searssd_device(dev)?;
    let blob = py.allow_threads(|| encode(&index.inner, reorder)).map_err(nd_err)?;
    let done = d.execute(qid, Sqe { opcode: firmware::OP_DEPLOY, nsid: 1, ..Sqe::default() }, DataBuf::ToDevice(&blob)).map_err(to_py_core)?;
    if done.status == Status::CAPACITY_EXCEEDED {
        let reserved = d.config().ftl.ext_reserved_blocks.map_or(0, |c| c.0);
        return Err(err(format!(
            "the index ({} vectors of {} B) does not fit the device's extension-reserved blocks ({reserved} per plane, \
             ftl.ext_reserved_blocks): raise it or deploy a smaller index",
            index.inner.len(),
            index.inner.params().dim * index.inner.params().dtype.bytes()
        )));
    }
    if !done.status.is_success() {
        return Err(to_py_core(d.command_error("ndsearch deploy", qid, done.cid, done.status)));
    }
    Ok((done.dw0, done.latency_ns))
}

/// Searches the deployed index in the device: (D, I, latency ns, batches). Entry vertices come from the host
/// index's upper layers (HNSW) or its medoid (Vamana); layer 0 is searched in the SSD.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn device_search<'py>(
    py: Python<'py>,
    dev: &mut PyDevice,
    qid: u16,
    index: &PyIndex,
    q: &Bound<'py, PyAny>,
    k: usize,
    ef: usize,
) -> PyResult<(Bound<'py, PyArray2<f32>>, Bound<'py, PyArray2<i64>>, u64, u32)> {
    let p = *index.inner.params();
    let mut rows = rows_of(q, p.dtype, p.dim, "q")?;
    let nq = index.inner.prepare(&mut rows, "q").map_err(nd_err)?;
    if k == 0 || k > index.inner.len() {
        return Err(err(format!("k must be in 1..={}, not {k}", index.inner.len())));
    }
    if ef == 0 || ef > nearflash_ndsearch::index::MAX_EF {
        return Err(err(format!("ef must be in 1..={}, not {ef}", nearflash_ndsearch::index::MAX_EF)));
    }
    if nq == 0 || nq > u32::MAX as usize {
        return Err(err("q must hold at least one row".to_string()));
    }
    let d = searssd_device(dev)?;
    let ix = &index.inner;
    let req = py.allow_threads(|| {
        let mut r = Vec::with_capacity(12 + nq * (4 + p.dim * p.dtype.bytes()));
        for w in [k as u32, ef as u32, nq as u32] {
            r.extend_from_slice(&w.to_le_bytes());
        }
        for i in 0..nq {
            r.extend_from_slice(&ix.entry_for(rows.row(i, p.dim)).expect("k <= len").to_le_bytes());
        }
        match &rows {
            Rows::F32(v) => v.iter().for_each(|x| r.extend_from_slice(&x.to_le_bytes())),
            Rows::U8(v) => r.extend_from_slice(v),
            Rows::I8(v) => v.iter().for_each(|&x| r.push(x as u8)),
        }
        r
    });
    let s = vendor(d, qid, firmware::OP_SEARCH, DataBuf::ToDevice(&req), "ndsearch search")?;
    let mut out = vec![0u8; nq * k * 8];
    let r = vendor(d, qid, firmware::OP_RESULTS, DataBuf::FromDevice(&mut out), "ndsearch results")?;
    let mut dist = Vec::with_capacity(nq * k);
    let mut ids = Vec::with_capacity(nq * k);
    for c in out.chunks_exact(8) {
        let id = u32::from_le_bytes(c[..4].try_into().unwrap());
        ids.push(if id == u32::MAX || id as usize >= ix.len() { -1 } else { ix.label(id) });
        dist.push(f32::from_le_bytes(c[4..].try_into().unwrap()));
    }
    Ok((rows_array(py, dist, k)?, rows_array(py, ids, k)?, s.latency_ns + r.latency_ns, s.dw0))
}

/// The host search's trace in lock-step iterations (equal results): per iteration, the (query, vertex) pairs whose
/// vectors were measured, as two uint32 arrays - what a CPU + SSD search must read.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn lockstep_trace<'py>(
    py: Python<'py>,
    index: &PyIndex,
    q: &Bound<'py, PyAny>,
    k: usize,
    ef: usize,
) -> PyResult<Vec<(Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<u32>>)>> {
    let p = *index.inner.params();
    let mut rows = rows_of(q, p.dtype, p.dim, "q")?;
    let nq = index.inner.prepare(&mut rows, "q").map_err(nd_err)?;
    if k == 0 || k > index.inner.len() || ef == 0 || ef > nearflash_ndsearch::index::MAX_EF {
        return Err(err(format!("k must be in 1..={} and ef in 1..={}", index.inner.len(), nearflash_ndsearch::index::MAX_EF)));
    }
    let ix = &index.inner;
    let ls = py.allow_threads(|| {
        let entries: Vec<u32> = (0..nq).map(|i| ix.entry_for(rows.row(i, p.dim)).expect("k <= len")).collect();
        let cfg = nearflash_ndsearch::lockstep::LockstepConfig { k, ef, speculate: 0, vertices: ix.len() };
        nearflash_ndsearch::lockstep::lockstep_search(&entries, cfg, |v, f| ix.layer0().for_each(v, f), |qi, v| {
            ix.distance_to(rows.row(qi as usize, p.dim), v)
        })
    });
    Ok(ls
        .iterations
        .iter()
        .map(|it| {
            let qs: Vec<u32> = it.pairs.iter().map(|p| p.query).collect();
            let vs: Vec<u32> = it.pairs.iter().map(|p| p.vertex).collect();
            (qs.into_pyarray(py), vs.into_pyarray(py))
        })
        .collect())
}

/// CPU time (ns, summed over cores) of a host graph search that measured `distances` distances and made `hops`
/// expansions over `n` vectors of `dim` float32 elements (rows of `row_cap` ids), on the paper's CPU
/// (:func:`host_parameters`, ``hosts`` overriding them as a JSON object): the costed CPU baseline's per-operation
/// costs (``hosts::cpu_graph_core``), for a host that charges the search to its own cores.
#[pyfunction]
#[pyo3(signature = (distances, hops, dim, n, row_cap, hosts=None))]
fn cpu_search_core_ns(distances: usize, hops: usize, dim: usize, n: usize, row_cap: usize, hosts: Option<&str>) -> PyResult<f64> {
    let mut hp = HostParams::default();
    if let Some(js) = hosts {
        let v: serde_json::Value = serde_json::from_str(js).map_err(err)?;
        hp.apply_json_object(&v, &[]).map_err(err)?;
    }
    let w = hosts::HostWork { queries: 1, distances, upper_distances: 0, hops, max_hops: hops, dim, n, row_cap, k: 1, ef: 1 };
    Ok(hosts::cpu_graph_core(&hp, &w).0)
}

/// SearSSD's parameters: (name, default, unit, source) of each.
#[pyfunction]
fn searssd_parameters() -> Vec<(&'static str, &'static str, &'static str, &'static str)> {
    SearssdParams::DOCS.to_vec()
}

/// (name, default, unit, source) of every baseline (DeepStore, SmartSSD-only) and energy parameter.
#[pyfunction]
fn baseline_parameters() -> Vec<(&'static str, &'static str, &'static str, &'static str)> {
    BaselineParams::DOCS.to_vec()
}

/// (name, default, unit, source) of the host CPU and GPU the comparisons are costed on.
#[pyfunction]
fn host_parameters() -> Vec<(&'static str, &'static str, &'static str, &'static str)> {
    HostParams::DOCS.to_vec()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let sub = PyModule::new(m.py(), "ndsearch")?;
    sub.add_class::<PyIndex>()?;
    sub.add_function(wrap_pyfunction!(searssd_batch, &sub)?)?;
    sub.add_function(wrap_pyfunction!(searssd_parameters, &sub)?)?;
    sub.add_function(wrap_pyfunction!(baseline_parameters, &sub)?)?;
    sub.add_function(wrap_pyfunction!(host_parameters, &sub)?)?;
    sub.add_function(wrap_pyfunction!(device_deploy, &sub)?)?;
    sub.add_function(wrap_pyfunction!(device_search, &sub)?)?;
    sub.add_function(wrap_pyfunction!(lockstep_trace, &sub)?)?;
    sub.add_function(wrap_pyfunction!(cpu_search_core_ns, &sub)?)?;
    m.add_submodule(&sub)?;
    Ok(())
}
