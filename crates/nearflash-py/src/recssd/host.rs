//! Bindings of the RecSSD firmware extension and host library (`nearflash_recssd::firmware`, `::host`): the
//! extension builder for the registry, and `Host`, the host library's state on one Python `Device` (tables
//! placed and registered, host caches, worker queues) with single EmbeddingBag calls and whole batched runs.
//! Device faults raise `InvalidArgument` with the NVMe status and the firmware's fault; the GIL is released
//! while the device runs.

use super::{bag_ids, u64s, Ids};
use crate::convert::{err, fail, rows_array, to_python};
use crate::device::{device_mut, PyDevice};
use nearflash_core::Device;
use nearflash_recssd::host::jobs::SlsPath;
use nearflash_recssd::host::runner::{Batch, RecHost, RunOptions};
use nearflash_recssd::host::tables::{DeviceTables, TableData, TableSpec};
use nearflash_recssd::ndp_command::NdpFault;
use nearflash_core::config::ExtParams;
use nearflash_recssd::params::RecssdParams;
use numpy::{PyArray1, PyArray2, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// The parameters in force for `device` with `overrides`: name -> value in the declared unit's canonical form.
fn resolved(device: &Device, overrides: &serde_json::Value) -> PyResult<RecssdParams> {
    let mut p = RecssdParams::from_section(device.config().ext.get("recssd").and_then(|v| v.as_table())).map_err(fail)?;
    p.apply_json(overrides).map_err(fail)?;
    Ok(p)
}

/// (name, default, unit, source) of every RecSSD parameter.
#[pyfunction]
fn parameter_docs() -> Vec<(&'static str, &'static str, &'static str, &'static str)> {
    RecssdParams::DOCS.to_vec()
}

/// The `[ext.recssd]` section text with every default (value, unit, source).
#[pyfunction]
fn default_section() -> String {
    RecssdParams::section_toml()
}

/// What a firmware fault code (CQE dword 0) means.
#[pyfunction]
fn describe_fault(code: u32) -> Option<String> {
    NdpFault::from_code(code).map(|f| f.to_string())
}

fn path(name: &str) -> PyResult<SlsPath> {
    name.parse().map_err(fail)
}

fn json(py: Python<'_>, v: serde_json::Result<serde_json::Value>) -> PyResult<PyObject> {
    Ok(to_python(py, &v.map_err(err)?)?.unbind())
}

/// The host library on one device.
#[pyclass(module = "nearflash._native.recssd")]
pub struct Host {
    device: Py<PyDevice>,
    inner: RecHost,
}

impl Host {
    fn with_device<T>(&mut self, py: Python<'_>, f: impl FnOnce(&mut RecHost, &mut Device) -> PyResult<T> + Send) -> PyResult<T>
    where
        T: Send,
    {
        let mut guard = self.device.borrow_mut(py);
        let dev = device_mut(&mut guard)?;
        let inner = &mut self.inner;
        py.allow_threads(|| f(inner, dev))
    }
}

#[pymethods]
impl Host {
    /// Places `tables` (a list of `(rows, dim, values or None, seed)`; values: a float32 `rows x dim` array to
    /// store, None to generate rows from `seed`) on `device` (which must have the "recssd" extension attached)
    /// with `placement` ("packed" or "one_row_per_page"), registers them, and creates the worker queues. Rows are
    /// stored with `attribute_bytes`-byte elements: 4 fp32, 2 fp16, 1 int8 (Fig. 11a).
    #[new]
    #[pyo3(signature = (device, tables, placement = "packed", params = "{}", setup_queue = 1, attribute_bytes = 4))]
    fn new(
        py: Python<'_>,
        device: Py<PyDevice>,
        tables: Vec<(u64, u32, Option<PyReadonlyArray2<'_, f32>>, u64)>,
        placement: &str,
        params: &str,
        setup_queue: u16,
        attribute_bytes: u32,
    ) -> PyResult<Self> {
        let placement = super::placement(placement)?;
        let overrides: serde_json::Value = serde_json::from_str(params).map_err(err)?;
        let mut specs = Vec::with_capacity(tables.len());
        for (i, (rows, dim, values, seed)) in tables.into_iter().enumerate() {
            let data = match values {
                Some(a) => {
                    if a.shape() != [rows as usize, dim as usize] {
                        return Err(err(format!("table {i}: values of shape {:?}, expected ({rows}, {dim})", a.shape())));
                    }
                    TableData::Values(a.as_array().iter().copied().collect())
                }
                None => TableData::Generated { seed },
            };
            specs.push(TableSpec { rows, dim, data, attribute_bytes });
        }
        let inner = {
            let mut guard = device.borrow_mut(py);
            let dev = device_mut(&mut guard)?;
            let p = resolved(dev, &overrides)?;
            py.allow_threads(|| {
                let tables = DeviceTables::place(dev, specs, placement, &p, setup_queue)?;
                RecHost::new(dev, tables, p)
            })
            .map_err(fail)?
        };
        Ok(Self { device, inner })
    }

    /// One EmbeddingBag call: (pooled `bags x dim`, work counters, when each baseline read completed on the
    /// device in ns: int64, in completion order, empty on the other paths).
    #[pyo3(signature = (table, indices, offsets, path = "ndp"))]
    fn sls<'py>(
        &mut self,
        py: Python<'py>,
        table: usize,
        indices: Ids<'py>,
        offsets: Ids<'py>,
        path: &str,
    ) -> PyResult<(Bound<'py, PyArray2<f32>>, PyObject, Bound<'py, PyArray1<i64>>)> {
        let p = self::path(path)?;
        let (idx, offs) = bag_ids(&indices, &offsets)?;
        let dim = self.inner.tables.tables.get(table).ok_or_else(|| err(format!("no table {table}")))?.layout.dim();
        let (out, stats, done) = self.with_device(py, move |h, dev| h.sls(dev, table, idx, &offs, p).map_err(fail))?;
        let done: Vec<i64> = done.iter().map(|t| t.as_ns() as i64).collect();
        Ok((rows_array(py, out, dim as usize)?, json(py, serde_json::to_value(stats))?, PyArray1::from_vec(py, done)))
    }

    /// Runs batches (a list of batches, each a list over tables of `(indices, offsets)`) whose dense parts take
    /// `dense_flops[b]` FLOPs. Returns (timings `n x 3` int64 of taken / SLS done / done, outputs per batch per
    /// table or None, run statistics).
    #[pyo3(signature = (batches, dense_flops, path = "ndp", pipelined = false, keep_outputs = false))]
    fn run<'py>(
        &mut self,
        py: Python<'py>,
        batches: Vec<Vec<(Ids<'py>, Ids<'py>)>>,
        dense_flops: Vec<f64>,
        path: &str,
        pipelined: bool,
        keep_outputs: bool,
    ) -> PyResult<(Bound<'py, PyArray2<i64>>, PyObject, PyObject)> {
        let opts = RunOptions { path: self::path(path)?, pipelined, keep_outputs };
        let converted = batches
            .iter()
            .map(|b| Ok(Batch { tables: b.iter().map(|(i, o)| bag_ids(i, o)).collect::<PyResult<_>>()? }))
            .collect::<PyResult<Vec<_>>>()?;
        drop(batches);
        let r = self.with_device(py, move |h, dev| h.run(dev, &converted, &dense_flops, &opts).map_err(fail))?;
        let flat: Vec<i64> = r.batches.iter().flat_map(|b| [b.taken.as_ns() as i64, b.sls_done.as_ns() as i64, b.done.as_ns() as i64]).collect();
        let timings = rows_array(py, flat, 3)?;
        let outputs: PyObject = if keep_outputs {
            let dims: Vec<usize> = self.inner.tables.tables.iter().map(|t| t.layout.dim() as usize).collect();
            let list = PyList::empty(py);
            for per_batch in r.outputs.iter() {
                let tables = PyList::empty(py);
                for (t, v) in per_batch.iter().enumerate() {
                    tables.append(rows_array(py, v.clone(), dims[t])?)?;
                }
                list.append(tables)?;
            }
            list.into_any().unbind()
        } else {
            py.None()
        };
        Ok((timings, outputs, json(py, serde_json::to_value(&r))?))
    }

    /// Installs each table's static partition from its profile ids.
    fn set_partitions(&mut self, profiles: Vec<Ids<'_>>) -> PyResult<()> {
        let p: Vec<Vec<u64>> = profiles.iter().map(|a| u64s(a, "profile")).collect::<PyResult<_>>()?;
        self.inner.set_partitions(&p).map_err(fail)
    }

    fn clear_partitions(&mut self) {
        self.inner.clear_partitions();
    }

    /// Empties the host LRUs.
    fn reset_lru(&mut self) {
        self.inner.reset_lru();
    }

    /// Resizes (0 disables) the host LRUs, emptying them.
    fn set_lru_rows(&mut self, rows: usize) {
        self.inner.set_lru_rows(rows);
    }

    /// Worker queue ids.
    fn queues(&self) -> Vec<u16> {
        self.inner.queues().to_vec()
    }

    /// The tables: a list of dicts (id, start_lba, lbas, rows, dim, pages, placement, stored).
    fn tables<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for t in &self.inner.tables.tables {
            let d = PyDict::new(py);
            d.set_item("id", t.id)?;
            d.set_item("start_lba", t.layout.start_lba())?;
            d.set_item("lbas", t.layout.lbas())?;
            d.set_item("rows", t.layout.rows())?;
            d.set_item("dim", t.layout.dim())?;
            d.set_item("pages", t.layout.pages())?;
            d.set_item("placement", format!("{:?}", t.layout.placement()))?;
            d.set_item("stored", t.stored)?;
            d.set_item("attribute_bytes", t.layout.attribute_bytes())?;
            d.set_item("int8_scale", t.layout.format().map_or(0.0, |f| f.scale()))?;
            list.append(d)?;
        }
        Ok(list)
    }

    /// The parameters in force: name -> value in canonical units (ns, bytes, B/s, counts, cycles; flags 0/1).
    fn params(&self) -> Vec<(&'static str, f64)> {
        self.inner.params.values()
    }
}

pub fn register(sub: &Bound<'_, PyModule>) -> PyResult<()> {
    sub.add_class::<Host>()?;
    sub.add_function(wrap_pyfunction!(parameter_docs, sub)?)?;
    sub.add_function(wrap_pyfunction!(default_section, sub)?)?;
    sub.add_function(wrap_pyfunction!(describe_fault, sub)?)?;
    Ok(())
}
