//! The host-side strategies of a job (paper §3.3): conventional, static partitioning and dynamic partitioning, as
//! one event loop over the Initiator's I/O queue. The host's share is NVMe Reads (at most a queue's worth in
//! flight) whose data the host maps as each read completes (`bytes x CPB_host` cycles on all host cores); the
//! device's share is LOAD + RUN of a descriptor returning the merged partial. Events are taken in virtual-time
//! order: a completion on the queue, or the moment the host wants more work (dynamic).
//!
//! Dynamic policy: the input is cut into chunks of `chunk_pages` kernel pages handed out in input order. The device
//! takes the next chunk when its previous job completes. The host holds at most two chunks (one whose data it
//! computes on, one it reads), so it takes a new chunk when the older of two finishes computing.

use super::{Initiator, Job, JobRun};
use crate::agent::{Extent, ResultKind};
use crate::error::{device_error, invalid, Result};
use crate::kernel::{Chunk, Kernel, Partial};
use nearflash_core::ctrl::DataBuf;
use nearflash_core::engine::Time;
use nearflash_core::nvme::{opcode, Completion, Sqe};
use std::collections::{HashMap, VecDeque};

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

/// A run of whole kernel pages no larger than one command.
#[derive(Debug, Clone, Copy)]
struct Piece {
    slba: u64,
    nlb: u32,
    first_page: u64,
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
fn chunks(pieces: Vec<Piece>, per: u64, pages: u64) -> VecDeque<Vec<Piece>> {
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

/// The device's state in the loop.
enum DevState {
    Idle,
    Loading { cid: u16, bytes: u64 },
    Running { cid: u16, bytes: u64, buf: Vec<u8> },
    Off,
}

/// A chunk the host holds: reads still outstanding, and when the host CPUs finish its data.
struct HostChunk {
    reads_left: u32,
    cpu_done: Time,
}

struct HostSide<'k> {
    kernel: &'k dyn Kernel,
    cpb: f64,
    ipb: f64,
    cores: u32,
    pending: VecDeque<(Piece, usize)>,
    inflight: HashMap<u16, (u64, usize)>,
    chunks: Vec<HostChunk>,
    buf: Vec<u8>,
    cpu_done: Time,
    bytes: u64,
}

impl HostSide<'_> {
    fn take(&mut self, chunk: Vec<Piece>) {
        let id = self.chunks.len();
        self.chunks.push(HostChunk { reads_left: chunk.len() as u32, cpu_done: 0 });
        self.pending.extend(chunk.into_iter().map(|p| (p, id)));
    }

    /// Chunks not yet read or computed at `now`.
    fn active(&self, now: Time) -> usize {
        self.chunks.iter().filter(|c| c.reads_left > 0 || c.cpu_done > now).count()
    }

