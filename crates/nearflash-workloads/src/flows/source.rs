//! Where a flow's requests come from: a trace file (replayed `repeat` times, as MQSim's `Relay_Count`), requests
//! given in memory, or a synthetic fio-like job drawn by `bench`'s own address stream.

use crate::trace::{self, Op, ParseOptions, Request, TraceError, TraceReader, TraceStats};
use nearflash_core::bench::{AddressStream, Pattern};
use nearflash_core::engine::rng_stream;
use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;

/// The latest arrival time a flow may ask for (ns): half the clock's range, the rest left for the run after it.
pub const MAX_ARRIVAL_NS: f64 = 9.223_372_036_854_775e18;

/// A stream of requests, in arrival order.
pub trait Requests: Send {
    /// The next request; `None` at the end.
    fn next_request(&mut self) -> Option<Result<Request, TraceError>>;
    /// (done, total) in the source's own units, for progress.
    fn progress(&self) -> (u64, u64);
    /// What a trace held (`None` for synthetic requests).
    fn trace_stats(&self) -> Option<TraceStats> {
        None
    }
    /// The same requests from their start, read apart from this source (one round of a repeated trace: the rounds
    /// repeat its lines), so that a run checks every request before any is submitted; `None` where requests are
    /// well formed by construction (synthetic jobs draw inside their span).
    fn dry_run(&self) -> Option<Result<Box<dyn Requests>, TraceError>> {
        None
    }
}

/// A trace file, read as it is replayed.
pub struct TraceFile {
    path: PathBuf,
    opts: ParseOptions,
    reader: TraceReader<BufReader<File>>,
    /// Rounds left after this one.
    rounds_left: u32,
    rounds: u32,
    /// Added to the arrival times of this round: the last arrival of the round before (MQSim's replay offset).
    offset_ns: u64,
    last_ns: u64,
    size: u64,
    /// Bytes of the rounds before this one.
    done_before: u64,
    stats: TraceStats,
    /// At most this many requests in all (`None`: every request of every round).
    limit: Option<u64>,
    given: u64,
}

impl TraceFile {
    /// Opens `path`, detecting its format unless `opts` names it; `repeat` rounds (at least 1); at most `limit`
    /// requests.
    pub fn open(path: impl Into<PathBuf>, opts: &ParseOptions, repeat: u32, limit: Option<u64>) -> Result<TraceFile, TraceError> {
        let path = path.into();
        let reader = trace::open(&path, opts)?;
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        let mut opts = opts.clone();
        opts.format = reader.stats().format;
        let rounds = repeat.max(1);
        Ok(TraceFile {
            path,
            opts,
            reader,
            rounds_left: rounds - 1,
            rounds,
            offset_ns: 0,
            last_ns: 0,
            size,
            done_before: 0,
            stats: TraceStats::default(),
            limit,
            given: 0,
        })
    }

    /// The error of a trace that ends without a request: a replay of nothing would report figures of nothing.
    fn holds_nothing(&self) -> TraceError {
        let st = self.reader.stats();
        let why = match (&self.opts.device, st.filtered) {
            (Some(d), n) if n > 0 => format!("; the {n} of other devices were left out (trace device {d:?})"),
            _ => String::new(),
        };
        TraceError {
            file: self.path.display().to_string(),
            line: 0,
            message: format!(
                "the trace holds no requests ({} lines: {} ignored, {} skipped as malformed{why})",
                st.lines, st.ignored, st.skipped
            ),
        }
    }

    /// What the rounds so far held, with the arrival times of the repeats.
    fn stats_so_far(&self) -> TraceStats {
        let mut all = self.stats.clone();
        all.absorb(self.reader.stats());
        all.duration_ns = self.offset_ns + self.reader.stats().duration_ns;
        all
    }
}

impl Requests for TraceFile {
    fn next_request(&mut self) -> Option<Result<Request, TraceError>> {
        if self.limit.is_some_and(|l| self.given >= l) {
            return None;
        }
        loop {
            match self.reader.next() {
                Some(Ok(mut r)) => {
                    r.time_ns = self.offset_ns.saturating_add(r.time_ns);
                    self.last_ns = r.time_ns;
                    self.given += 1;
                    return Some(Ok(r));
                }
                Some(Err(e)) => return Some(Err(e)),
                None if self.given == 0 => return Some(Err(self.holds_nothing())),
                None if self.rounds_left > 0 => {
                    self.stats = self.stats_so_far();
                    self.rounds_left -= 1;
                    self.offset_ns = self.last_ns;
                    self.done_before += self.size;
                    match trace::open(&self.path, &self.opts) {
                        Ok(r) => self.reader = r,
                        Err(e) => return Some(Err(e)),
                    }
                }
                None => return None,
            }
        }
    }

    fn progress(&self) -> (u64, u64) {
        let total = self.size.saturating_mul(u64::from(self.rounds));
        match self.limit {
            Some(l) => (self.given, l),
            None => (self.done_before + self.reader.consumed(), total),
        }
    }

