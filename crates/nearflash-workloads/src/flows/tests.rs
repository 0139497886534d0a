//! The flow engine against a small device: counts and bytes as the requests say, open-loop arrival times kept,
//! closed-loop depths held, host-side waiting in end-to-end delay, errors that name the flow, file and line.

use super::*;
use crate::trace::{ParseOptions, Request};
use nearflash_core::bench::Pattern;
use nearflash_core::config::load_preset;
use nearflash_core::DeviceOptions;
use std::sync::{Arc, Mutex};

fn device() -> Device {
    let mut t = load_preset("cosmos-plus").unwrap();
    for (k, v) in [("channels", "2"), ("chips_per_channel", "2"), ("blocks_per_plane", "64"), ("pages_per_block", "32"), ("over_provisioning", "20")] {
        t.set(k, v).unwrap();
    }
    let mut d = Device::memory(t, DeviceOptions { materialise: false, ..Default::default() }).unwrap();
    d.precondition(0.5, nearflash_core::ftl::FillPattern::Sequential, 0.0, 1).unwrap();
    d
}

fn req(time_ns: u64, op: Op, offset: u64, len: u64, line: u64) -> Request {
    Request { time_ns, op, offset, len, line, recorded_ns: None }
}

fn flow(name: &str, reqs: Vec<Request>, timing: Timing) -> Flow {
    Flow {
        name: name.into(),
        source: Box::new(InMemory::new(reqs)),
        kind: "trace",
        origin: format!("{name}.trace"),
        timing,
        mapping: Mapping::default(),
        priority: Priority::default(),
        queue_depth: None,
    }
}

const OPEN: Timing = Timing::Open { time_scale: 1.0 };

/// A closed-loop synthetic flow at depth 8 and medium priority.
fn closed_synthetic(name: &str, spec: &SyntheticSpec) -> Flow {
    Flow {
        name: name.into(),
        source: Box::new(Synthetic::new(name, spec, 4096).unwrap()),
        kind: "synthetic",
        origin: "synthetic".into(),
        timing: Timing::Closed { iodepth: 8 },
        mapping: Mapping::default(),
        priority: Priority::Medium,
        queue_depth: None,
    }
}

fn mixed(n: u64, gap_ns: u64) -> Vec<Request> {
    (0..n)
        .map(|i| {
            let op = match i % 10 {
                9 => Op::Flush,
                8 => Op::Trim,
                k if k % 3 == 0 => Op::Write,
                _ => Op::Read,
            };
            let (off, len) = if op == Op::Flush { (0, 0) } else { ((i * 7919 % 4000) * 4096, 4096 * (1 + i % 3)) };
            req(i * gap_ns, op, off, len, i + 1)
        })
        .collect()
}

#[test]
fn a_replayed_trace_issues_exactly_its_requests() {
    let mut dev = device();
    let reqs = mixed(300, 20_000);
    let r = run(&mut dev, vec![flow("t", reqs.clone(), OPEN)], Options::default(), None).unwrap();
    let f = &r.flows[0];
    let count = |op: Op| reqs.iter().filter(|q| q.op == op).count() as u64;
    let bytes = |op: Op| reqs.iter().filter(|q| q.op == op).map(|q| q.len).sum::<u64>();
    assert_eq!(f.all.requests, 300);
    for op in [Op::Read, Op::Write, Op::Trim, Op::Flush] {
        assert_eq!(f.ops[op.name()].requests, count(op), "{op:?}");
    }
    assert_eq!((f.ops["read"].bytes, f.ops["write"].bytes), (bytes(Op::Read), bytes(Op::Write)));
    // The device saw the same commands (one each: nothing here is split).
    let rep = &r.report.ops;
    assert_eq!((rep["read"].count, rep["write"].count, rep["flush"].count, rep["trim"].count), (count(Op::Read), count(Op::Write), count(Op::Flush), count(Op::Trim)));
    assert_eq!(rep["read"].bytes, bytes(Op::Read));
    assert_eq!(f.all.errors, 0);
    let tr = f.trace.as_ref().unwrap();
    assert_eq!((tr.requests, tr.duration_ns), (300, 299 * 20_000));
    assert!(f.first_arrival_ns <= f.last_completion_ns && f.elapsed_ns >= 299 * 20_000);
}

