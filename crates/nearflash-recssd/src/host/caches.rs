//! Host DRAM holding embedding rows, per table: the conventional baseline's fully associative LRU (filled by
//! every row read from the SSD) and RecSSD's static partition (the profile's hottest rows, copied once; NDP
//! results are partial sums, so they cannot fill an ordinary cache - paper §4.2).

use super::tables::HostRows;
use crate::host_cache::HostLru;
use crate::partition::HotRowPartition;
use crate::sls::RowSource;
use crate::ssd_cache::CacheStats;

/// The host's rows of one table.
pub struct TableCaches {
    /// Baseline LRU of rows read from the SSD (None: no host cache).
    pub lru: Option<HostLru<Box<[f32]>>>,
    /// RecSSD's static partition and its rows (slot order).
    pub partition: Option<(HotRowPartition, Vec<f32>)>,
}

impl TableCaches {
    /// An LRU of `lru_rows` rows (0: none) and no partition.
    pub fn new(lru_rows: usize) -> Self {
        Self { lru: HostLru::new(lru_rows).ok(), partition: None }
    }

    /// Installs the partition of the `capacity` most frequent ids of `profile`, copying their rows from `rows`.
    pub fn set_partition(&mut self, profile: &[u64], capacity: usize, rows: &HostRows) {
        let part = HotRowPartition::profile(profile, capacity);
        let dim = rows.dim();
        let mut values = vec![0.0f32; part.len() * dim];
        let mut scratch = vec![0.0f32; dim];
        for (slot, &r) in part.rows().iter().enumerate() {
            if (r as usize) < rows.rows() {
                values[slot * dim..(slot + 1) * dim].copy_from_slice(rows.row(r as usize, &mut scratch));
            }
        }
        self.partition = Some((part, values));
    }

    /// Empties the LRU (keeps its size) and zeroes the counters.
    pub fn reset_lru(&mut self) {
        if let Some(l) = self.lru.as_mut() {
            l.clear();
            l.reset_stats();
        }
    }

    /// LRU counters (zero without an LRU).
    pub fn lru_stats(&self) -> CacheStats {
        self.lru.as_ref().map(|l| l.stats()).unwrap_or_default()
    }

    /// Partition counters (zero without a partition).
    pub fn partition_stats(&self) -> CacheStats {
        self.partition.as_ref().map(|(p, _)| p.stats()).unwrap_or_default()
    }

    /// Zeroes both counters.
    pub fn reset_stats(&mut self) {
        if let Some(l) = self.lru.as_mut() {
            l.reset_stats();
        }
        if let Some((p, _)) = self.partition.as_mut() {
            p.reset_stats();
        }
    }
}
