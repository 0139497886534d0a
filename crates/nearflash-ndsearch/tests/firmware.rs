//! The SearSSD firmware on an emulated device: deployed through its command interface, searched in lock-step
//! batches with vertex pages sensed beside the LUNs, it returns exactly the host search's ids and distances
//! (many seeds, both graph kinds, speculation on and off, batches smaller than the query set); bad requests are
//! refused with a status and change nothing; the deployment survives close and reopen.

use nearflash_core::config::{load_preset, ConfigTree};
use nearflash_core::ext::{DataBuf, Sqe, Status};
use nearflash_core::{Device, DeviceOptions};
use nearflash_ndsearch::deploy::encode;
use nearflash_ndsearch::firmware::{SearSsd, OP_DEPLOY, OP_RESULTS, OP_SEARCH};
use nearflash_ndsearch::study::Reorder;
use nearflash_ndsearch::{Dtype, Index, Kind, Metric, Params, Rows, VecRef};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn tree(reserved: u32) -> ConfigTree {
    let mut t = load_preset("searssd").unwrap();
    for (k, v) in [
        ("channels", "2".to_string()),
        ("chips_per_channel", "2".to_string()),
        ("blocks_per_plane", "32".to_string()),
        ("over_provisioning", "40".to_string()),
        ("pages_per_block", "16".to_string()),
        ("page_size", "4KiB".to_string()),
        ("ext_reserved_blocks", reserved.to_string()),
        ("write_buffer", "256KiB".to_string()),
    ] {
        t.set(k, &v).unwrap();
    }
    t
}

fn device(reserved: u32, params: serde_json::Value) -> Device {
    let mut dev = Device::memory(tree(reserved), DeviceOptions::default()).unwrap();
    dev.attach(Box::new(SearSsd::new(params))).unwrap();
    dev.create_queue_pair(1, 16).unwrap();
    dev
}

fn index(kind: Kind, metric: Metric, n: usize, dim: usize, seed: u64) -> (Index, Vec<f32>) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let centres: Vec<f32> = (0..8 * dim).map(|_| rng.gen_range(-4.0..4.0)).collect();
    let mut pts = |m: usize| -> Vec<f32> {
        (0..m).flat_map(|i| (0..dim).map(|j| centres[(i % 8) * dim + j] + rng.gen_range(-1.0..1.0)).collect::<Vec<_>>()).collect()
    };
    let base = pts(n);
    let q = pts(30);
    let p = Params { kind, metric, dtype: Dtype::F32, dim, r: 10, ef_construction: 40, alpha: 1.2, seed };
    let mut ix = Index::new(p).unwrap();
    ix.add(Rows::F32(base)).unwrap();
    (ix, q)
}

fn cmd(dev: &mut Device, op: u8, data: DataBuf<'_>) -> nearflash_core::Done {
    dev.execute(1, Sqe { opcode: op, nsid: 1, ..Sqe::default() }, data).unwrap()
}

fn request(ix: &Index, q: &[f32], k: u32, ef: u32) -> Vec<u8> {
    let dim = ix.params().dim;
    let mut rows = Rows::F32(q.to_vec());
    let nq = ix.prepare(&mut rows, "q").unwrap();
    let Rows::F32(q) = rows else { unreachable!() };
    let mut r = Vec::new();
    for w in [k, ef, nq as u32] {
        r.extend_from_slice(&w.to_le_bytes());
    }
    for i in 0..nq {
        r.extend_from_slice(&ix.entry_for(VecRef::F32(&q[i * dim..(i + 1) * dim])).unwrap().to_le_bytes());
    }
    q.iter().for_each(|x| r.extend_from_slice(&x.to_le_bytes()));
    r
}

fn search(dev: &mut Device, req: &[u8], nq: usize, k: usize) -> Vec<(u32, f32)> {
    let d = cmd(dev, OP_SEARCH, DataBuf::ToDevice(req));
    assert_eq!(d.status, Status::SUCCESS);
    let mut out = vec![0u8; nq * k * 8];
    assert_eq!(cmd(dev, OP_RESULTS, DataBuf::FromDevice(&mut out)).status, Status::SUCCESS);
    out.chunks_exact(8)
        .map(|c| (u32::from_le_bytes(c[..4].try_into().unwrap()), f32::from_le_bytes(c[4..].try_into().unwrap())))
        .collect()
}

#[test]
fn in_storage_search_equals_host_search_over_many_seeds() {
    let dim = 8;
    for seed in 0..8u64 {
        let kind = if seed % 2 == 0 { Kind::Hnsw } else { Kind::Vamana };
        let metric = [Metric::L2, Metric::Cosine][(seed / 2 % 2) as usize];
        let (ix, q) = index(kind, metric, 500, dim, seed);
        let reorder = [Reorder::DegreeBfs, Reorder::None, Reorder::RandomBfs(seed)][(seed % 3) as usize];
        let params = serde_json::json!({ "batch": 7 + seed, "speculate": (seed % 3) * 2 });
        let mut dev = device(4, params);
        let d = cmd(&mut dev, OP_DEPLOY, DataBuf::ToDevice(&encode(&ix, reorder).unwrap()));
        assert_eq!((d.status, d.dw0), (Status::SUCCESS, 500));
        let (k, ef) = (10usize, 20 + seed as usize);
        let got = search(&mut dev, &request(&ix, &q, k as u32, ef as u32), 30, k);
        let mut rows = Rows::F32(q.clone());
        ix.prepare(&mut rows, "q").unwrap();
        let Rows::F32(qp) = rows else { unreachable!() };
        for i in 0..30 {
            let host = ix.search_one(VecRef::F32(&qp[i * dim..(i + 1) * dim]), k, ef);
            let dev_r: Vec<(u32, f32)> = got[i * k..(i + 1) * k].to_vec();
            let host_r: Vec<(u32, f32)> = host.iter().map(|c| (c.id, c.d)).collect();
            assert_eq!(dev_r, host_r, "seed {seed} query {i}");
        }
        let fw = dev.extension::<SearSsd>("ndsearch").unwrap();
        let rep = nearflash_core::ext::Extension::report(fw);
        assert!(rep["stats"]["search_page_commands"].as_u64().unwrap() > 0, "{rep}");
        assert_eq!(rep["stats"]["queries"], 30);
        dev.check_consistency().unwrap();
    }
}

