//! Helper functions that let a program read flash (issue 25: pointer-chasing walks such as a B-tree lookup, done
//! in storage without a host round trip per hop, as XRP does from the NVMe driver).
//!
//! The ABI (`examples/programs/nearflash_program.h`), as kernel eBPF calls helpers (`call <id>`, arguments in
//! r1-r5, result in r0):
//!
//! | id | helper | arguments | returns |
//! |----|--------|-----------|---------|
//! | 1 | `nf_read` | lba, offset, dst, len | >= 0: read (the read retries the ECC needed); `NF_EIO`: a page the ECC could not correct (dst zeroed) |
//! | 2 | `nf_read_start` | lba, offset, dst, len | a tag >= 0: the read is in flight (dst holds its bytes once waited for); `NF_EAGAIN`: too many in flight |
//! | 3 | `nf_read_wait` | tag (`NF_WAIT_ALL`: every read in flight) | as `nf_read` for that read; all: the number of reads that failed |
//!
//! A read takes `len` bytes from byte `offset` of the blocks starting at logical block `lba` of the NVM namespace
//! (so a byte range of one block, or a run of blocks): every block must lie in one of the LBA ranges the Execute
//! Program named, else the run stops ([`Fault::ReadOutside`]); each read counts against the run's read budget
//! ([`Fault::ReadBudget`] past it); `dst` must be writable memory of the program (its data, stack or a memory
//! range), else the run stops as for any bad access. `len` 0 or over the largest read: `NF_EINVAL`.
//!
//! [`Reads`] holds these rules, the tags of reads in flight, and the time of the run; *where* the reads and the
//! program's instructions are charged is a [`ReadPath`]: the device's flash path in storage
//! (`firmware::DeviceReads`), or Read commands through the kernel stack on the host path (`host::HostReads`).
//! Time of a run: its instructions in segments between helper calls, each segment starting when the program may go
//! on; a read from when it is issued; `nf_read` and `nf_read_wait` wait for theirs. Reads started together overlap
//! on the flash array (and with the instructions that follow them).

use super::vm::Fault;
use nearflash_core::ext::Time;

/// Helper ids, as the program calls them.
pub const NF_READ: u32 = 1;
pub const NF_READ_START: u32 = 2;
pub const NF_READ_WAIT: u32 = 3;
/// (id, name) of every helper.
pub const HELPERS: [(u32, &str); 3] = [(NF_READ, "nf_read"), (NF_READ_START, "nf_read_start"), (NF_READ_WAIT, "nf_read_wait")];

/// Errors a helper returns to the program (negated errno values, as kernel helpers).
pub const NF_EIO: i64 = -5;
pub const NF_EAGAIN: i64 = -11;
pub const NF_EINVAL: i64 = -22;
/// `nf_read_wait`'s tag for "every read in flight".
pub const NF_WAIT_ALL: u64 = u64::MAX;
/// Reads a program may have in flight at once (assumed: the depth of one NVMe submission queue's worth of
/// firmware read slots; XRP resubmits one read per hop).
pub const MAX_IN_FLIGHT: usize = 32;

/// A helper call, as the program made it (the destination is mapped by the VM).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    Read { lba: u64, offset: u64 },
    Start { lba: u64, offset: u64 },
    Wait { tag: u64 },
}

/// What serves a program's helper calls while it runs (`vm::Program::run_with`).
pub trait FlashIo {
    /// Serves `call` (`dst`: the program's destination bytes for a read, empty for a wait) after `executed`
    /// instructions of the run; returns the helper's result, or a fault that stops the run.
    fn call(&mut self, executed: u64, call: Call, dst: &mut [u8]) -> Result<i64, Fault>;
}

/// Where a run's instructions and reads are charged; times in virtual ns.
pub trait ReadPath {
    fn lba_bytes(&self) -> u64;
    /// Runs `instructions` of the program from `ready`; returns when they are done.
    fn compute(&mut self, ready: Time, instructions: u64) -> Time;
    /// Reads `nlb` blocks from `slba` into `out` from `ready`: when they are in the program's memory, and the
    /// read retries spent (`None`: a page the ECC could not correct; its bytes are zeroes).
    fn read(&mut self, ready: Time, slba: u64, nlb: u32, out: &mut [u8]) -> Result<(Time, Option<u32>), Fault>;
}

/// Limits of one run's reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadLimits {
    /// `(first LBA, blocks)` the Execute Program named.
    pub extents: Vec<(u64, u64)>,
    /// Reads the run may issue.
    pub budget: u64,
    /// Largest read, bytes.
    pub max_bytes: u64,
}