#[test]
fn open_loop_keeps_arrival_times_and_scales_them() {
    // Reads far apart: each meets an idle device, so device time is one read's latency, and the run lasts as long
    // as the trace (scaled).
    let reqs: Vec<Request> = (0..20).map(|i| req(i * 1_000_000, Op::Read, i * 4096 * 97, 4096, i + 1)).collect();
    let mut dev = device();
    let one = run(&mut dev, vec![flow("t", reqs.clone(), OPEN)], Options::default(), None).unwrap().flows.remove(0);
    let lat = one.all.device_response_time.clone();
    assert!((lat.max_us - lat.min_us) / lat.min_us < 0.25, "{lat:?}");
    assert_eq!(one.all.end_to_end_delay.mean_us, lat.mean_us, "nothing waited for the queue");
    assert!(one.elapsed_ns >= 19_000_000 && one.elapsed_ns < 19_000_000 + 1_000_000);
    assert!(one.mean_queue_depth < 0.2 && one.max_queue_depth == 1, "{}", one.mean_queue_depth);
    let half = run(&mut dev, vec![flow("t", reqs, Timing::Open { time_scale: 0.5 })], Options::default(), None).unwrap();
    assert!(half.flows[0].elapsed_ns >= 9_500_000 && half.flows[0].elapsed_ns < 10_500_000, "{}", half.flows[0].elapsed_ns);
}

#[test]
fn closed_loop_holds_its_depth_and_ignores_times() {
    let reqs: Vec<Request> = (0..2000).map(|i| req(i * 1_000_000_000, Op::Read, (i * 7919 % 6000) * 4096, 4096, i + 1)).collect();
    let mut dev = device();
    let r = run(&mut dev, vec![flow("t", reqs, Timing::Closed { iodepth: 16 })], Options::default(), None).unwrap();
    let f = &r.flows[0];
    assert_eq!((f.all.requests, f.max_queue_depth), (2000, 16));
    assert!(f.mean_queue_depth > 15.0 && f.mean_queue_depth <= 16.0, "{}", f.mean_queue_depth);
    assert!(f.elapsed_ns < 1_000_000_000, "arrival times are ignored");
}

#[test]
fn a_full_queue_makes_requests_wait_on_the_host() {
    let reqs: Vec<Request> = (0..64).map(|i| req(0, Op::Read, i * 4096 * 13, 4096, i + 1)).collect();
    let mut dev = device();
    let mut f = flow("t", reqs, OPEN);
    f.queue_depth = Some(2);
    let r = run(&mut dev, vec![f], Options::default(), None).unwrap();
    let f = &r.flows[0];
    assert_eq!(f.max_queue_depth, 2);
    assert!(f.all.end_to_end_delay.mean_us > 5.0 * f.all.device_response_time.mean_us, "{:?}", f.all);
}

#[test]
fn flows_share_the_device_on_their_own_queues() {
    let mut dev = device();
    let reads = flow("reads", mixed(200, 10_000), OPEN);
    let spec = SyntheticSpec { pattern: Pattern::RandWrite, block_size: 8192, ios: 500, span: (0, 4096), seed: 3, rate_iops: None };
    let writes = closed_synthetic("writes", &spec);
    let r = run(&mut dev, vec![reads, writes], Options::default(), None).unwrap();
    let (a, b) = (&r.flows[0], &r.flows[1]);
    assert_eq!((a.qid, b.qid, a.source, b.source, a.timing, b.timing), (1, 2, "trace", "synthetic", "open", "closed"));
    assert_eq!((b.all.requests, b.ops["write"].bytes), (500, 500 * 8192));
    assert_eq!(r.report.ops["write"].count, a.ops["write"].requests + 500);
    assert_eq!(r.requests, 700);
    // The synthetic flow draws the same requests whoever runs beside it.
    let mut again = Synthetic::new("writes", &spec, 4096).unwrap();
    let mut other = Synthetic::new("writes", &spec, 4096).unwrap();
    for _ in 0..50 {
        assert_eq!(again.next_request().unwrap().unwrap(), other.next_request().unwrap().unwrap());
    }
}