    /// When the host wants another chunk: now if it holds fewer than two, else when the older one's compute ends
    /// (known once its reads are all in); `None` while that is still unknown.
    fn wants_at(&self, now: Time) -> Option<Time> {
        if self.active(now) < 2 {
            return Some(now);
        }
        let oldest = self.chunks.iter().find(|c| c.reads_left > 0 || c.cpu_done > now)?;
        (oldest.reads_left == 0).then_some(oldest.cpu_done)
    }
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
    let mut host = HostSide {
        kernel: kernel.as_ref(),
        cpb: costs.cpb_host,
        ipb: costs.ipb_host,
        cores: ini.dev.config().host.cpu_cores.0 as u32,
        pending: VecDeque::new(),
        inflight: HashMap::new(),
        chunks: Vec::new(),
        buf: Vec::new(),
        cpu_done: ini.dev.now(),
        bytes: 0,
    };
    let (mut queue, mut dev, dynamic) = match strategy {
        Strategy::InStorage => return Err(invalid("in-storage jobs do not split")),
        Strategy::Conventional => {
            host.take(all);
            (VecDeque::new(), DevState::Off, false)
        }
        Strategy::Static { fraction } => {
            if !(0.0..=1.0).contains(&fraction) {
                return Err(invalid(format!("static split fraction {fraction} outside [0, 1]")));
            }
            let mut c = chunks(all, per, ((fraction * total_pages as f64).round() as u64).max(1));
            if fraction > 0.0 {
                let rest: Vec<Piece> = c.drain(1..).flatten().collect();
                host.take(rest);
                (c, DevState::Idle, false)
            } else {
                host.take(c.into_iter().flatten().collect());
                (VecDeque::new(), DevState::Off, false)
            }
        }
        Strategy::Dynamic { chunk_pages } => {
            if chunk_pages == 0 {
                return Err(invalid("dynamic chunks need at least one page"));
            }
            (chunks(all, per, u64::from(chunk_pages)), DevState::Idle, true)
        }
    };
    let start = ini.dev.now();
    let mut acc = kernel.empty();
    let (mut end, mut device_bytes, mut result_bytes, mut device_jobs) = (start, 0u64, 0u64, 0u32);
    loop {
        let now = ini.dev.now();
        if matches!(dev, DevState::Idle) {
            dev = match queue.pop_front() {
                Some(chunk) => load_share(ini, job, &chunk, per, lba)?,
                None => DevState::Off,
            };
        }
        if dynamic && host.pending.is_empty() && host.wants_at(now).is_some_and(|t| t <= now) {
            if let Some(chunk) = queue.pop_front() {
                host.take(chunk);
            }
        }
        let dev_slots = u32::from(matches!(dev, DevState::Loading { .. } | DevState::Running { .. }));
        while host.inflight.len() as u32 + dev_slots < ini.depth {
            let Some((piece, id)) = host.pending.pop_front() else { break };
            submit_host_read(ini, &mut host, piece, id, &mut acc)?;
        }
        let t_cq = ini.dev.next_completion_time(ini.qid);
        let t_want = if dynamic && host.pending.is_empty() && !queue.is_empty() { host.wants_at(now) } else { None };
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
        dev = match dev {
            DevState::Loading { cid, bytes } if cid == c.cqe.cid => {
                ok(&c, "load")?;
                let mut buf = vec![0u8; bytes as usize + (1 << 20)];
                let cid = ini.submit_run(&mut buf)?;
                DevState::Running { cid, bytes, buf }
            }
            DevState::Running { cid, bytes, mut buf } if cid == c.cqe.cid => {
                ok(&c, "run")?;
                let total = c.cqe.dw0 as usize;
                if total > buf.len() {
                    return Err(invalid(format!("a device share returned {total} B, more than its {} B buffer", buf.len())));
                }
                buf.truncate(total);
                kernel.merge(&mut acc, Partial::decode(&buf)?)?;
                device_bytes += bytes;
                result_bytes += total as u64;
                device_jobs += 1;
                DevState::Idle
            }
            other => {
                complete_host_read(ini, &mut host, &c)?;
                other
            }
        };
    }
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

fn ok(c: &Completion, what: &str) -> Result<()> {
    if c.cqe.status().is_success() {
        Ok(())
    } else {
        Err(device_error(what, c.cqe.status()))
    }
}

/// LOADs one share for the device (its merged partial comes back).
fn load_share(ini: &mut Initiator<'_>, job: &Job, chunk: &[Piece], per: u64, lba: u64) -> Result<DevState> {
    let mut extents: Vec<Extent> = Vec::new();
    for p in chunk {
        match extents.last_mut() {
            Some(e) if e.slba + u64::from(e.nlb) == p.slba => e.nlb += p.nlb,
            _ => extents.push(Extent { slba: p.slba, nlb: p.nlb }),
        }
    }
    let first = u32::try_from(chunk[0].first_page).map_err(|_| invalid("more than 2^32 pages"))?;
    let bytes: u64 = chunk.iter().map(|p| u64::from(p.nlb)).sum::<u64>() * lba;
    debug_assert!(bytes.is_multiple_of(per * lba));
    let desc = ini.descriptor(job, extents, first, ResultKind::Partial)?;
    let cid = ini.submit_load(&desc)?;
    Ok(DevState::Loading { cid, bytes })
}

/// Submits one host read; its data is there at submission, so the host's Map runs on it now (its time is charged
/// when the read completes).
fn submit_host_read(ini: &mut Initiator<'_>, host: &mut HostSide<'_>, p: Piece, id: usize, acc: &mut Partial) -> Result<()> {
    let bytes = u64::from(p.nlb) * ini.dev.lba_bytes();
    host.buf.resize(bytes as usize, 0);
    let cid = ini.dev.next_cid(ini.qid);
    let sqe = Sqe::rw(opcode::READ, cid, p.slba, p.nlb);
    ini.dev.submit(ini.qid, sqe, DataBuf::FromDevice(&mut host.buf))?;
    let partial = host.kernel.map(Chunk::new(p.first_page, &host.buf))?;
    host.kernel.merge(acc, partial)?;
    host.inflight.insert(cid, (bytes, id));
    Ok(())
}

/// A host read completed: the host CPUs process its data.
fn complete_host_read(ini: &mut Initiator<'_>, host: &mut HostSide<'_>, c: &Completion) -> Result<()> {
    let (bytes, id) = host.inflight.remove(&c.cqe.cid).ok_or_else(|| invalid(format!("unexpected completion {}", c.cqe.cid)))?;
    ok(c, "read")?;
    let b = bytes as f64;
    let done = super::host_compute(ini.dev, c.time, b * host.cpb, b * host.ipb, host.cores);
    host.cpu_done = host.cpu_done.max(done);
    host.bytes += bytes;
    let ch = &mut host.chunks[id];
    ch.reads_left -= 1;
    ch.cpu_done = ch.cpu_done.max(done);
    Ok(())
}
