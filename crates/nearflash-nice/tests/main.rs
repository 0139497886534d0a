//! The crate's integration tests, one module per file beside this one, linked into a single test binary
//! (one link of the crate and its dependencies instead of one per file: `cargo test` compiles the suite
//! faster). Run one file's tests with `cargo test --release -p nearflash-nice --test integration <module>::`.

mod common;
mod chain_gc;
mod ext4_images;
mod firmware_hyper;
mod firmware_oob;
mod firmware_sched;