#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn per_request_latencies_list_every_request_once() {
    let mut dev = device();
    let reqs = mixed(120, 5_000);
    let out = Shared::default();
    let opts = Options { data: false, latencies: Some(Box::new(out.clone())) };
    run(&mut dev, vec![flow("t", reqs.clone(), OPEN)], opts, None).unwrap();
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(LATENCY_HEADER));
    let mut rows: Vec<Vec<String>> = lines.map(|l| l.split(',').map(String::from).collect()).collect();
    rows.sort_by_key(|r| r[1].parse::<u64>().unwrap());
    assert_eq!(rows.len(), 120);
    for (r, q) in rows.iter().zip(&reqs) {
        assert_eq!((r[2].parse::<u64>().unwrap(), r[3].as_str(), r[4].parse::<u64>().unwrap(), r[5].parse::<u64>().unwrap()), (q.line, q.op.name(), q.offset, q.len));
        let n: Vec<u64> = r[6..11].iter().map(|x| x.parse().unwrap()).collect();
        assert_eq!((n[0], n[3], n[4]), (q.time_ns, n[2] - n[1], n[2] - n[0]));
    }
}

#[test]
fn repeated_trace_files_continue_where_the_round_ended() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.trace");
    std::fs::write(&p, "0 0 0 8 1\n1000 0 8 8 0\n5000 0 16 8 1\n").unwrap();
    let mut src = TraceFile::open(&p, &ParseOptions::default(), 3, None).unwrap();
    let times: Vec<u64> = std::iter::from_fn(|| src.next_request()).map(|r| r.unwrap().time_ns).collect();
    assert_eq!(times, [0, 1000, 5000, 5000, 6000, 10000, 10000, 11000, 15000]);
    let st = src.trace_stats().unwrap();
    assert_eq!((st.requests, st.reads, st.duration_ns), (9, 6, 15000));
    assert_eq!(src.progress().0, src.progress().1);
    let mut two = TraceFile::open(&p, &ParseOptions::default(), 3, Some(4)).unwrap();
    assert_eq!(std::iter::from_fn(|| two.next_request()).count(), 4);
}

