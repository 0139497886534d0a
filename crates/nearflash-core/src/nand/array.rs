//! Timing of flash operations on the array: how a read, program or erase occupies the channel bus, the die and
//! its cache register, and the channel's ECC engine.
//!
//! - A read sends command/address cycles on the channel, senses the page (tR) on the die, moves the data out over
//!   the channel (one transfer at a time per channel) and decodes it on the channel's ECC engine (pipelined with
//!   the bus). Without cache read the die stays busy until its page register has drained; with cache read the
//!   page moves to the cache register (t_cache_xfer) and the die may sense the next page while it drains.
//! - A multi-plane operation addresses the same page offset in several planes of one die: one tR (or tPROG) for
//!   all of them, one transfer per plane.
//! - A program moves the data in over the channel, then programs (tPROG); the die is busy from data-in to the end.
//! - Read retries repeat sensing, transfer and decoding; a soft decode follows the last failed retry.

use super::{EccModel, EccOutcome, Geometry};
use crate::config::DeviceConfig;
use crate::engine::{EnergyAccount, EnergyLedger, GroupId, Resources, Time};

mod tsu;

/// Array and bus timing, in ns.
#[derive(Debug, Clone)]
pub struct NandTiming {
    t_read: [u64; 4],
    t_prog: [u64; 4],
    pub t_erase: u64,
    pub t_cmd: u64,
    pub t_cache_xfer: u64,
    /// Change Read Column and tCCS before a data-out that starts inside a page (a column read).
    pub t_column_change: u64,
    /// ns per byte on the channel, as bytes/s.
    pub channel_bw: f64,
    pub t_decode: u64,
    pub t_soft_decode: u64,
    pub cache_read: bool,
    pub multi_plane: bool,
    /// `nand.channel_arbitration = data_first` or `mqsim_tsu`: read command cycles are booked on the channel
    /// (MQSim's order).
    pub commands_on_bus: bool,
    /// `nand.channel_arbitration = mqsim_tsu`: a read command is sent only while no data-out waits for the channel
    /// (MQSim's transaction scheduler issues on channel-idle events, after the PHY has drained its waiting
    /// data-outs).
    pub data_outs_first: bool,
}

impl NandTiming {
    pub fn from_config(cfg: &DeviceConfig) -> Self {
        let n = &cfg.nand;
        // Page types cycle within a block: SLC has one, MLC two (LSB, MSB), TLC three (LSB, CSB, MSB), QLC four
        // (the fourth takes the MSB latency: presets give at most three).
        let bits = cfg.bits_per_cell() as usize;
        let pick = |lsb: Option<crate::config::units::Nanos>,
                    csb: Option<crate::config::units::Nanos>,
                    msb: Option<crate::config::units::Nanos>,
                    d: u64| {
            let (l, c, m) = (lsb.map_or(d, |x| x.0), csb.map_or(d, |x| x.0), msb.map_or(d, |x| x.0));
            match bits {
                1 => [d; 4],
                2 => [l, m, m, m],
                3 => [l, c, m, m],
                _ => [l, c, m, m],
            }
        };
        NandTiming {
            t_read: pick(n.t_read_lsb, n.t_read_csb, n.t_read_msb, n.t_read.0),
            t_prog: pick(n.t_prog_lsb, n.t_prog_csb, n.t_prog_msb, n.t_prog.0),
            t_erase: n.t_erase.0,
            t_cmd: n.t_cmd.0,
            t_cache_xfer: n.t_cache_xfer.0,
            t_column_change: n.t_column_change.0,
            channel_bw: cfg.channel_bandwidth().0,
            t_decode: cfg.ecc.t_decode.0,
            t_soft_decode: cfg.ecc.t_soft_decode.0,
            cache_read: n.cache_read.0,
            multi_plane: n.multi_plane.0,
            commands_on_bus: matches!(n.channel_arbitration.0.as_str(), "data_first" | "mqsim_tsu"),
            data_outs_first: n.channel_arbitration.0 == "mqsim_tsu",
        }
    }

    #[inline]
    pub fn t_read(&self, page_type: usize) -> u64 {
        self.t_read[page_type.min(3)]
    }

    #[inline]
    pub fn t_prog(&self, page_type: usize) -> u64 {
        self.t_prog[page_type.min(3)]
    }

    /// Bus time for `bytes` of data.
    #[inline]
    pub fn xfer(&self, bytes: u64) -> u64 {
        if bytes == 0 {
            0
        } else {
            (bytes as f64 * 1e9 / self.channel_bw).ceil() as u64
        }
    }
}

