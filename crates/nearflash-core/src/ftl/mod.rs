//! Flash translation layer.

pub mod oob;
