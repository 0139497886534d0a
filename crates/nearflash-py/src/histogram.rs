//! Bindings of `nearflash-histogram`: its parameters (the firmware is attached by name, its command sent with
//! `Device.command`, so there is nothing else to convert).

use nearflash_core::config::ExtParams;
use nearflash_histogram::HistogramParams;
use pyo3::prelude::*;

/// (name, default, unit, source) of every parameter of the `histogram` extension.
#[pyfunction]
fn parameters() -> Vec<(&'static str, &'static str, &'static str, &'static str)> {
    HistogramParams::DOCS.to_vec()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let sub = PyModule::new(m.py(), "histogram")?;
    sub.add_function(wrap_pyfunction!(parameters, &sub)?)?;
    m.add_submodule(&sub)
}
