//! Partial results: what a Map task on an FMC produces for its chunk and ships to controller DRAM, where the
//! embedded CPUs merge them (Reduce). Each has a real byte encoding (a one-byte kind tag, then the body), so the
//! device charges the bytes that would really move: the paper's reduction factor alpha is measured, not assumed.

use super::histogram::Histogram;
use super::hop::CellTable;
use super::kmeans::ClusterSums;
use super::linreg::RegressionSums;
use super::scan::Aggregate;
use super::selection::Selection;
use super::string_match::Matches;
use super::tally::Tally;
use super::word_count::WordCounts;
use crate::codec::{Body, Reader, Writer};
use crate::error::{IssdError, Result};

/// The Reduce step of one kind of partial.
pub trait Mergeable: Body {
    /// Folds `other` into `self` (associative and commutative up to what `finish` canonicalises).
    fn merge(&mut self, other: Self) -> Result<()>;
}

macro_rules! partials {
    ($( $variant:ident($ty:ty) = $tag:literal, $label:literal; )*) => {
        /// A Map task's result for one chunk, or a merge of several.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Partial { $( $variant($ty), )* }

        impl Partial {
            /// Short name of the partial's kind (for error messages and statistics).
            pub fn kind(&self) -> &'static str {
                match self { $( Partial::$variant(_) => $label, )* }
            }
            fn tag(&self) -> u8 {
                match self { $( Partial::$variant(_) => $tag, )* }
            }
            /// Bytes of [`Partial::encode`].
            pub fn encoded_len(&self) -> usize {
                1 + match self { $( Partial::$variant(p) => p.body_len(), )* }
            }
            pub fn encode(&self) -> Vec<u8> {
                let mut w = Writer::with_capacity(self.encoded_len());
                w.u8(self.tag());
                match self { $( Partial::$variant(p) => p.encode_body(&mut w), )* }
                w.into_vec()
            }
            pub fn decode(bytes: &[u8]) -> Result<Partial> {
                let mut r = Reader::new(bytes);
                let p = match r.u8()? {
                    $( $tag => Partial::$variant(<$ty>::decode_body(&mut r)?), )*
                    t => return Err(IssdError::Decode(format!("unknown partial tag {t}"))),
                };
                r.finish()?;
                Ok(p)
            }
            /// The error of a kernel handed a partial of another kind.
            pub fn wrong_kind(&self, kernel: &str) -> IssdError {
                IssdError::PartialMismatch(format!("{kernel} got a {} partial", self.kind()))
            }
            /// Merges a partial of the same kind (Reduce); a different kind is an error.
            pub fn merge(&mut self, other: Partial) -> Result<()> {
                match (self, other) {
                    $( (Partial::$variant(a), Partial::$variant(b)) => a.merge(b), )*
                    (a, b) => Err(IssdError::PartialMismatch(format!(
                        "cannot merge a {} partial into a {} partial", b.kind(), a.kind()
                    ))),
                }
            }
        }
    };
}

partials! {
    Selection(Selection) = 1, "selection";
    Aggregate(Aggregate) = 2, "aggregate";
    Matches(Matches) = 3, "matches";
    WordCounts(WordCounts) = 4, "word_counts";
    Histogram(Histogram) = 5, "histogram";
    Regression(RegressionSums) = 6, "regression";
    Clusters(ClusterSums) = 7, "clusters";
    Tally(Tally) = 8, "tally";
    Cells(CellTable) = 9, "cells";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_tags_and_trailing_bytes_are_errors() {
        assert!(Partial::decode(&[]).is_err());
        assert!(Partial::decode(&[99]).is_err());
        let p = Partial::Regression(RegressionSums::default());
        let mut b = p.encode();
        assert_eq!(b.len(), p.encoded_len());
        assert_eq!(Partial::decode(&b).unwrap(), p);
        b.push(0);
        assert!(Partial::decode(&b).is_err());
    }

    #[test]
    fn merging_different_kinds_is_an_error() {
        let mut a = Partial::Regression(RegressionSums::default());
        let b = Partial::Histogram(Histogram::default());
        assert!(matches!(a.merge(b), Err(IssdError::PartialMismatch(_))));
    }
}