/// What a run's reads did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadStats {
    pub reads: u64,
    pub bytes: u64,
    pub failed: u64,
}

/// One run's reads: the rules, the reads in flight, and the run's time.
pub struct Reads<P> {
    pub path: P,
    limits: ReadLimits,
    /// When the program may go on, and the instructions charged up to then.
    now: Time,
    charged: u64,
    /// (tag, when its data is there, result)
    in_flight: Vec<(u64, Time, i64)>,
    next_tag: u64,
    /// The latest end of any read (the run is over only after every read it issued).
    last_read: Time,
    buf: Vec<u8>,
    pub stats: ReadStats,
}

impl<P: ReadPath> Reads<P> {
    /// A run that starts at `start`.
    pub fn new(path: P, limits: ReadLimits, start: Time) -> Reads<P> {
        Reads { path, limits, now: start, charged: 0, in_flight: Vec::new(), next_tag: 0, last_read: start, buf: Vec::new(), stats: ReadStats::default() }
    }

    /// Charges the instructions run since the last helper call; the program goes on when they are done.
    fn run_until(&mut self, executed: u64) {
        if executed > self.charged {
            self.now = self.path.compute(self.now, executed - self.charged);
            self.charged = executed;
        }
    }

    /// The run ended after `executed` instructions: when its last instruction and every read it issued are done.
    pub fn finish(&mut self, executed: u64) -> Time {
        self.run_until(executed);
        self.now.max(self.last_read)
    }

    /// Checks a read and brings its bytes into `dst`; (when they are there, the helper's result).
    fn issue(&mut self, lba: u64, offset: u64, dst: &mut [u8]) -> Result<(Time, i64), Fault> {
        let len = dst.len() as u64;
        if len == 0 || len > self.limits.max_bytes {
            return Ok((self.now, NF_EINVAL));
        }
        let b = self.path.lba_bytes();
        let outside = || Fault::ReadOutside(format!("{len} bytes at byte {offset} from LBA {lba}: outside the LBA ranges named at Execute"));
        let first = lba.checked_add(offset / b).ok_or_else(outside)?;
        let last = offset.checked_add(len - 1).and_then(|e| lba.checked_add(e / b)).ok_or_else(outside)?;
        if !self.limits.extents.iter().any(|&(s, n)| first >= s && last < s.saturating_add(n)) {
            return Err(outside());
        }
        if self.stats.reads >= self.limits.budget {
            return Err(Fault::ReadBudget(self.limits.budget));
        }
        self.stats.reads += 1;
        self.stats.bytes += len;
        let nlb = last - first + 1;
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        buf.resize((nlb * b) as usize, 0);
        let skip = (offset % b) as usize;
        let (done, retries) = self.path.read(self.now, first, nlb as u32, &mut buf)?;
        dst.copy_from_slice(&buf[skip..skip + dst.len()]);
        self.buf = buf;
        self.last_read = self.last_read.max(done);
        Ok((done, match retries {
            Some(r) => i64::from(r),
            None => {
                self.stats.failed += 1;
                NF_EIO
            }
        }))
    }
}

