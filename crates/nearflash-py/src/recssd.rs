//! Bindings of `nearflash_recssd` as the submodule `nearflash._native.recssd`: traces to numpy, SLS over numpy
//! (inputs borrowed without copies where dtype and layout allow; the GIL is released while computing), the NDP
//! wire format and functional engine, the caches and the static partition. Errors raise `InvalidArgument`.

mod host;


use std::collections::HashMap;

use crate::convert::{elements, err, rows_array};
use nearflash_recssd::host_cache::HostLru;
use nearflash_recssd::layout::{Placement, TableLayout};
use nearflash_recssd::ndp_exec::execute;
use nearflash_recssd::ndp_wire::{NdpConfig, WireLimits};
use nearflash_recssd::partition::HotRowPartition as RsPartition;
use nearflash_recssd::rowgen::GeneratedTable;
use nearflash_recssd::sls::{embedding_bag_sum, RowSource, TableView};
use nearflash_recssd::ssd_cache::{CacheStats, DirectMappedTags, SsdCacheConfig, SsdEmbeddingCache};
use nearflash_recssd::trace::{self, LocalityParams, LocalityTraceSpec, StackDistanceProfile};
use numpy::{
    AllowTypeChange, IntoPyArray, PyArray1, PyArray2, PyArrayLike1, PyReadonlyArray1, PyReadonlyArray2,
    PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

type Ids<'py> = PyArrayLike1<'py, i64, AllowTypeChange>;
type Counters = HashMap<&'static str, u64>;

fn to_u64(ids: &[i64], what: &str) -> PyResult<Vec<u64>> {
    ids.iter().map(|&i| u64::try_from(i).map_err(|_| err(format!("{what} contains the negative value {i}")))).collect()
}

/// An id array's elements as u64 (negative values are an error naming `what`).
fn u64s(ids: &Ids<'_>, what: &str) -> PyResult<Vec<u64>> {
    to_u64(&elements(ids), what)
}

fn to_u32(ids: &[i64], what: &str) -> PyResult<Vec<u32>> {
    ids.iter().map(|&i| u32::try_from(i).map_err(|_| err(format!("{what} value {i} is outside 0..2^32")))).collect()
}

/// Row ids (or any u64s) as an int64 numpy array.
fn i64_array<'py>(py: Python<'py>, values: impl IntoIterator<Item = u64>) -> Bound<'py, PyArray1<i64>> {
    values.into_iter().map(|v| v as i64).collect::<Vec<_>>().into_pyarray(py)
}

/// An EmbeddingBag call's (indices, offsets) as u64 vectors.
fn bag_ids(indices: &Ids<'_>, offsets: &Ids<'_>) -> PyResult<(Vec<u64>, Vec<u64>)> {
    Ok((u64s(indices, "indices")?, u64s(offsets, "offsets")?))
}

/// The NDP config of an EmbeddingBag call on `table_id` (pairs sorted by input id).
fn bags_config(table_id: u32, dim: u32, indices: &Ids<'_>, offsets: &Ids<'_>) -> PyResult<NdpConfig> {
    let (idx, offs) = (to_u32(&elements(indices), "indices")?, to_u32(&elements(offsets), "offsets")?);
    NdpConfig::from_bags(table_id, dim, &idx, &offs).map_err(err)
}

fn stats_dict(s: CacheStats) -> Counters {
    HashMap::from([("hits", s.hits), ("misses", s.misses), ("fills", s.fills), ("evictions", s.evictions)])
}

/// The `#[pymethods]` of a class whose `inner` counts hits and misses (caches, the static partition): the
/// class's own methods plus `stats()` (hits, misses, fills, evictions) and `reset_stats()`.
macro_rules! counted_pymethods {
    ($class:ident { $($methods:tt)* }) => {
        #[pymethods]
        impl $class {
            $($methods)*

            /// Counters: hits, misses, fills, evictions.
            fn stats(&self) -> Counters {
                stats_dict(self.inner.stats())
            }
            fn reset_stats(&mut self) {
                self.inner.reset_stats();
            }
        }
    };
}

fn placement(name: &str) -> PyResult<Placement> {
    match name {
        "packed" => Ok(Placement::Packed),
        "one_row_per_page" => Ok(Placement::OneRowPerPage),
        _ => Err(err(format!("placement {name:?} is not 'packed' or 'one_row_per_page'"))),
    }
}

