//! The host-side strategies of a job (paper §3.3): conventional, static partitioning and dynamic partitioning, as
//! one event loop over the Initiator's I/O queue. The host's share is NVMe Reads (at most a queue's worth in
//! flight) whose data the host maps as each read completes (`bytes x CPB_host` cycles on all host cores); the
//! device's share is LOAD + RUN of a descriptor returning the merged partial. Events are taken in virtual-time
//! order: a completion on the queue, or the moment the host wants more work (dynamic).
//!
//! The host submits its reads before the device's jobs start: a RUN books its whole job on the device's timelines
//! when submitted, so reads submitted after it only find the gaps it leaves (the device, not the host, would then
//! have priority on the flash channels).
//!
//! Dynamic policy: see [`super::balance`].

use super::balance::{Balancer, Work};
use super::host::HostSide;
use super::{Initiator, Job, JobRun};
use crate::agent::{Extent, ResultKind};
use crate::error::{invalid, Result};
use crate::kernel::Partial;
use nearflash_core::ext::Time;
use std::collections::VecDeque;

/// How a job's input is split between the device and the host.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Strategy {
    /// Pipelining: all in storage.
    InStorage,
    /// All on the host: NVMe reads, host CPUs.
    Conventional,
    /// The first `fraction` of the pages in storage, the rest on the host, both at once.
    Static { fraction: f64 },
    /// Chunks of `chunk_pages` pages to whichever side is free next.
    Dynamic { chunk_pages: u32 },
}

/// Host reads kept in flight at least (assumed: 1 MiB of 128 KiB requests, enough for links up to about 4 GB/s).
/// The link model books each transfer whole, so a deeper queue would book the link far ahead and hold back the
/// small completions of the device's jobs behind host data.
pub const HOST_READS_IN_FLIGHT: usize = 8;
/// Latency a host keeps covered with reads in flight (assumed: a 128 KiB read striped over the channels plus the
/// driver stack takes about 180 us on the Fig. 7 devices, with margin), so a faster link gets a deeper queue.
pub const HOST_READ_LATENCY_S: f64 = 250e-6;

/// Reads in flight for a link of `link_bps`: [`HOST_READS_IN_FLIGHT`], or enough to cover
/// [`HOST_READ_LATENCY_S`] at the link's rate (16 for 8 GB/s).
pub fn host_reads_in_flight(link_bps: f64, read_bytes: u64) -> usize {
    let need = (link_bps * HOST_READ_LATENCY_S / read_bytes.max(1) as f64).ceil();
    HOST_READS_IN_FLIGHT.max(need.min(256.0) as usize)
}

/// A run of whole kernel pages no larger than one command.
#[derive(Debug, Clone, Copy)]
pub(super) struct Piece {
    pub(super) slba: u64,
    pub(super) nlb: u32,
    pub(super) first_page: u64,
}

/// Cuts the input into pieces of at most `max_blocks` blocks, numbering kernel pages in input order.
fn pieces(job: &Job, lba_bytes: u64, max_blocks: u32) -> Vec<Piece> {
    let per = u64::from(job.input.page_size) / lba_bytes;
    let mut out = Vec::new();
    let mut page = 0u64;
    for e in &job.input.extents {
        let mut off = 0u32;
        while off < e.nlb {
            let nlb = max_blocks.min(e.nlb - off);
            out.push(Piece { slba: e.slba + u64::from(off), nlb, first_page: page });
            page += u64::from(nlb) / per;
            off += nlb;
        }
    }
    out
}