#[test]
fn bad_requests_are_refused_and_change_nothing() {
    let (ix, q) = index(Kind::Hnsw, Metric::L2, 400, 8, 3);
    let mut dev = device(1, serde_json::Value::Null);
    let req = request(&ix, &q, 10, 16);
    // each refusal says why in the device's error log
    let said = |dev: &mut Device, d: &nearflash_core::Done, words: &str| {
        let reason = dev.error_reason(1, d.cid).unwrap_or_default();
        assert!(reason.contains(words), "{reason:?} does not say {words:?}");
    };
    // search before deploy
    let d = cmd(&mut dev, OP_SEARCH, DataBuf::ToDevice(&req));
    assert_eq!(d.status, Status::SEQUENCE_ERROR);
    said(&mut dev, &d, "before any DEPLOY");
    let blob = encode(&ix, Reorder::DegreeBfs).unwrap();
    let d = cmd(&mut dev, OP_DEPLOY, DataBuf::ToDevice(&blob[..blob.len() - 1]));
    assert_eq!(d.status, Status::INVALID_FIELD);
    said(&mut dev, &d, "does not decode");
    assert_eq!(cmd(&mut dev, OP_DEPLOY, DataBuf::ToDevice(&blob)).status, Status::SUCCESS);
    let good = search(&mut dev, &req, 30, 10);
    // k beyond the index, ef 0, truncated, entry out of range, NaN query
    let mut bad_k = req.clone();
    bad_k[..4].copy_from_slice(&401u32.to_le_bytes());
    let mut bad_ef = req.clone();
    bad_ef[4..8].copy_from_slice(&0u32.to_le_bytes());
    let mut bad_entry = req.clone();
    bad_entry[12..16].copy_from_slice(&400u32.to_le_bytes());
    let mut nan = req.clone();
    let at = nan.len() - 4;
    nan[at..].copy_from_slice(&f32::NAN.to_le_bytes());
    let truncated = req[..req.len() - 2].to_vec();
    let cases = [(&bad_k, "k = 401"), (&bad_ef, "ef = 0"), (&bad_entry, "entry point 400"), (&nan, "NaN"), (&truncated, "queries of 8 dims")];
    for (bad, words) in cases {
        let d = cmd(&mut dev, OP_SEARCH, DataBuf::ToDevice(bad));
        assert_eq!(d.status, Status::INVALID_FIELD);
        said(&mut dev, &d, words);
    }
    // too large for the reserved area (1 block per plane, 16 x 256 B vectors per page): refused, the old deployment still answers the same
    let (big, _) = index(Kind::Hnsw, Metric::L2, 4500, 64, 4);
    let d = cmd(&mut dev, OP_DEPLOY, DataBuf::ToDevice(&encode(&big, Reorder::None).unwrap()));
    assert_eq!(d.status, Status::CAPACITY_EXCEEDED);
    said(&mut dev, &d, "do not fit");
    assert_eq!(search(&mut dev, &req, 30, 10), good);
    // redeploy (erases and reprograms) and search again
    assert_eq!(cmd(&mut dev, OP_DEPLOY, DataBuf::ToDevice(&blob)).status, Status::SUCCESS);
    assert_eq!(search(&mut dev, &req, 30, 10), good);
}

#[test]
fn deployment_survives_close_and_reopen() {
    let dir = std::env::temp_dir().join(format!("nds2-fw-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (ix, q) = index(Kind::Vamana, Metric::L2, 300, 8, 5);
    let req = request(&ix, &q, 5, 16);
    let before = {
        let mut dev = Device::create(&dir, tree(4), DeviceOptions::default()).unwrap();
        dev.attach(Box::new(SearSsd::new(serde_json::Value::Null))).unwrap();
        dev.create_queue_pair(1, 16).unwrap();
        assert_eq!(cmd(&mut dev, OP_DEPLOY, DataBuf::ToDevice(&encode(&ix, Reorder::DegreeBfs).unwrap())).status, Status::SUCCESS);
        let r = search(&mut dev, &req, 30, 5);
        dev.close().unwrap();
        r
    };
    let mut dev = Device::open(&dir, DeviceOptions::default()).unwrap();
    dev.attach(Box::new(SearSsd::new(serde_json::Value::Null))).unwrap();
    dev.create_queue_pair(1, 16).unwrap();
    assert_eq!(search(&mut dev, &req, 30, 5), before);
    let _ = std::fs::remove_dir_all(&dir);
}
