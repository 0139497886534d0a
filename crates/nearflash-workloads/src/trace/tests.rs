//! Each format read from a small fixture, detection, and hostile input: malformed, overlong and non-UTF-8 lines,
//! overflowing numbers, times that go backwards; and the converter's round trips.

use super::write::{write, WriteOptions};
use super::*;
use proptest::prelude::*;
use std::io::Cursor;

fn read(text: &str, format: Format, opts: &ParseOptions) -> Result<(Vec<Request>, TraceStats), TraceError> {
    read_all(TraceReader::new(Cursor::new(text.as_bytes().to_vec()), format, "t.trace", opts)?)
}

fn ok(text: &str, format: Format) -> (Vec<Request>, TraceStats) {
    read(text, format, &ParseOptions::default()).unwrap()
}

fn err(text: &str, format: Format) -> TraceError {
    read(text, format, &ParseOptions::default()).unwrap_err()
}

fn ops(reqs: &[Request]) -> Vec<(u64, Op, u64, u64)> {
    reqs.iter().map(|r| (r.time_ns, r.op, r.offset, r.len)).collect()
}

#[test]
fn mqsim_fields_sectors_and_time_units() {
    let t = "1000 0 8 8 1\n2500 0 0 16 0\n\n# a note\n4000 1 64 1 1\n";
    let (r, st) = ok(t, Format::Mqsim);
    assert_eq!(ops(&r), [(0, Op::Read, 4096, 4096), (1500, Op::Write, 0, 8192), (3000, Op::Read, 32768, 512)]);
    assert_eq!((st.reads, st.writes, st.read_bytes, st.write_bytes, st.lines), (2, 1, 4608, 8192, 5));
    assert_eq!(r[2].line, 5);
    let us = ParseOptions { time_unit: TimeUnit::Microsecond, sector_size: 4096, ..ParseOptions::default() };
    let (r, _) = read(t, Format::Mqsim, &us).unwrap();
    assert_eq!(ops(&r)[1], (1_500_000, Op::Write, 0, 65536));
    let ps = ParseOptions { time_unit: TimeUnit::Picosecond, ..ParseOptions::default() };
    assert_eq!(read(t, Format::Mqsim, &ps).unwrap().0[2].time_ns, 3);
    let dev1 = ParseOptions { device: Some("1".into()), ..ParseOptions::default() };
    let (r, st) = read(t, Format::Mqsim, &dev1).unwrap();
    assert_eq!((r.len(), st.filtered), (1, 2));
    // the device is a number: "01" (or " 1") asks for device 1 too, "1.0" or "x" for none
    for (want, kept) in [("01", 1), (" 1", 1), ("0", 2), ("000", 2), ("1.0", 0), ("x", 0)] {
        let o = ParseOptions { device: Some(want.into()), ..ParseOptions::default() };
        assert_eq!(read(t, Format::Mqsim, &o).map(|(r, _)| r.len()).unwrap_or(0), kept, "{want:?}");
    }
}

#[test]
fn a_byte_order_mark_is_not_part_of_the_first_line() {
    let t = "\u{feff}Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n128166372003061629,h,0,Read,4096,4096,10\n";
    assert_eq!(detect(t.as_bytes()), Ok(Format::Msr));
    assert_eq!(ops(&ok(t, Format::Msr).0), [(0, Op::Read, 4096, 4096)]);
    assert_eq!(ok("\u{feff}0 0 0 8 1\n", Format::Mqsim).0.len(), 1);
    let e = err("0 0 0 8 1\n\u{feff}0 0 0 8 1\n", Format::Mqsim);
    assert_eq!(e.line, 2, "only a file's first bytes are a byte order mark: {e}");
}

