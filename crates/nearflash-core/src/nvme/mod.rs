//! The NVMe-style host interface: entries, status codes, command decoding, queue pairs, identify and log pages.

pub mod arbitration;
mod buffer;
mod command;
mod entry;
mod error_log;
pub mod pages;
mod queues;
mod status;

pub use buffer::DataBuf;
pub use command::{decode_admin, decode_io, encode_dsm_ranges, field, opcode, parse_dsm_ranges, AdminCommand, IoCommand, Namespace};
pub use error_log::{ErrorDetail, ErrorEntry, ErrorLog, Refusal, ERROR_ENTRY_BYTES, ERROR_LOG_ENTRIES};
pub use entry::{Cqe, Sqe, CQE_BYTES, MAX_NLB, SQE_BYTES};
pub use queues::{Completion, QueueSet};
pub use status::Status;
