//! Bindings of `nearflash_core::device` and `bench`: the `Device` class. Data moves between numpy arrays and the
//! device without copies (reads land directly in the caller's array, writes are taken from it); long runs release
//! the GIL. NVMe statuses come back as values `(sct, sc)`; misuse raises.

use crate::errors::to_py;
use crate::extensions;
use nearflash_core::bench::{self, Pattern, Workload};
use nearflash_core::config::{load_preset, ConfigTree};
use nearflash_core::nvme::DataBuf;
use nearflash_core::ftl::FillPattern;
use nearflash_core::image::Durability;
use nearflash_core::nvme::{opcode, pages, Sqe, SQE_BYTES};
use nearflash_core::{Device, DeviceOptions, SimError};
use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1, PyReadwriteArray1};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use std::path::PathBuf;

/// A completion as Python sees it: (cid, sct, sc, dw0, completion time ns).
type PyCompletion = (u16, u8, u8, u32, u64);

#[pyclass(name = "Device", module = "nearflash._native")]
pub struct PyDevice {
    inner: Option<Device>,
}

/// The device behind a Python handle (for other binding modules: extensions drive the device in Rust).
pub fn device_mut(d: &mut PyDevice) -> PyResult<&mut Device> {
    d.inner.as_mut().ok_or_else(|| to_py(SimError::InvalidArgument("the device is closed".into())))
}

fn durability(s: &str) -> PyResult<Durability> {
    match s {
        "process" => Ok(Durability::Process),
        "fsync" => Ok(Durability::Fsync),
        _ => Err(to_py(SimError::Config(format!("durability {s:?}: expected process or fsync")))),
    }
}

fn tree(preset: &str, overrides: Vec<(String, String)>) -> PyResult<ConfigTree> {
    let mut t = load_preset(preset).map_err(to_py)?;
    for (k, v) in overrides {
        t.set(&k, &v).map_err(to_py)?;
    }
    Ok(t)
}

fn bytes_of<'a>(a: &'a PyReadonlyArray1<'_, u8>) -> PyResult<&'a [u8]> {
    a.as_slice().map_err(|_| to_py(SimError::InvalidArgument("data must be a contiguous uint8 array".into())))
}

fn invalid(msg: String) -> PyErr {
    to_py(SimError::InvalidArgument(msg))
}

/// A writable view of an output array (a read-only array is an error, not a panic).
fn writable<'py>(a: &Bound<'py, PyArray1<u8>>, what: &str) -> PyResult<PyReadwriteArray1<'py, u8>> {
    a.try_readwrite()
        .map_err(|_| invalid(format!("{what} must be a writable array (it is read-only or already borrowed)")))
}

/// The block count of a Read or Write: one command carries 1 to 65,536 blocks (NLB is a 16-bit field + 1).
fn check_nlb(nlb: u32) -> PyResult<()> {
    if nlb == 0 || nlb > nearflash_core::nvme::MAX_NLB {
        return Err(invalid(format!("nlb {nlb}: a command carries 1 to {} blocks", nearflash_core::nvme::MAX_NLB)));
    }
    Ok(())
}

/// Largest log page a host may fetch through `log_page` (the device's pages are far smaller).
const MAX_LOG_PAGE_BYTES: usize = 16 << 20;

#[pymethods]
impl PyDevice {
    /// Creates a device: in directory `path` (an image) or in memory (`path` None).
    #[staticmethod]
    #[pyo3(signature = (path, preset, overrides, seed = 1, materialise = true, durability_mode = "process", memory_limit = None))]
    #[allow(clippy::too_many_arguments)]
    fn create(
        py: Python<'_>,
        path: Option<PathBuf>,
        preset: &str,
        overrides: Vec<(String, String)>,
        seed: u64,
        materialise: bool,
        durability_mode: &str,
        memory_limit: Option<u64>,
    ) -> PyResult<Self> {
        let t = tree(preset, overrides)?;
        if memory_limit.is_some() && path.is_some() {
            return Err(invalid("memory_limit bounds an in-memory device's data: give no path".into()));
        }
        let opts = DeviceOptions { seed, materialise, durability: durability(durability_mode)?, memory_limit };
        let dev = py
            .allow_threads(|| match path {
                Some(p) => Device::create(&p, t, opts),
                None => Device::memory(t, opts),
            })
            .map_err(to_py)?;
        Ok(PyDevice { inner: Some(dev) })
    }