/// Stack-distance CDF of the artifact's exponential profile for locality K.
#[pyfunction]
#[pyo3(signature = (k, seed, samples = trace::ARTIFACT_SAMPLES, bins = trace::ARTIFACT_BINS, scale = trace::ARTIFACT_SCALE))]
fn stack_distance_cdf(
    py: Python<'_>,
    k: f64,
    seed: u64,
    samples: usize,
    bins: usize,
    scale: f64,
) -> PyResult<Bound<'_, PyArray1<f64>>> {
    let p = StackDistanceProfile::exponential(&LocalityParams { k, samples, bins, scale }, seed).map_err(err)?;
    Ok(PyArray1::from_slice(py, p.cdf()))
}

/// Locality traces of several tables (one stream each, generated in parallel): a list of (ids, new_references).
#[pyfunction]
#[pyo3(signature = (table_rows, lookups_per_sample, accesses, k, seed, line_rows = trace::ARTIFACT_LINE_ROWS, warmup = None))]
#[allow(clippy::too_many_arguments)]
fn locality_traces<'py>(
    py: Python<'py>,
    table_rows: Vec<u64>,
    lookups_per_sample: usize,
    accesses: usize,
    k: f64,
    seed: u64,
    line_rows: u64,
    warmup: Option<usize>,
) -> PyResult<Vec<(Bound<'py, PyArray1<i64>>, usize)>> {
    let specs: Vec<LocalityTraceSpec> = table_rows
        .iter()
        .map(|&rows| LocalityTraceSpec {
            table_rows: rows,
            lookups_per_sample,
            line_rows,
            accesses,
            warmup: warmup.unwrap_or(accesses),
        })
        .collect();
    let traces = py
        .allow_threads(|| {
            let p = StackDistanceProfile::exponential(&LocalityParams::artifact(k), seed)?;
            trace::locality_traces(&p, &specs, seed)
        })
        .map_err(err)?;
    Ok(traces
        .into_iter()
        .map(|t| (i64_array(py, t.ids), t.new_references))
        .collect())
}

/// `bags x lookups` uniform ids, distinct and sorted within each bag.
#[pyfunction]
fn uniform_bags(
    py: Python<'_>,
    rows: u64,
    bags: usize,
    lookups: usize,
    seed: u64,
) -> PyResult<Bound<'_, PyArray1<i64>>> {
    Ok(i64_array(py, trace::uniform_bags(rows, bags, lookups, seed).map_err(err)?))
}

/// SEQ (stride 1) or STR microbenchmark ids: `first + n x stride` over the whole batch.
#[pyfunction]
#[pyo3(signature = (rows, bags, lookups, first = trace::MICROBENCH_FIRST_ID, stride = 1))]
fn strided_bags(
    py: Python<'_>,
    rows: u64,
    bags: usize,
    lookups: usize,
    first: u64,
    stride: u64,
) -> PyResult<Bound<'_, PyArray1<i64>>> {
    Ok(i64_array(py, trace::strided_bags(rows, bags, lookups, first, stride).map_err(err)?))
}

/// Stride putting every id on its own page.
#[pyfunction]
#[pyo3(signature = (row_bytes, page_bytes = 16384))]
fn one_row_per_page_stride(row_bytes: u64, page_bytes: u64) -> u64 {
    trace::one_row_per_page_stride(row_bytes, page_bytes)
}

/// A C-contiguous float32 `rows x dim` numpy table, borrowed.
fn table_view<'a>(table: &'a PyReadonlyArray2<'_, f32>) -> PyResult<TableView<'a>> {
    let (rows, dim) = (table.shape()[0], table.shape()[1]);
    let data = table.as_slice().map_err(|_| err("table must be a C-contiguous float32 array"))?;
    TableView::new(data, rows, dim).map_err(err)
}

fn run_sls<T: RowSource>(
    py: Python<'_>,
    table: &T,
    indices: &Ids<'_>,
    offsets: &Ids<'_>,
    weights: Option<&PyReadonlyArray1<'_, f32>>,
    include_last_offset: bool,
) -> PyResult<Vec<f32>> {
    let (idx, offs) = (elements(indices), elements(offsets));
    let w = weights.map(elements);
    py.allow_threads(|| embedding_bag_sum(table, &idx, &offs, w.as_deref(), include_last_offset)).map_err(err)
}

