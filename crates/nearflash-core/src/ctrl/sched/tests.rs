//! The scheduler and the array together, each expectation derived by hand from the preset's parameters (cosmos-plus:
//! 8 channels, die d on channel d % 8, two planes, tR 60 us, tPROG 1300 us, tBERS 3.5 ms, 200 MB/s channels).

use super::suspend::{Rule, Rules};
use super::*;
use crate::config::{load_preset, DeviceConfig};
use crate::engine::{EventQueue, Resources};
use crate::nand::{EccOutcome, NandTiming};

struct Rig {
    nand: NandArray,
    sched: Scheduler,
    res: Resources,
    led: EnergyLedger,
    q: EventQueue<SchedEv>,
    done: Vec<(u32, Time)>,
    tokens: u32,
}

fn rig_with(overrides: &[(&str, &str)], order: Order, suspend: Option<Rules>, gc: Level) -> Rig {
    let mut tree = load_preset("cosmos-plus").unwrap();
    for (k, v) in overrides {
        tree.set(k, v).unwrap();
    }
    let cfg = DeviceConfig::from_tree(&tree).unwrap();
    let mut res = Resources::new();
    let mut led = EnergyLedger::new();
    let nand = NandArray::new(&cfg, &mut res, &mut led);
    let sc = SchedConfig { order, tsu: nand.timing.data_outs_first, multi_plane: nand.timing.multi_plane, suspend };
    let sched = Scheduler::new(sc, ClassTable::new([4, 2, 1], gc), &nand, &mut led);
    Rig { nand, sched, res, led, q: EventQueue::new(), done: Vec::new(), tokens: 0 }
}

fn rig(overrides: &[(&str, &str)]) -> Rig {
    rig_with(overrides, Order::ReadFirst, None, Level::Normal)
}

const PLAIN: [(&str, &str); 2] = [("cache_read", "false"), ("t_decode", "0us")];

impl Rig {
    fn t(&self) -> NandTiming {
        self.nand.timing.clone()
    }

    fn submit(&mut self, at: Time, req: TxnReq) -> u32 {
        self.tokens += 1;
        let token = self.tokens;
        self.sched.submit(req, token, at, &mut self.q);
        token
    }

    /// Runs events up to `until`.
    fn run_to(&mut self, until: Time) {
        while self.q.peek_time().is_some_and(|t| t <= until) {
            let (t, e) = self.q.pop().unwrap();
            self.sched.handle(e, t, &mut self.nand, &mut self.res, &mut self.led, &mut self.q, &mut self.done);
        }
    }

    fn run(&mut self) {
        self.run_to(Time::MAX);
    }

    fn done_at(&self, token: u32) -> Time {
        self.done.iter().find(|d| d.0 == token).unwrap_or_else(|| panic!("token {token} not done")).1
    }
}

fn read(die: u32, page: u32, plane: u32, bytes: u64) -> TxnReq {
    TxnReq::read(die, page, plane, bytes, Priority::Medium.class())
}

#[test]
fn a_single_read_is_the_sum_of_its_parts() {
    let mut r = rig(&PLAIN);
    let t = r.t();
    let a = r.submit(Time::from_ns(1000), read(0, 0, 0, 4096));
    r.run();
    assert_eq!(r.done_at(a), Time::from_ns(1000 + t.t_cmd + t.t_read(0) + t.xfer(4096)));
}

#[test]
fn decode_adds_one_codeword_after_the_transfer_and_soft_decode_and_retries_cost_more() {
    let mut r = rig(&[("cache_read", "false")]);
    let t = r.t();
    let a = r.submit(Time::ZERO, read(0, 0, 0, 4096));
    r.run();
    let one = t.t_cmd + t.t_read(0) + t.xfer(4096);
    assert_eq!(r.done_at(a), Time::from_ns(one + t.t_decode));
    let mut r = rig(&PLAIN);
    let o = EccOutcome::SoftDecoded(4);
    let b = r.submit(Time::ZERO, TxnReq { senses: 1 + o.retries(), soft: o.soft_decoded(), ..read(0, 0, 0, 4096) });
    r.run();
    assert_eq!(r.done_at(b), Time::from_ns(5 * one + t.t_soft_decode), "four retries: five sensings and transfers, then the soft decode");
    assert_eq!(r.nand.stats.read_ops, 5);
}

