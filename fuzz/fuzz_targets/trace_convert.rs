//! The converter on whatever a format reads from arbitrary bytes: what it writes in each other format reads back
//! as the same requests (less what the format cannot hold, times rounded to its unit), and is detected as that
//! format.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nearflash_workloads::trace::write::{write, WriteOptions};
use nearflash_workloads::trace::{detect, read_all, Format, Op, ParseOptions, Request, TraceReader};
use std::io::Cursor;

fn read(text: &[u8], format: Format) -> Option<Vec<Request>> {
    let opts = ParseOptions { format: Some(format), skip_bad: true, ..ParseOptions::default() };
    read_all(TraceReader::new(Cursor::new(text), format, "fuzz", &opts).ok()?).ok().map(|(r, _)| r)
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, text)) = data.split_first() else { return };
    let Some(reqs) = read(text, Format::ALL[usize::from(mode) % 5]) else { return };
    for to in [Format::Mqsim, Format::Msr, Format::Fio, Format::Blkparse] {
        let mut out = Vec::new();
        let st = write(&mut out, to, &reqs, &WriteOptions::default()).expect("writing to memory");
        let back = read(&out, to).expect("what the converter writes reads back");
        let unit = match to {
            Format::Msr => 100,
            Format::Fio => 1000,
            _ => 1,
        };
        let kept: Vec<&Request> =
            reqs.iter().filter(|r| !matches!(to, Format::Mqsim | Format::Msr) || matches!(r.op, Op::Read | Op::Write)).collect();
        assert_eq!(back.len(), kept.len(), "{to:?}");
        assert_eq!(st.written as usize, kept.len());
        let t0 = kept.first().map_or(0, |r| r.time_ns / unit);
        for (b, r) in back.iter().zip(&kept) {
            assert_eq!((b.op, b.time_ns), (r.op, (r.time_ns / unit - t0) * unit), "{to:?}");
            if st.widened == 0 {
                assert_eq!((b.offset, b.len), (r.offset, r.len), "{to:?}");
            } else {
                assert!(b.offset <= r.offset && b.offset + b.len >= r.offset + r.len, "{to:?}: widened, never narrowed");
            }
        }
        if !back.is_empty() {
            assert_eq!(detect(&out), Ok(to));
        }
    }
});