/// Operation counters of the array.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct NandStats {
    /// Pages sensed (a two-plane read counts two).
    pub pages_read: u64,
    pub pages_programmed: u64,
    pub blocks_erased: u64,
    pub read_ops: u64,
    pub multi_plane_reads: u64,
    pub multi_plane_programs: u64,
    pub read_retries: u64,
    pub soft_decodes: u64,
    pub uncorrectable: u64,
    pub bytes_to_controller: u64,
    pub bytes_to_flash: u64,
    pub copybacks: u64,
}

struct Accounts {
    read: EnergyAccount,
    program: EnergyAccount,
    erase: EnergyAccount,
    bus: EnergyAccount,
    ecc: EnergyAccount,
}

struct Energies {
    read_page: f64,
    program_page: f64,
    erase_block: f64,
    bus_byte: f64,
    ecc_byte: f64,
}

/// Spans of one channel during which a sensed page waits for, or is in, its data-out (`mqsim_tsu`): merged,
/// disjoint `[start, end)` spans keyed by start. A read command is sent only outside them.
#[derive(Default)]
struct DataOutWaits {
    spans: std::collections::BTreeMap<Time, Time>,
}

impl DataOutWaits {
    /// Spans that ended this long before the newest one are dropped (assumed: no read is issued that far in the
    /// past of the channel's latest data-out; a query before it sees the channel as free of waiting data-outs).
    const KEEP_NS: Time = 100_000_000;

    /// Earliest start at or after `from` of `dur` ns that overlaps no span.
    fn first_free(&self, from: Time, dur: u64) -> Time {
        let mut t = from;
        // The span starting last before the window's end overlaps it iff it ends after the window's start (the
        // spans are disjoint, so no earlier one can).
        while let Some((_, &e)) = self.spans.range(..t + dur.max(1)).next_back() {
            if e <= t {
                break;
            }
            t = e;
        }
        t
    }

    /// Marks `[start, end)`, merging it with the spans it touches.
    fn insert(&mut self, start: Time, end: Time) {
        if end <= start {
            return;
        }
        let (mut a, mut b) = (start, end);
        while let Some((&s, &e)) = self.spans.range(..=b).next_back() {
            if e < a {
                break;
            }
            self.spans.remove(&s);
            a = a.min(s);
            b = b.max(e);
        }
        self.spans.insert(a, b);
        let horizon = b.saturating_sub(Self::KEEP_NS);
        while let Some((&s, &e)) = self.spans.first_key_value() {
            if e >= horizon {
                break;
            }
            self.spans.remove(&s);
        }
    }
}

/// The last read booked on a die under `mqsim_tsu`: a read of another plane at the same page offset that arrives
/// before its command is sent joins it as one multi-plane read (MQSim's `TSU_Base::issue_command_to_chip` gathers
/// every queued transaction of the die at that offset, whichever request it belongs to).
#[derive(Clone, Copy)]
struct QueuedRead {
    page: u32,
    /// Planes of the die (bit per plane) the command reads.
    planes: u32,
    command: Time,
    sensed: Time,
    /// End of the last data-out, when the die is free again.
    end: Time,
}

/// The flash array's resources and the rules for occupying them.
pub struct NandArray {
    pub geo: Geometry,
    pub timing: NandTiming,
    pub ecc: EccModel,
    channel: GroupId,
    die: GroupId,
    cache_reg: GroupId,
    ecc_engine: GroupId,
    acc: Accounts,
    e: Energies,
    /// Per channel, where data-outs wait (only kept under `mqsim_tsu`).
    waits: Vec<DataOutWaits>,
    /// Per die, the last read booked (only kept under `mqsim_tsu`).
    queued: Vec<Option<QueuedRead>>,
    /// Command start, sensing end and data-out end of the latest plain read (set under `mqsim_tsu`).
    issued: (Time, Time, Time),
    /// The event-driven issue queue of host reads (only under `mqsim_tsu`).
    tsu: Option<tsu::Tsu>,
    pub stats: NandStats,
}

