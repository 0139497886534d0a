//! Model-based fuzzing of a whole image-backed device (as redb's fuzzer does): the input is a sequence of write /
//! read / trim / flush / reopen / crash operations, run on the device and on a plain map; every read must match
//! the map, and after a crash whatever was flushed must be there. See `nearflash_core::device::model_check`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nearflash_core::device::model_check::ModelCheck;

/// Operations per input (4 bytes each): enough writes for GC to run.
const MAX_OPS: usize = 400;
/// Reopens and crashes per input (later ones are Flushes): a reopen re-parses the image's preset and replays it,
/// so uniform bytes (one op in eight a reopen or crash, ~50 per input) spent most of each run reopening.
const MAX_REOPENS: u64 = 8;

fuzz_target!(|data: &[u8]| {
    let data = &data[..data.len().min(4 * MAX_OPS)];
    if let Err(e) = ModelCheck::run_capped(data, &[], MAX_REOPENS) {
        panic!("{e}");
    }
});
