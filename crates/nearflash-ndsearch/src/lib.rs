//! NDSearch (ISCA'24) on nearflash. The host side is a graph vector index in its own right: HNSW and
//! Vamana/DiskANN builds on rayon, SIMD distances (simsimd) over f32/uint8/int8 with L2, inner product and cosine,
//! best-first search with a list size `ef`, and a checksummed file format. SearSSD's pieces (LUNCSR layout,
//! reordering, dynamic allocating, speculation, `<Search Page>`, lock-step batch search, timing) build on the same
//! graph and search code, so that the in-storage search returns what the host search returns.

pub mod allocate;
pub mod baselines;
pub mod command;
pub mod deploy;
pub mod firmware;
pub mod distance;
pub mod graph;
mod hnsw;
pub mod hosts;
pub mod kernels;
pub mod index;
pub mod lockstep;
pub mod luncsr;
pub mod persist;
pub mod reorder;
mod remove;
pub mod search;
pub mod speculate;
pub mod study;
pub mod timing;
mod vamana;

pub use distance::{Dtype, Metric, Rows, VecRef};
pub use index::{Index, Kind, Params};

/// Errors of the library (device faults are completion values elsewhere).
#[derive(Debug, thiserror::Error)]
pub enum NdError {
    /// An argument breaks the API contract.
    #[error("{0}")]
    Argument(String),
    /// An index file is damaged, truncated or of another version.
    #[error("index file: {0}")]
    Format(String),
    #[error("index file I/O: {0}")]
    Io(#[from] std::io::Error),
}
