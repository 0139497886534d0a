//! Bindings of `nearflash_issd` as the submodule `nearflash._native.issd`: lineitem generation and the paged
//! layout to numpy, the seeded kernel inputs, kernels run on the host path (whole runs, or Map per chunk and
//! Reduce over encoded partials as the device does), and the analytic model; the Agent and Initiator on a device
//! ([`agent`]) and the execution-driven studies ([`sim`]). Inputs are borrowed from numpy without copies when
//! contiguous; the GIL is released while computing. Errors raise `InvalidArgument`.

mod agent;
mod columnar;
mod sim;


use crate::convert::{elements, err, fail, rows_array, to_python};
use nearflash_issd::kernel::kmeans::run_kmeans;
use nearflash_issd::kernel::{run_chunked, run_parallel, run_serial, Kernel, KernelSpec, Output, Partial, RunReport};
use nearflash_issd::lineitem::{generate_pages, generate_records, CommentPool, Field, FieldKind, LineitemSpec};
use nearflash_issd::model::{self, EnergyParams, Fig7Config, KernelProfile, SystemConfig};
use nearflash_issd::{datagen, pages, Chunk, PageLayout};
use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

fn layout(page_size: usize) -> PyResult<PageLayout> {
    PageLayout::new(page_size).map_err(fail)
}

fn u8_array(py: Python<'_>, v: Vec<u8>) -> Bound<'_, PyArray1<u8>> {
    v.into_pyarray(py)
}

// ---- lineitem and pages ----

fn lineitem_spec(scale_factor: f64, max_rows: Option<u64>, comment_pool: &str) -> PyResult<LineitemSpec> {
    let comment_pool = match comment_pool {
        "standard" => CommentPool::Standard,
        "compact" => CommentPool::Compact,
        other => return Err(err(format!("comment_pool {other:?} is not 'standard' or 'compact'"))),
    };
    Ok(LineitemSpec { scale_factor, max_rows, comment_pool })
}

/// TPC-H lineitem as 150-byte records packed into pages (or contiguous when `page_size` is None), uint8.
#[pyfunction]
#[pyo3(signature = (scale_factor = 1.0, max_rows = None, page_size = Some(8192), comment_pool = "standard"))]
fn lineitem<'py>(
    py: Python<'py>,
    scale_factor: f64,
    max_rows: Option<u64>,
    page_size: Option<usize>,
    comment_pool: &str,
) -> PyResult<Bound<'py, PyArray1<u8>>> {
    let spec = lineitem_spec(scale_factor, max_rows, comment_pool)?;
    let data = match page_size {
        Some(p) => {
            let l = layout(p)?;
            py.allow_threads(|| generate_pages(&spec, l))
        }
        None => py.allow_threads(|| generate_records(&spec)),
    }
    .map_err(fail)?;
    Ok(u8_array(py, data))
}

/// The record layout: (name, offset, width, kind) per field, kind one of i64, i32, u8, u64, text.
#[pyfunction]
fn lineitem_layout() -> Vec<(&'static str, usize, usize, &'static str)> {
    Field::ALL
        .iter()
        .map(|f| {
            let kind = match f.kind() {
                FieldKind::I64 => "i64",
                FieldKind::I32 => "i32",
                FieldKind::U8 => "u8",
                FieldKind::U64 => "u64",
                FieldKind::Text => "text",
            };
            (f.name(), f.offset(), f.width(), kind)
        })
        .collect()
}

/// Packs contiguous fixed-size records into pages.
#[pyfunction]
fn pack_records<'py>(
    py: Python<'py>,
    data: PyReadonlyArray1<'py, u8>,
    record_size: usize,
    page_size: usize,
) -> PyResult<Bound<'py, PyArray1<u8>>> {
    let (b, l) = (elements(&data), layout(page_size)?);
    let out = py.allow_threads(|| pages::pack_records(l, &b, record_size)).map_err(fail)?;
    Ok(u8_array(py, out))
}

/// Packs text into pages of whole lines.
#[pyfunction]
fn pack_lines<'py>(py: Python<'py>, text: &[u8], page_size: usize) -> PyResult<Bound<'py, PyArray1<u8>>> {
    let l = layout(page_size)?;
    let out = py.allow_threads(|| pages::pack_lines(l, text)).map_err(fail)?;
    Ok(u8_array(py, out))
}

