//! Bindings of `nearflash-nice`: the ext4 learner and reader over an image file, NICE-K and NICE-C.

use nearflash_nice::cnn::{self, CnnParams};
use nearflash_nice::cnn_net;
use nearflash_nice::knn::{self, KnnParams, Width};
use nearflash_nice::learner::Learner;
use nearflash_nice::reader::Ext4Reader;
use nearflash_nice::source::{BlockSource, MemDisk};
use nearflash_nice::NiceError;
use pyo3::exceptions::{PyFileNotFoundError, PyOSError, PyPermissionError};
use pyo3::prelude::*;

use crate::convert::{err, to_python};
use crate::errors::ImageError;

fn to_py(e: NiceError) -> PyErr {
    match e {
        NiceError::Corrupt { .. } | NiceError::Unsupported(_) => ImageError::new_err(e.to_string()),
        NiceError::NotFound(_) => PyFileNotFoundError::new_err(e.to_string()),
        NiceError::PermissionDenied(_) => PyPermissionError::new_err(e.to_string()),
        _ => err(e),
    }
}

fn json_params(params: Option<&str>) -> PyResult<serde_json::Value> {
    match params {
        None => Ok(serde_json::json!({})),
        Some(s) => serde_json::from_str(s).map_err(|e| err(format!("params: {e}"))),
    }
}

fn image(path: &str, sector_size: u32) -> PyResult<Vec<u8>> {
    if sector_size < 512 || !sector_size.is_power_of_two() || sector_size > 65536 {
        return Err(err(format!("sector_size {sector_size}: a power of two in 512..=65536")));
    }
    let b = std::fs::read(path).map_err(|e| PyOSError::new_err(format!("{path}: {e}")))?;
    if b.is_empty() || b.len() % sector_size as usize != 0 {
        return Err(err(format!("image {path}: {} bytes is not whole {sector_size}-byte sectors", b.len())));
    }
    Ok(b)
}

/// Feeds an image's sectors to the firmware learner in `order` ("forward" or "backward") and returns what it learnt.
#[pyfunction]
#[pyo3(signature = (path, order = "forward", sector_size = 4096))]
fn learn_image<'py>(py: Python<'py>, path: &str, order: &str, sector_size: u32) -> PyResult<Bound<'py, PyAny>> {
    let bytes = image(path, sector_size)?;
    let n = bytes.len() as u64 / u64::from(sector_size);
    let mut learner = Learner::new(n, sector_size).map_err(to_py)?;
    let lbas: Vec<u64> = match order {
        "forward" => (0..n).collect(),
        "backward" => (0..n).rev().collect(),
        _ => return Err(err(format!("order {order:?}: 'forward' or 'backward'"))),
    };
    let mut disk = MemDisk::new(sector_size, n);
    let ss = sector_size as usize;
    for lba in lbas {
        let s = &bytes[lba as usize * ss..(lba as usize + 1) * ss];
        disk.write(lba, s);
        learner.ingest(lba, s, &mut disk).map_err(to_py)?;
    }
    let files: Vec<serde_json::Value> = learner
        .files()
        .map(|f| {
            serde_json::json!({"partition": f.partition, "inode": f.inode, "mode": f.mode, "uid": f.uid, "size": f.size,
                "is_dir": f.is_dir, "complete": f.complete, "lbas": f.lbas})
        })
        .collect();
    let parts: Vec<(u64, u64)> = learner.superblock_table().iter().map(|p| (p.start_lba, p.sectors)).collect();
    let errors: Vec<String> = learner.errors.iter().map(|e| e.to_string()).collect();
    to_python(py, &serde_json::json!({"files": files, "partitions": parts, "deferred_reads": learner.deferred_reads, "errors": errors}))
}

/// Looks `fs_path` up in the ext4 image: (inode, directory levels walked, data LBAs).
#[pyfunction]
#[pyo3(signature = (path, fs_path, start_lba = 0, sector_size = 4096))]
fn lookup(path: &str, fs_path: &str, start_lba: u64, sector_size: u32) -> PyResult<(u32, usize, Vec<u64>)> {
    let bytes = image(path, sector_size)?;
    let mut disk = MemDisk::from_image(sector_size, &bytes);
    let mut r = Ext4Reader::open(&mut disk, start_lba).map_err(to_py)?;
    let (ino, levels) = r.lookup(fs_path).map_err(to_py)?;
    let inode = r.inode(ino).map_err(to_py)?;
    Ok((ino, levels, r.file_lbas(&inode).map_err(to_py)?))
}