impl NandArray {
    pub fn new(cfg: &DeviceConfig, res: &mut Resources, ledger: &mut EnergyLedger) -> Self {
        let geo = Geometry::from_config(cfg);
        let en = &cfg.energy;
        NandArray {
            channel: res.add_group("channel", geo.channels),
            die: res.add_group("die", geo.dies()),
            cache_reg: res.add_group("cache_register", geo.dies()),
            ecc_engine: res.add_group("ecc", geo.channels),
            acc: Accounts {
                read: ledger.account("nand_read"),
                program: ledger.account("nand_program"),
                erase: ledger.account("nand_erase"),
                bus: ledger.account("flash_bus"),
                ecc: ledger.account("ecc"),
            },
            e: Energies {
                read_page: en.nand_read_page.0,
                program_page: en.nand_program_page.0,
                erase_block: en.nand_erase_block.0,
                bus_byte: en.channel_per_byte.0,
                ecc_byte: en.ecc_per_byte.0,
            },
            timing: NandTiming::from_config(cfg),
            waits: (0..geo.channels).map(|_| DataOutWaits::default()).collect(),
            queued: vec![None; geo.dies() as usize],
            issued: (0, 0, 0),
            tsu: (cfg.nand.channel_arbitration.0 == "mqsim_tsu")
                .then(|| tsu::Tsu::new(geo.dies(), geo.channels, |d| geo.channel_of_die(d))),
            ecc: EccModel::from_config(cfg),
            geo,
            stats: NandStats::default(),
        }
    }

    #[allow(clippy::too_many_arguments)]
    /// Reads pages at offset `page` of the planes listed in `xfer` (bytes to move out per plane page) of `die`,
    /// ready at `ready`; returns when the data is decoded in the controller. Several planes make a multi-plane read.
    pub fn read(
        &mut self,
        res: &mut Resources,
        ledger: &mut EnergyLedger,
        ready: Time,
        die: u32,
        page: u32,
        xfer: &[u64],
        outcome: EccOutcome,
    ) -> Time {
        self.read_on_planes(res, ledger, ready, die, page, 0, xfer, false, outcome)
    }

    #[allow(clippy::too_many_arguments)]
    /// As [`read`](Self::read), naming the die's planes read (`plane_mask`, bit per plane; 0 = not known): under
    /// `mqsim_tsu` a read may then join a queued read of other planes at the same page offset. `column`: a column
    /// read (ONFI random data out): each page is sensed whole and only its `xfer` bytes (a span of whole ECC
    /// codewords) move out, after a Change Read Column points the data-out at them (`t_column_change` on the
    /// channel before each data-out); such a read never joins another.
    pub fn read_on_planes(
        &mut self,
        res: &mut Resources,
        ledger: &mut EnergyLedger,
        ready: Time,
        die: u32,
        page: u32,
        plane_mask: u32,
        xfer: &[u64],
        column: bool,
        outcome: EccOutcome,
    ) -> Time {
        let setup = if column { self.timing.t_column_change } else { 0 };
        let planes = xfer.len() as u64;
        let bytes: u64 = xfer.iter().sum();
        let joined = if matches!(outcome, EccOutcome::Corrected) && !column {
            self.join_queued(res, ready, die, page, plane_mask, bytes)
        } else {
            None
        };
        let mut done = match joined {
            Some(done) => done,
            None => {
                let done = self.sense_and_transfer(res, ready, die, page, planes, bytes, setup);
                if self.timing.data_outs_first {
                    let (command, sensed, end) = self.issued;
                    self.queued[die as usize] = Some(QueuedRead { page, planes: plane_mask, command, sensed, end });
                }
                done
            }
        };
        for _ in 0..outcome.retries() {
            done = self.sense_and_transfer(res, done, die, page, planes, bytes, setup);
        }
        if outcome.soft_decoded() {
            let e = res.member(self.ecc_engine, self.geo.channel_of_die(die));
            done = res.reserve(e, done, self.timing.t_soft_decode) + self.timing.t_soft_decode;
            self.stats.soft_decodes += 1;
        }
        let attempts = 1 + u64::from(outcome.retries());
        self.stats.read_ops += 1;
        self.stats.pages_read += planes * attempts;
        self.stats.multi_plane_reads += u64::from(planes > 1);
        self.stats.read_retries += u64::from(outcome.retries());
        self.stats.uncorrectable += u64::from(!outcome.is_ok());
        self.stats.bytes_to_controller += bytes * attempts;
        ledger.charge(self.acc.read, self.e.read_page * (planes * attempts) as f64);
        ledger.charge(self.acc.bus, self.e.bus_byte * (bytes * attempts) as f64);
        ledger.charge(self.acc.ecc, self.e.ecc_byte * (bytes * attempts) as f64);
        done
    }

