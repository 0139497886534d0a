//! The shared host's parameters (`host.toml` beside this crate, each with its unit and source) and the most units of
//! work per second it can take of a path (docs/arrays.md, "The saturation point").

use std::fmt;

/// The host model's file, compiled in (as the presets are).
const HOST_TOML: &str = include_str!("../host.toml");

/// Every parameter, in the order `host.toml` lists them (the order reports show them in).
pub const PARAMS: [&str; 8] = [
    "switch.uplink_bandwidth",
    "switch.latency",
    "host.root_complex_bandwidth",
    "host.dram_bandwidth",
    "host.cpu_cores",
    "cpu.scan_ns_per_byte",
    "cpu.topk_merge_ns_per_candidate",
    "cpu.partial_sum_ns_per_byte",
];

/// An argument the host model refuses, with a message naming it.
#[derive(Debug, Clone, PartialEq)]
pub struct HostError(pub String);

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HostError {}

#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub path: &'static str,
    pub value: f64,
    pub unit: String,
    pub source: String,
}

/// What one unit of a path's work (a byte scanned, a query searched on one device's shard) costs the shared host:
/// bytes each way and host CPU ns per unit, and host CPU ns paid once per query however many devices' units it
/// spans (`cpu_ns_per_query`: a query is one unit on each of N devices, e.g. hashing it on the host before the
/// shards are searched), so a unit costs `cpu_ns + cpu_ns_per_query / N` of host CPU on N devices.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PathCost {
    pub to_host_bytes: f64,
    pub to_device_bytes: f64,
    pub cpu_ns: f64,
    pub cpu_ns_per_query: f64,
}

/// The shared host: a PCIe switch's uplink, one root complex, host DRAM and host CPU cores.
#[derive(Debug, Clone, PartialEq)]
pub struct HostModel {
    params: Vec<Param>,
}

impl HostModel {
    /// `host.toml`'s values with `overrides` replacing some by leaf name (`uplink_bandwidth`) or full path.
    pub fn new(overrides: &[(String, f64)]) -> Result<Self, HostError> {
        let mut host = Self::parse(HOST_TOML).expect("the compiled-in host.toml is valid (a unit test reads it)");
        for (name, value) in overrides {
            host.set(name, *value)?;
        }
        Ok(host)
    }

    fn parse(text: &str) -> Result<Self, HostError> {
        let table: toml::Table = text.parse().map_err(|e| HostError(format!("host.toml: {e}")))?;
        let mut params = Vec::with_capacity(PARAMS.len());
        for path in PARAMS {
            let (section, name) = path.split_once('.').expect("PARAMS are section.name");
            let entry = table.get(section).and_then(|s| s.get(name));
            let field = |key: &str| entry.and_then(|e| e.get(key));
            let value = field("value").and_then(|v| v.as_float().or_else(|| v.as_integer().map(|i| i as f64)));
            let text = |key: &str| field(key).and_then(|v| v.as_str()).map(str::to_owned);
            match (value, text("unit"), text("source")) {
                (Some(value), Some(unit), Some(source)) => params.push(Param { path, value, unit, source }),
                _ => return Err(HostError(format!("host.toml: {path} needs a value, a unit and a source"))),
            }
        }
        Ok(Self { params })
    }

    /// Replaces one parameter (by leaf name or full path) after checking it: counts are whole and >= 1, times
    /// (ns) finite and >= 0, everything else finite and > 0.
    pub fn set(&mut self, name: &str, value: f64) -> Result<(), HostError> {
        let hits: Vec<usize> = (0..self.params.len())
            .filter(|&i| {
                let p = self.params[i].path;
                p == name || p.strip_suffix(name).is_some_and(|head| head.ends_with('.'))
            })
            .collect();
        let [i] = hits[..] else {
            return Err(HostError(format!("unknown array host parameter {name:?}; have {:?}", PARAMS)));
        };
        let p = &mut self.params[i];
        let ok = match p.unit.as_str() {
            "count" => value.is_finite() && value >= 1.0 && value.fract() == 0.0,
            "ns" => value.is_finite() && value >= 0.0,
            _ => value.is_finite() && value > 0.0,
        };
        if !ok {
            let what = match p.unit.as_str() {
                "count" => "a whole count >= 1".to_owned(),
                "ns" => "a finite number >= 0 of ns".to_owned(),
                unit => format!("a finite positive number of {unit}"),
            };
            return Err(HostError(format!("host parameter {name} must be {what}, got {value}")));
        }
        p.value = value;
        p.source = "override".to_owned();
        Ok(())
    }

