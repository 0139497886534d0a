//! Measurement of a run: per-class latency histograms and counters, and the report that gathers them with the
//! array, FTL, link, energy and utilisation figures.

use crate::ctrl::sched::{Priority, SchedStats};
use crate::engine::GroupUtilisation;
use crate::ftl::FtlStats;
use crate::host::HostStats;
use crate::nand::NandStats;
use super::latency::LatencyCounts;
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
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Latency {
    pub min_us: f64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

impl Latency {
    /// The figures of a histogram of nanoseconds (all zero when it is empty).
    pub fn of(h: &Histogram<u64>) -> Latency {
        if h.is_empty() {
            return Latency::default();
        }
        let us = |v: u64| v as f64 / 1e3;
        Latency {
            min_us: us(h.min()),
            mean_us: h.mean() / 1e3,
            p50_us: us(h.value_at_quantile(0.5)),
            p90_us: us(h.value_at_quantile(0.9)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
        }
    }
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

/// The longest latency a histogram holds, ns: the simulated clock's range (2^63 ns). Values are bucketed the same
/// whatever this bound (it only adds buckets above), and one past it would be clamped to it, silently: a bound of
/// an hour reported a 2-hour read as 3,600 s.
pub const LATENCY_MAX_NS: u64 = i64::MAX as u64;

pub(crate) struct ClassStats {
    /// Latencies by the histogram's bucket (`LatencyCounts`: the histogram is made when reported).
    latencies: LatencyCounts,
    count: u64,
    errors: u64,
    bytes: u64,
}

impl ClassStats {
    fn new() -> Self {
        ClassStats {
            latencies: LatencyCounts::default(),
            count: 0,
            errors: 0,
            bytes: 0,
        }
    }
}

/// Counters and histograms since the last reset, per queue and command class; the per-class figures merge the
/// queues' when reported (one histogram recorded per completion, not two).
pub(crate) struct Measurements {
    /// Per queue (indexed by its id; 0: the admin queue, kept out of the per-queue figures) and class (by
    /// `OpClass` index), with the queue's priority: indexed, as this is looked up on every completion (queue ids are
    /// small; the reports sort what they gather).
    queues: Vec<QueueStats>,
}

/// One queue's figures per command class (boxed: most queues see few classes), with the queue's priority.
type QueueStats = [Option<Box<(Priority, ClassStats)>>; CLASSES.len()];

impl ClassStats {
    #[inline]
    fn add(&mut self, latency_ns: u64, bytes: u64, ok: bool) {
        self.latencies.record(latency_ns);
        self.count += 1;
        self.bytes += bytes;
        self.errors += u64::from(!ok);
    }

    fn merge(&mut self, other: &ClassStats) {
        self.latencies.merge(&other.latencies);
        self.count += other.count;
        self.bytes += other.bytes;
        self.errors += other.errors;
    }

    fn report(&self, secs: f64) -> OpReport {
        let latency = Latency::of(&self.latencies.to_histogram());
        OpReport {
            count: self.count,
            errors: self.errors,
            bytes: self.bytes,
            iops: self.count as f64 / secs,
            bandwidth_mb_s: self.bytes as f64 / secs / 1e6,
            latency,
        }
    }
}

const CLASSES: [OpClass; 6] = [OpClass::Read, OpClass::Write, OpClass::Flush, OpClass::Trim, OpClass::Admin, OpClass::Vendor];
// A class's index in `CLASSES` is its discriminant (`Measurements` indexes by it).
const _: () = {
    let mut i = 0;
    while i < CLASSES.len() {
        assert!(CLASSES[i] as usize == i);
        i += 1;
    }
};


fn seconds(window_ns: u64) -> f64 {
    window_ns.max(1) as f64 * 1e-9
}

impl Measurements {
    pub fn new() -> Self {
        Measurements { queues: Vec::new() }
    }

    /// A completion of a `class` command from queue `sqid` (of priority `prio`; 0 is the admin queue, kept out of
    /// the per-queue figures).
    #[inline]
    pub fn record(&mut self, class: OpClass, sqid: u16, prio: Priority, latency_ns: u64, bytes: u64, ok: bool) {
        match self.queues.get_mut(usize::from(sqid)).and_then(|by_class| by_class[class as usize].as_mut()) {
            Some(e) => e.1.add(latency_ns, bytes, ok),
            None => self.record_first(class, sqid, prio, latency_ns, bytes, ok),
        }
    }

    /// `record` of the first completion of its queue and class (out of line: the entry is made once).
    #[cold]
    #[inline(never)]
    fn record_first(&mut self, class: OpClass, sqid: u16, prio: Priority, latency_ns: u64, bytes: u64, ok: bool) {
        let q = usize::from(sqid);
        if self.queues.len() <= q {
            self.queues.resize_with(q + 1, Default::default);
        }
        let e = self.queues[q][class as usize].get_or_insert_with(|| Box::new((prio, ClassStats::new())));
        e.1.add(latency_ns, bytes, ok);
    }

    /// Every (queue, class) recorded: (queue, class, priority, figures).
    fn entries(&self) -> impl Iterator<Item = (u16, OpClass, Priority, &ClassStats)> + '_ {
        self.queues.iter().enumerate().flat_map(|(q, by_class)| {
            by_class.iter().zip(CLASSES).filter_map(move |(e, class)| e.as_ref().map(|e| (q as u16, class, e.0, &e.1)))
        })
    }

    /// Per command class, every queue's merged (the same counts as one histogram recorded per class).
    pub fn ops(&self, window_ns: u64) -> BTreeMap<String, OpReport> {
        let secs = seconds(window_ns);
        let mut parts: BTreeMap<OpClass, Vec<&ClassStats>> = BTreeMap::new();
        for (_, class, _, c) in self.entries() {
            parts.entry(class).or_default().push(c);
        }
        parts.iter().map(|(k, cs)| (k.name().to_string(), merged_report(cs, secs))).collect()
    }

    /// The I/O queues' entries: (queue, class, priority, figures).
    fn io_queues(&self) -> impl Iterator<Item = (u16, OpClass, Priority, &ClassStats)> + '_ {
        self.entries().filter(|e| e.0 != 0)
    }

    /// Per I/O queue: its priority and its commands by class.
    pub fn queues(&self, window_ns: u64) -> BTreeMap<u16, QueueReport> {
        let secs = seconds(window_ns);
        let mut out: BTreeMap<u16, QueueReport> = BTreeMap::new();
        for (q, class, prio, c) in self.io_queues() {
            let r = out.entry(q).or_insert_with(|| QueueReport { priority: prio, ops: BTreeMap::new() });
            r.ops.insert(class.name().to_string(), c.report(secs));
        }
        out
    }

    /// Per queue priority (the queues of each merged): commands by class.
    pub fn priorities(&self, window_ns: u64) -> BTreeMap<Priority, BTreeMap<String, OpReport>> {
        let secs = seconds(window_ns);
        let mut parts: BTreeMap<(Priority, OpClass), Vec<&ClassStats>> = BTreeMap::new();
        for (_, class, prio, c) in self.io_queues() {
            parts.entry((prio, class)).or_default().push(c);
        }
        let mut out: BTreeMap<Priority, BTreeMap<String, OpReport>> = BTreeMap::new();
        for ((prio, class), cs) in parts {
            out.entry(prio).or_default().insert(class.name().to_string(), merged_report(&cs, secs));
        }
        out
    }
}

/// The figures of `parts` merged. One part is reported as it is: merging it into new counts gives the same
/// counts (hence the same percentiles, min, max and mean), and a report makes one histogram per figure (a histogram
/// of these bounds costs about 270,000 instructions to create).
fn merged_report(parts: &[&ClassStats], secs: f64) -> OpReport {
    match parts {
        [one] => one.report(secs),
        _ => {
            let mut m = ClassStats::new();
            for p in parts {
                m.merge(p);
            }
            m.report(secs)
        }
    }
}

/// One I/O queue's figures.
#[derive(Debug, Clone, Serialize)]
pub struct QueueReport {
    /// Its priority class (QPRIO).
    pub priority: Priority,
    /// By command class.
    pub ops: BTreeMap<String, OpReport>,
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
    /// Per I/O queue (by queue id): its priority and its commands' latency and throughput by class.
    pub queues: BTreeMap<u16, QueueReport>,
    /// Per queue priority class (urgent, high, medium, low; the queues of each together), by command class.
    pub priorities: BTreeMap<Priority, BTreeMap<String, OpReport>>,
    pub media_errors: u64,
    pub extensions: BTreeMap<String, serde_json::Value>,
}

impl Report {
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("report serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A class recorded on one queue is reported as it is; on several, merged: either way the figures are those
    /// of one histogram of every completion of the class.
    #[test]
    fn one_part_is_reported_as_merging_it_would() {
        let latencies = [1_000u64, 2_500, 7, 120_000, 3_333_333, 99_999];
        let mut one = ClassStats::new();
        let (mut a, mut b) = (ClassStats::new(), ClassStats::new());
        for (i, &l) in latencies.iter().enumerate() {
            one.add(l, 4096, i != 2);
            let part = if i % 2 == 0 { &mut a } else { &mut b };
            part.add(l, 4096, i != 2);
        }
        let mut merged = ClassStats::new();
        merged.merge(&one);
        let key = |r: OpReport| (r.count, r.errors, r.bytes, r.iops, r.latency);
        let direct = key(merged_report(&[&one], 0.5));
        assert_eq!(direct, key(merged.report(0.5)));
        assert_eq!(direct, key(merged_report(&[&a, &b], 0.5)));
        assert_eq!((direct.0, direct.1, direct.2), (6, 1, 6 * 4096));
    }

    /// Found by the audit: the histograms ended at an hour and clamped what was longer, so a read of 2 h
    /// (`--set t_read=7200s`) was reported as 3,600 s, mean and maximum. They now span the clock, and values below
    /// an hour are bucketed as before (the reported figures unchanged).
    #[test]
    fn latencies_past_an_hour_are_not_clamped() {
        let two_hours = 7_200_000_000_000u64;
        let mut c = ClassStats::new();
        c.add(two_hours, 4096, true);
        c.add(LATENCY_MAX_NS, 4096, true);
        let r = c.report(1.0).latency;
        assert!((r.min_us / 1e6 - 7200.0).abs() < 7200.0 * 1e-3, "{r:?}");
        assert!((r.max_us * 1e3 / LATENCY_MAX_NS as f64 - 1.0).abs() < 1e-3, "{r:?}");
        let mut short = ClassStats::new();
        short.add(3_333_333, 4096, true);
        let old = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        let mut old = old;
        old.record(3_333_333).unwrap();
        assert_eq!(short.report(1.0).latency, Latency::of(&old));
    }
}
