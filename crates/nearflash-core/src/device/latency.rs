//! Latencies counted per completion in the buckets of the report's histograms, without the histogram's own work
//! per value; the `hdrhistogram::Histogram` is made from the counts when a report asks for it.
//!
//! Recording into the histogram cost about 100 instructions per completion on 4 KiB random reads (the bucket's
//! index through the histogram's configuration fields, a range check and clamp, the minimum and maximum, the total):
//! about 2% of a read. Here the bucket's index is a few instructions with the configuration as constants, and the
//! histogram is rebuilt from the counts once per report, in the same state as if every value had been recorded
//! into it (the same counts, total, minimum and maximum: `to_histogram`).

use super::report::LATENCY_MAX_NS;
use hdrhistogram::Histogram;

/// The histograms' configuration (`Histogram::new_with_bounds(1, LATENCY_MAX_NS, SIGNIFICANT_DIGITS)`): one unit
/// is 1 ns (unit magnitude 0), 2,048 sub-buckets per bucket (the least power of two of at least 2 * 10^3), the
/// lower half of each bucket past the first unused.
pub(crate) const SIGNIFICANT_DIGITS: u8 = 3;
const SUB_BUCKET_COUNT_MAGNITUDE: u32 = 11;
const SUB_BUCKET_HALF_COUNT_MAGNITUDE: u32 = SUB_BUCKET_COUNT_MAGNITUDE - 1;
const SUB_BUCKET_HALF_COUNT: u64 = 1 << SUB_BUCKET_HALF_COUNT_MAGNITUDE;
const SUB_BUCKET_MASK: u64 = (1 << SUB_BUCKET_COUNT_MAGNITUDE) - 1;
const LEADING_ZERO_COUNT_BASE: u32 = 64 - SUB_BUCKET_COUNT_MAGNITUDE;

/// The histogram's index of the bucket that counts `v` (`Histogram::index_for`, for this configuration).
#[inline]
fn index_of(v: u64) -> usize {
    let bucket = LEADING_ZERO_COUNT_BASE - (v | SUB_BUCKET_MASK).leading_zeros();
    let sub_bucket = v >> bucket;
    (((u64::from(bucket) + 1) << SUB_BUCKET_HALF_COUNT_MAGNITUDE) + sub_bucket - SUB_BUCKET_HALF_COUNT) as usize
}

/// The lowest value counted at `index` (`Histogram::value_for`).
fn value_of(index: usize) -> u64 {
    let bucket = (index >> SUB_BUCKET_HALF_COUNT_MAGNITUDE) as i64 - 1;
    let sub_bucket = (index as u64 & (SUB_BUCKET_HALF_COUNT - 1)) + SUB_BUCKET_HALF_COUNT;
    if bucket < 0 {
        sub_bucket - SUB_BUCKET_HALF_COUNT
    } else {
        sub_bucket << bucket
    }
}

/// A new histogram of the reports' configuration.
pub(crate) fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_MAX_NS, SIGNIFICANT_DIGITS).expect("valid histogram bounds")
}

/// Latencies (ns) counted by the histogram's bucket.
#[derive(Debug, Clone)]
pub(crate) struct LatencyCounts {
    /// Per bucket index, the values counted there; as long as the highest index counted so far.
    counts: Vec<u64>,
    total: u64,
    /// The least and the greatest value recorded (as recorded: the histogram keeps them so); `u64::MAX` and 0
    /// while none is.
    min: u64,
    max: u64,
}

impl Default for LatencyCounts {
    fn default() -> Self {
        LatencyCounts { counts: Vec::new(), total: 0, min: u64::MAX, max: 0 }
    }
}

