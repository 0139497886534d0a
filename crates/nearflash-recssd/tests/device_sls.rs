//! RecSSD on an emulated Cosmos+ device: the NDP path, the baseline path and the DRAM path return the same
//! pooled vectors as the reference; malformed requests complete with their NVMe status and fault code; the
//! timing shows the paper's mechanisms (parallel page reads for NDP, the page buffer for sequential lookups).

use nearflash_core::config::load_preset;
use nearflash_core::nvme::DataBuf;
use nearflash_core::nvme::{Sqe, Status};
use nearflash_core::{Device, DeviceOptions};
use nearflash_recssd::firmware::RecssdFirmware;
use nearflash_recssd::host::jobs::SlsPath;
use nearflash_recssd::host::runner::{Batch, RecHost, RunOptions};
use nearflash_recssd::host::tables::{DeviceTables, TableData, TableSpec};
use nearflash_recssd::host::HostError;
use nearflash_recssd::layout::Placement;
use nearflash_recssd::ndp_command::{config_sqe, result_sqe, NdpFault};
use nearflash_recssd::ndp_wire::{NdpConfig, NdpPair};
use nearflash_recssd::params::RecssdParams;
use nearflash_recssd::sls::{embedding_bag_sum, TableView};

fn device(materialise: bool, params: serde_json::Value) -> Device {
    let mut tree = load_preset("cosmos-plus").unwrap();
    tree.set("host.stack", "polled").unwrap();
    let mut dev = Device::memory(tree, DeviceOptions { seed: 3, materialise, ..Default::default() }).unwrap();
    dev.attach(Box::new(RecssdFirmware::new(params))).unwrap();
    dev
}

fn values(rows: usize, dim: usize, salt: usize) -> Vec<f32> {
    (0..rows * dim).map(|i| (((i * 7 + salt * 13) % 101) as f32 - 50.0) * 0.25).collect()
}

fn host(dev: &mut Device, specs: Vec<TableSpec>, placement: Placement) -> RecHost {
    let p = RecssdParams::default();
    let tables = DeviceTables::place(dev, specs, placement, &p, 1).unwrap();
    RecHost::new(dev, tables, p).unwrap()
}

fn close(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-4 * (1.0 + y.abs()))
}

#[test]
fn three_paths_agree_with_the_reference_on_adversarial_bags() {
    let mut dev = device(true, serde_json::json!({}));
    let (rows, dim) = (3000usize, 32usize);
    let tables = [values(rows, dim, 1), values(rows, 64, 2)];
    let specs = vec![
        TableSpec { rows: rows as u64, dim: dim as u32, data: TableData::Values(tables[0].clone()), attribute_bytes: 4 },
        TableSpec { rows: rows as u64, dim: 64, data: TableData::Values(tables[1].clone()), attribute_bytes: 4 },
    ];
    let mut h = host(&mut dev, specs, Placement::Packed);
    // Empty bags, repeated ids, ids on page boundaries (128 rows of dim 32 per page; 64 of dim 64), a bag
    // spanning many pages, the last row.
    let indices: Vec<u64> = vec![127, 128, 128, 0, 2999, 5, 5, 5, 255, 256, 1000, 1500, 2000, 2500, 64, 63];
    let offsets: Vec<u64> = vec![0, 0, 3, 3, 8, 16];
    for (t, (table, d)) in tables.iter().zip([dim, 64]).enumerate() {
        let tv = TableView::new(table, rows, d).unwrap();
        let want = embedding_bag_sum(&tv, &indices, &offsets, None, false).unwrap();
        for path in [SlsPath::Ndp, SlsPath::Baseline, SlsPath::Dram] {
            let (got, _, _) = h.sls(&mut dev, t, indices.clone(), &offsets, path).unwrap();
            assert!(close(&got, &want), "table {t} path {path:?}");
        }
    }
    // With a static partition the host's partial sums are merged in.
    h.set_partitions(&[vec![5, 5, 128, 2999], vec![64]]).unwrap();
    let (got, _, _) = h.sls(&mut dev, 0, indices.clone(), &offsets, SlsPath::Ndp).unwrap();
    let tv = TableView::new(&tables[0], rows, dim).unwrap();
    assert!(close(&got, &embedding_bag_sum(&tv, &indices, &offsets, None, false).unwrap()));
    let report = dev.report().extensions;
    let fw = &report["recssd"];
    assert!(fw["stats"]["requests"].as_u64().unwrap() >= 3);
    assert!(fw["ssd_cache"]["hits"].as_u64().unwrap() > 0, "repeated requests hit the SSD cache");
}

