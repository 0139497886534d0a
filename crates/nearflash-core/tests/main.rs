//! The crate's integration tests, one module per file beside this one, linked into a single test binary
//! (one link of the crate and its dependencies instead of one per file: `cargo test` compiles the suite
//! faster). Run one file's tests with `cargo test --release -p nearflash-core --test integration <module>::`.

mod column_read;
mod controller_cores;
mod example_extension;
mod layering;
mod presets;
mod read_into_dram;
mod read_reporting;
mod sense_beside_die;
mod small_write_buffer;
