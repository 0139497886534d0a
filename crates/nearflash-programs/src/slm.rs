//! Subsystem Local Memory: one memory namespace of controller DRAM set aside for programs (bytes addressed from
//! 0), and the memory range sets that name the parts of it a program may touch.
//!
//! SLM is volatile, like the DRAM it models: its contents and the range sets live as long as the device is open.
//! The backing buffer is allocated zeroed and lazily (untouched pages cost no host memory).

use crate::status;
use crate::wire::{nsid, RANGE_DESCRIPTOR_BYTES};
use nearflash_core::nvme::Status;
use std::collections::BTreeMap;

/// One memory range: `length` bytes from `sb` of memory namespace `nsid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryRange {
    pub nsid: u32,
    pub sb: u64,
    pub length: u32,
}

impl MemoryRange {
    pub fn end(&self) -> u64 {
        self.sb.saturating_add(u64::from(self.length))
    }

    /// The 32-byte descriptor: NSID (bytes 3:0), Length (7:4), Starting Byte (15:8), reserved (31:16).
    pub fn encode(&self) -> [u8; RANGE_DESCRIPTOR_BYTES] {
        let mut b = [0u8; RANGE_DESCRIPTOR_BYTES];
        b[0..4].copy_from_slice(&self.nsid.to_le_bytes());
        b[4..8].copy_from_slice(&self.length.to_le_bytes());
        b[8..16].copy_from_slice(&self.sb.to_le_bytes());
        b
    }

    /// Parses `count` descriptors from the front of `data` (reserved bytes must be zero).
    pub fn decode_all(data: &[u8], count: usize) -> Result<Vec<MemoryRange>, Status> {
        let need = count.checked_mul(RANGE_DESCRIPTOR_BYTES).ok_or(Status::INVALID_FIELD)?;
        if data.len() < need {
            return Err(Status::INVALID_FIELD);
        }
        data[..need]
            .chunks_exact(RANGE_DESCRIPTOR_BYTES)
            .map(|c| {
                if c[16..].iter().any(|&b| b != 0) {
                    return Err(status::INVALID_MEMORY_RANGE_SET);
                }
                Ok(MemoryRange {
                    nsid: u32::from_le_bytes(c[0..4].try_into().unwrap()),
                    length: u32::from_le_bytes(c[4..8].try_into().unwrap()),
                    sb: u64::from_le_bytes(c[8..16].try_into().unwrap()),
                })
            })
            .collect()
    }
}

/// The SLM namespace and its range sets.
#[derive(Debug)]
pub struct Slm {
    bytes: Vec<u8>,
    sets: BTreeMap<u16, Vec<MemoryRange>>,
    max_sets: usize,
    max_ranges: usize,
}

impl Slm {
    pub fn new(capacity: u64, max_sets: usize, max_ranges: usize) -> Slm {
        Slm { bytes: vec![0; capacity as usize], sets: BTreeMap::new(), max_sets, max_ranges }
    }

    pub fn capacity(&self) -> u64 {
        self.bytes.len() as u64
    }

    pub fn max_sets(&self) -> usize {
        self.max_sets
    }

    pub fn max_ranges(&self) -> usize {
        self.max_ranges
    }

    pub fn sets(&self) -> usize {
        self.sets.len()
    }

    /// `sb..sb+len` if it lies inside SLM, else LBA Out of Range (the SLM's "address beyond the namespace").
    pub fn span(&self, sb: u64, len: u64) -> Result<std::ops::Range<usize>, Status> {
        match sb.checked_add(len) {
            Some(end) if end <= self.capacity() => Ok(sb as usize..end as usize),
            _ => Err(Status::LBA_OUT_OF_RANGE),
        }
    }

    pub fn bytes(&self, r: std::ops::Range<usize>) -> &[u8] {
        &self.bytes[r]
    }

    pub fn bytes_mut(&mut self, r: std::ops::Range<usize>) -> &mut [u8] {
        &mut self.bytes[r]
    }

    /// Checks ranges for a set or an execution: count, namespace, bounds, no overlap.
    pub fn validate(&self, ranges: &[MemoryRange]) -> Result<(), Status> {
        if ranges.len() > self.max_ranges {
            return Err(status::MAX_MEMORY_RANGES_EXCEEDED);
        }
        for r in ranges {
            if r.nsid != nsid::SLM {
                return Err(status::INVALID_MEMORY_NAMESPACE);
            }
            if r.length == 0 || r.end() > self.capacity() {
                return Err(status::INVALID_MEMORY_RANGE_SET);
            }
        }
        let mut sorted: Vec<_> = ranges.to_vec();
        sorted.sort_by_key(|r| r.sb);
        if sorted.windows(2).any(|w| w[0].end() > w[1].sb) {
            return Err(status::OVERLAPPING_MEMORY_RANGES);
        }
        Ok(())
    }