/// Sectors fetched by a Python callable `read(lba) -> bytes` (the host library reading the device, as a kernel fills
/// its page cache); the first error the callable raises is kept and re-raised.
struct PySource<'py> {
    read: Bound<'py, PyAny>,
    sector: u32,
    error: Option<PyErr>,
    lbas: Vec<u64>,
}

impl BlockSource for PySource<'_> {
    fn sector_size(&self) -> u32 {
        self.sector
    }
    fn read(&mut self, lba: u64) -> Option<Vec<u8>> {
        if self.error.is_some() {
            return None;
        }
        let got = self.read.call1((lba,)).and_then(|b| b.extract::<Vec<u8>>());
        match got {
            Ok(b) if b.len() == self.sector as usize => {
                self.lbas.push(lba);
                Some(b)
            }
            Ok(b) => {
                self.error = Some(err(format!("read({lba}) returned {} bytes, need {}", b.len(), self.sector)));
                None
            }
            Err(e) => {
                self.error = Some(e);
                None
            }
        }
    }
}

/// Looks `fs_path` up through `read(lba) -> bytes` (one sector per call; only the blocks the walk needs are asked
/// for): {inode, levels, mode, uid, size, is_dir, lbas (the file's data LBAs), reads (the sectors asked for, in
/// order)}.
#[pyfunction]
#[pyo3(signature = (read, fs_path, start_lba = 0, sector_size = 4096))]
fn lookup_via<'py>(py: Python<'py>, read: Bound<'py, PyAny>, fs_path: &str, start_lba: u64, sector_size: u32) -> PyResult<Bound<'py, PyAny>> {
    if sector_size < 512 || !sector_size.is_power_of_two() || sector_size > 65536 {
        return Err(err(format!("sector_size {sector_size}: a power of two in 512..=65536")));
    }
    if !read.is_callable() {
        return Err(err("read must be a callable read(lba) -> bytes"));
    }
    let mut src = PySource { read, sector: sector_size, error: None, lbas: Vec::new() };
    let found = (|| {
        let mut r = Ext4Reader::open(&mut src, start_lba)?;
        let (ino, levels) = r.lookup(fs_path)?;
        let inode = r.inode(ino)?;
        let lbas = if inode.is_regular() { r.file_lbas(&inode)? } else { Vec::new() };
        Ok::<_, NiceError>((ino, levels, inode, lbas))
    })();
    if let Some(e) = src.error.take() {
        return Err(e);
    }
    let (ino, levels, inode, lbas) = found.map_err(to_py)?;
    to_python(py, &serde_json::json!({"inode": ino, "levels": levels, "mode": inode.mode, "uid": inode.uid,
        "size": inode.size, "generation": inode.generation, "is_dir": inode.is_dir(), "lbas": lbas, "reads": src.lbas}))
}

/// NICE-K: the k nearest vectors of an embedding file (raw little-endian 16/32-bit integers) to `query`, as
/// (squared distance, exact, index) nearest first. `params` is a JSON object of NICE-K parameters.
#[pyfunction]
#[pyo3(signature = (data, dim, bits, query, k, params = None))]
fn knn_search(data: &[u8], dim: usize, bits: u32, query: Vec<i64>, k: usize, params: Option<&str>) -> PyResult<Vec<(u128, u32)>> {
    let p = KnnParams::from_json(&json_params(params)?).map_err(to_py)?;
    knn::knn(data, dim, Width::from_bits(bits).map_err(to_py)?, &query, k, &p).map_err(to_py)
}