    /// Under `mqsim_tsu`, a read of planes `mask` at offset `page` of `die` that arrives while the die's last read
    /// (same offset, other planes) still waits for its command joins that command: no sensing of its own, its
    /// data-out follows the other's, and the die is held until it ends. Returns the decode end, or None when it
    /// cannot join (the command was already sent, another offset or plane, or the die is booked after it). The
    /// joined command keeps the single-plane command time (MQSim's two-plane command is t_DBSY + 6 t_WC longer,
    /// about 0.6 us).
    fn join_queued(&mut self, res: &mut Resources, ready: Time, die: u32, page: u32, mask: u32, bytes: u64) -> Option<Time> {
        let t = &self.timing;
        if !t.data_outs_first || !t.multi_plane || mask == 0 || bytes == 0 {
            return None;
        }
        let q = self.queued[die as usize]?;
        if q.page != page || q.planes & mask != 0 || q.planes == 0 || q.command < ready {
            return None;
        }
        let ch = res.member(self.channel, self.geo.channel_of_die(die));
        let d = res.member(self.die, die);
        let x = t.xfer(bytes);
        let xs = res.timeline(ch).find(q.end, x);
        if !res.timeline(d).is_free(q.end, xs + x) {
            return None;
        }
        res.timeline_mut(d).commit(q.end, xs + x);
        res.timeline_mut(ch).commit(xs, xs + x);
        let chn = self.geo.channel_of_die(die) as usize;
        self.waits[chn].insert(q.sensed, xs + x);
        self.queued[die as usize] = Some(QueuedRead { planes: q.planes | mask, end: xs + x, ..q });
        Some(self.decode(res, die, xs, xs + x, bytes))
    }

    /// One sensing of `planes` pages and the transfer and decode of `bytes`, each data-out preceded by `setup` ns of
    /// column selection; returns the decode end.
    #[allow(clippy::too_many_arguments)]
    fn sense_and_transfer(&mut self, res: &mut Resources, ready: Time, die: u32, page: u32, planes: u64, bytes: u64, setup: u64) -> Time {
        let t = &self.timing;
        let ch = res.member(self.channel, self.geo.channel_of_die(die));
        let d = res.member(self.die, die);
        let reg = res.member(self.cache_reg, die);
        let cmd = t.t_cmd * planes;
        let t_r = t.t_read(self.geo.page_type(page));
        let x = setup + t.xfer(bytes);
        // The die accepts the command only when it is ready, so the command cycles open its busy period. They take
        // bus time but never wait for it: a flash controller slips these few cycles between data bursts, so they
        // are charged as latency rather than booked on the channel (booking them would let an earlier-booked
        // burst of another die block the command for a whole page transfer). Find a start at which the die stays
        // free until the data has left it; the holds only grow, so the loop ends.
        let (xfer_start, xfer_end);
        let sensed;
        // A read finding its die idle is a plain page read; one queued behind earlier work on the die is issued as
        // a cache read (ONFI 31h), so that its sensing overlaps the previous page's data-out.
        // With data_first arbitration (MQSim) the command cycles take a slot on the channel of their own, found at
        // or after `from`: a new read waits for the data-outs already booked there.
        // With mqsim_tsu the slot must also lie outside every span in which a sensed page waits for its data-out:
        // MQSim's PHY serves the waiting data-outs whenever the channel frees, and its transaction scheduler sends
        // a new command only on the channel-idle event that follows, when none is left.
        let on_bus = t.commands_on_bus;
        let chn = self.geo.channel_of_die(die) as usize;
        let waits = if t.data_outs_first { Some(&self.waits[chn]) } else { None };
        let command_slot = |res: &Resources, from: Time| {
            if !on_bus {
                return from;
            }
            let mut c = res.timeline(ch).find(from, cmd);
            if let Some(w) = waits {
                loop {
                    let free = w.first_free(c, cmd);
                    if free == c {
                        break;
                    }
                    c = res.timeline(ch).find(free, cmd);
                }
            }
            c
        };
        let pipelined = t.cache_read && res.timeline(d).find(ready, 1) > ready;
        if pipelined {
            let (mut hold_die, mut hold_reg) = (cmd + t_r + t.t_cache_xfer, t.t_cache_xfer + x);
            loop {
                let a = res.timeline(d).find(ready, hold_die);
                // The command may be issued while the previous page moves into the cache register.
                let c = command_slot(res, ready.max(a.saturating_sub(t.t_cache_xfer)));
                let sense = a.max(c + cmd);
                let m = res.timeline(reg).find(sense + t_r, hold_reg);
                let xs = res.timeline(ch).find(m + t.t_cache_xfer, x);
                let need_die = m + t.t_cache_xfer - a;
                let need_reg = xs + x - m;
                if need_die <= hold_die && need_reg <= hold_reg {
                    res.timeline_mut(d).commit(a, a + need_die);
                    res.timeline_mut(reg).commit(m, m + need_reg);
                    res.timeline_mut(ch).commit(xs, xs + x);
                    if on_bus {
                        res.timeline_mut(ch).commit(c, c + cmd);
                    }
                    (xfer_start, xfer_end) = (xs, xs + x);
                    sensed = m + t.t_cache_xfer;
                    break;
                }
                hold_die = hold_die.max(need_die);
                hold_reg = hold_reg.max(need_reg);
            }
        } else {
            let mut hold = cmd + t_r + x;
            let mut from = ready;
            loop {
                let a = res.timeline(d).find(from, hold);
                let c = command_slot(res, a);
                if c > a && res.timeline(d).find(c, hold) != c {
                    from = c; // the die is busy again by the time the channel can take the command
                    continue;
                }
                let xs = res.timeline(ch).find(c + cmd + t_r, x);
                let need = xs + x - c;
                if need <= hold {
                    res.timeline_mut(d).commit(c, c + need);
                    res.timeline_mut(ch).commit(xs, xs + x);
                    if on_bus {
                        res.timeline_mut(ch).commit(c, c + cmd);
                    }
                    (xfer_start, xfer_end) = (xs, xs + x);
                    sensed = c + cmd + t_r;
                    break;
                }
                hold = need;
            }
        }
        if t.data_outs_first {
            self.waits[chn].insert(sensed, xfer_end);
            self.issued = (sensed.saturating_sub(t_r + cmd), sensed, xfer_end);
        }
        self.decode(res, die, xfer_start + setup, xfer_end, bytes)
    }

