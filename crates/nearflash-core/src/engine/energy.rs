//! The energy ledger: dynamic energy charged per event to named accounts, plus static power drawn over time.

use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EnergyAccount(pub u16);

#[derive(Debug, Clone, Default)]
pub struct EnergyLedger {
    names: Vec<String>,
    picojoules: Vec<f64>,
    /// Static power in mW per named component.
    statics: Vec<(String, f64)>,
}

impl EnergyLedger {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers (or finds) a dynamic-energy account.
    pub fn account(&mut self, name: &str) -> EnergyAccount {
        if let Some(i) = self.names.iter().position(|n| n == name) {
            return EnergyAccount(i as u16);
        }
        self.names.push(name.to_string());
        self.picojoules.push(0.0);
        EnergyAccount(self.names.len() as u16 - 1)
    }

    /// Declares a component drawing `milliwatts` whenever the device (or host) is powered.
    pub fn add_static(&mut self, name: &str, milliwatts: f64) {
        if let Some(s) = self.statics.iter_mut().find(|(n, _)| n == name) {
            s.1 = milliwatts;
        } else {
            self.statics.push((name.to_string(), milliwatts));
        }
    }

    #[inline]
    pub fn charge(&mut self, acc: EnergyAccount, picojoules: f64) {
        self.picojoules[acc.0 as usize] += picojoules;
    }

    pub fn reset(&mut self) {
        self.picojoules.iter_mut().for_each(|p| *p = 0.0);
    }

    /// Dynamic energy in joules per account.
    pub fn dynamic_joules(&self) -> BTreeMap<String, f64> {
        self.names.iter().cloned().zip(self.picojoules.iter().map(|p| p * 1e-12)).collect()
    }

    /// Static energy in joules per component over `window` ns.
    pub fn static_joules(&self, window: u64) -> BTreeMap<String, f64> {
        self.statics.iter().map(|(n, mw)| (n.clone(), mw * 1e-3 * window as f64 * 1e-9)).collect()
    }

    pub fn total_dynamic_joules(&self) -> f64 {
        self.picojoules.iter().sum::<f64>() * 1e-12
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_and_static_energy() {
        let mut l = EnergyLedger::new();
        let nand = l.account("nand_read");
        assert_eq!(l.account("nand_read"), nand);
        l.charge(nand, 3.31e6);
        l.charge(nand, 3.31e6);
        l.add_static("ssd_static", 154.0);
        assert!((l.dynamic_joules()["nand_read"] - 6.62e-6).abs() < 1e-15);
        assert!((l.static_joules(1_000_000_000)["ssd_static"] - 0.154).abs() < 1e-12);
    }
}
