//! Model-based fuzzing of a whole image-backed device (as redb's fuzzer does): the input is a sequence of write /
//! read / trim / flush / reopen / crash operations, run on the device and on a plain map; every read must match
//! the map, and after a crash whatever was flushed must be there. See `nearflash_core::device::model_check`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nearflash_core::device::model_check::ModelCheck;

fuzz_target!(|data: &[u8]| {
    // Long inputs are cut so that one run stays short (each reopen replays the image).
    let data = &data[..data.len().min(4 * 400)];
    if let Err(e) = ModelCheck::run(data) {
        panic!("{e}");
    }
});
