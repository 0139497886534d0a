//! The seed systems' wire formats from untrusted bytes: RecSSD's NDP config payload and iSSD's job descriptor.
//! Decoding never panics, and what decodes re-encodes to the same meaning.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nearflash_issd::agent::JobDescriptor;
use nearflash_recssd::ndp_wire::{NdpConfig, WireLimits};

fuzz_target!(|data: &[u8]| {
    if let Ok(cfg) = NdpConfig::decode(data) {
        // A decoded config may still be unencodable (e.g. beyond the limits); one that encodes round-trips.
        if let Ok(bytes) = cfg.encode() {
            assert_eq!(NdpConfig::decode(&bytes).expect("an encoded config decodes"), cfg);
        }
    }
    let _ = NdpConfig::decode_validated(data, &WireLimits::default(), 1 << 20);
    if let Ok(d) = JobDescriptor::decode(data) {
        let again = JobDescriptor::decode(&d.encode()).expect("an encoded descriptor decodes");
        assert_eq!(again.encode(), d.encode());
    }
});
