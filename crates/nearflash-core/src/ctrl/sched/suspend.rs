//! Program/erase suspension: when a die working on a program (or erase) is asked to stop for reads, and what it
//! costs. Kept apart from the rest of the scheduler: with `nand.suspend = none` the scheduler holds no rules and no
//! line of this module runs.
//!
//! The rule (Wu and He, FAST'12; MQSim's intended `TSU_OutOfOrder` rule, which its code never reaches): a read (or,
//! with `nand.suspend_erase_for_writes`, a program) of a class other than GC's waiting for a die busy with a program or erase
//! suspends it when
//! suspension of that kind is on, the operation has at least the minimum left, it has been suspended fewer than the
//! limit, and nothing else is suspended on the die. The operation stops `t_suspend` later (the step under way
//! finishes, its progress counts); the die then serves the transactions that waited when it stopped and resumes the
//! operation (`t_resume`, then the time it had left). Each resume costs `energy_resume` (the interrupted step is
//! repeated).

use crate::nand::CmdKind;
use serde::Serialize;

/// The suspension rules of one operation kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rule {
    /// Time (ns) from the suspend command to the die's stop, and of the resume command.
    pub t_suspend: u64,
    pub t_resume: u64,
    /// Suspend only if at least this much (ns) of the operation is left.
    pub min_left: u64,
    /// Energy of the repeated step, per resume (pJ).
    pub energy_resume: f64,
}

/// What may be suspended, and how.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rules {
    pub program: Option<Rule>,
    pub erase: Option<Rule>,
    /// Programs may suspend erases too (Wu and He's write-suspend-erase); reads always may.
    pub programs_suspend_erases: bool,
    /// Suspensions one operation may take (then it runs to its end).
    pub max_per_op: u32,
}

impl Rules {
    pub fn rule(&self, kind: CmdKind) -> Option<&Rule> {
        match kind {
            CmdKind::Program => self.program.as_ref(),
            CmdKind::Erase => self.erase.as_ref(),
            _ => None,
        }
    }

    /// Whether a transaction of kind `wants` may suspend the die's `working` operation with `left` ns left after
    /// `done` suspensions. Reads may suspend programs and erases; programs only erases, and only with
    /// `programs_suspend_erases`.
    pub fn allows(&self, wants: CmdKind, working: CmdKind, left: u64, done: u32) -> bool {
        let kind_ok = match (wants, working) {
            (CmdKind::Read, CmdKind::Program | CmdKind::Erase) => true,
            (CmdKind::Program, CmdKind::Erase) => self.programs_suspend_erases,
            _ => false,
        };
        kind_ok && done < self.max_per_op && self.rule(working).is_some_and(|r| left >= r.min_left && left > r.t_suspend)
    }
}

/// Suspension counters of one operation kind.
#[derive(Debug, Clone, Default, Serialize)]
pub struct KindStats {
    /// Suspensions.
    pub suspensions: u64,
    /// Operations suspended at least once.
    pub ops_suspended: u64,
    /// Time from suspend commands to the end of their resumes, ns.
    pub suspended_ns: u64,
    /// The most suspensions one operation took.
    pub max_per_op: u32,
}

impl KindStats {
    /// Suspensions per operation suspended.
    pub fn per_op(&self) -> f64 {
        if self.ops_suspended == 0 {
            0.0
        } else {
            self.suspensions as f64 / self.ops_suspended as f64
        }
    }
}

/// Suspension counters, reported.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SuspendStats {
    pub program: KindStats,
    pub erase: KindStats,
}

impl SuspendStats {
    pub fn kind_mut(&mut self, k: CmdKind) -> &mut KindStats {
        match k {
            CmdKind::Erase => &mut self.erase,
            _ => &mut self.program,
        }
    }

    /// A suspension of a `kind` operation, its `n`-th.
    pub fn suspended(&mut self, kind: CmdKind, n: u32) {
        let s = self.kind_mut(kind);
        s.suspensions += 1;
        s.ops_suspended += u64::from(n == 1);
        s.max_per_op = s.max_per_op.max(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_checks_kind_time_left_and_count() {
        let r = Rule { t_suspend: 5_000, t_resume: 10_000, min_left: 100_000, energy_resume: 0.0 };
        let rules = Rules { program: Some(r), erase: None, programs_suspend_erases: true, max_per_op: 2 };
        assert!(rules.allows(CmdKind::Read, CmdKind::Program, 100_000, 0));
        assert!(!rules.allows(CmdKind::Read, CmdKind::Program, 99_999, 0), "too little left");
        assert!(!rules.allows(CmdKind::Read, CmdKind::Program, 500_000, 2), "suspended enough");
        assert!(!rules.allows(CmdKind::Read, CmdKind::Erase, 3_000_000, 0), "erase suspension off");
        assert!(!rules.allows(CmdKind::Program, CmdKind::Program, 500_000, 0), "programs never suspend programs");
        let both = Rules { erase: Some(r), ..rules };
        assert!(both.allows(CmdKind::Program, CmdKind::Erase, 3_000_000, 1));
        assert!(!Rules { programs_suspend_erases: false, ..both }.allows(CmdKind::Program, CmdKind::Erase, 3_000_000, 1));
        assert!(Rules { programs_suspend_erases: false, ..both }.allows(CmdKind::Read, CmdKind::Erase, 3_000_000, 1));
        let mut s = SuspendStats::default();
        s.suspended(CmdKind::Program, 1);
        s.suspended(CmdKind::Program, 2);
        s.suspended(CmdKind::Program, 1);
        assert_eq!((s.program.suspensions, s.program.ops_suspended, s.program.max_per_op), (3, 2, 2));
        assert!((s.program.per_op() - 1.5).abs() < 1e-12);
    }
}
