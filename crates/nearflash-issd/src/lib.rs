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
//! * [`costs`]: cycles per byte of every kernel on the FMC processor, the stream processor, the SSD CPUs and the host.
//! * [`agent`]: the device runtime, a nearflash firmware extension: per-channel FMC processors and stream
//!   processors, Reduce on the SSD CPUs, vendor commands to load and run jobs (pipelining in virtual time).
//! * [`initiator`]: the host library: puts inputs on the device, runs a job in storage, on the conventional path
//!   (NVMe reads + host CPUs) or partitioned between both (static or dynamic split).
//! * [`sim`]: the paper's systems as devices (Fig. 7's six configurations, the prototype), their datasets, and the
//!   execution-driven counterpart of every model study, with the model evaluated beside it.

pub mod agent;
pub mod codec;
pub mod costs;
pub mod datagen;
pub mod error;
pub mod initiator;
pub mod kernel;
pub mod lineitem;
pub mod model;
pub mod pages;
pub mod sim;

pub use error::{IssdError, Result};
pub use kernel::{Chunk, Kernel, KernelSpec, Output, Partial, RunReport};
pub use pages::PageLayout;
