//! Simulator faults. Device faults (NVMe status codes, uncorrectable ECC) are completion values, not errors:
//! an `Err` here means the simulation itself cannot go on (bad configuration, unreadable image, host I/O failure).

use thiserror::Error;

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SimError {
    /// A preset, override or argument does not describe a valid device or workload.
    #[error("configuration error: {0}")]
    Config(String),
    /// The device image on the host file system is missing, damaged or of another version.
    #[error("device image error: {0}")]
    Image(String),
    /// Reading or writing the host files behind the image failed.
    #[error("host I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A caller broke an API contract (wrong buffer size, unknown queue id, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

pub type Result<T> = std::result::Result<T, SimError>;
