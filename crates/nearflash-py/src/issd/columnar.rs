//! Bindings of the columnar lineitem pages (`nearflash_issd::lineitem::columnar`) and their kernels' host path
//! (`kernel::columnar`): the table's geometry, the table from records, runs over it, and the interleaved stream
//! a device job maps. The GIL is released while computing; errors raise `InvalidArgument`.

use super::{report_dict, u8_array};
use crate::convert::{elements, fail, to_python};
use nearflash_issd::kernel::columnar::{columnar_stream as stream, run_columnar as run, ColumnarKernel};
use nearflash_issd::kernel::KernelSpec;
use nearflash_issd::lineitem::{columnar_from_records as transpose, ColumnarLayout};
use nearflash_issd::PageLayout;
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;

fn kernel(spec: &str, page_size: usize) -> PyResult<ColumnarKernel> {
    KernelSpec::from_json(spec).and_then(|s| s.build_columnar(PageLayout::new(page_size)?)).map_err(fail)
}

/// Geometry of a columnar table: rows per group, groups, total pages, and each column's region.
#[pyfunction]
#[pyo3(signature = (rows, page_size = 8192, align_pages = 1))]
fn columnar_layout<'py>(py: Python<'py>, rows: u64, page_size: usize, align_pages: u64) -> PyResult<Bound<'py, PyDict>> {
    let l = ColumnarLayout::new(rows, page_size, align_pages).map_err(fail)?;
    let d = PyDict::new(py);
    d.set_item("rows", rows)?;
    d.set_item("page_size", page_size)?;
    d.set_item("align_pages", align_pages)?;
    d.set_item("rows_per_group", l.rows_per_group())?;
    d.set_item("groups", l.groups())?;
    d.set_item("total_pages", l.total_pages())?;
    let regions: Vec<(&str, u64, u64)> = l.regions().iter().map(|r| (r.field.name(), r.first_page, r.pages_per_group)).collect();
    d.set_item("regions", to_python(py, &regions)?)?;
    Ok(d)
}

/// Contiguous 150-byte records transposed into a columnar table.
#[pyfunction]
#[pyo3(signature = (records, page_size = 8192, align_pages = 1))]
fn columnar_from_records<'py>(
    py: Python<'py>,
    records: PyReadonlyArray1<'py, u8>,
    page_size: usize,
    align_pages: u64,
) -> PyResult<Bound<'py, PyArray1<u8>>> {
    let r = elements(&records);
    let rows = (r.len() / nearflash_issd::lineitem::RECORD_SIZE) as u64;
    let l = ColumnarLayout::new(rows, page_size, align_pages).map_err(fail)?;
    let out = py.allow_threads(|| transpose(l, &r)).map_err(fail)?;
    Ok(u8_array(py, out))
}

/// The columns a columnar kernel reads, in the order of each row group's pages.
#[pyfunction]
#[pyo3(signature = (spec, page_size = 8192))]
fn columnar_columns(spec: &str, page_size: usize) -> PyResult<Vec<&'static str>> {
    Ok(kernel(spec, page_size)?.columns().iter().map(|f| f.name()).collect())
}

/// Runs `col_scan` / `col_filter_sum` over a whole table on the host (rayon), reading only the named columns.
#[pyfunction]
#[pyo3(signature = (spec, table, page_size = 8192, groups_per_task = 16))]
fn run_columnar<'py>(
    py: Python<'py>,
    spec: &str,
    table: PyReadonlyArray1<'py, u8>,
    page_size: usize,
    groups_per_task: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let k = kernel(spec, page_size)?;
    let t = elements(&table);
    let r = py.allow_threads(|| run(&k, &t, groups_per_task)).map_err(fail)?;
    report_dict(py, &r)
}

/// The kernel's input as one stream: row group by row group, one page per named column.
#[pyfunction]
#[pyo3(signature = (spec, table, page_size = 8192))]
fn columnar_stream<'py>(
    py: Python<'py>,
    spec: &str,
    table: PyReadonlyArray1<'py, u8>,
    page_size: usize,
) -> PyResult<Bound<'py, PyArray1<u8>>> {
    let k = kernel(spec, page_size)?;
    let t = elements(&table);
    let out = py.allow_threads(|| stream(&k, &t)).map_err(fail)?;
    Ok(u8_array(py, out))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(columnar_layout, m)?)?;
    m.add_function(wrap_pyfunction!(columnar_from_records, m)?)?;
    m.add_function(wrap_pyfunction!(columnar_columns, m)?)?;
    m.add_function(wrap_pyfunction!(run_columnar, m)?)?;
    m.add_function(wrap_pyfunction!(columnar_stream, m)?)?;
    Ok(())
}
