//! A flow's figures, MQSim's per-flow set (request counts, IOPS, bytes and bandwidth, read and write; device
//! response time and end-to-end request delay, mean, minimum and maximum) plus percentiles and queue depth.
//!
//! Device response time runs from a request's submission to the device (its first command entering the
//! submission queue, MQSim's `Enqueue_time`) to its last command's completion; end-to-end delay from its arrival
//! (MQSim's `Arrival_time`), so it adds the time a request waited for room in the queue.

use crate::trace::{Op, TraceStats};
use super::mapping::MapCounts;
use hdrhistogram::Histogram;
use nearflash_core::engine::Time;
use serde::Serialize;
use std::collections::BTreeMap;

/// Latency figures in microseconds.
pub use nearflash_core::Latency;
use nearflash_core::device::LATENCY_MAX_NS;

/// One operation's (or all operations') figures.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct OpFigures {
    pub requests: u64,
    pub errors: u64,
    pub bytes: u64,
    pub iops: f64,
    pub bandwidth_mb_s: f64,
    pub device_response_time: Latency,
    pub end_to_end_delay: Latency,
}

/// What a flow did.
#[derive(Debug, Clone, Serialize)]
pub struct FlowReport {
    pub name: String,
    /// "trace" or "synthetic".
    pub source: &'static str,
    /// "open" (arrival times kept) or "closed" (a fixed number of requests in flight).
    pub timing: &'static str,
    pub priority: &'static str,
    /// The submission queue it ran on.
    pub qid: u16,
    /// Virtual time from its first arrival to its last completion.
    pub elapsed_ns: u64,
    pub first_arrival_ns: u64,
    pub last_completion_ns: u64,
    /// Every operation together, then each (read, write, flush, trim) that occurred.
    pub all: OpFigures,
    pub ops: BTreeMap<&'static str, OpFigures>,
    /// Commands in the device, averaged over the flow's elapsed time, and the most at once.
    pub mean_queue_depth: f64,
    pub max_queue_depth: u32,
    /// Commands issued (requests split at MDTS or wrapping take several).
    pub commands: u64,
    pub mapping: MapCounts,
    pub trace: Option<TraceStats>,
}

struct Hists {
    device: Histogram<u64>,
    e2e: Histogram<u64>,
    requests: u64,
    errors: u64,
    bytes: u64,
}

impl Hists {
    fn new() -> Hists {
        let h = || Histogram::new_with_bounds(1, LATENCY_MAX_NS, 3).expect("valid histogram bounds");
        Hists { device: h(), e2e: h(), requests: 0, errors: 0, bytes: 0 }
    }

    fn figures(&self, secs: f64) -> OpFigures {
        OpFigures {
            requests: self.requests,
            errors: self.errors,
            bytes: self.bytes,
            iops: self.requests as f64 / secs,
            bandwidth_mb_s: self.bytes as f64 / secs / 1e6,
            device_response_time: Latency::of(&self.device),
            end_to_end_delay: Latency::of(&self.e2e),
        }
    }
}

/// Gathers a flow's completed requests.
pub(crate) struct FlowStats {
    all: Hists,
    ops: BTreeMap<&'static str, Hists>,
    first_arrival: Option<Time>,
    last_completion: Time,
    /// Sum over commands of their time in the device (for the mean queue depth).
    cmd_ns: u128,
    pub in_device: u32,
    pub max_in_device: u32,
    pub commands: u64,
    pub mapping: MapCounts,
}

impl FlowStats {
    pub fn new() -> FlowStats {
        FlowStats {
            all: Hists::new(),
            ops: BTreeMap::new(),
            first_arrival: None,
            last_completion: Time::ZERO,
            cmd_ns: 0,
            in_device: 0,
            max_in_device: 0,
            commands: 0,
            mapping: MapCounts::default(),
        }
    }

    pub fn arrived(&mut self, t: Time) {
        self.first_arrival.get_or_insert(t);
    }

    pub fn submitted(&mut self) {
        self.commands += 1;
        self.in_device += 1;
        self.max_in_device = self.max_in_device.max(self.in_device);
    }

    pub fn command_done(&mut self, ns: u64) {
        self.in_device -= 1;
        self.cmd_ns += u128::from(ns);
    }

    /// A request completed at `done` after `device_ns` in the device and `e2e_ns` since it arrived.
    pub fn request_done(&mut self, op: Op, bytes: u64, ok: bool, done: Time, device_ns: u64, e2e_ns: u64) {
        self.last_completion = self.last_completion.max(done);
        let bytes = if op == Op::Flush { 0 } else { bytes };
        for h in [&mut self.all, self.ops.entry(op.name()).or_insert_with(Hists::new)] {
            h.requests += 1;
            h.errors += u64::from(!ok);
            h.bytes += bytes;
            h.device.saturating_record(device_ns.max(1));
            h.e2e.saturating_record(e2e_ns.max(1));
        }
    }

    pub fn report(&self, head: FlowHead, trace: Option<TraceStats>) -> FlowReport {
        let first = self.first_arrival.unwrap_or(Time::ZERO);
        let elapsed = self.last_completion.saturating_since(first);
        let secs = elapsed.max(1) as f64 * 1e-9;
        FlowReport {
            name: head.name,
            source: head.source,
            timing: head.timing,
            priority: head.priority,
            qid: head.qid,
            elapsed_ns: elapsed,
            first_arrival_ns: first.as_ns(),
            last_completion_ns: self.last_completion.as_ns(),
            all: self.all.figures(secs),
            ops: self.ops.iter().map(|(k, h)| (*k, h.figures(secs))).collect(),
            mean_queue_depth: self.cmd_ns as f64 / elapsed.max(1) as f64,
            max_queue_depth: self.max_in_device,
            commands: self.commands,
            mapping: self.mapping.clone(),
            trace,
        }
    }
}

/// The parts of a flow's report that are not measured.
pub(crate) struct FlowHead {
    pub name: String,
    pub source: &'static str,
    pub timing: &'static str,
    pub priority: &'static str,
    pub qid: u16,
}
