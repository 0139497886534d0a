//! nbdkit's log filter (nbdkit-log-filter(1)), what `nearflash serve --log FILE` records: a line per request when it
//! arrives (`2026-11-28 18:25:09.722958 connection=1 Read id=2 offset=0x1000 count=0x1000 ...`) and one when it is
//! answered (`... connection=1 ...Read id=2 return=0`), with the wall-clock time in microseconds. Requests are read
//! from the arrival lines: Read, Write, Trim, Flush, and Zero (a write of zeroes; a trim when the client allowed
//! that, `trim=1`); replies, connection and server lines are ignored. [`response_times`] pairs replies with their
//! requests for the converter.

use super::lines::Lines;
use super::{clip, Line, LineParser, Op, ParseOptions, Parsed};
use std::collections::HashMap;
use std::io::BufRead;

pub(crate) struct Parser;

impl Parser {
    pub fn new(_opts: &ParseOptions) -> Parser {
        Parser
    }
}

/// Days from 1970-01-01 to the civil date (proleptic Gregorian).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The line's time stamp (`YYYY-MM-DD HH:MM:SS.ffffff`) in ns since 1970 (the log's local time), and the rest.
pub(crate) fn split_stamp(line: &str) -> Option<(u128, &str)> {
    let b = line.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b' ' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = line.get(r)?;
        if s.bytes().all(|c| c.is_ascii_digit()) { s.parse().ok() } else { None }
    };
    let (y, mo, d, h, mi, s) = (num(0..4)?, num(5..7)?, num(8..10)?, num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let rest = &line[19..];
    let (frac, rest) = match rest.strip_prefix('.') {
        Some(r) => {
            let n = r.bytes().take_while(u8::is_ascii_digit).count();
            if n == 0 || n > 9 {
                return None;
            }
            (&r[..n], &r[n..])
        }
        None => ("", rest),
    };
    let rest = rest.strip_prefix(' ')?;
    let nanos: u128 = if frac.is_empty() { 0 } else { frac.parse::<u128>().ok()? * 10u128.pow(9 - frac.len() as u32) };
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s;
    Some((u128::try_from(secs).ok()? * 1_000_000_000 + nanos, rest))
}

/// A `key=value` field of the line.
fn field<'a>(words: &[&'a str], key: &str) -> Option<&'a str> {
    words.iter().find_map(|w| w.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
}

fn hex(words: &[&str], key: &str) -> Result<u64, String> {
    let v = field(words, key).ok_or_else(|| format!("no {key}= field"))?;
    let digits = v.strip_prefix("0x").ok_or_else(|| format!("{key}={} is not a hexadecimal 0x... number", clip(v)))?;
    u64::from_str_radix(digits, 16).map_err(|_| format!("{key}={} is not a hexadecimal 0x... number", clip(v)))
}

/// (connection, event, the remaining words) of a line after its time stamp.
fn split_event(rest: &str) -> (Option<&str>, &str, Vec<&str>) {
    let mut words: Vec<&str> = rest.split_ascii_whitespace().collect();
    let conn = match words.first().and_then(|w| w.strip_prefix("connection=")) {
        Some(c) => {
            words.remove(0);
            Some(c)
        }
        None => None,
    };
    let event = if words.is_empty() { "" } else { words.remove(0) };
    (conn, event, words)
}

impl LineParser for Parser {
    fn parse(&mut self, line: &str) -> Result<Line, String> {
        let (time, rest) = split_stamp(line).ok_or_else(|| format!("not an nbdkit log line (no time stamp): {:?}", clip(line)))?;
        let (conn, event, words) = split_event(rest);
        let op = match event {
            "Read" => Op::Read,
            "Write" => Op::Write,
            "Trim" => Op::Trim,
            "Flush" => Op::Flush,
            "Zero" => match field(&words, "trim") {
                Some("1") => Op::Trim,
                Some("0") => Op::Write,
                _ => return Err("a Zero request without trim=0 or trim=1".into()),
            },
            _ => return Ok(Line::Ignored), // replies ("...Read"), connections, the server's own lines
        };
        if words.last() != Some(&"...") {
            return Err(format!("a {event} request line ends with '...', this one is {:?}", clip(line)));
        }
        let (offset, len) = if op == Op::Flush { (0, 0) } else { (hex(&words, "offset")?, hex(&words, "count")?) };
        if op != Op::Flush && len == 0 {
            return Err(format!("a {event} of 0 bytes"));
        }
        offset.checked_add(len).ok_or("the request ends past 2^64 bytes")?;
        Ok(Line::Request(Parsed { time_ns: Some(time), op, offset, len, device: conn.map(str::to_string), recorded_ns: None }))
    }
}

/// Response time of every answered request of an nbdkit log, by the line of its arrival: reply time minus
/// arrival time (lines that do not parse are left out: the reader reports them). Lines are read and numbered as
/// the trace reader reads them (a byte order mark passed over, an overlong or non-UTF-8 line skipped), so that
/// a damaged line, skipped with `--skip-bad`, does not end the pairing of the replies after it.
pub fn response_times<R: BufRead>(src: R) -> HashMap<u64, u64> {
    let mut waiting: HashMap<(String, String), (u64, u128)> = HashMap::new();
    let mut out = HashMap::new();
    let mut lines = Lines::new(src);
    loop {
        let (no, line) = match lines.next_line() {
            Ok(Some(l)) => l,
            Ok(None) => break,
            Err(_) => continue, // reported by the reader; the lines after it still pair
        };
        let Some((time, rest)) = split_stamp(line.trim()) else { continue };
        let (conn, event, words) = split_event(rest);
        let Some(id) = field(&words, "id") else { continue };
        let key = (conn.unwrap_or("").to_string(), id.to_string());
        if event.starts_with("...") {
            if let Some((no, t0)) = waiting.remove(&key) {
                out.insert(no, u64::try_from(time.saturating_sub(t0)).unwrap_or(u64::MAX));
            }
        } else {
            waiting.insert(key, (no, time));
        }
    }
    out
}