#[test]
fn batches_run_sequentially_and_pipelined_with_the_same_results() {
    let mut dev = device(true, serde_json::json!({}));
    let dim = 32;
    let data: Vec<Vec<f32>> = (0..3).map(|t| values(2048, dim, t)).collect();
    let specs = data
        .iter()
        .map(|v| TableSpec { rows: 2048, dim: dim as u32, data: TableData::Values(v.clone()), attribute_bytes: 4 })
        .collect();
    let mut h = host(&mut dev, specs, Placement::OneRowPerPage);
    let batches: Vec<Batch> = (0..6u64)
        .map(|b| Batch {
            tables: (0..3u64)
                .map(|t| ((0..40).map(|i| (i * 97 + b * 31 + t * 7) % 2048).collect(), vec![0, 10, 20, 30]))
                .collect(),
        })
        .collect();
    let flops = vec![2e6; batches.len()];
    let mut runs = Vec::new();
    for (path, pipelined) in [(SlsPath::Ndp, false), (SlsPath::Ndp, true), (SlsPath::Baseline, false), (SlsPath::Dram, false)] {
        h.reset_lru();
        let r = h.run(&mut dev, &batches, &flops, &RunOptions { path, pipelined, keep_outputs: true }).unwrap();
        for (b, batch) in batches.iter().enumerate() {
            for (t, (idx, offs)) in batch.tables.iter().enumerate() {
                let tv = TableView::new(&data[t], 2048, dim).unwrap();
                assert!(close(&r.outputs[b][t], &embedding_bag_sum(&tv, idx, offs, None, false).unwrap()));
            }
        }
        assert!(r.batches.iter().all(|b| b.taken <= b.sls_done && b.sls_done < b.done));
        runs.push(r);
    }
    let makespan = |r: &nearflash_recssd::host::runner::RunResult| r.finished - r.started;
    assert!(makespan(&runs[1]) < makespan(&runs[0]), "pipelining overlaps batches");
    assert!(makespan(&runs[3]) < makespan(&runs[0]), "DRAM is fastest");
    assert_eq!(runs[2].stats.reads + runs[2].lru.hits, 6 * 3 * 40);
}

#[test]
fn ndp_is_faster_than_one_read_per_row_for_strided_ids_and_page_buffer_helps_sequential_ones() {
    // Generated (timing-only) tables on a device that stores nothing: 700K rows of dim 64 (the artifact's
    // microbenchmark), batch of 4 x 80 lookups.
    let mut dev = device(false, serde_json::json!({}));
    let spec = TableSpec { rows: 700_000, dim: 64, data: TableData::Generated { seed: 5 }, attribute_bytes: 4 };
    let mut h = host(&mut dev, vec![spec], Placement::Packed);
    let offsets: Vec<u64> = (0..4).map(|b| b * 80).collect();
    let time = |h: &mut RecHost, dev: &mut Device, ids: &Vec<u64>, path| {
        let t0 = dev.now();
        h.sls(dev, 0, ids.clone(), &offsets, path).unwrap();
        dev.now() - t0
    };
    let strided: Vec<u64> = (0..320).map(|i| 65 + 64 * i).collect();
    let seq: Vec<u64> = (0..320).map(|i| 1_000 + i).collect();
    h.set_lru_rows(0);
    let (str_base, str_ndp) = (time(&mut h, &mut dev, &strided, SlsPath::Baseline), time(&mut h, &mut dev, &strided, SlsPath::Ndp));
    let (seq_base, seq_ndp) = (time(&mut h, &mut dev, &seq, SlsPath::Baseline), time(&mut h, &mut dev, &seq, SlsPath::Ndp));
    assert!(str_base > 3 * str_ndp, "STR: baseline {str_base} ns vs NDP {str_ndp} ns");
    assert!(seq_base < str_base / 4, "SEQ baseline reads hit the page buffer: {seq_base} vs {str_base}");
    assert!(seq_ndp < str_ndp, "SEQ NDP reads 5 pages instead of 320");
}

fn raw(dev: &mut Device, sqe: Sqe, data: DataBuf<'_>) -> (Status, Option<NdpFault>) {
    let d = dev.execute(1, sqe, data).unwrap();
    (d.status, NdpFault::from_code(d.dw0))
}