impl<P: ReadPath> FlashIo for Reads<P> {
    fn call(&mut self, executed: u64, call: Call, dst: &mut [u8]) -> Result<i64, Fault> {
        self.run_until(executed);
        match call {
            Call::Read { lba, offset } => {
                let (done, r) = self.issue(lba, offset, dst)?;
                self.now = self.now.max(done);
                Ok(r)
            }
            Call::Start { lba, offset } => {
                if self.in_flight.len() >= MAX_IN_FLIGHT {
                    return Ok(NF_EAGAIN);
                }
                let (done, r) = self.issue(lba, offset, dst)?;
                if r == NF_EINVAL {
                    return Ok(r);
                }
                let tag = self.next_tag;
                self.next_tag += 1;
                self.in_flight.push((tag, done, r));
                Ok(tag as i64)
            }
            Call::Wait { tag: NF_WAIT_ALL } => {
                let failed = self.in_flight.iter().filter(|f| f.2 < 0).count() as i64;
                self.now = self.in_flight.drain(..).fold(self.now, |t, f| t.max(f.1));
                Ok(failed)
            }
            Call::Wait { tag } => match self.in_flight.iter().position(|f| f.0 == tag) {
                Some(i) => {
                    let (_, done, r) = self.in_flight.swap_remove(i);
                    self.now = self.now.max(done);
                    Ok(r)
                }
                None => Ok(NF_EINVAL),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks of 512 bytes holding their LBA in every byte; block 7 unreadable; 1 ns per instruction, each read
    /// 100 ns after it is issued.
    struct Fake;

    impl ReadPath for Fake {
        fn lba_bytes(&self) -> u64 {
            512
        }
        fn compute(&mut self, ready: Time, instructions: u64) -> Time {
            ready + instructions
        }
        fn read(&mut self, ready: Time, slba: u64, nlb: u32, out: &mut [u8]) -> Result<(Time, Option<u32>), Fault> {
            for (i, b) in out.chunks_mut(512).enumerate() {
                b.fill((slba + i as u64) as u8);
            }
            let bad = (slba..slba + u64::from(nlb)).contains(&7);
            if bad {
                out.fill(0);
            }
            Ok((ready + 100, if bad { None } else { Some(0) }))
        }
    }

    fn reads(budget: u64) -> Reads<Fake> {
        Reads::new(Fake, ReadLimits { extents: vec![(4, 8), (100, 1)], budget, max_bytes: 4096 }, Time::from_ns(1000))
    }

    #[test]
    fn a_read_takes_its_bytes_from_the_named_blocks_and_waits_for_them() {
        let mut r = reads(10);
        let mut dst = [0u8; 600];
        assert_eq!(r.call(10, Call::Read { lba: 4, offset: 500 }, &mut dst), Ok(0));
        let block = |r: std::ops::Range<usize>, v: u8| dst[r].iter().all(|&b| b == v);
        assert!(block(0..12, 4) && block(12..524, 5) && block(524..600, 6), "bytes 500..1100 of blocks 4-6");
        assert_eq!(r.finish(15), Time::from_ns(1000 + 10 + 100 + 5), "instructions, then the read, then the rest");
        assert_eq!(r.stats, ReadStats { reads: 1, bytes: 600, failed: 0 });
    }

    #[test]
    fn reads_started_together_overlap_and_an_unreadable_page_is_an_error_the_program_sees() {
        let mut r = reads(10);
        let (mut a, mut b) = ([0u8; 8], [0u8; 8]);
        assert_eq!(r.call(0, Call::Start { lba: 5, offset: 0 }, &mut a), Ok(0));
        assert_eq!(r.call(0, Call::Start { lba: 7, offset: 0 }, &mut b), Ok(1));
        assert_eq!(r.call(0, Call::Wait { tag: NF_WAIT_ALL }, &mut []), Ok(1), "one of the two failed");
        assert_eq!((a, b), ([5; 8], [0; 8]));
        assert_eq!(r.finish(0), Time::from_ns(1100), "both reads in the same 100 ns");
        assert_eq!(r.call(0, Call::Read { lba: 7, offset: 8 }, &mut a), Ok(NF_EIO));
        assert_eq!(r.call(0, Call::Wait { tag: 9 }, &mut []), Ok(NF_EINVAL), "no such read");
        assert_eq!(r.call(0, Call::Read { lba: 5, offset: 0 }, &mut []), Ok(NF_EINVAL), "empty");
        assert_eq!(r.call(0, Call::Read { lba: 5, offset: 0 }, &mut [0u8; 5000]), Ok(NF_EINVAL), "over the largest read");
    }

    #[test]
    fn reads_outside_the_ranges_or_past_the_budget_stop_the_run() {
        let mut r = reads(2);
        let mut d = [0u8; 16];
        for (lba, offset) in [(3, 0), (11, 511), (12, 0), (99, 0), (100, 512), (4, u64::MAX), (u64::MAX, 0)] {
            assert!(matches!(r.call(0, Call::Read { lba, offset }, &mut d), Err(Fault::ReadOutside(_))), "{lba} + {offset}");
        }
        assert_eq!(r.call(0, Call::Read { lba: 11, offset: 496 }, &mut d), Ok(0), "the last bytes of a range");
        assert_eq!(r.call(0, Call::Read { lba: 100, offset: 0 }, &mut d), Ok(0));
        assert_eq!(r.call(0, Call::Read { lba: 100, offset: 0 }, &mut d), Err(Fault::ReadBudget(2)));
        let mut full = reads(100);
        for i in 0..MAX_IN_FLIGHT as i64 {
            assert_eq!(full.call(0, Call::Start { lba: 4, offset: 0 }, &mut d), Ok(i));
        }
        assert_eq!(full.call(0, Call::Start { lba: 4, offset: 0 }, &mut d), Ok(NF_EAGAIN));
    }
}