    /// Creates a range set; returns its identifier (the lowest free one, from 1).
    pub fn create_set(&mut self, ranges: Vec<MemoryRange>) -> Result<u16, Status> {
        if ranges.is_empty() {
            return Err(Status::INVALID_FIELD);
        }
        self.validate(&ranges)?;
        if self.sets.len() >= self.max_sets {
            return Err(status::MAX_MEMORY_RANGE_SETS_EXCEEDED);
        }
        let id = (1..=u16::MAX).find(|i| !self.sets.contains_key(i)).ok_or(status::MAX_MEMORY_RANGE_SETS_EXCEEDED)?;
        self.sets.insert(id, ranges);
        Ok(id)
    }

    pub fn delete_set(&mut self, rsid: u16) -> Result<(), Status> {
        self.sets.remove(&rsid).map(|_| ()).ok_or(status::INVALID_MEMORY_RANGE_SET_ID)
    }

    pub fn set(&self, rsid: u16) -> Result<&[MemoryRange], Status> {
        self.sets.get(&rsid).map(Vec::as_slice).ok_or(status::INVALID_MEMORY_RANGE_SET_ID)
    }

    /// Disjoint mutable views of validated ranges, in the order given.
    pub fn views(&mut self, ranges: &[MemoryRange]) -> Vec<&mut [u8]> {
        let mut order: Vec<usize> = (0..ranges.len()).collect();
        order.sort_by_key(|&i| ranges[i].sb);
        let mut out: Vec<Option<&mut [u8]>> = (0..ranges.len()).map(|_| None).collect();
        let mut rest: &mut [u8] = &mut self.bytes;
        let mut base = 0u64;
        for i in order {
            let r = ranges[i];
            let tail = std::mem::take(&mut rest);
            let (_, from) = tail.split_at_mut((r.sb - base) as usize);
            let (view, after) = from.split_at_mut(r.length as usize);
            out[i] = Some(view);
            rest = after;
            base = r.end();
        }
        out.into_iter().map(|v| v.expect("every range gets a view")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(sb: u64, length: u32) -> MemoryRange {
        MemoryRange { nsid: nsid::SLM, sb, length }
    }

    #[test]
    fn sets_are_checked_numbered_and_deleted() {
        let mut s = Slm::new(4096, 2, 3);
        assert_eq!(s.create_set(vec![r(0, 16), r(100, 8)]), Ok(1));
        assert_eq!(s.create_set(vec![r(4000, 96)]), Ok(2));
        assert_eq!(s.create_set(vec![r(0, 1)]), Err(status::MAX_MEMORY_RANGE_SETS_EXCEEDED));
        s.delete_set(1).unwrap();
        assert_eq!(s.delete_set(1), Err(status::INVALID_MEMORY_RANGE_SET_ID));
        assert_eq!(s.create_set(vec![r(4000, 97)]), Err(status::INVALID_MEMORY_RANGE_SET), "past the end");
        assert_eq!(s.create_set(vec![r(0, 0)]), Err(status::INVALID_MEMORY_RANGE_SET), "empty range");
        assert_eq!(s.create_set(vec![r(0, 10), r(9, 1)]), Err(status::OVERLAPPING_MEMORY_RANGES));
        assert_eq!(s.create_set(vec![r(0, 1); 4]), Err(status::MAX_MEMORY_RANGES_EXCEEDED));
        let other = MemoryRange { nsid: nsid::NVM, sb: 0, length: 1 };
        assert_eq!(s.create_set(vec![other]), Err(status::INVALID_MEMORY_NAMESPACE));
        assert_eq!(s.create_set(vec![r(u64::MAX - 2, 8)]), Err(status::INVALID_MEMORY_RANGE_SET), "wrapping end");
        assert_eq!(s.create_set(vec![r(8, 8)]), Ok(1), "lowest free id");
        assert_eq!(s.sets(), 2);
    }

    #[test]
    fn descriptors_round_trip_and_views_alias_nothing() {
        let ranges = vec![r(64, 8), r(0, 4)];
        let raw: Vec<u8> = ranges.iter().flat_map(|x| x.encode()).collect();
        assert_eq!(MemoryRange::decode_all(&raw, 2).unwrap(), ranges);
        let mut bad = raw.clone();
        bad[31] = 1;
        assert_eq!(MemoryRange::decode_all(&bad, 1), Err(status::INVALID_MEMORY_RANGE_SET));
        let mut s = Slm::new(128, 4, 4);
        s.validate(&ranges).unwrap();
        let mut v = s.views(&ranges);
        v[0].fill(7);
        v[1].fill(9);
        assert_eq!(s.bytes(60..76), &[0, 0, 0, 0, 7, 7, 7, 7, 7, 7, 7, 7, 0, 0, 0, 0]);
        assert_eq!(s.bytes(0..5), &[9, 9, 9, 9, 0]);
        assert_eq!(s.span(120, 9), Err(Status::LBA_OUT_OF_RANGE));
    }
}
