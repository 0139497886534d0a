//! The SSD controller: embedded cores running firmware, controller DRAM, the write-back buffer, and the compute
//! units firmware extensions declare (the extension interface itself is `device::ext`, above the layers it uses).

mod buffer;
pub mod sched;
mod units;

pub use buffer::WriteBuffer;
pub use units::{ComputeUnits, UnitHandle, UnitSpec};

use crate::config::DeviceConfig;
use crate::engine::{EnergyAccount, EnergyLedger, GroupId, Memo2, Port, Resources, Time};

/// Firmware path lengths and the resources they run on.
pub struct Controller {
    pub cores: GroupId,
    pub dram: GroupId,
    ns_per_instruction: f64,
    pub fw_read: f64,
    pub fw_write: f64,
    pub fw_other: f64,
    pub fw_page: f64,
    pub map_instructions: f64,
    dram_port: Port,
    pub dram_latency: u64,
    acc_core: EnergyAccount,
    pj_per_instruction: f64,
    /// `run`'s time and energy for the last two instruction counts (keyed by their bits).
    memo: Memo2,
    pub stats: ControllerStats,
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ControllerStats {
    pub instructions: f64,
    pub dram_bytes: u64,
}

impl Controller {
    pub fn new(cfg: &DeviceConfig, res: &mut Resources, ledger: &mut EnergyLedger) -> Self {
        let c = &cfg.controller;
        ledger.add_static("ssd_static", cfg.energy.ssd_static.0);
        let dram = res.add_group("dram", 1);
        let dram_port =
            Port::new(res.member(dram, 0), c.dram_bandwidth.0, ledger.account("ssd_dram"), cfg.energy.ssd_dram_per_byte.0);
        let ns_per_instruction = c.cpi.0 * 1e9 / c.core_freq.0;
        let pj_per_instruction = cfg.energy.core_per_instruction.0;
        Controller {
            cores: res.add_group("core", c.cores.0 as u32),
            dram,
            ns_per_instruction,
            fw_read: c.fw_read_instructions.0,
            fw_write: c.fw_write_instructions.0,
            fw_other: c.fw_other_instructions.0,
            fw_page: c.fw_page_instructions.0,
            map_instructions: cfg.ftl.map_instructions.0,
            dram_port,
            dram_latency: c.dram_latency.0,
            acc_core: ledger.account("controller_core"),
            pj_per_instruction,
            memo: Memo2::new(|bits| run_cost(f64::from_bits(bits), ns_per_instruction, pj_per_instruction)),
            stats: ControllerStats::default(),
        }
    }

    /// Time to execute `instructions` on one core.
    pub fn instructions_ns(&self, instructions: f64) -> u64 {
        run_cost(instructions, self.ns_per_instruction, self.pj_per_instruction).0
    }

    /// Runs `instructions` of firmware on whichever core is free first; returns when done.
    pub fn run(&mut self, res: &mut Resources, ledger: &mut EnergyLedger, ready: Time, instructions: f64) -> Time {
        let (ns, pj) = (self.ns_per_instruction, self.pj_per_instruction);
        let (d, energy) = self.memo.get(instructions.to_bits(), |bits| run_cost(f64::from_bits(bits), ns, pj));
        let (_, s) = res.reserve_any(self.cores, ready, d);
        self.stats.instructions += instructions;
        ledger.charge(self.acc_core, energy);
        s + d
    }

    /// `run` of `instructions`, then `then` from when the first ends, on the same core when it is free then (the
    /// firmware carries on with its command; `Resources::reserve_any_then` says why), else as `run`: the memo
    /// look-ups and charges of the two calls in their order. Returns when each ends.
    pub fn run_then(&mut self, res: &mut Resources, ledger: &mut EnergyLedger, ready: Time, instructions: f64, then: f64) -> (Time, Time) {
        let (ns, pj) = (self.ns_per_instruction, self.pj_per_instruction);
        let (d, energy) = self.memo.get(instructions.to_bits(), |bits| run_cost(f64::from_bits(bits), ns, pj));
        let (d2, energy2) = self.memo.get(then.to_bits(), |bits| run_cost(f64::from_bits(bits), ns, pj));
        // The second step's booking from the first's end, in one call (`Resources::reserve_any_then`).
        let (s, s2) = res.reserve_any_then(self.cores, ready, d, d2);
        // Counted and charged in the order of the two runs (floating-point sums).
        self.stats.instructions += instructions;
        ledger.charge(self.acc_core, energy);
        self.stats.instructions += then;
        ledger.charge(self.acc_core, energy2);
        (s + d, s2 + d2)
    }

    /// Runs firmware on a specific core (work that is serialised on one core, e.g. RecSSD's FTL loop).
    pub fn run_on(&mut self, res: &mut Resources, ledger: &mut EnergyLedger, core: u32, ready: Time, instructions: f64) -> Time {
        let d = self.instructions_ns(instructions);
        let r = res.member(self.cores, core % res.group_len(self.cores));
        let s = res.reserve(r, ready, d);
        self.stats.instructions += instructions;
        ledger.charge(self.acc_core, self.pj_per_instruction * instructions);
        s + d
    }