#[test]
fn dies_on_one_channel_share_the_bus() {
    let mut r = rig(&PLAIN);
    let t = r.t();
    // Dies 0 and 8 are both on channel 0: their senses overlap, their transfers serialise.
    let a = r.submit(Time::ZERO, read(0, 0, 0, 16384));
    let b = r.submit(Time::ZERO, read(8, 0, 0, 16384));
    r.run();
    let x = t.xfer(16384);
    assert_eq!(r.done_at(a), Time::from_ns(t.t_cmd + t.t_read(0) + x));
    assert_eq!(r.done_at(b), r.done_at(a) + x);
}

#[test]
fn reads_of_one_page_offset_in_two_planes_are_one_multi_plane_read() {
    let mut r = rig(&PLAIN);
    let t = r.t();
    // Die 3 is busy with page 4; reads of page 0 on planes 0 and 1 (two requests) queue and go out as one command.
    let first = r.submit(Time::ZERO, read(3, 4, 0, 16384));
    let a = r.submit(Time::from_ns(10), read(3, 0, 0, 16384));
    let b = r.submit(Time::from_ns(20), read(3, 0, 1, 16384));
    r.run();
    let x = t.xfer(16384);
    let d0 = r.done_at(first);
    assert_eq!(r.done_at(a), d0 + 2 * t.t_cmd + t.t_read(0) + x, "two command times, one tR");
    assert_eq!(r.done_at(b), r.done_at(a) + x, "the second plane's data-out follows");
    assert_eq!((r.nand.stats.read_ops, r.nand.stats.multi_plane_reads, r.nand.stats.pages_read), (2, 1, 3));
}

#[test]
fn cache_read_overlaps_sensing_with_the_previous_pages_transfer() {
    let pages = 16u32;
    let run = |cache: &str| {
        let mut r = rig(&[("cache_read", cache), ("t_decode", "0us")]);
        let tokens: Vec<u32> = (0..pages).map(|p| r.submit(Time::ZERO, read(0, p, 0, 16384))).collect();
        r.run();
        (tokens.iter().map(|&k| r.done_at(k)).collect::<Vec<Time>>(), r.t())
    };
    let (plain, t) = run("false");
    let (cached, _) = run("true");
    let (c, x, cx) = (t.t_cmd, t.xfer(16384), t.t_cache_xfer);
    // Pages alternate LSB/MSB read times. Without cache read a page costs cmd + tR + transfer.
    let plain_total: u64 = (0..pages).map(|p| c + t.t_read(p as usize % 2) + x).sum();
    assert_eq!(plain[pages as usize - 1], Time::from_ns(plain_total));
    // With it (the transfer, 82 us, longer than cmd + tR): the first page moves to the cache register when sensed
    // (a read waits), and from then on the channel is the bound: a page every t_cache_xfer + transfer.
    assert_eq!(cached[0], Time::from_ns(c + t.t_read(0) + cx + x));
    let n = pages as usize;
    for w in cached[..n - 1].windows(2) {
        assert_eq!(w[1] - w[0], cx + x);
    }
    // The last read finds no read waiting: a plain read, its data-out right after the previous one's.
    assert_eq!(cached[n - 1] - cached[n - 2], x);
    assert!(cached[pages as usize - 1] < plain[pages as usize - 1]);
}

