//! Where a request's bytes land on the device: an offset added to every request, a span of LBAs the flow owns,
//! and what happens to a request past the span's end (an error, or, asked for, a wrap around to its start: never a
//! silent clamp). Requests that do not start and end on LBA boundaries are widened to whole LBAs (counted), and
//! requests longer than a command can carry are split at the device's MDTS.

use crate::trace::{Op, Request};
use nearflash_core::nvme::MAX_NLB;
use serde::Serialize;

/// How a flow's requests are placed on the device.
#[derive(Debug, Clone, Default)]
pub struct Mapping {
    /// Bytes added to every request's offset.
    pub offset: u64,
    /// Fold requests past the span's end into it (modulo its length), splitting one that crosses the end.
    pub wrap: bool,
    /// LBAs `[first, first + count)` the flow addresses (`None`: the whole namespace).
    pub span: Option<(u64, u64)>,
}

/// One NVMe command of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cmd {
    pub op: Op,
    pub slba: u64,
    pub nlb: u32,
}

/// What mapping did to the requests, counted.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct MapCounts {
    /// Requests widened to whole LBAs.
    pub widened: u64,
    /// Requests moved by the wrap.
    pub wrapped: u64,
    /// Requests that took more than one command.
    pub split: u64,
}

/// The device facts mapping needs.
#[derive(Debug, Clone, Copy)]
pub struct Geometry {
    pub lba_bytes: u64,
    pub lbas: u64,
    /// Most LBAs one Read or Write carries (MDTS).
    pub max_nlb: u32,
}

impl Mapping {
    /// Checks the span against the device.
    pub fn check(&self, g: Geometry) -> Result<(u64, u64), String> {
        let (first, count) = self.span.unwrap_or((0, g.lbas));
        if count == 0 || first.checked_add(count).is_none_or(|end| end > g.lbas) {
            return Err(format!("span of LBAs {first}+{count} is not inside the device's {} LBAs", g.lbas));
        }
        Ok((first, count))
    }

    /// The commands of `r`, appended to `out` (ranges of a trim: one command per range).
    pub fn map(&self, r: &Request, g: Geometry, out: &mut Vec<Cmd>, counts: &mut MapCounts) -> Result<(), String> {
        if r.op == Op::Flush {
            out.push(Cmd { op: Op::Flush, slba: 0, nlb: 0 });
            return Ok(());
        }
        let (base, span) = self.check(g)?;
        let lba = g.lba_bytes;
        let start = r.offset.checked_add(self.offset).ok_or("the offset moves the request past 2^64 bytes")?;
        let end = start.checked_add(r.len).ok_or("the request ends past 2^64 bytes")?;
        let (mut first, last) = (start / lba, end.div_ceil(lba));
        if !start.is_multiple_of(lba) || !end.is_multiple_of(lba) {
            counts.widened += 1;
        }
        let n = last - first;
        if last > span {
            if !self.wrap {
                return Err(format!(
                    "a {} of {} bytes at byte {start} ends past the {} bytes the flow addresses (LBAs {base}+{span}); \
                     wrap folds requests into the span, an offset moves them",
                    r.op.name(),
                    r.len,
                    span * lba
                ));
            }
            if n > span {
                return Err(format!("a {} of {n} LBAs is longer than the span of {span} LBAs it wraps into", r.op.name()));
            }
            first %= span;
            counts.wrapped += 1;
        }
        // At most two pieces: up to the span's end, and the rest from its start.
        let head = n.min(span - first);
        let pieces = [(first, head), (0, n - head)];
        let before = out.len();
        let limit = if r.op == Op::Trim { u64::from(u32::MAX) } else { u64::from(g.max_nlb.min(MAX_NLB)) };
        for (mut s, mut left) in pieces {
            while left > 0 {
                let k = left.min(limit);
                out.push(Cmd { op: r.op, slba: base + s, nlb: k as u32 });
                s += k;
                left -= k;
            }
        }
        if out.len() - before > 1 {
            counts.split += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: Geometry = Geometry { lba_bytes: 4096, lbas: 1000, max_nlb: 32 };

    fn req(op: Op, offset: u64, len: u64) -> Request {
        Request { time_ns: 0, op, offset, len, line: 7, recorded_ns: None }
    }

    fn map(m: &Mapping, r: Request) -> Result<(Vec<(u64, u32)>, MapCounts), String> {
        let (mut out, mut c) = (Vec::new(), MapCounts::default());
        m.map(&r, G, &mut out, &mut c)?;
        Ok((out.into_iter().map(|c| (c.slba, c.nlb)).collect(), c))
    }

    #[test]
    fn aligned_requests_map_one_to_one_and_long_ones_split_at_mdts() {
        let m = Mapping::default();
        assert_eq!(map(&m, req(Op::Read, 8192, 4096)).unwrap().0, [(2, 1)]);
        let (cmds, c) = map(&m, req(Op::Write, 0, 70 * 4096)).unwrap();
        assert_eq!((cmds, c.split), (vec![(0, 32), (32, 32), (64, 6)], 1));
        // A trim is not bounded by MDTS.
        assert_eq!(map(&m, req(Op::Trim, 0, 70 * 4096)).unwrap().0, [(0, 70)]);
        assert_eq!(map(&m, req(Op::Flush, 0, 0)).unwrap().0, [(0, 0)]);
    }

    #[test]
    fn unaligned_requests_are_widened_and_counted() {
        let (cmds, c) = map(&Mapping::default(), req(Op::Read, 512, 1024)).unwrap();
        assert_eq!((cmds, c.widened), (vec![(0, 1)], 1));
        let (cmds, c) = map(&Mapping::default(), req(Op::Read, 4000, 200)).unwrap();
        assert_eq!((cmds, c.widened), (vec![(0, 2)], 1));
    }

    #[test]
    fn past_the_span_is_an_error_unless_wrapped() {
        let e = map(&Mapping::default(), req(Op::Read, 999 * 4096, 8192)).unwrap_err();
        assert!(e.contains("ends past the 4096000 bytes") && e.contains("wrap"), "{e}");
        let wrap = Mapping { wrap: true, ..Mapping::default() };
        let (cmds, c) = map(&wrap, req(Op::Read, 999 * 4096, 8192)).unwrap();
        assert_eq!((cmds, c.wrapped, c.split), (vec![(999, 1), (0, 1)], 1, 1));
        assert_eq!(map(&wrap, req(Op::Read, 2500 * 4096, 4096)).unwrap().0, [(500, 1)]);
        assert!(map(&wrap, req(Op::Read, 0, 1001 * 4096)).unwrap_err().contains("longer than the span"));
        let far = map(&Mapping { offset: u64::MAX - 10, ..Mapping::default() }, req(Op::Read, 100, 1));
        assert!(far.unwrap_err().contains("past 2^64"));
    }

    #[test]
    fn offsets_and_spans_place_the_flow() {
        let m = Mapping { offset: 4096, wrap: false, span: Some((100, 50)) };
        assert_eq!(map(&m, req(Op::Write, 0, 4096)).unwrap().0, [(101, 1)]);
        assert!(map(&m, req(Op::Write, 49 * 4096, 4096)).unwrap_err().contains("LBAs 100+50"));
        let m = Mapping { span: Some((990, 20)), ..Mapping::default() };
        assert!(m.check(G).unwrap_err().contains("not inside"));
        assert!(Mapping { span: Some((0, 0)), ..Mapping::default() }.check(G).is_err());
    }
}
