//! Bindings of `nearflash_workloads`: trace reading and conversion, and runs of flows (trace replay) on a device.
//! Flows arrive as JSON (built and type-checked by `nearflash.flows`), results leave as JSON.

use crate::device::{device_mut, with_progress, PyDevice};
use crate::errors::to_py;
use nearflash_core::SimError;
use nearflash_workloads::flows::{self, spec, Options};
use nearflash_workloads::trace::{self, nbdkit_log, write, Format};
use pyo3::prelude::*;
use std::fs::{File, OpenOptions};
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};

fn invalid(msg: String) -> PyErr {
    to_py(SimError::InvalidArgument(msg))
}

/// An output file written beside its destination under a temporary name and renamed over it only once complete:
/// a run or conversion that fails leaves the destination as it was (an earlier file kept, no half-written one).
struct Output {
    tmp: PathBuf,
    dest: PathBuf,
    done: bool,
}

impl Output {
    /// The output for `dest` and the file to write; `what` names it in errors.
    fn create(dest: &str, what: &str) -> PyResult<(Output, File)> {
        let cannot = |e: std::io::Error| invalid(format!("{what}{dest}: cannot write it: {e}"));
        let dest_path = PathBuf::from(dest);
        if dest_path.is_dir() {
            return Err(invalid(format!("{what}{dest}: cannot write it: it is a directory")));
        }
        let name = dest_path.file_name().ok_or_else(|| invalid(format!("{what}{dest}: not a file name")))?;
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".{}.tmp", std::process::id()));
        let tmp = dest_path.with_file_name(tmp_name);
        let file = OpenOptions::new().write(true).create_new(true).open(&tmp).map_err(cannot)?;
        Ok((Output { tmp, dest: dest_path, done: false }, file))
    }

    /// Puts the complete file in place.
    fn commit(mut self, what: &str) -> PyResult<()> {
        std::fs::rename(&self.tmp, &self.dest)
            .map_err(|e| invalid(format!("{what}{}: cannot write it: {e}", self.dest.display())))?;
        self.done = true;
        Ok(())
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// A request as Python sees it: (time_ns, op, offset, length, line, recorded response ns).
type PyRequest = (u64, &'static str, u64, u64, u64, Option<u64>);

/// Reads a whole trace: (its requests, the trace's figures as JSON). `options` is a trace source's JSON (`path`,
/// `format`, `sector_size`, ...).
#[pyfunction]
fn trace_read(py: Python<'_>, options: &str) -> PyResult<(Vec<PyRequest>, String)> {
    let t: spec::TraceSpec = serde_json::from_str(options).map_err(|e| to_py(SimError::Config(format!("trace options: {e}"))))?;
    let opts = t.parse_options().map_err(to_py)?;
    let (reqs, stats) = py
        .allow_threads(|| trace::read_all(trace::open(Path::new(&t.path), &opts)?))
        .map_err(|e| invalid(e.to_string()))?;
    let rows = reqs.iter().map(|r| (r.time_ns, r.op.name(), r.offset, r.len, r.line, r.recorded_ns)).collect();
    Ok((rows, serde_json::to_string(&stats).expect("stats serialize")))
}

/// Converts a trace (read with `options`, a trace source's JSON) into `format` at `out`; returns what the reading
/// and the writing did, as JSON. An nbdkit log's replies give the requests' response times, and its first time
/// stamp MSR's start (`start_ticks` 0).
#[pyfunction]
#[pyo3(signature = (options, out, format, sector_size = 512, name = "nearflash".to_string(), start_ticks = 0))]
fn trace_convert(py: Python<'_>, options: &str, out: &str, format: &str, sector_size: u64, name: String, start_ticks: u64) -> PyResult<String> {
    let t: spec::TraceSpec = serde_json::from_str(options).map_err(|e| to_py(SimError::Config(format!("trace options: {e}"))))?;
    let opts = t.parse_options().map_err(to_py)?;
    let to: Format = format.parse().map_err(|e: String| to_py(SimError::Config(e)))?;
    if to == Format::NbdkitLog {
        return Err(to_py(SimError::Config("nbdkit-log is read, not written: convert to mqsim, msr, fio or blkparse".into())));
    }
    if sector_size == 0 {
        return Err(to_py(SimError::Config("sector size must be positive".into())));
    }
    py.allow_threads(|| {
        let mut reader = trace::open(Path::new(&t.path), &opts).map_err(|e| invalid(e.to_string()))?;
        let from = reader.stats().format;
        let mut reqs = Vec::new();
        for r in reader.by_ref() {
            reqs.push(r.map_err(|e| invalid(e.to_string()))?);
        }
        let stats = reader.stats().clone();
        // An nbdkit log knows when it was recorded: MSR's time stamps say so too unless told otherwise.
        let start_ticks = match (start_ticks, from, reader.first_time_ns()) {
            (0, Some(Format::NbdkitLog), Some(t)) => u64::try_from(t / 100).map_or(0, |t| t + trace::msr::UNIX_EPOCH_TICKS),
            _ => start_ticks,
        };
        if from == Some(Format::NbdkitLog) {
            let f = File::open(&t.path).map_err(|e| invalid(format!("{}: {e}", t.path)))?;
            let times = nbdkit_log::response_times(BufReader::new(f));
            for r in &mut reqs {
                r.recorded_ns = times.get(&r.line).copied();
            }
        }
        let (output, file) = Output::create(out, "")?;
        let mut w = BufWriter::new(file);
        let opts = write::WriteOptions { sector_size, name, start_ticks };
        let written = write::write(&mut w, to, &reqs, &opts).and_then(|s| std::io::Write::flush(&mut w).map(|()| s));
        let written = written.map_err(|e| invalid(format!("{out}: {e}")))?;
        drop(w);
        output.commit("")?;
        Ok(serde_json::json!({"read": stats, "written": written}).to_string())
    })
}

/// (end of the furthest request in bytes, the trace's figures as JSON) of a whole trace read with `options`.
#[pyfunction]
fn trace_extent(py: Python<'_>, options: &str) -> PyResult<(u64, String)> {
    let t: spec::TraceSpec = serde_json::from_str(options).map_err(|e| to_py(SimError::Config(format!("trace options: {e}"))))?;
    let opts = t.parse_options().map_err(to_py)?;
    let (end, stats) = py
        .allow_threads(|| trace::extent(trace::open(Path::new(&t.path), &opts)?))
        .map_err(|e| invalid(e.to_string()))?;
    Ok((end, serde_json::to_string(&stats).expect("stats serialize")))
}

/// The format of a trace file, told from its first lines.
#[pyfunction]
fn trace_detect(path: &str) -> PyResult<&'static str> {
    let r = trace::open(Path::new(path), &trace::ParseOptions::default()).map_err(|e| invalid(e.to_string()))?;
    Ok(r.stats().format.map_or("unknown", Format::name))
}

/// Runs flows (their JSON list) on the device; returns the run's result as JSON. `latencies`: a CSV file of every
/// request. `progress(done, total)` is called now and then; an exception from it stops the run and is raised.
#[pyfunction]
#[pyo3(signature = (device, flows_json, data = false, latencies = None, progress = None))]
fn run_flows(
    py: Python<'_>,
    device: &mut PyDevice,
    flows_json: &str,
    data: bool,
    latencies: Option<String>,
    progress: Option<PyObject>,
) -> PyResult<String> {
    let dev = device_mut(device)?;
    let list = spec::build_all(flows_json, dev.lba_bytes()).map_err(to_py)?;
    // Written under a temporary name, renamed into place once the run succeeded: a failed run leaves no
    // half-written file and keeps an earlier one.
    let (output, latencies) = match latencies {
        None => (None, None),
        Some(p) => {
            let (output, f) = Output::create(&p, "latencies file ")?;
            (Some(output), Some(Box::new(BufWriter::new(f)) as Box<dyn std::io::Write + Send>))
        }
    };
    let r = with_progress(py, progress, |cb| flows::run(dev, list, Options { data, latencies }, Some(cb)))?;
    if let Some(output) = output {
        output.commit("latencies file ")?;
    }
    Ok(serde_json::to_string(&r).expect("results serialize"))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let sub = PyModule::new(m.py(), "workloads")?;
    sub.add_function(wrap_pyfunction!(trace_read, &sub)?)?;
    sub.add_function(wrap_pyfunction!(trace_convert, &sub)?)?;
    sub.add_function(wrap_pyfunction!(trace_detect, &sub)?)?;
    sub.add_function(wrap_pyfunction!(trace_extent, &sub)?)?;
    sub.add_function(wrap_pyfunction!(run_flows, &sub)?)?;
    m.add_submodule(&sub)
}
