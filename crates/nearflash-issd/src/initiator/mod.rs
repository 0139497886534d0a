//! The Initiator: iSSD's host library (paper §3.2, Fig. 5b). It hides the device's FMCs, stream processors and
//! flash parameters behind one call per job, and runs the same job four ways so their answers and times compare:
//!
//! * [`Strategy::InStorage`] (pipelining): LOAD the descriptor, RUN it (the result streams back), FETCH what did not
//!   fit, then the host's stage (f) on the result bytes.
//! * [`Strategy::Conventional`]: NVMe Reads through the device (link and driver stack charged) and the kernel on
//!   the host CPUs, `bytes x CPB_host` cycles on all host cores, as each read completes.
//! * [`Strategy::Static`]: the first `fraction` of the input's pages to the device (its merged partial comes back),
//!   the rest read and mapped by the host, at the same time; the host merges both and finishes.
//! * [`Strategy::Dynamic`]: the input cut into chunks; the device takes the next chunk whenever its last job
//!   completes, the host whenever its CPUs are about to run dry (one chunk's read time ahead).
//!
//! Everything happens in the device's virtual time on one I/O queue; the kernel's Map and Reduce run for real on
//! the bytes the device returns. Times are the host's: from the first submission to the last completion seen
//! (or the last host computation).

mod balance;
mod host;
mod schedule;

pub use schedule::Strategy;

use crate::agent::{AgentParams, Extent, JobDescriptor, ResultKind};
use crate::costs::CostTable;
use crate::error::{device_error, invalid, IssdError, Result};
use crate::kernel::{KernelSpec, Output};
use nearflash_core::nvme::DataBuf;
use nearflash_core::ext::Time;
use nearflash_core::nvme::{opcode, Completion, Sqe, Status};
use nearflash_core::Device;

/// An input on the device: its block runs and how it is paged.
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    pub extents: Vec<Extent>,
    pub page_size: u32,
}

impl Input {
    /// Bytes of the input.
    pub fn bytes(&self, lba_bytes: u64) -> u64 {
        self.extents.iter().map(|e| u64::from(e.nlb)).sum::<u64>() * lba_bytes
    }
}

/// A job: a kernel over an input, mapped on the stream processors or not.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub spec: KernelSpec,
    pub input: Input,
    pub accelerate: bool,
}

/// What a job returned and how long it took.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRun {
    pub output: Output,
    pub input_bytes: u64,
    /// Input bytes processed in storage (the rest on the host).
    pub device_bytes: u64,
    /// Result bytes the device sent back (outputs or partials).
    pub result_bytes: u64,
    /// Jobs the device ran.
    pub device_jobs: u32,
    pub start: Time,
    pub end: Time,
}

impl JobRun {
    pub fn seconds(&self) -> f64 {
        (self.end - self.start) as f64 * 1e-9
    }
    /// Input bytes per second.
    pub fn bandwidth(&self) -> f64 {
        self.input_bytes as f64 / self.seconds().max(1e-12)
    }
}

/// The Agent's vendor opcodes (LOAD, RUN, FETCH).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opcodes {
    pub load: u8,
    pub run: u8,
    pub fetch: u8,
}

impl Default for Opcodes {
    fn default() -> Self {
        Self::of(&AgentParams::default())
    }
}

impl Opcodes {
    pub fn of(p: &AgentParams) -> Self {
        Self { load: p.opcode_load, run: p.opcode_run, fetch: p.opcode_fetch }
    }
}

/// The host library bound to a device and one I/O queue.
pub struct Initiator<'d> {
    pub(crate) dev: &'d mut Device,
    pub(crate) qid: u16,
    /// Commands the queue holds at once.
    pub(crate) depth: u32,
    pub(crate) opcodes: Opcodes,
    pub(crate) costs: CostTable,
}

/// Fewest entries of the Initiator's queue: two device jobs of two commands each, with room for host reads
/// (a queue of N entries holds N - 1 commands).
pub const MIN_QUEUE_DEPTH: u32 = 8;

/// Agent job slot of an in-storage job (partitioned jobs alternate between slots 0 and 1).
const SLOT: u32 = 0;

/// Largest host read: 128 KiB (assumed: Linux's default read-ahead window, the request size of a sequential
/// buffered scan; the MDTS caps it further).
pub const HOST_READ_BYTES: u64 = 128 << 10;

/// Host computation is booked in slices of at most this much time per core (a scheduler quantum, assumed), so
/// it fills the host cores around the driver's short interrupt and submission work instead of waiting for a gap
/// as long as the whole computation.
pub const HOST_QUANTUM_NS: f64 = 100_000.0;

/// Runs `cycles` (and `instructions`, for energy) of host work on `cores` cores from `ready`; returns when done.
pub(crate) fn host_compute(dev: &mut Device, ready: Time, cycles: f64, instructions: f64, cores: u32) -> Time {
    dev.host().compute_sliced(ready, cycles, instructions, cores, HOST_QUANTUM_NS)
}

