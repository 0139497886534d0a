//! Ordinary Reads below C served by NICE's firmware kernel when `shared_reads` is on (paper Sec. IV-C: the master
//! coroutine checks whether an ISC request and a normal request hit the same address, and the two share the NAND
//! read). The path is the device's own read path (fw_read, one mapping lookup per block, the flash reads with
//! their per-page transactions on the A53 cores, each page's DRAM pass and DMA to the host), except that a sector
//! another request holds in the shared buffer comes from DRAM; what this read brings in is held until it completes.

use crate::sched::SharedPages;
use nearflash_core::ext::Time;
use nearflash_core::ext::{DataBuf, ExecCtx, ReadTo, Sqe, Status};

/// What serving one ordinary Read did.
#[derive(Debug, Clone, Copy, Default)]
pub struct Served {
    pub done: Time,
    pub flash_sectors: u64,
    pub shared_sectors: u64,
}

/// Serves an ordinary Read of `nlb` blocks at `slba` (< C); `Err` with the status the device's own path gives.
pub fn serve(ctx: &mut ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>, shared: &mut SharedPages) -> Result<Served, (Status, Time)> {
    let t = ctx.start;
    let (slba, nlb) = (sqe.slba(), sqe.nlb());
    let ss = ctx.lba_bytes() as usize;
    if slba.checked_add(u64::from(nlb)).is_none_or(|e| e > ctx.lbas()) {
        let why = format!("Read of NLB {nlb} at SLBA {slba}: beyond the file system's {} blocks", ctx.lbas());
        return Err((ctx.explain(Status::LBA_OUT_OF_RANGE, Some(40), why), t));
    }
    let bytes = nlb as usize * ss;
    let out: &mut [u8] = match data {
        DataBuf::FromDevice(b) if b.len() >= bytes => &mut b[..bytes],
        DataBuf::None => &mut [],
        _ => return Err((ctx.explain(Status::DATA_TRANSFER_ERROR, Some(48), format!("Read of NLB {nlb}: the host buffer must hold {bytes} bytes")), t)),
    };
    let want = !out.is_empty();
    // The device charged fw_other for fetching and decoding the command; the rest of its read path is charged here.
    let c = &ctx.config().controller;
    let fw_rest = (c.fw_read_instructions.0 - c.fw_other_instructions.0).max(0.0) + ctx.config().ftl.map_instructions.0 * f64::from(nlb);
    let fw = ctx.firmware(t, fw_rest);
    shared.prune(t, |h| ctx.ended(h));
    // Each sector: from the shared buffer (landed time), or in a run of sectors read from flash together.
    let mut landed: Vec<Option<Time>> = vec![None; nlb as usize];
    let mut s = Served::default();
    for (i, slot) in landed.iter_mut().enumerate() {
        if let Some((at, b, holder)) = shared.take(slba + i as u64, fw, want, |h| ctx.ended(h)) {
            if let Some(b) = b {
                out[i * ss..(i + 1) * ss].copy_from_slice(&b);
            }
            if let Some(h) = holder {
                ctx.complete_after(h, 0);
            }
            *slot = Some(at.max(fw));
            s.shared_sectors += 1;
        }
    }
    // (when the data is ready, sectors, whether it is through DRAM already)
    let mut page_done: Vec<(Time, u64, bool)> = Vec::new();
    let mut i = 0usize;
    while i < nlb as usize {
        if landed[i].is_some() {
            page_done.push((landed[i].unwrap_or(fw), 1, false));
            i += 1;
            continue;
        }
        let run = landed[i..].iter().take_while(|l| l.is_none()).count();
        let buf: &mut [u8] = if want { &mut out[i * ss..(i + run) * ss] } else { &mut [] };
        let r = ctx.flash_read(fw, slba + i as u64, run as u32, ReadTo::Dram, buf).map_err(|e| (e, fw))?;
        for p in &r.pages {
            let k = (p.lba - slba) as usize;
            for j in 0..p.sectors as usize {
                landed[k + j] = Some(p.done);
            }
            page_done.push((p.done, u64::from(p.sectors), true));
        }
        s.flash_sectors += run as u64;
        i += run;
    }
    // Each page's data passes DRAM (a flash page in `flash_read`, as on the device's own path) and is DMA'd to the
    // host as soon as it is there.
    page_done.sort_unstable();
    let last_landed = page_done.last().map_or(fw, |p| p.0);
    let mut done = fw;
    for (at, n, through_dram) in page_done {
        let b = n * ss as u64;
        let in_dram = if through_dram { at } else { ctx.dram(at, 2 * b) };
        done = done.max(ctx.to_host(in_dram, b));
    }
    // The last page's DMA follows its real landing, which queued work may delay past the forecast.
    let end = ctx.flash_end();
    let tail = done.saturating_since(last_landed);
    ctx.complete_after(end, tail);
    for (k, l) in landed.iter().enumerate() {
        let bytes = want.then(|| out[k * ss..(k + 1) * ss].to_vec());
        shared.hold(slba + k as u64, l.unwrap_or(fw), done, bytes, Some((end, tail)));
    }
    s.done = done;
    Ok(s)
}
