//! Python exceptions for simulator faults. Device faults (NVMe status codes) are values, see `device`.

use nearflash_core::SimError;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(_native, NearflashError, PyException, "Base class of nearflash errors.");
create_exception!(_native, ConfigError, NearflashError, "A preset, override or argument is invalid.");
create_exception!(_native, ImageError, NearflashError, "A device image is missing, damaged or of another version.");
create_exception!(_native, HostIoError, NearflashError, "Reading or writing the image's host files failed.");
create_exception!(_native, InvalidArgument, NearflashError, "An argument breaks the API contract.");

/// Maps a core error onto its Python exception.
pub fn to_py(e: SimError) -> PyErr {
    let msg = e.to_string();
    match e {
        SimError::Config(_) => ConfigError::new_err(msg),
        SimError::Image(_) => ImageError::new_err(msg),
        SimError::Io(_) => HostIoError::new_err(msg),
        SimError::InvalidArgument(_) => InvalidArgument::new_err(msg),
        _ => NearflashError::new_err(msg),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("NearflashError", py.get_type::<NearflashError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("ImageError", py.get_type::<ImageError>())?;
    m.add("HostIoError", py.get_type::<HostIoError>())?;
    m.add("InvalidArgument", py.get_type::<InvalidArgument>())?;
    Ok(())
}
