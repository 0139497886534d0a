//! Errors of the iSSD crate: bad arguments (kernel parameters, layouts, model parameters) and malformed data
//! (pages whose header does not fit the layout, partials whose bytes do not decode).

use thiserror::Error;

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum IssdError {
    /// A caller broke an API contract (unknown kernel, page size too small, empty key, bad regex...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Input bytes do not follow the documented page/record layout (header out of range, chunk not page aligned).
    #[error("malformed data: {0}")]
    MalformedData(String),
    /// Encoded partial or output bytes do not decode (truncated, unknown tag, trailing bytes).
    #[error("decode error: {0}")]
    Decode(String),
    /// A partial of one kernel was handed to another (or two partials cover the same pages).
    #[error("partial mismatch: {0}")]
    PartialMismatch(String),
    /// A command completed with an NVMe error status (sct, sc) on the device.
    #[error("device error: {what} completed with {status}")]
    Device { what: String, status: String, sct: u8, sc: u8 },
    /// The device simulation itself failed (configuration, image, host I/O, a simulator fault), with its kind.
    #[error(transparent)]
    Sim(#[from] nearflash_core::SimError),
}

/// Into the core's error kinds, for front ends: argument and data errors are the caller's, device errors keep
/// their status, simulator errors their kind.
impl From<IssdError> for nearflash_core::SimError {
    fn from(e: IssdError) -> Self {
        use nearflash_core::SimError as S;
        match e {
            IssdError::Sim(s) => s,
            IssdError::Device { what, status, sct, sc } => S::Nvme { command: what, status, sct, sc, reason: None },
            // The core's kind says "invalid argument" itself.
            IssdError::InvalidArgument(why) => S::InvalidArgument(why),
            other => S::InvalidArgument(other.to_string()),
        }
    }
}

/// The error of a command that completed with `status`.
pub fn device_error(what: impl Into<String>, status: nearflash_core::nvme::Status) -> IssdError {
    IssdError::Device { what: what.into(), status: status.to_string(), sct: status.sct, sc: status.sc }
}

pub type Result<T> = std::result::Result<T, IssdError>;

pub(crate) fn invalid(msg: impl Into<String>) -> IssdError {
    IssdError::InvalidArgument(msg.into())
}

pub(crate) fn malformed(msg: impl Into<String>) -> IssdError {
    IssdError::MalformedData(msg.into())
}