#[test]
fn a_program_moves_its_data_in_then_programs_and_an_erase_holds_the_die() {
    let mut r = rig(&PLAIN);
    let t = r.t();
    let p = r.submit(Time::ZERO, TxnReq::program(0, 0, 2, 32768, Priority::Medium.class()));
    let e = r.submit(Time::ZERO, TxnReq::erase(0, 1, GC));
    r.run();
    assert_eq!(r.done_at(p), Time::from_ns(2 * t.t_cmd + t.xfer(32768) + t.t_prog(0)));
    assert_eq!(r.done_at(e), r.done_at(p) + t.t_cmd + t.t_erase);
    assert_eq!((r.nand.stats.pages_programmed, r.nand.stats.multi_plane_programs, r.nand.stats.blocks_erased), (2, 1, 1));
}

#[test]
fn data_first_arbitration_holds_a_new_command_behind_a_data_out() {
    let run = |policy: &str| {
        let mut r = rig(&[PLAIN[0], PLAIN[1], ("channel_arbitration", policy)]);
        let t = r.t();
        let a = r.submit(Time::ZERO, read(0, 0, 0, 16384));
        // Die 8 shares channel 0; its read arrives just after die 0's data-out began.
        let b = r.submit(Time::from_ns(t.t_cmd + t.t_read(0) + 1), read(8, 0, 0, 16384));
        r.run();
        (r.done_at(a), r.done_at(b), t)
    };
    let (f, s, t) = run("interleave");
    let x = t.xfer(16384);
    assert_eq!(f, Time::from_ns(t.t_cmd + t.t_read(0) + x));
    assert_eq!(s, Time::from_ns((2 * (t.t_cmd + t.t_read(0)) + 1).max(f.as_ns()) + x), "the command slips in: sensing overlaps the data-out");
    let (f2, s2, _) = run("data_first");
    assert_eq!(f2, f, "an idle channel takes the command at once");
    assert_eq!(s2, f + t.t_cmd + t.t_read(0) + x, "the command waits for the data-out");
}

/// MQSim's transaction scheduling unit (`nand.channel_arbitration = mqsim_tsu`).
mod tsu {
    use super::*;

    const TSU: [(&str, &str); 3] = [("cache_read", "false"), ("t_decode", "0us"), ("channel_arbitration", "mqsim_tsu")];

    #[test]
    fn a_read_queued_on_its_die_is_sent_after_pages_sensed_while_it_waited() {
        // Channel 0 holds dies 0 and 8. Read 1 occupies die 0 until D1 = c + tR + x; read 2 for die 0 arrives
        // meanwhile and waits in the die's queue; read 3 for die 8 arrives at x/2 and its page is sensed during read 1's
        // data-out. When the channel frees at D1, read 3's waiting page goes out first, then read 2's command.
        let mut r = rig(&TSU);
        let t = r.t();
        let (c, tr, x) = (t.t_cmd, t.t_read(0), t.xfer(4096));
        assert!(x / 2 > c && c > 0);
        let r1 = r.submit(Time::ZERO, read(0, 0, 0, 4096));
        let r2 = r.submit(Time::from_ns(1000), read(0, 0, 1, 4096));
        let r3 = r.submit(Time::from_ns(x / 2), read(8, 0, 0, 4096));
        r.run();
        let d1 = c + tr + x;
        assert_eq!(r.done_at(r1), Time::from_ns(d1));
        assert_eq!(r.done_at(r3), Time::from_ns(d1 + x), "read 3's page waited for read 1's data-out only");
        assert_eq!(r.done_at(r2), Time::from_ns(d1 + x + c + tr + x), "read 2's command after read 3's data-out");
    }

