//! `ExecCtx::read_page_range`, the column read (ONFI random data out): a range moves only the ECC codewords that
//! hold it (plus the Change Read Column), so fewer bytes take less time; a range of the whole page is exactly
//! `read_page`; bad ranges are refused before anything is read or booked.

use nearflash_core::config::load_preset;
use nearflash_core::ext::{AttachCtx, DataBuf, ExecCtx, ExtCompletion, Extension, ReadTo, Sqe, Status};
use nearflash_core::{Device, DeviceOptions};
use std::sync::{Arc, Mutex};

const OP: u8 = 0x9B;

/// What the test asks the extension to do after programming reserved page 0 with a known pattern.
#[derive(Clone)]
enum Step {
    /// `read_page` into a page buffer.
    Page,
    /// `read_page_range(offset, len)` into a buffer of `buf` bytes.
    Range { offset: u64, len: u64, buf: usize },
    /// `read_page_range` of a whole page of a physical page past the array's last.
    PastTheArray,
}

/// Per step: its outcome (read time after the program ended and bytes moved over the channel, or the status) and
/// the bytes read.
type Entry = (Result<(u64, u64), Status>, Vec<u8>);
type Log = Arc<Mutex<Vec<Entry>>>;

struct Columns {
    steps: Vec<Step>,
    log: Log,
}

fn pattern(page: usize) -> Vec<u8> {
    (0..page).map(|i| (i * 7 % 251) as u8).collect()
}

impl Extension for Columns {
    fn name(&self) -> &str {
        "columns"
    }
    fn attach(&mut self, ctx: &mut AttachCtx<'_>) -> nearflash_core::Result<()> {
        ctx.claim_opcode(OP)
    }
    fn execute(&mut self, ctx: &mut ExecCtx<'_>, _sqe: &Sqe, _data: DataBuf<'_>) -> ExtCompletion {
        let page = ctx.geometry().page_size as usize;
        let ppn = ctx.geometry().block_first_ppn(ctx.reserved_block(0).unwrap());
        let programmed = ctx.program_page(ctx.start, ppn, &pattern(page), &[]).unwrap();
        let mut t = programmed;
        for s in &self.steps {
            let (r, bytes) = match *s {
                Step::Page => {
                    let mut out = vec![0u8; page];
                    (ctx.read_page(programmed, ppn, ReadTo::UnitBuffer, &mut out), out)
                }
                Step::Range { offset, len, buf } => {
                    let mut out = vec![0u8; buf];
                    (ctx.read_page_range(programmed, ppn, offset, len, ReadTo::UnitBuffer, &mut out), out)
                }
                Step::PastTheArray => {
                    let mut out = vec![0u8; 16];
                    (ctx.read_page_range(programmed, ctx.geometry().pages(), 0, 16, ReadTo::UnitBuffer, &mut out), out)
                }
            };
            if let Ok(r) = &r {
                t = t.max(r.done);
            }
            self.log.lock().unwrap().push((r.map(|r| (r.done - programmed, r.moved)), bytes));
        }
        ExtCompletion { status: Status::SUCCESS, dw0: 0, done: t }
    }
}

/// Runs `steps` on a fresh one-die Cosmos+ device; their logs and the NAND's pages read.
fn run(steps: &[Step]) -> (Vec<Entry>, u64) {
    let mut t = load_preset("cosmos-plus").unwrap();
    for (k, v) in [("channels", "1"), ("chips_per_channel", "1"), ("blocks_per_plane", "32"), ("pages_per_block", "16"),
        ("over_provisioning", "40"), ("ext_reserved_blocks", "2"), ("write_buffer", "256KiB")] {
        t.set(k, v).unwrap();
    }
    let mut dev = Device::memory(t, DeviceOptions::default()).unwrap();
    let log = Log::default();
    dev.attach(Box::new(Columns { steps: steps.to_vec(), log: log.clone() })).unwrap();
    dev.create_queue_pair(1, 8).unwrap();
    let c = dev.execute(1, Sqe { opcode: OP, ..Sqe::default() }, DataBuf::None).unwrap();
    assert_eq!(c.status, Status::SUCCESS);
    let pages_read = dev.report().nand.pages_read;
    let got = log.lock().unwrap().clone();
    (got, pages_read)
}

const PAGE: u64 = 16384;

