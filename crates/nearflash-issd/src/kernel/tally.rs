//! Dense count tables as partials: what the classification kernels (naive_bayes, scalparc) ship per chunk. The
//! kernel fixes the table's shape; the Map of a chunk fills one, Reduce adds them element by element. Counts are
//! varints, so the many zero or small entries take one byte each.

use super::partial::Mergeable;
use crate::codec::{varint_len, Body, Reader, Writer};
use crate::error::{IssdError, Result};

/// A flat table of counts whose shape the kernel knows.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tally(pub Vec<u64>);

impl Tally {
    pub fn zeros(n: usize) -> Self {
        Self(vec![0; n])
    }
}

impl Mergeable for Tally {
    fn merge(&mut self, o: Self) -> Result<()> {
        if self.0.len() != o.0.len() {
            return Err(IssdError::PartialMismatch(format!("count tables of {} and {} entries", self.0.len(), o.0.len())));
        }
        self.0.iter_mut().zip(&o.0).for_each(|(a, b)| *a += b);
        Ok(())
    }
}

impl Body for Tally {
    fn body_len(&self) -> usize {
        varint_len(self.0.len() as u64) + self.0.iter().map(|&c| varint_len(c)).sum::<usize>()
    }
    fn encode_body(&self, w: &mut Writer) {
        w.varint(self.0.len() as u64);
        self.0.iter().for_each(|&c| w.varint(c));
    }
    fn decode_body(r: &mut Reader<'_>) -> Result<Self> {
        let n = r.count(1)?;
        Ok(Self((0..n).map(|_| r.varint()).collect::<Result<Vec<_>>>()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tallies_add_and_round_trip() {
        let mut a = Tally(vec![1, 0, 300]);
        a.merge(Tally(vec![2, 5, 1])).unwrap();
        assert_eq!(a.0, vec![3, 5, 301]);
        let mut w = Writer::default();
        a.encode_body(&mut w);
        let b = w.into_vec();
        assert_eq!(b.len(), a.body_len());
        assert_eq!(Tally::decode_body(&mut Reader::new(&b)).unwrap(), a);
        assert!(a.merge(Tally::zeros(2)).is_err());
        assert!(Tally::decode_body(&mut Reader::new(&[200, 1])).is_err());
    }
}
