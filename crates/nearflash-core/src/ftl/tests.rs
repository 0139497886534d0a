//! FTL behaviour: a model-based check against a plain map, GC at full occupancy, preconditioning, recovery.

use super::*;
use crate::config::{load_preset, DeviceConfig};
use crate::engine::Time;
use crate::image::Image;
use proptest::prelude::*;
use std::collections::BTreeMap;

/// A small cosmos-plus (4 dies, 8 planes, 32 blocks of 16 pages) so that GC runs within a test.
fn small_tree(extra: &[(&str, &str)]) -> crate::config::ConfigTree {
    let mut t = load_preset("cosmos-plus").unwrap();
    for (k, v) in [
        ("channels", "2"),
        ("chips_per_channel", "2"),
        ("planes_per_die", "2"),
        ("blocks_per_plane", "32"),
        ("pages_per_block", "16"),
        ("over_provisioning", "25"),
        ("gc_start_free_blocks", "3"),
        ("gc_stop_free_blocks", "4"),
    ]
    .iter()
    .chain(extra)
    {
        t.set(k, v).unwrap();
    }
    t
}

pub(crate) fn small_config(extra: &[(&str, &str)]) -> DeviceConfig {
    DeviceConfig::from_tree(&small_tree(extra)).unwrap()
}

fn memory_ftl(cfg: &DeviceConfig) -> Ftl {
    Ftl::new(cfg, Image::memory_store(cfg, true, None).unwrap()).unwrap()
}

fn sector(cfg: &DeviceConfig, lpn: u32, version: u32) -> Vec<u8> {
    let n = cfg.ftl.sector_size.0 as usize;
    (0..n).map(|i| (lpn as usize * 31 + version as usize * 7 + i) as u8).collect()
}

fn read(ftl: &Ftl, lpn: u32) -> Vec<u8> {
    let mut out = vec![0u8; ftl.geo.sector_size as usize];
    assert!(ftl.read_sector(ftl.locate(lpn), &mut out).unwrap(), "checksum failed for {lpn}");
    out
}

#[derive(Debug, Clone)]
enum Op {
    Write(u32),
    Trim(u32, u32),
    Flush,
    /// A read (with `ftl.unmapped_read = allocate`: a never-written sector gets a page first).
    Read(u32),
}

fn ops(max_lpn: u32) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        8 => (0..max_lpn).prop_map(Op::Write),
        1 => (0..max_lpn, 1u32..8).prop_map(|(l, n)| Op::Trim(l, n)),
        1 => Just(Op::Flush),
        2 => (0..max_lpn).prop_map(Op::Read),
    ];
    prop::collection::vec(op, 1..4000)
}