    /// DRAM port time for `bytes`.
    pub fn dram_ns(&self, bytes: u64) -> u64 {
        self.dram_port.ns(bytes)
    }

    /// Moves `bytes` through the DRAM port; returns when done.
    pub fn dram(&mut self, res: &mut Resources, ledger: &mut EnergyLedger, ready: Time, bytes: u64) -> Time {
        self.stats.dram_bytes += bytes;
        self.dram_port.transfer(res, ledger, ready, bytes)
    }
}

/// The time (whole ns, rounded up) and energy (pJ) of `instructions` on one core.
fn run_cost(instructions: f64, ns_per_instruction: f64, pj_per_instruction: f64) -> (u64, f64) {
    (crate::engine::ceil_ns(instructions * ns_per_instruction), pj_per_instruction * instructions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::load_preset;
    use proptest::prelude::*;

    /// The preset's controller on fresh resources.
    fn controller() -> (Resources, EnergyLedger, Controller) {
        let cfg = DeviceConfig::from_tree(&load_preset("cosmos-plus").unwrap()).unwrap();
        let (mut res, mut ledger) = (Resources::new(), EnergyLedger::new());
        let c = Controller::new(&cfg, &mut res, &mut ledger);
        (res, ledger, c)
    }

    /// A command's second firmware step stays on the core that ran its first when that core is free, even where a
    /// lower core is free too (the lower core went to the second step before, splitting a queue of commands into one
    /// core of long steps and one of short ones: docs/validation.md).
    #[test]
    fn a_commands_second_step_stays_on_its_core() {
        let (mut res, mut ledger, mut c) = controller();
        // Core 0 busy at first (150 ns), so the command's first step (6,000 ns) goes to core 1.
        c.run_on(&mut res, &mut ledger, 0, Time::ZERO, 100.0);
        let (first, second) = c.run_then(&mut res, &mut ledger, Time::ZERO, 4_000.0, 800.0);
        assert_eq!((first, second), (Time::from_ns(6_000), Time::from_ns(7_200)));
        // Core 0 is idle from the first step's end; core 1 ran the second step (1,200 ns) from there.
        assert_eq!(c.run_on(&mut res, &mut ledger, 0, first, 1.0), first + 2);
        assert_eq!(c.run_on(&mut res, &mut ledger, 1, first, 1.0), second + 2);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// `run_then` books as `reserve_any_then`, and counts and charges what `run` then `run` do, whatever the
        /// cores' earlier bookings (both busy, gaps, lone bookings far ahead on one core), the instruction counts
        /// (zero, repeated, more than the memo's two) and pruning between calls.
        #[test]
        fn run_then_books_as_the_pool_and_counts_as_two_runs(ops in prop::collection::vec((0u8..4, 0u64..20_000, 0usize..5, 0usize..5), 1..120)) {
            let counts = [0.0, 1.0, 2_500.0, 12_000.0, 40_000.5];
            let (mut res, mut ledger, mut a) = controller();
            let (mut res2, mut ledger2, mut b) = controller();
            let mut now = 0u64;
            for (kind, at, x, y) in ops {
                let ready = Time::from_ns(now + at);
                let (n, m) = (counts[x], counts[y]);
                match kind {
                    0 => prop_assert_eq!(a.run(&mut res, &mut ledger, ready, n), b.run(&mut res2, &mut ledger2, ready, n)),
                    // Work serialised on one core, possibly far ahead (a gap before it).
                    1 => {
                        let (c, t) = ((x % 2) as u32, ready + 50_000 * y as u64);
                        prop_assert_eq!(a.run_on(&mut res, &mut ledger, c, t, n), b.run_on(&mut res2, &mut ledger2, c, t, n));
                    }
                    // The pool's two bookings as `Resources::reserve_any_then` makes them (the second on the first's
                    // core when free then: tested against a naive model there), counted and charged as two runs.
                    2 => {
                        let (d, d2) = (a.instructions_ns(n), a.instructions_ns(m));
                        let (s, s2) = res.reserve_any_then(a.cores, ready, d, d2);
                        for k in [n, m] {
                            a.stats.instructions += k;
                            ledger.charge(a.acc_core, a.pj_per_instruction * k);
                        }
                        prop_assert_eq!((s + d, s2 + d2), b.run_then(&mut res2, &mut ledger2, ready, n, m));
                    }
                    _ => {
                        now += at;
                        res.prune(Time::from_ns(now));
                        res2.prune(Time::from_ns(now));
                    }
                }
                prop_assert_eq!(ledger.dynamic_joules(), ledger2.dynamic_joules());
                prop_assert_eq!(a.stats.instructions, b.stats.instructions);
            }
            for k in 0..40u64 {
                let ready = Time::from_ns(now + k * 900);
                prop_assert_eq!(a.run(&mut res, &mut ledger, ready, 2_500.0), b.run(&mut res2, &mut ledger2, ready, 2_500.0));
            }
        }
    }
}