#[test]
fn mqsim_malformed_lines_name_file_and_line() {
    for (text, line, what) in [
        ("0 0 0 8 1\n5 0 0 8\n", 2, "expected 5 fields"),
        ("0 0 0 8 2\n", 1, "neither 0 (write) nor 1 (read)"),
        ("0 0 0 0 1\n", 1, "0 sectors"),
        ("-5 0 0 8 1\n", 1, "arrival time \"-5\" is not a non-negative integer"),
        ("0 0 99999999999999999999 8 1\n", 1, "start sector"),
        ("0 0 36028797018963968 8 1\n", 1, "overflows 64 bits"),
        ("0 0 36028797018963967 8 1\n", 1, "ends past 2^64 bytes"),
        ("0 0 0 1e3 1\n", 1, "size in sectors"),
    ] {
        let e = err(text, Format::Mqsim);
        assert_eq!(e.line, line, "{text:?}: {e}");
        assert!(e.to_string().starts_with(&format!("t.trace:{line}: ")) && e.message.contains(what), "{text:?}: {e}");
    }
}

#[test]
fn skipping_bad_lines_counts_them_and_keeps_the_first() {
    let t = "0 0 0 8 1\nnot a request\n10 0 8 8 0\n1 2 3\n20 0 16 8 1\n";
    let skip = ParseOptions { skip_bad: true, ..ParseOptions::default() };
    let (r, st) = read(t, Format::Mqsim, &skip).unwrap();
    assert_eq!((r.len(), st.skipped), (3, 2));
    assert!(st.first_skipped.as_deref().unwrap().starts_with("line 2: expected 5 fields"));
}

#[test]
fn times_that_go_backwards_are_issued_in_file_order_and_counted() {
    let (r, st) = ok("100 0 0 8 1\n300 0 8 8 1\n200 0 16 8 1\n400 0 24 8 1\n", Format::Mqsim);
    assert_eq!(r.iter().map(|r| r.time_ns).collect::<Vec<_>>(), [0, 200, 200, 300]);
    assert_eq!(st.out_of_order, 1);
    // A first request later than the others: every later one is "before" it.
    let (r, st) = ok("500 0 0 8 1\n100 0 8 8 1\n", Format::Mqsim);
    assert_eq!((r[1].time_ns, st.out_of_order), (0, 1));
}

#[test]
fn nbdkit_replies_pair_past_a_damaged_line() {
    // Found by the audit: a non-UTF-8 line (skipped with --skip-bad) ended the pairing of replies, so every request
    // after it was converted to MSR with a ResponseTime of 0.
    let mut t = b"2026-11-28 18:25:09.722852 connection=1 Write id=1 offset=0x0 count=0x2000 fua=1 ...\n\
                  2026-11-28 18:25:09.722903 connection=1 ...Write id=1 return=0\n\
                  2026-11-28 18:25:09.722910 connection=1 \xff\xfe\n"
        .to_vec();
    t.extend_from_slice(
        b"2026-11-28 18:25:09.722958 connection=1 Read id=2 offset=0x1000 count=0x1000 ...\n\
          2026-11-28 18:25:09.723004 connection=1 ...Read id=2 return=0\n",
    );
    let rt = nbdkit_log::response_times(Cursor::new(&t));
    assert_eq!((rt.get(&1), rt.get(&4)), (Some(&51_000), Some(&46_000)));
    let skip = ParseOptions { skip_bad: true, ..ParseOptions::default() };
    let (r, _) = read_all(TraceReader::new(Cursor::new(&t), Format::NbdkitLog, "log", &skip).unwrap()).unwrap();
    assert_eq!(r.iter().map(|r| r.line).collect::<Vec<_>>(), [1, 4], "the reader's line numbers are the pairing's");
}

