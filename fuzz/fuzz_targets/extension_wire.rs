//! The seed systems' wire formats from untrusted bytes: RecSSD's NDP config payload and table descriptor, iSSD's
//! job descriptor, partials and outputs, and columnar table (header page, and the columnar kernels' Map over
//! arbitrary pages).
//! Decoding never panics, and what decodes re-encodes to the same meaning.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nearflash_issd::agent::JobDescriptor;
use nearflash_issd::lineitem::ColumnarLayout;
use nearflash_issd::kernel::{Output, Partial};
use nearflash_issd::{Chunk, KernelSpec, PageLayout};
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
    let _ = ColumnarLayout::from_table(data);
    // partials and outputs (varints may be non-canonical, floats NaN): re-encoding is stable
    if let Ok(p) = Partial::decode(data) {
        assert_eq!(Partial::decode(&p.encode()).expect("an encoded partial decodes").encode(), p.encode());
    }
    if let Ok(o) = Output::decode(data) {
        assert_eq!(Output::decode(&o.encode()).expect("an encoded output decodes").encode(), o.encode());
    }
    if let Ok(d) = nearflash_recssd::table_dir::TableDescriptor::decode(data, 4096, 16384) {
        assert_eq!(nearflash_recssd::table_dir::TableDescriptor::decode(&d.encode(), 4096, 16384), Ok(d));
    }
    // 64-byte pages: row groups of 8 rows; a Q6 over 20 rows reads 4 columns, so whole groups are 256 bytes
    let spec = KernelSpec::from_json(r#"{"kernel":"col_filter_sum","rows":20}"#).expect("valid spec");
    let kernel = spec.build(PageLayout::new(64).expect("valid page")).expect("builds");
    let _ = kernel.map(Chunk::new(0, data));
});