/// As `raw` for a command that must fail: (fault, the device's reason from its error log).
fn refused(dev: &mut Device, sqe: Sqe, data: DataBuf<'_>) -> (Option<NdpFault>, String) {
    let d = dev.execute(1, sqe, data).unwrap();
    assert!(!d.status.is_success(), "{sqe:?} succeeded");
    (NdpFault::from_code(d.dw0), dev.error_reason(1, d.cid).unwrap_or_default())
}

fn says(reason: &str, words: &str) {
    assert!(reason.contains(words), "{reason:?} does not say {words:?}");
}

#[test]
fn bad_requests_complete_with_clear_statuses() {
    let mut dev = device(true, serde_json::json!({"pending_entries": 2}));
    let spec = TableSpec { rows: 1000, dim: 32, data: TableData::Values(values(1000, 32, 0)), attribute_bytes: 4 };
    let h = host(&mut dev, vec![spec], Placement::Packed);
    let start = h.tables.tables[0].layout.start_lba();
    let payload = |c: &NdpConfig| {
        let mut b = c.encode().unwrap();
        b.resize(b.len().div_ceil(4096) * 4096, 0);
        b
    };
    let good = NdpConfig::from_bags(0, 32, &[1, 2, 900], &[0, 2]).unwrap();
    let mut unsorted = good.clone();
    unsorted.pairs.swap(0, 2);
    let beyond = NdpConfig::from_bags(0, 32, &[1000], &[0]).unwrap();
    let too_big = NdpConfig { result_embeddings: 8193, ..good.clone() };
    let wrong_dim = NdpConfig { embedding_length: 16, ..good.clone() };
    for (cfg, fault, words) in [
        (&unsorted, NdpFault::UnsortedPairs, "pairs must be sorted by input id"),
        (&beyond, NdpFault::InputBeyondTable, "input id 1000 is outside the table's 1000 rows"),
        (&too_big, NdpFault::ResultTooLarge, "8193 results"),
        (&wrong_dim, NdpFault::DimensionMismatch, "embeddingLength 16 does not match table 0's dim 32"),
    ] {
        let b = payload(cfg);
        let (s, f) = raw(&mut dev, config_sqe(0, start + 1, (b.len() / 4096) as u32), DataBuf::ToDevice(&b));
        assert_eq!((s, f), (Status::INVALID_FIELD, Some(fault)));
        says(&refused(&mut dev, config_sqe(0, start + 1, (b.len() / 4096) as u32), DataBuf::ToDevice(&b)).1, words);
    }
    // A result read with no config; a table that does not exist; a truncated payload; too many blocks.
    let mut out = vec![0u8; 4096];
    assert_eq!(raw(&mut dev, result_sqe(0, start + 1, 1), DataBuf::FromDevice(&mut out)), (Status::SEQUENCE_ERROR, Some(NdpFault::NoConfig)));
    says(&refused(&mut dev, result_sqe(0, start + 1, 1), DataBuf::FromDevice(&mut out)).1, "no config was sent for it");
    let b = payload(&good);
    let (f, why) = refused(&mut dev, config_sqe(0, start + 3000, 1), DataBuf::ToDevice(&b));
    assert_eq!(f, Some(NdpFault::NoSuchTable));
    says(&why, "request id 0 (modulus 1000): no table is registered at LBA");
    let (f, why) = refused(&mut dev, config_sqe(0, start + 1, 1), DataBuf::ToDevice(&b[..10]));
    assert_eq!(f, Some(NdpFault::DataBuffer));
    says(&why, "NLB 1 needs a config payload of 4096 bytes, got 10 bytes");
    let (f, why) = refused(&mut dev, config_sqe(0, start + 1, 4096), DataBuf::ToDevice(&b));
    assert_eq!(f, Some(NdpFault::BadCommand));
    says(&why, "NLB 4096: expected 1..=");
    // Two entries: a third config without reading results is refused; reading frees an entry.
    for rid in [1, 2] {
        assert_eq!(raw(&mut dev, config_sqe(0, start + rid, 1), DataBuf::ToDevice(&b)).0, Status::SUCCESS);
    }
    let (f, why) = refused(&mut dev, config_sqe(0, start + 2, 1), DataBuf::ToDevice(&b));
    assert_eq!(f, Some(NdpFault::DuplicateRequest));
    says(&why, "request id 2 of the table at LBA");
    let (f, why) = refused(&mut dev, config_sqe(0, start + 3, 1), DataBuf::ToDevice(&b));
    assert_eq!(f, Some(NdpFault::BufferFull));
    says(&why, "all 2 pending-request entries hold unread results");
    let (f, why) = refused(&mut dev, result_sqe(0, start + 1, 2), DataBuf::FromDevice(&mut vec![0u8; 8192]));
    assert_eq!(f, Some(NdpFault::TooManySectors));
    says(&why, "NLB 2: expected 1..=1");
    // A damaged table descriptor, and an opcode the firmware does not take.
    let opcode = RecssdParams::default().register_opcode;
    let mut desc = vec![0u8; 4096];
    desc[..8].copy_from_slice(b"XXXXXXXX");
    let (f, why) = refused(&mut dev, Sqe { opcode, nsid: 1, ..Sqe::default() }, DataBuf::ToDevice(&desc));
    assert_eq!(f, Some(NdpFault::BadTable));
    says(&why, "bytes 0..8 are not the magic");
    assert_eq!(raw(&mut dev, result_sqe(0, start + 1, 1), DataBuf::FromDevice(&mut out)).0, Status::SUCCESS);
    let first = f32::from_le_bytes(out[..4].try_into().unwrap());
    let v = values(1000, 32, 0);
    assert!((first - (v[32] + v[64])).abs() < 1e-4);
    assert_eq!(raw(&mut dev, config_sqe(0, start + 3, 1), DataBuf::ToDevice(&b)).0, Status::SUCCESS);
    // Results read, entries free: a result id beyond resultEmbeddings is refused at config processing.
    for rid in [2, 3] {
        assert_eq!(raw(&mut dev, result_sqe(0, start + rid, 1), DataBuf::FromDevice(&mut out)).0, Status::SUCCESS);
    }
    let mut bad_result = good.clone();
    bad_result.pairs[0] = NdpPair { result: 7, input: 1 };
    let b = payload(&bad_result);
    assert_eq!(raw(&mut dev, config_sqe(0, start + 4, 1), DataBuf::ToDevice(&b)).1, Some(NdpFault::ResultBeyondRange));
    let err = HostError::check(Status::INVALID_FIELD, NdpFault::UnsortedPairs as u32, "config").unwrap_err();
    assert!(err.to_string().contains("sorted"), "{err}");
    let (f, why) = refused(&mut dev, config_sqe(0, start + 4, 1), DataBuf::ToDevice(&b));
    assert_eq!(f, Some(NdpFault::ResultBeyondRange));
    says(&why, "result id 7 is not below resultEmbeddings = 2");
    // Without the extension the flag is refused by standard decoding.
    let mut plain = Device::memory(load_preset("cosmos-plus").unwrap(), DeviceOptions::default()).unwrap();
    plain.create_queue_pair(1, 8).unwrap();
    let b = payload(&good);
    assert_eq!(raw(&mut plain, config_sqe(0, 1, 1), DataBuf::ToDevice(&b)).0, Status::INVALID_FIELD);
}

