//! Block traces: the request sequences of recorded workloads, read from the text formats storage research uses —
//! MQSim's ASCII traces, SNIA IOTTA's MSR Cambridge CSVs, fio's iolog (v2 and v3), blkparse's default output — and
//! nbdkit's log filter (what `nearflash serve --log` records from unmodified programs).
//!
//! Every format is read line by line into [`Request`]s (arrival time in ns from the first request, operation,
//! byte offset and length) by a [`TraceReader`], which streams: a trace of any length is replayed in constant
//! memory. Blank lines and lines starting with `#` (provenance notes) are skipped in every format. A malformed line
//! stops the reader with its file and line number, or is skipped and counted when the caller asks for that; a line
//! over [`MAX_LINE`] bytes or one that is not UTF-8 is malformed. Arrival times that go backwards are issued in file
//! order at the previous request's time and counted (`out_of_order`). [`write`] writes requests back in any format
//! (the converter).

pub mod blkparse;
pub mod fio;
mod lines;
pub mod mqsim;
pub mod msr;
pub mod nbdkit_log;
pub mod write;

use lines::Lines;
use serde::Serialize;
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek};
use std::path::Path;

/// Longest line accepted, in bytes (a longer one is malformed, never buffered whole).
pub const MAX_LINE: usize = 64 << 10;

/// What a request asks the device to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Read,
    Write,
    Flush,
    Trim,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Flush => "flush",
            Op::Trim => "trim",
        }
    }
}

/// One request of a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Arrival time in ns after the trace's first request (0 throughout for a trace without times).
    pub time_ns: u64,
    pub op: Op,
    /// First byte (0 for a flush).
    pub offset: u64,
    /// Bytes (0 for a flush).
    pub len: u64,
    /// Line of the trace file it came from (1-based).
    pub line: u64,
    /// The response time the trace recorded for it, where the format holds one (MSR's `ResponseTime`).
    pub recorded_ns: Option<u64>,
}

/// The trace formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// MQSim's ASCII trace: `arrival-time device start-sector sectors type` (type 0 write, 1 read).
    Mqsim,
    /// MSR Cambridge (SNIA IOTTA): `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`.
    Msr,
    /// fio's iolog, version 2 or 3 (the header line tells which).
    Fio,
    /// blkparse's default text output.
    Blkparse,
    /// nbdkit's log filter.
    NbdkitLog,
}

impl Format {
    pub const ALL: [Format; 5] = [Format::Mqsim, Format::Msr, Format::Fio, Format::Blkparse, Format::NbdkitLog];

    pub fn name(self) -> &'static str {
        match self {
            Format::Mqsim => "mqsim",
            Format::Msr => "msr",
            Format::Fio => "fio",
            Format::Blkparse => "blkparse",
            Format::NbdkitLog => "nbdkit-log",
        }
    }

    fn parser(self, opts: &ParseOptions) -> Result<Box<dyn LineParser>, String> {
        Ok(match self {
            Format::Mqsim => Box::new(mqsim::Parser::new(opts)?),
            Format::Msr => Box::new(msr::Parser::new(opts)),
            Format::Fio => Box::new(fio::Parser::new(opts)),
            Format::Blkparse => Box::new(blkparse::Parser::new(opts)?),
            Format::NbdkitLog => Box::new(nbdkit_log::Parser::new(opts)),
        })
    }
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        Format::ALL.into_iter().find(|f| f.name() == s).ok_or_else(|| {
            let names: Vec<_> = Format::ALL.iter().map(|f| f.name()).collect();
            format!("unknown trace format {s:?}: expected one of {}", names.join(", "))
        })
    }
}

/// Unit of MQSim's arrival times (its `Time_Unit`; MQSim's engine itself reads them as nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    Picosecond,
    Nanosecond,
    Microsecond,
}

impl std::str::FromStr for TimeUnit {
    type Err = String;
    fn from_str(s: &str) -> Result<TimeUnit, String> {
        match s {
            "ps" | "PICOSECOND" => Ok(TimeUnit::Picosecond),
            "ns" | "NANOSECOND" => Ok(TimeUnit::Nanosecond),
            "us" | "MICROSECOND" => Ok(TimeUnit::Microsecond),
            _ => Err(format!("unknown time unit {s:?}: expected ps, ns or us")),
        }
    }
}