/// Concatenated page payloads (the logical content).
#[pyfunction]
fn unpack<'py>(
    py: Python<'py>,
    data: PyReadonlyArray1<'py, u8>,
    page_size: usize,
) -> PyResult<Bound<'py, PyArray1<u8>>> {
    let (b, l) = (elements(&data), layout(page_size)?);
    let out = py.allow_threads(|| pages::unpack(l, &b)).map_err(fail)?;
    Ok(u8_array(py, out))
}

// ---- seeded inputs ----

/// About `size` bytes of `\n`-terminated TPC-H grammar text.
#[pyfunction]
fn text(py: Python<'_>, size: usize, seed: u64) -> Bound<'_, PyBytes> {
    let t = py.allow_threads(|| datagen::text(size, seed));
    PyBytes::new(py, &t)
}

/// `n` regression points as an (n, 2) uint8 array of (x, y).
#[pyfunction]
fn regression_points(py: Python<'_>, n: usize, seed: u64) -> PyResult<Bound<'_, PyArray2<u8>>> {
    let v = py.allow_threads(|| datagen::regression_points(n, seed));
    rows_array(py, v, 2)
}

/// A (height x width, 3) uint8 array of RGB pixels, row-major.
#[pyfunction]
fn pixels(py: Python<'_>, width: usize, height: usize, seed: u64) -> PyResult<Bound<'_, PyArray2<u8>>> {
    let v = py.allow_threads(|| datagen::pixels(width, height, seed)).map_err(fail)?;
    rows_array(py, v, 3)
}

/// `n` points of `dim` int32 coordinates around `clusters` random centres, (n, dim).
#[pyfunction]
fn cluster_points(
    py: Python<'_>,
    n: usize,
    dim: usize,
    clusters: usize,
    seed: u64,
) -> PyResult<Bound<'_, PyArray2<i32>>> {
    let v = py.allow_threads(|| datagen::cluster_points(n, dim, clusters, seed)).map_err(fail)?;
    let ints: Vec<i32> = v.chunks_exact(4).map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    rows_array(py, ints, dim)
}

/// `n` labelled records (attributes u8 values then a u8 class) as an (n, attributes + 1) uint8 array.
#[pyfunction]
fn labelled_records(
    py: Python<'_>,
    n: usize,
    attributes: usize,
    classes: usize,
    values: usize,
    seed: u64,
) -> PyResult<Bound<'_, PyArray2<u8>>> {
    let v = py.allow_threads(|| datagen::labelled_records(n, attributes, classes, values, seed)).map_err(fail)?;
    rows_array(py, v, attributes + 1)
}

// ---- kernels ----

pub(crate) fn output_dict<'py>(py: Python<'py>, out: &Output) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("kind", out.kind())?;
    match out {
        Output::Selection(s) => {
            d.set_item("scanned", s.scanned)?;
            d.set_item("items", s.items)?;
            d.set_item("data", PyBytes::new(py, &s.bytes))?;
        }
        Output::Aggregate(a) => {
            d.set_item("scanned", a.scanned)?;
            d.set_item("matched", a.matched)?;
            d.set_item("sum", a.sum)?;
        }
        Output::Matches(m) => {
            let keys = PyList::empty(py);
            for k in &m.keys {
                let kd = PyDict::new(py);
                kd.set_item("key", PyBytes::new(py, &k.key))?;
                kd.set_item("count", k.count)?;
                let flat: Vec<u64> = k.positions.iter().flat_map(|&(p, o)| [p, u64::from(o)]).collect();
                kd.set_item("positions", rows_array(py, flat, 2)?)?;
                keys.append(kd)?;
            }
            d.set_item("keys", keys)?;
        }
        Output::WordCounts(w) => {
            d.set_item("total", w.total)?;
            d.set_item("distinct", w.distinct)?;
            let words: Vec<(String, u64)> =
                w.words.iter().map(|(k, c)| (String::from_utf8_lossy(k).into_owned(), *c)).collect();
            d.set_item("words", words)?;
        }
        Output::Histogram(h) => {
            d.set_item("counts", rows_array(py, h.0.iter().flatten().copied().collect(), 256)?)?;
        }
        Output::Regression(r) => {
            let s = r.sums;
            for (k, v) in [("n", s.n), ("sx", s.sx), ("sy", s.sy), ("sxx", s.sxx), ("syy", s.syy), ("sxy", s.sxy)] {
                d.set_item(k, v)?;
            }
            d.set_item("slope", r.slope)?;
            d.set_item("intercept", r.intercept)?;
        }
        Output::Clusters(c) => {
            d.set_item("centroids", rows_array(py, c.centroids.clone(), c.dim)?)?;
            d.set_item("counts", PyArray1::from_slice(py, &c.counts))?;
            d.set_item("sse", c.sse)?;
            d.set_item("moved", c.moved)?;
        }
        Output::NaiveBayes(o) => {
            let (a, c, v) = (o.attributes, o.classes, o.values);
            d.set_item("attributes", a)?;
            d.set_item("classes", c)?;
            d.set_item("values", v)?;
            if o.confusion.is_empty() {
                d.set_item("class_counts", PyArray1::from_slice(py, &o.model.class_counts))?;
                d.set_item("counts", PyArray1::from_slice(py, &o.model.counts).reshape([c, a, v])?)?;
                d.set_item("confusion", py.None())?;
            } else {
                d.set_item("confusion", rows_array(py, o.confusion.clone(), c)?)?;
            }
        }
        Output::Split(o) => {
            d.set_item("class_counts", PyArray1::from_slice(py, &o.class_counts))?;
            d.set_item("node_gini", o.node_gini)?;
            let splits: Vec<Option<(u8, f64)>> = o.splits.iter().map(|s| s.map(|s| (s.threshold, s.gini))).collect();
            d.set_item("splits", splits)?;
            d.set_item("best", o.best)?;
            d.set_item("left_counts", PyArray1::from_slice(py, &o.left_counts))?;
        }
        Output::Halos(o) => {
            d.set_item("grid", o.grid)?;
            d.set_item("particles", o.particles)?;
            d.set_item("outside", o.outside)?;
            d.set_item("below", o.below)?;
            let groups = PyList::empty(py);
            for g in &o.groups {
                let gd = PyDict::new(py);
                gd.set_item("peak", g.peak)?;
                gd.set_item("peak_count", g.peak_count)?;
                gd.set_item("cells", g.cells)?;
                gd.set_item("particles", g.particles)?;
                gd.set_item("sum", g.sum.to_vec())?;
                groups.append(gd)?;
            }
            d.set_item("groups", groups)?;
        }
    }
    d.set_item("encoded", PyBytes::new(py, &out.encode()))?;
    Ok(d)
}

