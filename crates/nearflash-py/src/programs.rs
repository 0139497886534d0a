//! Bindings of `nearflash_programs` as `nearflash._native.programs`: the host library's commands on a device
//! (each returns `(sct, sc, dw0, latency_ns, reason)`, the reason read from the device's error log; NVMe statuses are values, misuse raises), running a program in the
//! VM on numpy buffers without a device, the host path of comparisons, and the status names and parameters.

use crate::device::{device_mut, PyDevice};
use crate::errors::to_py;
use nearflash_core::config::ExtParams;
use nearflash_core::SimError;
use nearflash_programs::host::{self, Done, Ranges};
use nearflash_programs::program::{self, Fault, Program};
use nearflash_programs::{status, ProgramsParams};
use numpy::{PyReadonlyArray1, PyReadwriteArray1};
use pyo3::prelude::*;
use std::collections::HashMap;

/// (sct, sc, dw0, latency ns, the device's reason for a failure from its error log).
type Outcome = (u8, u8, u32, u64, Option<String>);

fn out(d: Done) -> Outcome {
    (d.status.sct, d.status.sc, d.dw0, d.latency_ns, d.reason)
}

fn bad(msg: impl Into<String>) -> PyErr {
    to_py(SimError::InvalidArgument(msg.into()))
}

fn prepared(elf: &[u8]) -> PyResult<Program> {
    let p = ProgramsParams::default();
    program::prepare(elf, p.max_program_bytes as usize, p.max_program_instructions as usize)
        .map_err(|e| bad(format!("program refused: {e}")))
}

fn fault_name(f: &Fault) -> String {
    match f {
        Fault::OutOfRange(why) => format!("out_of_range: {why}"),
        Fault::Budget => "instruction_budget".into(),
        Fault::Arithmetic => "arithmetic".into(),
        Fault::CallDepth => "call_depth".into(),
        Fault::Other(why) => format!("other: {why}"),
        Fault::ReadOutside(why) => format!("read_outside: {why}"),
        Fault::ReadBudget(n) => format!("read_budget: more than {n} reads"),
    }
}

#[pyfunction]
fn load(dev: &mut PyDevice, qid: u16, pind: u16, elf: &[u8]) -> PyResult<Outcome> {
    host::load(device_mut(dev)?, qid, pind, elf).map(out).map_err(to_py)
}

#[pyfunction]
fn unload(dev: &mut PyDevice, qid: u16, pind: u16) -> PyResult<Outcome> {
    host::unload(device_mut(dev)?, qid, pind).map(out).map_err(to_py)
}

#[pyfunction]
fn activate(dev: &mut PyDevice, qid: u16, pind: u16, on: bool) -> PyResult<Outcome> {
    host::activate(device_mut(dev)?, qid, pind, on).map(out).map_err(to_py)
}

#[pyfunction]
fn create_range_set(dev: &mut PyDevice, qid: u16, ranges: Vec<(u64, u32)>) -> PyResult<Outcome> {
    host::create_range_set(device_mut(dev)?, qid, &ranges).map(out).map_err(to_py)
}

#[pyfunction]
fn delete_range_set(dev: &mut PyDevice, qid: u16, rsid: u16) -> PyResult<Outcome> {
    host::delete_range_set(device_mut(dev)?, qid, rsid).map(out).map_err(to_py)
}

#[pyfunction]
fn copy_to_slm(dev: &mut PyDevice, qid: u16, sdaddr: u64, sources: Vec<(u64, u32)>) -> PyResult<Outcome> {
    host::copy_to_slm(device_mut(dev)?, qid, sdaddr, &sources).map(out).map_err(to_py)
}

#[pyfunction]
fn write_slm(dev: &mut PyDevice, qid: u16, sb: u64, data: PyReadonlyArray1<'_, u8>) -> PyResult<Outcome> {
    let bytes = data.as_slice().map_err(|_| bad("data must be a contiguous uint8 array"))?;
    host::write_slm(device_mut(dev)?, qid, sb, bytes).map(out).map_err(to_py)
}

#[pyfunction]
fn read_slm(dev: &mut PyDevice, qid: u16, sb: u64, mut out_: PyReadwriteArray1<'_, u8>) -> PyResult<Outcome> {
    let buf = out_.as_slice_mut().map_err(|_| bad("out must be a contiguous uint8 array"))?;
    host::read_slm(device_mut(dev)?, qid, sb, buf).map(out).map_err(to_py)
}

