//! Bindings of `nearflash_core::config`: preset names, preset parameter listings, override checking.

use crate::errors::to_py;
use nearflash_core::config::{load_preset, preset_names, DeviceConfig};
use pyo3::prelude::*;

/// Names of the embedded presets.
#[pyfunction]
fn presets() -> Vec<&'static str> {
    preset_names()
}

/// Every parameter of a preset (after overrides) as (path, value, unit, source) tuples. With `validate` false the
/// overrides are only resolved and parsed in their units (a combination's consistency is not checked).
#[pyfunction]
#[pyo3(signature = (name, overrides = None, validate = true))]
fn preset_params(
    name: &str,
    overrides: Option<Vec<(String, String)>>,
    validate: bool,
) -> PyResult<Vec<(String, String, String, String)>> {
    let mut tree = load_preset(name).map_err(to_py)?;
    for (k, v) in overrides.unwrap_or_default() {
        tree.set(&k, &v).map_err(to_py)?;
    }
    if validate {
        DeviceConfig::from_tree(&tree).map_err(to_py)?;
    }
    Ok(tree.docs().into_iter().map(|d| (d.path, d.value, d.unit, d.source)).collect())
}

/// Description line of a preset.
#[pyfunction]
fn preset_description(name: &str) -> PyResult<String> {
    let tree = load_preset(name).map_err(to_py)?;
    Ok(tree.meta("description").unwrap_or("").to_string())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(presets, m)?)?;
    m.add_function(wrap_pyfunction!(preset_params, m)?)?;
    m.add_function(wrap_pyfunction!(preset_description, m)?)?;
    Ok(())
}
