//! fio's iolog (fio's HOWTO, "Trace file format"). Version 2: a header line `fio version 2 iolog`, then
//! `filename action` (add, open, close) and `filename action offset length` lines (read, write, trim, sync,
//! datasync, sync_file_range; `wait` with the microseconds to wait in the offset field, below 100 discarded as fio
//! does). Version 3 (fio 3.31+, `fio version 3 iolog`): every line led by its time in microseconds from the start
//! (fio's `utime_since_now`), no `wait`. Syncs become flushes. Requests to several files share the one device's
//! addresses (`ParseOptions::device` keeps one file's).

use super::{bytes, clip, number, Line, LineParser, Op, ParseOptions, Parsed};

pub(crate) struct Parser {
    /// 2 or 3 once the header is read.
    version: Option<u8>,
    /// Version 2: the clock of the `wait` actions so far, ns.
    waited: u128,
}

impl Parser {
    pub fn new(_opts: &ParseOptions) -> Parser {
        Parser { version: None, waited: 0 }
    }
}

impl LineParser for Parser {
    fn parse(&mut self, line: &str) -> Result<Line, String> {
        let Some(version) = self.version else {
            self.version = match line.split_ascii_whitespace().collect::<Vec<_>>().as_slice() {
                ["fio", "version", "2", "iolog"] => Some(2),
                ["fio", "version", "3", "iolog"] => Some(3),
                ["fio", "version", v, "iolog"] => return Err(format!("fio iolog version {} is not supported (2 and 3 are)", clip(v))),
                _ => return Err(format!("not a fio iolog: the first line must be 'fio version 2 iolog' or 'fio version 3 iolog', not {:?}", clip(line))),
            };
            return Ok(Line::Ignored);
        };
        let mut f: Vec<&str> = line.split_ascii_whitespace().collect();
        let time_ns = if version == 3 {
            if f.is_empty() {
                return Err("empty line".into());
            }
            let us = number("timestamp (microseconds)", f.remove(0))?;
            Some(u128::from(us) * 1000)
        } else {
            None
        };
        let shape = if version == 3 { "timestamp filename action [offset length]" } else { "filename action [offset length]" };
        let (file, action, range) = match f.as_slice() {
            [file, action] => (*file, *action, None),
            [file, action, offset, len] => (*file, *action, Some((*offset, *len))),
            _ => return Err(format!("expected {shape}, found {:?}", clip(line))),
        };
        let device = Some(file.to_string());
        let (offset, len) = match range {
            Some((o, l)) => (number("offset", o)?, number("length", l)?),
            None => (0, 0),
        };
        let op = match action {
            "add" | "open" | "close" if range.is_none() => return Ok(Line::Ignored),
            "wait" if version == 2 && range.is_none() => {
                // fio's parser takes a wait's delay from the offset field: without it, the line is malformed there.
                return Err("wait needs its microseconds and a length field (filename wait USECS 0)".into());
            }
            "wait" if version == 3 => {
                return Err("wait is a version 2 action (version 3 lines carry their own times)".into());
            }
            "wait" => {
                // fio discards waits below 100 us; the time is relative to the previous wait.
                if offset >= 100 {
                    self.waited += u128::from(bytes("wait", offset, 1000)?);
                }
                return Ok(Line::Ignored);
            }
            "read" => Op::Read,
            "write" => Op::Write,
            "trim" => Op::Trim,
            "sync" | "datasync" | "sync_file_range" => {
                return Ok(Line::Request(Parsed {
                    time_ns: time_ns.or(Some(self.waited)),
                    op: Op::Flush,
                    offset: 0,
                    len: 0,
                    device,
                    recorded_ns: None,
                }))
            }
            other => {
                let wait = if version == 2 { "wait, " } else { "" };
                return Err(format!("unknown action {:?} (read, write, trim, sync, datasync, {wait}add, open, close)", clip(other)));
            }
        };
        if range.is_none() {
            return Err(format!("{action} needs an offset and a length"));
        }
        if len == 0 {
            return Err(format!("a {action} of 0 bytes"));
        }
        offset.checked_add(len).ok_or("the request ends past 2^64 bytes")?;
        Ok(Line::Request(Parsed { time_ns: time_ns.or(Some(self.waited)), op, offset, len, device, recorded_ns: None }))
    }

    fn finish(&mut self) -> Result<(), String> {
        match self.version {
            Some(_) => Ok(()),
            None => Err("not a fio iolog: no 'fio version 2 iolog' or 'fio version 3 iolog' line".into()),
        }
    }
}
