//! Dynamic partitioning (paper §3.3, "dynamic load-balancing"): the input is handed out in chunks, in input
//! order, to whichever side is free next.
//!
//! * The device takes a chunk whenever it holds fewer than two jobs (one running, the next queued in the other
//!   Agent slot), guided: a quarter of what remains but at least `chunk_pages` and four pages per channel (large
//!   chunks keep the per-job overhead, a pipeline fill and drain of some hundred microseconds, small, and every
//!   FMC gets pages).
//! * The host takes `chunk_pages` at a time while it holds less than a millisecond of work (at its own capacity,
//!   which the Initiator knows: cores x clock / CPB_host within the link), but only while that is expected to
//!   shorten the job: the later of the host finishing the chunk and the device finishing the rest (at the
//!   device's rate measured so far) must come before the device alone would finish it all. Once it would not,
//!   the host takes no more (the slower side must not end last). Before the device's first job completes, its
//!   rate is unknown and the lookahead alone bounds the host.
//! * The device's first chunk is a sixteenth of the input (its rate is measured sooner).

use super::host::HostSide;
use super::schedule::{chunks, Piece};
use nearflash_core::ext::Time;
use std::collections::VecDeque;

/// Device chunks take this fraction of the remaining pages.
const GUIDED_DIVISOR: u64 = 4;

/// The work not yet handed out, cut into chunks on demand.
pub(super) struct Work {
    rest: VecDeque<Piece>,
    pages: u64,
    per: u64,
}

impl Work {
    pub(super) fn new(pieces: Vec<Piece>, per: u64) -> Self {
        let pages = pieces.iter().map(|p| u64::from(p.nlb) / per).sum();
        Self { rest: pieces.into(), pages, per }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.pages == 0
    }

    /// Kernel pages left.
    pub(super) fn pages(&self) -> u64 {
        self.pages
    }

    /// The next `pages` pages (fewer at the end).
    pub(super) fn next(&mut self, pages: u64) -> Option<Vec<Piece>> {
        if self.pages == 0 {
            return None;
        }
        let mut c = chunks(self.rest.drain(..).collect(), self.per, pages.clamp(1, self.pages));
        let first = c.pop_front()?;
        self.rest = c.into_iter().flatten().collect();
        self.pages -= first.iter().map(|p| u64::from(p.nlb) / self.per).sum::<u64>();
        Some(first)
    }
}

/// The dynamic split's decisions and the rates they rest on.
pub(super) struct Balancer {
    start: Time,
    page_bytes: u64,
    min_chunk: u64,
    device_min: u64,
    dev_bytes: u64,
    dev_last: Time,
    /// Set once the host stopped taking chunks.
    pub(super) host_stopped: bool,
}

impl Balancer {
    pub(super) fn new(start: Time, page_bytes: u64, min_chunk: u64, channels: u64) -> Self {
        let min_chunk = min_chunk.max(1);
        Self { start, page_bytes, min_chunk, device_min: min_chunk.max(4 * channels), dev_bytes: 0, dev_last: start, host_stopped: false }
    }

    /// A device job of `bytes` completed at `t`.
    pub(super) fn device_done(&mut self, t: Time, bytes: u64) {
        self.dev_bytes += bytes;
        self.dev_last = self.dev_last.max(t);
    }

    /// Pages of the device's next chunk.
    pub(super) fn device_chunk(&self, work: &Work, total_pages: u64) -> u64 {
        let divisor = if self.dev_bytes == 0 { GUIDED_DIVISOR * 4 } else { GUIDED_DIVISOR };
        let base = if self.dev_bytes == 0 { total_pages } else { work.pages() };
        (base / divisor).max(self.device_min)
    }

    /// Pages of the host's next chunk.
    pub(super) fn host_chunk(&self) -> u64 {
        self.min_chunk
    }

    /// Whether the host should take the next chunk now.
    pub(super) fn host_takes(&self, now: Time, host: &HostSide<'_>, dev_outstanding: u64, work: &Work) -> bool {
        let dev_rate = if self.dev_bytes > 0 { self.dev_bytes as f64 / (self.dev_last - self.start).max(1) as f64 } else { 0.0 };
        let host_rate = host.rate();
        if dev_rate <= 0.0 || host_rate <= 0.0 {
            return true;
        }
        let chunk = (self.host_chunk().min(work.pages()) * self.page_bytes) as f64;
        let rest = (work.pages() * self.page_bytes) as f64;
        let t = now.as_ns() as f64;
        let host_end = t + (host.unfinished_bytes(now) as f64 + chunk) / host_rate;
        let dev_with = t + (dev_outstanding as f64 + rest - chunk) / dev_rate;
        let dev_alone = t + (dev_outstanding as f64 + rest) / dev_rate;
        host_end.max(dev_with) < dev_alone
    }
}