impl<'d> Initiator<'d> {
    /// Binds to `dev` on I/O queue `qid` (used at its depth if the host created it, else created with the device's
    /// largest queue depth), with the Agent's opcodes and the cost table of the host's kernels.
    pub fn new(dev: &'d mut Device, qid: u16, opcodes: Opcodes, costs: CostTable) -> Result<Self> {
        if qid == 0 {
            return Err(invalid("the Initiator needs an I/O queue (qid >= 1)"));
        }
        // A queue the host already created for it (the SDK owns the ids) is used at its own depth.
        let depth = match dev.queue_depth(qid) {
            Some(d) => d,
            None => {
                let d = dev.config().nvme.max_queue_depth.0.clamp(2, 1024) as u32;
                dev.create_queue_pair(qid, d)?;
                d
            }
        };
        if depth < MIN_QUEUE_DEPTH {
            return Err(invalid(format!("the Initiator needs a queue of at least {MIN_QUEUE_DEPTH} entries; queue {qid} has {depth}")));
        }
        Ok(Self { dev, qid, depth: depth - 1, opcodes, costs })
    }

    pub fn device(&mut self) -> &mut Device {
        self.dev
    }

    fn lba_bytes(&self) -> u64 {
        self.dev.lba_bytes()
    }

    /// Largest host read in blocks ([`HOST_READ_BYTES`] within the MDTS), rounded down to whole `page_size` pages.
    pub(crate) fn max_blocks(&self, page_size: u32) -> u32 {
        let per = (u64::from(page_size) / self.lba_bytes()).max(1) as u32;
        let cap = (HOST_READ_BYTES / self.lba_bytes()) as u32;
        (self.dev.namespace().max_lbas.min(cap) / per).max(1) * per
    }

    /// Writes a paged input at `slba` (NVMe writes, then Flush) and waits until it is on flash; returns the input.
    pub fn write_input(&mut self, slba: u64, data: &[u8], page_size: u32) -> Result<Input> {
        let lba = self.lba_bytes() as usize;
        if data.is_empty() || !data.len().is_multiple_of(lba) || !(page_size as usize).is_multiple_of(lba) || !data.len().is_multiple_of(page_size as usize) {
            return Err(invalid(format!(
                "input of {} B must be whole {page_size} B pages, and pages whole {lba} B blocks",
                data.len()
            )));
        }
        let step = self.dev.namespace().max_lbas as usize * lba;
        let mut inflight = 0;
        for (i, chunk) in data.chunks(step).enumerate() {
            if inflight == self.depth {
                self.reap_ok("write")?;
                inflight -= 1;
            }
            let at = slba + (i * step / lba) as u64;
            let sqe = Sqe::rw(opcode::WRITE, self.dev.next_cid(self.qid), at, (chunk.len() / lba) as u32);
            self.dev.submit(self.qid, sqe, DataBuf::ToDevice(chunk))?;
            inflight += 1;
        }
        for _ in 0..inflight {
            self.reap_ok("write")?;
        }
        let flush = Sqe { opcode: opcode::FLUSH, nsid: 1, ..Sqe::default() };
        let done = self.dev.execute(self.qid, flush, DataBuf::None)?;
        if !done.status.is_success() {
            return Err(self.failed("flush", done.cid, done.status));
        }
        let nlb = u32::try_from(data.len() / lba).map_err(|_| invalid("input larger than 2^32 blocks"))?;
        Ok(Input { extents: vec![Extent { slba, nlb }], page_size })
    }

    /// Waits for the next completion and fails on an error status.
    fn reap_ok(&mut self, what: &str) -> Result<nearflash_core::nvme::Completion> {
        let c = self.dev.wait(self.qid).ok_or_else(|| invalid(format!("{what}: completion lost")))?;
        self.ok(&c, what)?;
        Ok(c)
    }

    /// Fails with the command's status, and the reason the device logged for it, unless `c` succeeded.
    pub(crate) fn ok(&mut self, c: &Completion, what: &str) -> Result<()> {
        match c.cqe.status() {
            s if s.is_success() => Ok(()),
            s => Err(self.failed(what, c.cqe.cid, s)),
        }
    }

    /// The error of command `cid` that completed with `status`, with the reason the device logged for it (read
    /// from the Error Information log, as a host library does).
    fn failed(&mut self, what: &str, cid: u16, status: Status) -> IssdError {
        IssdError::Sim(self.dev.command_error(what, self.qid, cid, status))
    }

    /// Runs a job with a strategy.
    pub fn run(&mut self, job: &Job, strategy: Strategy) -> Result<JobRun> {
        let run = self.run_strategy(job, strategy)?;
        // the host library returns when the job's last computation ends: work booked up to then (the host's
        // lazily booked Map slices) must not overlap the next job
        self.dev.advance_to(run.end);
        Ok(run)
    }

