//! Forecasts of an extension command's flash work, so that `ExecCtx` calls return a time without running the
//! event loop ahead of the host's clock.
//!
//! An extension's `execute` is straight-line code that uses the time each flash call returns to book what follows
//! (compute units, DRAM, firmware cores). Its flash transactions go to the scheduler like every other (with the
//! command's class, so later higher-priority work overtakes them); the call returns a *forecast* of their end: the
//! die taken in the order the command asks for it, each operation unloaded (command cycles, sensing or programming,
//! the transfer, the decode). The command completes at the later of what the extension returned and the real end of
//! every flash transaction it entered (`Pending`), so other work that delays its flash delays its completion.

use super::timing::Step;
use crate::ctrl::sched::TxnReq;
use crate::engine::{At, Flow, IntMap, Time};
use crate::nand::{CmdKind, Geometry, NandTiming};
use std::collections::HashMap;

/// The forecast state of the extension command being executed.
#[derive(Debug, Default)]
pub(crate) struct Forecast {
    /// When each die is next free for this command's work (as forecast).
    die_free: IntMap<u32, Time>,
    /// The forecast end of each step of this command (flash transactions and what waits for them) not known yet.
    ends: HashMap<At, Time>,
}

impl Forecast {
    /// The forecast (or known) time of `at`; unknown steps that are not this command's flash work: `floor`.
    pub fn time_of(&self, at: At, flow: &Flow<Step>, floor: Time) -> Time {
        if let Some(t) = flow.value(at) {
            return t;
        }
        self.ends.get(&at).copied().unwrap_or(floor)
    }

    /// Forecasts transaction `req` entered at `ready` as step `at`.
    pub fn enter(&mut self, at: At, req: &TxnReq, ready: Time, t: &NandTiming, geo: &Geometry) {
        let free = self.die_free.entry(req.die).or_insert(0);
        let start = ready.max(*free);
        let (die_busy, done) = match req.kind {
            CmdKind::Read => {
                let soft = if req.soft { t.t_soft_decode } else { 0 };
                let column = if req.column { t.t_column_change } else { 0 };
                let sensed = start + t.t_cmd + u64::from(req.senses.max(1)) * t.t_read(geo.page_type(req.page));
                let out = sensed + column + t.xfer(req.bytes);
                (out, out + t.t_decode + soft)
            }
            CmdKind::Program => {
                let end = start + t.t_cmd + t.xfer(req.bytes) + t.t_prog(geo.page_type(req.page));
                (end, end)
            }
            CmdKind::Erase => (start + t.t_erase, start + t.t_erase),
            CmdKind::Copyback => {
                let end = start + 2 * t.t_cmd + t.t_read(geo.page_type(req.page)) + t.t_prog(geo.page_type(req.dst_page));
                (end, end)
            }
        };
        *free = die_busy;
        self.note(at, done);
    }

    /// Step `at` (not known yet) is forecast to end at `t`.
    pub fn note(&mut self, at: At, t: Time) {
        self.ends.insert(at, t);
    }
}