/// How a trace is read.
#[derive(Debug, Clone)]
pub struct ParseOptions {
    /// The format; `None`: told from the file's first lines ([`detect`]).
    pub format: Option<Format>,
    /// Bytes per sector of the formats that count in sectors (MQSim, blkparse).
    pub sector_size: u64,
    /// Unit of MQSim's arrival times.
    pub time_unit: TimeUnit,
    /// blkparse: the event replayed, `D` (issued to the device) or `Q` (queued).
    pub blk_event: char,
    /// Only the requests of this device: MQSim's device column, MSR's `DiskNumber`, blkparse's `major,minor`,
    /// fio's file name.
    pub device: Option<String>,
    /// Skip malformed lines (counted, the first one kept) instead of stopping at the first.
    pub skip_bad: bool,
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions {
            format: None,
            sector_size: 512,
            time_unit: TimeUnit::Nanosecond,
            blk_event: 'D',
            device: None,
            skip_bad: false,
        }
    }
}

/// A trace that cannot be read: the file, the line (0: the file as a whole) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceError {
    pub file: String,
    pub line: u64,
    pub message: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        }
    }
}

impl std::error::Error for TraceError {}

/// What a trace held, counted as it was read.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct TraceStats {
    pub format: Option<Format>,
    pub lines: u64,
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    pub flushes: u64,
    pub trims: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub trim_bytes: u64,
    /// Arrival time of the last request, ns after the first.
    pub duration_ns: u64,
    /// Valid lines that are not requests (file actions, other blkparse events, nbdkit's connection lines, ...).
    pub ignored: u64,
    /// Requests of other devices than `ParseOptions::device`.
    pub filtered: u64,
    /// Malformed lines skipped (`ParseOptions::skip_bad`).
    pub skipped: u64,
    /// The first malformed line skipped, with its number.
    pub first_skipped: Option<String>,
    /// Requests whose arrival time was before their predecessor's (issued in file order, at its time).
    pub out_of_order: u64,
}

impl TraceStats {
    /// Adds what `other` (a later part of the same trace) held; the duration is left to the caller.
    pub fn absorb(&mut self, other: &TraceStats) {
        self.format = self.format.or(other.format);
        self.lines += other.lines;
        self.requests += other.requests;
        self.reads += other.reads;
        self.writes += other.writes;
        self.flushes += other.flushes;
        self.trims += other.trims;
        self.read_bytes += other.read_bytes;
        self.write_bytes += other.write_bytes;
        self.trim_bytes += other.trim_bytes;
        self.ignored += other.ignored;
        self.filtered += other.filtered;
        self.skipped += other.skipped;
        self.out_of_order += other.out_of_order;
        if self.first_skipped.is_none() {
            self.first_skipped = other.first_skipped.clone();
        }
    }

    /// Counts a request read.
    pub fn count(&mut self, r: &Request) {
        self.requests += 1;
        self.duration_ns = self.duration_ns.max(r.time_ns);
        match r.op {
            Op::Read => {
                self.reads += 1;
                self.read_bytes += r.len;
            }
            Op::Write => {
                self.writes += 1;
                self.write_bytes += r.len;
            }
            Op::Flush => self.flushes += 1,
            Op::Trim => {
                self.trims += 1;
                self.trim_bytes += r.len;
            }
        }
    }
}

/// A request as a format's line gives it: its time in ns on the trace's own clock (`None`: untimed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Parsed {
    pub time_ns: Option<u128>,
    pub op: Op,
    pub offset: u64,
    pub len: u64,
    pub device: Option<String>,
    pub recorded_ns: Option<u64>,
}

/// What one line of a trace is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Line {
    Request(Parsed),
    /// Valid, but not a request.
    Ignored,
    /// Valid, and nothing after it is a request (blkparse's summary).
    End,
}

/// One format's reading of a line (after blank and `#` lines are dropped).
pub(crate) trait LineParser: Send {
    fn parse(&mut self, line: &str) -> Result<Line, String>;
    /// Checked after the last line (a fio file without its header line, ...).
    fn finish(&mut self) -> Result<(), String> {
        Ok(())
    }
}

/// Whether a request's device (`got`, as its line spells it) is the one asked for (`want`). `numbered`: the format
/// numbers its devices (all but fio's file names, where `1` and `01` are two files), so numbers compare as numbers,
/// part by part: `0` is MQSim's or MSR's `00`, `8,0` is blkparse's `8, 0`.
fn same_device(want: &str, got: &str, numbered: bool) -> bool {
    fn numbers(id: &str) -> Option<Vec<u64>> {
        id.split(',').map(|part| part.trim().parse::<u64>().ok()).collect()
    }
    want == got || numbered && matches!((numbers(want), numbers(got)), (Some(a), Some(b)) if a == b)
}