    #[test]
    fn a_freed_channel_serves_its_dies_round_robin_not_in_arrival_order() {
        // Dies 0, 8 and 16 share channel 0. Read 1 (die 8) takes the channel at 0; reads for die 0 (at 1 ns) and die
        // 16 (at 2 ns) arrive while its command is on the bus. When the command ends the walk resumes after die 8:
        // die 16 is sent before die 0.
        let mut r = rig(&TSU);
        let t = r.t();
        let (c, tr, x) = (t.t_cmd, t.t_read(0), t.xfer(4096));
        let a = r.submit(Time::ZERO, read(8, 0, 0, 4096));
        let b = r.submit(Time::from_ns(1), read(0, 0, 0, 4096));
        let d = r.submit(Time::from_ns(2), read(16, 0, 0, 4096));
        r.run();
        assert_eq!(r.done_at(a), Time::from_ns(c + tr + x));
        assert_eq!(r.done_at(d), Time::from_ns(c + tr + 2 * x), "die 16: command at c, its page waits for read 1's data-out");
        assert_eq!(r.done_at(b), Time::from_ns(c + tr + 3 * x), "die 0: command at 2c, its page after die 16's");
    }

    #[test]
    fn one_command_reads_every_queued_page_of_the_die_at_the_first_pages_offset() {
        let mut r = rig(&TSU);
        let t = r.t();
        let (c, x) = (t.t_cmd, t.xfer(16384));
        let geo = r.nand.geo.clone();
        let tr = |p: u32| t.t_read(geo.page_type(p));
        let k: Vec<u32> = [(0, 0, 0), (10, 2, 0), (20, 4, 1), (30, 2, 1)]
            .iter()
            .map(|&(at, page, plane)| r.submit(Time::from_ns(at), read(0, page, plane, 16384)))
            .collect();
        r.run();
        let done: Vec<Time> = k.iter().map(|&k| r.done_at(k)).collect();
        assert_eq!(done[0], Time::from_ns(c + tr(0) + x));
        assert_eq!(done[1], done[0] + 2 * c + tr(2) + x, "two-plane command: two command times, one tR");
        assert_eq!(done[3], done[1] + x, "the second plane's data-out follows");
        assert_eq!(done[2], done[3] + c + tr(4) + x);
        assert_eq!((r.nand.stats.read_ops, r.nand.stats.multi_plane_reads, r.nand.stats.pages_read), (3, 1, 4));
    }
}

#[test]
fn an_urgent_read_behind_low_priority_reads_waits_for_at_most_the_operation_in_progress() {
    let mut r = rig(&PLAIN);
    let t = r.t();
    let one = t.t_cmd + t.t_read(0) + t.xfer(4096);
    let low: Vec<u32> = (0..5).map(|_| r.submit(Time::ZERO, TxnReq::read(0, 0, 0, 4096, Priority::Low.class()))).collect();
    let urgent = r.submit(Time::from_ns(1), TxnReq::read(0, 0, 0, 4096, Priority::Urgent.class()));
    r.run();
    assert_eq!(r.done_at(low[0]), Time::from_ns(one), "the first low read was issued at once");
    assert_eq!(r.done_at(urgent), Time::from_ns(2 * one), "the urgent read follows the read in progress");
    for (i, &k) in low.iter().enumerate().skip(1) {
        assert_eq!(r.done_at(k), Time::from_ns((i as u64 + 2) * one));
    }
}

#[test]
fn weighted_round_robin_serves_high_four_to_one_over_low() {
    let mut r = rig(&PLAIN);
    let t = r.t();
    let one = t.t_cmd + t.t_read(0) + t.xfer(4096);
    // A high read takes the die first (the first of high's turn of 4); then 10 high and 10 low reads wait, and are
    // served 3 high (the rest of the turn), 1 low, 4 high, 1 low, ...
    let busy = r.submit(Time::ZERO, TxnReq::read(0, 0, 0, 4096, Priority::High.class()));
    let high: Vec<u32> = (0..10).map(|_| r.submit(Time::from_ns(1), TxnReq::read(0, 0, 0, 4096, Priority::High.class()))).collect();
    let low: Vec<u32> = (0..10).map(|_| r.submit(Time::from_ns(1), TxnReq::read(0, 0, 0, 4096, Priority::Low.class()))).collect();
    r.run();
    assert_eq!(r.done_at(busy), Time::from_ns(one));
    let slot = |k: u32| r.done_at(k).as_ns() / one - 1;
    assert_eq!(high.iter().map(|&k| slot(k)).collect::<Vec<_>>(), vec![1, 2, 3, 5, 6, 7, 8, 10, 11, 12]);
    assert_eq!(low.iter().map(|&k| slot(k)).collect::<Vec<_>>(), vec![4, 9, 13, 14, 15, 16, 17, 18, 19, 20]);
}