    /// Repairs a damaged image in place; returns the JSON report (actions, unrecoverable, lost LBA ranges).
    #[staticmethod]
    fn repair(py: Python<'_>, path: PathBuf) -> PyResult<String> {
        let r = py.allow_threads(|| Device::repair(&path)).map_err(to_py)?;
        Ok(serde_json::to_string(&r).expect("report serializes"))
    }

    /// Opens an existing image (recovering after a crash).
    #[staticmethod]
    #[pyo3(signature = (path, seed = 1, durability_mode = "process"))]
    fn open(py: Python<'_>, path: PathBuf, seed: u64, durability_mode: &str) -> PyResult<Self> {
        let opts = DeviceOptions { seed, durability: durability(durability_mode)?, ..Default::default() };
        let dev = py.allow_threads(|| Device::open(&path, opts)).map_err(to_py)?;
        Ok(PyDevice { inner: Some(dev) })
    }

    /// Attaches a firmware extension by name with JSON parameters.
    fn attach(&mut self, name: &str, params_json: &str) -> PyResult<()> {
        let params: serde_json::Value = serde_json::from_str(params_json)
            .map_err(|e| to_py(SimError::Config(format!("extension parameters: {e}"))))?;
        let dev = device_mut(self)?;
        let ext = extensions::build(name, &params, dev)?;
        dev.attach(ext).map_err(to_py)
    }

    #[getter]
    fn lba_bytes(&mut self) -> PyResult<u64> {
        Ok(device_mut(self)?.lba_bytes())
    }

    #[getter]
    fn lbas(&mut self) -> PyResult<u64> {
        Ok(device_mut(self)?.namespace().lbas)
    }

    #[getter]
    fn max_lbas_per_command(&mut self) -> PyResult<u32> {
        Ok(device_mut(self)?.namespace().max_lbas)
    }

