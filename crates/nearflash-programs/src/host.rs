//! The host library: each command built, submitted on an I/O queue and waited for, so that a program can be
//! loaded and run in a few calls (`load`, `activate`, `create_range_set`, `copy_to_slm`, `write_slm`, `execute`,
//! `read_slm`). Errors a command completes with are returned as its status, never hidden.

use crate::slm::MemoryRange;
use crate::wire::{
    self, Command, ExecuteProgram, LoadProgram, MemoryAccess, MemoryCopy, ProgramActivation, RangeSetManagement,
    SourceRange, PTYPE_EBPF_ELF,
};
use crate::params::HOST_CYCLES_PER_INSTRUCTION;
use crate::program::reads::{ReadLimits, ReadPath, Reads};
use crate::program::Fault;
use nearflash_core::ext::Time;
use nearflash_core::nvme::{opcode, DataBuf, Sqe, Status};
use nearflash_core::{Device, Result, SimError};
use std::collections::HashMap;

/// How a command completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Done {
    pub status: Status,
    pub dw0: u32,
    /// Submission to completion, virtual ns.
    pub latency_ns: u64,
    /// Why the command failed, as the device's error log says (`Device::error_reason`); `None` on success.
    pub reason: Option<String>,
}

impl Done {
    pub fn ok(&self) -> bool {
        self.status.is_success()
    }
}

/// Bytes per Load Program chunk the host sends.
pub const LOAD_CHUNK: usize = 64 * 1024;

/// Submits `c` on `qid` and waits for its completion.
pub fn submit(dev: &mut Device, qid: u16, c: &Command, data: DataBuf<'_>) -> Result<Done> {
    let cid = dev.next_cid(qid);
    let start = dev.now();
    dev.submit(qid, c.encode(cid), data)?;
    loop {
        let Some(done) = dev.wait(qid) else {
            return Err(SimError::InvalidArgument("the completion was lost".into()));
        };
        if done.cqe.cid == cid {
            let status = done.cqe.status();
            let reason = if status.is_success() { None } else { dev.error_reason(qid, cid) };
            return Ok(Done { status, dw0: done.cqe.dw0, latency_ns: done.time.saturating_since(start), reason });
        }
    }
}

/// Downloads an eBPF ELF object into slot `pind`, in chunks; stops at the first chunk that fails.
pub fn load(dev: &mut Device, qid: u16, pind: u16, elf: &[u8]) -> Result<Done> {
    let psize = u32::try_from(elf.len()).map_err(|_| SimError::InvalidArgument("program larger than 4 GiB".into()))?;
    if elf.is_empty() {
        return Err(SimError::InvalidArgument("program is empty".into()));
    }
    let mut total = 0;
    for (i, chunk) in elf.chunks(LOAD_CHUNK).enumerate() {
        let l = LoadProgram {
            pind,
            ptype: PTYPE_EBPF_ELF,
            unload: false,
            pit: 0,
            psize,
            pid: 0,
            numb: chunk.len() as u32,
            loff: (i * LOAD_CHUNK) as u32,
        };
        let d = submit(dev, qid, &Command::Load(l), DataBuf::ToDevice(chunk))?;
        total += d.latency_ns;
        if !d.ok() {
            return Ok(Done { latency_ns: total, ..d });
        }
    }
    Ok(Done { status: Status::SUCCESS, dw0: 0, latency_ns: total, reason: None })
}

pub fn unload(dev: &mut Device, qid: u16, pind: u16) -> Result<Done> {
    let l = LoadProgram { pind, ptype: 0, unload: true, pit: 0, psize: 0, pid: 0, numb: 0, loff: 0 };
    submit(dev, qid, &Command::Load(l), DataBuf::None)
}

pub fn activate(dev: &mut Device, qid: u16, pind: u16, on: bool) -> Result<Done> {
    submit(dev, qid, &Command::Activation(ProgramActivation { pind, activate: on }), DataBuf::None)
}

