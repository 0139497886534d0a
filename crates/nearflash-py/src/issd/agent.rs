//! Bindings of `nearflash_issd::agent` and `initiator`: the Agent as an attachable extension, and the Initiator
//! driving a `Device` from Python (put an input on the device, run a job with a strategy). Device faults come back
//! as `NvmeError`-style `InvalidArgument` messages from the Initiator; the GIL is released while jobs run.

use super::output_dict;
use crate::convert::{err, fail};
use crate::device::{device_mut, PyDevice};
use nearflash_core::Device;
use nearflash_core::config::ExtParams;
use nearflash_issd::agent::{AgentParams, Extent, IssdExtension};
use nearflash_issd::initiator::{Initiator, Input, Job, Opcodes, Strategy};
use nearflash_issd::KernelSpec;
use numpy::PyReadonlyArray1;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// (name, default, unit, source) of every Agent parameter.
#[pyfunction]
fn agent_parameters() -> Vec<(&'static str, &'static str, &'static str, &'static str)> {
    AgentParams::DOCS.to_vec()
}

/// The Initiator for `dev` on I/O queue `qid` (the SDK's `Device` reserves it: one owner of queue ids): with the
/// parameters the attached Agent resolved (preset section and overrides, one source of truth), or, on a device
/// without the Agent (conventional runs), the defaults with `params_json`.
fn initiator<'d>(dev: &'d mut Device, qid: u16, params_json: Option<&str>) -> PyResult<Initiator<'d>> {
    let p = match dev.extension::<IssdExtension>("issd") {
        Some(_) if params_json.is_some() => {
            // Ignoring them silently would run with other parameters than the caller asked for.
            return Err(err("agent_params apply only on a device without the Agent: the attached Agent's parameters are used (give them to attach)"));
        }
        Some(agent) => agent.params().clone(),
        None => {
            let mut p = AgentParams::default();
            if let Some(j) = params_json {
                let v: serde_json::Value = serde_json::from_str(j).map_err(err)?;
                p.apply_json(&v).map_err(fail)?;
            }
            p
        }
    };
    Initiator::new(dev, qid, Opcodes::of(&p), p.costs.clone()).map_err(fail)
}

/// Writes a paged input at `slba` (NVMe writes on queue `qid`, then Flush); returns its extents [(slba, nlb)].
#[pyfunction]
fn write_input(
    py: Python<'_>,
    dev: &Bound<'_, PyDevice>,
    qid: u16,
    slba: u64,
    data: PyReadonlyArray1<'_, u8>,
    page_size: u32,
) -> PyResult<Vec<(u64, u32)>> {
    let bytes = crate::convert::elements(&data);
    let mut guard = dev.borrow_mut();
    let d = device_mut(&mut guard)?;
    let input = py.allow_threads(|| initiator(d, qid, None)?.write_input(slba, &bytes, page_size).map_err(fail))?;
    Ok(input.extents.iter().map(|e| (e.slba, e.nlb)).collect())
}

fn strategy(name: &str, fraction: Option<f64>, chunk_pages: Option<u32>) -> PyResult<Strategy> {
    Ok(match name {
        "in_storage" => Strategy::InStorage,
        "conventional" => Strategy::Conventional,
        "static" => Strategy::Static { fraction: fraction.ok_or_else(|| err("the static split needs `fraction`"))? },
        "dynamic" => Strategy::Dynamic { chunk_pages: chunk_pages.unwrap_or(64) },
        other => return Err(err(format!("strategy {other:?}: in_storage, conventional, static or dynamic"))),
    })
}

/// Runs a job (kernel spec JSON over extents [(slba, nlb)] of `page_size` pages) on queue `qid` with a strategy;
/// returns the output fields plus `start_ns`, `end_ns`, `seconds`, `bandwidth`, `input_bytes`, `device_bytes`,
/// `result_bytes`, `device_jobs`. `agent_params` (JSON) must match the attached Agent's opcodes and costs.
#[pyfunction]
#[pyo3(signature = (dev, qid, spec, extents, page_size, strategy_name = "in_storage", accelerate = false, fraction = None, chunk_pages = None, agent_params = None))]
#[allow(clippy::too_many_arguments)]
fn run_job<'py>(
    py: Python<'py>,
    dev: &Bound<'py, PyDevice>,
    qid: u16,
    spec: &str,
    extents: Vec<(u64, u32)>,
    page_size: u32,
    strategy_name: &str,
    accelerate: bool,
    fraction: Option<f64>,
    chunk_pages: Option<u32>,
    agent_params: Option<&str>,
) -> PyResult<Bound<'py, PyDict>> {
    let spec = KernelSpec::from_json(spec).map_err(fail)?;
    let extents = extents.into_iter().map(|(slba, nlb)| Extent { slba, nlb }).collect();
    let job = Job { spec, input: Input { extents, page_size }, accelerate };
    let s = strategy(strategy_name, fraction, chunk_pages)?;
    let mut guard = dev.borrow_mut();
    let d = device_mut(&mut guard)?;
    let run = py.allow_threads(|| initiator(d, qid, agent_params)?.run(&job, s).map_err(fail))?;
    let out = output_dict(py, &run.output)?;
    out.set_item("start_ns", run.start.as_ns())?;
    out.set_item("end_ns", run.end.as_ns())?;
    out.set_item("seconds", run.seconds())?;
    out.set_item("bandwidth", run.bandwidth())?;
    out.set_item("input_bytes", run.input_bytes)?;
    out.set_item("device_bytes", run.device_bytes)?;
    out.set_item("result_bytes", run.result_bytes)?;
    out.set_item("device_jobs", run.device_jobs)?;
    Ok(out)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(agent_parameters, m)?)?;
    m.add_function(wrap_pyfunction!(write_input, m)?)?;
    m.add_function(wrap_pyfunction!(run_job, m)?)?;
    Ok(())
}
