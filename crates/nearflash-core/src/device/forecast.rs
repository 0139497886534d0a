//! Forecasts of an extension command's flash work, so that `ExecCtx` calls return a time without running the
//! event loop ahead of the host's clock.
//!
//! An extension's `execute` is straight-line code that uses the time each flash call returns to book what follows
//! (compute units, DRAM, firmware cores). Its flash transactions go to the scheduler like every other (with the
//! command's class, so later higher-priority work overtakes them); the call returns a *forecast* of their end. The
//! command completes at the later of what the extension returned and the real end of every flash transaction it
//! entered (`Pending`), so other work that delays its flash delays its completion.
//!
//! The forecast takes each die and each channel in the order extension commands ask for them, each operation
//! unloaded otherwise: command cycles, sensing or programming, then the data-out (or data-in) once the channel is
//! free - one transfer at a time per channel, as the array moves them - and the decode. With `nand.cache_read` a die
//! senses its next page once the previous one moved to its cache register (`t_cache_xfer`), while that one drains.
//! The dies' and channels' horizons carry over from one extension command to the next ([`Horizons`]), so work that
//! an earlier command entered (another worker's request, a page a firmware loop issued for another entry) is in
//! the way of a later one's forecast, as it is in the way of its transactions. Work the host's own commands entered
//! is not counted (their order against extension work is the scheduler's classes' to decide).

use super::timing::Step;
use crate::ctrl::sched::TxnReq;
use crate::engine::{At, Flow, Time};
use crate::nand::{CmdKind, Geometry, NandTiming};
use std::collections::HashMap;

/// When each die and channel is next free for extension work, as forecast (kept across extension commands).
#[derive(Debug, Default, Clone)]
pub(crate) struct Horizons {
    /// Per die: the array (sensing, programming, erasing) is free.
    array: Vec<Time>,
    /// Per die: its cache register is free (the last data-out from it ended).
    register: Vec<Time>,
    /// Per channel: the bus is free.
    channel: Vec<Time>,
}

impl Horizons {
    fn slot(v: &mut Vec<Time>, i: u32) -> &mut Time {
        let i = i as usize;
        if v.len() <= i {
            v.resize(i + 1, Time::ZERO);
        }
        &mut v[i]
    }
}

/// The forecast state of the extension command being executed.
#[derive(Debug, Default)]
pub(crate) struct Forecast {
    horizons: Horizons,
    /// The forecast end of each step of this command (flash transactions and what waits for them) not known yet.
    ends: HashMap<At, Time>,
}

impl Forecast {
    /// A command's forecast, starting from the horizons earlier extension commands left.
    pub fn new(horizons: Horizons) -> Self {
        Forecast { horizons, ends: HashMap::new() }
    }

    /// The horizons this command leaves for the next.
    pub fn into_horizons(self) -> Horizons {
        self.horizons
    }

    /// The forecast (or known) time of `at`; unknown steps that are not this command's flash work: `floor`.
    pub fn time_of(&self, at: At, flow: &Flow<Step>, floor: Time) -> Time {
        if let Some(t) = flow.value(at) {
            return t;
        }
        self.ends.get(&at).copied().unwrap_or(floor)
    }

    /// Forecasts transaction `req` entered at `ready` as step `at`.
    pub fn enter(&mut self, at: At, req: &TxnReq, ready: Time, t: &NandTiming, geo: &Geometry) {
        let done = self.horizons.forecast(req, ready, t, geo);
        self.note(at, done);
    }

    /// Step `at` (not known yet) is forecast to end at `t`.
    pub fn note(&mut self, at: At, t: Time) {
        self.ends.insert(at, t);
    }
}