pub(crate) fn report_dict<'py>(py: Python<'py>, r: &RunReport) -> PyResult<Bound<'py, PyDict>> {
    let d = output_dict(py, &r.output)?;
    d.set_item("chunks", r.chunks)?;
    d.set_item("input_bytes", r.input_bytes)?;
    d.set_item("partial_bytes", r.partial_bytes)?;
    d.set_item("output_bytes", r.output_bytes)?;
    d.set_item("alpha", r.alpha())?;
    Ok(d)
}

/// The kernel of a JSON spec over pages of `page_size` bytes.
fn built_kernel(spec: &str, page_size: usize) -> PyResult<Box<dyn Kernel>> {
    KernelSpec::from_json(spec).and_then(|s| s.build(PageLayout::new(page_size)?)).map_err(fail)
}

/// Names of the kernels.
#[pyfunction]
fn kernel_names() -> Vec<&'static str> {
    nearflash_issd::kernel::KERNEL_NAMES.to_vec()
}

/// Runs a kernel (JSON spec) over a paged input on the host: mode "parallel" (rayon), "chunked" (one thread,
/// chunk by chunk) or "serial" (one chunk). Returns the output fields plus byte counts and the measured alpha.
#[pyfunction]
#[pyo3(signature = (spec, data, page_size, pages_per_chunk = 64, mode = "parallel"))]
fn run<'py>(
    py: Python<'py>,
    spec: &str,
    data: PyReadonlyArray1<'py, u8>,
    page_size: usize,
    pages_per_chunk: usize,
    mode: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let kernel = built_kernel(spec, page_size)?;
    let b = elements(&data);
    let r = py
        .allow_threads(|| match mode {
            "parallel" => Some(run_parallel(kernel.as_ref(), &b, pages_per_chunk)),
            "chunked" => Some(run_chunked(kernel.as_ref(), &b, pages_per_chunk)),
            "serial" => Some(run_serial(kernel.as_ref(), &b)),
            _ => None,
        })
        .ok_or_else(|| err(format!("mode {mode:?} is not 'parallel', 'chunked' or 'serial'")))?
        .map_err(fail)?;
    report_dict(py, &r)
}