#[test]
fn a_line_without_end_stops_the_reader_at_once() {
    // Found by the audit: `nearflash trace info /dev/zero --format mqsim` never returned (an overlong line was read
    // to its end before it was reported). An endless source: the error comes after reading about MAX_LINE bytes.
    let endless = std::io::BufReader::new(std::io::repeat(b'7'));
    let mut reader = TraceReader::new(endless, Format::Mqsim, "zero", &ParseOptions::default()).unwrap();
    let e = reader.next().unwrap().unwrap_err();
    assert_eq!((e.line, e.message.contains("longer than")), (1, true), "{e}");
    assert!(reader.consumed() <= MAX_LINE as u64 + 3, "{}", reader.consumed());
    assert!(reader.next().is_none());
    // Lines around an overlong one whose rest is still in the buffer (and one exactly at the bound) keep their
    // numbers when skipped.
    let skip = ParseOptions { skip_bad: true, ..ParseOptions::default() };
    for extra in [3, 4, 100, 5000] {
        let text = format!("0 0 0 8 1\n{}\n10 0 8 8 1\n", "9".repeat(MAX_LINE + extra));
        let src = std::io::BufReader::with_capacity(1000, Cursor::new(text.into_bytes()));
        let (r, st) = read_all(TraceReader::new(src, Format::Mqsim, "t", &skip).unwrap()).unwrap();
        assert_eq!((r.len(), st.skipped, r[1].line, st.lines), (2, 1, 3, 3), "{extra}");
    }
}

#[test]
fn overlong_and_non_utf8_lines_are_malformed_not_fatal() {
    let long = format!("0 0 0 8 1\n{}\n10 0 8 8 1\n", "9".repeat(MAX_LINE + 10));
    let e = err(&long, Format::Mqsim);
    assert_eq!(e.line, 2);
    assert!(e.message.contains("longer than"));
    let skip = ParseOptions { skip_bad: true, ..ParseOptions::default() };
    let (r, st) = read(&long, Format::Mqsim, &skip).unwrap();
    assert_eq!((r.len(), st.skipped, r[1].line), (2, 1, 3));
    // The longest line that is allowed, with a Windows line end.
    let pad = format!("0 0 0 8 1{}", " ".repeat(MAX_LINE - 9));
    assert_eq!(ok(&format!("{pad}\r\n"), Format::Mqsim).0.len(), 1);
    let mut bytes = b"0 0 0 8 1\n0 0 \xff\xfe 8 1\n".to_vec();
    let e = read_all(TraceReader::new(Cursor::new(bytes.clone()), Format::Mqsim, "b", &ParseOptions::default()).unwrap())
        .unwrap_err();
    assert_eq!((e.line, e.message.contains("not UTF-8")), (2, true));
    bytes.extend_from_slice(b"5 0 8 8 0");  // no final line end
    let (r, _) = read_all(TraceReader::new(Cursor::new(bytes), Format::Mqsim, "b", &skip).unwrap()).unwrap();
    assert_eq!(ops(&r), [(0, Op::Read, 0, 4096), (5, Op::Write, 4096, 4096)]);
}

#[test]
fn msr_cambridge_csv() {
    let t = "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n\
             128166372003061629,hm,0,Read,3154817024,4096,24945\n\
             128166372003061819,hm,0,Write,3154821120,16384,1232\n\
             128166372003100000,hm,1,read,0,512,10\n";
    let (r, st) = ok(t, Format::Msr);
    assert_eq!(ops(&r), [(0, Op::Read, 3154817024, 4096), (19_000, Op::Write, 3154821120, 16384), (3_837_100, Op::Read, 0, 512)]);
    assert_eq!((r[0].recorded_ns, st.ignored), (Some(2_494_500), 1));
    let disk0 = ParseOptions { device: Some("0".into()), ..ParseOptions::default() };
    assert_eq!(read(t, Format::Msr, &disk0).unwrap().0.len(), 2);
    for (bad, what) in [
        ("1,h,0,Erase,0,4096,1\n", "neither Read nor Write"),
        ("1,h,0,Read,0,4096\n", "expected 7 comma-separated fields"),
        ("1,h,x,Read,0,4096,1\n", "DiskNumber"),
        ("1,h,0,Read,0,0,1\n", "0 bytes"),
        ("1,h,0,Read,18446744073709551615,2,1\n", "ends past"),
    ] {
        assert!(err(bad, Format::Msr).message.contains(what), "{bad}");
    }
}

