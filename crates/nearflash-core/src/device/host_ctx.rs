//! `HostCtx`: what host libraries (iSSD's Initiator, RecSSD's host jobs, baselines of the other systems) may book
//! on the host side of the device model: computation on the host cores, host DRAM traffic, and the host's energy
//! accounts. I/O goes through the device's commands as for any application; nothing here reaches into the device.
//! As in `ExecCtx`, a call that books work takes `ready` first after `&mut self` and returns when the work is done.

use super::core::DeviceCore;
use crate::engine::Time;

/// The host side of a device, for host libraries (`Device::host`).
pub struct HostCtx<'a> {
    pub(crate) core: &'a mut DeviceCore,
    pub(crate) now: Time,
}

impl HostCtx<'_> {
    /// The host's clock: nothing may be booked before it.
    pub fn now(&self) -> Time {
        self.now
    }

    pub fn cpu_hz(&self) -> f64 {
        self.core.host.cpu_hz()
    }

    /// Host CPU cores.
    pub fn cores(&self) -> u32 {
        self.core.host.cores(&self.core.res)
    }

    /// Runs `cycles` of computation split evenly over `cores` cores from `ready`, charging
    /// `instructions` of energy; returns when every part is done.
    pub fn compute(&mut self, ready: Time, cycles: f64, instructions: f64, cores: u32) -> Time {
        let c = &mut *self.core;
        c.host.compute(&mut c.res, &mut c.ledger, ready, cycles, instructions, cores)
    }

    /// As `compute`, booked in slices of at most `quantum_ns` per core, so that the computation fills the host
    /// cores around short driver work instead of waiting for a gap as long as itself.
    pub fn compute_sliced(&mut self, ready: Time, cycles: f64, instructions: f64, cores: u32, quantum_ns: f64) -> Time {
        let per_core_ns = cycles / f64::from(cores.max(1)) / self.cpu_hz() * 1e9;
        let slices = (per_core_ns / quantum_ns.max(1.0)).ceil().max(1.0);
        let mut done = ready;
        for _ in 0..slices as u64 {
            done = done.max(self.compute(ready, cycles / slices, instructions / slices, cores));
        }
        done
    }

    /// When a run of `duration` ns on one host core could start at the earliest, from `ready`.
    pub fn earliest_core_start(&self, ready: Time, duration: u64) -> Time {
        let (res, cpu) = (&self.core.res, self.core.host.cpu);
        (0..res.group_len(cpu)).map(|i| res.timeline(res.member(cpu, i)).find(ready, duration)).min().unwrap_or(ready)
    }

    /// Charges host DRAM traffic of `bytes` (energy); returns the host DRAM bandwidth in bytes/s for callers that
    /// bound their time by it.
    pub fn dram_traffic(&mut self, bytes: u64) -> f64 {
        let c = &mut *self.core;
        c.host.dram_traffic(&mut c.ledger, bytes)
    }

    /// Payload bandwidth of one link direction, bytes/s.
    pub fn link_bandwidth(&self) -> f64 {
        self.core.host.link_bandwidth()
    }

    /// Charges dynamic energy to a named account (e.g. a modelled host accelerator).
    pub fn charge(&mut self, account: &str, picojoules: f64) {
        let a = self.core.ledger.account(account);
        self.core.ledger.charge(a, picojoules);
    }
}
