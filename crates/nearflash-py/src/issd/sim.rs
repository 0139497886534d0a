//! Bindings of `nearflash_issd::sim`: the execution-driven studies (Fig. 7 points, Fig. 8 iso-performance, Fig. 9
//! partitioning, the prototype scan), each run beside Eq. 1, returned as plain Python objects (via JSON). The GIL
//! is released while they run.

use crate::convert::{err, fail, to_python};
use nearflash_issd::model::Fig7Config;
use nearflash_issd::sim::{self, Sizing};
use pyo3::prelude::*;

fn sizing(s: (u32, f64, u64)) -> Sizing {
    Sizing { min_pages_per_channel: s.0, target_seconds: s.1, max_pages: s.2 }
}

/// Fig. 7 points for configurations and kernels at `n_ch` channels; `sizing` = (min pages per channel, target
/// seconds at the model's bandwidth, max pages); `agent` = JSON overrides of the Agent's parameters.
#[pyfunction]
#[pyo3(signature = (configs, kernels, n_ch, sizing_args = (32, 5e-3, 65536), seed = 1, agent = None))]
fn sim_fig7<'py>(
    py: Python<'py>,
    configs: Vec<String>,
    kernels: Vec<String>,
    n_ch: u32,
    sizing_args: (u32, f64, u64),
    seed: u64,
    agent: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    let cs = configs.iter().map(|c| Fig7Config::from_name(c)).collect::<Result<Vec<_>, _>>().map_err(fail)?;
    let ks: Vec<&str> = kernels.iter().map(String::as_str).collect();
    let agent: serde_json::Value = match agent {
        Some(a) => serde_json::from_str(a).map_err(err)?,
        None => serde_json::Value::Null,
    };
    let pts = py.allow_threads(|| sim::fig7_points(&cs, &ks, n_ch, sizing(sizing_args), seed, &agent)).map_err(fail)?;
    to_python(py, &pts)
}

fn static_kernel(k: &str) -> PyResult<&'static str> {
    nearflash_issd::kernel::KERNEL_NAMES.iter().copied().find(|n| *n == k).ok_or_else(|| err(format!("unknown kernel {k:?}")))
}

/// Fig. 9 executed for one kernel and host CPU count (32 channels, stream processors, SATA).
#[pyfunction]
#[pyo3(signature = (kernel, n_host_cpu, sizing_args = (32, 5e-3, 65536), chunks = 256, seed = 1))]
fn sim_fig9<'py>(
    py: Python<'py>,
    kernel: &str,
    n_host_cpu: u32,
    sizing_args: (u32, f64, u64),
    chunks: u32,
    seed: u64,
) -> PyResult<Bound<'py, PyAny>> {
    let k = static_kernel(kernel)?;
    let r = py.allow_threads(|| sim::fig9_sim(k, n_host_cpu, sizing(sizing_args), chunks, seed)).map_err(fail)?;
    to_python(py, &r)
}

/// Fig. 8 executed for one case: the host, and the iSSD around the model's iso-performance FMC count.
#[pyfunction]
#[pyo3(signature = (kernel, r_host, n_host_cpu, accelerated, sizing_args = (32, 5e-3, 65536), seed = 1))]
fn sim_fig8<'py>(
    py: Python<'py>,
    kernel: &str,
    r_host: f64,
    n_host_cpu: u32,
    accelerated: bool,
    sizing_args: (u32, f64, u64),
    seed: u64,
) -> PyResult<Bound<'py, PyAny>> {
    let k = static_kernel(kernel)?;
    let r = py.allow_threads(|| sim::fig8_sim(k, r_host, n_host_cpu, accelerated, sizing(sizing_args), seed)).map_err(fail)?;
    to_python(py, &r)
}

/// The §4.3 prototype scan over `pages` 8 KiB pages of lineitem.
#[pyfunction]
#[pyo3(signature = (pages, seed = 1))]
fn sim_prototype(py: Python<'_>, pages: usize, seed: u64) -> PyResult<Bound<'_, PyAny>> {
    let r = py.allow_threads(|| sim::prototype_sim(pages, seed)).map_err(fail)?;
    to_python(py, &r)
}

/// The device setups of the model systems: Fig. 7's configuration at `n_ch` with its overrides and reasons.
#[pyfunction]
fn sim_setup<'py>(py: Python<'py>, config: &str, n_ch: u32, n_host_cpu: u32) -> PyResult<Bound<'py, PyAny>> {
    let c = Fig7Config::from_name(config).map_err(fail)?;
    to_python(py, &sim::fig7_setup(c, n_ch, n_host_cpu))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(sim_fig7, m)?)?;
    m.add_function(wrap_pyfunction!(sim_fig8, m)?)?;
    m.add_function(wrap_pyfunction!(sim_fig9, m)?)?;
    m.add_function(wrap_pyfunction!(sim_prototype, m)?)?;
    m.add_function(wrap_pyfunction!(sim_setup, m)?)?;
    Ok(())
}