    /// Decoding pipelined with the transfer: the engine starts once the first codeword has arrived and cannot
    /// finish before one decode time after the last byte.
    fn decode(&self, res: &mut Resources, die: u32, xfer_start: Time, xfer_end: Time, bytes: u64) -> Time {
        let t = &self.timing;
        if t.t_decode == 0 || bytes == 0 {
            return xfer_end;
        }
        let cws = self.ecc.codewords(bytes);
        let first = xfer_start + t.xfer(u64::from(self.ecc.codeword_bytes).min(bytes));
        let busy = cws * t.t_decode;
        let e = res.member(self.ecc_engine, self.geo.channel_of_die(die));
        let s = res.reserve(e, first, busy);
        (s + busy).max(xfer_end + t.t_decode)
    }

    #[allow(clippy::too_many_arguments)]
    /// Programs `planes` pages at offset `page` of `die` with `bytes_per_page` moved in each; data is in controller
    /// DRAM at `ready`. Returns the end of tPROG.
    pub fn program(
        &mut self,
        res: &mut Resources,
        ledger: &mut EnergyLedger,
        ready: Time,
        die: u32,
        page: u32,
        planes: u32,
        bytes_per_page: u64,
    ) -> Time {
        let t = &self.timing;
        let ch = res.member(self.channel, self.geo.channel_of_die(die));
        let d = res.member(self.die, die);
        let bytes = bytes_per_page * u64::from(planes);
        let bus = t.t_cmd * u64::from(planes) + t.xfer(bytes);
        let t_p = t.t_prog(self.geo.page_type(page));
        let mut at = ready;
        let end = loop {
            let xs = res.timeline(ch).find(at, bus);
            let a = res.timeline(d).find(xs, bus + t_p);
            if a == xs {
                res.timeline_mut(ch).commit(xs, xs + bus);
                res.timeline_mut(d).commit(xs, xs + bus + t_p);
                break xs + bus + t_p;
            }
            at = a;
        };
        self.stats.pages_programmed += u64::from(planes);
        self.stats.multi_plane_programs += u64::from(planes > 1);
        self.stats.bytes_to_flash += bytes;
        ledger.charge(self.acc.program, self.e.program_page * f64::from(planes));
        ledger.charge(self.acc.bus, self.e.bus_byte * bytes as f64);
        end
    }