/// Fig. 11a: rows stored as fp16 and int8 (stored and generated tables). Every path sums the values the stored
/// rows decode to, within the format's precision of the fp32 sums; narrower rows take fewer pages and cost the
/// FTL core less per row.
#[test]
fn quantised_rows_sum_within_tolerance_of_fp32() {
    let (rows, dim) = (3000usize, 32usize);
    let fp32: Vec<f32> = values(rows, dim, 4).iter().map(|v| v * 1.013 + 0.001).collect(); // not fp16-exact
    let indices: Vec<u64> = (0..400).map(|i| (i * 37 % rows) as u64).collect();
    let offsets: Vec<u64> = (0..20).map(|b| b * 20).collect();
    let tv = TableView::new(&fp32, rows, dim).unwrap();
    let want = embedding_bag_sum(&tv, &indices, &offsets, None, false).unwrap();
    let max = fp32.iter().fold(0f32, |m, v| m.max(v.abs()));
    let mut ndp_ns = Vec::new();
    for (bytes, per_element) in [(4u32, 0.0f32), (2, max / 1024.0), (1, max / 127.0 / 2.0)] {
        let mut dev = device(true, serde_json::json!({"ssd_cache": false}));
        let specs = vec![
            TableSpec { rows: rows as u64, dim: dim as u32, data: TableData::Values(fp32.clone()), attribute_bytes: bytes },
            TableSpec { rows: 100_000, dim: dim as u32, data: TableData::Generated { seed: 9 }, attribute_bytes: bytes },
        ];
        let mut h = host(&mut dev, specs, Placement::Packed);
        assert_eq!(h.tables.tables[0].layout.row_bytes(), u64::from(bytes) * dim as u64);
        let t0 = dev.now();
        let (ndp, _, _) = h.sls(&mut dev, 0, indices.clone(), &offsets, SlsPath::Ndp).unwrap();
        ndp_ns.push(dev.now() - t0);
        let (base, _, _) = h.sls(&mut dev, 0, indices.clone(), &offsets, SlsPath::Baseline).unwrap();
        let (dram, _, _) = h.sls(&mut dev, 0, indices.clone(), &offsets, SlsPath::Dram).unwrap();
        assert!(close(&ndp, &dram) && close(&base, &dram), "{bytes} B: paths disagree");
        let tol = 20.0 * per_element * 1.01 + 1e-4; // 20 rows per bag, each element off by at most per_element
        for (g, w) in dram.iter().zip(&want) {
            assert!((g - w).abs() <= tol, "{bytes} B: {g} vs fp32 {w} (tolerance {tol})");
        }
        if bytes < 4 {
            assert!(dram.iter().zip(&want).any(|(g, w)| g != w), "{bytes} B rows really are narrower");
        }
        // generated tables: the firmware regenerates and quantises rows as the host does
        let gi: Vec<u64> = indices.iter().map(|i| i * 31 % 100_000).collect();
        let (gn, _, _) = h.sls(&mut dev, 1, gi.clone(), &offsets, SlsPath::Ndp).unwrap();
        let (gd, _, _) = h.sls(&mut dev, 1, gi, &offsets, SlsPath::Dram).unwrap();
        assert!(close(&gn, &gd), "{bytes} B generated: NDP and DRAM disagree");
    }
    assert!(ndp_ns[2] < ndp_ns[1] && ndp_ns[1] < ndp_ns[0], "narrower rows translate faster: {ndp_ns:?}");
}