/// Creates a range set of `(starting byte, length)` SLM ranges; DW0 of the result is its identifier.
pub fn create_range_set(dev: &mut Device, qid: u16, ranges: &[(u64, u32)]) -> Result<Done> {
    let numr = u8::try_from(ranges.len()).map_err(|_| SimError::InvalidArgument("at most 255 ranges".into()))?;
    let bytes = descriptors(ranges);
    submit(dev, qid, &Command::RangeSet(RangeSetManagement::Create { numr }), DataBuf::ToDevice(&bytes))
}

pub fn delete_range_set(dev: &mut Device, qid: u16, rsid: u16) -> Result<Done> {
    submit(dev, qid, &Command::RangeSet(RangeSetManagement::Delete { rsid }), DataBuf::None)
}

fn descriptors(ranges: &[(u64, u32)]) -> Vec<u8> {
    ranges.iter().flat_map(|&(sb, length)| MemoryRange { nsid: wire::nsid::SLM, sb, length }.encode()).collect()
}

/// Memory Copy of `(slba, blocks)` ranges of the NVM namespace into SLM from byte `sdaddr`.
pub fn copy_to_slm(dev: &mut Device, qid: u16, sdaddr: u64, sources: &[(u64, u32)]) -> Result<Done> {
    if sources.is_empty() || sources.len() > 256 {
        return Err(SimError::InvalidArgument(format!("1 to 256 source ranges, got {}", sources.len())));
    }
    let bytes: Vec<u8> = sources
        .iter()
        .flat_map(|&(slba, nlb)| SourceRange { nsid: wire::nsid::NVM, slba, nlb }.encode())
        .collect();
    let c = Command::Copy(MemoryCopy { sdaddr, ranges: sources.len() as u32 });
    submit(dev, qid, &c, DataBuf::ToDevice(&bytes))
}

pub fn write_slm(dev: &mut Device, qid: u16, sb: u64, data: &[u8]) -> Result<Done> {
    let length = u32::try_from(data.len()).map_err(|_| SimError::InvalidArgument("at most 4 GiB per write".into()))?;
    submit(dev, qid, &Command::Write(MemoryAccess { sb, length }), DataBuf::ToDevice(data))
}

pub fn read_slm(dev: &mut Device, qid: u16, sb: u64, out: &mut [u8]) -> Result<Done> {
    let length = u32::try_from(out.len()).map_err(|_| SimError::InvalidArgument("at most 4 GiB per read".into()))?;
    submit(dev, qid, &Command::Read(MemoryAccess { sb, length }), DataBuf::FromDevice(out))
}

/// What to run a program on: a stored range set, or inline `(starting byte, length)` ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ranges {
    Set(u16),
    Inline(Vec<(u64, u32)>),
}

/// Execute Program; `params` follow any inline range descriptors in the data buffer.
pub fn execute(dev: &mut Device, qid: u16, pind: u16, ranges: &Ranges, params: &[u8], cparams: (u64, u64)) -> Result<Done> {
    execute_reading(dev, qid, pind, ranges, &[], params, cparams)
}

/// Execute Program with `flash`, the `(first LBA, blocks)` of the NVM namespace the program may read
/// (`program::reads`), as inline range descriptors after the SLM ones (a stored set names its own).
pub fn execute_reading(dev: &mut Device, qid: u16, pind: u16, ranges: &Ranges, flash: &[(u64, u64)], params: &[u8], cparams: (u64, u64)) -> Result<Done> {
    let lba = dev.lba_bytes();
    let (rsid, numr, mut payload) = match ranges {
        Ranges::Set(_) if !flash.is_empty() => {
            return Err(SimError::InvalidArgument("flash ranges go inline: with a stored range set, put them in the set".into()));
        }
        Ranges::Set(id) => (*id, 0, Vec::new()),
        Ranges::Inline(r) => (0, (r.len() + flash.len()) as u32, descriptors(r)),
    };
    for (i, &(slba, nlb)) in flash.iter().enumerate() {
        let bytes = nlb.checked_mul(lba).and_then(|b| u32::try_from(b).ok());
        let (Some(length), Some(sb)) = (bytes, slba.checked_mul(lba)) else {
            return Err(SimError::InvalidArgument(format!("flash[{i}]: {nlb} blocks from LBA {slba}: a range holds at most 4 GiB; split it")));
        };
        payload.extend_from_slice(&MemoryRange { nsid: wire::nsid::NVM, sb, length }.encode());
    }
    payload.extend_from_slice(params);
    let dlen = u32::try_from(payload.len()).map_err(|_| SimError::InvalidArgument("parameters too large".into()))?;
    let e = ExecuteProgram { pind, rsid, numr, dlen, cparam1: cparams.0, cparam2: cparams.1 };
    let data = if payload.is_empty() { DataBuf::None } else { DataBuf::ToDevice(&payload) };
    submit(dev, qid, &Command::Execute(e), data)
}

