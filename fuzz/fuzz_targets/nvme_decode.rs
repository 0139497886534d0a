//! Decoding of arbitrary submission entries and Dataset Management ranges: never a panic, decoded commands stay
//! within the namespace, and every refusal carries its reason.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nearflash_core::nvme::{decode_admin, decode_io, parse_dsm_ranges, IoCommand, Namespace, Sqe, SQE_BYTES};

fuzz_target!(|data: &[u8]| {
    if data.len() < SQE_BYTES {
        return;
    }
    let raw: &[u8; SQE_BYTES] = data[..SQE_BYTES].try_into().unwrap();
    let sqe = Sqe::from_bytes(raw);
    assert_eq!(sqe.to_bytes(), *raw);
    let ns = Namespace { lbas: 1 << 20, max_lbas: 256 };
    match decode_io(&sqe, &ns) {
        Ok(IoCommand::Read { slba, nlb, .. } | IoCommand::Write { slba, nlb, .. }) => {
            assert!(slba + u64::from(nlb) <= ns.lbas && nlb <= ns.max_lbas);
        }
        Ok(IoCommand::Dsm { ranges, .. }) => {
            if let Ok(r) = parse_dsm_ranges(&data[SQE_BYTES..], ranges, &ns) {
                assert!(r.iter().all(|&(s, n)| s + u64::from(n) <= ns.lbas));
            }
        }
        Err(r) => assert!(!r.detail.reason.is_empty(), "a refusal without a reason"),
        _ => {}
    }
    if let Err(r) = decode_admin(&sqe) {
        assert!(!r.detail.reason.is_empty(), "a refusal without a reason");
    }
});