#[test]
fn fio_iolog_v2_with_waits_and_v3_with_timestamps() {
    let v2 = "fio version 2 iolog\n/dev/x add\n/dev/x open\n/dev/x read 0 4096\n/dev/x wait 250 0\n\
              /dev/x write 8192 8192\n/dev/x wait 50 0\n/dev/x trim 0 4096\n/dev/x sync 0 0\n/dev/x close\n";
    let (r, st) = ok(v2, Format::Fio);
    assert_eq!(ops(&r), [(0, Op::Read, 0, 4096), (250_000, Op::Write, 8192, 8192), (250_000, Op::Trim, 0, 4096), (250_000, Op::Flush, 0, 0)]);
    assert_eq!((st.ignored, st.flushes, st.trims, st.trim_bytes), (6, 1, 1, 4096));
    let v3 = "fio version 3 iolog\n21 /tmp/f add\n120 /tmp/f open\n124 /tmp/f read 61440 4096\n\
              3791 /tmp/f write 774144 4096\n3800 /tmp/f datasync\n4069 /tmp/f close\n";
    let (r, _) = ok(v3, Format::Fio);
    assert_eq!(ops(&r), [(0, Op::Read, 61440, 4096), (3_667_000, Op::Write, 774144, 4096), (3_676_000, Op::Flush, 0, 0)]);
    // fio's devices are file names, not numbers: "01" is not "1"
    let two = "fio version 2 iolog\n1 add\n01 add\n1 read 0 4096\n01 read 4096 4096\n";
    let one = ParseOptions { device: Some("1".into()), ..ParseOptions::default() };
    assert_eq!(ops(&read(two, Format::Fio, &one).unwrap().0), [(0, Op::Read, 0, 4096)]);
    for (bad, line, what) in [
        ("/dev/x read 0 4096\n", 1, "first line must be"),
        ("fio version 4 iolog\n", 1, "version 4 is not supported"),
        ("fio version 2 iolog\n/dev/x read 0\n", 2, "expected filename action"),
        ("fio version 2 iolog\n/dev/x erase 0 4096\n", 2, "unknown action"),
        ("fio version 2 iolog\n/dev/x read\n", 2, "needs an offset"),
        ("fio version 2 iolog\n/dev/x write 0 0\n", 2, "0 bytes"),
        ("fio version 3 iolog\n/dev/x read 0 4096\n", 2, "timestamp (microseconds)"),
        // found by the audit: a wait without its delay was ignored (fio refuses it), and version 3's refusal of a
        // wait listed wait among the actions it takes
        ("fio version 2 iolog\n/dev/x wait\n", 2, "wait needs its microseconds"),
        ("fio version 3 iolog\n5 /dev/x wait 100 0\n", 2, "wait is a version 2 action"),
        ("# only a note\n", 0, "no 'fio version"),
    ] {
        let e = err(bad, Format::Fio);
        assert!(e.line == line && e.message.contains(what), "{bad:?}: {e}");
    }
}

