//! The inputs of the execution-driven studies: one seeded, paged dataset per Table 2 kernel, of an exact number of
//! 8 KiB pages (the flash page, so each page is one FMC's unit of work):
//!
//! * `linear_regression`: Phoenix-style (x, y) byte points.
//! * `string_match`: TPC-H grammar text in whole lines; four keys counted (Phoenix counts its four keys; we do not
//!   locate occurrences, as Phoenix reports only whether and how often each key occurs).
//! * `kmeans`: 3-D i32 points around 4 centres; one iteration from the first 4 points (the model's stream-op
//!   counts assume 3-D points and 4 centroids).
//! * `scan`: TPC-H lineitem, `l_partkey <= 5% of its range`, whole rows projected, so the measured alpha is Table
//!   2's 0.05 for scan (the prototype's 1% / 4-byte scan is [`prototype_scan`]).

use crate::datagen;
use crate::error::{invalid, Result};
use crate::kernel::kmeans::{initial_centroids, KMeansParams};
use crate::kernel::scan::ScanParams;
use crate::kernel::string_match::StringMatchParams;
use crate::kernel::KernelSpec;
use crate::lineitem::{generate_pages, CommentPool, Field, LineitemSpec, RECORD_SIZE};
use crate::pages::{pack_lines, pack_records, PageLayout};

/// Page size of every dataset: the `issd` preset's flash page.
pub const PAGE: usize = 8192;
/// Keys of `string_match` (frequent words of the TPC-H text grammar).
pub const STRING_MATCH_KEYS: [&str; 4] = ["furiously", "carefully", "pending", "requests"];
/// k-means shape.
pub const KMEANS_DIM: usize = 3;
pub const KMEANS_K: usize = 4;
/// Selectivity of the Fig. 7 scan (whole rows projected: alpha = 0.05, Table 2).
pub const FIG7_SCAN_SELECTIVITY: f64 = 0.05;

/// A paged input and the kernel spec to run on it.
#[derive(Debug, Clone)]
pub struct Dataset {
    pub kernel: &'static str,
    pub spec: KernelSpec,
    pub pages: Vec<u8>,
    pub page_size: u32,
}

fn layout() -> PageLayout {
    PageLayout::new(PAGE).expect("8 KiB is a valid page")
}

/// Exactly `pages` pages of records made by `make(n)`, `n` records long.
fn record_pages(pages: usize, record: usize, make: impl Fn(usize) -> Result<Vec<u8>>) -> Result<Vec<u8>> {
    let per = layout().records_per_page(record)?;
    let out = pack_records(layout(), &make(pages * per)?, record)?;
    debug_assert_eq!(out.len(), pages * PAGE);
    Ok(out)
}

/// Lineitem rows filling exactly `pages` pages: the first rows of the smallest whole scale factor that has them
/// (SF 1 holds about 6.0 M rows, 890 MB of pages); returns the pages and the largest `l_partkey` of that scale.
fn lineitem_pages(pages: usize) -> Result<(Vec<u8>, i64)> {
    let rows = (pages * layout().records_per_page(RECORD_SIZE)?) as u64;
    let sf = (rows as f64 / SF1_ROWS as f64).ceil().max(1.0);
    let spec = LineitemSpec { scale_factor: sf, max_rows: Some(rows), comment_pool: CommentPool::Compact };
    Ok((generate_pages(&spec, layout())?, spec.partkey_max()))
}

/// Rows of lineitem at SF 1 (dbgen).
const SF1_ROWS: u64 = 6_001_215;

/// The Fig. 7 dataset of `kernel` with `pages` pages.
pub fn fig7_dataset(kernel: &str, pages: usize, seed: u64) -> Result<Dataset> {
    if pages == 0 {
        return Err(invalid("a dataset needs at least one page"));
    }
    let (name, spec, data): (&'static str, KernelSpec, Vec<u8>) = match kernel {
        "linear_regression" => {
            let data = record_pages(pages, 2, |n| Ok(datagen::regression_points(n, seed)))?;
            ("linear_regression", KernelSpec::from_json(r#"{"kernel":"linear_regression"}"#)?, data)
        }
        "string_match" => {
            let mut data = pack_lines(layout(), &datagen::text(pages * layout().capacity() + PAGE, seed))?;
            if data.len() < pages * PAGE {
                return Err(invalid("generated text is shorter than asked"));
            }
            data.truncate(pages * PAGE);
            let keys = STRING_MATCH_KEYS.iter().map(|k| k.to_string()).collect();
            ("string_match", KernelSpec::StringMatch(StringMatchParams { keys, locate: false }), data)
        }
        "kmeans" => {
            let data = record_pages(pages, 4 * KMEANS_DIM, |n| datagen::cluster_points(n, KMEANS_DIM, KMEANS_K, seed))?;
            let centroids = initial_centroids(layout(), &data, KMEANS_DIM, KMEANS_K)?;
            ("kmeans", KernelSpec::KMeans(KMeansParams { dim: KMEANS_DIM, centroids }), data)
        }
        "scan" => {
            let (data, partkey_max) = lineitem_pages(pages)?;
            let mut params = ScanParams::with_selectivity(FIG7_SCAN_SELECTIVITY, partkey_max)?;
            params.projection = Field::ALL.to_vec();
            ("scan", KernelSpec::Scan(params), data)
        }
        other => return Err(invalid(format!("no Fig. 7 dataset for {other:?} (linear_regression, string_match, kmeans, scan)"))),
    };
    Ok(Dataset { kernel: name, spec, pages: data, page_size: PAGE as u32 })
}

/// The prototype's scan (§4.3): lineitem, 1% selectivity, 4-byte projection, `pages` pages.
pub fn prototype_scan(pages: usize) -> Result<Dataset> {
    let (data, partkey_max) = lineitem_pages(pages)?;
    Ok(Dataset {
        kernel: "scan",
        spec: KernelSpec::Scan(ScanParams::with_selectivity(0.01, partkey_max)?),
        pages: data,
        page_size: PAGE as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::run_serial;

    #[test]
    fn datasets_have_their_size_and_about_their_alpha() {
        for k in ["linear_regression", "string_match", "kmeans", "scan"] {
            let d = fig7_dataset(k, 24, 3).unwrap();
            assert_eq!(d.pages.len(), 24 * PAGE, "{k}");
            let kernel = d.spec.build(layout()).unwrap();
            let r = crate::kernel::run_chunked(kernel.as_ref(), &d.pages, 1).unwrap();
            assert!(r.alpha() < 0.06, "{k}: alpha {}", r.alpha());
            if k == "scan" {
                assert!((r.alpha() - 0.05).abs() < 0.02, "scan alpha {}", r.alpha());
            }
            assert!(run_serial(kernel.as_ref(), &d.pages).is_ok());
        }
        assert!(fig7_dataset("sort", 1, 1).is_err());
        assert_eq!(prototype_scan(3).unwrap().pages.len(), 3 * PAGE);
    }
}
