//! Labelled records, the input of the classification kernels (naive_bayes, scalparc; NU-MineBench's Bayesian and
//! ScalParC): `attributes` u8 attribute values followed by one u8 class label, packed whole into pages.

use crate::error::{invalid, malformed, Result};
use crate::pages::PageLayout;
use serde::{Deserialize, Serialize};

/// Largest attribute count accepted.
pub const MAX_ATTRIBUTES: usize = 1024;
/// Largest class count accepted (labels are one byte).
pub const MAX_CLASSES: usize = 256;
/// Largest count table a Map task may build (entries of 8 bytes: 32 MiB), so that a spec cannot ask every chunk
/// for gigabytes (1024 attributes x 256 values x 256 classes would be 512 MiB).
pub const MAX_TABLE_ENTRIES: usize = 1 << 22;

/// Checks that a kernel's count table of `entries` stays within [`MAX_TABLE_ENTRIES`].
pub fn check_table(entries: usize, what: &str) -> Result<()> {
    if entries > MAX_TABLE_ENTRIES {
        return Err(invalid(format!("{what} needs {entries} counts per chunk, over the {MAX_TABLE_ENTRIES} allowed")));
    }
    Ok(())
}

/// The shape of a labelled-record input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shape {
    pub attributes: usize,
    pub classes: usize,
}

impl Shape {
    pub fn new(attributes: usize, classes: usize, layout: PageLayout) -> Result<Self> {
        if !(1..=MAX_ATTRIBUTES).contains(&attributes) {
            return Err(invalid(format!("attributes must be 1..={MAX_ATTRIBUTES}, got {attributes}")));
        }
        if !(2..=MAX_CLASSES).contains(&classes) {
            return Err(invalid(format!("classes must be 2..={MAX_CLASSES}, got {classes}")));
        }
        layout.records_per_page(attributes + 1)?;
        Ok(Self { attributes, classes })
    }

    pub fn record_bytes(&self) -> usize {
        self.attributes + 1
    }

    /// Calls `f(values, class)` for every record of a chunk; a label outside `0..classes` is malformed data.
    pub fn for_each(
        &self,
        layout: PageLayout,
        chunk: &[u8],
        mut f: impl FnMut(&[u8], usize) -> Result<()>,
    ) -> Result<()> {
        let rb = self.record_bytes();
        for payload in layout.record_payloads(chunk, rb)? {
            for rec in payload?.chunks_exact(rb) {
                let class = rec[self.attributes] as usize;
                if class >= self.classes {
                    return Err(malformed(format!("class label {class} outside 0..{}", self.classes)));
                }
                f(&rec[..self.attributes], class)?;
            }
        }
        Ok(())
    }
}