#[test]
fn a_range_moves_its_codewords_only_and_returns_its_bytes() {
    let want = pattern(PAGE as usize);
    // 100 bytes inside one 1 KiB codeword; 3000 bytes across codewords 1-4; the whole page
    let (small, _) = run(&[Step::Range { offset: 1500, len: 100, buf: 100 }]);
    let (mid, _) = run(&[Step::Range { offset: 1500, len: 3000, buf: 3000 }]);
    let (whole, _) = run(&[Step::Range { offset: 0, len: PAGE, buf: PAGE as usize }]);
    let (page, _) = run(&[Step::Page]);
    let t = |l: &[Entry]| l[0].0.unwrap().0;
    let moved = |steps: &[Step]| run(steps).0[0].0.unwrap().1;
    assert_eq!(small[0].1, want[1500..1600]);
    assert_eq!(mid[0].1, want[1500..4500]);
    assert_eq!(moved(&[Step::Range { offset: 1500, len: 100, buf: 100 }]), 1024, "one codeword crossed the channel");
    assert_eq!(moved(&[Step::Range { offset: 1500, len: 3000, buf: 0 }]), 4096, "codewords 1-4");
    assert!(t(&small) < t(&mid) && t(&mid) < t(&page), "{} < {} < {} ns", t(&small), t(&mid), t(&page));
    // cosmos-plus: 200 MB/s channel, so a 1 KiB codeword moves in 5.12 us and the page in 81.92 us; both pay tR and
    // the last codeword's decode; the range pays the Change Read Column (t_column_change, 300 ns) on top
    let (per_cw, column) = (5_120, 300);
    assert_eq!(t(&page) - t(&small), 15 * per_cw - column, "{} vs {} ns", t(&small), t(&page));
    // four codewords (1024..5120) against one: three codeword transfers more, nothing else
    assert_eq!(t(&mid) - t(&small), 3 * per_cw);
    // the whole page as a range is read_page: same time, same bytes
    assert_eq!(whole, page);
    assert_eq!(whole[0].1, want);
}

#[test]
fn a_range_pays_the_column_change_a_whole_page_does_not() {
    // the last codeword alone against the same codeword count at column 0: both column reads, same time
    let (last, _) = run(&[Step::Range { offset: PAGE - 1, len: 1, buf: 1 }]);
    let (first, _) = run(&[Step::Range { offset: 0, len: 1024, buf: 0 }]);
    assert_eq!(last[0].0, first[0].0, "one codeword anywhere in the page costs the same");
    assert!(first[0].1.is_empty(), "an empty buffer is timing only");
    // a range that rounds up to the whole page (bytes 1..16383) is a plain page read, without the column change
    let (inner, _) = run(&[Step::Range { offset: 1, len: PAGE - 2, buf: (PAGE - 2) as usize }]);
    let (page, _) = run(&[Step::Page]);
    assert_eq!(inner[0].0, page[0].0);
}

#[test]
fn bad_ranges_are_refused_and_change_nothing() {
    let (reference, pages_ref) = run(&[Step::Range { offset: 0, len: 512, buf: 512 }]);
    for bad in [
        Step::Range { offset: 0, len: 0, buf: 0 },            // empty
        Step::Range { offset: PAGE, len: 1, buf: 1 },         // starts past the end
        Step::Range { offset: PAGE - 10, len: 11, buf: 11 },  // ends past the end
        Step::Range { offset: u64::MAX, len: 2, buf: 2 },     // offset + len overflows
        Step::Range { offset: 0, len: 512, buf: 511 },        // buffer of another length
        Step::Range { offset: 0, len: 512, buf: 16384 },
        Step::PastTheArray,                                  // no such page
    ] {
        let (log, pages) = run(&[bad.clone(), Step::Range { offset: 0, len: 512, buf: 512 }]);
        let want = if matches!(bad, Step::PastTheArray) { Status::LBA_OUT_OF_RANGE } else { Status::INVALID_FIELD };
        assert_eq!(log[0].0, Err(want));
        assert!(log[0].1.iter().all(|&b| b == 0), "nothing written into the buffer");
        // the read after the refused one sees the same device as the reference: nothing was sensed or booked
        assert_eq!(log[1], reference[0]);
        assert_eq!(pages, pages_ref);
    }
}