    /// On-die copyback of one page (GC without the bus): sense, then program from the page register.
    pub fn copyback(&mut self, res: &mut Resources, ledger: &mut EnergyLedger, ready: Time, die: u32, src_page: u32, dst_page: u32) -> Time {
        let t = &self.timing;
        let d = res.member(self.die, die);
        let dur = 2 * t.t_cmd + t.t_read(self.geo.page_type(src_page)) + t.t_prog(self.geo.page_type(dst_page));
        let s = res.reserve(d, ready, dur);
        self.stats.copybacks += 1;
        self.stats.pages_read += 1;
        self.stats.pages_programmed += 1;
        ledger.charge(self.acc.read, self.e.read_page);
        ledger.charge(self.acc.program, self.e.program_page);
        s + dur
    }

    /// Erases `blocks` blocks (distinct planes, multi-plane erase) on `die`.
    pub fn erase(&mut self, res: &mut Resources, ledger: &mut EnergyLedger, ready: Time, die: u32, blocks: u32) -> Time {
        let t = &self.timing;
        let d = res.member(self.die, die);
        let cmd = t.t_cmd * u64::from(blocks);
        let s = res.reserve(d, ready, cmd + t.t_erase);
        self.stats.blocks_erased += u64::from(blocks);
        ledger.charge(self.acc.erase, self.e.erase_block * f64::from(blocks));
        s + cmd + t.t_erase
    }

    /// The die resource group (extensions that compute beside the dies reserve these too).
    pub fn die_group(&self) -> GroupId {
        self.die
    }