/// EmbeddingBag(mode="sum") over a C-contiguous float32 `rows x dim` table (PyTorch offsets convention).
#[pyfunction]
#[pyo3(signature = (table, indices, offsets, per_sample_weights = None, include_last_offset = false))]
fn sls<'py>(
    py: Python<'py>,
    table: PyReadonlyArray2<'py, f32>,
    indices: Ids<'py>,
    offsets: Ids<'py>,
    per_sample_weights: Option<PyReadonlyArray1<'py, f32>>,
    include_last_offset: bool,
) -> PyResult<Bound<'py, PyArray2<f32>>> {
    let tv = table_view(&table)?;
    let dim = tv.dim();
    let out = run_sls(py, &tv, &indices, &offsets, per_sample_weights.as_ref(), include_last_offset)?;
    rows_array(py, out, dim)
}

/// EmbeddingBag(mode="sum") over a generated table (rows computed from seed and table id).
#[pyfunction]
#[pyo3(signature = (seed, table_id, rows, dim, indices, offsets, per_sample_weights = None, include_last_offset = false))]
#[allow(clippy::too_many_arguments)]
fn sls_generated<'py>(
    py: Python<'py>,
    seed: u64,
    table_id: u32,
    rows: usize,
    dim: usize,
    indices: Ids<'py>,
    offsets: Ids<'py>,
    per_sample_weights: Option<PyReadonlyArray1<'py, f32>>,
    include_last_offset: bool,
) -> PyResult<Bound<'py, PyArray2<f32>>> {
    let t = GeneratedTable::new(seed, table_id, rows, dim).map_err(err)?;
    let out = run_sls(py, &t, &indices, &offsets, per_sample_weights.as_ref(), include_last_offset)?;
    rows_array(py, out, dim)
}

/// Rows of a generated table, `len(ids) x dim`.
#[pyfunction]
fn generated_rows<'py>(
    py: Python<'py>,
    seed: u64,
    table_id: u32,
    rows: usize,
    dim: usize,
    ids: Ids<'py>,
) -> PyResult<Bound<'py, PyArray2<f32>>> {
    let t = GeneratedTable::new(seed, table_id, rows, dim).map_err(err)?;
    let ids = u64s(&ids, "ids")?;
    let out = py.allow_threads(|| t.gather(&ids)).map_err(err)?;
    rows_array(py, out, dim)
}

/// The NDP config payload of an EmbeddingBag request (pairs sorted by input id).
#[pyfunction]
fn ndp_encode<'py>(
    py: Python<'py>,
    table_id: u32,
    dim: u32,
    indices: Ids<'py>,
    offsets: Ids<'py>,
) -> PyResult<Bound<'py, PyBytes>> {
    let cfg = bags_config(table_id, dim, &indices, &offsets)?;
    Ok(PyBytes::new(py, &cfg.encode().map_err(err)?))
}

/// Decodes (and, with `table_rows`, validates) an NDP config payload: a dict of the header fields and an
/// `n x 2` uint32 array of (result, input) pairs.
#[pyfunction]
#[pyo3(signature = (payload, table_rows = None))]
fn ndp_decode<'py>(
    py: Python<'py>,
    payload: &[u8],
    table_rows: Option<u64>,
) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
    let cfg = match table_rows {
        Some(rows) => NdpConfig::decode_validated(payload, &WireLimits::default(), rows),
        None => NdpConfig::decode(payload),
    }
    .map_err(err)?;
    let d = pyo3::types::PyDict::new(py);
    d.set_item("attribute_size", cfg.attribute_size)?;
    d.set_item("embedding_length", cfg.embedding_length)?;
    d.set_item("result_embeddings", cfg.result_embeddings)?;
    d.set_item("input_embeddings", cfg.pairs.len())?;
    d.set_item("table_id", cfg.table_id)?;
    let flat: Vec<u32> = cfg.pairs.iter().flat_map(|p| [p.result, p.input]).collect();
    d.set_item("pairs", rows_array(py, flat, 2)?)?;
    Ok(d)
}

/// SSD-side direct-mapped cache with row payloads (for `ndp_sls`).
#[pyclass(module = "nearflash._native.recssd")]
struct SsdCache {
    inner: SsdEmbeddingCache,
}

