//! Nothing to call: this crate exists for its `Cargo.toml`, which pins the features of dependencies that
//! nearflash's crates share, so that every build of the workspace reuses the same compiled crates.
