//! The Agent and the Initiator on a small device: every strategy returns the host reference's answer, malformed
//! commands complete with NVMe errors, results longer than the buffer are fetched, split pages fall back to the
//! SSD CPUs, and a few points agree with Eq. 1 (the full sweep is the pytest agreement test's).

use super::*;
use crate::agent::{Extent, JobDescriptor, ResultKind, KERNEL_FAILED};
use crate::initiator::Input;
use crate::kernel::{run_serial, KernelSpec};
use crate::pages::{pack_lines, pack_records};
use nearflash_core::nvme::DataBuf;
use nearflash_core::nvme::{Sqe, Status};

fn small_device(c: Fig7Config) -> (Device, SystemSetup) {
    let s = fig7_setup(c, 4, 4);
    (build_device(&s, 3).unwrap(), s)
}

/// Inputs of every kernel (a few dozen pages each).
fn all_kernel_datasets() -> Vec<Dataset> {
    let mut v: Vec<Dataset> =
        ["linear_regression", "string_match", "kmeans", "scan"].iter().map(|k| fig7_dataset(k, 40, 5).unwrap()).collect();
    let layout = crate::PageLayout::new(PAGE).unwrap();
    let text = pack_lines(layout, &crate::datagen::text(200_000, 9)).unwrap();
    for spec in [r#"{"kernel":"grep","pattern":"furious"}"#, r#"{"kernel":"word_count","top":20}"#] {
        v.push(Dataset { kernel: "text", spec: KernelSpec::from_json(spec).unwrap(), pages: text.clone(), page_size: PAGE as u32 });
    }
    let px = pack_records(layout, &crate::datagen::pixels(300, 200, 2).unwrap(), 3).unwrap();
    v.push(Dataset { kernel: "histogram", spec: KernelSpec::from_json(r#"{"kernel":"histogram"}"#).unwrap(), pages: px, page_size: PAGE as u32 });
    let mut q6 = fig7_dataset("scan", 30, 6).unwrap();
    q6.spec = KernelSpec::from_json(r#"{"kernel":"filter_sum"}"#).unwrap();
    v.push(q6);
    v
}

#[test]
fn every_strategy_returns_the_host_reference_answer() {
    let (mut dev, s) = small_device(Fig7Config::IssdXl);
    let data = all_kernel_datasets();
    let jobs = place(&mut dev, &data, true).unwrap();
    for (d, job) in data.iter().zip(&jobs) {
        let kernel = d.spec.build(crate::PageLayout::new(PAGE).unwrap()).unwrap();
        let reference = run_serial(kernel.as_ref(), &d.pages).unwrap().output;
        for strategy in [
            Strategy::InStorage,
            Strategy::Conventional,
            Strategy::Static { fraction: 0.4 },
            Strategy::Dynamic { chunk_pages: 7 },
        ] {
            let p = run_on(&mut dev, &s, &s.model, job, strategy).unwrap();
            assert_eq!(p.output.as_ref(), Some(&reference), "{} {strategy:?}", d.spec.name());
            assert_eq!(p.input_bytes, d.pages.len() as u64);
            match strategy {
                Strategy::InStorage => assert_eq!(p.device_bytes, p.input_bytes),
                Strategy::Conventional => assert_eq!(p.device_bytes, 0),
                _ => assert!(p.device_bytes > 0 && p.device_bytes < p.input_bytes, "{strategy:?} split nothing"),
            }
        }
    }
}

/// Submits one raw command on queue 1 and waits for it.
fn raw(dev: &mut Device, sqe: Sqe, data: DataBuf<'_>) -> (Status, u32) {
    if !dev.has_queue(1) {
        dev.create_queue_pair(1, 32).unwrap();
    }
    let d = dev.execute(1, sqe, data).unwrap();
    (d.status, d.dw0)
}

fn load_sqe(len: usize) -> Sqe {
    Sqe { opcode: 0xB1, nsid: 1, cdw10: 0, cdw11: len as u32, ..Sqe::default() }
}

const RUN: Sqe = Sqe {
    opcode: 0xB2,
    flags: 0,
    cid: 0,
    nsid: 1,
    cdw2: 0,
    cdw3: 0,
    mptr: 0,
    prp1: 0,
    prp2: 0,
    cdw10: 0,
    cdw11: 0,
    cdw12: 0,
    cdw13: 0,
    cdw14: 0,
    cdw15: 0,
};

fn desc(spec: &str, extents: Vec<Extent>) -> JobDescriptor {
    JobDescriptor {
        spec: KernelSpec::from_json(spec).unwrap(),
        page_size: PAGE as u32,
        extents,
        first_page: 0,
        accelerate: false,
        result: ResultKind::Output,
        host_cpb: 0.0,
        host_ipb: 0.0,
    }
}

#[test]
fn malformed_commands_complete_with_nvme_errors() {
    let (mut dev, _) = small_device(Fig7Config::Issd400);
    let good = desc(r#"{"kernel":"scan"}"#, vec![Extent { slba: 0, nlb: 8 }]).encode();
    // RUN before any LOAD, FETCH of nothing
    assert_eq!(raw(&mut dev, RUN, DataBuf::None).0, Status::SEQUENCE_ERROR);
    let fetch = Sqe { opcode: 0xB6, ..RUN };
    assert_eq!(raw(&mut dev, fetch, DataBuf::FromDevice(&mut [0u8; 16])).0, Status::SEQUENCE_ERROR);
    // garbage, truncated, wrong direction, short buffer, bad slot
    assert_eq!(raw(&mut dev, load_sqe(40), DataBuf::ToDevice(&[0xAB; 40])).0, Status::INVALID_FIELD);
    assert_eq!(raw(&mut dev, load_sqe(good.len() - 3), DataBuf::ToDevice(&good)).0, Status::INVALID_FIELD);
    assert_eq!(raw(&mut dev, load_sqe(good.len()), DataBuf::FromDevice(&mut vec![0; good.len()])).0, Status::INVALID_FIELD);
    assert_eq!(raw(&mut dev, load_sqe(good.len() + 10), DataBuf::ToDevice(&good)).0, Status::DATA_TRANSFER_ERROR);
    assert_eq!(raw(&mut dev, Sqe { cdw10: 99, ..load_sqe(good.len()) }, DataBuf::ToDevice(&good)).0, Status::INVALID_FIELD);
    assert_eq!(raw(&mut dev, load_sqe(0), DataBuf::ToDevice(&good)).0, Status::INVALID_FIELD);
    // descriptors that parse but do not fit the device
    let lbas = dev.namespace().lbas;
    let beyond = desc(r#"{"kernel":"scan"}"#, vec![Extent { slba: lbas - 2, nlb: 4 }]).encode();
    assert_eq!(raw(&mut dev, load_sqe(beyond.len()), DataBuf::ToDevice(&beyond)).0, Status::LBA_OUT_OF_RANGE);
    let mut big_page = desc(r#"{"kernel":"scan"}"#, vec![Extent { slba: 0, nlb: 8 }]);
    big_page.page_size = 16384;
    let b = big_page.encode();
    assert_eq!(raw(&mut dev, load_sqe(b.len()), DataBuf::ToDevice(&b)).0, Status::INVALID_FIELD);
    let bad_regex = desc(r#"{"kernel":"grep","pattern":"(","regex":true}"#, vec![Extent { slba: 0, nlb: 8 }]).encode();
    assert_eq!(raw(&mut dev, load_sqe(bad_regex.len()), DataBuf::ToDevice(&bad_regex)).0, Status::INVALID_FIELD);
    // a valid job over bytes that are not lineitem pages: the kernel rejects the data
    let junk = vec![0xFFu8; 8 * 4096];
    let mut ini = Initiator::new(&mut dev, 1, Opcodes::default(), Default::default()).unwrap();
    ini.write_input(0, &junk, PAGE as u32).unwrap();
    assert_eq!(raw(&mut dev, load_sqe(good.len()), DataBuf::ToDevice(&good)), (Status::SUCCESS, 0));
    assert_eq!(raw(&mut dev, RUN, DataBuf::ToDevice(&good)).0, Status::INVALID_FIELD);
    assert_eq!(raw(&mut dev, RUN, DataBuf::FromDevice(&mut [0u8; 64])).0, KERNEL_FAILED);
    // an unclaimed vendor opcode is still rejected by the device
    assert_eq!(raw(&mut dev, Sqe { opcode: 0xC3, ..RUN }, DataBuf::None).0, Status::INVALID_OPCODE);
    let report = dev.report();
    assert!(report.extensions["issd"]["errors"].as_u64().unwrap() >= 10);
}

#[test]
fn accelerated_jobs_need_stream_processors() {
    let mut s = fig7_setup(Fig7Config::IssdXl, 4, 4);
    s.agent["stream_processors"] = serde_json::json!(false);
    let mut dev = build_device(&s, 1).unwrap();
    let mut d = desc(r#"{"kernel":"scan"}"#, vec![Extent { slba: 0, nlb: 8 }]);
    d.accelerate = true;
    let b = d.encode();
    assert_eq!(raw(&mut dev, load_sqe(b.len()), DataBuf::ToDevice(&b)).0, Status::INVALID_FIELD);
}

#[test]
fn long_results_are_fetched_and_unaligned_pages_map_on_the_ssd_cpus() {
    let (mut dev, _) = small_device(Fig7Config::Issd400);
    let d = fig7_dataset("scan", 24, 2).unwrap();
    // start the input one block off the flash-page grid: every 8 KiB kernel page spans two flash pages
    let mut ini = Initiator::new(&mut dev, 1, Opcodes::default(), Default::default()).unwrap();
    let input = ini.write_input(1, &d.pages, PAGE as u32).unwrap();
    let job = Job { spec: d.spec.clone(), input: input.clone(), accelerate: false };
    let reference = run_serial(d.spec.build(crate::PageLayout::new(PAGE).unwrap()).unwrap().as_ref(), &d.pages).unwrap();
    let run = ini.run(&job, Strategy::InStorage).unwrap();
    assert_eq!(run.output, reference.output);
    let stats = dev.report().extensions["issd"]["last"].clone();
    assert_eq!(stats["fmc_pages"], 0);
    assert_eq!(stats["cpu_pages"], 24);
    // a RUN buffer of 100 bytes: the rest comes by FETCH
    let b = desc(&d.spec.to_json(), input.extents.clone()).encode();
    assert_eq!(raw(&mut dev, load_sqe(b.len()), DataBuf::ToDevice(&b)).0, Status::SUCCESS);
    let mut head = vec![0u8; 100];
    let (st, total) = raw(&mut dev, RUN, DataBuf::FromDevice(&mut head));
    assert_eq!(st, Status::SUCCESS);
    assert!(total as usize > head.len());
    let mut rest = vec![0u8; total as usize - 100];
    let fetch = Sqe { opcode: 0xB6, cdw12: 100, ..RUN };
    assert_eq!(raw(&mut dev, fetch, DataBuf::FromDevice(&mut rest)), (Status::SUCCESS, total - 100));
    head.extend_from_slice(&rest);
    assert_eq!(Output::decode(&head).unwrap(), reference.output);
    let beyond = Sqe { opcode: 0xB6, cdw12: total + 1, ..RUN };
    assert_eq!(raw(&mut dev, beyond, DataBuf::FromDevice(&mut [0u8; 4])).0, Status::INVALID_FIELD);
    // multi-extent inputs (a file's block list) number pages across extents
    let halves = Input {
        extents: vec![Extent { slba: 1, nlb: 24 }, Extent { slba: 25, nlb: 24 }],
        page_size: PAGE as u32,
    };
    let split = Initiator::new(&mut dev, 1, Opcodes::default(), Default::default())
        .unwrap()
        .run(&Job { spec: d.spec.clone(), input: halves, accelerate: false }, Strategy::InStorage)
        .unwrap();
    assert_eq!(split.output, reference.output);
}

#[test]
fn bad_strategies_and_inputs_are_errors() {
    let (mut dev, _) = small_device(Fig7Config::Issd400);
    let mut ini = Initiator::new(&mut dev, 1, Opcodes::default(), Default::default()).unwrap();
    assert!(ini.write_input(0, &[1u8; 100], PAGE as u32).is_err());
    let d = fig7_dataset("linear_regression", 8, 1).unwrap();
    let input = ini.write_input(0, &d.pages, PAGE as u32).unwrap();
    let job = Job { spec: d.spec.clone(), input, accelerate: false };
    assert!(ini.run(&job, Strategy::Static { fraction: 1.5 }).is_err());
    assert!(ini.run(&job, Strategy::Dynamic { chunk_pages: 0 }).is_err());
    assert!(Initiator::new(&mut dev, 0, Opcodes::default(), Default::default()).is_err());
}

#[test]
fn fmc_bound_and_link_bound_points_agree_with_eq_1() {
    let sizing = Sizing { min_pages_per_channel: 24, target_seconds: 8e-3, max_pages: 4096 };
    let pts = fig7_points(&[Fig7Config::HostSata, Fig7Config::Issd400], &["linear_regression", "scan"], 8, sizing, 1, &serde_json::Value::Null)
        .unwrap();
    assert_eq!(pts.len(), 4);
    for p in &pts {
        assert!(p.model_error() < 0.1, "{} {}: sim {} model {}", p.config, p.kernel, p.bandwidth, p.model_bandwidth);
        assert!(p.energy_per_byte() > 0.0);
    }
    let issd_scan = pts.iter().find(|p| p.config == "iSSD-400" && p.kernel == "scan").unwrap();
    assert!((issd_scan.alpha - 0.05).abs() < 0.01, "alpha {}", issd_scan.alpha);
    let (mean, max) = error_summary(&pts);
    assert!(mean <= max && max < 0.1);
}

#[test]
fn failed_commands_say_which_field_in_the_error_log() {
    let (mut dev, _) = small_device(Fig7Config::Issd400);
    dev.create_queue_pair(1, 32).unwrap();
    let good = desc(r#"{"kernel":"scan"}"#, vec![Extent { slba: 0, nlb: 8 }]).encode();
    let bad_regex = desc(r#"{"kernel":"grep","pattern":"(","regex":true}"#, vec![Extent { slba: 0, nlb: 8 }]).encode();
    let cases: [(Sqe, &[u8], Status, &str); 4] = [
        (Sqe { cdw10: 99, ..load_sqe(good.len()) }, &good, Status::INVALID_FIELD, "slot 99 (CDW10) does not exist"),
        (load_sqe(0), &good, Status::INVALID_FIELD, "descriptor length 0 (CDW11)"),
        (load_sqe(40), &[0xAB; 40], Status::INVALID_FIELD, "descriptor:"),
        (load_sqe(bad_regex.len()), &bad_regex, Status::INVALID_FIELD, "grep:"),
    ];
    for (sqe, data, status, said) in cases {
        let d = dev.execute(1, sqe, DataBuf::ToDevice(data)).unwrap();
        assert_eq!(d.status, status);
        let reason = dev.error_reason(1, d.cid).expect("a reason is logged");
        assert!(reason.contains(said), "{reason:?} does not say {said:?}");
    }
    let d = dev.execute(1, RUN, DataBuf::None).unwrap();
    assert_eq!(d.status, Status::SEQUENCE_ERROR);
    assert!(dev.error_reason(1, d.cid).unwrap().contains("LOAD one first"));
    // a command that succeeds leaves no reason behind for the next failure to inherit
    let ok = dev.execute(1, load_sqe(good.len()), DataBuf::ToDevice(&good)).unwrap();
    assert!(ok.status.is_success());
    assert_eq!(dev.error_reason(1, ok.cid), None);
}