    pub fn params(&self) -> &[Param] {
        &self.params
    }

    /// A parameter's value by its full path (one of [`PARAMS`]).
    pub fn get(&self, path: &str) -> f64 {
        self.params.iter().find(|p| p.path == path).unwrap_or_else(|| panic!("no host parameter {path}")).value
    }

    pub fn uplink_bytes_per_ns(&self) -> f64 {
        self.get("switch.uplink_bandwidth")
    }

    pub fn root_complex_bytes_per_ns(&self) -> f64 {
        self.get("host.root_complex_bandwidth")
    }

    pub fn dram_bytes_per_ns(&self) -> f64 {
        self.get("host.dram_bandwidth")
    }

    pub fn cpu_cores(&self) -> usize {
        self.get("host.cpu_cores") as usize
    }

    pub fn switch_latency_ns(&self) -> u64 {
        self.get("switch.latency") as u64
    }

    /// The most units/s of a path's work the host can take on `devices` devices (infinite when a unit costs it
    /// nothing), and the resource that sets it: min(uplink / b_up, root complex / b_up, DRAM / (b_up + b_down),
    /// cores / (c + c_q / N)). The uplink and root complex are full duplex (the busier direction counts); DRAM
    /// carries both.
    pub fn limit(&self, cost: PathCost, devices: f64) -> (f64, &'static str) {
        let cpu = cost.cpu_ns + cost.cpu_ns_per_query / devices.max(1.0);
        let limits = self.limits(cost);
        tightest(&[limits[0], limits[1], limits[2], ("host CPU", per(self.cores_ns_per_s(), cpu))])
    }

    /// The knee N*: the device count at which N devices of `device_rate` units/s each reach the host's limit,
    /// N x B1 = limit(N), and the resource that sets it. The byte limits do not depend on N (N* = limit / B1);
    /// the CPU's does when a query costs it something once (N B1 (c + c_q / N) = C gives
    /// N* = (C - B1 c_q) / (B1 c)): 0 when hashing every query alone takes more than the cores have at one device's
    /// rate (the path is CPU-bound from the first device), infinite when nothing ever binds.
    pub fn knee(&self, cost: PathCost, device_rate: f64) -> (f64, &'static str) {
        let [up, rc, dram, _] = self.limits(cost);
        let spare = self.cores_ns_per_s() - device_rate * cost.cpu_ns_per_query;
        let cpu = if spare <= 0.0 {
            0.0
        } else if cost.cpu_ns > 0.0 {
            spare / (device_rate * cost.cpu_ns)
        } else {
            f64::INFINITY
        };
        let knees = [up, rc, dram].map(|(name, limit)| (name, limit / device_rate));
        tightest(&[knees[0], knees[1], knees[2], ("host CPU", cpu)])
    }

    /// Host CPU ns the cores give per second.
    fn cores_ns_per_s(&self) -> f64 {
        self.cpu_cores() as f64 * 1e9
    }