#[test]
fn blkparse_default_output_d_or_q_events() {
    let t = "  8,0    3        1     0.000000000   697  Q  WS 1049376 + 8 [jbd2/sda1-8]\n\
               8,0    3        2     0.000001000   697  G  WS 1049376 + 8 [jbd2/sda1-8]\n\
               8,0    3        3     0.000004000   697  D  WS 1049376 + 8 [jbd2/sda1-8]\n\
               8,0    1        1     0.000100000  1000  Q   R 2048 + 256 [fio]\n\
               8,0    1        2     0.000120000  1000  D   R 2048 + 256 [fio]\n\
               8,0    0        4     0.000200000     0  C  WS 1049376 + 8 [0]\n\
               8,0    2        1     0.000300000   500  D   D 4096 + 2048 [fstrim]\n\
               8,0    2        2     0.000400000   501  D FWS [kworker]\n\
               8,0    2        3     0.000500000   501  D   N 0 + 0 [kworker]\n\
               8,16   2        4     0.000600000   501  D   R 8 + 8 [other]\n\
             CPU0 (8,0):\n Reads Queued:           1,      128KiB\n";
    let (r, st) = ok(t, Format::Blkparse);
    assert_eq!(
        ops(&r),
        [(0, Op::Write, 1049376 * 512, 4096), (116_000, Op::Read, 2048 * 512, 131072), (296_000, Op::Trim, 4096 * 512, 1 << 20),
         (396_000, Op::Flush, 0, 0), (596_000, Op::Read, 4096, 4096)]
    );
    assert_eq!(st.ignored, 5);
    let q = ParseOptions { blk_event: 'Q', device: Some("8,0".into()), ..ParseOptions::default() };
    let (r, st) = read(t, Format::Blkparse, &q).unwrap();
    assert_eq!((r.len(), r[1].time_ns, st.filtered), (2, 100_000, 0));
    let spaced = ParseOptions { blk_event: 'Q', device: Some("8, 00".into()), ..ParseOptions::default() };
    assert_eq!(read(t, Format::Blkparse, &spaced).unwrap().0.len(), 2);
    for (bad, what) in [
        ("8 0 1 1 0.0 1 D R 0 + 8 [x]\n", "device major,minor"),
        ("  8,0 1 1 0.0x 1 D R 0 + 8 [x]\n", "seconds.nanoseconds"),
        ("  8,0 1 1 0.0 1 D R 0 - 8 [x]\n", "sector + sectors"),
        ("  8,0 1 1 0.0 1 D XYZ 0 + 8 [x]\n", "RWBS"),
        ("  8,0 1 1 0.0 1 DD R 0 + 8 [x]\n", "one letter"),
        ("  8,0 1 1 0.0 1 D D 0 + 0 [x]\n", "0 sectors"),
        ("  8,0 1 1 0.0000000001 1 D R 0 + 8 [x]\n", "seconds.nanoseconds"),
        ("  8,0 1 1 0.0 1 D R x + 8 [x]\n", "sector \"x\" is not a non-negative integer"),
        ("  8,0 1 1 0.0 1 D W -8 + 8 [x]\n", "sector \"-8\""),
    ] {
        assert!(err(bad, Format::Blkparse).message.contains(what), "{bad}: {}", err(bad, Format::Blkparse));
    }
    let bad_event = ParseOptions { blk_event: 'C', ..ParseOptions::default() };
    assert!(read(t, Format::Blkparse, &bad_event).unwrap_err().message.contains("must be D or Q"));
}

#[test]
fn nbdkit_log_filter_lines() {
    let t = "2026-11-28 18:25:08.705106 Ready thread_model=3\n\
             2026-11-28 18:25:09.721734 connection=1 Connect export=\"\" tls=0 size=0x4000000\n\
             2026-11-28 18:25:09.722852 connection=1 Write id=1 offset=0x0 count=0x2000 fua=1 ...\n\
             2026-11-28 18:25:09.722903 connection=1 ...Write id=1 return=0\n\
             2026-11-28 18:25:09.722958 connection=1 Read id=2 offset=0x1000 count=0x1000 ...\n\
             2026-11-28 18:25:09.723004 connection=1 Flush id=3 ...\n\
             2026-11-28 18:25:09.723035 connection=1 Trim id=4 offset=0x0 count=0x1000 fua=0 ...\n\
             2026-11-28 18:25:09.723362 connection=1 Zero id=5 offset=0x2000 count=0x1000 trim=0 fua=1 fast=0 ...\n\
             2026-11-28 18:25:09.723400 connection=1 Zero id=6 offset=0x3000 count=0x1000 trim=1 fua=0 fast=0 ...\n\
             2026-11-29 00:00:00.000000 connection=1 Read id=7 offset=0x0 count=0x200 ...\n\
             2026-11-28 18:25:09.727402 connection=1 Disconnect transactions=7\n";
    let (r, st) = ok(t, Format::NbdkitLog);
    assert_eq!(
        ops(&r),
        [(0, Op::Write, 0, 8192), (106_000, Op::Read, 4096, 4096), (152_000, Op::Flush, 0, 0), (183_000, Op::Trim, 0, 4096),
         (510_000, Op::Write, 8192, 4096), (548_000, Op::Trim, 12288, 4096), (20_090_277_148_000, Op::Read, 0, 512)]
    );
    assert_eq!(st.ignored, 4);
    let rt = nbdkit_log::response_times(Cursor::new(t));
    assert_eq!((rt.get(&3), rt.get(&5)), (Some(&51_000), None));
    for (bad, what) in [
        ("2026-11-28 18:25:09 connection=1 Read id=2 offset=0x1000 ...\n", "no count= field"),
        ("2026-11-28 18:25:09 connection=1 Read id=2 offset=4096 count=0x1000 ...\n", "not a hexadecimal"),
        ("2026-11-28 18:25:09 connection=1 Read id=2 offset=0x0 count=0x1000\n", "ends with '...'"),
        ("2026-13-28 18:25:09 Read id=2 offset=0x0 count=0x1000 ...\n", "no time stamp"),
        ("18:25:09 Read id=2 offset=0x0 count=0x1000 ...\n", "no time stamp"),
        ("2026-11-28 18:25:09 connection=1 Zero id=5 offset=0x2000 count=0x1000 ...\n", "trim=0 or trim=1"),
        ("2026-11-28 18:25:09 connection=1 Read id=2 offset=0xffffffffffffffff count=0x2 ...\n", "ends past"),
    ] {
        assert!(err(bad, Format::NbdkitLog).message.contains(what), "{bad}: {}", err(bad, Format::NbdkitLog));
    }
}

