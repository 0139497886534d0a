//! An extension's reads into controller DRAM book the DRAM port exactly as the host read path does (twice the
//! bytes: written in from flash, read out once by their consumer), reads kept in DRAM book the write in, and reads
//! into a unit's own buffer book none.

use nearflash_core::config::load_preset;
use nearflash_core::ext::{AttachCtx, DataBuf, ExecCtx, ExtCompletion, Extension, ReadTo, Sqe, Status};
use nearflash_core::nvme::opcode;
use nearflash_core::{Device, DeviceOptions, Report};

const OP: u8 = 0x9C;
const LBAS: u32 = 48;

/// Reads LBAs `cdw10 .. cdw10 + cdw12` as CDW13 says: 0 `flash_read` to DRAM, 1 `flash_read_self_sequenced` to
/// DRAM, 2 `flash_read` to a unit's buffer, 4 `flash_read` kept in DRAM, 3 `read_page` to DRAM of the physical page
/// holding LBA `cdw10`.
struct Reader;

impl Extension for Reader {
    fn name(&self) -> &str {
        "reader"
    }
    fn attach(&mut self, ctx: &mut AttachCtx<'_>) -> nearflash_core::Result<()> {
        ctx.claim_opcode(OP)
    }
    fn execute(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, _data: DataBuf<'_>) -> ExtCompletion {
        let (t, slba, nlb) = (ctx.start, u64::from(sqe.cdw10), sqe.cdw12);
        let mut out = vec![0u8; nlb as usize * ctx.lba_bytes() as usize];
        let done = match sqe.cdw13 {
            0 => ctx.flash_read(t, slba, nlb, ReadTo::Dram, &mut out).map(|r| r.done),
            1 => ctx.flash_read_self_sequenced(t, slba, nlb, ReadTo::Dram, &mut out).map(|r| r.done),
            2 => ctx.flash_read(t, slba, nlb, ReadTo::UnitBuffer, &mut out).map(|r| r.done),
            4 => ctx.flash_read(t, slba, nlb, ReadTo::DramKept, &mut out).map(|r| r.done),
            _ => match ctx.placement(slba) {
                Ok(nearflash_core::ext::Placement::Flash { addr, .. }) => {
                    let mut page = vec![0u8; ctx.geometry().page_size as usize];
                    ctx.read_page(t, addr.ppn, ReadTo::Dram, &mut page).map(|r| r.done)
                }
                _ => Err(Status::INTERNAL_ERROR),
            },
        };
        match done {
            Ok(done) => ExtCompletion::ok(done),
            Err(s) => ExtCompletion::failed(s, t),
        }
    }
}

/// A small device holding LBAs 0..LBAS on flash, with the reader attached and a fresh measurement window.
fn device() -> Device {
    let mut t = load_preset("cosmos-plus").unwrap();
    for (k, v) in [("channels", "2"), ("chips_per_channel", "1"), ("blocks_per_plane", "32"), ("pages_per_block", "16"),
        ("over_provisioning", "25"), ("write_buffer", "256KiB")] {
        t.set(k, v).unwrap();
    }
    let mut dev = Device::memory(t, DeviceOptions { materialise: true, ..Default::default() }).unwrap();
    dev.attach(Box::new(Reader)).unwrap();
    dev.create_queue_pair(1, 8).unwrap();
    let data: Vec<u8> = (0..LBAS as usize * dev.lba_bytes() as usize).map(|i| (i % 241) as u8).collect();
    assert!(dev.execute(1, Sqe::rw(opcode::WRITE, 0, 0, LBAS), DataBuf::ToDevice(&data)).unwrap().status.is_success());
    assert!(dev.execute(1, Sqe { opcode: opcode::FLUSH, nsid: 1, ..Sqe::default() }, DataBuf::None).unwrap().status.is_success());
    let h = dev.horizon();
    dev.advance_to(h);
    dev.reset_stats();
    dev
}

/// (DRAM energy in J, DRAM busy ns, DRAM transfers) of a report's window.
fn dram(r: &Report) -> (f64, f64, u64) {
    let u = r.utilisation.iter().find(|g| g.name == "dram").expect("a dram group");
    (r.energy.dynamic_j.get("ssd_dram").copied().unwrap_or(0.0), u.mean * r.elapsed_ns as f64, u.ops)
}

fn ext_read(mode: u32, slba: u32, nlb: u32) -> (f64, f64, u64) {
    let mut dev = device();
    let sqe = Sqe { opcode: OP, cdw10: slba, cdw12: nlb, cdw13: mode, ..Sqe::default() };
    assert!(dev.execute(1, sqe, DataBuf::None).unwrap().status.is_success());
    dram(&dev.report())
}

fn host_read(slba: u32, nlb: u32) -> (f64, f64, u64) {
    let mut dev = device();
    let mut out = vec![0u8; nlb as usize * dev.lba_bytes() as usize];
    assert!(dev.execute(1, Sqe::rw(opcode::READ, 0, u64::from(slba), nlb), DataBuf::FromDevice(&mut out)).unwrap().status.is_success());
    dram(&dev.report())
}

fn assert_same(what: &str, got: (f64, f64, u64), want: (f64, f64, u64)) {
    assert!(want.0 > 0.0 && want.1 > 0.0, "the host read books DRAM: {want:?}");
    assert!((got.0 - want.0).abs() <= 1e-9 * want.0, "{what}: DRAM energy {} J, the host read's {} J", got.0, want.0);
    assert!((got.1 - want.1).abs() <= 1e-6 * want.1, "{what}: DRAM busy {} ns, the host read's {} ns", got.1, want.1);
    assert_eq!(got.2, want.2, "{what}: DRAM transfers");
}

#[test]
fn flash_reads_into_dram_book_it_as_the_host_read_of_the_same_lbas() {
    for (slba, nlb) in [(0, LBAS), (5, 7), (17, 1)] {
        let host = host_read(slba, nlb);
        assert_same(&format!("flash_read {slba}+{nlb}"), ext_read(0, slba, nlb), host);
        assert_same(&format!("flash_read_self_sequenced {slba}+{nlb}"), ext_read(1, slba, nlb), host);
        let unit = ext_read(2, slba, nlb);
        assert_eq!((unit.0, unit.2), (0.0, 0), "a read into a unit's buffer books no DRAM");
        let kept = ext_read(4, slba, nlb);
        assert!((2.0 * kept.0 - host.0).abs() <= 1e-9 * host.0, "kept in DRAM: the write in, half the host read's");
        assert_eq!(kept.2, host.2, "one transfer per page");
    }
}

#[test]
fn a_physical_page_read_into_dram_books_the_page_as_a_host_read_of_its_sectors() {
    let dev = device();
    let spp = dev.config().nand.page_size.0 / dev.lba_bytes();
    drop(dev);
    // LBA 0's page holds LBAs 0 .. spp (one logical group per page, written in order)
    let host = host_read(0, spp as u32);
    let page = ext_read(3, 0, 1);
    assert!((page.0 - host.0).abs() <= 1e-9 * host.0, "DRAM energy {} J vs {} J", page.0, host.0);
    assert_eq!(page.2, 1, "one transfer for the page");
}
