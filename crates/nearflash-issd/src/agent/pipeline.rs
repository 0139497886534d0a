//! One job run by the Agent with the pipelining strategy (paper §3.3, §4.1 stages (a)-(d)), in virtual time, on
//! the data the device stores:
//!
//! 1. The SSD CPUs translate the job's blocks (the FTL's per-block lookup cost, unless `ftl_lookups` is off) and
//!    hand each FMC the flash pages of its channel. A kernel page whose blocks lie in one flash page is mapped by that page's FMC; one split
//!    over flash pages (data not written page-aligned) is mapped by the SSD CPUs, which see unstriped data
//!    (§3.2), at the FMC processor's CPB.
//! 2. (a) Each FMC reads its pages through the FTL and the channel, keeping at most `fmc_read_ahead` pages
//!    requested but not yet mapped (its staging buffers).
//! 3. (b) The FMC maps a page in `bytes x CPB_fmc` cycles of its processor (the stream processor, busy for the
//!    accelerated CPB, when the job asks for it) and really runs the kernel's Map on the bytes.
//! 4. (c) The partial's encoded bytes are written to DRAM and read back by an SSD CPU (two DRAM crossings).
//! 5. (d) An SSD CPU (a controller core; the `issd` preset sizes them as Table 2's) merges it in
//!    `bytes x CPB_ssd_cpu` cycles and really runs the kernel's Reduce.
//!
//! The result's production schedule comes back with it: selecting kernels (scan, grep) stream their rows as the
//! Reduce produces them, in `output_flush` batches; the others produce their (small) result when the last partial
//! is merged. Stage (e), the link, is the RUN command's (see [`super`]).

use super::descriptor::{JobDescriptor, ResultKind};
use super::params::AgentParams;
use crate::costs::KernelCosts;
use crate::kernel::{Chunk, Kernel, KernelSpec};
use nearflash_core::ext::{ExecCtx, Placement, ReadTo, UnitHandle};
use nearflash_core::ext::Time;
use nearflash_core::nvme::Status;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Largest DRAM transfer booked as one piece (a DMA burst sequence; assumed): longer transfers are split so they
/// interleave with the FMCs' small partial writes instead of waiting for a gap as long as themselves.
pub const DRAM_BURST: u64 = 4096;

/// Moves `bytes` through controller DRAM from `ready` in bursts; returns when the last burst is done.
pub fn dram_bursts(ctx: &mut ExecCtx<'_>, ready: Time, bytes: u64) -> Time {
    let mut t = ready;
    let mut left = bytes;
    while left > 0 {
        let n = left.min(DRAM_BURST);
        t = ctx.dram(t, n);
        left -= n;
    }
    t
}

/// Completion status of a job whose kernel rejected the stored data (command specific, vendor range).
pub const KERNEL_FAILED: Status = Status { sct: 1, sc: 0xC0 };

/// The compute units the Agent declared.
#[derive(Debug, Clone, Copy)]
pub struct AgentUnits {
    pub fmc: UnitHandle,
    pub sp: Option<UnitHandle>,
}

/// What a job produced and when.
#[derive(Debug, Clone, Default)]
pub struct JobOutcome {
    /// Encoded output or merged partial.
    pub result: Vec<u8>,
    /// (time the bytes are ready in DRAM, bytes), in time order; sums to `result.len()`.
    pub schedule: Vec<(Time, u64)>,
    /// When the last partial was merged.
    pub done: Time,
    pub stats: JobStats,
}

/// Counters of one job.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct JobStats {
    pub input_bytes: u64,
    /// Kernel pages mapped on FMCs and on the SSD CPUs.
    pub fmc_pages: u64,
    pub cpu_pages: u64,
    pub flash_reads: u64,
    /// Encoded partials shipped to DRAM (alpha x D).
    pub partial_bytes: u64,
    pub result_bytes: u64,
}

