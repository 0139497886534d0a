//! Bindings of `nearflash-array`: the shared host's parameters and limit, and the combiner (`nearflash.array`
//! wraps them). The host is rebuilt from its overrides at each call, so the Python side stays plain, picklable data.

use crate::convert::err;
use nearflash_array::{combine as combine_shards, Direction, HostModel, PathCost, Shard, Transfer};
use nearflash_core::ext::Time;
use pyo3::prelude::*;

type Overrides = Vec<(String, f64)>;

fn host(overrides: &Overrides) -> PyResult<HostModel> {
    HostModel::new(overrides).map_err(err)
}

/// (path, value, unit, source) of every shared-host parameter after `overrides` (leaf name or path, value).
#[pyfunction]
fn host_params(overrides: Overrides) -> PyResult<Vec<(&'static str, f64, String, String)>> {
    Ok(host(&overrides)?.params().iter().map(|p| (p.path, p.value, p.unit.clone(), p.source.clone())).collect())
}

/// The most units/s of a path's work the host takes on `devices` devices, and what sets it, for a unit's bytes each
/// way and CPU ns and the CPU ns paid once per query.
#[pyfunction]
fn host_limit(overrides: Overrides, to_host_bytes: f64, to_device_bytes: f64, cpu_ns: f64, cpu_ns_per_query: f64,
              devices: f64) -> PyResult<(f64, &'static str)> {
    Ok(host(&overrides)?.limit(PathCost { to_host_bytes, to_device_bytes, cpu_ns, cpu_ns_per_query }, devices))
}

/// The knee N* (where N devices of `device_rate` units/s each reach the host's limit) and what sets it.
#[pyfunction]
fn host_knee(overrides: Overrides, to_host_bytes: f64, to_device_bytes: f64, cpu_ns: f64, cpu_ns_per_query: f64,
             device_rate: f64) -> PyResult<(f64, &'static str)> {
    if !(device_rate.is_finite() && device_rate > 0.0) {
        return Err(err(format!("device_rate must be a finite number > 0, got {device_rate}")));
    }
    Ok(host(&overrides)?.knee(PathCost { to_host_bytes, to_device_bytes, cpu_ns, cpu_ns_per_query }, device_rate))
}

/// One shard as (device label, own end ns, [(done ns, bytes, to the device?, host CPU ns)]).
type PyShard = (usize, u64, Vec<(u64, u64, bool, u64)>);
/// (elapsed ns, transfers, bytes to host, bytes to device, [(resource, utilisation)], busiest,
/// [(device, delivered end ns, mean host delay ns, [delivery ns of each transfer])] by device label).
type PyCombined = (u64, usize, u64, u64, Vec<(&'static str, f64)>, &'static str, Vec<(usize, u64, f64, Vec<u64>)>);

/// Replays the shards' transfers through the shared host on one array clock.
#[pyfunction]
fn combine(py: Python<'_>, overrides: Overrides, shards: Vec<PyShard>) -> PyResult<PyCombined> {
    let host = host(&overrides)?;
    let shards: Vec<Shard> = shards
        .into_iter()
        .map(|(device, end, transfers)| Shard {
            device,
            end: Time::from_ns(end),
            transfers: transfers
                .into_iter()
                .map(|(t, nbytes, down, cpu_ns)| Transfer {
                    t: Time::from_ns(t),
                    nbytes,
                    direction: if down { Direction::ToDevice } else { Direction::ToHost },
                    cpu_ns,
                })
                .collect(),
        })
        .collect();
    let c = py.allow_threads(|| combine_shards(&shards, &host)).map_err(err)?;
    let devices = c.devices.into_iter().map(|d| (d.device, d.end.as_ns(), d.mean_delay_ns, d.each.iter().map(|t| t.as_ns()).collect())).collect();
    let util = c.utilisation.named().to_vec();
    Ok((c.elapsed.as_ns(), c.transfers, c.bytes_to_host, c.bytes_to_device, util, c.utilisation.busiest(), devices))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let sub = PyModule::new(m.py(), "array")?;
    sub.add_function(wrap_pyfunction!(host_params, &sub)?)?;
    sub.add_function(wrap_pyfunction!(host_limit, &sub)?)?;
    sub.add_function(wrap_pyfunction!(host_knee, &sub)?)?;
    sub.add_function(wrap_pyfunction!(combine, &sub)?)?;
    m.add_submodule(&sub)
}
