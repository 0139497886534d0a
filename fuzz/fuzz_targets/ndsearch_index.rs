//! NDSearch's index loader from untrusted bytes: loading never panics or over-allocates; the bytes are tried as
//! they are and with a valid checksum appended (so the structural checks behind the CRC are reached); a loaded
//! index searches without panicking and saves to bytes that load again to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nearflash_ndsearch::{Index, Rows};

fn exercise(bytes: &[u8]) {
    let Ok(ix) = Index::from_bytes(bytes) else { return };
    let again = ix.to_bytes();
    assert_eq!(Index::from_bytes(&again).expect("saved bytes load").to_bytes(), again);
    let p = *ix.params();
    if !ix.is_empty() && p.dim <= 4096 {
        let q = match p.dtype {
            nearflash_ndsearch::Dtype::F32 => Rows::F32(vec![0.5; p.dim]),
            nearflash_ndsearch::Dtype::U8 => Rows::U8(vec![7; p.dim]),
            nearflash_ndsearch::Dtype::I8 => Rows::I8(vec![-3; p.dim]),
        };
        let _ = ix.search(q, 1, 8);
    }
}

fuzz_target!(|data: &[u8]| {
    exercise(data);
    let mut fixed = data.to_vec();
    fixed.extend_from_slice(&crc32fast::hash(data).to_le_bytes());
    exercise(&fixed);
});
