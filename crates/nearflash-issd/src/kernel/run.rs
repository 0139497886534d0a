//! Running a kernel over a whole paged input on the host: serially in one chunk (the reference), serially chunk
//! by chunk (what one embedded CPU merging FMC partials does), and in parallel on the rayon pool (the
//! conventional path's host CPUs). Each run reports the bytes that crossed each stage, so the reduction factor
//! alpha (partial bytes / input bytes) and the output size are measured.

use super::{Chunk, Kernel, Output};
use crate::error::{invalid, Result};
use crate::pages::PageLayout;
use rayon::prelude::*;

/// An answer and the bytes behind it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunReport {
    pub output: Output,
    /// Map tasks run.
    pub chunks: u64,
    pub input_bytes: u64,
    /// Sum of the encoded partials the Map tasks produced (what FMCs ship to DRAM).
    pub partial_bytes: u64,
    /// Encoded output (what the device ships to the host).
    pub output_bytes: u64,
}

impl RunReport {
    /// Measured reduction factor of the Map stage (the model's alpha).
    pub fn alpha(&self) -> f64 {
        if self.input_bytes == 0 {
            0.0
        } else {
            self.partial_bytes as f64 / self.input_bytes as f64
        }
    }
}

/// Splits a paged input into chunks of `pages_per_chunk` pages (the last may be shorter).
pub fn chunks(layout: PageLayout, data: &[u8], pages_per_chunk: usize) -> Result<impl Iterator<Item = Chunk<'_>>> {
    if pages_per_chunk == 0 {
        return Err(invalid("pages_per_chunk must be at least 1"));
    }
    layout.page_count(data.len())?;
    let step = pages_per_chunk * layout.page_size();
    Ok(data.chunks(step).enumerate().map(move |(i, b)| Chunk::new((i * pages_per_chunk) as u64, b)))
}

fn report(
    kernel: &dyn Kernel,
    acc: super::Partial,
    chunks: u64,
    input: usize,
    partial_bytes: u64,
) -> Result<RunReport> {
    let output = kernel.finish(acc)?;
    let output_bytes = output.encoded_len() as u64;
    Ok(RunReport { output, chunks, input_bytes: input as u64, partial_bytes, output_bytes })
}

/// The whole input as one Map task.
pub fn run_serial(kernel: &dyn Kernel, data: &[u8]) -> Result<RunReport> {
    let p = kernel.map(Chunk::new(0, data))?;
    let bytes = p.encoded_len() as u64;
    let mut acc = kernel.empty();
    kernel.merge(&mut acc, p)?;
    report(kernel, acc, 1, data.len(), bytes)
}

/// Map chunk by chunk, merging each partial as it arrives (one thread).
pub fn run_chunked(kernel: &dyn Kernel, data: &[u8], pages_per_chunk: usize) -> Result<RunReport> {
    let mut acc = kernel.empty();
    let (mut n, mut bytes) = (0u64, 0u64);
    for c in chunks(kernel.layout(), data, pages_per_chunk)? {
        let p = kernel.map(c)?;
        bytes += p.encoded_len() as u64;
        n += 1;
        kernel.merge(&mut acc, p)?;
    }
    report(kernel, acc, n, data.len(), bytes)
}

/// Map tasks in parallel on the rayon pool, partials merged pairwise (tree Reduce).
pub fn run_parallel(kernel: &dyn Kernel, data: &[u8], pages_per_chunk: usize) -> Result<RunReport> {
    let list: Vec<Chunk<'_>> = chunks(kernel.layout(), data, pages_per_chunk)?.collect();
    let n = list.len() as u64;
    let (acc, bytes) = list
        .into_par_iter()
        .map(|c| {
            let p = kernel.map(c)?;
            let len = p.encoded_len() as u64;
            Ok::<_, crate::IssdError>((p, len))
        })
        .try_reduce(
            || (kernel.empty(), 0),
            |(mut a, la), (b, lb)| {
                kernel.merge(&mut a, b)?;
                Ok((a, la + lb))
            },
        )?;
    report(kernel, acc, n, data.len(), bytes)
}