/// Reads a trace's requests one at a time.
pub struct TraceReader<R: BufRead> {
    lines: Lines<R>,
    parser: Box<dyn LineParser>,
    file: String,
    opts: ParseOptions,
    first: Option<u128>,
    /// Arrival time of the last request (ns after the first) and its time on the trace's clock.
    last: u64,
    last_raw: u128,
    stats: TraceStats,
    ended: bool,
}

impl<R: BufRead> TraceReader<R> {
    /// A reader of `src` in `format`; `file` names the source in errors.
    pub fn new(src: R, format: Format, file: &str, opts: &ParseOptions) -> Result<TraceReader<R>, TraceError> {
        let parser = format.parser(opts).map_err(|message| TraceError { file: file.into(), line: 0, message })?;
        let stats = TraceStats { format: Some(format), ..TraceStats::default() };
        Ok(TraceReader {
            lines: Lines::new(src),
            parser,
            file: file.to_string(),
            opts: opts.clone(),
            first: None,
            last: 0,
            last_raw: 0,
            stats,
            ended: false,
        })
    }

    /// What has been read so far.
    pub fn stats(&self) -> &TraceStats {
        &self.stats
    }

    /// The first request's time on the trace's own clock, in ns (an nbdkit log's: since 1970), once read.
    pub fn first_time_ns(&self) -> Option<u128> {
        self.first
    }

    /// Bytes of the source consumed so far (for progress).
    pub fn consumed(&self) -> u64 {
        self.lines.consumed()
    }

    fn error(&self, line: u64, message: String) -> TraceError {
        TraceError { file: self.file.clone(), line, message }
    }

    /// A malformed line: an error, or counted and skipped.
    fn bad(&mut self, line: u64, message: String) -> Option<TraceError> {
        if !self.opts.skip_bad {
            self.ended = true;
            return Some(self.error(line, message));
        }
        self.stats.skipped += 1;
        if self.stats.first_skipped.is_none() {
            self.stats.first_skipped = Some(format!("line {line}: {message}"));
        }
        None
    }

    fn next_request(&mut self) -> Option<Result<Request, TraceError>> {
        while !self.ended {
            let (no, text) = match self.lines.next_line() {
                Ok(Some((no, text))) => (no, text),
                Ok(None) => {
                    self.ended = true;
                    return self.parser.finish().err().map(|m| Err(self.error(0, m)));
                }
                Err((no, message)) => {
                    self.stats.lines += 1;
                    match self.bad(no, message) {
                        Some(e) => return Some(Err(e)),
                        None => continue,
                    }
                }
            };
            self.stats.lines += 1;
            let trimmed = text.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let parsed = match self.parser.parse(trimmed) {
                Ok(Line::Request(p)) => p,
                Ok(Line::Ignored) => {
                    self.stats.ignored += 1;
                    continue;
                }
                Ok(Line::End) => {
                    self.ended = true;
                    break;
                }
                Err(message) => match self.bad(no, message) {
                    Some(e) => return Some(Err(e)),
                    None => continue,
                },
            };
            if let (Some(want), Some(dev)) = (&self.opts.device, &parsed.device) {
                if !same_device(want, dev, self.stats.format != Some(Format::Fio)) {
                    self.stats.filtered += 1;
                    continue;
                }
            }
            let time_ns = match parsed.time_ns {
                None => self.last,
                Some(t) => {
                    let first = *self.first.get_or_insert(t);
                    let rel = t.saturating_sub(first);
                    match u64::try_from(rel) {
                        Ok(rel) if t >= self.last_raw => {
                            self.last_raw = t;
                            rel
                        }
                        Ok(_) => {
                            self.stats.out_of_order += 1;
                            self.last
                        }
                        Err(_) => {
                            match self.bad(no, "arrival time more than 584 years after the first request".into()) {
                                Some(e) => return Some(Err(e)),
                                None => continue,
                            }
                        }
                    }
                }
            };
            self.last = time_ns;
            let r = Request {
                time_ns,
                op: parsed.op,
                offset: parsed.offset,
                len: parsed.len,
                line: no,
                recorded_ns: parsed.recorded_ns,
            };
            self.stats.count(&r);
            return Some(Ok(r));
        }
        None
    }
}

impl<R: BufRead> Iterator for TraceReader<R> {
    type Item = Result<Request, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_request()
    }
}

