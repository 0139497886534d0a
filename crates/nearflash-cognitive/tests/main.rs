//! The crate's integration tests, one module per file beside this one, linked into a single test binary
//! (one link of the crate and its dependencies instead of one per file: `cargo test` compiles the suite
//! faster). Run one file's tests with `cargo test --release -p nearflash-cognitive --test integration <module>::`.

mod firmware;
mod shipped_model;
