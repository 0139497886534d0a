//! The host's side of a split job: NVMe reads of its pieces and the kernel on the host CPUs.
//!
//! The data of a read is in host memory when it completes; the host then runs the kernel on it for `bytes x
//! CPB_host` cycles spread over all host cores. That work is booked lazily, in single-core slices of one scheduler
//! quantum placed on whichever core is free first, and only up to the next event the Initiator waits for: the
//! device books a command's whole path (driver submission and completion included) when it is submitted, so host
//! computation booked far ahead would hold back the short driver work of later commands, and computation booked
//! on all cores at once would wait for the one core busy with it, where a real kernel interleaves both.

use super::schedule::Piece;
use super::{Initiator, HOST_QUANTUM_NS};
use crate::error::{device_error, invalid, Result};
use crate::kernel::{Chunk, Kernel, Partial};
use nearflash_core::nvme::DataBuf;
use nearflash_core::ext::Time;
use nearflash_core::nvme::{opcode, Completion, Sqe};
use std::collections::{HashMap, VecDeque};

/// Work the host keeps in hand under the dynamic split, in time at its capacity (assumed: about three read
/// latencies, so its reads keep flowing, yet little to wait for at the end).
pub const HOST_LOOKAHEAD_NS: f64 = 1e6;

/// A chunk the host holds: reads not yet completed, compute not yet booked, when its compute ends.
struct HostChunk {
    bytes: u64,
    reads_left: u32,
    cycles_left: f64,
    cpu_done: Time,
}

/// Computation waiting for the host cores.
struct Pending {
    ready: Time,
    cycles: f64,
    instructions: f64,
    chunk: usize,
}

pub(super) struct HostSide<'k> {
    kernel: &'k dyn Kernel,
    cpb: f64,
    ipb: f64,
    cores: u32,
    hz: f64,
    pub(super) pending: VecDeque<(Piece, usize)>,
    pub(super) inflight: HashMap<u16, (u64, usize)>,
    chunks: Vec<HostChunk>,
    backlog: VecDeque<Pending>,
    buf: Vec<u8>,
    /// When the booked host computation ends.
    pub(super) cpu_done: Time,
    /// Input bytes the host read.
    pub(super) bytes: u64,
    /// Input bytes per ns the host can process: its cores at the kernel's CPB, within the link.
    capacity: f64,
}

impl<'k> HostSide<'k> {
    pub(super) fn new(kernel: &'k dyn Kernel, cpb: f64, ipb: f64, ini: &Initiator<'_>) -> Self {
        Self {
            kernel,
            cpb,
            ipb,
            cores: ini.dev.config().host.cpu_cores.0 as u32,
            hz: ini.dev.config().host.cpu_freq.0,
            pending: VecDeque::new(),
            inflight: HashMap::new(),
            chunks: Vec::new(),
            backlog: VecDeque::new(),
            buf: Vec::new(),
            cpu_done: ini.dev.now(),
            bytes: 0,
            capacity: (ini.dev.config().host.cpu_cores.0 as f64 * ini.dev.config().host.cpu_freq.0 / cpb.max(1e-9))
                .min(ini.dev.config().link_bandwidth().0)
                * 1e-9,
        }
    }

    /// Takes a chunk of pieces to read and process.
    pub(super) fn take(&mut self, chunk: Vec<Piece>, lba_bytes: u64) {
        let id = self.chunks.len();
        let bytes: u64 = chunk.iter().map(|p| u64::from(p.nlb) * lba_bytes).sum();
        self.chunks.push(HostChunk { bytes, reads_left: chunk.len() as u32, cycles_left: bytes as f64 * self.cpb, cpu_done: Time::ZERO });
        self.pending.extend(chunk.into_iter().map(|p| (p, id)));
    }

    fn finished(&self, c: &HostChunk, now: Time) -> bool {
        c.reads_left == 0 && c.cycles_left <= 0.0 && c.cpu_done <= now
    }

    /// Chunks the host has not finished at `now`.
    pub(super) fn unfinished_chunks(&self, now: Time) -> usize {
        self.chunks.iter().filter(|c| !self.finished(c, now)).count()
    }

    /// Bytes of the chunks the host has not finished at `now`.
    pub(super) fn unfinished_bytes(&self, now: Time) -> u64 {
        self.chunks.iter().filter(|c| !self.finished(c, now)).map(|c| c.bytes).sum()
    }

    /// Input bytes per ns the host can process (its cores at the kernel's CPB, within the link): the Initiator
    /// knows its own machine, as the static split does.
    pub(super) fn rate(&self) -> f64 {
        self.capacity
    }