/// The same program run on the host: the data read with ordinary Reads, the program's counted instructions charged
/// to one host core (`HOST_CYCLES_PER_INSTRUCTION`, the preset's host clock and energy per instruction).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRun {
    pub result: std::result::Result<u64, crate::program::Fault>,
    pub instructions: u64,
    pub latency_ns: u64,
    pub bytes_read: u64,
    /// The output ranges after the run.
    pub outputs: Vec<Vec<u8>>,
}

/// Most bytes the host path holds at once, sources and outputs together: 1 GiB (assumed: the working set of a
/// comparison run; the device path's ranges live in SLM, 64 MiB by default). Larger requests are refused before
/// anything is read or allocated.
pub const HOST_RUN_MAX_BYTES: u64 = 1 << 30;

/// Checks `host_run`'s sources (within the namespace) and sizes ([`HOST_RUN_MAX_BYTES`]) before anything is read
/// or allocated.
pub fn check_host_run(dev: &Device, sources: &[(u64, u32)], outputs: &[usize]) -> Result<()> {
    let (lba, lbas) = (dev.lba_bytes(), dev.namespace().lbas);
    let mut total = 0u64;
    for (i, &(slba, n)) in sources.iter().enumerate() {
        if n == 0 || slba.checked_add(u64::from(n)).is_none_or(|end| end > lbas) {
            let why = format!("sources[{i}]: {n} blocks from LBA {slba}: expected 1 or more blocks within the namespace's {lbas}");
            return Err(SimError::InvalidArgument(why));
        }
        total += u64::from(n) * lba;
    }
    let total = outputs.iter().fold(total, |t, &n| t.saturating_add(n as u64));
    if total > HOST_RUN_MAX_BYTES {
        let why = format!("sources and outputs take {total} bytes: the host path holds at most {HOST_RUN_MAX_BYTES}");
        return Err(SimError::InvalidArgument(why));
    }
    Ok(())
}

/// A zeroed buffer of `n` bytes, or an error naming `what` where the host cannot give the memory (never an abort).
fn zeroed(n: usize, what: &str) -> Result<Vec<u8>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| SimError::InvalidArgument(format!("{what}: {n} bytes cannot be allocated on this host")))?;
    v.resize(n, 0);
    Ok(v)
}