#[pyfunction]
#[pyo3(signature = (dev, qid, pind, rsid, ranges, params, cparam1, cparam2, flash = Vec::new()))]
#[allow(clippy::too_many_arguments)]
fn execute(
    dev: &mut PyDevice,
    qid: u16,
    pind: u16,
    rsid: Option<u16>,
    ranges: Option<Vec<(u64, u32)>>,
    params: &[u8],
    cparam1: u64,
    cparam2: u64,
    flash: Vec<(u64, u64)>,
) -> PyResult<Outcome> {
    let r = match (rsid, ranges) {
        (Some(id), None) => Ranges::Set(id),
        (None, Some(r)) => Ranges::Inline(r),
        (None, None) => Ranges::Inline(Vec::new()),
        (Some(_), Some(_)) => return Err(bad("give either a range set or inline ranges, not both")),
    };
    host::execute_reading(device_mut(dev)?, qid, pind, &r, &flash, params, (cparam1, cparam2)).map(out).map_err(to_py)
}

/// The resources data structure (Identify), as a dict.
#[pyfunction]
fn identify(dev: &mut PyDevice, qid: u16) -> PyResult<(Outcome, HashMap<&'static str, u64>)> {
    let mut buf = vec![0u8; nearflash_programs::firmware::IDENTIFY_BYTES];
    let d = host::submit(
        device_mut(dev)?,
        qid,
        &nearflash_programs::wire::Command::Identify,
        nearflash_core::nvme::DataBuf::FromDevice(&mut buf),
    )
    .map_err(to_py)?;
    let names = nearflash_programs::firmware::IDENTIFY_FIELDS;
    let fields = names
        .iter()
        .enumerate()
        .map(|(i, n)| (*n, u64::from_le_bytes(buf[i * 8..i * 8 + 8].try_into().unwrap())))
        .collect();
    Ok((out(d), fields))
}

/// Runs a program in the VM over numpy buffers (one memory range each, modified in place): (result or None,
/// fault or None, instructions).
#[pyfunction]
#[pyo3(signature = (elf, buffers, params, cparam1 = 0, cparam2 = 0, budget = 1_000_000_000))]
fn run_local(
    py: Python<'_>,
    elf: &[u8],
    mut buffers: Vec<PyReadwriteArray1<'_, u8>>,
    params: &[u8],
    cparam1: u64,
    cparam2: u64,
    budget: u64,
) -> PyResult<(Option<u64>, Option<String>, u64)> {
    let p = prepared(elf)?;
    if buffers.len() > program::vm::MAX_RANGES {
        return Err(bad(format!("at most {} buffers", program::vm::MAX_RANGES)));
    }
    let mut views = Vec::with_capacity(buffers.len());
    for b in buffers.iter_mut() {
        views.push(b.as_slice_mut().map_err(|_| bad("buffers must be contiguous uint8 arrays"))?);
    }
    let run = py.allow_threads(|| p.run(&mut views, params, (cparam1, cparam2), budget));
    Ok(match run.result {
        Ok(v) => (Some(v), None, run.instructions),
        Err(f) => (None, Some(fault_name(&f)), run.instructions),
    })
}

/// The host path: reads `sources` with ordinary Reads and runs the program on a host core.
#[pyfunction]
#[pyo3(signature = (dev, qid, elf, sources, params, cparam1 = 0, cparam2 = 0, lengths = None, outputs = Vec::new()))]
#[allow(clippy::too_many_arguments)]
fn host_run(
    dev: &mut PyDevice,
    qid: u16,
    elf: &[u8],
    sources: Vec<(u64, u32)>,
    params: &[u8],
    cparam1: u64,
    cparam2: u64,
    lengths: Option<Vec<u64>>,
    outputs: Vec<usize>,
) -> PyResult<HashMap<&'static str, PyObject>> {
    // The sizes first: a bad request is refused by name whatever the program.
    host::check_host_run(device_mut(dev)?, &sources, &outputs).map_err(to_py)?;
    let p = prepared(elf)?;
    let budget = ProgramsParams::default().instruction_budget;
    let r = host::host_run(device_mut(dev)?, qid, &p, &sources, lengths.as_deref(), &outputs, params, (cparam1, cparam2), budget).map_err(to_py)?;
    Python::with_gil(|py| {
        let mut m: HashMap<&'static str, PyObject> = HashMap::new();
        let (v, f) = match r.result {
            Ok(v) => (Some(v), None),
            Err(f) => (None, Some(fault_name(&f))),
        };
        m.insert("result", v.into_pyobject(py)?.into_any().unbind());
        m.insert("fault", f.into_pyobject(py)?.into_any().unbind());
        m.insert("instructions", r.instructions.into_pyobject(py)?.into_any().unbind());
        m.insert("latency_ns", r.latency_ns.into_pyobject(py)?.into_any().unbind());
        m.insert("bytes_read", r.bytes_read.into_pyobject(py)?.into_any().unbind());
        let outs: Vec<_> = r.outputs.iter().map(|o| pyo3::types::PyBytes::new(py, o)).collect();
        m.insert("outputs", outs.into_pyobject(py)?.into_any().unbind());
        Ok(m)
    })
}

