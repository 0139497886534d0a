//! Final results of a kernel (after Reduce): what the device sends to the host. Like partials they have a real
//! byte encoding, so the host-link transfer (the paper's alpha x beta x D) is charged on real bytes.

use super::histogram::Histogram;
use super::hop::HaloOutput;
use super::kmeans::KMeansStep;
use super::linreg::RegressionOutput;
use super::naive_bayes::NaiveBayesOutput;
use super::scalparc::SplitOutput;
use super::scan::Aggregate;
use super::selection::SelectionOutput;
use super::string_match::Matches;
use super::word_count::WordCountOutput;
use crate::codec::{Body, Reader, Writer};
use crate::error::{IssdError, Result};

macro_rules! outputs {
    ($( $variant:ident($ty:ty) = $tag:literal, $label:literal; )*) => {
        /// A kernel's answer for the whole input.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Output { $( $variant($ty), )* }

        impl Output {
            pub fn kind(&self) -> &'static str {
                match self { $( Output::$variant(_) => $label, )* }
            }
            fn tag(&self) -> u8 {
                match self { $( Output::$variant(_) => $tag, )* }
            }
            /// Bytes of [`Output::encode`].
            pub fn encoded_len(&self) -> usize {
                1 + match self { $( Output::$variant(o) => o.body_len(), )* }
            }
            pub fn encode(&self) -> Vec<u8> {
                let mut w = Writer::with_capacity(self.encoded_len());
                w.u8(self.tag());
                match self { $( Output::$variant(o) => o.encode_body(&mut w), )* }
                w.into_vec()
            }
            pub fn decode(bytes: &[u8]) -> Result<Output> {
                let mut r = Reader::new(bytes);
                let o = match r.u8()? {
                    $( $tag => Output::$variant(<$ty>::decode_body(&mut r)?), )*
                    t => return Err(IssdError::Decode(format!("unknown output tag {t}"))),
                };
                r.finish()?;
                Ok(o)
            }
        }
    };
}

outputs! {
    Selection(SelectionOutput) = 1, "selection";
    Aggregate(Aggregate) = 2, "aggregate";
    Matches(Matches) = 3, "matches";
    WordCounts(WordCountOutput) = 4, "word_counts";
    Histogram(Histogram) = 5, "histogram";
    Regression(RegressionOutput) = 6, "regression";
    Clusters(KMeansStep) = 7, "clusters";
    NaiveBayes(NaiveBayesOutput) = 8, "naive_bayes";
    Split(SplitOutput) = 9, "split";
    Halos(HaloOutput) = 10, "halos";
}