#[test]
fn bad_element_widths_are_refused_before_anything_is_written() {
    let mut dev = device(true, serde_json::json!({}));
    for bytes in [0u32, 3, 8] {
        let spec = TableSpec { rows: 100, dim: 32, data: TableData::Values(values(100, 32, 0)), attribute_bytes: bytes };
        let err = DeviceTables::place(&mut dev, vec![spec], Placement::Packed, &RecssdParams::default(), 1).unwrap_err();
        assert!(err.to_string().contains("attribute_bytes"), "{err}");
    }
}

/// What one NDP request over `pages` strided rows beside 48 host 4 KiB reads gave, its class at `level` with
/// `weight`: per class (`recssd.ndp`, and the host's `medium`), transactions and their total wait in the die queues
/// (ns).
#[derive(Debug)]
struct NdpBeside {
    ndp: (u64, u64),
    host: (u64, u64),
}

fn ndp_beside_host_reads(level: &str, weight: u32, pages: u64) -> NdpBeside {
    // Host reads through the core's read path (not GreedyFTL's loop), so they keep their queue's class.
    let params = serde_json::json!({"ndp_class_level": level, "ndp_class_weight": weight, "serve_host_reads": false});
    let mut dev = device(false, params);
    let spec = TableSpec { rows: 700_000, dim: 64, data: TableData::Generated { seed: 5 }, attribute_bytes: 4 };
    let h = host(&mut dev, vec![spec], Placement::Packed);
    let start = h.tables.tables[0].layout.start_lba();
    let (ndp_q, host_q) = (2, 3);
    dev.create_queue_pair(ndp_q, 64).unwrap();
    dev.create_queue_pair(host_q, 64).unwrap();
    dev.reset_stats();
    let ids: Vec<u32> = (0..pages as u32).map(|i| 65 + 64 * i).collect();
    let mut config = NdpConfig::from_bags(0, 64, &ids, &[0]).unwrap().encode().unwrap();
    config.resize(config.len().div_ceil(4096) * 4096, 0);
    dev.submit(ndp_q, config_sqe(0, start + 1, (config.len() / 4096) as u32), DataBuf::ToDevice(&config)).unwrap();
    let mut result = vec![0u8; 4096];
    dev.submit(ndp_q, result_sqe(1, start + 1, 1), DataBuf::FromDevice(&mut result)).unwrap();
    // Rows the NDP request does not touch, on the same dies.
    for i in 0..48u16 {
        dev.submit(host_q, Sqe::rw(nearflash_core::nvme::opcode::READ, i, start + 4 * (2100 + 37 * u64::from(i)), 1), DataBuf::None).unwrap();
    }
    while let Some((q, t)) = dev.next_completion(&[ndp_q, host_q]) {
        dev.advance_to(t);
        while let Some(c) = dev.reap(q) {
            assert!(c.cqe.status().is_success());
        }
    }
    let classes = dev.report().sched.stats.classes;
    let stats = |name: &str| classes.get(name).map_or((0, 0), |c| (c.transactions, c.wait_ns));
    NdpBeside { ndp: stats("recssd.ndp"), host: stats("medium") }
}

