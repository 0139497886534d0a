//! `ExecCtx::flash_read_reporting`: a page the ECC cannot correct does not fail the read; the page says so, its
//! bytes are zeroes, the other pages arrive as usual, and the retries and soft decoding spent on it are booked.
//! `flash_read` over the same LBAs still fails, and every page carries its ECC outcome.

use nearflash_core::config::load_preset;
use nearflash_core::ext::{AttachCtx, DataBuf, EccOutcome, ExecCtx, ExtCompletion, Extension, ReadTo, Sqe};
use nearflash_core::nvme::{opcode, Status};
use nearflash_core::{Device, DeviceOptions};
use std::sync::{Arc, Mutex};

const OP: u8 = 0x9D;
const LBAS: u32 = 32;

/// What the last read saw: per page (first LBA, ECC outcome), the bytes, when it was done.
type Seen = Arc<Mutex<Option<(Vec<(u64, EccOutcome)>, Vec<u8>, u64)>>>;

/// Reads LBAs `cdw10 .. cdw10 + cdw12`, reporting (CDW13 = 1) or failing (0) on an unreadable page.
struct Reader(Seen);

impl Extension for Reader {
    fn name(&self) -> &str {
        "reporting-reader"
    }
    fn attach(&mut self, ctx: &mut AttachCtx<'_>) -> nearflash_core::Result<()> {
        ctx.claim_opcode(OP)
    }
    fn execute(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, _data: DataBuf<'_>) -> ExtCompletion {
        let (t, slba, nlb) = (ctx.start, u64::from(sqe.cdw10), sqe.cdw12);
        let mut out = vec![0xEEu8; nlb as usize * ctx.lba_bytes() as usize];
        let r = if sqe.cdw13 == 1 {
            ctx.flash_read_reporting(t, slba, nlb, ReadTo::Dram, &mut out)
        } else {
            ctx.flash_read(t, slba, nlb, ReadTo::Dram, &mut out)
        };
        match r {
            Ok(r) => {
                let pages = r.pages.iter().map(|p| (p.lba, p.ecc)).collect();
                *self.0.lock().unwrap() = Some((pages, out, r.done - t));
                ExtCompletion::ok(r.done)
            }
            Err(s) => ExtCompletion::failed(s, t),
        }
    }
}

fn device(seen: &Seen) -> (Device, Vec<u8>) {
    let mut t = load_preset("cosmos-plus").unwrap();
    for (k, v) in [("channels", "2"), ("chips_per_channel", "1"), ("blocks_per_plane", "32"), ("pages_per_block", "16"),
        ("over_provisioning", "25"), ("write_buffer", "256KiB")] {
        t.set(k, v).unwrap();
    }
    let mut dev = Device::memory(t, DeviceOptions { materialise: true, ..Default::default() }).unwrap();
    dev.attach(Box::new(Reader(seen.clone()))).unwrap();
    dev.create_queue_pair(1, 8).unwrap();
    let data: Vec<u8> = (0..LBAS as usize * dev.lba_bytes() as usize).map(|i| (i % 239) as u8 + 1).collect();
    assert!(dev.execute(1, Sqe::rw(opcode::WRITE, 0, 0, LBAS), DataBuf::ToDevice(&data)).unwrap().status.is_success());
    assert!(dev.execute(1, Sqe { opcode: opcode::FLUSH, nsid: 1, ..Sqe::default() }, DataBuf::None).unwrap().status.is_success());
    (dev, data)
}

fn read(dev: &mut Device, slba: u32, nlb: u32, reporting: bool) -> Status {
    let sqe = Sqe { opcode: OP, cdw10: slba, cdw12: nlb, cdw13: u32::from(reporting), ..Sqe::default() };
    dev.execute(1, sqe, DataBuf::None).unwrap().status
}

#[test]
fn an_uncorrectable_page_is_reported_zeroed_and_timed_while_the_others_arrive() {
    let seen: Seen = Arc::default();
    let (mut dev, data) = device(&seen);
    let lb = dev.lba_bytes() as usize;
    assert_eq!(read(&mut dev, 0, 8, true), Status::SUCCESS);
    let (pages, out, clean_ns) = seen.lock().unwrap().take().unwrap();
    assert!(pages.iter().all(|p| p.1 == EccOutcome::Corrected), "{pages:?}");
    assert_eq!(out, data[..8 * lb]);

    dev.inject_errors(5, 100_000).unwrap(); // beyond every decoder
    dev.inject_errors(1, 100).unwrap(); // corrected after retries
    assert_eq!(read(&mut dev, 0, 8, false), Status::UNRECOVERED_READ_ERROR, "flash_read still fails");
    let errors = dev.report().media_errors;
    assert_eq!(read(&mut dev, 0, 8, true), Status::SUCCESS);
    assert_eq!(dev.report().media_errors, errors + 1, "the lost page is a media error");
    let (pages, out, ns) = seen.lock().unwrap().take().unwrap();
    let spp = dev.config().nand.page_size.0 as usize / lb;
    let page_of = |lba: usize| pages.iter().find(|p| (p.0 as usize..p.0 as usize + spp).contains(&lba)).unwrap().1;
    assert!(matches!(page_of(5), EccOutcome::Uncorrectable(_)), "{pages:?}");
    assert!(page_of(1).retries() > 0 && page_of(1).is_ok(), "{pages:?}");
    for lba in 0..8 {
        let (got, want) = (&out[lba * lb..(lba + 1) * lb], &data[lba * lb..(lba + 1) * lb]);
        if page_of(lba).is_ok() {
            assert_eq!(got, want, "LBA {lba} arrives");
        } else {
            assert!(got.iter().all(|&b| b == 0), "LBA {lba}: a lost page reads as zeroes, never its data");
        }
    }
    assert!(ns > clean_ns, "retries and soft decoding take time: {ns} vs {clean_ns} ns");
}
