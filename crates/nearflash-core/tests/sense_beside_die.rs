//! `ExecCtx::sense_page_into` and `sense_planes_into`: logic beside the die (NDSearch's SiN units) gets the page
//! register's content while only the bytes asked for cross the channel; a multi-plane sense of two planes takes
//! one sensing, not two; bad address sets are refused.

use nearflash_core::config::load_preset;
use nearflash_core::ext::{AttachCtx, DataBuf, ExecCtx, ExtCompletion, Extension, Sqe, Status, Time};
use nearflash_core::{Device, DeviceOptions};

const OP: u8 = 0x9A;

struct Beside;

impl Extension for Beside {
    fn name(&self) -> &str {
        "beside"
    }
    fn attach(&mut self, ctx: &mut AttachCtx<'_>) -> nearflash_core::Result<()> {
        ctx.claim_opcode(OP)
    }
    fn execute(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, _data: DataBuf<'_>) -> ExtCompletion {
        let r = (|| -> Result<(u32, Time), Status> {
            let g = ctx.geometry().clone();
            let page = g.page_size as usize;
            let planes_per_die = g.planes() / g.dies();
            // reserved block 0 of plane 0 and of plane 1 (both on die 0)
            let r = u64::from(ctx.reserved_blocks_per_plane());
            let b0 = ctx.reserved_block(0)?;
            let b1 = ctx.reserved_block(r)?;
            assert_eq!(planes_per_die, 2);
            let (p0, p1) = (g.block_first_ppn(b0), g.block_first_ppn(b1));
            let t = ctx.start;
            let d0: Vec<u8> = (0..page).map(|i| (i % 251) as u8).collect();
            let d1: Vec<u8> = (0..page).map(|i| (i % 13) as u8).collect();
            let t = ctx.program_page(t, p0, &d0, &[])?.max(ctx.program_page(t, p1, &d1, &[])?);
            match sqe.cdw10 {
                0 => {
                    let mut out = vec![0u8; page];
                    let a = ctx.sense_page_into(t, p0, 64, &mut out)?;
                    assert_eq!(out, d0);
                    let b = ctx.sense_page_into(a.done, p1, 64, &mut out)?;
                    assert_eq!(out, d1);
                    Ok((0, b.done))
                }
                1 => {
                    let mut outs = vec![vec![0u8; page]; 2];
                    let rs = ctx.sense_planes_into(t, &[p0, p1], &[64, 64], &mut outs)?;
                    assert_eq!((&outs[0], &outs[1]), (&d0, &d1));
                    assert_eq!(rs[0].done, rs[1].done);
                    Ok((0, rs[0].done))
                }
                _ => {
                    let mut outs = vec![vec![0u8; page]; 2];
                    // the same plane twice, mismatched lengths, too many bytes: refused
                    for (ppns, xfer) in [(vec![p0, p0], vec![1, 1]), (vec![p0, p1], vec![1]), (vec![p0, p1], vec![1, page as u64 + 1])] {
                        assert_eq!(ctx.sense_planes_into(t, &ppns, &xfer, &mut outs).unwrap_err(), Status::INVALID_FIELD);
                    }
                    assert_eq!(ctx.sense_page_into(t, p0, page as u64 + 1, &mut outs[0]).unwrap_err(), Status::INVALID_FIELD);
                    Ok((0, t))
                }
            }
        })();
        match r {
            Ok((dw0, done)) => ExtCompletion { status: Status::SUCCESS, dw0, done },
            Err(s) => ExtCompletion::failed(s, ctx.start),
        }
    }
}

fn device() -> Device {
    let mut t = load_preset("searssd").unwrap();
    for (k, v) in [("channels", "1"), ("chips_per_channel", "1"), ("blocks_per_plane", "32"), ("pages_per_block", "16"),
        ("over_provisioning", "40"), ("ext_reserved_blocks", "2"), ("write_buffer", "256KiB")] {
        t.set(k, v).unwrap();
    }
    let mut dev = Device::memory(t, DeviceOptions::default()).unwrap();
    dev.attach(Box::new(Beside)).unwrap();
    dev.create_queue_pair(1, 8).unwrap();
    dev
}

fn run(sub: u32) -> u64 {
    let mut dev = device();
    let d = dev.execute(1, Sqe { opcode: OP, cdw10: sub, ..Sqe::default() }, DataBuf::None).unwrap();
    assert_eq!(d.status, Status::SUCCESS);
    d.latency_ns
}

#[test]
fn multi_plane_sense_returns_both_pages_in_one_sensing() {
    let (single, multi) = (run(0), run(1));
    let t_read = 60_000; // the searssd preset's tR
    assert!(single >= multi + t_read / 2, "two single senses {single} ns vs one multi-plane sense {multi} ns");
    run(2);
}
