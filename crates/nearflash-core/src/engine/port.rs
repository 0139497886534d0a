//! A bandwidth-limited port: one transfer at a time on one timeline, whole nanoseconds rounded up, energy per byte.
//! The host link (each direction) and controller DRAM are ports.

use super::{EnergyAccount, EnergyLedger, ResourceId, Resources, Time};

#[derive(Debug, Clone, Copy)]
pub struct Port {
    resource: ResourceId,
    bytes_per_s: f64,
    account: EnergyAccount,
    pj_per_byte: f64,
}

impl Port {
    pub fn new(resource: ResourceId, bytes_per_s: f64, account: EnergyAccount, pj_per_byte: f64) -> Self {
        Port { resource, bytes_per_s, account, pj_per_byte }
    }

    pub fn bytes_per_s(&self) -> f64 {
        self.bytes_per_s
    }

    /// Time to move `bytes`.
    pub fn ns(&self, bytes: u64) -> u64 {
        if bytes == 0 {
            0
        } else {
            super::ceil_ns(super::u64_as_f64(bytes) * 1e9 / self.bytes_per_s)
        }
    }

    /// Moves `bytes` through the port from `ready` (or the first gap after it) and charges their energy; returns
    /// when the last byte is through.
    pub fn transfer(&self, res: &mut Resources, ledger: &mut EnergyLedger, ready: Time, bytes: u64) -> Time {
        let d = self.ns(bytes);
        let start = res.reserve(self.resource, ready, d);
        ledger.charge(self.account, self.pj_per_byte * super::u64_as_f64(bytes));
        start + d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfers_serialise_and_charge_per_byte() {
        let mut res = Resources::new();
        let mut ledger = EnergyLedger::new();
        let g = res.add_group("link", 1);
        let port = Port::new(res.member(g, 0), 1e9, ledger.account("link"), 2.0);
        assert_eq!(port.ns(0), 0);
        assert_eq!(port.ns(3), 3);
        assert_eq!(port.ns(1), 1, "rounded up to whole ns");
        let a = port.transfer(&mut res, &mut ledger, Time::ZERO, 1000);
        let b = port.transfer(&mut res, &mut ledger, Time::ZERO, 1000);
        assert_eq!((a, b), (Time::from_ns(1000), Time::from_ns(2000)), "one transfer at a time");
        assert!((ledger.dynamic_joules()["link"] - 4000e-12).abs() < 1e-18);
    }
}
