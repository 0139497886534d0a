//! nearflash-issd: the intelligent SSD of "Active Disk Meets Flash: A Case for Intelligent SSDs" (Cho et al.,
//! ICS'13), as pure computation the device model can run:
//!
//! * [`pages`]: the paged layout of kernel inputs on flash (whole records / whole lines per page).
//! * [`lineitem`]: TPC-H `lineitem` generated with `tpchgen`, encoded as fixed-width 150-byte records.
//! * [`datagen`]: seeded inputs of the Phoenix-style kernels (text, points, pixels).
//! * [`kernel`]: Map (per chunk, on FMCs) / Reduce (on the embedded CPUs) kernels with byte-encoded partials:
//!   scan, filter_sum (TPC-H Q6), grep, string_match, word_count, histogram, linear_regression, k-means.
//! * [`model`]: the paper's analytic performance/energy model (Eq. 1-2, §4.1-4.2) with Tables 1-2 and Fig. 10
//!   parameters, the Fig. 7 configurations and the Fig. 8-10 studies.
//!
//! No dependency on the device crates: the device calls [`kernel::Kernel`] per page and charges the bytes of the
//! partials and outputs it gets back.

pub mod codec;
pub mod datagen;
pub mod error;
pub mod kernel;
pub mod lineitem;
pub mod model;
pub mod pages;

pub use error::{IssdError, Result};
pub use kernel::{Chunk, Kernel, KernelSpec, Output, Partial, RunReport};
pub use pages::PageLayout;