    /// Each resource's limit on a path's units/s, the CPU's for a unit's own `cpu_ns` only.
    fn limits(&self, cost: PathCost) -> [(&'static str, f64); 4] {
        let up = cost.to_host_bytes.max(cost.to_device_bytes);
        [
            ("switch uplink", per(self.uplink_bytes_per_ns() * 1e9, up)),
            ("root complex", per(self.root_complex_bytes_per_ns() * 1e9, up)),
            ("host DRAM", per(self.dram_bytes_per_ns() * 1e9, cost.to_host_bytes + cost.to_device_bytes)),
            ("host CPU", per(self.cores_ns_per_s(), cost.cpu_ns)),
        ]
    }
}

/// A capacity over a load per unit: units/s (infinite when a unit costs nothing).
fn per(capacity: f64, load: f64) -> f64 {
    if load > 0.0 { capacity / load } else { f64::INFINITY }
}

/// The smallest value and its name (the first of equals).
fn tightest(limits: &[(&'static str, f64)]) -> (f64, &'static str) {
    let mut best = limits[0];
    for l in &limits[1..] {
        if l.1 < best.1 {
            best = *l;
        }
    }
    (best.1, best.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_gives_every_parameter_with_a_unit_and_a_source() {
        let host = HostModel::new(&[]).unwrap();
        assert_eq!(host.params().iter().map(|p| p.path).collect::<Vec<_>>(), PARAMS);
        for p in host.params() {
            assert!(p.value > 0.0 && !p.unit.is_empty() && p.source.len() > 20, "{p:?}");
        }
        assert_eq!(host.cpu_cores(), 16);
    }

    #[test]
    fn overrides_go_by_leaf_name_and_are_checked() {
        let host = HostModel::new(&[("uplink_bandwidth".into(), 8.0), ("host.cpu_cores".into(), 4.0)]).unwrap();
        assert_eq!((host.uplink_bytes_per_ns(), host.cpu_cores()), (8.0, 4));
        assert_eq!(host.params()[0].source, "override");
        for (name, value, says) in [
            ("bandwidth", 1.0, "unknown"),
            ("link_bandwidth", 1.0, "unknown"),
            ("nope", 1.0, "unknown"),
            ("uplink_bandwidth", 0.0, "positive"),
            ("uplink_bandwidth", -1.0, "positive"),
            ("uplink_bandwidth", f64::NAN, "positive"),
            ("cpu_cores", 1.5, "whole"),
            ("cpu_cores", 0.0, "whole"),
            ("latency", -1.0, ">= 0"),
            ("latency", f64::INFINITY, ">= 0"),
        ] {
            let err = HostModel::new(&[(name.into(), value)]).unwrap_err();
            assert!(err.0.contains(says) && err.0.contains(name), "{name}={value}: {err}");
        }
        assert_eq!(HostModel::new(&[("latency".into(), 0.0)]).unwrap().switch_latency_ns(), 0);
    }

    #[test]
    fn a_damaged_file_is_refused_naming_what_is_missing() {
        let err = HostModel::parse("[switch]\nuplink_bandwidth = { value = 1, unit = \"GB/s\" }\n").unwrap_err();
        assert!(err.0.contains("switch.uplink_bandwidth"), "{err}");
        assert!(HostModel::parse("[switch\n").is_err());
    }

    #[test]
    fn the_limit_is_the_tightest_resource_by_hand() {
        let o = |n: &str, v: f64| (n.to_owned(), v);
        let host = HostModel::new(&[
            o("uplink_bandwidth", 10.0),
            o("root_complex_bandwidth", 20.0),
            o("dram_bandwidth", 12.0),
            o("cpu_cores", 4.0),
        ])
        .unwrap();
        let cost = |up, down, cpu| PathCost { to_host_bytes: up, to_device_bytes: down, cpu_ns: cpu, cpu_ns_per_query: 0.0 };
        assert_eq!(host.limit(cost(2.0, 0.0, 1.0), 1.0), (4e9, "host CPU"));
        assert_eq!(host.limit(cost(2.0, 0.0, 0.5), 1.0), (5e9, "switch uplink"));
        assert_eq!(host.limit(cost(2.0, 2.0, 0.0), 1.0), (3e9, "host DRAM"));
        assert_eq!(host.limit(cost(0.0, 0.0, 0.0), 1.0), (f64::INFINITY, "switch uplink"));
        assert_eq!(host.knee(cost(2.0, 0.0, 0.5), 1e9), (5.0, "switch uplink"));
        assert_eq!(host.knee(cost(2.0, 0.0, 1.0), 1e9), (4.0, "host CPU"));
    }

    #[test]
    fn a_cost_paid_once_per_query_spreads_over_the_devices() {
        let host = HostModel::new(&[("cpu_cores".to_owned(), 4.0)]).unwrap(); // 4e9 CPU ns a second
        // 1 ns per unit and 3 ns once per query: on N devices a unit costs 1 + 3 / N ns
        let c = PathCost { to_host_bytes: 0.0, to_device_bytes: 0.0, cpu_ns: 1.0, cpu_ns_per_query: 3.0 };
        assert_eq!(host.limit(c, 1.0), (1e9, "host CPU"));
        assert_eq!(host.limit(c, 3.0), (2e9, "host CPU"));
        // N B1 (1 + 3 / N) = 4e9 at B1 = 0.5e9: N = (4 - 1.5) / 0.5 = 5, where 5 x 0.5e9 = limit(5) = 4e9 / 1.6
        let (knee, by) = host.knee(c, 0.5e9);
        assert_eq!((knee, by), (5.0, "host CPU"));
        assert!((knee * 0.5e9 - host.limit(c, knee).0).abs() < 1.0);
        // hashing alone takes every core at one device's rate: CPU-bound from the first device
        assert_eq!(host.knee(c, 2e9), (0.0, "host CPU"));
        // only the per-query cost: the units it buys grow with N as N B1 does, so no knee
        let once = PathCost { cpu_ns: 0.0, ..c };
        assert_eq!(host.knee(once, 1e9).0, f64::INFINITY);
        assert_eq!(host.limit(once, 8.0), (4e9 / (3.0 / 8.0), "host CPU"));
    }
}