counted_pymethods! {
    SsdCache {
        #[new]
        #[pyo3(signature = (index_bits = 20, tag_bits = 12, table_bits = 5, payload_bytes = 128))]
        fn new(index_bits: u32, tag_bits: u32, table_bits: u32, payload_bytes: u32) -> PyResult<Self> {
            let cfg = SsdCacheConfig { index_bits, tag_bits, table_bits, payload_bytes };
            Ok(Self { inner: SsdEmbeddingCache::new(cfg).map_err(err)? })
        }
        /// Controller DRAM the cache occupies, bytes.
        fn footprint_bytes(&self) -> u64 {
            self.inner.config().footprint_bytes()
        }
    }
}

/// SSD-side direct-mapped cache, tags only (hit-rate studies).
#[pyclass(module = "nearflash._native.recssd")]
struct SsdCacheTags {
    inner: DirectMappedTags,
}

counted_pymethods! {
    SsdCacheTags {
        #[new]
        #[pyo3(signature = (index_bits = 20, tag_bits = 12, table_bits = 5, payload_bytes = 128))]
        fn new(index_bits: u32, tag_bits: u32, table_bits: u32, payload_bytes: u32) -> PyResult<Self> {
            let cfg = SsdCacheConfig { index_bits, tag_bits, table_bits, payload_bytes };
            Ok(Self { inner: DirectMappedTags::new(cfg).map_err(err)? })
        }
        /// Probe-then-fill each id of `table`; a bool array of hits.
        fn access<'py>(&mut self, py: Python<'py>, table: u32, ids: Ids<'py>) -> PyResult<Bound<'py, PyArray1<bool>>> {
            let ids = u64s(&ids, "ids")?;
            let hits: Result<Vec<bool>, _> = ids.iter().map(|&r| self.inner.access(table, r)).collect();
            Ok(hits.map_err(err)?.into_pyarray(py))
        }
        fn footprint_bytes(&self) -> u64 {
            self.inner.config().footprint_bytes()
        }
    }
}

/// Functional NDP SLS: encodes the request, decodes and validates it as the FTL would, reads the table's pages
/// (rendered from `table` per `placement`), translates them. Returns (pooled, stats dict).
#[pyfunction]
#[pyo3(signature = (table, indices, offsets, placement = "packed", table_id = 0, cache = None))]
fn ndp_sls<'py>(
    py: Python<'py>,
    table: PyReadonlyArray2<'py, f32>,
    indices: Ids<'py>,
    offsets: Ids<'py>,
    placement: &str,
    table_id: u32,
    mut cache: Option<PyRefMut<'py, SsdCache>>,
) -> PyResult<(Bound<'py, PyArray2<f32>>, Counters)> {
    let tv = table_view(&table)?;
    let dim = tv.dim();
    let layout = TableLayout::fp32(0, tv.rows() as u64, u32::try_from(dim).map_err(err)?, self::placement(placement)?)
        .map_err(err)?;
    let cfg = bags_config(table_id, dim as u32, &indices, &offsets)?;
    let wire = NdpConfig::decode(&cfg.encode().map_err(err)?).map_err(err)?;
    let c = cache.as_deref_mut().map(|c| &mut c.inner);
    let req = execute(wire, &layout, &WireLimits::default(), c, |p, buf| layout.render_page(&tv, p, buf))
        .map_err(err)?
        .map_err(err)?;
    let s = req.stats();
    let stats = HashMap::from([
        ("pairs", s.pairs),
        ("cache_hits", s.cache_hits),
        ("pages", s.pages),
        ("rows_from_flash", s.rows_from_flash),
        ("result_sectors", req.result_sectors() as u64),
    ]);
    Ok((rows_array(py, req.result().to_vec(), dim)?, stats))
}

/// Flash page of each id under a layout of `rows x dim` fp32 rows.
#[pyfunction]
#[pyo3(signature = (ids, rows, dim, placement = "packed"))]
fn pages_of<'py>(
    py: Python<'py>,
    ids: Ids<'py>,
    rows: u64,
    dim: u32,
    placement: &str,
) -> PyResult<Bound<'py, PyArray1<i64>>> {
    let layout = TableLayout::fp32(0, rows, dim, self::placement(placement)?).map_err(err)?;
    let pages: Result<Vec<i64>, _> =
        u64s(&ids, "ids")?.iter().map(|&r| layout.page_of(r).map(|p| p as i64)).collect();
    Ok(pages.map_err(err)?.into_pyarray(py))
}

