//! Every trace format (and format detection) on arbitrary bytes: never a panic or an overflow; requests come out
//! well formed (a flush has no bytes, anything else some, no range past 2^64, times never going back), the counts
//! match what was read, and mapping them onto a device (wrapped) gives commands inside it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nearflash_workloads::flows::{Geometry, MapCounts, Mapping};
use nearflash_workloads::trace::{detect, Format, Op, ParseOptions, TimeUnit, TraceReader};
use std::io::Cursor;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, text)) = data.split_first() else { return };
    let format = match mode % 6 {
        5 => match detect(text) {
            Ok(f) => f,
            Err(_) => return,
        },
        i => Format::ALL[usize::from(i)],
    };
    let opts = ParseOptions {
        format: Some(format),
        sector_size: [512, 4096, 1][usize::from(mode >> 3) % 3],
        time_unit: [TimeUnit::Nanosecond, TimeUnit::Picosecond, TimeUnit::Microsecond][usize::from(mode >> 5) % 3],
        blk_event: if mode & 0x80 != 0 { 'Q' } else { 'D' },
        device: None,
        skip_bad: mode & 0x04 != 0,
    };
    let Ok(mut reader) = TraceReader::new(Cursor::new(text), format, "fuzz", &opts) else { return };
    let g = Geometry { lba_bytes: 4096, lbas: 1 << 20, max_nlb: 256 };
    let wrap = Mapping { wrap: true, ..Mapping::default() };
    let (mut n, mut last, mut cmds, mut counts) = (0u64, 0u64, Vec::new(), MapCounts::default());
    for r in reader.by_ref() {
        let Ok(r) = r else { break };
        n += 1;
        assert!(r.time_ns >= last, "times go back");
        last = r.time_ns;
        assert_eq!(r.op == Op::Flush, r.len == 0, "{r:?}");
        assert!(r.offset.checked_add(r.len).is_some());
        cmds.clear();
        if wrap.map(&r, g, &mut cmds, &mut counts).is_ok() {
            for c in &cmds {
                assert!(c.op == Op::Flush || (c.nlb > 0 && c.slba + u64::from(c.nlb) <= g.lbas), "{c:?}");
            }
        }
    }
    let st = reader.stats();
    assert_eq!(st.requests, n);
    assert_eq!(st.reads + st.writes + st.flushes + st.trims, n);
});
