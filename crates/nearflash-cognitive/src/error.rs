//! Errors of the Cognitive SSD library: each names the argument or file at fault and what is allowed.

/// Everything that can go wrong in the host library, the compiler and the search.
#[derive(Debug, thiserror::Error)]
pub enum CognitiveError {
    /// A caller's argument is out of its allowed range or shape.
    #[error("{arg}: {why}")]
    Invalid { arg: String, why: String },
    /// A data or model file is missing, truncated or damaged.
    #[error("{path}: {why}")]
    BadFile { path: String, why: String },
    /// The compiler cannot map this model onto DLG-x.
    #[error("unsupported layer {layer:?}: {why}")]
    Unsupported { layer: String, why: String },
    /// The data does not fit the reserved area or a buffer.
    #[error("does not fit: {0}")]
    NoSpace(String),
    /// An I/O failure reading a file.
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
}

impl CognitiveError {
    pub fn invalid(arg: impl Into<String>, why: impl Into<String>) -> Self {
        CognitiveError::Invalid { arg: arg.into(), why: why.into() }
    }
    pub fn bad_file(path: impl Into<String>, why: impl Into<String>) -> Self {
        CognitiveError::BadFile { path: path.into(), why: why.into() }
    }
}

pub type Result<T> = std::result::Result<T, CognitiveError>;