/// The format of a trace whose first bytes are `head`, where they tell it unambiguously.
pub fn detect(head: &[u8]) -> Result<Format, String> {
    let head = head.strip_prefix(lines::BOM).unwrap_or(head);
    let text = String::from_utf8_lossy(&head[..head.len().min(MAX_LINE)]);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .take(16)
        .collect();
    // The last line may be cut short by the head's end.
    let whole = if head.len() >= MAX_LINE && lines.len() > 1 { &lines[..lines.len() - 1] } else { &lines[..] };
    let Some(first) = whole.first() else {
        return Err("the trace has no requests (nothing but blank or # lines at its start)".into());
    };
    if first.starts_with("fio version ") {
        return Ok(Format::Fio);
    }
    let votes: Vec<Format> = [Format::NbdkitLog, Format::Msr, Format::Blkparse, Format::Mqsim]
        .into_iter()
        .filter(|f| whole.iter().all(|l| looks_like(*f, l)))
        .collect();
    match votes.as_slice() {
        [one] => Ok(*one),
        [] => Err(format!("cannot tell the trace's format from its first lines (the first is {:?}); name it", clip(first))),
        many => Err(format!(
            "the trace's first lines fit several formats ({}); name it",
            many.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// A line's first 60 characters (for messages).
pub(crate) fn clip(s: &str) -> String {
    let mut end = s.len().min(60);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    if end < s.len() {
        format!("{}...", &s[..end])
    } else {
        s.to_string()
    }
}

/// Whether `line` has the shape of `format` (for detection; the parsers say what exactly is wrong).
fn looks_like(format: Format, line: &str) -> bool {
    match format {
        Format::NbdkitLog => nbdkit_log::split_stamp(line).is_some(),
        Format::Msr => {
            let f: Vec<&str> = line.split(',').collect();
            f.len() == 7 && (["read", "write", "type"].iter().any(|t| f[3].trim().eq_ignore_ascii_case(t)))
        }
        Format::Blkparse => {
            let t: Vec<&str> = line.split_ascii_whitespace().collect();
            (t.len() >= 6 && blkparse::is_device(t[0])) || line.starts_with("CPU") || line.starts_with("Total")
        }
        Format::Mqsim => {
            let t: Vec<&str> = line.split_ascii_whitespace().collect();
            t.len() == 5 && t.iter().all(|x| x.bytes().all(|b| b.is_ascii_digit()))
        }
        Format::Fio => line.starts_with("fio version "),
    }
}

/// Opens a trace file, detecting its format unless `opts.format` names it.
pub fn open(path: &Path, opts: &ParseOptions) -> Result<TraceReader<BufReader<File>>, TraceError> {
    let name = path.display().to_string();
    let err = |e: std::io::Error| TraceError { file: name.clone(), line: 0, message: format!("cannot read it: {e}") };
    let mut file = File::open(path).map_err(err)?;
    if file.metadata().map_err(err)?.is_dir() {
        return Err(TraceError { file: name, line: 0, message: "is a directory, not a trace file".into() });
    }
    let format = match opts.format {
        Some(f) => f,
        None => {
            let mut head = Vec::with_capacity(MAX_LINE);
            (&mut file).take(MAX_LINE as u64).read_to_end(&mut head).map_err(err)?;
            file.rewind().map_err(err)?;
            detect(&head).map_err(|message| TraceError { file: name.clone(), line: 0, message })?
        }
    };
    TraceReader::new(BufReader::with_capacity(1 << 16, file), format, &name, opts)
}

/// Reads a whole trace into memory (the converter; small traces).
pub fn read_all<R: BufRead>(reader: TraceReader<R>) -> Result<(Vec<Request>, TraceStats), TraceError> {
    let mut reader = reader;
    let mut out = Vec::new();
    for r in reader.by_ref() {
        out.push(r?);
    }
    Ok((out, reader.stats().clone()))
}

/// The end of the furthest request (bytes) of a whole trace, and what it held: how much of a device a replay
/// touches, to precondition it (MQSim likewise reads its traces once before a run).
pub fn extent<R: BufRead>(reader: TraceReader<R>) -> Result<(u64, TraceStats), TraceError> {
    let mut reader = reader;
    let mut end = 0;
    for r in reader.by_ref() {
        let r = r?;
        end = end.max(r.offset + r.len);
    }
    Ok((end, reader.stats().clone()))
}

/// Parses one decimal field, naming it in the error.
pub(crate) fn number(what: &str, text: &str) -> Result<u64, String> {
    text.parse::<u64>().map_err(|_| format!("{what} {:?} is not a non-negative integer", clip(text)))
}

/// `count` units of `unit` bytes, or an error naming `what` when that overflows.
pub(crate) fn bytes(what: &str, count: u64, unit: u64) -> Result<u64, String> {
    count.checked_mul(unit).ok_or_else(|| format!("{what} {count} x {unit} bytes overflows 64 bits"))
}

#[cfg(test)]
mod tests;
