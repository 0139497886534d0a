//! Errors of the iSSD crate: bad arguments (kernel parameters, layouts, model parameters) and malformed data
//! (pages whose header does not fit the layout, partials whose bytes do not decode).

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
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
}

pub type Result<T> = std::result::Result<T, IssdError>;

pub(crate) fn invalid(msg: impl Into<String>) -> IssdError {
    IssdError::InvalidArgument(msg.into())
}

pub(crate) fn malformed(msg: impl Into<String>) -> IssdError {
    IssdError::MalformedData(msg.into())
}
