//! Kernels chosen by name at run time: a [`KernelSpec`] names a kernel and carries its parameters (JSON form:
//! `{"kernel": "grep", "pattern": "foo", "regex": false}`); [`KernelSpec::build`] makes the object-safe kernel
//! for a page layout. This is what the device's Agent (or the host Initiator) receives.

use super::columnar::{ColFilterSumParams, ColScanParams, ColumnarKernel};
use super::grep::{GrepKernel, GrepParams};
use super::histogram::{HistogramKernel, HistogramParams};
use super::hop::{HopKernel, HopParams};
use super::kmeans::{KMeansKernel, KMeansParams};
use super::linreg::{LinearRegressionKernel, LinearRegressionParams};
use super::naive_bayes::{NaiveBayesKernel, NaiveBayesParams};
use super::scalparc::{ScalParcKernel, ScalParcParams};
use super::scan::{FilterSumKernel, FilterSumParams, ScanKernel, ScanParams};
use super::string_match::{StringMatchKernel, StringMatchParams};
use super::word_count::{WordCountKernel, WordCountParams};
use super::Kernel;
use crate::error::{invalid, Result};
use crate::pages::PageLayout;
use serde::{Deserialize, Serialize};

/// Names of every kernel, as [`KernelSpec`]'s `kernel` tag and [`Kernel::name`].
pub const KERNEL_NAMES: &[&str] =
    &[
    "scan",
    "filter_sum",
    "grep",
    "string_match",
    "word_count",
    "histogram",
    "linear_regression",
    "kmeans",
    "col_scan",
    "col_filter_sum",
    "scalparc",
    "hop",
    "naive_bayes",
];

/// A kernel and its parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kernel", rename_all = "snake_case")]
pub enum KernelSpec {
    Scan(ScanParams),
    FilterSum(FilterSumParams),
    Grep(GrepParams),
    StringMatch(StringMatchParams),
    WordCount(WordCountParams),
    Histogram(HistogramParams),
    LinearRegression(LinearRegressionParams),
    #[serde(rename = "kmeans")]
    KMeans(KMeansParams),
    /// `scan` over columnar pages (beyond the paper).
    ColScan(ColScanParams),
    /// `filter_sum` over columnar pages (beyond the paper).
    ColFilterSum(ColFilterSumParams),
    #[serde(rename = "scalparc")]
    ScalParc(ScalParcParams),
    Hop(HopParams),
    NaiveBayes(NaiveBayesParams),
}

impl KernelSpec {
    /// Parses the JSON form; unknown kernels or fields are errors.
    pub fn from_json(json: &str) -> Result<Self> {
        serde_json::from_str(json).map_err(|e| invalid(format!("bad kernel spec: {e} (kernels: {KERNEL_NAMES:?})")))
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("kernel specs always serialise")
    }

    /// The kernel's name.
    pub fn name(&self) -> &'static str {
        match self {
            KernelSpec::Scan(_) => "scan",
            KernelSpec::FilterSum(_) => "filter_sum",
            KernelSpec::Grep(_) => "grep",
            KernelSpec::StringMatch(_) => "string_match",
            KernelSpec::WordCount(_) => "word_count",
            KernelSpec::Histogram(_) => "histogram",
            KernelSpec::LinearRegression(_) => "linear_regression",
            KernelSpec::KMeans(_) => "kmeans",
            KernelSpec::ColScan(_) => "col_scan",
            KernelSpec::ColFilterSum(_) => "col_filter_sum",
            KernelSpec::ScalParc(_) => "scalparc",
            KernelSpec::Hop(_) => "hop",
            KernelSpec::NaiveBayes(_) => "naive_bayes",
        }
    }

    /// The columnar kernel of a `col_*` spec (an error for the others).
    pub fn build_columnar(&self, layout: PageLayout) -> Result<ColumnarKernel> {
        match self {
            KernelSpec::ColScan(p) => ColumnarKernel::scan(p, layout),
            KernelSpec::ColFilterSum(p) => ColumnarKernel::filter_sum(p, layout),
            other => Err(invalid(format!("{} is not a columnar kernel", other.name()))),
        }
    }

    /// Builds the kernel for inputs paged with `layout`.
    pub fn build(&self, layout: PageLayout) -> Result<Box<dyn Kernel>> {
        Ok(match self {
            KernelSpec::Scan(p) => Box::new(ScanKernel::new(p, layout)?),
            KernelSpec::FilterSum(p) => Box::new(FilterSumKernel::new(p, layout)?),
            KernelSpec::Grep(p) => Box::new(GrepKernel::new(p, layout)?),
            KernelSpec::StringMatch(p) => Box::new(StringMatchKernel::new(p, layout)?),
            KernelSpec::WordCount(p) => Box::new(WordCountKernel::new(p, layout)?),
            KernelSpec::Histogram(p) => Box::new(HistogramKernel::new(p, layout)?),
            KernelSpec::LinearRegression(p) => Box::new(LinearRegressionKernel::new(p, layout)?),
            KernelSpec::KMeans(p) => Box::new(KMeansKernel::new(p, layout)?),
            KernelSpec::ColScan(_) | KernelSpec::ColFilterSum(_) => Box::new(self.build_columnar(layout)?),
            KernelSpec::ScalParc(p) => Box::new(ScalParcKernel::new(p, layout)?),
            KernelSpec::Hop(p) => Box::new(HopKernel::new(p, layout)?),
            KernelSpec::NaiveBayes(p) => Box::new(NaiveBayesKernel::new(p, layout)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_and_builds() {
        let layout = PageLayout::new(8192).unwrap();
        let bodies = [
            r#"{"kernel":"scan"}"#,
            r#"{"kernel":"filter_sum","conditions":[],"product":["l_extendedprice"]}"#,
            r#"{"kernel":"grep","pattern":"x"}"#,
            r#"{"kernel":"string_match","keys":["a","b"]}"#,
            r#"{"kernel":"word_count"}"#,
            r#"{"kernel":"histogram"}"#,
            r#"{"kernel":"linear_regression"}"#,
            r#"{"kernel":"kmeans","dim":2,"centroids":[[0,0],[5,5]]}"#,
            r#"{"kernel":"col_scan","rows":10}"#,
            r#"{"kernel":"col_filter_sum","rows":10}"#,
            r#"{"kernel":"scalparc","attributes":4,"classes":2}"#,
            r#"{"kernel":"hop","grid":8,"lo":0,"hi":1000}"#,
            r#"{"kernel":"naive_bayes","attributes":4,"classes":2,"values":16}"#,
        ];
        for (body, name) in bodies.iter().zip(KERNEL_NAMES) {
            let spec = KernelSpec::from_json(body).unwrap();
            assert_eq!(spec.name(), *name);
            assert_eq!(spec.build(layout).unwrap().name(), *name);
            assert_eq!(KernelSpec::from_json(&spec.to_json()).unwrap(), spec);
        }
    }

    #[test]
    fn unknown_kernels_and_fields_are_errors() {
        assert!(KernelSpec::from_json(r#"{"kernel":"sort"}"#).is_err());
        assert!(KernelSpec::from_json(r#"{"kernel":"grep","pattern":"x","colour":1}"#).is_err());
        assert!(KernelSpec::from_json(r#"{"kernel":"scan","projection":["l_nothing"]}"#).is_err());
        assert!(KernelSpec::from_json("not json").is_err());
    }
}
