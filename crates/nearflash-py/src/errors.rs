//! Python exceptions for simulator errors, one class per kind of `SimError`. Device faults (NVMe status codes)
//! are values, see `device`; a host library's failed command (`SimError::Nvme`) raises `nearflash.errors.NvmeError`.

use nearflash_core::SimError;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::PyType;

create_exception!(_native, NearflashError, PyException, "Base class of nearflash errors.");
create_exception!(_native, ConfigError, NearflashError, "A preset, override or argument is invalid.");
create_exception!(_native, ImageError, NearflashError, "A device image is missing, damaged or of another version.");
create_exception!(_native, InvalidArgument, NearflashError, "An argument breaks the API contract.");
create_exception!(
    _native,
    SimulatorFault,
    NearflashError,
    "The model reached a state it cannot go on from (e.g. GC could not keep up): a simulator fault, not a device status."
);

/// `HostIoError(NearflashError, OSError)`: reading or writing the image's host files failed (errno kept).
static HOST_IO_ERROR: GILOnceCell<Py<PyType>> = GILOnceCell::new();

fn host_io_error(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    HOST_IO_ERROR
        .get_or_try_init(py, || {
            let ns = pyo3::types::PyDict::new(py);
            ns.set_item("NearflashError", py.get_type::<NearflashError>())?;
            py.run(
                c"class HostIoError(NearflashError, OSError):\n    'Reading or writing the image host files failed.'\n",
                Some(&ns),
                None,
            )?;
            let t = ns.get_item("HostIoError")?.expect("defined above");
            t.setattr("__module__", "nearflash._native")?;
            Ok::<_, PyErr>(t.downcast_into::<PyType>()?.unbind())
        })
        .map(|t| t.bind(py))
}

/// ENOSPC: what an in-memory device past its memory limit reports, as a full disk does (Linux's value).
const ENOSPC: i32 = 28;

/// `HostIoError` (an `OSError` with `errno`) carrying `msg`.
pub fn host_io_err(e: &std::io::Error, msg: String) -> PyErr {
    let errno = e.raw_os_error().unwrap_or(if e.kind() == std::io::ErrorKind::StorageFull { ENOSPC } else { 0 });
    Python::with_gil(|py| match host_io_error(py).and_then(|t| t.call1((errno, msg))) {
        Ok(v) => PyErr::from_value(v),
        Err(e) => e,
    })
}

/// Maps a core error onto its Python exception.
pub fn to_py(e: SimError) -> PyErr {
    let msg = e.to_string();
    Python::with_gil(|py| match e {
        SimError::Config(_) => ConfigError::new_err(msg),
        SimError::Image(_) => ImageError::new_err(msg),
        SimError::Io(io) => host_io_err(&io, msg),
        SimError::InvalidArgument(_) => InvalidArgument::new_err(msg),
        SimError::Fault(_) => SimulatorFault::new_err(msg),
        SimError::Nvme { command, sct, sc, reason, .. } => {
            let raised = py
                .import("nearflash.errors")
                .and_then(|m| m.getattr("NvmeError"))
                .and_then(|cls| cls.call1((sct, sc, command, reason)));
            match raised {
                Ok(v) => PyErr::from_value(v),
                Err(e) => e,
            }
        }
        _ => NearflashError::new_err(msg),
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("NearflashError", py.get_type::<NearflashError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("ImageError", py.get_type::<ImageError>())?;
    m.add("HostIoError", host_io_error(py)?)?;
    m.add("InvalidArgument", py.get_type::<InvalidArgument>())?;
    m.add("SimulatorFault", py.get_type::<SimulatorFault>())?;
    Ok(())
}