/// A tiny device (3,072 physical sectors) so that GC runs within a test case: multi-plane programs, copyback and
/// incremental pacing as asked, then `extra`.
fn tiny_config(mp: bool, copyback: bool, paced: bool, extra: &[(&str, &str)]) -> DeviceConfig {
    let flag = |b: bool| if b { "true" } else { "false" };
    let base = [
        ("multi_plane", flag(mp)),
        ("gc_copyback", flag(copyback)),
        ("blocks_per_plane", "12"),
        ("pages_per_block", "8"),
        ("over_provisioning", "45"),
        ("gc_stop_free_blocks", "3"),
        ("gc_pacing", if paced { "incremental" } else { "blocking" }),
    ];
    small_config(&[&base[..], extra].concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Whatever the sequence of writes, trims, flushes and reads (GC included, reads of never-written sectors
    /// allocating pages or not), every sector reads back as last written.
    #[test]
    fn matches_a_plain_map(
        seq in ops(600),
        allocate in any::<bool>(),
        mp in any::<bool>(),
        copyback in any::<bool>(),
        paced in any::<bool>(),
        policy in prop::sample::select(vec!["greedy", "rga", "random", "fifo"]),
    ) {
        let cfg = tiny_config(mp, copyback, paced, &[
            ("gc_policy", policy),
            ("unmapped_read", if allocate { "allocate" } else { "zeroes" }),
        ]);
        let mut ftl = memory_ftl(&cfg);
        let mut model: BTreeMap<u32, u32> = BTreeMap::new();
        let mut version = 0;
        let writes = seq.iter().filter(|o| matches!(o, Op::Write(_))).count();
        for op in seq {
            match op {
                Op::Write(l) => {
                    version += 1;
                    ftl.write(l, Some(&sector(&cfg, l, version)), Time::ZERO, &mut Untimed).unwrap();
                    model.insert(l, version);
                }
                Op::Trim(l, n) => {
                    let n = n.min(600 - l);
                    ftl.trim(l, n).unwrap();
                    for x in l..l + n { model.remove(&x); }
                }
                Op::Flush => { ftl.flush(Time::ZERO, &mut Untimed); }
                Op::Read(l) => {
                    if allocate {
                        ftl.allocate_for_read(l, Time::ZERO, &mut Untimed).unwrap();
                    }
                    let want = model.get(&l).map_or(vec![0; cfg.ftl.sector_size.0 as usize], |&v| sector(&cfg, l, v));
                    prop_assert_eq!(read(&ftl, l), want, "read of lpn {}", l);
                }
            }
        }
        for l in 0..600 {
            let want = model.get(&l).map_or(vec![0; cfg.ftl.sector_size.0 as usize], |&v| sector(&cfg, l, v));
            prop_assert_eq!(read(&ftl, l), want, "lpn {}", l);
        }
        let found_buffered = (0..600).filter(|&l| matches!(ftl.locate(l), Location::Buffered(_))).count();
        prop_assert_eq!(ftl.buffered_sectors(), found_buffered);
        ftl.flush(Time::ZERO, &mut Untimed);
        ftl.check_consistency().unwrap();
        prop_assert!(writes < 3072 || ftl.stats.gc_runs > 0, "GC must have run after {} writes", writes);
        // A page copied back carries every one of its sectors (only wholly current pages go that way).
        prop_assert!(ftl.stats.gc_pages_copied_back * u64::from(ftl.sectors_per_page()) <= ftl.stats.gc_sectors_moved);
        if !copyback {
            prop_assert_eq!(ftl.stats.gc_pages_copied_back, 0);
        }
    }
}

#[test]
fn gc_at_full_occupancy_reaches_steady_state() {
    for pacing in ["incremental", "blocking"] {
        let cfg = small_config(&[("gc_pacing", pacing)]);
        let mut ftl = memory_ftl(&cfg);
        let n = ftl.logical_sectors() as u32;
        let mut rng = crate::engine::rng_stream(3, "test");
        use rand::Rng as _;
        for l in 0..n {
            ftl.write(l, None, Time::ZERO, &mut Untimed).unwrap();
        }
        for _ in 0..(n as usize * 6) {
            ftl.write(rng.gen_range(0..n), None, Time::ZERO, &mut Untimed).unwrap();
        }
        ftl.flush(Time::ZERO, &mut Untimed);
        ftl.check_consistency().unwrap();
        assert!(ftl.stats.gc_runs > 0, "{pacing}");
        assert!(ftl.waf() > 1.0, "{pacing}: WAF {}", ftl.waf());
        assert!((ftl.occupancy() - 1.0).abs() < 1e-9, "{pacing}: occupancy {}", ftl.occupancy());
    }
}

/// With copyback on, steady random writes at full occupancy still reclaim space: pages with stale sectors are moved
/// through the controller, wholly current ones on-die. (Copying every page whole kept the stale slots as padding, so
/// collection freed nothing and a plane ran out of blocks.)
#[test]
fn copyback_gc_reaches_steady_state_moving_only_wholly_current_pages() {
    let cfg = small_config(&[("gc_copyback", "true")]);
    let mut ftl = memory_ftl(&cfg);
    let n = ftl.logical_sectors() as u32;
    let spp = u64::from(ftl.sectors_per_page());
    let mut rng = crate::engine::rng_stream(3, "test");
    use rand::Rng as _;
    for l in 0..n {
        ftl.write(l, None, Time::ZERO, &mut Untimed).unwrap();
    }
    for _ in 0..(n as usize * 6) {
        ftl.write(rng.gen_range(0..n), None, Time::ZERO, &mut Untimed).expect("GC keeps up with copyback on");
    }
    ftl.flush(Time::ZERO, &mut Untimed);
    ftl.check_consistency().unwrap();
    let s = &ftl.stats;
    assert!(s.gc_pages_copied_back > 0, "some victim pages were wholly current");
    // Copied-back pages carry spp sectors each and no padding; the rest moved through the controller.
    assert!(s.gc_sectors_moved > s.gc_pages_copied_back * spp, "pages with stale sectors went through the controller");
    assert!(ftl.waf() > 1.0);
}

/// Incremental pacing keeps the free pool at its thresholds by itself: at 90% fill the host never has to wait for
/// blocking collection, and each victim's moves are spread over many host pages.
#[test]
fn incremental_gc_keeps_pace_with_host_writes() {
    for (pacing, stalls_expected) in [("incremental", false), ("blocking", true)] {
        let cfg = small_config(&[("gc_pacing", pacing)]);
        let mut ftl = memory_ftl(&cfg);
        ftl.precondition(0.9, FillPattern::Random, 1.0, 9).unwrap();
        let n = ftl.logical_sectors() as u32;
        let mut rng = crate::engine::rng_stream(4, "test");
        use rand::Rng as _;
        let (runs, stalls) = (ftl.stats.gc_runs, ftl.stats.gc_stalls);
        let mut cursor_seen = 0;
        for _ in 0..(n as usize * 3) {
            ftl.write(rng.gen_range(0..n * 9 / 10), None, Time::ZERO, &mut Untimed).unwrap();
            cursor_seen += ftl.gc_cursor.iter().filter(|c| c.is_some()).count();
        }
        ftl.check_consistency().unwrap();
        let (runs, stalls) = (ftl.stats.gc_runs - runs, ftl.stats.gc_stalls - stalls);
        assert!(runs > 0, "{pacing}");
        assert_eq!(stalls > 0, stalls_expected, "{pacing}: {stalls} stalls in {runs} GC runs");
        assert_eq!(cursor_seen > 0, !stalls_expected, "{pacing}: victims collected across host pages");
    }
}

/// A sink with a clock: each operation ends a fixed time after its inputs (erases 3.5 ms, programs 1.3 ms, reads
/// 60 us, as cosmos-plus), and it records every program that starts before the erase of its block has ended.
struct ClockSink {
    pages_per_block: u64,
    erased: std::collections::HashMap<u64, Time>,
    early_programs: usize,
    programs: usize,
    /// The present: what ended before it is done.
    now: Time,
}

impl ClockSink {
    fn after(ready: At, us: u64) -> At {
        At::at(ready.known().expect("known times only") + us * 1000)
    }
}

impl FlashSink for ClockSink {
    fn read_page(&mut self, ready: At, _: u64, _: u32, _: u32, _: u32, _: Work) -> At {
        Self::after(ready, 60)
    }
    fn program_pages(&mut self, floor: At, readies: &[At], erased: At, ppns: &[u64], _: u32, _: Work) -> At {
        self.programs += 1;
        let ready = self.max_all(floor, readies);
        let ready = self.max_all(ready, &[erased]);
        let start = ready.known().unwrap();
        if ppns.iter().any(|p| self.erased.get(&(p / self.pages_per_block)).is_some_and(|&e| start < e)) {
            self.early_programs += 1;
        }
        Self::after(ready, 1300)
    }
    fn copyback(&mut self, ready: At, _: u64, dst: u64, _: Work) -> At {
        self.program_pages(ready, &[], At::ZERO, &[dst], 0, Work::Host);
        Self::after(ready, 1360)
    }
    fn erase_block(&mut self, ready: At, block_id: u32, _: Work) -> At {
        let end = Self::after(ready, 3500);
        self.erased.insert(u64::from(block_id), end.known().unwrap());
        end
    }
    fn map_read(&mut self, ready: At, _: u64) -> At {
        Self::after(ready, 60)
    }
    fn map_write(&mut self, ready: At, _: u64) -> At {
        Self::after(ready, 1300)
    }
    fn max_all(&mut self, floor: At, times: &[At]) -> At {
        Untimed.max_all(floor, times)
    }
    fn done(&self, at: At) -> bool {
        at.known().expect("known times only") < self.now
    }
}

/// The small FTL filled to 90% (random, then one capacity of overwrites: GC steady state) and a clock sink at 0.
fn filled_with_clock(extra: &[(&str, &str)]) -> (Ftl, ClockSink) {
    let cfg = small_config(extra);
    let mut ftl = memory_ftl(&cfg);
    ftl.precondition(0.9, FillPattern::Random, 1.0, 9).unwrap();
    let pages_per_block = cfg.nand.pages_per_block.0;
    (ftl, ClockSink { pages_per_block, erased: Default::default(), early_programs: 0, programs: 0, now: Time::ZERO })
}

/// No page of a block is programmed before the block's erase has ended, for host and GC pages alike. GC erases a
/// victim only after its moved data is programmed; without this rule a write could use the block GC freed before
/// GC's flash work was done, and a GC-steady write rate ran ahead of what the flash could sustain (every program
/// the FTL had issued but the flash had not done piled up: ~42,000 more per virtual second on cosmos-plus).
#[test]
fn no_page_is_programmed_before_its_blocks_erase_ends() {
    // With `ftl.gc_free = erased` and the clock at 0 no erase ever ends: every block GC frees is opened owing its
    // erase (the fallback), and blocking pacing starts on the erased count.
    let cases = [
        ("false", "issued", "incremental"),
        ("true", "issued", "incremental"),
        ("false", "erased", "incremental"),
        ("false", "erased", "blocking"),
        ("true", "erased", "blocking"),
    ];
    for (copyback, gc_free, pacing) in cases {
        let extra = [("gc_copyback", copyback), ("gc_free", gc_free), ("gc_pacing", pacing)];
        let (mut ftl, mut sink) = filled_with_clock(&extra);
        let n = ftl.logical_sectors() as u32;
        let mut rng = crate::engine::rng_stream(5, "test");
        use rand::Rng as _;
        let erased_before = ftl.stats.blocks_erased;
        for _ in 0..(n as usize * 3) {
            ftl.write(rng.gen_range(0..n * 9 / 10), None, Time::ZERO, &mut sink).unwrap();
        }
        ftl.flush(Time::ZERO, &mut sink);
        ftl.check_consistency().unwrap();
        assert!(ftl.stats.blocks_erased - erased_before > 10, "{extra:?}: GC erased blocks");
        assert!(sink.programs > 100, "{extra:?}");
        assert_eq!(sink.early_programs, 0, "{extra:?}: programs started before their block's erase ended");
    }
}

/// With `ftl.gc_free = erased` a frontier opens a block whose erase has ended while its plane has one: a block GC has
/// freed but whose erase the flash has not done (it waits for the victim's moves) is taken only when every free block
/// of the plane is such a block (then the one whose erase was issued first). With `issued` (the presets' default,
/// unchanged) the least-worn block is opened whatever its erase, and its pages wait for GC's moves and erase while
/// erased blocks sit in the pool. Writes arrive every 10 us, so some erases have ended by a write's arrival and some
/// have not.
#[test]
fn a_frontier_opens_an_erased_block_while_its_plane_has_one() {
    for (copyback, gc_free) in [("false", "issued"), ("false", "erased"), ("true", "issued"), ("true", "erased")] {
        let (mut ftl, mut sink) = filled_with_clock(&[("gc_copyback", copyback), ("gc_free", gc_free)]);
        let n = ftl.logical_sectors() as u32;
        let mut rng = crate::engine::rng_stream(5, "test");
        use rand::Rng as _;
        // Blocks opened while the pool held some whose erase had not ended: an erased one taken (as it should be),
        // one still owing its erase taken while an erased one was free (the defect), or taken for want of any.
        let (mut erased_taken, mut owed_taken_over_erased, mut owed_taken_alone) = (0, 0, 0);
        for i in 0..(n as u64 * 3) {
            sink.now = Time::from_ns(i * 10_000);
            let lpn = rng.gen_range(0..n * 9 / 10);
            let plane = ftl.plane_of(lpn);
            let before = ftl.host[plane as usize].block;
            let owed = |sink: &ClockSink, id: u32| sink.erased.get(&u64::from(id)).is_some_and(|&e| e >= sink.now);
            let pool: Vec<u32> = (0..ftl.blocks.info.len() as u32)
                .filter(|&id| ftl.geo.plane_of_block(id) == plane && ftl.blocks.info[id as usize].state == BlockState::Free)
                .collect();
            ftl.write(lpn, None, sink.now, &mut sink).unwrap();
            let opened = ftl.host[plane as usize].block;
            if opened == before || opened == NO_BLOCK || !pool.iter().any(|&id| owed(&sink, id)) {
                continue;
            }
            match (owed(&sink, opened), pool.iter().any(|&id| id != opened && !owed(&sink, id))) {
                (false, _) => erased_taken += 1,
                (true, true) => owed_taken_over_erased += 1,
                (true, false) => owed_taken_alone += 1,
            }
        }
        ftl.flush(sink.now, &mut sink);
        ftl.check_consistency().unwrap();
        let case = format!("copyback {copyback}, gc_free {gc_free}");
        eprintln!("{case}: erased {erased_taken}, owed over erased {owed_taken_over_erased}, owed alone {owed_taken_alone}");
        assert!(erased_taken > 10, "{case}: the pool held blocks owing their erase when frontiers opened");
        if gc_free == "erased" {
            assert_eq!(owed_taken_over_erased, 0, "{case}: blocks owing their erase opened while erased ones were free");
        } else {
            assert!(owed_taken_over_erased > 10, "{case}: the least-worn block is opened whatever its erase");
        }
        assert_eq!(sink.early_programs, 0, "{case}: programs started before their block's erase ended");
    }
}

/// `ftl.gc_free` decides what GC's thresholds count as free. Here no erase ever ends (the clock stays at 0). With
/// `issued` a block GC frees counts at once: incremental GC picks a victim only while fewer than
/// `gc_stop_free_blocks` (4) blocks are free and one victim frees one block, so the pool never holds more than 4.
/// With `erased` the blocks GC frees owe their erase for ever and count for nothing: once the pool's erased blocks
/// are opened GC stays below its start threshold (3) and keeps collecting (one page more per host page, as below
/// the start threshold), so the pool, owed blocks included, grows past 4 (here to 6 on some plane).
#[test]
fn gc_thresholds_count_erased_blocks_with_gc_free_erased() {
    for gc_free in ["issued", "erased"] {
        let (mut ftl, mut sink) = filled_with_clock(&[("gc_free", gc_free)]);
        let n = ftl.logical_sectors() as u32;
        let planes = ftl.geo.planes();
        let mut rng = crate::engine::rng_stream(5, "test");
        use rand::Rng as _;
        let max_free = |ftl: &Ftl| (0..planes).map(|p| ftl.blocks.free_blocks(p)).max().unwrap();
        let start = max_free(&ftl);
        let mut most = 0;
        for _ in 0..(n as usize * 2) {
            ftl.write(rng.gen_range(0..n * 9 / 10), None, Time::ZERO, &mut sink).unwrap();
            most = most.max(max_free(&ftl));
        }
        ftl.flush(Time::ZERO, &mut sink);
        ftl.check_consistency().unwrap();
        eprintln!("gc_free {gc_free}: free blocks per plane at most {most} (after the fill {start})");
        assert!(start <= 4, "gc_free {gc_free}: the fill leaves {start}");
        if gc_free == "issued" {
            assert!(most <= 4, "gc_free {gc_free}: GC stops at gc_stop_free_blocks, {most} free");
        } else {
            assert!(most > 4, "gc_free {gc_free}: GC keeps collecting while its blocks owe their erase, {most} free");
        }
        assert_eq!(sink.early_programs, 0, "gc_free {gc_free}");
    }
}

/// Under uniform random writes greedy selection moves the least data and random the most; FIFO comes close to
/// greedy and randomized greedy sits between (Desnoyers, SYSTOR 2012; Van Houdt, SIGMETRICS 2013). Every policy
/// keeps the mapping consistent.
#[test]
fn victim_policies_order_write_amplification_as_expected() {
    let waf = |policy: &str, d: &str| {
        let cfg = small_config(&[("gc_policy", policy), ("gc_rga_d", d), ("blocks_per_plane", "64")]);
        let mut ftl = memory_ftl(&cfg);
        ftl.precondition(0.85, FillPattern::Random, 1.0, 2).unwrap();
        let n = ftl.logical_sectors() as u32 * 85 / 100;
        let written = ftl.stats.clone();
        let mut rng = crate::engine::rng_stream(6, "test");
        use rand::Rng as _;
        for _ in 0..(n as usize * 4) {
            ftl.write(rng.gen_range(0..n), None, Time::ZERO, &mut Untimed).unwrap();
        }
        ftl.check_consistency().unwrap();
        let programmed = (ftl.stats.pages_programmed - written.pages_programmed) * u64::from(ftl.sectors_per_page());
        programmed as f64 / (ftl.stats.host_sectors_written - written.host_sectors_written) as f64
    };
    let (greedy, rga, random, fifo) = (waf("greedy", "1"), waf("rga", "3"), waf("random", "1"), waf("fifo", "1"));
    eprintln!("WAF greedy {greedy:.2} rga(3) {rga:.2} random {random:.2} fifo {fifo:.2}");
    assert!(greedy < rga && rga < random, "greedy {greedy} < rga {rga} < random {random}");
    assert!(greedy < fifo && fifo < random, "greedy {greedy} < fifo {fifo} < random {random}");
}

#[test]
fn precondition_fills_fast_and_consistently() {
    for pattern in [FillPattern::Sequential, FillPattern::Random] {
        let cfg = small_config(&[]);
        let mut ftl = memory_ftl(&cfg);
        ftl.precondition(0.9, pattern, 1.0, 5).unwrap();
        ftl.check_consistency().unwrap();
        let occ = ftl.occupancy();
        assert!((occ - 0.9).abs() < 0.01, "{pattern:?} occupancy {occ}");
        if pattern == FillPattern::Random {
            assert!(ftl.stats.gc_runs > 0);
        }
        assert!(ftl.precondition(0.5, pattern, 0.0, 5).is_err(), "second precondition must be refused");
    }
    let mut ftl = memory_ftl(&small_config(&[]));
    for (fraction, overwrite) in [(f64::NAN, 1.0), (1.5, 1.0), (0.5, f64::NAN), (0.5, -1.0), (0.5, 1e12)] {
        let e = ftl.precondition(fraction, FillPattern::Random, overwrite, 5).unwrap_err();
        assert!(e.to_string().contains("precondition fraction"), "{e}");
    }
    assert_eq!(ftl.occupancy(), 0.0, "a refused precondition writes nothing");
}

#[test]
fn injected_errors_follow_the_sector_through_gc() {
    let cfg = small_config(&[]);
    let mut ftl = memory_ftl(&cfg);
    ftl.write(7, Some(&sector(&cfg, 7, 1)), Time::ZERO, &mut Untimed).unwrap();
    assert!(ftl.inject_errors(7, 10).is_err(), "buffered sectors are refused");
    ftl.flush(Time::ZERO, &mut Untimed);
    ftl.inject_errors(7, 1000).unwrap();
    let Location::Flash(psa) = ftl.locate(7) else { panic!() };
    assert_eq!(ftl.injected_errors(psa), 1000);
    ftl.write(7, Some(&sector(&cfg, 7, 2)), Time::ZERO, &mut Untimed).unwrap();
    ftl.flush(Time::ZERO, &mut Untimed);
    let Location::Flash(p2) = ftl.locate(7) else { panic!() };
    assert_eq!(ftl.injected_errors(p2), 0, "a rewrite has no errors");
}

#[test]
fn spare_bytes_set_in_place_stay_with_the_sector_and_follow_it_through_gc() {
    let cfg = small_config(&[]);
    let mut ftl = memory_ftl(&cfg);
    let tag = |l: u32| [l as u8 ^ 0x5A; SPARE_BYTES];
    assert_eq!(ftl.set_spare_of(3, &tag(3)), None, "unmapped");
    ftl.write(3, Some(&sector(&cfg, 3, 1)), Time::ZERO, &mut Untimed).unwrap();
    let (_, programmed) = ftl.set_spare_of(3, &tag(3)).unwrap();
    assert!(!programmed, "still in an open page");
    assert_eq!(ftl.spare_of(3), tag(3));
    ftl.flush(Time::ZERO, &mut Untimed);
    assert_eq!(ftl.spare_of(3), tag(3), "programmed with the page");
    ftl.write(4, Some(&sector(&cfg, 4, 1)), Time::ZERO, &mut Untimed).unwrap();
    ftl.flush(Time::ZERO, &mut Untimed);
    let (psa, programmed) = ftl.set_spare_of(4, &tag(4)).unwrap();
    assert!(programmed && ftl.locate(4) == Location::Flash(psa));
    assert_eq!(ftl.spare_of(4), tag(4));
    assert_eq!(read(&ftl, 4), sector(&cfg, 4, 1), "the data and its checksum are untouched");
    // Overwrite other sectors until GC has moved 3 and 4; their spares move with them.
    overwrite_from(&mut ftl, &cfg, 5, 12345);
    assert_ne!(ftl.locate(4), Location::Flash(psa), "GC moved it");
    assert_eq!((ftl.spare_of(3), ftl.spare_of(4)), (tag(3), tag(4)));
}

/// Overwrites random sectors from `first` on, 20 times the device's sectors, then flushes: enough for GC to have
/// moved every block holding a sector below `first`.
fn overwrite_from(ftl: &mut Ftl, cfg: &DeviceConfig, first: u32, seed: u32) {
    let n = cfg.logical_sectors() as u32;
    let mut x = seed;
    for round in 0..20 * n {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        let l = first + (x >> 8) % (n - first);
        ftl.write(l, Some(&sector(cfg, l, round)), Time::ZERO, &mut Untimed).unwrap();
    }
    ftl.flush(Time::ZERO, &mut Untimed);
}

/// Every free block's OOB area reads as zeroes after GC erased it, whether or not extension spare bytes were ever
/// written (without them the erase clears only each record's own bytes: the spare bytes are zeroes already).
#[test]
fn an_erased_blocks_oob_area_is_all_zeroes() {
    let cfg = small_config(&[]);
    for spares in [false, true] {
        let mut ftl = memory_ftl(&cfg);
        if spares {
            for l in 0..64 {
                ftl.write_tagged(l, Some(&sector(&cfg, l, 1)), Some(&[l as u8 | 1; SPARE_BYTES]), Time::ZERO, &mut Untimed).unwrap();
            }
        }
        overwrite_from(&mut ftl, &cfg, 0, 4242);
        assert!(ftl.stats.blocks_erased > 0);
        let ppb = u64::from(ftl.geo.pages_per_block);
        let mut checked = 0;
        for (id, b) in ftl.blocks.info.iter().enumerate() {
            if b.state == BlockState::Free && b.erase_count > 0 {
                for ppn in id as u64 * ppb..(id as u64 + 1) * ppb {
                    assert!(ftl.store.oob.get(ppn).iter().all(|&x| x == 0), "spares {spares}: page {ppn} of erased block {id}");
                }
                checked += 1;
            }
        }
        assert!(checked > 0, "spares {spares}: no erased free block to check");
    }
}

#[test]
fn spare_bytes_found_in_an_opened_store_follow_their_sector_through_gc() {
    // GC reads a moved sector's spare bytes only once some were written: a store opened with state (as an image's)
    // may hold them from an earlier session, so an FTL made over it reads them.
    let cfg = small_config(&[]);
    let mut ftl = memory_ftl(&cfg);
    let tag = [0xA5; SPARE_BYTES];
    ftl.write_tagged(9, Some(&sector(&cfg, 9, 1)), Some(&tag), Time::ZERO, &mut Untimed).unwrap();
    ftl.flush(Time::ZERO, &mut Untimed);
    let Location::Flash(psa) = ftl.locate(9) else { panic!("programmed") };
    let seq = ftl.seq();
    let Ftl { store, blocks, .. } = ftl;
    let mut ftl = Ftl::with_state(&cfg, store, blocks, seq).unwrap();
    assert_eq!(ftl.spare_of(9), tag);
    overwrite_from(&mut ftl, &cfg, 10, 777);
    assert_ne!(ftl.locate(9), Location::Flash(psa), "GC moved it");
    assert_eq!(ftl.spare_of(9), tag);
    assert_eq!(read(&ftl, 9), sector(&cfg, 9, 1));
}

#[test]
fn recovery_after_crash_restores_flushed_state() {
    let cfg = small_config(&[]);
    let dir = tempfile::tempdir().unwrap();
    let tree = small_tree(&[]);
    let mut model: BTreeMap<u32, u32> = BTreeMap::new();
    {
        let (img, store) = Image::create(dir.path(), &tree, true, Default::default()).unwrap();
        let mut ftl = Ftl::new(&cfg, store).unwrap();
        let n = ftl.logical_sectors() as u32;
        for round in 0..3u32 {
            for i in 0..n {
                let l = (i * 7 + round) % n;
                ftl.write(l, Some(&sector(&cfg, l, round + 1)), Time::ZERO, &mut Untimed).unwrap();
                model.insert(l, round + 1);
            }
            if round == 0 {
                img.checkpoint(&mut ftl).unwrap();
            }
        }
        ftl.trim(10, 5).unwrap();
        for l in 10..15 {
            model.remove(&l);
        }
        ftl.flush(Time::ZERO, &mut Untimed);
        // Unflushed writes after the flush may or may not survive; they must not corrupt anything else.
        ftl.write(200, Some(&sector(&cfg, 200, 99)), Time::ZERO, &mut Untimed).unwrap();
        // Crash: no close, no checkpoint; the mmaps are simply dropped.
    }
    let (_img, _tree, store, opened) = Image::open(dir.path(), Default::default()).unwrap();
    let crate::image::Opened::Unclean(ckpt) = opened else { panic!("crash must be detected") };
    let (ftl, report) = Ftl::recover(&cfg, store, ckpt).unwrap();
    assert!(report.pages_replayed > 0 && report.trims_replayed == 1, "{report:?}");
    ftl.check_consistency().unwrap();
    for l in 0..ftl.logical_sectors() as u32 {
        let got = read(&ftl, l);
        if l == 200 {
            assert!(got == sector(&cfg, 200, 99) || got == sector(&cfg, 200, model[&200]));
            continue;
        }
        let want = model.get(&l).map_or(vec![0; cfg.ftl.sector_size.0 as usize], |&v| sector(&cfg, l, v));
        assert_eq!(got, want, "lpn {l}");
    }
}

/// Writes, flushes and "crashes" a small image; returns its directory.
fn crashed_image(cfg: &DeviceConfig) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let tree = small_tree(&[]);
    let (img, store) = Image::create(dir.path(), &tree, true, Default::default()).unwrap();
    let mut ftl = Ftl::new(cfg, store).unwrap();
    img.checkpoint(&mut ftl).unwrap();
    for l in 0..300u32 {
        ftl.write(l, Some(&sector(cfg, l, 1)), Time::ZERO, &mut Untimed).unwrap();
    }
    ftl.flush(Time::ZERO, &mut Untimed);
    dir
}

/// Opens a crashed image, lets `damage` change its OOB area, and recovers (strictly or leniently).
fn recover_damaged(
    cfg: &DeviceConfig,
    dir: &std::path::Path,
    lenient: bool,
    damage: impl FnOnce(&mut FtlStore, usize),
) -> crate::error::Result<(Ftl, super::RecoveryReport)> {
    let spp = crate::nand::Geometry::from_config(cfg).sectors_per_page as usize;
    let (_img, _t, mut store, opened) = Image::open(dir, Default::default()).unwrap();
    let crate::image::Opened::Unclean(ckpt) = opened else { panic!("crash must be detected") };
    damage(&mut store, spp);
    Ftl::recover_with(cfg, store, ckpt, super::RecoverOptions { lenient, trust_l2p: false })
}

fn programmed(store: &FtlStore, spp: usize) -> Vec<u64> {
    (0..store.oob.len()).filter(|&p| super::oob::Oob::new(store.oob.get(p), spp).is_programmed()).collect()
}

#[test]
fn a_record_torn_by_a_kill_reads_as_unprogrammed() {
    let cfg = small_config(&[]);
    let dir = crashed_image(&cfg);
    // Slots written, sequence number not yet stored, after the last written page of its block.
    let (ftl, _) = recover_damaged(&cfg, dir.path(), false, |store, spp| {
        let last = *programmed(store, spp).last().unwrap();
        store.oob.get_mut(last + 1)[24..28].copy_from_slice(&7u32.to_le_bytes());
    })
    .unwrap();
    ftl.check_consistency().unwrap();
    for l in 0..300 {
        assert_eq!(read(&ftl, l), sector(&cfg, l, 1));
    }
}

#[test]
fn a_damaged_record_is_refused_strictly_and_reported_leniently() {
    let cfg = small_config(&[]);
    type Damage = (&'static str, fn(&mut [u8]));
    let damages: [Damage; 2] =
        [("slot", |r| r[24] ^= 0x20), ("sequence", |r| r[0..8].fill(0))];
    for (what, damage) in damages {
        let dir = crashed_image(&cfg);
        let mut page = 0;
        let e = recover_damaged(&cfg, dir.path(), false, |store, spp| {
            page = programmed(store, spp)[0];
            damage(store.oob.get_mut(page));
        })
        .err()
        .expect(what)
        .to_string();
        assert!(e.contains(&format!("oob.bin: the record of page {page}")), "{what}: {e}");
        // The damage is in the file; a lenient recovery skips the page and names the LBAs it held.
        let (ftl, r) = recover_damaged(&cfg, dir.path(), true, |_, _| {}).unwrap();
        assert_eq!(r.damaged_pages, vec![page], "{what}");
        assert!(!r.lost_lbas.is_empty() && r.lost_lbas.len() <= 8, "{what}: {r:?}");
        ftl.check_consistency().unwrap();
        for l in 0..300u32 {
            let want = if r.lost_lbas.contains(&u64::from(l)) { vec![0; 4096] } else { sector(&cfg, l, 1) };
            assert_eq!(read(&ftl, l), want, "{what}: lpn {l}");
        }
    }
}

/// `ftl.unmapped_read = allocate`: the first read of a never-written sector maps its whole page-sized group to the
/// next page of its plane's host frontier (slot = offset in the group); pages follow the reads' order, so an MLC
/// plane's reads alternate LSB and MSB pages. Nothing is programmed and the sectors read as zeroes.
#[test]
fn a_read_of_a_never_written_sector_maps_its_group_to_the_frontiers_next_page() {
    let cfg = small_config(&[("unmapped_read", "allocate")]);
    let mut ftl = memory_ftl(&cfg);
    let (spp, planes) = (ftl.spp, ftl.geo.planes());
    let flash = |loc: Location| match loc {
        Location::Flash(psa) => psa,
        other => panic!("expected a flash location, got {other:?}"),
    };
    let a = 5 * spp + 1;
    let b = (5 + planes) * spp + 3; // the same plane, the next group there
    let pa = flash(ftl.allocate_for_read(a, Time::ZERO, &mut Untimed).unwrap());
    assert_eq!(pa % u64::from(spp), 1, "slot = the sector's offset in its group");
    for s in 0..spp {
        assert_eq!(ftl.locate(5 * spp + s), Location::Flash(pa - 1 + u64::from(s)), "the whole group is mapped");
    }
    let pb = flash(ftl.allocate_for_read(b, Time::ZERO, &mut Untimed).unwrap());
    let (page_a, page_b) = (pa / u64::from(spp), pb / u64::from(spp));
    assert_eq!(page_b, page_a + 1, "the plane's next page, in the order of the reads");
    let ppb = u64::from(ftl.geo.pages_per_block);
    assert_ne!(ftl.geo.page_type((page_a % ppb) as u32), ftl.geo.page_type((page_b % ppb) as u32), "LSB then MSB");
    assert_eq!(ftl.allocate_for_read(a + 1, Time::ZERO, &mut Untimed).unwrap(), Location::Flash(pa + 1), "already mapped");
    assert_eq!((ftl.stats.read_allocated_pages, ftl.stats.pages_programmed, ftl.waf()), (2, 0, 0.0));
    assert_eq!(read(&ftl, a), vec![0; cfg.ftl.sector_size.0 as usize]);
    assert!(ftl.oob(page_a).is_programmed() && !ftl.oob(page_a).present(1), "recorded, no data stored");
    ftl.check_consistency().unwrap();
    // A write replaces an allocated sector like any other; the rest of its group stays where it was.
    ftl.write(a, Some(&sector(&cfg, a, 1)), Time::ZERO, &mut Untimed).unwrap();
    ftl.flush(Time::ZERO, &mut Untimed);
    assert_eq!(read(&ftl, a), sector(&cfg, a, 1));
    assert_eq!(ftl.locate(a + 1), Location::Flash(pa + 1));
    ftl.check_consistency().unwrap();
    assert!(matches!(ftl.allocate_for_read(ftl.logical_sectors() as u32, Time::ZERO, &mut Untimed), Err(SimError::InvalidArgument(_))));
}

/// A sector written again, or trimmed, while its page is open goes stale in that page: it is found at its latest
/// slot, counted once in the write buffer, and its stale slots are programmed as padding.
#[test]
fn a_sector_rewritten_or_trimmed_in_its_open_page_is_found_at_its_latest_slot() {
    let cfg = small_config(&[]);
    let mut ftl = memory_ftl(&cfg);
    let spp = u64::from(ftl.spp);
    assert!(spp >= 4, "lpns 0 and 1 share a page");
    let write = |ftl: &mut Ftl, l: u32, v: u32| ftl.write(l, Some(&sector(&cfg, l, v)), Time::ZERO, &mut Untimed).unwrap();
    write(&mut ftl, 0, 1);
    write(&mut ftl, 1, 1);
    write(&mut ftl, 0, 2);
    assert_eq!(ftl.buffered_sectors(), 2);
    let Location::Buffered(psa) = ftl.locate(0) else { panic!("lpn 0 is buffered") };
    assert_eq!(psa % spp, 2, "the latest copy");
    assert_eq!(read(&ftl, 0), sector(&cfg, 0, 2));
    ftl.trim(1, 1).unwrap();
    assert_eq!((ftl.buffered_sectors(), ftl.locate(1)), (1, Location::Unmapped));
    write(&mut ftl, 1, 3); // the page's last slot when it has four: programmed now, else by the flush
    ftl.flush(Time::ZERO, &mut Untimed);
    assert_eq!(ftl.buffered_sectors(), 0);
    let Location::Flash(psa) = ftl.locate(0) else { panic!("lpn 0 is programmed") };
    let rec = ftl.oob(psa / spp);
    assert_eq!((rec.lpn(0), rec.lpn(1), rec.lpn(2), rec.lpn(3)), (INVALID_LPN, INVALID_LPN, 0, 1));
    assert_eq!((read(&ftl, 0), read(&ftl, 1)), (sector(&cfg, 0, 2), sector(&cfg, 1, 3)));
    ftl.check_consistency().unwrap();
}

/// While the plane's open page holds buffered writes the read is served as zeroes without a page (programming the
/// buffered sectors early would change write timing): nothing changes.
#[test]
fn no_page_is_allocated_while_the_planes_open_page_holds_buffered_writes() {
    let cfg = small_config(&[("unmapped_read", "allocate")]);
    let mut ftl = memory_ftl(&cfg);
    let (spp, planes) = (ftl.spp, ftl.geo.planes());
    let w = 2 * spp;
    ftl.write(w, Some(&sector(&cfg, w, 1)), Time::ZERO, &mut Untimed).unwrap();
    let (seq, unread) = (ftl.seq(), (2 + planes) * spp);
    assert_eq!(ftl.allocate_for_read(unread, Time::ZERO, &mut Untimed).unwrap(), Location::Unmapped);
    assert!(matches!(ftl.allocate_for_read(w, Time::ZERO, &mut Untimed).unwrap(), Location::Buffered(_)));
    assert!(matches!(ftl.allocate_for_read(w + 1, Time::ZERO, &mut Untimed).unwrap(), Location::Unmapped));
    assert_eq!((ftl.seq(), ftl.stats.read_allocated_pages), (seq, 0));
    // Another plane's frontier is at a page boundary: its reads allocate.
    assert!(matches!(ftl.allocate_for_read(3 * spp, Time::ZERO, &mut Untimed).unwrap(), Location::Flash(_)));
    ftl.flush(Time::ZERO, &mut Untimed);
    assert!(matches!(ftl.allocate_for_read(unread, Time::ZERO, &mut Untimed).unwrap(), Location::Flash(_)), "after the flush");
    ftl.check_consistency().unwrap();
}

/// Allocated pages fill the device, are collected like written ones when overwritten, and a crash keeps them:
/// recovery maps each allocated sector where it was.
#[test]
fn allocated_pages_survive_gc_and_recovery() {
    let tree = small_tree(&[("unmapped_read", "allocate")]);
    let cfg = DeviceConfig::from_tree(&tree).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut model: BTreeMap<u32, u32> = BTreeMap::new();
    let placed: Vec<Location>;
    {
        let (img, store) = Image::create(dir.path(), &tree, true, Default::default()).unwrap();
        let mut ftl = Ftl::new(&cfg, store).unwrap();
        let n = ftl.logical_sectors() as u32;
        let mut rng = crate::engine::rng_stream(11, "test");
        use rand::Rng as _;
        // Read every sector once (in random order), then overwrite a random two capacities' worth of sectors
        // with reads in between: GC must collect blocks of allocated pages.
        let mut order: Vec<u32> = (0..n).collect();
        rand::seq::SliceRandom::shuffle(&mut order[..], &mut rng);
        for &l in &order {
            ftl.allocate_for_read(l, Time::ZERO, &mut Untimed).unwrap();
        }
        assert_eq!(ftl.stats.read_allocated_pages, u64::from(n / ftl.spp), "one page per group");
        img.checkpoint(&mut ftl).unwrap();
        for v in 1..=(2 * n) {
            let l = rng.gen_range(0..n);
            ftl.write(l, Some(&sector(&cfg, l, v)), Time::ZERO, &mut Untimed).unwrap();
            model.insert(l, v);
            let r = rng.gen_range(0..n);
            ftl.allocate_for_read(r, Time::ZERO, &mut Untimed).unwrap();
        }
        ftl.flush(Time::ZERO, &mut Untimed);
        assert!(ftl.stats.gc_runs > 0 && ftl.stats.gc_sectors_moved > 0, "{:?}", ftl.stats);
        ftl.check_consistency().unwrap();
        placed = (0..n).map(|l| ftl.locate(l)).collect();
        // Crash: no close.
    }
    let (_img, _tree, store, opened) = Image::open(dir.path(), Default::default()).unwrap();
    let crate::image::Opened::Unclean(ckpt) = opened else { panic!("crash must be detected") };
    let (ftl, _) = Ftl::recover(&cfg, store, ckpt).unwrap();
    ftl.check_consistency().unwrap();
    for l in 0..ftl.logical_sectors() as u32 {
        assert_eq!(ftl.locate(l), placed[l as usize], "lpn {l}");
        let want = model.get(&l).map_or(vec![0; cfg.ftl.sector_size.0 as usize], |&v| sector(&cfg, l, v));
        assert_eq!(read(&ftl, l), want, "lpn {l}");
    }
}

/// A sink that gives flash operations known ends from a counter (reads' rounded down to 40 ns, so that a few
/// consecutive reads end at the same `At`, the first ones at `At::ZERO`) and records every call with its arguments.
#[derive(Default)]
struct RecordingSink {
    clock: u64,
    log: Vec<String>,
}

impl RecordingSink {
    fn end(&mut self) -> At {
        self.clock += 10;
        At::at(Time::from_ns(self.clock))
    }
}

impl FlashSink for RecordingSink {
    fn read_page(&mut self, ready: At, ppn: u64, sectors: u32, raw: u32, pe: u32, work: Work) -> At {
        self.end();
        let end = At::at(Time::from_ns(self.clock / 40 * 40));
        self.log.push(format!("read {ready:?} {ppn} {sectors} {raw} {pe} {work:?} -> {end:?}"));
        end
    }
    fn program_pages(&mut self, floor: At, readies: &[At], erased: At, ppns: &[u64], released: u32, work: Work) -> At {
        let end = self.end();
        self.log.push(format!("program {floor:?} {readies:?} {erased:?} {ppns:?} {released} {work:?} -> {end:?}"));
        end
    }
    fn copyback(&mut self, ready: At, src: u64, dst: u64, work: Work) -> At {
        let end = self.end();
        self.log.push(format!("copyback {ready:?} {src} {dst} {work:?} -> {end:?}"));
        end
    }
    fn erase_block(&mut self, ready: At, block_id: u32, work: Work) -> At {
        let end = self.end();
        self.log.push(format!("erase {ready:?} {block_id} {work:?} -> {end:?}"));
        end
    }
    fn map_read(&mut self, ready: At, tpage: u64) -> At {
        self.log.push(format!("map_read {ready:?} {tpage}"));
        self.end()
    }
    fn map_write(&mut self, ready: At, tpage: u64) -> At {
        self.log.push(format!("map_write {ready:?} {tpage}"));
        self.end()
    }
    fn max_all(&mut self, floor: At, times: &[At]) -> At {
        let at = Untimed.max_all(floor, times);
        self.log.push(format!("max_all {floor:?} {times:?} -> {at:?}"));
        at
    }
    fn done(&self, at: At) -> bool {
        at.known().expect("known times only").as_ns() < self.clock / 2
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]
    /// GC's moves a frontier page at a time (`move_live`, and the victim scan without branches) leave the FTL as the
    /// sector-at-a-time moves did: the same flash operations with the same arguments in the same order, the same
    /// mapping, records, counters and relocation log, with data, extension spare bytes and injected errors moving.
    #[test]
    fn gc_moves_by_frontier_page_equal_the_sector_at_a_time_moves(
        writes in prop::collection::vec((0u32..600, any::<bool>(), 0u8..8), 1..3000),
        copyback in any::<bool>(),
        mp in any::<bool>(),
        paced in any::<bool>(),
        data in any::<bool>(),
        extras in any::<bool>(),
    ) {
        let cfg = tiny_config(mp, copyback, paced, &[]);
        let (mut new, mut old) = (memory_ftl(&cfg), memory_ftl(&cfg));
        old.per_sector_moves = true;
        let (mut ns, mut os) = (RecordingSink::default(), RecordingSink::default());
        // Without `extras`, nothing a moved sector may carry besides its record is there (no relocation log, spare
        // bytes or injected errors): the moves that skip looking for it.
        for ftl in [&mut new, &mut old] {
            ftl.track_relocations(extras);
        }
        for (i, &(lpn, tagged, kind)) in writes.iter().enumerate() {
            let bytes = sector(&cfg, lpn, i as u32);
            let spare = [lpn as u8; SPARE_BYTES];
            let ready = Time::from_ns(i as u64 * 7);
            for (ftl, sink) in [(&mut new, &mut ns), (&mut old, &mut os)] {
                ftl.write_tagged(lpn, data.then_some(&bytes[..]), (tagged && extras).then_some(&spare), ready, sink).unwrap();
                match kind {
                    0 => { ftl.flush(ready, sink); }
                    1 if extras => { let _ = ftl.inject_errors(lpn / 2, lpn % 5 * 100); }
                    _ => {}
                }
            }
        }
        for (ftl, sink) in [(&mut new, &mut ns), (&mut old, &mut os)] {
            ftl.flush(Time::from_ns(1 << 40), sink);
        }
        prop_assert_eq!(&ns.log, &os.log);
        prop_assert_eq!(format!("{:?}", new.stats), format!("{:?}", old.stats));
        prop_assert_eq!(new.take_relocations(), old.take_relocations());
        for l in 0..600 {
            prop_assert_eq!(new.locate(l), old.locate(l));
            if let Location::Flash(psa) = new.locate(l) {
                prop_assert_eq!(new.injected_errors(psa), old.injected_errors(psa));
                prop_assert_eq!(new.spare_of(l), old.spare_of(l));
                if data {
                    prop_assert_eq!(read(&new, l), read(&old, l));
                }
            }
        }
        let pages = cfg.nand.pages_per_block.0 * new.blocks.info.len() as u64;
        for ppn in 0..pages {
            prop_assert_eq!(new.oob(ppn).seq(), old.oob(ppn).seq());
            prop_assert_eq!(new.store.oob.get(ppn), old.store.oob.get(ppn));
        }
        prop_assert!(new.stats.gc_sectors_moved > 0 || writes.len() < 1500);
    }
}

/// `block_of_psa` divides by a strength-reduced sectors-per-block: the plain division's blocks, for a power of two
/// and another divisor, below and above 32 bits.
#[test]
fn block_of_psa_is_the_plain_division() {
    for ppb in ["16", "24"] {
        let ftl = memory_ftl(&small_config(&[("pages_per_block", ppb)]));
        let spb = u64::from(ftl.spp * ftl.geo.pages_per_block);
        let edges = [u64::from(u32::MAX) - 1, u64::from(u32::MAX), u64::from(u32::MAX) + 1, 1 << 33];
        for psa in (0..5 * spb).chain(edges) {
            assert_eq!(u64::from(ftl.block_of_psa(psa)), psa / spb, "psa {psa}, {spb} sectors a block");
        }
    }
}