/// Reads `sources` (`(slba, blocks)`, one memory range each, cut to `lengths[i]` bytes where given) and runs
/// `program` over them and zeroed output ranges of `outputs` bytes (mapped after the sources) on the host. Sources
/// past the namespace and more than [`HOST_RUN_MAX_BYTES`] in all are refused before anything is read.
#[allow(clippy::too_many_arguments)]
pub fn host_run(
    dev: &mut Device,
    qid: u16,
    program: &crate::program::Program,
    sources: &[(u64, u32)],
    lengths: Option<&[u64]>,
    outputs: &[usize],
    params: &[u8],
    cparams: (u64, u64),
    budget: u64,
) -> Result<HostRun> {
    check_host_run(dev, sources, outputs)?;
    let start = dev.now();
    let lba = dev.lba_bytes();
    let max = dev.namespace().max_lbas.max(1);
    let mut bufs: Vec<Vec<u8>> = sources.iter().enumerate().map(|(i, &(_, n))| zeroed((u64::from(n) * lba) as usize, &format!("sources[{i}]"))).collect::<Result<_>>()?;
    let mut last = start;
    const IN_FLIGHT: usize = 16;
    let mut chunks = Vec::new();
    for (i, &(slba, n)) in sources.iter().enumerate() {
        let mut at = 0u32;
        while at < n {
            let k = (n - at).min(max);
            chunks.push((i, slba + u64::from(at), k, at));
            at += k;
        }
    }
    for batch in chunks.chunks(IN_FLIGHT) {
        let mut pending = Vec::new();
        // Split the buffers into the disjoint pieces this batch reads into.
        let mut views: Vec<&mut [u8]> = Vec::new();
        let mut rest: Vec<Option<&mut [u8]>> = bufs.iter_mut().map(|b| Some(b.as_mut_slice())).collect();
        let mut taken = vec![0usize; rest.len()];
        for &(i, _, k, at) in batch {
            let buf = rest[i].take().unwrap_or_default();
            let skip = (u64::from(at) * lba) as usize - taken[i];
            let (_, from) = buf.split_at_mut(skip);
            let (view, after) = from.split_at_mut((u64::from(k) * lba) as usize);
            taken[i] += skip + view.len();
            views.push(view);
            rest[i] = Some(after);
        }
        for (&(_, slba, k, _), view) in batch.iter().zip(views) {
            let cid = dev.next_cid(qid);
            dev.submit(qid, Sqe::rw(opcode::READ, cid, slba, k), DataBuf::FromDevice(view))?;
            pending.push(cid);
        }
        while !pending.is_empty() {
            let Some(c) = dev.wait(qid) else { return Err(SimError::InvalidArgument("a read completion was lost".into())) };
            if !c.cqe.status().is_success() {
                return Err(SimError::InvalidArgument(format!("host read failed: {}", c.cqe.status().name())));
            }
            pending.retain(|&p| p != c.cqe.cid);
            last = last.max(c.time);
        }
    }
    if let Some(l) = lengths {
        if l.len() != bufs.len() || l.iter().zip(&bufs).any(|(&n, b)| n > b.len() as u64) {
            return Err(SimError::InvalidArgument("lengths must give one length per source, within its blocks".into()));
        }
    }
    let bytes_read = bufs.iter().map(|b| b.len() as u64).sum();
    let mut outs: Vec<Vec<u8>> = outputs.iter().enumerate().map(|(i, &n)| zeroed(n, &format!("outputs[{i}]"))).collect::<Result<_>>()?;
    let mut views: Vec<&mut [u8]> = bufs
        .iter_mut()
        .enumerate()
        .map(|(i, b)| {
            let n = lengths.map_or(b.len(), |l| l[i] as usize);
            &mut b[..n]
        })
        .chain(outs.iter_mut().map(|o| o.as_mut_slice()))
        .collect();
    let run = program.run(&mut views, params, cparams, budget);
    let insns = run.instructions as f64;
    let done = dev.host().compute(last, insns * HOST_CYCLES_PER_INSTRUCTION.0, insns, 1);
    dev.advance_to(done);
    Ok(HostRun { result: run.result, instructions: run.instructions, latency_ns: done - start, bytes_read, outputs: outs })
}

/// Host instructions of a read served from the host's page cache (charged on one host core at
/// `HOST_CYCLES_PER_INSTRUCTION`).
pub const HOST_CACHE_HIT_INSTRUCTIONS: (f64, &str) = (
    5000.0,
    "assumed: a pread() served from the page cache (syscall entry and exit, a page-cache lookup, a 4 KiB copy), ~0.7 us at 3.4 GHz and 0.5 cycles per instruction",
);

/// Blocks the host holds in its page cache (block -> bytes).
pub type HostCache = HashMap<u64, Vec<u8>>;

/// Fills a host page cache with `blocks` (ordinary Reads, one block each); fails on a read that fails.
pub fn warm_cache(dev: &mut Device, qid: u16, blocks: &[u64]) -> Result<HostCache> {
    let lba = dev.lba_bytes() as usize;
    let mut cache = HostCache::new();
    for &b in blocks {
        let mut page = vec![0u8; lba];
        let d = dev.execute(qid, Sqe::rw(opcode::READ, 0, b, 1), DataBuf::FromDevice(&mut page))?;
        if !d.status.is_success() {
            return Err(SimError::InvalidArgument(format!("blocks[{b}]: the read failed: {}", d.status.name())));
        }
        cache.insert(b, page);
    }
    Ok(cache)
}