/// Cuts pieces into chunks of exactly `pages` kernel pages (the last may be shorter), splitting pieces as needed.
pub(super) fn chunks(pieces: Vec<Piece>, per: u64, pages: u64) -> VecDeque<Vec<Piece>> {
    let mut out = VecDeque::new();
    let (mut cur, mut n) = (Vec::new(), 0u64);
    for mut p in pieces {
        loop {
            let have = u64::from(p.nlb) / per;
            let room = pages - n;
            if have <= room {
                cur.push(p);
                n += have;
                if n == pages {
                    out.push_back(std::mem::take(&mut cur));
                    n = 0;
                }
                break;
            }
            let head = Piece { slba: p.slba, nlb: (room * per) as u32, first_page: p.first_page };
            cur.push(head);
            out.push_back(std::mem::take(&mut cur));
            n = 0;
            p = Piece { slba: p.slba + room * per, nlb: p.nlb - head.nlb, first_page: p.first_page + room };
        }
    }
    if !cur.is_empty() {
        out.push_back(cur);
    }
    out
}

/// A job the device holds: LOAD and RUN submitted back to back (the device executes a queue's commands in
/// order, so RUN needs no round trip to the host after LOAD), and the RUN's result buffer.
pub(super) struct DevJob {
    load: Option<u16>,
    run: u16,
    pub(super) bytes: u64,
    buf: Vec<u8>,
}