#[test]
fn read_first_lets_a_read_pass_a_queued_program_and_fifo_does_not() {
    for (order, read_first) in [(Order::ReadFirst, true), (Order::Fifo, false)] {
        let mut r = rig_with(&PLAIN, order, None, Level::Normal);
        let t = r.t();
        let busy = r.submit(Time::ZERO, read(0, 0, 0, 4096));
        let p = r.submit(Time::from_ns(1), TxnReq::program(0, 0, 1, 16384, Priority::Medium.class()));
        let rd = r.submit(Time::from_ns(2), read(0, 0, 0, 4096));
        r.run();
        let one = t.t_cmd + t.t_read(0) + t.xfer(4096);
        let prog = t.t_cmd + t.xfer(16384) + t.t_prog(0);
        assert_eq!(r.done_at(busy), Time::from_ns(one));
        if read_first {
            assert_eq!((r.done_at(rd).as_ns(), r.done_at(p).as_ns()), (2 * one, 2 * one + prog));
        } else {
            assert_eq!((r.done_at(p).as_ns(), r.done_at(rd).as_ns()), (one + prog, one + prog + one));
        }
    }
}

#[test]
fn background_gc_waits_for_host_reads_and_urgent_gc_goes_first() {
    for (gc_level, gc_first) in [(Level::Background, false), (Level::Urgent, true)] {
        let mut r = rig_with(&PLAIN, Order::ReadFirst, None, gc_level);
        let t = r.t();
        let one = t.t_cmd + t.t_read(0) + t.xfer(4096);
        let busy = r.submit(Time::ZERO, read(0, 0, 0, 4096));
        let gc = r.submit(Time::from_ns(1), TxnReq::read(0, 0, 0, 4096, GC));
        let host = r.submit(Time::from_ns(2), read(0, 0, 0, 4096));
        r.run();
        assert_eq!(r.done_at(busy), Time::from_ns(one));
        let (first, second) = if gc_first { (gc, host) } else { (host, gc) };
        assert_eq!((r.done_at(first).as_ns(), r.done_at(second).as_ns()), (2 * one, 3 * one), "{gc_level:?}");
    }
}

fn rules(max_per_op: u32) -> Rules {
    let r = Rule { t_suspend: 20_000, t_resume: 15_000, min_left: 100_000, energy_resume: 1000.0 };
    Rules { program: Some(r), erase: Some(Rule { min_left: 700_000, ..r }), programs_suspend_erases: true, max_per_op }
}