    fn trace_stats(&self) -> Option<TraceStats> {
        Some(self.stats_so_far())
    }

    fn dry_run(&self) -> Option<Result<Box<dyn Requests>, TraceError>> {
        Some(TraceFile::open(&self.path, &self.opts, 1, self.limit).map(|t| Box::new(t) as Box<dyn Requests>))
    }
}

/// Requests given in memory (from Python, or tests).
#[derive(Clone)]
pub struct InMemory {
    reqs: std::vec::IntoIter<Request>,
    total: u64,
    stats: TraceStats,
}

impl InMemory {
    pub fn new(reqs: Vec<Request>) -> InMemory {
        InMemory { total: reqs.len() as u64, reqs: reqs.into_iter(), stats: TraceStats::default() }
    }
}

impl Requests for InMemory {
    fn next_request(&mut self) -> Option<Result<Request, TraceError>> {
        let r = self.reqs.next()?;
        self.stats.count(&r);
        Some(Ok(r))
    }

    fn progress(&self) -> (u64, u64) {
        (self.total - self.reqs.len() as u64, self.total)
    }

    fn trace_stats(&self) -> Option<TraceStats> {
        Some(self.stats.clone())
    }

    fn dry_run(&self) -> Option<Result<Box<dyn Requests>, TraceError>> {
        Some(Ok(Box::new(self.clone())))
    }
}

/// A synthetic fio-like job: what `nearflash bench` would issue, as requests.
pub struct Synthetic {
    stream: AddressStream,
    block_bytes: u64,
    lba_bytes: u64,
    ios: u64,
    issued: u64,
    /// Open loop: ns between arrivals (`None`: closed loop, every request at time 0).
    interval_ns: Option<f64>,
}

/// What a synthetic flow issues.
#[derive(Debug, Clone)]
pub struct SyntheticSpec {
    pub pattern: Pattern,
    /// Bytes per request (a multiple of the LBA size).
    pub block_size: u64,
    pub ios: u64,
    /// LBAs `[first, first + count)` it addresses.
    pub span: (u64, u64),
    pub seed: u64,
    /// Open loop at this many requests per second (`None`: closed loop at the flow's depth).
    pub rate_iops: Option<f64>,
}

impl Synthetic {
    /// The job `spec` of the flow `name` (its random stream is named after the flow, so that a flow issues the same
    /// requests alone and together with others).
    pub fn new(name: &str, spec: &SyntheticSpec, lba_bytes: u64) -> Result<Synthetic, String> {
        if spec.block_size == 0 || !spec.block_size.is_multiple_of(lba_bytes) {
            return Err(format!("block size {} is not a positive multiple of the {lba_bytes} B LBA", spec.block_size));
        }
        let nlb = spec.block_size / lba_bytes;
        if spec.span.1 < nlb {
            return Err(format!("span of {} LBAs holds no {nlb}-LBA request", spec.span.1));
        }
        if spec.ios == 0 {
            return Err("a synthetic flow needs at least one I/O".into());
        }
        if let Pattern::RandRw(f) = spec.pattern {
            if !(0.0..=1.0).contains(&f) {
                return Err(format!("read fraction {f} must be in [0, 1]"));
            }
        }
        let interval_ns = match spec.rate_iops {
            None => None,
            // The last arrival must fall inside the simulated clock (u64 ns, 584 years), never be clamped into it.
            Some(r) if r.is_finite() && r > 0.0 && 1e9 / r * spec.ios as f64 <= MAX_ARRIVAL_NS => Some(1e9 / r),
            Some(r) if r.is_finite() && r > 0.0 => {
                return Err(format!("rate {r:e} requests/s spreads {} requests past the simulated clock's 2^63 ns", spec.ios))
            }
            Some(r) => return Err(format!("rate {r} requests/s must be a positive number")),
        };
        let rng = rng_stream(spec.seed, &format!("flow:{name}"));
        Ok(Synthetic {
            stream: AddressStream::new(spec.pattern, nlb, spec.span.0, spec.span.1, rng),
            block_bytes: spec.block_size,
            lba_bytes,
            ios: spec.ios,
            issued: 0,
            interval_ns,
        })
    }
}

impl Requests for Synthetic {
    fn next_request(&mut self) -> Option<Result<Request, TraceError>> {
        if self.issued >= self.ios {
            return None;
        }
        let (slba, read) = self.stream.next_io();
        let time_ns = self.interval_ns.map_or(0, |i| (i * self.issued as f64) as u64);
        self.issued += 1;
        Some(Ok(Request {
            time_ns,
            op: if read { Op::Read } else { Op::Write },
            offset: slba * self.lba_bytes,
            len: self.block_bytes,
            line: self.issued,
            recorded_ns: None,
        }))
    }

    fn progress(&self) -> (u64, u64) {
        (self.issued, self.ios)
    }
}
