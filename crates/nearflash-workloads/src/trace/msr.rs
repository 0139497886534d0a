//! MSR Cambridge block traces (SNIA IOTTA; Narayanan et al., FAST'08): CSV lines
//! `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`, times in Windows filetime units (100 ns),
//! `Type` `Read` or `Write`, offset and size in bytes. A header line naming the columns is accepted.

use super::{clip, number, Line, LineParser, Op, ParseOptions, Parsed};

/// ns per Windows filetime tick.
pub const TICK_NS: u64 = 100;
/// Windows filetime ticks from 1601-01-01 to the Unix epoch.
pub const UNIX_EPOCH_TICKS: u64 = 116_444_736_000_000_000;

pub(crate) struct Parser;

impl Parser {
    pub fn new(_opts: &ParseOptions) -> Parser {
        Parser
    }
}

impl LineParser for Parser {
    fn parse(&mut self, line: &str) -> Result<Line, String> {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.len() != 7 {
            return Err(format!(
                "expected 7 comma-separated fields (Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime), found {} in {:?}",
                f.len(),
                clip(line)
            ));
        }
        if f[0].eq_ignore_ascii_case("timestamp") && f[3].eq_ignore_ascii_case("type") {
            return Ok(Line::Ignored);
        }
        let ticks = number("Timestamp", f[0])?;
        let disk = number("DiskNumber", f[2])?;
        let op = if f[3].eq_ignore_ascii_case("read") {
            Op::Read
        } else if f[3].eq_ignore_ascii_case("write") {
            Op::Write
        } else {
            return Err(format!("Type {:?} is neither Read nor Write", clip(f[3])));
        };
        let offset = number("Offset", f[4])?;
        let len = number("Size", f[5])?;
        if len == 0 {
            return Err("a request of 0 bytes".into());
        }
        offset.checked_add(len).ok_or("the request ends past 2^64 bytes")?;
        let response = number("ResponseTime", f[6])?;
        Ok(Line::Request(Parsed {
            time_ns: Some(u128::from(ticks) * u128::from(TICK_NS)),
            op,
            offset,
            len,
            device: Some(disk.to_string()),
            recorded_ns: Some(response.saturating_mul(TICK_NS)),
        }))
    }
}