    /// Seconds of host-core time per cycle of work spread over all cores.
    fn ns_per_cycle(&self) -> f64 {
        1e9 / (self.hz * f64::from(self.cores.max(1)))
    }

    /// When a chunk's computation is expected to end: `None` while some of its reads are outstanding.
    fn expected_done(&self, id: usize, now: Time) -> Option<Time> {
        let c = &self.chunks[id];
        if c.reads_left > 0 {
            return None;
        }
        if c.cycles_left <= 0.0 {
            return Some(c.cpu_done);
        }
        let ahead: f64 = self.backlog.iter().filter(|p| p.chunk <= id).map(|p| p.cycles).sum();
        Some(self.cpu_done.max(now) + (ahead * self.ns_per_cycle()) as u64)
    }

    /// When the host wants another chunk: now while it holds less than [`HOST_LOOKAHEAD_NS`] of work at its
    /// capacity (or nothing), else when its oldest chunk is expected to finish (`None` while its reads are out).
    pub(super) fn wants_at(&self, now: Time) -> Option<Time> {
        let lookahead = (self.capacity * HOST_LOOKAHEAD_NS) as u64;
        if self.unfinished_chunks(now) == 0 || self.unfinished_bytes(now) < lookahead {
            return Some(now);
        }
        let oldest = (0..self.chunks.len()).find(|&i| !self.finished(&self.chunks[i], now))?;
        self.expected_done(oldest, now)
    }

    /// Submits one read; its data is there at submission, so the kernel's Map runs on it now (its time is booked
    /// once the read completes).
    pub(super) fn submit_read(&mut self, ini: &mut Initiator<'_>, p: Piece, id: usize, acc: &mut Partial) -> Result<()> {
        let bytes = u64::from(p.nlb) * ini.dev.lba_bytes();
        self.buf.resize(bytes as usize, 0);
        let cid = ini.dev.next_cid(ini.qid);
        ini.dev.submit(ini.qid, Sqe::rw(opcode::READ, cid, p.slba, p.nlb), DataBuf::FromDevice(&mut self.buf))?;
        let partial = self.kernel.map(Chunk::new(p.first_page, &self.buf))?;
        self.kernel.merge(acc, partial)?;
        self.inflight.insert(cid, (bytes, id));
        self.bytes += bytes;
        Ok(())
    }

    /// Whether a completion is one of the host's reads; if so, queues the computation on its data.
    pub(super) fn complete_read(&mut self, c: &Completion) -> Result<bool> {
        let Some((bytes, id)) = self.inflight.remove(&c.cqe.cid) else { return Ok(false) };
        if !c.cqe.status().is_success() {
            return Err(device_error("read", c.cqe.status()));
        }
        let b = bytes as f64;
        self.chunks[id].reads_left -= 1;
        self.backlog.push_back(Pending { ready: c.time, cycles: b * self.cpb, instructions: b * self.ipb, chunk: id });
        Ok(true)
    }

    /// Books queued computation that can start before `until`, as single-core slices of one scheduler quantum
    /// each placed on whichever host core is free first (a work-conserving list schedule around driver work).
    pub(super) fn book_until(&mut self, ini: &mut Initiator<'_>, until: Time) {
        let slice_cycles = HOST_QUANTUM_NS * 1e-9 * self.hz;
        // nothing is booked before the host's clock (what could not start before it was deferred to it)
        let now = ini.dev.now();
        let mut host = ini.dev.host();
        while let Some(p) = self.backlog.front_mut() {
            let cycles = p.cycles.min(slice_cycles);
            let dur = (cycles / self.hz * 1e9).ceil() as u64;
            let ready = p.ready.max(now);
            if host.earliest_core_start(ready, dur) >= until {
                break;
            }
            let instructions = p.instructions * cycles / p.cycles;
            let done = host.compute(ready, cycles, instructions, 1);
            p.cycles -= cycles;
            p.instructions -= instructions;
            let ch = &mut self.chunks[p.chunk];
            ch.cycles_left = (ch.cycles_left - cycles).max(0.0);
            ch.cpu_done = ch.cpu_done.max(done);
            self.cpu_done = self.cpu_done.max(done);
            if p.cycles <= 1e-6 {
                self.backlog.pop_front();
            }
        }
    }

    /// Checks that everything the host took was read and booked.
    pub(super) fn check_done(&self) -> Result<()> {
        if self.pending.is_empty() && self.inflight.is_empty() && self.backlog.is_empty() {
            Ok(())
        } else {
            Err(invalid("the host's share was left unfinished"))
        }
    }
}
