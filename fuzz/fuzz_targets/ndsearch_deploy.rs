//! SearSSD's firmware from untrusted bytes: a `DEPLOY` blob is parsed (`deploy::decode`) without panicking or
//! over-allocating, and on a device with a small index deployed, arbitrary `DEPLOY` and `SEARCH` payloads complete
//! with a status (never a panic), after which the deployed index still answers its known request the same way.
#![no_main]

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;
use nearflash_core::config::load_preset;
use nearflash_core::nvme::{DataBuf, Sqe};
use nearflash_core::{Device, DeviceOptions};
use nearflash_ndsearch::deploy::{decode, encode};
use nearflash_ndsearch::firmware::{SearSsd, OP_DEPLOY, OP_RESULTS, OP_SEARCH};
use nearflash_ndsearch::study::Reorder;
use nearflash_ndsearch::{Dtype, Index, Kind, Metric, Params, Rows};

struct Fixture {
    dev: Device,
    blob: Vec<u8>,
    request: Vec<u8>,
    answer: Vec<u8>,
}

fn cmd(dev: &mut Device, op: u8, data: DataBuf<'_>) -> bool {
    dev.execute(1, Sqe { opcode: op, nsid: 1, ..Sqe::default() }, data).unwrap().status.is_success()
}

fn answer(f: &mut Fixture) -> Vec<u8> {
    let req = f.request.clone();
    assert!(cmd(&mut f.dev, OP_SEARCH, DataBuf::ToDevice(&req)));
    let mut out = vec![0u8; 4 * 3 * 8];
    assert!(cmd(&mut f.dev, OP_RESULTS, DataBuf::FromDevice(&mut out)));
    out
}

fn fixture() -> Fixture {
    let mut t = load_preset("searssd").unwrap();
    for (k, v) in [("channels", "1"), ("chips_per_channel", "2"), ("blocks_per_plane", "32"), ("pages_per_block", "16"),
        ("page_size", "4KiB"), ("over_provisioning", "40"), ("ext_reserved_blocks", "1"), ("write_buffer", "256KiB")] {
        t.set(k, v).unwrap();
    }
    let mut dev = Device::memory(t, DeviceOptions::default()).unwrap();
    dev.attach(Box::new(SearSsd::new(serde_json::Value::Null))).unwrap();
    dev.create_queue_pair(1, 8).unwrap();
    let p = Params { kind: Kind::Hnsw, metric: Metric::L2, dtype: Dtype::F32, dim: 4, r: 4, ef_construction: 16, alpha: 1.2, seed: 1 };
    let mut ix = Index::new(p).unwrap();
    ix.add(Rows::F32((0..4 * 64).map(|i| (i % 17) as f32).collect())).unwrap();
    let blob = encode(&ix, Reorder::DegreeBfs).unwrap();
    let mut request = Vec::new();
    for w in [3u32, 8, 4, 0, 1, 2, 3] {
        request.extend_from_slice(&w.to_le_bytes());
    }
    (0..16).for_each(|i| request.extend_from_slice(&(i as f32).to_le_bytes()));
    let mut f = Fixture { dev, blob, request, answer: Vec::new() };
    let blob = f.blob.clone();
    assert!(cmd(&mut f.dev, OP_DEPLOY, DataBuf::ToDevice(&blob)));
    f.answer = answer(&mut f);
    f
}

thread_local! {
    static FIXTURE: RefCell<Fixture> = RefCell::new(fixture());
}

fuzz_target!(|data: &[u8]| {
    let _ = decode(data);
    FIXTURE.with(|f| {
        let f = &mut *f.borrow_mut();
        if data.first().is_some_and(|b| b & 1 == 1) {
            if cmd(&mut f.dev, OP_DEPLOY, DataBuf::ToDevice(&data[1..])) {
                // a valid foreign deployment replaced ours: put ours back
                let blob = f.blob.clone();
                assert!(cmd(&mut f.dev, OP_DEPLOY, DataBuf::ToDevice(&blob)));
            }
        } else {
            let _ = cmd(&mut f.dev, OP_SEARCH, DataBuf::ToDevice(data));
        }
        assert_eq!(answer(f), f.answer, "the deployed index answers as before");
    });
});
