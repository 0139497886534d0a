//! Errors of the NICE crate: bytes that do not parse as the ext4 / partition structure they should be (every field
//! is validated, so a damaged block is an error, never a panic), layouts the firmware does not support, and bad
//! arguments from callers.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NiceError {
    /// On-disk bytes do not follow the ext4 / MBR / GPT / OOB layout (bad magic, field out of range, truncated).
    #[error("corrupt {what}: {detail}")]
    Corrupt { what: &'static str, detail: String },
    /// A valid file system uses a feature the firmware does not handle (e.g. 1 KiB blocks on 4 KiB sectors).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A caller broke an API contract (path not absolute, block of the wrong size...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A path component does not exist.
    #[error("no such file or directory: {0}")]
    NotFound(String),
    /// The caller's uid may not read the file (mode bits of its inode).
    #[error("permission denied: {0}")]
    PermissionDenied(String),
}

pub type Result<T> = std::result::Result<T, NiceError>;

pub(crate) fn corrupt(what: &'static str, detail: impl Into<String>) -> NiceError {
    NiceError::Corrupt { what, detail: detail.into() }
}

pub(crate) fn invalid(msg: impl Into<String>) -> NiceError {
    NiceError::InvalidArgument(msg.into())
}