    #[getter]
    fn now_ns(&mut self) -> PyResult<u64> {
        Ok(device_mut(self)?.now().as_ns())
    }

    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_none()
    }

    /// The resolved configuration as (path, value, unit, source) tuples.
    fn params(&mut self) -> PyResult<Vec<(String, String, String, String)>> {
        let d = device_mut(self)?;
        Ok(d.config_tree().docs().into_iter().map(|p| (p.path, p.value, p.unit, p.source)).collect())
    }

    fn preset_name(&mut self) -> PyResult<String> {
        Ok(device_mut(self)?.config_tree().meta("name").unwrap_or("custom").to_string())
    }

    /// What recovery did at open, as JSON (None after a clean shutdown).
    fn recovery_json(&mut self) -> PyResult<Option<String>> {
        Ok(device_mut(self)?.recovery().map(|r| serde_json::to_string(r).expect("serializes")))
    }

    /// Moves the host clock forward by `ns` (think time).
    fn advance(&mut self, ns: u64) -> PyResult<()> {
        let d = device_mut(self)?;
        let t = d.now().checked_add_ns(ns).ok_or_else(|| invalid(format!("advance by {ns} ns overflows the clock")))?;
        d.advance_to(t);
        Ok(())
    }

    /// A queue pair; `priority` (urgent, high, medium, low: the submission queue's QPRIO) is the class of its
    /// commands' flash work.
    #[pyo3(signature = (qid, depth, priority = "medium"))]
    fn create_queue(&mut self, qid: u16, depth: u32, priority: &str) -> PyResult<()> {
        let prio: nearflash_core::ctrl::sched::Priority = priority.parse().map_err(to_py)?;
        device_mut(self)?.create_queue_pair_with(qid, depth, prio).map_err(to_py)
    }

    fn delete_queue(&mut self, qid: u16) -> PyResult<()> {
        device_mut(self)?.delete_queue_pair(qid).map_err(to_py)
    }

    /// Identifiers of the I/O queues that exist on the device, whoever created them.
    fn io_queue_ids(&mut self) -> PyResult<Vec<u16>> {
        Ok(device_mut(self)?.io_queue_ids())
    }

    /// Entries of I/O queue `qid`, or None if it does not exist.
    fn queue_depth(&mut self, qid: u16) -> PyResult<Option<u32>> {
        Ok(device_mut(self)?.queue_depth(qid))
    }

    /// Whether command `cid` on `qid` was taken and not reaped yet (a submit that raised may still complete).
    fn in_flight(&mut self, qid: u16, cid: u16) -> PyResult<bool> {
        Ok(device_mut(self)?.is_in_flight(qid, cid))
    }

    fn next_cid(&mut self, qid: u16) -> PyResult<u16> {
        Ok(device_mut(self)?.next_cid(qid))
    }

    /// Submits a Read of `nlb` blocks into `out` (None: timing only).
    #[pyo3(signature = (qid, cid, slba, nlb, out = None))]
    fn submit_read(
        &mut self,
        qid: u16,
        cid: u16,
        slba: u64,
        nlb: u32,
        out: Option<Bound<'_, PyArray1<u8>>>,
    ) -> PyResult<()> {
        check_nlb(nlb)?;
        let mut out = out.as_ref().map(|a| writable(a, "out")).transpose()?;
        let lba_bytes = device_mut(self)?.lba_bytes();
        if let Some(a) = &out {
            let n = a.as_array().len() as u64;
            if n < u64::from(nlb) * lba_bytes {
                return Err(invalid(format!("out holds {n} bytes, less than {nlb} blocks of {lba_bytes} B")));
            }
        }
        let data = match out.as_mut() {
            Some(a) => DataBuf::FromDevice(
                a.as_slice_mut().map_err(|_| to_py(SimError::InvalidArgument("out must be a contiguous uint8 array".into())))?,
            ),
            None => DataBuf::None,
        };
        let sqe = Sqe { cid, ..Sqe::rw(opcode::READ, cid, slba, nlb) };
        device_mut(self)?.submit(qid, sqe, data).map_err(to_py)
    }

    /// Submits a Write of `nlb` blocks from `data` (None: timing only).
    #[pyo3(signature = (qid, cid, slba, nlb, data = None, fua = false))]
    fn submit_write(
        &mut self,
        qid: u16,
        cid: u16,
        slba: u64,
        nlb: u32,
        data: Option<PyReadonlyArray1<'_, u8>>,
        fua: bool,
    ) -> PyResult<()> {
        check_nlb(nlb)?;
        let lba_bytes = device_mut(self)?.lba_bytes();
        if let Some(a) = &data {
            let n = a.as_array().len() as u64;
            if n != u64::from(nlb) * lba_bytes {
                return Err(invalid(format!("data holds {n} bytes, not {nlb} blocks of {lba_bytes} B")));
            }
        }
        let buf = match data.as_ref() {
            Some(a) => DataBuf::ToDevice(bytes_of(a)?),
            None => DataBuf::None,
        };
        let mut sqe = Sqe::rw(opcode::WRITE, cid, slba, nlb);
        if fua {
            sqe.cdw12 |= 1 << 30;
        }
        device_mut(self)?.submit(qid, sqe, buf).map_err(to_py)
    }

    /// Submits a raw 64-byte SQE as it is (its command id included); `data` goes to the device (`to_device`: any
    /// contiguous uint8 array, read-only ones too) or receives data from it (a writable one).
    #[pyo3(signature = (qid, sqe, data = None, to_device = true))]
    fn submit_raw(&mut self, qid: u16, sqe: &[u8], data: Option<Bound<'_, PyArray1<u8>>>, to_device: bool) -> PyResult<()> {
        let raw: &[u8; SQE_BYTES] = sqe
            .try_into()
            .map_err(|_| to_py(SimError::InvalidArgument(format!("an SQE is {SQE_BYTES} bytes, got {}", sqe.len()))))?;
        let (src, mut dst) = match &data {
            None => (None, None),
            Some(a) if to_device => (Some(a.try_readonly().map_err(|_| invalid("data is being written elsewhere".into()))?), None),
            Some(a) => (None, Some(writable(a, "data")?)),
        };
        let buf = match (&src, dst.as_mut()) {
            (Some(a), _) => DataBuf::ToDevice(bytes_of(a)?),
            (None, Some(a)) => DataBuf::FromDevice(a.as_slice_mut().map_err(|_| invalid("data must be a contiguous uint8 array".into()))?),
            (None, None) => DataBuf::None,
        };
        device_mut(self)?.submit(qid, Sqe::from_bytes(raw), buf).map_err(to_py)
    }

    /// The device's reason for failed command `cid` on `qid` (its error log, read with Get Log Page 0xC1 on the
    /// admin queue, which the device models as any command), or None.
    fn error_reason(&mut self, qid: u16, cid: u16) -> PyResult<Option<String>> {
        Ok(device_mut(self)?.error_reason(qid, cid))
    }

    /// Completions on `qid` up to now.
    fn reap(&mut self, qid: u16) -> PyResult<Vec<PyCompletion>> {
        let d = device_mut(self)?;
        let mut out = Vec::new();
        while let Some(c) = d.reap(qid) {
            let s = c.cqe.status();
            out.push((c.cqe.cid, s.sct, s.sc, c.cqe.dw0, c.time.as_ns()));
        }
        Ok(out)
    }

    /// The next completion on `qid`, advancing the clock to it (None if nothing is in flight).
    fn wait(&mut self, qid: u16) -> PyResult<Option<PyCompletion>> {
        let d = device_mut(self)?;
        Ok(d.wait(qid).map(|c| {
            let s = c.cqe.status();
            (c.cqe.cid, s.sct, s.sc, c.cqe.dw0, c.time.as_ns())
        }))
    }

    fn outstanding(&mut self, qid: u16) -> PyResult<bool> {
        Ok(device_mut(self)?.next_completion_time(qid).is_some())
    }

    /// Flushes through the admin-free path on queue `qid`; returns (sct, sc, latency ns).
    fn flush(&mut self, qid: u16) -> PyResult<(u8, u8, u64)> {
        let d = device_mut(self)?;
        let r = d.execute(qid, Sqe { opcode: opcode::FLUSH, nsid: 1, ..Sqe::default() }, DataBuf::None).map_err(to_py)?;
        Ok((r.status.sct, r.status.sc, r.latency_ns))
    }

    /// Deallocates ranges (Dataset Management); returns (sct, sc, latency ns).
    fn trim(&mut self, qid: u16, ranges: Vec<(u64, u32)>) -> PyResult<(u8, u8, u64)> {
        let d = device_mut(self)?;
        let bytes = nearflash_core::nvme::encode_dsm_ranges(&ranges);
        let n = u32::try_from(ranges.len().max(1) - 1).unwrap_or(u32::MAX);
        let sqe = Sqe { opcode: opcode::DSM, nsid: 1, cdw10: n, cdw11: 1 << 2, ..Sqe::default() };
        let r = d.execute(qid, sqe, DataBuf::ToDevice(&bytes)).map_err(to_py)?;
        Ok((r.status.sct, r.status.sc, r.latency_ns))
    }

    /// Identify Controller / Namespace data structures (4096 bytes each).
    fn identify(&mut self, cns: u8) -> PyResult<Vec<u8>> {
        let d = device_mut(self)?;
        let mut page = vec![0u8; 4096];
        let sqe = Sqe { opcode: opcode::ADMIN_IDENTIFY, nsid: 1, cdw10: u32::from(cns), ..Sqe::default() };
        let r = d.execute(0, sqe, DataBuf::FromDevice(&mut page)).map_err(to_py)?;
        if !r.status.is_success() {
            return Err(to_py(SimError::InvalidArgument(format!("identify CNS {cns}: {}", r.status))));
        }
        Ok(page)
    }

    /// A log page (Get Log Page), `bytes` long.
    fn log_page(&mut self, lid: i64, bytes: i64) -> PyResult<Vec<u8>> {
        // Signed on purpose: a negative or huge argument is named here, not an OverflowError from the conversion.
        let Ok(lid) = u8::try_from(lid) else {
            return Err(invalid(format!("log page id {lid}: allowed 0 to 255")));
        };
        let bytes = match usize::try_from(bytes) {
            Ok(b) if (1..=MAX_LOG_PAGE_BYTES).contains(&b) => b,
            _ => return Err(invalid(format!("log page bytes {bytes}: allowed 1 to {MAX_LOG_PAGE_BYTES}"))),
        };
        let d = device_mut(self)?;
        let mut page = vec![0u8; bytes.max(4)];
        let dwords = (page.len() / 4 - 1) as u32;
        let sqe = Sqe {
            opcode: opcode::ADMIN_GET_LOG_PAGE,
            cdw10: u32::from(lid) | ((dwords & 0xFFFF) << 16),
            cdw11: dwords >> 16,
            ..Sqe::default()
        };
        let r = d.execute(0, sqe, DataBuf::FromDevice(&mut page)).map_err(to_py)?;
        if !r.status.is_success() {
            return Err(to_py(SimError::InvalidArgument(format!("log page {lid:#x}: {}", r.status))));
        }
        Ok(page)
    }

    /// The vendor statistics log page's JSON (the report, fetched over the NVMe interface).
    fn stats_log(&mut self) -> PyResult<String> {
        let raw = self.log_page(i64::from(pages::LOG_VENDOR_STATS), 1 << 20)?;
        let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
        Ok(String::from_utf8_lossy(&raw[..end]).into_owned())
    }

    /// Fills a fresh device: fraction of capacity, "sequential" or "random" (then `overwrite` x random rewrites).
    #[pyo3(signature = (fraction, pattern = "sequential", overwrite = 1.0, seed = 1))]
    fn precondition(&mut self, py: Python<'_>, fraction: f64, pattern: &str, overwrite: f64, seed: u64) -> PyResult<()> {
        let p: FillPattern = pattern.parse().map_err(to_py)?;
        let d = device_mut(self)?;
        py.allow_threads(|| d.precondition(fraction, p, overwrite, seed)).map_err(to_py)
    }

    fn inject_errors(&mut self, lba: u64, bits: u32) -> PyResult<()> {
        device_mut(self)?.inject_errors(lba, bits).map_err(to_py)
    }

    /// Runs a fio-like workload; returns the JSON of the result. `progress(done, total)` is called now and then.
    #[pyo3(signature = (pattern, block_size, queue_depth, jobs, ios, span = None, seed = 1, data = false, read_fraction = 0.5, progress = None))]
    #[allow(clippy::too_many_arguments)]
    fn bench(
        &mut self,
        py: Python<'_>,
        pattern: &str,
        block_size: u64,
        queue_depth: u32,
        jobs: u32,
        ios: u64,
        span: Option<(u64, u64)>,
        seed: u64,
        data: bool,
        read_fraction: f64,
        progress: Option<PyObject>,
    ) -> PyResult<String> {
        let mut pattern: Pattern = pattern.parse().map_err(to_py)?;
        if let Pattern::RandRw(_) = pattern {
            pattern = Pattern::RandRw(read_fraction);
        }
        let w = Workload { pattern, block_size, queue_depth, jobs, ios, span, seed, data };
        let d = device_mut(self)?;
        let r = with_progress(py, progress, |cb| bench::run(d, &w, Some(cb)))?;
        Ok(serde_json::to_string(&r).expect("bench result serializes"))
    }

    fn report_json(&mut self) -> PyResult<String> {
        Ok(device_mut(self)?.report().to_json())
    }

    fn reset_stats(&mut self) -> PyResult<()> {
        device_mut(self)?.reset_stats();
        Ok(())
    }

    /// Checks the FTL's invariants (every mapping entry's OOB names its LBA; valid counts match); raises if broken.
    fn verify(&mut self, py: Python<'_>) -> PyResult<()> {
        let d = device_mut(self)?;
        py.allow_threads(|| d.check_consistency()).map_err(to_py)
    }

    fn checkpoint(&mut self) -> PyResult<()> {
        device_mut(self)?.checkpoint().map_err(to_py)
    }

    /// Flushes, checkpoints and marks the image clean; further calls raise.
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        match self.inner.take() {
            Some(d) => py.allow_threads(|| d.close()).map_err(to_py),
            None => Ok(()),
        }
    }

    /// Drops the device without closing (the image stays marked unclean; for crash tests).
    fn abandon(&mut self) {
        self.inner = None;
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDevice>()
}

/// Runs `work` without the GIL, calling `progress(done, total)` (a Python callable, or None) as it goes: an exception
/// from it (KeyboardInterrupt included) stops the work and is raised as itself.
pub(crate) fn with_progress<T: Send>(
    py: Python<'_>,
    progress: Option<PyObject>,
    work: impl Send + FnOnce(&mut dyn FnMut(u64, u64) -> nearflash_core::error::Result<()>) -> nearflash_core::error::Result<T>,
) -> PyResult<T> {
    if let Some(p) = &progress {
        if !p.bind(py).is_callable() {
            return Err(PyTypeError::new_err("progress must be callable as progress(done, total) or None"));
        }
    }
    let mut raised: Option<PyErr> = None;
    let result = py.allow_threads(|| {
        let mut cb = |done: u64, total: u64| {
            if let Some(p) = &progress {
                if let Err(e) = Python::with_gil(|py| p.call1(py, (done, total))) {
                    raised = Some(e);
                    return Err(SimError::InvalidArgument("the progress callback raised".into()));
                }
            }
            Ok(())
        };
        work(&mut cb)
    });
    if let Some(e) = raised {
        return Err(e);
    }
    result.map_err(to_py)
}