#[test]
fn a_read_suspends_a_program_and_the_program_ends_later_by_the_reads_time_and_the_resume() {
    let run = |suspend: Option<Rules>| {
        let mut r = rig_with(&PLAIN, Order::ReadFirst, suspend, Level::Normal);
        let t = r.t();
        let p = r.submit(Time::ZERO, TxnReq::program(0, 0, 1, 16384, Priority::Medium.class()));
        let arrive = t.t_cmd + t.xfer(16384) + 200_000; // 200 us into tPROG
        let rd = r.submit(Time::from_ns(arrive), read(0, 1, 0, 4096));
        r.run();
        (r.done_at(p), r.done_at(rd), arrive, t, r.sched.stats(), r.led.total_dynamic_joules())
    };
    let (p_off, rd_off, arrive, t, _, e_off) = run(None);
    let prog_end = t.t_cmd + t.xfer(16384) + t.t_prog(0);
    let read_time = t.t_cmd + t.t_read(1) + t.xfer(4096);
    assert_eq!((p_off.as_ns(), rd_off.as_ns()), (prog_end, prog_end + read_time), "off: the read waits for the program");
    let (p_on, rd_on, _, _, st, e_on) = run(Some(rules(1)));
    assert_eq!(rd_on, Time::from_ns(arrive + 20_000 + read_time), "tSUSPEND + tR + transfer after it arrived");
    assert_eq!(p_on, Time::from_ns(prog_end + read_time + 15_000), "the program moves by the read's time plus tRESUME");
    let s = &st.suspension.program;
    assert_eq!((s.suspensions, s.ops_suspended, s.max_per_op), (1, 1, 1));
    assert_eq!(s.suspended_ns, 20_000 + read_time + 15_000, "from the suspend command to the end of the resume");
    assert!((e_on - e_off - 1000e-12).abs() < 1e-15, "one resume's energy");
}

#[test]
fn suspension_respects_the_time_left_and_the_limit_per_operation() {
    let mut r = rig_with(&PLAIN, Order::ReadFirst, Some(rules(1)), Level::Normal);
    let t = r.t();
    let p = r.submit(Time::ZERO, TxnReq::program(0, 0, 1, 16384, Priority::Medium.class()));
    let start = t.t_cmd + t.xfer(16384);
    let read_time = t.t_cmd + t.t_read(1) + t.xfer(4096);
    let a = r.submit(Time::from_ns(start + 100_000), read(0, 1, 0, 4096));
    // A second read after the resume: the one suspension allowed is spent, it waits for the program.
    let resumed = start + 100_000 + 20_000 + read_time + 15_000;
    let b = r.submit(Time::from_ns(resumed + 10_000), read(0, 1, 0, 4096));
    r.run();
    let end = start + t.t_prog(0) + read_time + 15_000;
    assert_eq!(r.done_at(a), Time::from_ns(start + 100_000 + 20_000 + read_time));
    assert_eq!((r.done_at(p).as_ns(), r.done_at(b).as_ns()), (end, end + read_time));
    // Too little left: a read arriving 50 us before the end waits.
    let mut r = rig_with(&PLAIN, Order::ReadFirst, Some(rules(4)), Level::Normal);
    let p = r.submit(Time::ZERO, TxnReq::program(0, 0, 1, 16384, Priority::Medium.class()));
    let c = r.submit(Time::from_ns(start + t.t_prog(0) - 50_000), read(0, 1, 0, 4096));
    r.run();
    assert_eq!((r.done_at(p).as_ns(), r.done_at(c).as_ns()), (start + t.t_prog(0), start + t.t_prog(0) + read_time));
    assert_eq!(r.sched.stats().suspension.program.suspensions, 0);
}

#[test]
fn an_erase_is_suspended_for_reads_and_programs_waiting_when_it_stopped() {
    let mut r = rig_with(&PLAIN, Order::ReadFirst, Some(rules(2)), Level::Normal);
    let t = r.t();
    let e = r.submit(Time::ZERO, TxnReq::erase(0, 1, GC));
    let p = r.submit(Time::from_ns(1_000_000), TxnReq::program(0, 2, 1, 16384, Priority::Medium.class()));
    r.run();
    let (susp, res) = (20_000, 15_000);
    let prog = t.t_cmd + t.xfer(16384) + t.t_prog(0);
    assert_eq!(r.done_at(p), Time::from_ns(1_000_000 + susp + prog), "write-suspend-erase: the program goes in during the suspension");
    assert_eq!(r.done_at(e), Time::from_ns(t.t_cmd + t.t_erase + prog + res));
    assert_eq!(r.sched.stats().suspension.erase.suspensions, 1);
}

