//! FTL behaviour: a model-based check against a plain map, GC at full occupancy, preconditioning, recovery.

use super::*;
use crate::config::{load_preset, DeviceConfig};
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
    Ftl::new(cfg, Image::memory_store(cfg, true).unwrap()).unwrap()
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
}

fn ops(max_lpn: u32) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        8 => (0..max_lpn).prop_map(Op::Write),
        1 => (0..max_lpn, 1u32..8).prop_map(|(l, n)| Op::Trim(l, n)),
        1 => Just(Op::Flush),
    ];
    prop::collection::vec(op, 1..4000)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Whatever the sequence of writes, trims and flushes (GC included), every sector reads back as last written.
    #[test]
    fn matches_a_plain_map(
        seq in ops(600),
        mp in any::<bool>(),
        copyback in any::<bool>(),
        paced in any::<bool>(),
        policy in prop::sample::select(vec!["greedy", "rga", "random", "fifo"]),
    ) {
        let flag = |b: bool| if b { "true" } else { "false" };
        // A tiny device (3,072 physical sectors) so that GC runs within a test case.
        let cfg = small_config(&[
            ("multi_plane", flag(mp)),
            ("gc_copyback", flag(copyback)),
            ("blocks_per_plane", "12"),
            ("pages_per_block", "8"),
            ("over_provisioning", "45"),
            ("gc_stop_free_blocks", "3"),
            ("gc_pacing", if paced { "incremental" } else { "blocking" }),
            ("gc_policy", policy),
        ]);
        let mut ftl = memory_ftl(&cfg);
        let mut model: BTreeMap<u32, u32> = BTreeMap::new();
        let mut version = 0;
        let writes = seq.iter().filter(|o| matches!(o, Op::Write(_))).count();
        for op in seq {
            match op {
                Op::Write(l) => {
                    version += 1;
                    ftl.write(l, Some(&sector(&cfg, l, version)), 0, &mut Untimed).unwrap();
                    model.insert(l, version);
                }
                Op::Trim(l, n) => {
                    let n = n.min(600 - l);
                    ftl.trim(l, n).unwrap();
                    for x in l..l + n { model.remove(&x); }
                }
                Op::Flush => { ftl.flush(0, &mut Untimed); }
            }
        }
        for l in 0..600 {
            let want = model.get(&l).map_or(vec![0; cfg.ftl.sector_size.0 as usize], |&v| sector(&cfg, l, v));
            prop_assert_eq!(read(&ftl, l), want, "lpn {}", l);
        }
        ftl.flush(0, &mut Untimed);
        ftl.check_consistency().unwrap();
        prop_assert!(writes < 3072 || ftl.stats.gc_runs > 0, "GC must have run after {} writes", writes);
        if copyback && ftl.stats.gc_sectors_moved > 0 {
            prop_assert!(ftl.stats.gc_pages_copied_back > 0);
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
            ftl.write(l, None, 0, &mut Untimed).unwrap();
        }
        for _ in 0..(n as usize * 6) {
            ftl.write(rng.gen_range(0..n), None, 0, &mut Untimed).unwrap();
        }
        ftl.flush(0, &mut Untimed);
        ftl.check_consistency().unwrap();
        assert!(ftl.stats.gc_runs > 0, "{pacing}");
        assert!(ftl.waf() > 1.0, "{pacing}: WAF {}", ftl.waf());
        assert!((ftl.occupancy() - 1.0).abs() < 1e-9, "{pacing}: occupancy {}", ftl.occupancy());
    }
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
            ftl.write(rng.gen_range(0..n * 9 / 10), None, 0, &mut Untimed).unwrap();
            cursor_seen += ftl.gc_cursor.iter().filter(|c| c.is_some()).count();
        }
        ftl.check_consistency().unwrap();
        let (runs, stalls) = (ftl.stats.gc_runs - runs, ftl.stats.gc_stalls - stalls);
        assert!(runs > 0, "{pacing}");
        assert_eq!(stalls > 0, stalls_expected, "{pacing}: {stalls} stalls in {runs} GC runs");
        assert_eq!(cursor_seen > 0, !stalls_expected, "{pacing}: victims collected across host pages");
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
            ftl.write(rng.gen_range(0..n), None, 0, &mut Untimed).unwrap();
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
    ftl.write(7, Some(&sector(&cfg, 7, 1)), 0, &mut Untimed).unwrap();
    assert!(ftl.inject_errors(7, 10).is_err(), "buffered sectors are refused");
    ftl.flush(0, &mut Untimed);
    ftl.inject_errors(7, 1000).unwrap();
    let Location::Flash(psa) = ftl.locate(7) else { panic!() };
    assert_eq!(ftl.injected_errors(psa), 1000);
    ftl.write(7, Some(&sector(&cfg, 7, 2)), 0, &mut Untimed).unwrap();
    ftl.flush(0, &mut Untimed);
    let Location::Flash(p2) = ftl.locate(7) else { panic!() };
    assert_eq!(ftl.injected_errors(p2), 0, "a rewrite has no errors");
}

#[test]
fn spare_bytes_set_in_place_stay_with_the_sector_and_follow_it_through_gc() {
    let cfg = small_config(&[]);
    let mut ftl = memory_ftl(&cfg);
    let tag = |l: u32| [l as u8 ^ 0x5A; SPARE_BYTES];
    assert_eq!(ftl.set_spare_of(3, &tag(3)), None, "unmapped");
    ftl.write(3, Some(&sector(&cfg, 3, 1)), 0, &mut Untimed).unwrap();
    let (_, programmed) = ftl.set_spare_of(3, &tag(3)).unwrap();
    assert!(!programmed, "still in an open page");
    assert_eq!(ftl.spare_of(3), tag(3));
    ftl.flush(0, &mut Untimed);
    assert_eq!(ftl.spare_of(3), tag(3), "programmed with the page");
    ftl.write(4, Some(&sector(&cfg, 4, 1)), 0, &mut Untimed).unwrap();
    ftl.flush(0, &mut Untimed);
    let (psa, programmed) = ftl.set_spare_of(4, &tag(4)).unwrap();
    assert!(programmed && ftl.locate(4) == Location::Flash(psa));
    assert_eq!(ftl.spare_of(4), tag(4));
    assert_eq!(read(&ftl, 4), sector(&cfg, 4, 1), "the data and its checksum are untouched");
    // Overwrite other sectors until GC has moved 3 and 4; their spares move with them.
    let n = cfg.logical_sectors() as u32;
    let mut x = 12345u32;
    for round in 0..20 * n {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        let l = 5 + (x >> 8) % (n - 5);
        ftl.write(l, Some(&sector(&cfg, l, round)), 0, &mut Untimed).unwrap();
    }
    ftl.flush(0, &mut Untimed);
    assert_ne!(ftl.locate(4), Location::Flash(psa), "GC moved it");
    assert_eq!((ftl.spare_of(3), ftl.spare_of(4)), (tag(3), tag(4)));
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
                ftl.write(l, Some(&sector(&cfg, l, round + 1)), 0, &mut Untimed).unwrap();
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
        ftl.flush(0, &mut Untimed);
        // Unflushed writes after the flush may or may not survive; they must not corrupt anything else.
        ftl.write(200, Some(&sector(&cfg, 200, 99)), 0, &mut Untimed).unwrap();
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
        ftl.write(l, Some(&sector(cfg, l, 1)), 0, &mut Untimed).unwrap();
    }
    ftl.flush(0, &mut Untimed);
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
    let damages: [(&str, fn(&mut [u8])); 2] =
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
