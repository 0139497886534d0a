//! The `nearflash._native` Python module: thin PyO3 wrappers over the Rust core. Each binding module mirrors a
//! core module; errors map onto the exception hierarchy declared in `errors`.

use pyo3::prelude::*;

mod config;
mod convert;
mod device;
mod errors;
mod extensions;
mod issd;
mod nice;
mod ndsearch;
mod programs;
mod recssd;
mod cognitive;
mod workloads;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    config::register(m)?;
    device::register(m)?;
    extensions::register(m)?;
    workloads::register(m)?;
    // extension modules (one line each; keep this block for extension registrations)
    recssd::register(m)?;
    issd::register(m)?;
    nice::register(m)?;
    ndsearch::register(m)?;
    programs::register(m)?;
    cognitive::register(m)?;
    Ok(())
}
