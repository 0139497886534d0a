//! Measurement of a run: per-class latency histograms and counters, and the report that gathers them with the
//! array, FTL, link, energy and utilisation figures.

use crate::ctrl::sched::SchedStats;
use crate::engine::GroupUtilisation;
use crate::ftl::FtlStats;
use crate::host::HostStats;
use crate::nand::NandStats;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::BTreeMap;

/// Command classes measured separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum OpClass {
    Read,
    Write,
    Flush,
    Trim,
    Admin,
    Vendor,
}

impl OpClass {
    pub fn name(self) -> &'static str {
        match self {
            OpClass::Read => "read",
            OpClass::Write => "write",
            OpClass::Flush => "flush",
            OpClass::Trim => "trim",
            OpClass::Admin => "admin",
            OpClass::Vendor => "vendor",
        }
    }
}

/// Latency percentiles of one class, in microseconds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Latency {
    pub min_us: f64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct OpReport {
    pub count: u64,
    pub errors: u64,
    pub bytes: u64,
    pub iops: f64,
    pub bandwidth_mb_s: f64,
    pub latency: Latency,
}

pub(crate) struct ClassStats {
    hist: Histogram<u64>,
    count: u64,
    errors: u64,
    bytes: u64,
}

impl ClassStats {
    fn new() -> Self {
        ClassStats {
            hist: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds"),
            count: 0,
            errors: 0,
            bytes: 0,
        }
    }
}

/// Counters and histograms since the last reset.
pub(crate) struct Measurements {
    classes: BTreeMap<OpClass, ClassStats>,
}

impl Measurements {
    pub fn new() -> Self {
        Measurements { classes: BTreeMap::new() }
    }

    pub fn record(&mut self, class: OpClass, latency_ns: u64, bytes: u64, ok: bool) {
        let c = self.classes.entry(class).or_insert_with(ClassStats::new);
        c.hist.saturating_record(latency_ns.max(1));
        c.count += 1;
        c.bytes += bytes;
        c.errors += u64::from(!ok);
    }

    pub fn ops(&self, window_ns: u64) -> BTreeMap<String, OpReport> {
        let secs = window_ns.max(1) as f64 * 1e-9;
        let us = |v: u64| v as f64 / 1e3;
        self.classes
            .iter()
            .map(|(k, c)| {
                let h = &c.hist;
                let latency = Latency {
                    min_us: us(h.min()),
                    mean_us: h.mean() / 1e3,
                    p50_us: us(h.value_at_quantile(0.5)),
                    p90_us: us(h.value_at_quantile(0.9)),
                    p99_us: us(h.value_at_quantile(0.99)),
                    p999_us: us(h.value_at_quantile(0.999)),
                    max_us: us(h.max()),
                };
                let r = OpReport {
                    count: c.count,
                    errors: c.errors,
                    bytes: c.bytes,
                    iops: c.count as f64 / secs,
                    bandwidth_mb_s: c.bytes as f64 / secs / 1e6,
                    latency,
                };
                (k.name().to_string(), r)
            })
            .collect()
    }
}

/// FTL figures of a report.
#[derive(Debug, Clone, Serialize)]
pub struct FtlReport {
    #[serde(flatten)]
    pub stats: FtlStats,
    pub waf: f64,
    pub occupancy: f64,
    pub erase_count_min: u32,
    pub erase_count_mean: f64,
    pub erase_count_max: u32,
    pub cmt_hits: Option<u64>,
    pub cmt_misses: Option<u64>,
}

/// Energy in joules by component.
#[derive(Debug, Clone, Serialize)]
pub struct EnergyReport {
    pub dynamic_j: BTreeMap<String, f64>,
    pub static_j: BTreeMap<String, f64>,
    pub total_j: f64,
}

/// What the flash scheduler did.
#[derive(Debug, Clone, Serialize)]
pub struct SchedReport {
    /// Transactions per class (and the time they waited for their die), suspensions.
    #[serde(flatten)]
    pub stats: SchedStats,
    /// Commands submitted while the event loop was ahead of the host's clock (their flash work started at the
    /// loop's clock instead: a host that peeked at one queue's next completion and then submitted earlier).
    pub late_submissions: u64,
    /// Writes let into a full write buffer because no program under way could make room.
    pub buffer_overcommits: u64,
}

/// Everything measured over a window of virtual time.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub preset: String,
    /// Virtual time from the start of the window to the last completion.
    pub elapsed_ns: u64,
    pub ops: BTreeMap<String, OpReport>,
    pub host: HostStats,
    pub nand: NandStats,
    pub ftl: FtlReport,
    pub energy: EnergyReport,
    pub utilisation: Vec<GroupUtilisation>,
    pub sched: SchedReport,
    pub media_errors: u64,
    pub extensions: BTreeMap<String, serde_json::Value>,
}

impl Report {
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("report serializes")
    }
}
