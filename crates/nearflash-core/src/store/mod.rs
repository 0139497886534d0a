//! Backing storage: the host files (or anonymous memory) the FTL keeps its state in — fixed-size records in a
//! memory-mapped file (mapping table, OOB area), sector data at physical addresses in a sparse file, the trim
//! journal — each file opening with a header (magic, kind, format, geometry, length). Below the FTL; the image
//! (above it) decides which files make a device directory.

mod anon;
mod data;
mod header;
mod journal;
mod mapped;

pub use data::DataStore;
pub use header::{geometry_fingerprint, FileHeader, FORMAT, HEADER_SPAN};
pub(crate) use header::HEADER_BYTES;
pub use journal::{BadTrim, TrimJournal, TrimRecord};
pub(crate) use mapped::missing;
pub use mapped::{MappedRecords, MappedU32};