/// Runs a job with a host-involving strategy.
pub(super) fn run_split(ini: &mut Initiator<'_>, job: &Job, strategy: Strategy) -> Result<JobRun> {
    let lba = ini.dev.lba_bytes();
    let per = u64::from(job.input.page_size) / lba;
    let all = pieces(job, lba, ini.max_blocks(job.input.page_size));
    let total_pages: u64 = all.iter().map(|p| u64::from(p.nlb) / per).sum();
    let input_bytes = total_pages * per * lba;
    let layout = crate::PageLayout::new(job.input.page_size as usize)?;
    let kernel = job.spec.build(layout)?;
    let costs = ini.costs.of(&job.spec)?;
    let mut host = HostSide::new(kernel.as_ref(), costs.cpb_host, costs.ipb_host, ini);
    let mut min_chunk = 1;
    // (work for the device to take, how many device jobs may be queued, whether the host takes chunks too)
    let (mut queue, dev_depth, dynamic) = match strategy {
        Strategy::InStorage => return Err(invalid("in-storage jobs do not split")),
        Strategy::Conventional => {
            host.take(all, lba);
            (Work::new(Vec::new(), per), 0, false)
        }
        Strategy::Static { fraction } => {
            if !(0.0..=1.0).contains(&fraction) {
                return Err(invalid(format!("static split fraction {fraction} outside [0, 1]")));
            }
            let device_pages = (fraction * total_pages as f64).round() as u64;
            if device_pages == 0 {
                host.take(all, lba);
                (Work::new(Vec::new(), per), 0, false)
            } else {
                let mut c = chunks(all, per, device_pages);
                host.take(c.drain(1..).flatten().collect(), lba);
                (Work::new(c.into_iter().flatten().collect(), per), 1, false)
            }
        }
        Strategy::Dynamic { chunk_pages } => {
            min_chunk = u64::from(chunk_pages);
            if chunk_pages == 0 {
                return Err(invalid("dynamic chunks need at least one page"));
            }
            (Work::new(all, per), 2, true)
        }
    };
    let start = ini.dev.now();
    let reads_in_flight = host_reads_in_flight(ini.dev.config().link_bandwidth().0, u64::from(ini.max_blocks(job.input.page_size)) * lba);
    let mut acc = kernel.empty();
    let mut dev: VecDeque<DevJob> = VecDeque::new();
    let (mut end, mut device_bytes, mut result_bytes, mut device_jobs, mut loads) = (start, 0u64, 0u64, 0u32, 0u32);
    let mut balance = Balancer::new(start, per * lba, min_chunk, ini.dev.config().nand.channels.0);
    loop {
        let now = ini.dev.now();
        if dynamic && host.pending.is_empty() && host.wants_at(now).is_some_and(|t| t <= now) {
            let dev_outstanding: u64 = dev.iter().map(|j| j.bytes).sum();
            if balance.host_takes(now, &host, dev_outstanding, &queue) {
                if let Some(chunk) = queue.next(balance.host_chunk()) {
                    host.take(chunk, lba);
                }
            } else {
                balance.host_stopped = true;
            }
        }
        // the host's reads leave queue slots for the device's jobs (two commands each)
        while host.inflight.len() < reads_in_flight.min(ini.depth as usize - 2 * dev_depth) {
            let Some((piece, id)) = host.pending.pop_front() else { break };
            host.submit_read(ini, piece, id, &mut acc)?;
        }
        if dev.len() < dev_depth {
            let size = if dynamic { balance.device_chunk(&queue, total_pages) } else { queue.pages() };
            if let Some(chunk) = queue.next(size) {
                dev.push_back(submit_share(ini, job, &chunk, lba, loads % 2)?);
                loads += 1;
            }
        }
        let t_cq = ini.dev.next_completion_time(ini.qid);
        let t_want = if dynamic && !balance.host_stopped && host.pending.is_empty() && !queue.is_empty() {
            host.wants_at(now)
        } else {
            None
        };
        let next = match (t_cq, t_want) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        host.book_until(ini, next.unwrap_or(Time::MAX));
        match (t_cq, t_want) {
            (None, None) => break,
            (cq, Some(w)) if cq.is_none_or(|c| w < c) => {
                ini.dev.advance_to(w.max(now + 1));
                continue;
            }
            _ => {}
        }
        let c = ini.dev.wait(ini.qid).ok_or_else(|| invalid("completion lost"))?;
        end = end.max(c.time);
        if let Some(j) = dev.iter_mut().find(|j| j.load == Some(c.cqe.cid)) {
            ini.ok(&c, "load")?;
            j.load = None;
        } else if let Some(i) = dev.iter().position(|j| j.run == c.cqe.cid) {
            ini.ok(&c, "run")?;
            let DevJob { bytes, mut buf, .. } = dev.remove(i).ok_or_else(|| invalid("device job lost"))?;
            let total = c.cqe.dw0 as usize;
            if total > buf.len() {
                return Err(invalid(format!("a device share returned {total} B, more than its {} B buffer", buf.len())));
            }
            buf.truncate(total);
            kernel.merge(&mut acc, Partial::decode(&buf)?)?;
            device_bytes += bytes;
            result_bytes += total as u64;
            device_jobs += 1;
            balance.device_done(c.time, bytes);
        } else if !host.complete_read(&c)? {
            return Err(invalid(format!("unexpected completion of command {}", c.cqe.cid)));
        }
    }
    host.check_done()?;
    let output = kernel.finish(acc)?;
    debug_assert_eq!(device_bytes + host.bytes, input_bytes);
    Ok(JobRun {
        output,
        input_bytes,
        device_bytes,
        result_bytes,
        device_jobs,
        start,
        end: end.max(host.cpu_done),
    })
}

/// LOADs one share for the device into Agent slot `slot` and RUNs it (its merged partial comes back).
fn submit_share(ini: &mut Initiator<'_>, job: &Job, chunk: &[Piece], lba: u64, slot: u32) -> Result<DevJob> {
    let mut extents: Vec<Extent> = Vec::new();
    for p in chunk {
        match extents.last_mut() {
            Some(e) if e.slba + u64::from(e.nlb) == p.slba => e.nlb += p.nlb,
            _ => extents.push(Extent { slba: p.slba, nlb: p.nlb }),
        }
    }
    let first = u32::try_from(chunk[0].first_page).map_err(|_| invalid("more than 2^32 pages"))?;
    let bytes: u64 = chunk.iter().map(|p| u64::from(p.nlb)).sum::<u64>() * lba;
    let desc = ini.descriptor(job, extents, first, ResultKind::Partial)?;
    let load = ini.submit_load(&desc, slot)?;
    let mut buf = vec![0u8; bytes as usize + (1 << 20)];
    let run = ini.submit_run(&mut buf, slot)?;
    Ok(DevJob { load: Some(load), run, bytes, buf })
}