#[test]
fn detection_from_the_first_lines() {
    let cases = [
        ("0 0 0 8 1\n10 0 8 8 0\n", Format::Mqsim),
        ("# recorded by hand\n128166372003061629,hm,0,Read,0,4096,1\n", Format::Msr),
        ("Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n1,h,0,Write,0,4096,1\n", Format::Msr),
        ("fio version 2 iolog\n/dev/x add\n", Format::Fio),
        ("fio version 3 iolog\n0 /dev/x add\n", Format::Fio),
        ("  8,0    3        1     0.000000000   697  Q  WS 1049376 + 8 [jbd2]\n", Format::Blkparse),
        ("2026-11-28 18:25:08.705106 Ready thread_model=3\n", Format::NbdkitLog),
    ];
    for (head, want) in cases {
        assert_eq!(detect(head.as_bytes()), Ok(want), "{head}");
    }
    for (head, what) in [
        ("", "no requests"),
        ("# nothing\n\n", "no requests"),
        ("hello world\n", "cannot tell"),
        ("0 0 0 8 1\n1,h,0,Read,0,4096,1\n", "cannot tell"),
        ("\u{feff}garbage\u{0}\n", "cannot tell"),
    ] {
        assert!(detect(head.as_bytes()).unwrap_err().contains(what), "{head:?}");
    }
    // A head cut in the middle of a line: the partial last line does not decide.
    let mut long = "0 0 0 8 1\n".repeat(MAX_LINE / 10 + 1);
    long.truncate(MAX_LINE);
    long.push('x');
    assert_eq!(detect(long.as_bytes()), Ok(Format::Mqsim));
}

#[test]
fn files_open_with_detection_and_refuse_what_is_not_a_trace() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.trace");
    std::fs::write(&p, "fio version 3 iolog\n0 f add\n5 f read 0 4096\n").unwrap();
    let (r, st) = read_all(open(&p, &ParseOptions::default()).unwrap()).unwrap();
    assert_eq!((r.len(), st.format), (1, Some(Format::Fio)));
    let e = open(&dir.path().join("missing"), &ParseOptions::default()).err().unwrap();
    assert!(e.to_string().contains("missing: cannot read it"), "{e}");
    let e = open(dir.path(), &ParseOptions::default()).err().unwrap();
    assert!(e.message.contains("directory"), "{e}");
    std::fs::write(&p, "what is this\n").unwrap();
    assert!(open(&p, &ParseOptions::default()).err().unwrap().message.contains("cannot tell"));
    let forced = ParseOptions { format: Some(Format::Mqsim), ..ParseOptions::default() };
    let e = read_all(open(&p, &forced).unwrap()).unwrap_err();
    assert_eq!((e.line, e.file.ends_with("a.trace")), (1, true));
    assert_eq!("nbdkit-log".parse::<Format>(), Ok(Format::NbdkitLog));
    assert!("csv".parse::<Format>().unwrap_err().contains("mqsim, msr, fio, blkparse, nbdkit-log"));
}