impl JobStats {
    /// Measured reduction of the Map stage.
    pub fn alpha(&self) -> f64 {
        ratio(self.partial_bytes, self.input_bytes)
    }
    /// Measured reduction of the Reduce stage.
    pub fn beta(&self) -> f64 {
        ratio(self.result_bytes, self.partial_bytes)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// A run of kernel pages read by one flash read and mapped by one processor.
#[derive(Debug, Clone)]
struct Unit {
    slba: u64,
    nlb: u32,
    /// Index of its first kernel page in the input.
    first_page: u64,
    /// Physical flash page (`None`: split over pages or not on flash, mapped by the SSD CPUs).
    ppn: Option<u64>,
    /// Columnar row groups: the other named columns' pages (slba, channel), read after the first and mapped
    /// with it; a page on another channel reaches this FMC through DRAM.
    more: Vec<(u64, Option<usize>)>,
}

/// Everything a job needs while it runs.
pub struct JobContext<'a> {
    pub job: &'a JobDescriptor,
    pub kernel: &'a dyn Kernel,
    pub costs: KernelCosts,
    pub params: &'a AgentParams,
    pub units: AgentUnits,
}

/// Cuts the input into units and assigns each to a queue: one per channel, plus the SSD CPUs' (last).
/// Errors: why the extents do not fit a columnar job.
fn plan(ctx: &ExecCtx<'_>, job: &JobDescriptor, columns: Option<usize>) -> Result<Vec<VecDeque<Unit>>, String> {
    let geo = ctx.geometry().clone();
    let per = u64::from(job.page_size) / ctx.lba_bytes();
    let mut queues: Vec<VecDeque<Unit>> = vec![VecDeque::new(); geo.channels as usize + 1];
    let cpu = geo.channels as usize;
    let channel_of = |ppn: u64| geo.channel_of_die(geo.die_of_plane(geo.page_addr(ppn).plane)) as usize;
    // the flash page of a kernel page when all its blocks are in one
    let whole_page = |lba: u64| {
        let first = flash_page_of(ctx, lba);
        first.filter(|_| (1..per).all(|i| flash_page_of(ctx, lba + i) == first))
    };
    if let Some(ncol) = columns {
        // columnar: the extents list each named column's pages, column after column; row group g is page g of
        // every column, mapped together by the FMC of its first column's page
        let pages: Vec<u64> =
            job.extents.iter().flat_map(|e| (0..u64::from(e.nlb) / per).map(move |p| e.slba + p * per)).collect();
        if ncol == 0 || !pages.len().is_multiple_of(ncol) {
            return Err(format!("{} pages are not a whole number of row groups of {ncol} columns", pages.len()));
        }
        let groups = pages.len() / ncol;
        for g in 0..groups {
            let ppn = whole_page(pages[g]);
            let q = ppn.map_or(cpu, channel_of);
            let more = (1..ncol).map(|c| pages[c * groups + g]).map(|l| (l, whole_page(l).map(channel_of))).collect();
            let first_page = u64::from(job.first_page) + (g * ncol) as u64;
            queues[q].push_back(Unit { slba: pages[g], nlb: per as u32, first_page, ppn, more });
        }
        return Ok(queues);
    }
    let mut index = u64::from(job.first_page);
    for e in &job.extents {
        for p in 0..u64::from(e.nlb) / per {
            let lba = e.slba + p * per;
            let ppn = whole_page(lba);
            let q = ppn.map_or(cpu, channel_of);
            match queues[q].back_mut() {
                Some(u) if ppn.is_some() && u.ppn == ppn && u.slba + u64::from(u.nlb) == lba => u.nlb += per as u32,
                _ => queues[q].push_back(Unit { slba: lba, nlb: per as u32, first_page: index, ppn, more: Vec::new() }),
            }
            index += 1;
        }
    }
    Ok(queues)
}

/// [`KERNEL_FAILED`], with the kernel's reason in the device's error log.
fn failed(ctx: &mut ExecCtx<'_>, stage: &str, why: impl std::fmt::Display) -> Status {
    ctx.explain(KERNEL_FAILED, None, format!("{stage}: {why}"))
}

/// Runs a job from `start`; errors are the NVMe status the RUN command completes with.
pub fn run_job(ctx: &mut ExecCtx<'_>, jc: &JobContext<'_>, start: Time) -> Result<JobOutcome, Status> {
    let columns = match &jc.job.spec {
        KernelSpec::ColScan(_) | KernelSpec::ColFilterSum(_) => {
            let layout = crate::PageLayout::new(jc.job.page_size as usize).map_err(|e| failed(ctx, "page layout", e))?;
            let k = jc.job.spec.build_columnar(layout).map_err(|e| failed(ctx, jc.job.spec.name(), e))?;
            // every row group of the table, one page per named column: anything else would drop rows silently
            let groups = crate::lineitem::ColumnarLayout::new(k.rows(), layout.page_size(), 1).map_err(|e| failed(ctx, "columnar layout", e))?.groups();
            let pages: u64 = jc.job.extents.iter().map(|e| u64::from(e.nlb)).sum::<u64>() * ctx.lba_bytes() / u64::from(jc.job.page_size);
            if jc.job.first_page != 0 || pages != groups * k.columns().len() as u64 {
                let why = format!("{pages} pages from page {}: a columnar job covers its {groups} row groups x {} columns from page 0", jc.job.first_page, k.columns().len());
                return Err(failed(ctx, jc.job.spec.name(), why));
            }
            Some(k.columns().len())
        }
        _ => None,
    };
    let queues = plan(ctx, jc.job, columns).map_err(|why| failed(ctx, "columnar extents", why))?;
    let cpu_queue = queues.len() - 1;
    let read_ahead = jc.params.fmc_read_ahead as usize;
    let lba_bytes = ctx.lba_bytes();
    let ctrl_cpi = ctx.config().controller.cpi.0;
    let map_instructions = if jc.params.ftl_lookups { ctx.config().ftl.map_instructions.0 } else { 0.0 };
    let mut state: Vec<(VecDeque<Unit>, VecDeque<Time>)> = queues.into_iter().map(|q| (q, VecDeque::new())).collect();
    let mut heap: BinaryHeap<Reverse<(Time, usize)>> =
        state.iter().enumerate().filter(|(_, s)| !s.0.is_empty()).map(|(i, _)| Reverse((start, i))).collect();
    let mut acc = jc.kernel.empty();
    let mut produced: Vec<(Time, u64)> = Vec::new();
    let mut stats = JobStats::default();
    let mut buf = Vec::new();
    let mut last = start;
    while let Some(Reverse((ready, q))) = heap.pop() {
        let Some(unit) = state[q].0.pop_front() else { continue };
        let part = u64::from(unit.nlb) * lba_bytes;
        let bytes = part * (1 + unit.more.len() as u64);
        buf.resize(bytes as usize, 0);
        // The SSD CPUs translate the unit's blocks, then its FMC (or the CPUs) read it.
        let blocks = f64::from(unit.nlb) * (1 + unit.more.len()) as f64;
        let translated = ctx.firmware(ready, map_instructions * blocks);
        // Each FMC sequences its own channel's flash transactions (Sec. 2.2, 3.1): none run on the SSD CPUs.
        let mut read = ctx.flash_read_self_sequenced(translated, unit.slba, unit.nlb, ReadTo::UnitBuffer, &mut buf[..part as usize])?;
        stats.flash_reads += 1;
        for (i, &(lba, channel)) in unit.more.iter().enumerate() {
            let at = part as usize * (i + 1);
            let r = ctx.flash_read_self_sequenced(translated, lba, unit.nlb, ReadTo::UnitBuffer, &mut buf[at..at + part as usize])?;
            // a page of another channel reaches this FMC through DRAM (written by its FMC, read by this one)
            let here = if channel == Some(q) && q != cpu_queue { r.done } else { dram_bursts(ctx, r.done, 2 * part) };
            read.done = read.done.max(here);
            stats.flash_reads += 1;
        }
        stats.input_bytes += bytes;
        let partial = jc.kernel.map(Chunk::new(unit.first_page, &buf)).map_err(|e| failed(ctx, "map", e))?;
        let plen = partial.encoded_len() as u64;
        let cycles = bytes as f64 * jc.costs.cpb_map(jc.job.accelerate && q != cpu_queue);
        let mapped = if q == cpu_queue {
            // unstriped data: the whole page crosses DRAM and an SSD CPU maps it at the processor's CPB
            stats.cpu_pages += u64::from(unit.nlb) * lba_bytes / u64::from(jc.job.page_size);
            let in_dram = dram_bursts(ctx, read.done, 2 * bytes);
            ctx.firmware(in_dram, bytes as f64 * jc.costs.cpb_fmc / ctrl_cpi)
        } else {
            stats.fmc_pages += bytes / u64::from(jc.job.page_size);
            map_on_fmc(ctx, jc, q as u32, read.done, bytes, cycles)
        };
        // (c) partial to DRAM and back to an SSD CPU, (d) Reduce
        let in_dram = ctx.dram(mapped, 2 * plen);
        let reduced = ctx.firmware(in_dram, plen as f64 * jc.costs.cpb_ssd_cpu / ctrl_cpi);
        jc.kernel.merge(&mut acc, partial).map_err(|e| failed(ctx, "reduce", e))?;
        stats.partial_bytes += plen;
        produced.push((reduced, plen));
        last = last.max(reduced);
        // the staging buffer frees when the page is mapped; the next read waits for the oldest buffer
        let (units, inflight) = &mut state[q];
        inflight.push_back(mapped);
        let next = if inflight.len() >= read_ahead { inflight.pop_front().unwrap_or(ready).max(ready) } else { ready };
        if !units.is_empty() {
            heap.push(Reverse((next, q)));
        }
    }
    let result = match jc.job.result {
        ResultKind::Partial => acc.encode(),
        ResultKind::Output => jc.kernel.finish(acc).map_err(|e| failed(ctx, "finish", e))?.encode(),
    };
    stats.result_bytes = result.len() as u64;
    let streams = matches!(jc.job.spec, KernelSpec::Scan(_) | KernelSpec::Grep(_) | KernelSpec::ColScan(_));
    let schedule = if streams {
        stream_schedule(&mut produced, result.len() as u64, jc.params.output_flush as u64)
    } else {
        vec![(last, result.len() as u64)]
    };
    Ok(JobOutcome { result, schedule, done: last, stats })
}

/// (b) on an FMC: the processor sequences the page; with acceleration the stream processor computes alongside.
fn map_on_fmc(ctx: &mut ExecCtx<'_>, jc: &JobContext<'_>, channel: u32, ready: Time, bytes: u64, cycles: f64) -> Time {
    let p = jc.params;
    // the unit's energy per cycle is E_proc / CPI, so cycles x E_proc / CPI = instructions x E_proc
    let done = ctx.compute(ready, jc.units.fmc, channel, cycles);
    let b = bytes as f64;
    match (jc.job.accelerate, jc.units.sp) {
        (true, Some(sp)) => {
            let began = done.saturating_sub_ns(jc.units.fmc.cycles_ns(cycles));
            ctx.compute(began, sp, channel, cycles);
            let s = jc.costs.stream;
            let pj = s.alu * p.e_stream_alu + s.mul * p.e_stream_mul + s.reg * p.e_stream_reg + s.sram * p.e_stream_sram;
            ctx.charge(crate::agent::UNIT_SP, b * pj);
        }
        _ => ctx.charge(crate::agent::UNIT_FMC, b * p.sram_reads_per_byte * p.e_proc_sram),
    }
    done
}

/// Streams `total` result bytes in proportion to the partials as the Reduce merges them, in batches of at least
/// `flush` bytes (the last batch when everything is merged).
fn stream_schedule(produced: &mut [(Time, u64)], total: u64, flush: u64) -> Vec<(Time, u64)> {
    produced.sort_unstable();
    let sum: u64 = produced.iter().map(|p| p.1).sum::<u64>().max(1);
    let (mut out, mut cum, mut sent) = (Vec::new(), 0u64, 0u64);
    for (i, &(t, n)) in produced.iter().enumerate() {
        cum += n;
        let due = (u128::from(total) * u128::from(cum) / u128::from(sum)) as u64;
        if due - sent >= flush || i + 1 == produced.len() {
            let last = if i + 1 == produced.len() { total } else { due };
            out.push((t, last - sent));
            sent = last;
        }
    }
    if out.is_empty() {
        out.push((Time::ZERO, total));
    }
    out
}

/// The physical page holding an LBA's current copy, if it is on flash.
fn flash_page_of(ctx: &ExecCtx<'_>, lba: u64) -> Option<u64> {
    match ctx.placement(lba) {
        Ok(Placement::Flash { addr, .. }) => Some(addr.ppn),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_schedule_flushes_in_batches_and_sums_to_the_result() {
        let mut p: Vec<(Time, u64)> = (0..10).map(|i| (Time::from_ns(100 * (10 - i)), 10)).collect();
        let s = stream_schedule(&mut p, 1000, 300);
        assert_eq!(s.iter().map(|x| x.1).sum::<u64>(), 1000);
        assert!(s.windows(2).all(|w| w[0].0 <= w[1].0));
        assert!(s[..s.len() - 1].iter().all(|x| x.1 >= 300));
        assert_eq!(s.last().unwrap().0, Time::from_ns(1000));
        assert_eq!(stream_schedule(&mut [], 7, 10), vec![(Time::ZERO, 7)]);
    }
}