impl LatencyCounts {
    /// Counts `ns` as `Histogram::saturating_record` would: 0 as 1 (the lowest discernible value), and a value past
    /// `LATENCY_MAX_NS` as that.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        let v = ns.clamp(1, LATENCY_MAX_NS);
        let i = index_of(v);
        if i >= self.counts.len() {
            self.grow(i);
        }
        self.counts[i] += 1;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.total += 1;
    }

    #[cold]
    fn grow(&mut self, i: usize) {
        self.counts.resize(i + 1, 0);
    }

    /// Adds `other`'s counts (as `Histogram::add` adds histograms).
    pub fn merge(&mut self, other: &LatencyCounts) {
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        (self.min, self.max) = (self.min.min(other.min), self.max.max(other.max));
        self.total += other.total;
    }

    /// The histogram that recording every value would have made: the same counts and total, and the least and
    /// greatest values recorded as themselves (the histogram's minimum and maximum), the others at their buckets'
    /// lowest values (which count in the same buckets). Its bound is the greatest value recorded: buckets are the
    /// same whatever the bound (it only adds empty ones above), and the report's figures read only the counts, the
    /// minimum and the maximum, while the full range's 55,000 counters cost about 270,000 instructions to make and
    /// as many to walk for the mean.
    pub fn to_histogram(&self) -> Histogram<u64> {
        if self.total == 0 {
            return new_histogram();
        }
        let mut h = Histogram::new_with_bounds(1, self.max.max(2), SIGNIFICANT_DIGITS).expect("valid histogram bounds");
        let mut counts = self.counts.clone();
        h.record(self.min).expect("in range");
        counts[index_of(self.min)] -= 1;
        if self.total > 1 {
            h.record(self.max).expect("in range");
            counts[index_of(self.max)] -= 1;
        }
        for (i, &n) in counts.iter().enumerate().filter(|(_, &n)| n > 0) {
            h.record_n(value_of(i), n).expect("in range");
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Values across the range: small ones, bucket edges, and the top.
    fn any_latency() -> impl Strategy<Value = u64> {
        prop_oneof![0u64..5_000, 0u64..10_000_000, any::<u64>(), (0u32..64).prop_map(|s| 1u64 << s), (1u32..64).prop_map(|s| (1u64 << s) - 1)]
    }

    fn recorded(values: &[u64]) -> Histogram<u64> {
        let mut h = new_histogram();
        for &v in values {
            h.saturating_record(v.max(1));
        }
        h
    }

    /// Everything a report reads from a histogram, and what it keeps: count, min, max, the mean's bits, quantiles
    /// and the recorded buckets.
    type Figures = (u64, u64, u64, u64, Vec<u64>, Vec<(u64, u64)>);

    fn figures(h: &Histogram<u64>) -> Figures {
        let quantiles = [0.0, 0.5, 0.9, 0.99, 0.999, 1.0].iter().map(|&q| h.value_at_quantile(q)).collect();
        let buckets = h.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())).collect();
        (h.len(), h.min(), h.max(), h.mean().to_bits(), quantiles, buckets)
    }

    proptest! {
        /// The bucket index and its lowest value are the histogram's.
        #[test]
        fn buckets_are_the_histograms(v in any_latency()) {
            let h = new_histogram();
            let v = v.clamp(1, LATENCY_MAX_NS);
            prop_assert_eq!(value_of(index_of(v)), h.lowest_equivalent(v));
            prop_assert!(index_of(v) < h.distinct_values());
        }

        /// The histogram made from the counts is the one recording every value makes (and merging two parts, the
        /// one of both parts' values).
        #[test]
        fn counts_make_the_recorded_histogram(a in prop::collection::vec(any_latency(), 0..60), b in prop::collection::vec(any_latency(), 0..60)) {
            let (mut ca, mut cb) = (LatencyCounts::default(), LatencyCounts::default());
            a.iter().for_each(|&v| ca.record(v));
            b.iter().for_each(|&v| cb.record(v));
            let ha = ca.to_histogram();
            prop_assert_eq!(figures(&ha), figures(&recorded(&a)));
            prop_assert_eq!((ha.min_nz(), ha.max()), (recorded(&a).min_nz(), recorded(&a).max()));
            ca.merge(&cb);
            let both: Vec<u64> = a.iter().chain(&b).copied().collect();
            prop_assert_eq!(figures(&ca.to_histogram()), figures(&recorded(&both)));
        }
    }

    #[test]
    fn edges() {
        for v in [0, 1, 2047, 2048, 2049, 4095, 4096, 1 << 40, LATENCY_MAX_NS - 1, LATENCY_MAX_NS, u64::MAX] {
            let mut c = LatencyCounts::default();
            c.record(v);
            c.record(3);
            assert_eq!(figures(&c.to_histogram()), figures(&recorded(&[v, 3])), "{v}");
        }
        assert_eq!(figures(&LatencyCounts::default().to_histogram()), figures(&new_histogram()));
    }
}
