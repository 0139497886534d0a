//! Writes requests in any of the formats (the converter: `nearflash trace convert`). What a format cannot hold is
//! counted, never silently changed: MQSim and MSR traces have no flushes or trims (dropped); formats that count in
//! sectors widen a request that does not start or end on a sector boundary to whole sectors; times are rounded
//! down to the format's unit (MSR 100 ns, fio 1 us).

use super::{msr::TICK_NS, Format, Op, Request};
use serde::Serialize;
use std::io::{self, Write};

/// Choices the formats leave open.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    /// Bytes per sector of MQSim and blkparse traces.
    pub sector_size: u64,
    /// fio: the file name on every line; MSR: the host name.
    pub name: String,
    /// MSR: the Windows filetime (100 ns ticks since 1601) of the first request.
    pub start_ticks: u64,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions { sector_size: 512, name: "nearflash".into(), start_ticks: 0 }
    }
}

/// What the conversion did.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct WriteStats {
    pub written: u64,
    /// Flushes the format cannot hold.
    pub dropped_flushes: u64,
    /// Trims the format cannot hold.
    pub dropped_trims: u64,
    /// Requests widened to whole sectors.
    pub widened: u64,
}

/// blkparse's device field for the requests written (an NVMe namespace's major number).
const BLK_DEVICE: &str = "259,0";

/// Whether a request of a format holding only reads and writes (MQSim, MSR) is a read; `None` for a flush or a
/// trim, counted as left out.
fn data_op(op: Op, st: &mut WriteStats) -> Option<bool> {
    match op {
        Op::Read => Some(true),
        Op::Write => Some(false),
        Op::Flush => {
            st.dropped_flushes += 1;
            None
        }
        Op::Trim => {
            st.dropped_trims += 1;
            None
        }
    }
}

/// Writes `reqs` to `out` in `format`.
pub fn write(out: &mut dyn Write, format: Format, reqs: &[Request], opts: &WriteOptions) -> io::Result<WriteStats> {
    let sector = opts.sector_size.max(1);
    let mut st = WriteStats::default();
    let sectors = |r: &Request, st: &mut WriteStats| {
        let first = r.offset / sector;
        let end = (r.offset + r.len).div_ceil(sector);
        if !r.offset.is_multiple_of(sector) || !r.len.is_multiple_of(sector) {
            st.widened += 1;
        }
        (first, end - first)
    };
    match format {
        Format::Mqsim => {
            for r in reqs {
                let Some(read) = data_op(r.op, &mut st) else { continue };
                let kind = if read { 1 } else { 0 };
                let (first, n) = sectors(r, &mut st);
                writeln!(out, "{} 0 {first} {n} {kind}", r.time_ns)?;
                st.written += 1;
            }
        }
        Format::Msr => {
            for r in reqs {
                let Some(read) = data_op(r.op, &mut st) else { continue };
                let kind = if read { "Read" } else { "Write" };
                let t = opts.start_ticks + r.time_ns / TICK_NS;
                let rt = r.recorded_ns.unwrap_or(0) / TICK_NS;
                writeln!(out, "{t},{},0,{kind},{},{},{rt}", opts.name, r.offset, r.len)?;
                st.written += 1;
            }
        }
        Format::Fio => {
            let file = &opts.name;
            writeln!(out, "fio version 3 iolog")?;
            writeln!(out, "0 {file} add")?;
            writeln!(out, "0 {file} open")?;
            let mut last = 0;
            for r in reqs {
                let us = r.time_ns / 1000;
                last = us;
                match r.op {
                    Op::Flush => writeln!(out, "{us} {file} sync 0 0")?,
                    op => writeln!(out, "{us} {file} {} {} {}", op.name(), r.offset, r.len)?,
                }
                st.written += 1;
            }
            writeln!(out, "{last} {file} close")?;
        }
        Format::Blkparse => {
            for (seq, r) in reqs.iter().enumerate() {
                let (s, ns) = (r.time_ns / 1_000_000_000, r.time_ns % 1_000_000_000);
                let head = format!("{BLK_DEVICE:>7} {:>2} {:>8} {s:>5}.{ns:09} {:>5}  D", 0, seq + 1, 0);
                match r.op {
                    Op::Flush => writeln!(out, "{head}  FN [{}]", opts.name)?,
                    op => {
                        let rwbs = match op {
                            Op::Read => "R",
                            Op::Write => "W",
                            _ => "D",
                        };
                        let (first, n) = sectors(r, &mut st);
                        writeln!(out, "{head} {rwbs:>3} {first} + {n} [{}]", opts.name)?;
                    }
                }
                st.written += 1;
            }
        }
        Format::NbdkitLog => {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "nbdkit-log is read, not written: convert to mqsim, msr, fio or blkparse"));
        }
    }
    Ok(st)
}
