//! The host side of the link: the PCIe or SATA link per direction, the driver stack's per-I/O cost on the host
//! cores (interrupt-driven kernel path or polled user-space path), and host compute charged in cycles.

use crate::config::{DeviceConfig, HostStack};
use crate::engine::{EnergyAccount, EnergyLedger, GroupId, Port, Resources, Time};

/// Link, driver and host CPU model.
pub struct HostModel {
    /// Host to device (writes, SQE fetches).
    pub down: GroupId,
    /// Device to host (reads, completions).
    pub up: GroupId,
    pub cpu: GroupId,
    link_down: Port,
    link_up: Port,
    pub link_latency: u64,
    submit: u64,
    complete: u64,
    cpu_hz: f64,
    acc_cpu: EnergyAccount,
    acc_dram: EnergyAccount,
    cpu_pj_per_instruction: f64,
    dram_pj_per_byte: f64,
    dram_bw: f64,
    pub stats: HostStats,
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct HostStats {
    pub link_bytes_down: u64,
    pub link_bytes_up: u64,
    pub host_cpu_cycles: f64,
}

impl HostModel {
    pub fn new(cfg: &DeviceConfig, res: &mut Resources, ledger: &mut EnergyLedger) -> Self {
        let h = &cfg.host;
        let (submit, complete) = match cfg.host_stack() {
            HostStack::Kernel => (h.kernel_submit.0, h.kernel_complete.0),
            HostStack::Polled => (h.polled_submit.0, h.polled_complete.0),
        };
        let e = &cfg.energy;
        ledger.add_static("host_dram", e.host_dram_static.0);
        ledger.add_static("host_chipset", e.host_chipset_static.0);
        ledger.add_static("host_io", e.host_io_static.0);
        let (down, up) = (res.add_group("link_down", 1), res.add_group("link_up", 1));
        let acc_link = ledger.account("host_link");
        let port = |res: &Resources, g| Port::new(res.member(g, 0), cfg.link_bandwidth().0, acc_link, e.host_link_per_byte.0);
        HostModel {
            link_down: port(res, down),
            link_up: port(res, up),
            down,
            up,
            cpu: res.add_group("host_cpu", h.cpu_cores.0 as u32),
            link_latency: h.link_latency.0,
            submit,
            complete,
            cpu_hz: h.cpu_freq.0,
            acc_cpu: ledger.account("host_cpu"),
            acc_dram: ledger.account("host_dram"),
            cpu_pj_per_instruction: e.host_cpu_per_instruction.0,
            dram_pj_per_byte: e.host_dram_per_byte.0,
            dram_bw: h.dram_bandwidth.0,
            stats: HostStats::default(),
        }
    }

    /// Payload bandwidth of one link direction, bytes/s.
    pub fn link_bandwidth(&self) -> f64 {
        self.link_down.bytes_per_s()
    }

    pub fn link_ns(&self, bytes: u64) -> u64 {
        self.link_down.ns(bytes)
    }

    /// Moves `bytes` host-to-device; returns arrival time.
    pub fn to_device(&mut self, res: &mut Resources, ledger: &mut EnergyLedger, ready: Time, bytes: u64) -> Time {
        self.stats.link_bytes_down += bytes;
        self.link_down.transfer(res, ledger, ready, bytes)
    }

    /// Moves `bytes` device-to-host; returns arrival time.
    pub fn to_host(&mut self, res: &mut Resources, ledger: &mut EnergyLedger, ready: Time, bytes: u64) -> Time {
        self.stats.link_bytes_up += bytes;
        self.link_up.transfer(res, ledger, ready, bytes)
    }

    /// `to_host` of `bytes`, then of `then_bytes` once those are through (a read's data, then its completion entry);
    /// returns both arrival times.
    pub fn to_host_then(&mut self, res: &mut Resources, ledger: &mut EnergyLedger, ready: Time, bytes: u64, then_bytes: u64) -> (Time, Time) {
        self.stats.link_bytes_up += bytes + then_bytes;
        self.link_up.transfer_then(res, ledger, ready, bytes, then_bytes)
    }

    /// Driver submission path on a host core; returns when the doorbell is rung.
    pub fn submit_path(&mut self, res: &mut Resources, ready: Time) -> Time {
        let (_, s) = res.reserve_any(self.cpu, ready, self.submit);
        s + self.submit
    }

    /// Driver completion path (interrupt or poll) on a host core; returns when the application sees it.
    pub fn complete_path(&mut self, res: &mut Resources, ready: Time) -> Time {
        let (_, s) = res.reserve_any(self.cpu, ready, self.complete);
        s + self.complete
    }

    pub fn submit_ns(&self) -> u64 {
        self.submit
    }

    pub fn complete_ns(&self) -> u64 {
        self.complete
    }

    /// Charges `cycles` of host computation on `cores` cores in parallel (the work split evenly), plus
    /// `instructions` for energy; returns when all parts are done.
    pub fn compute(
        &mut self,
        res: &mut Resources,
        ledger: &mut EnergyLedger,
        ready: Time,
        cycles: f64,
        instructions: f64,
        cores: u32,
    ) -> Time {
        let cores = cores.clamp(1, res.group_len(self.cpu));
        let per = crate::engine::ceil_ns((cycles / f64::from(cores)) * 1e9 / self.cpu_hz);
        let mut done = ready;
        for _ in 0..cores {
            let (_, s) = res.reserve_any(self.cpu, ready, per);
            done = done.max(s + per);
        }
        self.stats.host_cpu_cycles += cycles;
        ledger.charge(self.acc_cpu, self.cpu_pj_per_instruction * instructions);
        done
    }

    /// Host DRAM traffic (energy only; its bandwidth is returned for callers that bound by it).
    pub fn dram_traffic(&mut self, ledger: &mut EnergyLedger, bytes: u64) -> f64 {
        ledger.charge(self.acc_dram, self.dram_pj_per_byte * bytes as f64);
        self.dram_bw
    }

    pub fn cpu_hz(&self) -> f64 {
        self.cpu_hz
    }

    pub fn cores(&self, res: &Resources) -> u32 {
        res.group_len(self.cpu)
    }
}
