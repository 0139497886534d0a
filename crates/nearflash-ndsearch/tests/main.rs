//! The crate's integration tests, one module per file beside this one, linked into a single test binary
//! (one link of the crate and its dependencies instead of one per file: `cargo test` compiles the suite
//! faster). Run one file's tests with `cargo test --release -p nearflash-ndsearch --test integration <module>::`.

mod firmware;
mod index;
mod searssd;