fn requests() -> impl Strategy<Value = Vec<Request>> {
    let one = (0u64..1 << 40, 0u8..4, 0u64..1 << 30, 1u64..1 << 12, proptest::option::of(0u64..1 << 30));
    proptest::collection::vec(one, 0..40).prop_map(|v| {
        let mut t = 0;
        v.into_iter()
            .map(|(dt, op, sector, n, rt)| {
                t += dt % 1_000_000_000_000;
                let op = [Op::Read, Op::Write, Op::Flush, Op::Trim][op as usize];
                let (offset, len) = if op == Op::Flush { (0, 0) } else { (sector * 512, n * 512) };
                Request { time_ns: t, op, offset, len, line: 0, recorded_ns: rt }
            })
            .collect()
    })
}

/// What a format keeps of a request: times rounded down to its unit (relative to the first), no flushes or
/// trims in MQSim and MSR.
fn kept(format: Format, reqs: &[Request]) -> Vec<(u64, Op, u64, u64)> {
    let unit = match format {
        Format::Msr => 100,
        Format::Fio => 1000,
        _ => 1,
    };
    let keep = |op: Op| !matches!(format, Format::Mqsim | Format::Msr) || matches!(op, Op::Read | Op::Write);
    let kept: Vec<&Request> = reqs.iter().filter(|r| keep(r.op)).collect();
    let t0 = kept.first().map_or(0, |r| r.time_ns / unit);
    kept.iter().map(|r| ((r.time_ns / unit - t0) * unit, r.op, r.offset, r.len)).collect()
}

proptest! {
    #[test]
    fn every_format_reads_back_what_the_converter_wrote(reqs in requests()) {
        for format in [Format::Mqsim, Format::Msr, Format::Fio, Format::Blkparse] {
            let mut out = Vec::new();
            let st = write(&mut out, format, &reqs, &WriteOptions::default()).unwrap();
            prop_assert_eq!(st.widened, 0);
            let text = String::from_utf8(out).unwrap();
            if !text.trim().is_empty() {
                prop_assert_eq!(detect(text.as_bytes()), Ok(format), "{}", text);
            }
            let (back, _) = read(&text, format, &ParseOptions::default()).unwrap();
            prop_assert_eq!(ops(&back), kept(format, &reqs), "{:?}", format);
            if format == Format::Msr {
                let rts: Vec<_> = reqs.iter().filter(|r| r.op == Op::Read || r.op == Op::Write)
                    .map(|r| Some(r.recorded_ns.unwrap_or(0) / 100 * 100)).collect();
                prop_assert_eq!(back.iter().map(|r| r.recorded_ns).collect::<Vec<_>>(), rts);
            }
        }
    }
}

#[test]
fn converter_counts_what_a_format_cannot_hold() {
    let reqs = [
        Request { time_ns: 0, op: Op::Write, offset: 100, len: 1000, line: 1, recorded_ns: None },
        Request { time_ns: 5, op: Op::Flush, offset: 0, len: 0, line: 2, recorded_ns: None },
        Request { time_ns: 9, op: Op::Trim, offset: 4096, len: 4096, line: 3, recorded_ns: None },
    ];
    let mut out = Vec::new();
    let st = write(&mut out, Format::Mqsim, &reqs, &WriteOptions::default()).unwrap();
    assert_eq!((st.written, st.dropped_flushes, st.dropped_trims, st.widened), (1, 1, 1, 1));
    assert_eq!(String::from_utf8(out).unwrap(), "0 0 0 3 0\n");
    assert!(write(&mut Vec::new(), Format::NbdkitLog, &reqs, &WriteOptions::default()).is_err());
}
