//! The extensions Python can attach by name: every extension crate linked into this module registers itself with
//! the core (`nearflash_core::ext::Registration`), so there is no list to edit here.

use crate::errors::to_py;
use nearflash_core::ext::Extension;
use nearflash_core::Device;
use pyo3::prelude::*;

/// Builds the registered extension `name` with its parameters (a JSON object) for `device`.
pub fn build(name: &str, params: &serde_json::Value, device: &Device) -> PyResult<Box<dyn Extension>> {
    nearflash_core::ext::build(name, params, device.config()).map_err(to_py)
}

/// Names of the extensions that can be attached.
#[pyfunction]
fn extensions() -> Vec<&'static str> {
    nearflash_core::ext::registered().iter().map(|r| r.name).collect()
}

/// (name, one-line description) of every extension that can be attached.
#[pyfunction]
fn extension_info() -> Vec<(&'static str, &'static str)> {
    nearflash_core::ext::registered().iter().map(|r| (r.name, r.about)).collect()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(extensions, m)?)?;
    m.add_function(wrap_pyfunction!(extension_info, m)?)
}
