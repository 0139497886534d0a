//! Simulator errors. Device faults (NVMe status codes, uncorrectable ECC) are completion values, not errors: an
//! `Err` here means a caller or the simulation itself cannot go on. Each variant keeps its kind, so that front ends
//! map it onto their own (Python: one exception class per variant; host I/O errors are also `OSError`s).

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
    /// The model reached a state it cannot go on from (e.g. a plane with no free block left: GC could not keep up
    /// with the configuration). A simulator fault, never turned into an NVMe status the host would see.
    #[error("simulator fault: {0}")]
    Fault(String),
    /// A command a host library issued completed with an error status (`sct`, `sc`), named `status`; `reason` is
    /// the device's own word for it (its error log), where it gave one (`Device::command_error` reads it).
    #[error("{command}{}: {status} (SCT {sct:#x}, SC {sc:#04x})", .reason.as_ref().map(|r| format!(" ({r})")).unwrap_or_default())]
    Nvme { command: String, status: String, sct: u8, sc: u8, reason: Option<String> },
}

impl SimError {
    /// The kind of error, as a stable word (what front ends map exception classes from).
    pub fn kind(&self) -> &'static str {
        match self {
            SimError::Config(_) => "config",
            SimError::Image(_) => "image",
            SimError::Io(_) => "io",
            SimError::InvalidArgument(_) => "invalid_argument",
            SimError::Fault(_) => "fault",
            SimError::Nvme { .. } => "nvme",
        }
    }
}

pub type Result<T> = std::result::Result<T, SimError>;
