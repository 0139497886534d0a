//! Conversions the extension bindings share: an argument error from any message, numpy inputs borrowed when
//! contiguous, flat vectors as 2-D numpy arrays, and serialisable results as plain Python objects (via JSON).

use std::borrow::Cow;

use crate::errors::InvalidArgument;
use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray2, PyReadonlyArray1};
use pyo3::prelude::*;

/// `InvalidArgument` carrying `e`'s message (for errors of plain argument conversions).
pub(crate) fn err(e: impl std::fmt::Display) -> PyErr {
    InvalidArgument::new_err(e.to_string())
}

/// The Python exception of an extension crate's error, keeping its kind (argument, device status, simulator fault,
/// host I/O) through the core's error kinds.
pub(crate) fn fail(e: impl Into<nearflash_core::SimError>) -> PyErr {
    crate::errors::to_py(e.into())
}

/// The array's elements, borrowed when contiguous.
pub(crate) fn elements<'a, T: numpy::Element + Copy>(a: &'a PyReadonlyArray1<'_, T>) -> Cow<'a, [T]> {
    match a.as_slice() {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => Cow::Owned(a.as_array().iter().copied().collect()),
    }
}

/// A row-major vector as an `n x cols` array (`n = len / cols`).
pub(crate) fn rows_array<T: numpy::Element>(py: Python<'_>, v: Vec<T>, cols: usize) -> PyResult<Bound<'_, PyArray2<T>>> {
    let n = v.len() / cols.max(1);
    Ok(Array2::from_shape_vec((n, cols), v).map_err(err)?.into_pyarray(py))
}

/// `v` as Python dicts, lists and numbers (through the `json` module).
pub(crate) fn to_python<'py, T: serde::Serialize + ?Sized>(py: Python<'py>, v: &T) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?.call_method1("loads", (serde_json::to_string(v).map_err(err)?,))
}