#[test]
fn suspension_off_and_on_give_the_same_results_when_no_read_meets_a_program() {
    let run = |suspend: Option<Rules>| {
        let mut r = rig_with(&PLAIN, Order::ReadFirst, suspend, Level::Normal);
        let mut k = Vec::new();
        for die in 0..4 {
            k.push(r.submit(Time::ZERO, read(die, 0, 0, 4096)));
            k.push(r.submit(Time::ZERO, TxnReq::program(die, 1, 2, 32768, Priority::Medium.class())));
            // Reads on other dies than the programs' while they run.
            k.push(r.submit(Time::from_ns(1_000), read(die + 4, 3, 1, 8192)));
        }
        r.run();
        (k.iter().map(|&k| r.done_at(k)).collect::<Vec<_>>(), r.led.total_dynamic_joules())
    };
    assert_eq!(run(None), run(Some(rules(3))));
}

/// Eight dies of channel 0 (0, 8, ..., 56) sense a 16 KiB page each, all submitted at once, die 8i's read of class
/// `class(i)`; their data-outs then wait for the channel. Returns each read's slot on the channel: the first data-out
/// goes as soon as its sensing ends (alone in line: die 0's), each later one a transfer time after the one before.
fn channel_slots(gc: Level, class: impl Fn(u32) -> ClassId) -> Vec<u64> {
    let mut r = rig_with(&PLAIN, Order::ReadFirst, None, gc);
    let t = r.t();
    let (x, sensed) = (t.xfer(16384), t.t_cmd + t.t_read(0));
    let reads: Vec<u32> = (0..8).map(|i| r.submit(Time::ZERO, TxnReq::read(8 * i, 0, 0, 16384, class(i)))).collect();
    r.run();
    reads.iter().map(|&k| (r.done_at(k).as_ns() - sensed) / x).collect()
}

#[test]
fn a_channel_hands_its_transfers_to_the_classes_by_weight_and_one_class_keeps_arrival_order() {
    // Low reads (weight 1) on the first four dies were submitted before medium reads (weight 2) on the last four.
    // After die 0's low page the channel's turns give medium 2, low 1, medium 2, low the rest: slots low, m, m, low,
    // m, m, low, low. In arrival order the four low pages would go first.
    let low_then_medium = |i: u32| if i < 4 { Priority::Low.class() } else { Priority::Medium.class() };
    assert_eq!(channel_slots(Level::Normal, low_then_medium), vec![1, 4, 7, 8, 2, 3, 5, 6]);
    // The same eight reads in one class go out in arrival order.
    assert_eq!(channel_slots(Level::Normal, |_| Priority::Medium.class()), (1..=8).collect::<Vec<_>>());
    // An urgent page waiting beside them goes next, whatever waited before it.
    let last_urgent = |i: u32| if i == 7 { Priority::Urgent.class() } else { Priority::Medium.class() };
    assert_eq!(channel_slots(Level::Normal, last_urgent), vec![1, 3, 4, 5, 6, 7, 8, 2]);
}

#[test]
fn gc_takes_host_mediums_turn_on_a_channel_unless_it_is_background() {
    // GC at the normal level (controller.gc_priority = equal) shares host-medium's turn on a channel: GC pages on the
    // first four dies and medium pages on the last four go out in arrival order, as one class would.
    let gc_then_medium = |i: u32| if i < 4 { GC } else { Priority::Medium.class() };
    assert_eq!(channel_slots(Level::Normal, gc_then_medium), (1..=8).collect::<Vec<_>>());
    // Background GC (gc_priority = background) gets the channel only while no other transfer waits: die 0's GC page
    // goes first (alone in line), then the four medium pages, then the other three GC pages.
    assert_eq!(channel_slots(Level::Background, gc_then_medium), vec![1, 6, 7, 8, 2, 3, 4, 5]);
    // Beside low (weight 1) GC turns as medium (weight 2): after die 0's GC page (alone in line, no turn charged),
    // GC 1 and 2, low 4, GC 3, then the low pages.
    let gc_then_low = |i: u32| if i < 4 { GC } else { Priority::Low.class() };
    assert_eq!(channel_slots(Level::Normal, gc_then_low), vec![1, 2, 3, 5, 4, 6, 7, 8]);
}