/// The host path of a program that reads flash: each run's reads as Read commands through the kernel stack (or
/// page-cache hits for the blocks of `warm`, read into the cache first), its instructions on a host core. Per run
/// of `runs` (`(params, cparam1, cparam2)`): (result or None, fault or None, instructions, latency ns, reads,
/// cache hits).
#[pyfunction]
#[pyo3(signature = (dev, qid, elf, flash, runs, warm = Vec::new()))]
fn host_runs_reading(
    dev: &mut PyDevice,
    qid: u16,
    elf: &[u8],
    flash: Vec<(u64, u64)>,
    runs: Vec<(Vec<u8>, u64, u64)>,
    warm: Vec<u64>,
) -> PyResult<Vec<(Option<u64>, Option<String>, u64, u64, u64, u64)>> {
    let p = prepared(elf)?;
    let d = ProgramsParams::default();
    if flash.len() > program::vm::MAX_EXTENTS {
        return Err(bad(format!("flash: at most {} ranges", program::vm::MAX_EXTENTS)));
    }
    let limits = program::reads::ReadLimits { extents: flash, budget: d.read_budget, max_bytes: d.max_read_bytes as u64 };
    let runs: Vec<(Vec<u8>, (u64, u64))> = runs.into_iter().map(|(p, a, b)| (p, (a, b))).collect();
    let dev = device_mut(dev)?;
    let done = host::warm_cache(dev, qid, &warm).and_then(|cache| host::host_runs_reading(dev, qid, &p, &limits, &cache, &runs, d.instruction_budget));
    Ok(done
        .map_err(to_py)?
        .into_iter()
        .map(|r| {
            let (v, f) = match r.result {
                Ok(v) => (Some(v), None),
                Err(f) => (None, Some(fault_name(&f))),
            };
            (v, f, r.instructions, r.latency_ns, r.reads, r.cache_hits)
        })
        .collect())
}

/// (name, description) of the device-defined programs, in program-index order.
#[pyfunction]
fn device_programs() -> Vec<(&'static str, &'static str)> {
    nearflash_programs::fixed::PROGRAMS.to_vec()
}

/// (sct, sc, name) of every Computational Programs / SLM status.
#[pyfunction]
fn status_names() -> Vec<(u8, u8, &'static str)> {
    status::NAMES.iter().map(|(s, n)| (s.sct, s.sc, *n)).collect()
}

/// (name, default, unit, source) of every extension parameter, plus the host path's cycles per instruction.
#[pyfunction]
fn parameters() -> Vec<(&'static str, &'static str, &'static str, &'static str)> {
    let mut v = ProgramsParams::DOCS.to_vec();
    v.push(("host_cycles_per_instruction", "0.5", "cycles/instruction", nearflash_programs::params::HOST_CYCLES_PER_INSTRUCTION.1));
    v
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let sub = PyModule::new(m.py(), "programs")?;
    sub.add_function(wrap_pyfunction!(load, &sub)?)?;
    sub.add_function(wrap_pyfunction!(unload, &sub)?)?;
    sub.add_function(wrap_pyfunction!(activate, &sub)?)?;
    sub.add_function(wrap_pyfunction!(create_range_set, &sub)?)?;
    sub.add_function(wrap_pyfunction!(delete_range_set, &sub)?)?;
    sub.add_function(wrap_pyfunction!(copy_to_slm, &sub)?)?;
    sub.add_function(wrap_pyfunction!(write_slm, &sub)?)?;
    sub.add_function(wrap_pyfunction!(read_slm, &sub)?)?;
    sub.add_function(wrap_pyfunction!(execute, &sub)?)?;
    sub.add_function(wrap_pyfunction!(identify, &sub)?)?;
    sub.add_function(wrap_pyfunction!(run_local, &sub)?)?;
    sub.add_function(wrap_pyfunction!(host_run, &sub)?)?;
    sub.add_function(wrap_pyfunction!(host_runs_reading, &sub)?)?;
    sub.add_function(wrap_pyfunction!(status_names, &sub)?)?;
    sub.add_function(wrap_pyfunction!(device_programs, &sub)?)?;
    sub.add_function(wrap_pyfunction!(parameters, &sub)?)?;
    sub.add("HOST_RUN_MAX_BYTES", host::HOST_RUN_MAX_BYTES)?;
    m.add_submodule(&sub)
}
