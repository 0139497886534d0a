//! iSSD kernels as Map/Reduce over paged flash data (paper §3.2, Fig. 5): `map` runs per chunk (one or more whole
//! pages, as an FMC sees them) and returns a [`Partial`] with a real byte encoding; `merge` is the Reduce the
//! embedded CPUs run over partials; `finish` turns the merged partial into the [`Output`] sent to the host.
//!
//! The same kernel objects run on the host path ([`run`]), so in-storage and conventional answers come from
//! one implementation. Kernels are object safe and built by name from a [`KernelSpec`] (JSON-friendly), so the
//! device can run any of them chosen at run time. Answers do not depend on how the input is cut into chunks.

pub mod columnar;
pub mod grep;
pub mod histogram;
pub mod hop;
pub mod kmeans;
pub mod labelled;
pub mod linreg;
pub mod naive_bayes;
pub mod output;
pub mod partial;
pub mod run;
pub mod scalparc;
pub mod scan;
pub mod selection;
pub mod spec;
pub mod string_match;
pub mod tally;
pub mod word_count;

pub use output::Output;
pub use partial::Partial;
pub use run::{chunks, run_chunked, run_parallel, run_serial, RunReport};
pub use spec::{KernelSpec, KERNEL_NAMES};

use crate::error::Result;
use crate::pages::PageLayout;

/// A run of whole pages handed to one Map task: `bytes` holds pages `first_page..first_page + n` of the input.
#[derive(Debug, Clone, Copy)]
pub struct Chunk<'a> {
    pub first_page: u64,
    pub bytes: &'a [u8],
}

impl<'a> Chunk<'a> {
    pub fn new(first_page: u64, bytes: &'a [u8]) -> Self {
        Self { first_page, bytes }
    }
}

/// A Map/Reduce kernel the device can run on its FMCs and embedded CPUs, or the host on its cores.
pub trait Kernel: Send + Sync {
    /// Kernel name as in [`KERNEL_NAMES`].
    fn name(&self) -> &str;
    /// Page geometry the kernel's input uses.
    fn layout(&self) -> PageLayout;
    /// The neutral partial (merging it changes nothing).
    fn empty(&self) -> Partial;
    /// Map: processes one chunk of whole pages.
    fn map(&self, chunk: Chunk<'_>) -> Result<Partial>;
    /// Reduce: folds `p` into `acc`.
    fn merge(&self, acc: &mut Partial, p: Partial) -> Result<()> {
        acc.merge(p)
    }
    /// Turns the fully merged partial into the answer.
    fn finish(&self, p: Partial) -> Result<Output>;
}