/// The baseline's fully associative host LRU (capacity in rows).
#[pyclass(module = "nearflash._native.recssd")]
struct HostLruCache {
    inner: HostLru<()>,
}

counted_pymethods! {
    HostLruCache {
        #[new]
        fn new(capacity: usize) -> PyResult<Self> {
            Ok(Self { inner: HostLru::new(capacity).map_err(err)? })
        }
        /// One baseline lookup per key (hit, or miss and insert); a bool array of hits.
        fn access<'py>(&mut self, py: Python<'py>, keys: Ids<'py>) -> PyResult<Bound<'py, PyArray1<bool>>> {
            let keys = u64s(&keys, "keys")?;
            Ok(keys.iter().map(|&k| self.inner.access(k)).collect::<Vec<_>>().into_pyarray(py))
        }
        fn __len__(&self) -> usize {
            self.inner.len()
        }
    }
}

/// Static partition of a table's hottest rows into host DRAM.
#[pyclass(module = "nearflash._native.recssd")]
struct HotRowPartition {
    inner: RsPartition,
}

counted_pymethods! {
    HotRowPartition {
        /// The `capacity` most frequent ids of `profile` (ties: smaller id).
        #[new]
        #[pyo3(signature = (profile, capacity = nearflash_recssd::partition::ARTIFACT_PARTITION_ROWS))]
        fn new(profile: Ids<'_>, capacity: usize) -> PyResult<Self> {
            Ok(Self { inner: RsPartition::profile(&u64s(&profile, "profile")?, capacity) })
        }
        /// Host-resident rows, hottest first (a row's position is its slot).
        fn rows<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i64>> {
            i64_array(py, self.inner.rows().iter().copied())
        }
        /// Which ids are host-resident.
        fn contains<'py>(&self, py: Python<'py>, ids: Ids<'py>) -> PyResult<Bound<'py, PyArray1<bool>>> {
            let ids = u64s(&ids, "ids")?;
            Ok(ids.iter().map(|&r| self.inner.contains(r)).collect::<Vec<_>>().into_pyarray(py))
        }
        /// Splits a request: (host_slots, host_offsets, ndp_indices, ndp_offsets).
        #[allow(clippy::type_complexity)]
        fn split<'py>(
            &mut self,
            py: Python<'py>,
            indices: Ids<'py>,
            offsets: Ids<'py>,
        ) -> PyResult<(
            Bound<'py, PyArray1<i64>>,
            Bound<'py, PyArray1<i64>>,
            Bound<'py, PyArray1<i64>>,
            Bound<'py, PyArray1<i64>>,
        )> {
            let s = self.inner.split(&elements(&indices), &elements(&offsets)).map_err(err)?;
            Ok((i64_array(py, s.host_slots), i64_array(py, s.host_offsets), i64_array(py, s.ndp_indices), i64_array(py, s.ndp_offsets)))
        }
        fn __len__(&self) -> usize {
            self.inner.len()
        }
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let sub = PyModule::new(m.py(), "recssd")?;
    sub.add_function(wrap_pyfunction!(stack_distance_cdf, &sub)?)?;
    sub.add_function(wrap_pyfunction!(locality_traces, &sub)?)?;
    sub.add_function(wrap_pyfunction!(uniform_bags, &sub)?)?;
    sub.add_function(wrap_pyfunction!(strided_bags, &sub)?)?;
    sub.add_function(wrap_pyfunction!(one_row_per_page_stride, &sub)?)?;
    sub.add_function(wrap_pyfunction!(sls, &sub)?)?;
    sub.add_function(wrap_pyfunction!(sls_generated, &sub)?)?;
    sub.add_function(wrap_pyfunction!(generated_rows, &sub)?)?;
    sub.add_function(wrap_pyfunction!(ndp_encode, &sub)?)?;
    sub.add_function(wrap_pyfunction!(ndp_decode, &sub)?)?;
    sub.add_function(wrap_pyfunction!(ndp_sls, &sub)?)?;
    sub.add_function(wrap_pyfunction!(pages_of, &sub)?)?;
    sub.add_class::<SsdCache>()?;
    sub.add_class::<SsdCacheTags>()?;
    sub.add_class::<HostLruCache>()?;
    sub.add_class::<HotRowPartition>()?;
    host::register(&sub)?;
    m.add_submodule(&sub)?;
    Ok(())
}