#[test]
fn a_data_out_reaching_a_free_channel_starts_at_once_and_ties_at_one_ns_keep_their_order() {
    let mut r = rig(&PLAIN);
    let t = r.t();
    let (s, x4, x16) = (t.t_cmd + t.t_read(0), t.xfer(4096), t.xfer(16384));
    // Die 0's 4 KiB transfer ends at s + x4. Die 8 (same channel) arrives at x4, so its sensing also ends at s + x4,
    // and its event was scheduled first (at x4 < s): it finds the channel still moving die 0's page and queues; die
    // 0's transfer end then starts it at that same nanosecond.
    let a = r.submit(Time::ZERO, read(0, 0, 0, 4096));
    let b = r.submit(Time::from_ns(x4), read(8, 0, 0, 16384));
    r.run();
    assert_eq!(r.done_at(a), Time::from_ns(s + x4));
    assert_eq!(r.done_at(b), Time::from_ns(s + x4 + x16));
    // The other order at the same nanosecond: die 8 arrives after die 0's sensing ended (its sensing's end is
    // scheduled after die 0's transfer end), so the channel is free when it ends and its data-out starts at once.
    let mut r = rig(&PLAIN);
    let d = s + 1000;
    let a = r.submit(Time::ZERO, read(0, 0, 0, 4096));
    let b = r.submit(Time::from_ns(d), read(8, 0, 0, 16384));
    let c = r.submit(Time::from_ns(d), read(16, 0, 0, 4096));
    r.run();
    assert_eq!(r.done_at(a), Time::from_ns(s + x4));
    assert_eq!(r.done_at(b), Time::from_ns(d + s + x16), "die 8's data-out found the channel free");
    assert_eq!(r.done_at(c), Time::from_ns(d + s + x16 + x4), "die 16's sensing ended with die 8's: it waits for the channel");
}

/// A die with only one class's reads queued takes the one `pick` would, with the same turns charged and the same
/// queues left (`take_lone_class_read`), under both orders, for every class (levels urgent, normal and GC's),
/// whichever class took the die before.
#[test]
fn a_lone_class_read_is_what_pick_takes() {
    let classes = [Priority::Urgent.class(), Priority::High.class(), Priority::Medium.class(), Priority::Low.class(), GC, GC_URGENT];
    for order in [Order::ReadFirst, Order::Fifo] {
        for gc in [Level::Normal, Level::Background] {
            for &before in &classes {
                for &queued in &classes {
                    let make = || {
                        let mut r = rig_with(&PLAIN, order, None, gc);
                        r.submit(Time::ZERO, TxnReq::read(0, 0, 0, 4096, before));
                        for i in 0..7 {
                            r.submit(Time::from_ns(1), TxnReq::read(0, i % 3, i % 2, 4096, queued));
                        }
                        r.run_to(Time::from_ns(1));
                        r
                    };
                    let (mut fast, mut general) = (make(), make());
                    let state = |s: &Scheduler| format!("{:?} {:?}", s.dies[0].with_work, s.dies[0].turns);
                    for _ in 0..7 {
                        let reads = fast.sched.dies[0].with_work[READ];
                        assert!(reads.is_power_of_two(), "one class's reads queued");
                        let a = fast.sched.take_lone_class_read(0, reads);
                        let b = general.sched.pick(0, ALL_KINDS, u32::MAX, u64::MAX);
                        assert_eq!(Some(a), b, "{order:?}, GC {gc:?}, {before:?} then {queued:?}");
                        assert_eq!(state(&fast.sched), state(&general.sched));
                    }
                    assert_eq!(fast.sched.dies[0].with_work, [0; KINDS]);
                }
            }
        }
    }
}