    pub fn channel_group(&self) -> GroupId {
        self.channel
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{load_preset, DeviceConfig};

    pub(super) fn setup(overrides: &[(&str, &str)]) -> (NandArray, Resources, EnergyLedger) {
        let mut tree = load_preset("cosmos-plus").unwrap();
        for (k, v) in overrides {
            tree.set(k, v).unwrap();
        }
        let cfg = DeviceConfig::from_tree(&tree).unwrap();
        let mut res = Resources::new();
        let mut led = EnergyLedger::new();
        let n = NandArray::new(&cfg, &mut res, &mut led);
        (n, res, led)
    }

    #[test]
    fn single_read_is_the_sum_of_its_parts() {
        let (mut n, mut res, mut led) = setup(&[("cache_read", "false"), ("t_decode", "0us")]);
        let t = n.timing.clone();
        let done = n.read(&mut res, &mut led, 1000, 0, 0, &[4096], EccOutcome::Corrected);
        assert_eq!(done, 1000 + t.t_cmd + t.t_read(0) + t.xfer(4096));
    }

    #[test]
    fn decode_adds_one_codeword_after_the_transfer() {
        let (mut n, mut res, mut led) = setup(&[("cache_read", "false")]);
        let t = n.timing.clone();
        let done = n.read(&mut res, &mut led, 0, 0, 0, &[4096], EccOutcome::Corrected);
        assert_eq!(done, t.t_cmd + t.t_read(0) + t.xfer(4096) + t.t_decode);
    }

    #[test]
    fn cache_read_overlaps_sensing_with_transfer() {
        let pages = 32usize;
        let run = |cache: &str| {
            let (mut n, mut res, mut led) = setup(&[("cache_read", cache), ("t_decode", "0us")]);
            let done: Vec<u64> =
                (0..pages).map(|p| n.read(&mut res, &mut led, 0, 0, p as u32, &[16384], EccOutcome::Corrected)).collect();
            (done, n.timing.clone())
        };
        let (plain, t) = run("false");
        let (cached, _) = run("true");
        let x = t.xfer(16384);
        let tr = t.t_read(0);
        // Without cache read a page costs cmd + tR + transfer.
        assert_eq!(plain[pages - 1], pages as u64 * (t.t_cmd + tr + x));
        // With it, queued pages pipeline: one page per max(sensing, draining), after a plain first read.
        assert_eq!(cached[0], t.t_cmd + tr + x, "an idle die serves a plain read");
        let period = (tr + t.t_cache_xfer).max(t.t_cache_xfer + x);
        let steady = (cached[pages - 1] - cached[2]) as f64 / (pages - 3) as f64;
        assert!((steady / period as f64 - 1.0).abs() < 0.02, "period {steady} expected {period}");
        assert!(cached[pages - 1] < plain[pages - 1]);
    }

    #[test]
    fn multi_plane_read_shares_one_sense() {
        let (mut n, mut res, mut led) = setup(&[("cache_read", "false"), ("t_decode", "0us")]);
        let t = n.timing.clone();
        let done = n.read(&mut res, &mut led, 0, 3, 0, &[16384, 16384], EccOutcome::Corrected);
        assert_eq!(done, 2 * t.t_cmd + t.t_read(0) + t.xfer(32768));
        assert_eq!(n.stats.multi_plane_reads, 1);
        assert_eq!(n.stats.pages_read, 2);
    }

    #[test]
    fn dies_on_one_channel_share_the_bus() {
        let (mut n, mut res, mut led) = setup(&[("cache_read", "false"), ("t_decode", "0us")]);
        let t = n.timing.clone();
        // Dies 0 and 8 are both on channel 0; their transfers serialise after overlapping senses.
        let a = n.read(&mut res, &mut led, 0, 0, 0, &[16384], EccOutcome::Corrected);
        let b = n.read(&mut res, &mut led, 0, 8, 0, &[16384], EccOutcome::Corrected);
        assert_eq!(a, t.t_cmd + t.t_read(0) + t.xfer(16384));
        assert_eq!(b, a + t.xfer(16384));
    }

    #[test]
    fn data_first_arbitration_holds_a_new_command_behind_a_data_out() {
        let run = |policy: &str| {
            let (mut n, mut res, mut led) = setup(&[("cache_read", "false"), ("t_decode", "0us"), ("channel_arbitration", policy)]);
            let t = n.timing.clone();
            let first = n.read(&mut res, &mut led, 0, 0, 0, &[16384], EccOutcome::Corrected);
            // Die 8 shares channel 0; its read arrives as die 0's data-out begins.
            let second = n.read(&mut res, &mut led, t.t_cmd + t.t_read(0), 8, 0, &[16384], EccOutcome::Corrected);
            (first, second, t)
        };
        let (f, s, t) = run("interleave");
        assert_eq!(f, t.t_cmd + t.t_read(0) + t.xfer(16384));
        let sensed = 2 * (t.t_cmd + t.t_read(0));
        assert_eq!(s, sensed.max(f) + t.xfer(16384), "the command slips in: sensing overlaps the data-out");
        let (f2, s2, _) = run("data_first");
        assert_eq!(f2, f, "an idle channel takes the command at once");
        assert_eq!(s2, f + t.t_cmd + t.t_read(0) + t.xfer(16384), "the command waits for the data-out");
        assert!(s2 > s);
    }

    #[test]
    fn mqsim_tsu_sends_no_command_while_a_sensed_page_waits() {
        // Channel 0 (dies 8, 16, 24 on it). Die 16's read is booked first and puts its 16 KiB data-out at
        // [F + cmd + tR, + X). Die 8's read senses X/2 before that data-out starts: its page cannot fit in the gap
        // and waits until [F + cmd + tR + X, + X). Die 24's read arrives while that page waits, the channel idle.
        let run = |policy: &str| {
            let (mut n, mut res, mut led) = setup(&[("cache_read", "false"), ("t_decode", "0us"), ("channel_arbitration", policy)]);
            let t = n.timing.clone();
            let (c, tr, x) = (t.t_cmd, t.t_read(0), t.xfer(16384));
            let f = 2 * x;
            let a = n.read(&mut res, &mut led, f, 16, 0, &[16384], EccOutcome::Corrected);
            let b = n.read(&mut res, &mut led, f - x / 2, 8, 0, &[16384], EccOutcome::Corrected);
            let waiting_from = f - x / 2 + c + tr;
            let q = n.read(&mut res, &mut led, waiting_from + 1000, 24, 0, &[16384], EccOutcome::Corrected);
            ((a, b, q), (c, tr, x, f))
        };
        let ((a, b, q), (c, tr, x, f)) = run("data_first");
        assert_eq!(a, f + c + tr + x);
        assert_eq!(b, f + c + tr + 2 * x, "the page waits behind the booked data-out");
        assert_eq!(q, f + c + tr + 3 * x, "data_first: the command slips into the idle channel, its page queues");
        let ((a2, b2, q2), _) = run("mqsim_tsu");
        assert_eq!((a2, b2), (a, b));
        // MQSim: the scheduler issues only on a channel-idle event with no data-out waiting, i.e. once die 8's
        // page has left: command at f + c + tr + 2x, then tR and the transfer.
        assert_eq!(q2, f + c + tr + 2 * x + c + tr + x, "mqsim_tsu: the command waits for the waiting page");
        let (_, _, q3) = run("interleave").0;
        assert!(q3 <= q && q <= q2);
    }

    #[test]
    fn mqsim_tsu_joins_a_queued_read_of_another_plane_into_one_multi_plane_read() {
        // Die 0: a read of page 0 keeps the die busy; a read of page 2, plane 0, queues behind it; a read of page 2,
        // plane 1, arrives while that one still waits for its command. MQSim's scheduler sends both planes in one
        // command: one tR, the second data-out right after the first.
        let run = |policy: &str, mask: u32, third_ready: Time| {
            let (mut n, mut res, mut led) = setup(&[("cache_read", "false"), ("t_decode", "0us"), ("channel_arbitration", policy)]);
            let t = n.timing.clone();
            let b = 16384;
            let first = n.read_on_planes(&mut res, &mut led, 0, 0, 0, 1, &[b], false, EccOutcome::Corrected);
            let second = n.read_on_planes(&mut res, &mut led, 0, 0, 2, 1, &[b], false, EccOutcome::Corrected);
            let third = n.read_on_planes(&mut res, &mut led, third_ready, 0, 2, mask, &[b], false, EccOutcome::Corrected);
            let (c, x) = (t.t_cmd, t.xfer(b));
            let tr = |p: u32| t.t_read(n.geo.page_type(p));
            assert_eq!(first, c + tr(0) + x);
            assert_eq!(second, first + c + tr(2) + x);
            (second, third, c + tr(2) + x, x)
        };
        let (second, third, one, x) = run("mqsim_tsu", 2, 1000);
        assert_eq!(third, second + x, "joined: shares the sensing, its data-out follows");
        let (second, third, ..) = run("data_first", 2, 1000);
        assert_eq!(third, second + one, "data_first: a read of its own after the queued one");
        let (second, third, ..) = run("mqsim_tsu", 0, 1000);
        assert_eq!(third, second + one, "planes not named: no join");
        let (second, third, ..) = run("mqsim_tsu", 1, 1000);
        assert_eq!(third, second + one, "same plane: no join");
        // 200 us: after the second read's command (sent when the first read ends, at about 142 us).
        let (second, third, ..) = run("mqsim_tsu", 2, 200_000);
        assert_eq!(third, second + one, "the command was sent before the read arrived: no join");
    }

    #[test]
    fn data_out_waits_merge_and_find_gaps() {
        let mut w = DataOutWaits::default();
        w.insert(100, 200);
        w.insert(300, 400);
        assert_eq!(w.first_free(0, 100), 0, "fits before the first span");
        assert_eq!(w.first_free(50, 60), 200, "overlaps [100, 200), fits after it");
        assert_eq!(w.first_free(0, 101), 400, "overlaps [100, 200), then does not fit before [300, 400)");
        assert_eq!(w.first_free(150, 10), 200);
        assert_eq!(w.first_free(200, 100), 200, "fits exactly between the spans");
        assert_eq!(w.first_free(200, 101), 400);
        w.insert(190, 310); // joins both
        assert_eq!(w.spans.len(), 1);
        assert_eq!(w.first_free(120, 1), 400);
        w.insert(400, 410); // adjacent: merged
        assert_eq!(w.spans.iter().next(), Some((&100, &410)));
        w.insert(50, 50); // empty: ignored
        assert_eq!(w.spans.len(), 1);
        // Old spans are dropped once a span ends far enough after them.
        w.insert(DataOutWaits::KEEP_NS + 1000, DataOutWaits::KEEP_NS + 2000);
        assert_eq!(w.spans.len(), 1);
    }

    #[test]
    fn retries_and_soft_decode_cost_extra_reads() {
        let (mut n, mut res, mut led) = setup(&[("cache_read", "false"), ("t_decode", "0us")]);
        let t = n.timing.clone();
        let one = t.t_cmd + t.t_read(0) + t.xfer(4096);
        let done = n.read(&mut res, &mut led, 0, 0, 0, &[4096], EccOutcome::SoftDecoded(4));
        assert_eq!(done, 5 * one + t.t_soft_decode);
        assert_eq!((n.stats.read_retries, n.stats.soft_decodes), (4, 1));
    }

    #[test]
    fn program_and_erase_occupy_the_die() {
        let (mut n, mut res, mut led) = setup(&[]);
        let t = n.timing.clone();
        let p = n.program(&mut res, &mut led, 0, 0, 0, 2, 16384);
        assert_eq!(p, 2 * t.t_cmd + t.xfer(32768) + t.t_prog(0));
        let e = n.erase(&mut res, &mut led, 0, 0, 1);
        assert_eq!(e, p + t.t_cmd + t.t_erase);
        assert!(led.total_dynamic_joules() > 0.0);
    }
}
