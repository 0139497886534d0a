//! The registry of firmware extensions Python can attach by name. Each extension's binding module provides a
//! `build_extension(params, device)`; add one arm per extension crate here.

use crate::errors::ConfigError;
use nearflash_core::ctrl::Extension;
use nearflash_core::Device;
use pyo3::prelude::*;

/// Names of the extensions that can be attached.
pub const AVAILABLE: &[&str] = &["issd", "recssd"];

/// Builds the extension `name` with its parameters (a JSON object) for `device`.
pub fn build(name: &str, params: &serde_json::Value, device: &Device) -> PyResult<Box<dyn Extension>> {
    let _ = (params, device);
    match name {
        "issd" => crate::issd::build_extension(params, device),
        "recssd" => crate::recssd::build_extension(params, device),
        _ => Err(ConfigError::new_err(format!("unknown extension {name:?}; available: {AVAILABLE:?}"))),
    }
}

#[pyfunction]
fn extensions() -> Vec<&'static str> {
    AVAILABLE.to_vec()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(extensions, m)?)
}