/// NICE-K timing of one query over `n` vectors: cycle counts and seconds.
#[pyfunction]
#[pyo3(signature = (n, dim, bits, k, params = None))]
fn knn_timing<'py>(py: Python<'py>, n: u64, dim: usize, bits: u32, k: usize, params: Option<&str>) -> PyResult<Bound<'py, PyAny>> {
    let p = KnnParams::from_json(&json_params(params)?).map_err(to_py)?;
    if dim == 0 || k == 0 {
        return Err(err("dim and k must be at least 1"));
    }
    let t = knn::knn_timing(n, dim, Width::from_bits(bits).map_err(to_py)?, k, &p);
    to_python(py, &serde_json::json!({"distance_cycles": t.distance_cycles, "stream_cycles": t.stream_cycles,
        "selector_cycles": t.selector_cycles, "merge_cycles": t.merge_cycles, "total_cycles": t.total_cycles, "seconds": t.seconds}))
}

/// NICE-C timing of MobileNetV2 (224x224x3) for one batch.
#[pyfunction]
#[pyo3(signature = (batch, params = None))]
fn mobilenet_v2_timing<'py>(py: Python<'py>, batch: usize, params: Option<&str>) -> PyResult<Bound<'py, PyAny>> {
    let p = CnnParams::from_json(&json_params(params)?).map_err(to_py)?;
    let (shape, layers) = cnn::mobilenet_v2();
    let t = cnn::network_timing(shape, &layers, batch, &p).map_err(to_py)?;
    to_python(py, &serde_json::json!({"macs": t.macs, "weights": t.weights, "cycles": t.cycles, "seconds": t.seconds}))
}

/// The kernels a GPU runs for one image of a NICE-C network ("lenet5" or "mobilenet_v2"): per kernel its
/// multiply-adds, weights, input and output elements.
#[pyfunction]
fn network_kernels<'py>(py: Python<'py>, net: &str) -> PyResult<Bound<'py, PyAny>> {
    let id = net_id(net)?;
    let (shape, layers) = nearflash_nice::cnn_net::named(id).expect("ids 0 and 1 are named networks");
    let ks = nearflash_nice::cnn_net::kernels(shape, &layers).map_err(to_py)?;
    let v: Vec<_> = ks.iter().map(|k| serde_json::json!({"macs": k.macs, "weights": k.weights, "inputs": k.inputs, "outputs": k.outputs})).collect();
    to_python(py, &serde_json::Value::Array(v))
}

/// A NICE-C network's id (`cnn_net::named`) by name.
fn net_id(net: &str) -> PyResult<u8> {
    match net {
        "lenet5" => Ok(0),
        "mobilenet_v2" => Ok(1),
        o => Err(err(format!("net {o:?}: expected \"lenet5\" or \"mobilenet_v2\""))),
    }
}

/// The logits NICE-C's op 6 computes (one row per image) for network `net` over u8 images (whole frames in the
/// network's CHW shape, back to back) with its f32 weights file, in `precision` ("int8" or "f32").
#[pyfunction]
#[pyo3(signature = (net, weights, images, precision = "int8"))]
fn cnn_logits(py: Python<'_>, net: &str, weights: &[u8], images: &[u8], precision: &str) -> PyResult<Vec<Vec<f64>>> {
    let precision = cnn_net::Precision::parse(precision).map_err(to_py)?;
    let c = cnn_net::Classifier::new(net_id(net)?, weights, precision).map_err(to_py)?;
    if images.is_empty() || !images.len().is_multiple_of(c.frame()) {
        return Err(err(format!("images: {} bytes is not whole images of {} bytes", images.len(), c.frame())));
    }
    py.allow_threads(|| images.chunks_exact(c.frame()).map(|img| c.run(img).map(|r| r.0)).collect::<Result<_, _>>()).map_err(to_py)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let sub = PyModule::new(m.py(), "nice")?;
    sub.add_function(wrap_pyfunction!(learn_image, &sub)?)?;
    sub.add_function(wrap_pyfunction!(lookup, &sub)?)?;
    sub.add_function(wrap_pyfunction!(lookup_via, &sub)?)?;
    sub.add_function(wrap_pyfunction!(knn_search, &sub)?)?;
    sub.add_function(wrap_pyfunction!(knn_timing, &sub)?)?;
    sub.add_function(wrap_pyfunction!(mobilenet_v2_timing, &sub)?)?;
    sub.add_function(wrap_pyfunction!(network_kernels, &sub)?)?;
    sub.add_function(wrap_pyfunction!(cnn_logits, &sub)?)?;
    m.add_submodule(&sub)?;
    Ok(())
}