/// A program's reads on the host path: each one Read command through the kernel stack (one round trip per read,
/// as a B-tree walk in the host does), or a page-cache hit where every block is in `cache`; the program's
/// instructions on one host core.
pub struct HostReads<'d> {
    pub dev: &'d mut Device,
    pub qid: u16,
    pub cache: &'d HostCache,
    /// Reads served from the cache.
    pub hits: u64,
}

impl ReadPath for HostReads<'_> {
    fn lba_bytes(&self) -> u64 {
        self.dev.lba_bytes()
    }

    fn compute(&mut self, ready: Time, instructions: u64) -> Time {
        let n = instructions as f64;
        self.dev.host().compute(ready, n * HOST_CYCLES_PER_INSTRUCTION.0, n, 1)
    }

    fn read(&mut self, ready: Time, slba: u64, nlb: u32, out: &mut [u8]) -> std::result::Result<(Time, Option<u32>), Fault> {
        let lba = self.dev.lba_bytes() as usize;
        if (slba..slba + u64::from(nlb)).all(|b| self.cache.contains_key(&b)) {
            for (i, chunk) in out.chunks_mut(lba).enumerate() {
                chunk.copy_from_slice(&self.cache[&(slba + i as u64)]);
            }
            self.hits += 1;
            let n = HOST_CACHE_HIT_INSTRUCTIONS.0;
            return Ok((self.dev.host().compute(ready, n * HOST_CYCLES_PER_INSTRUCTION.0, n, 1), Some(0)));
        }
        self.dev.advance_to(ready);
        let d = self
            .dev
            .execute(self.qid, Sqe::rw(opcode::READ, 0, slba, nlb), DataBuf::FromDevice(out))
            .map_err(|e| Fault::Other(format!("host read of LBAs {slba} + {nlb}: {e}")))?;
        let done = d.completed_at;
        match d.status {
            s if s.is_success() => Ok((done, Some(0))),
            Status::UNRECOVERED_READ_ERROR => {
                out.fill(0);
                Ok((done, None))
            }
            s => Err(Fault::Other(format!("host read of LBAs {slba} + {nlb} failed: {}", s.name()))),
        }
    }
}

/// One program run on the host path with reads ([`host_runs_reading`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostReadRun {
    pub result: std::result::Result<u64, Fault>,
    pub instructions: u64,
    pub latency_ns: u64,
    pub reads: u64,
    pub cache_hits: u64,
}

/// Runs `program` once per `(params, cparams)` of `runs`, one after another, on the host path: its reads of the
/// blocks `limits.extents` names through [`HostReads`] (with `cache`), its instructions on a host core. The rules
/// of the reads (ranges, budget, sizes) are those in storage.
pub fn host_runs_reading(
    dev: &mut Device,
    qid: u16,
    program: &crate::program::Program,
    limits: &ReadLimits,
    cache: &HostCache,
    runs: &[(Vec<u8>, (u64, u64))],
    budget: u64,
) -> Result<Vec<HostReadRun>> {
    let lbas = dev.namespace().lbas;
    if let Some(&(s, n)) = limits.extents.iter().find(|&&(s, n)| n == 0 || s.checked_add(n).is_none_or(|e| e > lbas)) {
        return Err(SimError::InvalidArgument(format!("flash range ({s}, {n}): expected 1 or more blocks within the namespace's {lbas}")));
    }
    let mut out = Vec::with_capacity(runs.len());
    for (params, cparams) in runs {
        let (start, lba_bytes) = (dev.now(), dev.lba_bytes());
        let path = HostReads { dev: &mut *dev, qid, cache, hits: 0 };
        let mut reads = Reads::new(path, limits.clone(), start);
        let run = program.run_with(&mut [], params, *cparams, budget, (lba_bytes, &limits.extents), Some(&mut reads));
        let done = reads.finish(run.instructions);
        let (n, hits) = (reads.stats.reads, reads.path.hits);
        dev.advance_to(done);
        out.push(HostReadRun { result: run.result, instructions: run.instructions, latency_ns: done - start, reads: n, cache_hits: hits });
    }
    Ok(out)
}