#[test]
fn wrong_flows_and_requests_are_refused_naming_what() {
    let mut dev = device();
    let msg = |flows: Vec<Flow>, dev: &mut Device| run(dev, flows, Options::default(), None).unwrap_err().to_string();
    let lbas = dev.namespace().lbas;
    let past = vec![req(0, Op::Read, 0, 4096, 1), req(10, Op::Read, lbas * 4096, 4096, 2)];
    let e = msg(vec![flow("t", past, OPEN)], &mut dev);
    assert!(e.contains("flow \"t\": t.trace:2: a read of 4096 bytes") && e.contains("ends past"), "{e}");
    assert!(dev.next_completion_time(1).is_none(), "the failed run left nothing in flight");
    let e = msg(vec![flow("t", vec![req(0, Op::Write, 0, 0, 9)], OPEN)], &mut dev);
    assert!(e.contains("t.trace:9: a request of 0 bytes"), "{e}");
    let e = msg(vec![flow("a", vec![], OPEN), flow("a", vec![], OPEN)], &mut dev);
    assert!(e.contains("two flows are named \"a\""), "{e}");
    assert!(msg(vec![], &mut dev).contains("at least one flow"));
    let many: Vec<Flow> = (0..17).map(|i| flow(&format!("f{i}"), vec![], OPEN)).collect();
    assert!(msg(many, &mut dev).contains("17 flows, but the device has 16 I/O queues"));
    for bad in [f64::NAN, 0.0, -1.0, f64::INFINITY] {
        let e = msg(vec![flow("t", vec![], Timing::Open { time_scale: bad })], &mut dev);
        assert!(e.contains("time scale") && e.contains("must be a positive number"), "{e}");
    }
    assert!(msg(vec![flow("t", vec![], Timing::Closed { iodepth: 0 })], &mut dev).contains("iodepth must be at least 1"));
    let mut deep = flow("t", vec![], OPEN);
    deep.queue_depth = Some(5000);
    assert!(msg(vec![deep], &mut dev).contains("queue depth 5000 exceeds the device's maximum of 1023"));
    assert!("highest".parse::<Priority>().unwrap_err().to_string().contains("urgent, high, medium or low"));
    let mut narrow = flow("t", vec![], OPEN);
    narrow.mapping.span = Some((lbas - 1, 2));
    assert!(msg(vec![narrow], &mut dev).contains("is not inside the device's"));
    let spec = SyntheticSpec { pattern: Pattern::RandRead, block_size: 1000, ios: 1, span: (0, 100), seed: 1, rate_iops: None };
    assert!(Synthetic::new("s", &spec, 4096).err().unwrap().contains("multiple of the 4096 B LBA"));
    let spec = SyntheticSpec { block_size: 4096, rate_iops: Some(-3.0), ..spec };
    assert!(Synthetic::new("s", &spec, 4096).err().unwrap().contains("rate -3"));
    let spec = SyntheticSpec { rate_iops: None, ios: 0, ..spec };
    assert!(Synthetic::new("s", &spec, 4096).err().unwrap().contains("at least one I/O"));
    let spec = SyntheticSpec { ios: 1000, rate_iops: Some(1e-9), ..spec };
    assert!(Synthetic::new("s", &spec, 4096).err().unwrap().contains("past the simulated clock"), "never clamped");
    let far = vec![req(0, Op::Read, 0, 4096, 1), req(1 << 62, Op::Read, 0, 4096, 2)];
    let e = msg(vec![flow("t", far, Timing::Open { time_scale: 4.0 })], &mut dev);
    assert!(e.contains("flow \"t\": line 2: arrival at") && e.contains("past the simulated clock"), "{e}");
    // A run refused for its second flow touched no queue for its first.
    let mut fresh = device();
    let mut deep = flow("deep", vec![], OPEN);
    deep.queue_depth = Some(5000);
    assert!(msg(vec![flow("a", mixed(2, 10), OPEN), deep], &mut fresh).contains("exceeds the device's maximum"));
    assert!(!fresh.has_queue(1), "a refused run changes nothing");
    // The device still works after all of these.
    let ok = run(&mut dev, vec![flow("t", mixed(10, 1000), OPEN)], Options::default(), None).unwrap();
    assert_eq!(ok.flows[0].all.requests, 10);
}

#[test]
fn a_failing_progress_callback_stops_the_run_cleanly() {
    let mut dev = device();
    let reqs: Vec<Request> = (0..20_000).map(|i| req(0, Op::Read, (i % 5000) * 4096, 4096, i + 1)).collect();
    let mut calls = 0;
    let mut cb = |_d: u64, _t: u64| -> Result<()> {
        calls += 1;
        Err(SimError::InvalidArgument("stop".into()))
    };
    let e = run(&mut dev, vec![flow("t", reqs, Timing::Closed { iodepth: 4 })], Options::default(), Some(&mut cb));
    assert!(e.unwrap_err().to_string().contains("stop"));
    assert_eq!(calls, 1);
    assert!(dev.next_completion_time(1).is_none());
}

