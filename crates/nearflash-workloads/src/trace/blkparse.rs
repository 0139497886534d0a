//! blkparse's default text output (blkparse(1), format `%D %2c %8s %5T.%9t %5p %2a %3d`): device `major,minor`,
//! CPU, sequence number, time `seconds.nanoseconds`, pid, action, RWBS, then `sector + sectors [process]` for
//! block events (512-byte sectors unless told otherwise). One action is replayed, `D` (issued to the driver) by
//! default, or `Q` (queued); the others (completions, merges, plugs, ...) are counted as ignored. RWBS: `D` is a
//! discard (trim), `R` a read, `W` a write; an event without sectors whose RWBS starts with `F` is a flush. The
//! summary blkparse prints after the events (`CPU0 (8,0):`, `Total (8,0):`) ends the trace.

use super::{bytes, clip, number, Line, LineParser, Op, ParseOptions, Parsed};

pub(crate) struct Parser {
    sector: u64,
    event: char,
}

impl Parser {
    pub fn new(opts: &ParseOptions) -> Result<Parser, String> {
        if opts.sector_size == 0 {
            return Err("sector size must be positive".into());
        }
        if !matches!(opts.blk_event, 'D' | 'Q') {
            return Err(format!("the blkparse event replayed must be D or Q, not {:?}", opts.blk_event));
        }
        Ok(Parser { sector: opts.sector_size, event: opts.blk_event })
    }
}

/// Whether `s` is a device field, `major,minor`.
pub(crate) fn is_device(s: &str) -> bool {
    let mut it = s.split(',');
    let ok = |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    ok(it.next()) && ok(it.next()) && it.next().is_none()
}

/// `seconds.nanoseconds` in ns.
fn time(s: &str) -> Result<u128, String> {
    let (secs, frac) = s.split_once('.').unwrap_or((s, ""));
    if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("time {:?} is not seconds.nanoseconds", clip(s)));
    }
    let secs = number("time (seconds)", secs)?;
    let nanos: u128 = if frac.is_empty() { 0 } else { frac.parse::<u128>().map_err(|e| e.to_string())? * 10u128.pow(9 - frac.len() as u32) };
    Ok(u128::from(secs) * 1_000_000_000 + nanos)
}

impl LineParser for Parser {
    fn parse(&mut self, line: &str) -> Result<Line, String> {
        let t: Vec<&str> = line.split_ascii_whitespace().collect();
        if !t.first().is_some_and(|d| is_device(d)) {
            if line.starts_with("CPU") || line.starts_with("Total") {
                return Ok(Line::End);
            }
            return Err(format!("not a blkparse event (device major,minor first): {:?}", clip(line)));
        }
        if t.len() < 6 {
            return Err(format!("a blkparse event has at least 6 fields, found {} in {:?}", t.len(), clip(line)));
        }
        let time_ns = time(t[3])?;
        let action = t[5];
        if action.len() != 1 || !action.bytes().all(|b| b.is_ascii_alphabetic()) {
            return Err(format!("action {:?} is not one letter", clip(action)));
        }
        if !action.starts_with(self.event) {
            return Ok(Line::Ignored);
        }
        let Some(&rwbs) = t.get(6) else { return Err("the event has no RWBS field".into()) };
        if !rwbs.bytes().all(|b| b"FRWDNSMAEBT".contains(&b)) {
            return Err(format!("RWBS {:?} has letters other than F R W D N S M A E B T", clip(rwbs)));
        }
        // `sector + sectors [process]`, or just `[process]` for events without data.
        let (offset, len) = match t.get(7) {
            Some(s) if s.bytes().all(|b| b.is_ascii_digit()) => {
                if t.get(8) != Some(&"+") {
                    return Err(format!("expected 'sector + sectors' after the RWBS, found {:?}", clip(line)));
                }
                let n = t.get(9).ok_or("'+' without the sector count")?;
                let start = number("sector", s)?;
                let n = number("sectors", n)?;
                (bytes("sector", start, self.sector)?, bytes("sectors", n, self.sector)?)
            }
            // `[process]`, or a passthrough command's bytes `(cdb)`: no data.
            None => (0, 0),
            Some(s) if s.starts_with('[') || s.starts_with('(') => (0, 0),
            Some(s) => return Err(format!("sector {:?} is not a non-negative integer", clip(s))),
        };
        offset.checked_add(len).ok_or("the request ends past 2^64 bytes")?;
        let op = if rwbs.contains('D') {
            Op::Trim
        } else if len == 0 {
            if !rwbs.starts_with('F') {
                return Ok(Line::Ignored);
            }
            Op::Flush
        } else if rwbs.contains('R') {
            Op::Read
        } else if rwbs.contains('W') {
            Op::Write
        } else {
            return Ok(Line::Ignored);
        };
        if op == Op::Trim && len == 0 {
            return Err("a discard of 0 sectors".into());
        }
        Ok(Line::Request(Parsed { time_ns: Some(time_ns), op, offset, len, device: Some(t[0].to_string()), recorded_ns: None }))
    }
}