/// Map over one chunk of whole pages starting at page `first_page`: the encoded partial an FMC would ship.
#[pyfunction]
fn map_chunk<'py>(
    py: Python<'py>,
    spec: &str,
    chunk: PyReadonlyArray1<'py, u8>,
    page_size: usize,
    first_page: u64,
) -> PyResult<Bound<'py, PyBytes>> {
    let kernel = built_kernel(spec, page_size)?;
    let b = elements(&chunk);
    let p = py.allow_threads(|| kernel.map(Chunk::new(first_page, &b))).map_err(fail)?;
    Ok(PyBytes::new(py, &p.encode()))
}

/// Reduce: decodes encoded partials, merges them in the given order, and finishes.
#[pyfunction]
fn reduce<'py>(py: Python<'py>, spec: &str, partials: Vec<Vec<u8>>, page_size: usize) -> PyResult<Bound<'py, PyDict>> {
    let kernel = built_kernel(spec, page_size)?;
    let out = py
        .allow_threads(|| {
            let mut acc = kernel.empty();
            for p in &partials {
                kernel.merge(&mut acc, Partial::decode(p)?)?;
            }
            kernel.finish(acc)
        })
        .map_err(fail)?;
    output_dict(py, &out)
}

/// Host k-means: iterations from the spec's centroids until none moves or `max_iterations`; a list of steps.
#[pyfunction]
#[pyo3(signature = (spec, data, page_size, max_iterations, pages_per_chunk = 64))]
fn kmeans<'py>(
    py: Python<'py>,
    spec: &str,
    data: PyReadonlyArray1<'py, u8>,
    page_size: usize,
    max_iterations: usize,
    pages_per_chunk: usize,
) -> PyResult<Bound<'py, PyList>> {
    let KernelSpec::KMeans(params) = KernelSpec::from_json(spec).map_err(fail)? else {
        return Err(err("kmeans needs a {\"kernel\": \"kmeans\", ...} spec"));
    };
    let (b, l) = (elements(&data), layout(page_size)?);
    let run = py.allow_threads(|| run_kmeans(&params, l, &b, max_iterations, pages_per_chunk)).map_err(fail)?;
    let steps = PyList::empty(py);
    for s in run.steps {
        steps.append(output_dict(py, &Output::Clusters(s))?)?;
    }
    Ok(steps)
}

// ---- model ----

fn profile(kernel: &str, overrides: Option<Vec<(String, f64)>>) -> PyResult<KernelProfile> {
    model::profile(kernel).and_then(|p| p.with_overrides(&overrides.unwrap_or_default())).map_err(fail)
}

fn config(name: &str, n_ch: f64, overrides: Option<Vec<(String, f64)>>) -> PyResult<SystemConfig> {
    let c = model::fig7(Fig7Config::from_name(name).map_err(fail)?, n_ch);
    c.with_overrides(&overrides.unwrap_or_default()).map_err(fail)
}

fn energy_params(overrides: Option<Vec<(String, f64)>>) -> PyResult<EnergyParams> {
    EnergyParams::default().with_overrides(&overrides.unwrap_or_default()).map_err(fail)
}

/// A model result as Python objects; a model error raises `InvalidArgument`.
fn model_result<'py, T: serde::Serialize>(
    py: Python<'py>,
    r: nearflash_issd::error::Result<T>,
) -> PyResult<Bound<'py, PyAny>> {
    to_python(py, &r.map_err(fail)?)
}

/// Configuration names of Fig. 7.
#[pyfunction]
fn model_configs() -> Vec<&'static str> {
    Fig7Config::ALL.iter().map(|c| c.name()).collect()
}

/// Kernel profiles (Table 2 with the assumed free parameters) and Table 1, as JSON-like objects.
#[pyfunction]
fn model_parameters(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    let v = serde_json::json!({
        "profiles": model::PROFILES,
        "table1": model::TABLE1,
        "energy": EnergyParams::default(),
        "configs": Fig7Config::ALL.iter().map(|&c| model::fig7(c, 32.0)).collect::<Vec<_>>(),
    });
    to_python(py, &v)
}