/// The NDP class's level decides who waits in the die queues: urgent NDP reads wait less than at the normal level
/// and the host's reads more; background NDP reads wait at least as long as at the normal level. Each level issues one `recssd.ndp` transaction per page. (The
/// request's end and the host reads' latency do not move here: the firmware core is the bottleneck, `recssd.md`.)
#[test]
fn ndp_reads_carry_their_own_flash_class_at_the_level_asked_for() {
    let runs: Vec<NdpBeside> = ["urgent", "normal", "background"].iter().map(|l| ndp_beside_host_reads(l, 2, 256)).collect();
    for r in &runs {
        assert_eq!((r.ndp.0, r.host.0), (256, 48), "one recssd.ndp transaction per NDP page");
    }
    let (urgent, normal, background) = (&runs[0], &runs[1], &runs[2]);
    assert!(urgent.ndp.1 < normal.ndp.1 && normal.ndp.1 <= background.ndp.1, "NDP waits {:?} / {:?} / {:?}", urgent.ndp, normal.ndp, background.ndp);
    assert!(urgent.host.1 > normal.host.1, "host waits {:?} / {:?}", urgent.host, normal.host);
    // At the normal level the weight is the NDP reads' turn: each die here gets its host read after it has issued
    // two of its four NDP pages, so at weight 2 the turn has just passed to the host, as at background (equal to the
    // nanosecond, recssd.md); at weight 4 the die finishes its NDP pages first, as an urgent class would.
    let heavier = ndp_beside_host_reads("normal", 4, 256);
    assert!(heavier.ndp.1 < background.ndp.1 && heavier.host.1 > background.host.1, "weight 4 {heavier:?}, background {background:?}");
    // A level that is not one of the three is refused at attach, naming the parameter.
    let mut tree = load_preset("cosmos-plus").unwrap();
    tree.set("host.stack", "polled").unwrap();
    let mut dev = Device::memory(tree, DeviceOptions::default()).unwrap();
    let err = dev.attach(Box::new(RecssdFirmware::new(serde_json::json!({"ndp_class_level": "idle"})))).unwrap_err();
    assert!(err.to_string().contains("ndp_class_level"), "{err}");
}

#[test]
fn the_baselines_read_completions_are_the_devices_one_per_read_in_order() {
    let mut dev = device(false, serde_json::json!({"baseline_queue_depth": 4}));
    let spec = TableSpec { rows: 700_000, dim: 64, data: TableData::Generated { seed: 5 }, attribute_bytes: 4 };
    let mut h = host(&mut dev, vec![spec], Placement::Packed);
    let (ids, offsets): (Vec<u64>, Vec<u64>) = ((0..200).map(|i| 65 + 640 * i).collect(), vec![0, 50, 100, 150]);
    let t0 = dev.now();
    let (_, stats, done) = h.sls(&mut dev, 0, ids.clone(), &offsets, SlsPath::Baseline).unwrap();
    assert_eq!(done.len() as u64, stats.reads);
    assert_eq!(stats.reads, 200, "distinct pages, no LRU hits");
    assert!(done.windows(2).all(|w| w[0] <= w[1]), "reaped in completion order");
    assert!(done[0] > t0 && *done.last().unwrap() <= dev.now());
    // Spread over the call as the reads complete (four in flight), not bunched at its end.
    let span = dev.now() - t0;
    assert!(done[done.len() / 2] - t0 < span * 6 / 10 && done[done.len() / 2] - t0 > span * 4 / 10);
    let (_, _, none) = h.sls(&mut dev, 0, ids, &offsets, SlsPath::Ndp).unwrap();
    assert!(none.is_empty());
}
