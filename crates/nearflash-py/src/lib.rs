//! The `nearflash._native` Python module: thin PyO3 wrappers over the Rust core. Each binding module mirrors a
//! core module; errors map onto the exception hierarchy declared in `errors`.

use pyo3::prelude::*;

mod config;
mod convert;
mod device;
mod errors;
mod extensions;

// `mod systems { pub mod <system>; .. }` and `register_systems`, one entry per `nearflash-<system>` dependency in
// Cargo.toml (build.rs): exposing a system is its dependency line there and its binding module `src/<system>.rs`.
include!(concat!(env!("OUT_DIR"), "/systems.rs"));

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    config::register(m)?;
    device::register(m)?;
    extensions::register(m)?;
    register_systems(m)?;
    Ok(())
}