/// One study of a Fig. 7 configuration with `n_ch` channels running `kernel`: "evaluate" (Eq. 1: stages, t_total,
/// bandwidth, bottleneck), "energy" (§4.1: per-component J/B, EPB_comp/xfer, E_dyn, E_static, E_total) or
/// "partition" (§4.2: the static split between the iSSD and its host).
#[pyfunction]
#[pyo3(signature = (study, config, kernel, n_ch, data_bytes = 1e9, config_overrides = None, kernel_overrides = None, energy_overrides = None))]
#[allow(clippy::too_many_arguments)]
fn model_study<'py>(
    py: Python<'py>,
    study: &str,
    config: &str,
    kernel: &str,
    n_ch: f64,
    data_bytes: f64,
    config_overrides: Option<Vec<(String, f64)>>,
    kernel_overrides: Option<Vec<(String, f64)>>,
    energy_overrides: Option<Vec<(String, f64)>>,
) -> PyResult<Bound<'py, PyAny>> {
    let (c, k) = (self::config(config, n_ch, config_overrides)?, profile(kernel, kernel_overrides)?);
    let e = energy_params(energy_overrides)?;
    match study {
        "evaluate" => model_result(py, model::evaluate(&c, &k, data_bytes)),
        "energy" => model_result(py, model::energy(&c, &k, &e, data_bytes)),
        "partition" => model_result(py, model::partition(&c, &k, &e, data_bytes)),
        s => Err(err(format!("study {s:?} is not 'evaluate', 'energy' or 'partition'"))),
    }
}

/// Fig. 7 sweep, Fig. 8 iso-performance, Fig. 9 partitioning, Fig. 10 energy breakdown for a kernel.
#[pyfunction]
#[pyo3(signature = (figure, kernel, r_host = None))]
fn model_figure<'py>(py: Python<'py>, figure: u32, kernel: &str, r_host: Option<f64>) -> PyResult<Bound<'py, PyAny>> {
    let k = profile(kernel, None)?;
    match figure {
        7 => model_result(py, model::fig7_sweep(&k)),
        8 => model_result(py, model::fig8_iso(&k, r_host.unwrap_or(model::params::R_HOST_SATA))),
        9 => model_result(py, model::fig9_sweep(&k)),
        10 => model_result(py, model::fig10_breakdown(&k, &EnergyParams::default())),
        f => Err(err(format!("figure {f} is not one of 7, 8, 9, 10"))),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let sub = PyModule::new(m.py(), "issd")?;
    sub.add_function(wrap_pyfunction!(lineitem, &sub)?)?;
    sub.add_function(wrap_pyfunction!(lineitem_layout, &sub)?)?;
    sub.add_function(wrap_pyfunction!(pack_records, &sub)?)?;
    sub.add_function(wrap_pyfunction!(pack_lines, &sub)?)?;
    sub.add_function(wrap_pyfunction!(unpack, &sub)?)?;
    sub.add_function(wrap_pyfunction!(text, &sub)?)?;
    sub.add_function(wrap_pyfunction!(regression_points, &sub)?)?;
    sub.add_function(wrap_pyfunction!(pixels, &sub)?)?;
    sub.add_function(wrap_pyfunction!(cluster_points, &sub)?)?;
    sub.add_function(wrap_pyfunction!(labelled_records, &sub)?)?;
    sub.add_function(wrap_pyfunction!(kernel_names, &sub)?)?;
    sub.add_function(wrap_pyfunction!(run, &sub)?)?;
    sub.add_function(wrap_pyfunction!(map_chunk, &sub)?)?;
    sub.add_function(wrap_pyfunction!(reduce, &sub)?)?;
    sub.add_function(wrap_pyfunction!(kmeans, &sub)?)?;
    sub.add_function(wrap_pyfunction!(model_configs, &sub)?)?;
    sub.add_function(wrap_pyfunction!(model_parameters, &sub)?)?;
    sub.add_function(wrap_pyfunction!(model_study, &sub)?)?;
    sub.add_function(wrap_pyfunction!(model_figure, &sub)?)?;
    agent::register(&sub)?;
    columnar::register(&sub)?;
    sim::register(&sub)?;
    m.add_submodule(&sub)?;
    Ok(())
}
