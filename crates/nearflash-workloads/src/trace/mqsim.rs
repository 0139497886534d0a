//! MQSim's ASCII trace (`src/host/ASCII_Trace_Definition.h`): one request per line, five fields separated by
//! spaces: arrival time (in the flow's `Time_Unit`; MQSim's engine reads it as nanoseconds), device number, start
//! address in sectors, size in sectors, type (0 write, 1 read).

use super::{bytes, clip, number, Line, LineParser, Op, ParseOptions, Parsed, TimeUnit};

pub(crate) struct Parser {
    sector: u64,
    unit: TimeUnit,
}

impl Parser {
    pub fn new(opts: &ParseOptions) -> Result<Parser, String> {
        if opts.sector_size == 0 {
            return Err("sector size must be positive".into());
        }
        Ok(Parser { sector: opts.sector_size, unit: opts.time_unit })
    }
}

impl LineParser for Parser {
    fn parse(&mut self, line: &str) -> Result<Line, String> {
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        if f.len() != 5 {
            return Err(format!(
                "expected 5 fields (arrival time, device, start sector, sectors, type 0 = write / 1 = read), found {} in {:?}",
                f.len(),
                clip(line)
            ));
        }
        let t = u128::from(number("arrival time", f[0])?);
        let time_ns = match self.unit {
            TimeUnit::Picosecond => t / 1000,
            TimeUnit::Nanosecond => t,
            TimeUnit::Microsecond => t * 1000,
        };
        number("device", f[1])?;
        let start = number("start sector", f[2])?;
        let sectors = number("size in sectors", f[3])?;
        if sectors == 0 {
            return Err("a request of 0 sectors".into());
        }
        let op = match f[4] {
            "0" => Op::Write,
            "1" => Op::Read,
            other => return Err(format!("type {:?} is neither 0 (write) nor 1 (read)", clip(other))),
        };
        let offset = bytes("start sector", start, self.sector)?;
        let len = bytes("size", sectors, self.sector)?;
        offset.checked_add(len).ok_or("the request ends past 2^64 bytes")?;
        Ok(Line::Request(Parsed { time_ns: Some(time_ns), op, offset, len, device: Some(f[1].to_string()), recorded_ns: None }))
    }
}