    fn run_strategy(&mut self, job: &Job, strategy: Strategy) -> Result<JobRun> {
        match strategy {
            Strategy::InStorage => self.run_in_storage(job),
            // the host reads pieces in extent order, which for a columnar job is column by column
            _ if matches!(job.spec, KernelSpec::ColScan(_) | KernelSpec::ColFilterSum(_)) => Err(invalid(format!(
                "{} runs in storage only here; its host path is kernel::columnar::run_columnar over the table",
                job.spec.name()
            ))),
            other => schedule::run_split(self, job, other),
        }
    }

    /// The descriptor of a job (or of one share of it). In-storage results are consumed by the host at its CPB
    /// for the kernel (stage (f)); partials of a partitioned job are merged, which the model leaves uncharged.
    pub(crate) fn descriptor(&self, job: &Job, extents: Vec<Extent>, first_page: u32, result: ResultKind) -> Result<JobDescriptor> {
        let (host_cpb, host_ipb) = match result {
            ResultKind::Output => {
                let c = self.costs.of(&job.spec)?;
                (c.cpb_host as f32, c.ipb_host as f32)
            }
            ResultKind::Partial => (0.0, 0.0),
        };
        Ok(JobDescriptor {
            spec: job.spec.clone(),
            page_size: job.input.page_size,
            extents,
            first_page,
            accelerate: job.accelerate,
            result,
            host_cpb,
            host_ipb,
        })
    }

    /// Submits LOAD of `desc` into Agent slot `slot`; returns its command id.
    pub(crate) fn submit_load(&mut self, desc: &JobDescriptor, slot: u32) -> Result<u16> {
        let bytes = desc.encode();
        let cid = self.dev.next_cid(self.qid);
        let sqe = Sqe { opcode: self.opcodes.load, cid, nsid: 1, cdw10: slot, cdw11: bytes.len() as u32, ..Sqe::default() };
        self.dev.submit(self.qid, sqe, DataBuf::ToDevice(&bytes))?;
        Ok(cid)
    }

    /// Submits RUN with a result buffer; the result lands in `out` at submission (the device's functional effects
    /// happen then), its time is the completion's. Returns the command id.
    pub(crate) fn submit_run(&mut self, out: &mut [u8], slot: u32) -> Result<u16> {
        let cid = self.dev.next_cid(self.qid);
        let sqe = Sqe { opcode: self.opcodes.run, cid, nsid: 1, cdw10: slot, ..Sqe::default() };
        self.dev.submit(self.qid, sqe, DataBuf::FromDevice(out))?;
        Ok(cid)
    }

    /// Fetches the rest of a result longer than the RUN buffer (synchronously); appends it to `out`.
    pub(crate) fn fetch_rest(&mut self, out: &mut Vec<u8>, total: usize) -> Result<()> {
        if out.len() >= total {
            out.truncate(total);
            return Ok(());
        }
        let offset = out.len() as u64;
        let mut rest = vec![0u8; total - out.len()];
        let sqe = Sqe {
            opcode: self.opcodes.fetch,
            nsid: 1,
            cdw10: SLOT,
            cdw12: offset as u32,
            cdw13: (offset >> 32) as u32,
            ..Sqe::default()
        };
        let done = self.dev.execute(self.qid, sqe, DataBuf::FromDevice(&mut rest))?;
        if !done.status.is_success() || done.dw0 as usize != rest.len() {
            return Err(match done.status.is_success() {
                true => device_error("fetch", done.status),
                false => self.failed("fetch", done.cid, done.status),
            });
        }
        out.extend_from_slice(&rest);
        Ok(())
    }

    /// Pipelining: the whole job in storage; the host consumes the result as it streams in (booked by RUN), and
    /// any part fetched afterwards.
    fn run_in_storage(&mut self, job: &Job) -> Result<JobRun> {
        let lba = self.lba_bytes();
        let input_bytes = job.input.bytes(lba);
        let start = self.dev.now();
        let desc = self.descriptor(job, job.input.extents.clone(), 0, ResultKind::Output)?;
        self.submit_load(&desc, SLOT)?;
        self.reap_ok("load")?;
        // room for results up to the input's size; a larger one is fetched after
        let mut out = vec![0u8; (input_bytes as usize).saturating_add(1 << 20)];
        self.submit_run(&mut out, SLOT)?;
        let c = self.reap_ok("run")?;
        let total = c.cqe.dw0 as usize;
        let inline = total.min(out.len());
        out.truncate(inline);
        self.fetch_rest(&mut out, total)?;
        let output = Output::decode(&out)?;
        let costs = self.costs.of(&job.spec)?;
        let cores = self.dev.config().host.cpu_cores.0 as u32;
        let fetched = (total - inline) as f64;
        let end = host_compute(self.dev, self.dev.now(), fetched * costs.cpb_host, fetched * costs.ipb_host, cores);
        Ok(JobRun {
            output,
            input_bytes,
            device_bytes: input_bytes,
            result_bytes: total as u64,
            device_jobs: 1,
            start,
            end: end.max(self.dev.now()),
        })
    }
}