impl Horizons {
    /// The forecast end of `req` entered at `ready` (data decoded, program or erase done); moves the horizons.
    fn forecast(&mut self, req: &TxnReq, ready: Time, t: &NandTiming, geo: &Geometry) -> Time {
        let channel = geo.channel_of_die(req.die);
        let start = ready.max(*Self::slot(&mut self.array, req.die));
        match req.kind {
            CmdKind::Read => {
                let sensed = start + t.t_cmd + u64::from(req.senses.max(1)) * t.t_read(geo.page_type(req.page));
                let register = *Self::slot(&mut self.register, req.die);
                let bus_free = *Self::slot(&mut self.channel, channel);
                // With cache read a page that cannot go out at once moves to the cache register (once it is free)
                // and the array is free to sense the next page; one that can goes straight out (a next read would
                // move it first). Without, the page register holds it until the data-out ends.
                let (movable, array_free) = if !t.cache_read {
                    (sensed, None)
                } else if bus_free <= sensed && register <= sensed {
                    (sensed, Some(sensed + t.t_cache_xfer))
                } else {
                    let moved = sensed.max(register) + t.t_cache_xfer;
                    (moved, Some(moved))
                };
                let bus = Self::slot(&mut self.channel, channel);
                let out_start = movable.max(*bus);
                let column = if req.column { t.t_column_change } else { 0 };
                let out = out_start + column + t.xfer(req.bytes);
                *bus = out;
                *Self::slot(&mut self.register, req.die) = out;
                *Self::slot(&mut self.array, req.die) = array_free.unwrap_or(out);
                let soft = if req.soft { t.t_soft_decode } else { 0 };
                out + t.t_decode + soft
            }
            CmdKind::Program => {
                let bus = Self::slot(&mut self.channel, channel);
                let data_in = start.max(*bus) + t.t_cmd + t.xfer(req.bytes);
                *bus = data_in;
                let end = data_in + t.t_prog(geo.page_type(req.page));
                *Self::slot(&mut self.array, req.die) = end;
                end
            }
            CmdKind::Erase => {
                let end = start + t.t_erase;
                *Self::slot(&mut self.array, req.die) = end;
                end
            }
            CmdKind::Copyback => {
                let end = start + 2 * t.t_cmd + t.t_read(geo.page_type(req.page)) + t.t_prog(geo.page_type(req.dst_page));
                *Self::slot(&mut self.array, req.die) = end;
                end
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{load_preset, DeviceConfig};
    use crate::ctrl::sched::ClassId;

    fn cosmos() -> (NandTiming, Geometry) {
        let cfg = DeviceConfig::from_tree(&load_preset("cosmos-plus").unwrap()).unwrap();
        (NandTiming::from_config(&cfg), Geometry::from_config(&cfg))
    }

    #[test]
    fn reads_of_dies_on_one_channel_take_the_channel_one_data_out_at_a_time() {
        let (t, geo) = cosmos();
        let page = u64::from(geo.page_size);
        let mut h = Horizons::default();
        // Dies 0 and `channels` share channel 0; die 1 is on channel 1.
        let same = geo.channels;
        let (sense, xfer) = (t.t_cmd + t.t_read(geo.page_type(0)), t.xfer(page));
        let a = h.forecast(&TxnReq::read(0, 0, 0, page, ClassId(0)), Time::ZERO, &t, &geo);
        let b = h.forecast(&TxnReq::read(same, 0, 0, page, ClassId(0)), Time::ZERO, &t, &geo);
        let c = h.forecast(&TxnReq::read(1, 0, 0, page, ClassId(0)), Time::ZERO, &t, &geo);
        assert_eq!(a, Time::from_ns(sense + xfer + t.t_decode), "a lone read goes straight out");
        assert_eq!(b, Time::from_ns(sense + 2 * xfer + t.t_decode), "the second data-out waits for the first on the channel");
        assert_eq!(c, a, "another channel is free");
    }

    #[test]
    fn horizons_carry_over_and_a_die_senses_its_next_page_while_the_last_drains() {
        let (t, geo) = cosmos();
        assert!(t.cache_read, "cosmos-plus reads with cache read");
        let page = u64::from(geo.page_size);
        let (sense, xfer) = (t.t_cmd + t.t_read(geo.page_type(0)), t.xfer(page));
        let mut f = Forecast::default();
        f.horizons.forecast(&TxnReq::read(0, 0, 0, page, ClassId(0)), Time::ZERO, &t, &geo);
        // The next command's read of the same die: sensing starts once the first page could have moved to the cache
        // register, and its own move waits for the first data-out to end (xfer > tR on this part).
        let mut next = Forecast::new(f.into_horizons());
        let second = next.horizons.forecast(&TxnReq::read(0, 1, 0, page, ClassId(0)), Time::ZERO, &t, &geo);
        let first_out = sense + xfer;
        let second_moved = (sense + t.t_cache_xfer + sense).max(first_out) + t.t_cache_xfer;
        assert_eq!(second, Time::from_ns(second_moved + xfer + t.t_decode));
        // A program's data-in takes the channel after the reads' data-outs.
        let p = next.horizons.forecast(&TxnReq::program(geo.channels, 0, 1, page, ClassId(0)), Time::ZERO, &t, &geo);
        assert_eq!(p, Time::from_ns(second_moved + xfer + t.t_cmd + xfer + t.t_prog(geo.page_type(0))));
    }
}