#[test]
fn data_runs_store_what_they_write() {
    let mut t = load_preset("cosmos-plus").unwrap();
    for (k, v) in [("channels", "2"), ("chips_per_channel", "1"), ("blocks_per_plane", "32"), ("pages_per_block", "16"), ("over_provisioning", "30")] {
        t.set(k, v).unwrap();
    }
    let mut dev = Device::memory(t, DeviceOptions::default()).unwrap();
    let reqs = vec![req(0, Op::Write, 0, 8192, 1), req(100_000, Op::Read, 0, 8192, 2)];
    let r = run(&mut dev, vec![flow("t", reqs, OPEN)], Options { data: true, latencies: None }, None).unwrap();
    assert_eq!(r.flows[0].all.errors, 0);
    dev.create_queue_pair(5, 4).unwrap();
    let mut back = vec![0u8; 8192];
    let d = dev.execute(5, Sqe::rw(opcode::READ, 0, 0, 2), DataBuf::FromDevice(&mut back)).unwrap();
    assert!(d.status.is_success());
    assert!(back.iter().enumerate().all(|(i, &b)| b == (i * 131 % 251) as u8));
}

#[test]
fn a_trace_file_without_requests_is_an_error_not_an_empty_report() {
    let dir = std::env::temp_dir().join(format!("nearflash-flows-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("other-device.trace");
    std::fs::write(&path, "0 0 0 8 1\n10 0 8 8 1\n").unwrap();
    let opts = ParseOptions { device: Some("3".into()), ..ParseOptions::default() };
    let file = TraceFile::open(&path, &opts, 2, None).unwrap();
    let mut f = flow("t", vec![], OPEN);
    f.source = Box::new(file);
    let e = run(&mut device(), vec![f], Options::default(), None).unwrap_err().to_string();
    assert!(e.contains("holds no requests (2 lines") && e.contains("the 2 of other devices were left out"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn flows_borrow_their_queues_and_never_take_one_with_commands_in_flight() {
    use nearflash_core::nvme::{opcode, DataBuf, Sqe};
    let mut dev = device();
    dev.create_queue_pair(2, 9).unwrap();
    dev.submit(2, Sqe::rw(opcode::READ, 77, 0, 1), DataBuf::None).unwrap();
    let two = || vec![flow("a", mixed(20, 1000), OPEN), flow("b", mixed(20, 1000), OPEN)];
    let e = run(&mut dev, two(), Options::default(), None).unwrap_err().to_string();
    assert!(e.contains("queue 2 has commands in flight: the 2 flows run on queues 1..=2"), "{e}");
    assert_eq!(dev.wait(2).map(|c| c.cqe.cid), Some(77), "the user's command still completes");
    assert_eq!(run(&mut dev, two(), Options::default(), None).unwrap().flows.len(), 2);
    assert_eq!((dev.queue_depth(1), dev.queue_depth(2)), (None, Some(9)), "given back as they were");
}

/// A flow's priority is its queue's QPRIO: the device creates the queue with it while the flows run, and gives the
/// borrowed queue back with the priority it had.
#[test]
fn a_flows_priority_is_its_queues_class_and_the_queue_is_given_back_as_it_was() {
    let mut dev = device();
    dev.create_queue_pair(1, 8).unwrap();
    let mut urgent = flow("u", mixed(10, 1000), OPEN);
    urgent.priority = "urgent".parse().unwrap();
    let r = run(&mut dev, vec![urgent], Options::default(), None).unwrap();
    assert_eq!(r.flows[0].all.requests, 10);
    assert_eq!(dev.queue_priority(1), Some(Priority::Medium), "the borrowed queue is given back as it was");
    assert_eq!(dev.queue_depth(1), Some(8));
}

/// The favoured flow's slowdown falls with its priority (issue 24): a trace's writes beside a closed-loop writer
/// that keeps the write buffer full wait for room behind the writer's at equal priority, and go first when their
/// queue's class is higher (the buffer lets waiting writes in by class, as the flash scheduler serves a die).
#[test]
fn a_favoured_flows_writes_wait_less_for_the_write_buffer() {
    let favoured_mean_us = |priority: Priority| {
        let mut t = load_preset("cosmos-plus").unwrap();
        for (k, v) in [("channels", "2"), ("chips_per_channel", "2"), ("blocks_per_plane", "64"), ("pages_per_block", "32"), ("over_provisioning", "20"), ("write_buffer", "1MiB")] {
            t.set(k, v).unwrap();
        }
        let mut dev = Device::memory(t, DeviceOptions { materialise: false, ..Default::default() }).unwrap();
        let writes: Vec<Request> = (0..150).map(|i| req(i * 1_000_000, Op::Write, (i * 7919 % 2000) * 4096, 4096, i + 1)).collect();
        let mut favoured = flow("favoured", writes, OPEN);
        favoured.priority = priority;
        let spec = SyntheticSpec { pattern: Pattern::RandWrite, block_size: 16384, ios: 3000, span: (4096, 4096), seed: 5, rate_iops: None };
        let writer = closed_synthetic("writer", &spec);
        let r = run(&mut dev, vec![favoured, writer], Options::default(), None).unwrap();
        assert_eq!(r.flows[0].all.requests, 150);
        r.flows[0].all.device_response_time.mean_us
    };
    let (medium, high, urgent) = (favoured_mean_us(Priority::Medium), favoured_mean_us(Priority::High), favoured_mean_us(Priority::Urgent));
    // Measured: medium 3.2 ms (first come, first served behind the writer's 8), high and urgent 0.6 ms.
    assert!(high < 0.5 * medium && urgent < 0.5 * medium, "medium {medium:.0} us, high {high:.0}, urgent {urgent:.0}");
}

#[test]
fn a_flows_latencies_past_an_hour_are_reported_as_they_were() {
    // Found by the audit: the flow's histograms ended at an hour, so a 2 h read was reported as 3,600 s.
    let mut t = load_preset("cosmos-plus").unwrap();
    for (k, v) in [("channels", "1"), ("chips_per_channel", "1"), ("blocks_per_plane", "64"), ("pages_per_block", "32"), ("over_provisioning", "20"), ("t_read", "7200s")] {
        t.set(k, v).unwrap();
    }
    let mut dev = Device::memory(t, DeviceOptions { materialise: false, ..Default::default() }).unwrap();
    dev.precondition(0.5, nearflash_core::ftl::FillPattern::Sequential, 0.0, 1).unwrap();
    let r = run(&mut dev, vec![flow("slow", vec![req(0, Op::Read, 0, 4096, 1)], OPEN)], Options::default(), None).unwrap();
    let f = &r.flows[0];
    let secs = f.all.device_response_time.max_us / 1e6;
    assert!(secs > 7200.0 && secs < 7200.0 * 1.002, "{:?}", f.all.device_response_time);
    assert!(f.elapsed_ns as f64 / 1e9 > 7200.0);
    assert_eq!(f.all.device_response_time.mean_us, r.report.ops["read"].latency.mean_us);
}

#[test]
fn a_trace_that_fails_midway_is_refused_before_anything_runs() {
    // Found by the audit: a request past the device on line 3 stopped the run after lines 1 and 2 had been
    // submitted, so the refused run had written to the device (an image's data too). Every request is now
    // checked first.
    let mut dev = device();
    let before = (dev.now(), dev.report().ftl.stats.host_sectors_written);
    let past = dev.namespace().lbas * 4096;
    let reqs = vec![req(0, Op::Write, 0, 8192, 1), req(10, Op::Write, 8192, 4096, 2), req(20, Op::Read, past, 4096, 3)];
    for timing in [OPEN, Timing::Closed { iodepth: 1 }] {
        let e = run(&mut dev, vec![flow("t", reqs.clone(), timing)], Options::default(), None).expect_err("refused");
        assert!(e.to_string().contains("t.trace:3: a read of 4096 bytes"), "{e}");
        assert_eq!((dev.now(), dev.report().ftl.stats.host_sectors_written), before, "nothing ran");
    }
    let zero = vec![req(0, Op::Write, 0, 4096, 1), req(5, Op::Read, 0, 0, 2)];
    let e = run(&mut dev, vec![flow("z", zero, OPEN)], Options::default(), None).expect_err("refused");
    assert!(e.to_string().contains("z.trace:2: a request of 0 bytes"), "{e}");
    assert_eq!(dev.report().ftl.stats.host_sectors_written, before.1);
}
