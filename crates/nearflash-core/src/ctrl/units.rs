//! Compute units declared by firmware extensions: per-channel stream processors, per-LUN search units, an NPE
//! array, FPGA pipelines, extra embedded cores. Each is a group of timelines with a clock, an energy per cycle and
//! a static power, and is reported like every other resource.

use crate::engine::{EnergyAccount, EnergyLedger, GroupId, Resources, Time};
use crate::error::{Result, SimError};

/// What an extension declares.
#[derive(Debug, Clone)]
pub struct UnitSpec {
    /// Resource name, conventionally `<extension>.<unit>` (e.g. `issd.fmc`).
    pub name: String,
    pub count: u32,
    pub freq_hz: f64,
    /// Dynamic energy per busy cycle.
    pub pj_per_cycle: f64,
    pub static_mw: f64,
}

/// A declared unit group, as extensions refer to it.
#[derive(Debug, Clone, Copy)]
pub struct UnitHandle {
    pub group: GroupId,
    pub account: EnergyAccount,
    pub count: u32,
    freq_hz: f64,
    pj_per_cycle: f64,
}

impl UnitHandle {
    pub fn cycles_ns(&self, cycles: f64) -> u64 {
        if cycles <= 0.0 {
            0
        } else {
            crate::engine::ceil_ns(cycles * 1e9 / self.freq_hz)
        }
    }

    pub fn freq_hz(&self) -> f64 {
        self.freq_hz
    }
}

#[derive(Default, Clone)]
pub struct ComputeUnits {
    units: Vec<(String, UnitHandle)>,
}

impl ComputeUnits {
    pub fn declare(&mut self, spec: &UnitSpec, res: &mut Resources, ledger: &mut EnergyLedger) -> Result<UnitHandle> {
        if spec.count == 0 || spec.freq_hz.is_nan() || spec.freq_hz <= 0.0 {
            return Err(SimError::Config(format!("compute unit {}: count and clock must be positive", spec.name)));
        }
        if self.units.iter().any(|(n, _)| *n == spec.name) || res.group(&spec.name).is_some() {
            return Err(SimError::Config(format!("compute unit {} is declared twice", spec.name)));
        }
        if spec.static_mw > 0.0 {
            ledger.add_static(&spec.name, spec.static_mw * f64::from(spec.count));
        }
        let h = UnitHandle {
            group: res.add_group(&spec.name, spec.count),
            account: ledger.account(&spec.name),
            count: spec.count,
            freq_hz: spec.freq_hz,
            pj_per_cycle: spec.pj_per_cycle,
        };
        self.units.push((spec.name.clone(), h));
        Ok(h)
    }

    pub fn get(&self, name: &str) -> Option<UnitHandle> {
        self.units.iter().find(|(n, _)| n == name).map(|(_, h)| *h)
    }

    /// Busies member `i` for `cycles` from `ready`; returns when done.
    pub fn run(&self, h: UnitHandle, i: u32, res: &mut Resources, ledger: &mut EnergyLedger, ready: Time, cycles: f64) -> Time {
        let d = h.cycles_ns(cycles);
        let s = res.reserve(res.member(h.group, i % h.count), ready, d);
        ledger.charge(h.account, h.pj_per_cycle * cycles.max(0.0));
        s + d
    }
}
