//! Subsystem Local Memory: one memory namespace of controller DRAM set aside for programs (bytes addressed from
//! 0), and the memory range sets that name the parts of it a program may touch.
//!
//! SLM is volatile, like the DRAM it models: its contents and the range sets live as long as the device is open.
//! The backing buffer is allocated zeroed and lazily (untouched pages cost no host memory).

use crate::status::{self, Refusal};
use crate::wire::{descriptors, nsid, RANGE_DESCRIPTOR_BYTES};
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
    pub fn decode_all(data: &[u8], count: usize) -> Result<Vec<MemoryRange>, Refusal> {
        descriptors(data, count, "memory range descriptors")?
            .map(|(i, c)| {
                if c[16..].iter().any(|&b| b != 0) {
                    return Err(Refusal::new(status::INVALID_MEMORY_RANGE_SET, None, format!("memory range {i}: reserved bytes 16..32 must be 0")));
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

    /// `sb..sb+len` if it lies inside SLM, else LBA Out of Range (the SLM's "address beyond the namespace"),
    /// naming the field (`what`, at command byte `byte`) that holds `sb`.
    pub fn span(&self, sb: u64, len: u64, what: &str, byte: u8) -> Result<std::ops::Range<usize>, Refusal> {
        match sb.checked_add(len) {
            Some(end) if end <= self.capacity() => Ok(sb as usize..end as usize),
            _ => Err(Refusal::new(
                Status::LBA_OUT_OF_RANGE,
                Some(byte),
                format!("{what} {sb} + {len} bytes: beyond the {}-byte SLM (expected {what} + length <= {})", self.capacity(), self.capacity()),
            )),
        }
    }

    pub fn bytes(&self, r: std::ops::Range<usize>) -> &[u8] {
        &self.bytes[r]
    }

    pub fn bytes_mut(&mut self, r: std::ops::Range<usize>) -> &mut [u8] {
        &mut self.bytes[r]
    }

    /// Checks ranges for a set or an execution: count, namespace, bounds, no overlap.
    pub fn validate(&self, ranges: &[MemoryRange]) -> Result<(), Refusal> {
        if ranges.len() > self.max_ranges {
            return Err(self.too_many(ranges.len()));
        }
        for (i, r) in ranges.iter().enumerate() {
            if r.nsid != nsid::SLM && r.nsid != nsid::NVM {
                let why = format!("memory range {i}: NSID {}: expected the SLM namespace ({}) or, for blocks a program reads, the NVM namespace ({})", r.nsid, nsid::SLM, nsid::NVM);
                return Err(Refusal::new(status::INVALID_MEMORY_NAMESPACE, None, why));
            }
            if r.nsid == nsid::NVM && r.length == 0 {
                return Err(Refusal::new(status::INVALID_MEMORY_RANGE_SET, None, format!("memory range {i}: 0 bytes of the NVM namespace: expected 1 or more")));
            }
            if r.nsid == nsid::SLM && (r.length == 0 || r.end() > self.capacity()) {
                let why = format!("memory range {i}: {} bytes from {}: expected 1 or more bytes inside the {}-byte SLM", r.length, r.sb, self.capacity());
                return Err(Refusal::new(status::INVALID_MEMORY_RANGE_SET, None, why));
            }
        }
        // Only memory can overlap harmfully (blocks of the NVM namespace are read, never written).
        let mut sorted: Vec<_> = ranges.iter().filter(|r| r.nsid == nsid::SLM).copied().collect();
        sorted.sort_by_key(|r| r.sb);
        if let Some(w) = sorted.windows(2).find(|w| w[0].end() > w[1].sb) {
            let why = format!("memory ranges {}..{} and {}..{} overlap", w[0].sb, w[0].end(), w[1].sb, w[1].end());
            return Err(Refusal::new(status::OVERLAPPING_MEMORY_RANGES, None, why));
        }
        Ok(())
    }

    /// The refusal of `n` ranges where at most `max_ranges` are allowed.
    pub fn too_many(&self, n: usize) -> Refusal {
        Refusal::new(status::MAX_MEMORY_RANGES_EXCEEDED, None, format!("{n} memory ranges: expected 1..={} per set or execution", self.max_ranges))
    }

    /// Creates a range set; returns its identifier (the lowest free one, from 1).
    pub fn create_set(&mut self, ranges: Vec<MemoryRange>) -> Result<u16, Refusal> {
        if ranges.is_empty() {
            return Err(Refusal::field(44, format!("NUMR (CDW11) = 0: expected 1..={} ranges", self.max_ranges)));
        }
        self.validate(&ranges)?;
        let full = || Refusal::new(status::MAX_MEMORY_RANGE_SETS_EXCEEDED, None, format!("all {} memory range sets are in use: delete one first", self.max_sets));
        if self.sets.len() >= self.max_sets {
            return Err(full());
        }
        let id = (1..=u16::MAX).find(|i| !self.sets.contains_key(i)).ok_or_else(full)?;
        self.sets.insert(id, ranges);
        Ok(id)
    }

    pub fn delete_set(&mut self, rsid: u16) -> Result<(), Refusal> {
        self.sets.remove(&rsid).map(|_| ()).ok_or_else(|| self.no_set(rsid, 42))
    }

    /// The ranges of set `rsid`; a refusal names the field at command byte `byte` that holds `rsid`.
    pub fn set(&self, rsid: u16, byte: u8) -> Result<&[MemoryRange], Refusal> {
        self.sets.get(&rsid).map(Vec::as_slice).ok_or_else(|| self.no_set(rsid, byte))
    }

    fn no_set(&self, rsid: u16, byte: u8) -> Refusal {
        let ids: Vec<String> = self.sets.keys().map(u16::to_string).collect();
        let have = if ids.is_empty() { "none exists".to_string() } else { format!("existing: {}", ids.join(", ")) };
        Refusal::new(status::INVALID_MEMORY_RANGE_SET_ID, Some(byte), format!("RSID {rsid} names no memory range set ({have})"))
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
        assert_eq!(s.create_set(vec![r(0, 1)]).map_err(|r| r.status), Err(status::MAX_MEMORY_RANGE_SETS_EXCEEDED));
        s.delete_set(1).unwrap();
        assert!(s.delete_set(1).unwrap_err().why.contains("RSID 1 names no memory range set"));
        assert_eq!(s.create_set(vec![r(4000, 97)]).map_err(|r| r.status), Err(status::INVALID_MEMORY_RANGE_SET), "past the end");
        assert_eq!(s.create_set(vec![r(0, 0)]).map_err(|r| r.status), Err(status::INVALID_MEMORY_RANGE_SET), "empty range");
        assert_eq!(s.create_set(vec![r(0, 10), r(9, 1)]).map_err(|r| r.status), Err(status::OVERLAPPING_MEMORY_RANGES));
        assert_eq!(s.create_set(vec![r(0, 1); 4]).map_err(|r| r.status), Err(status::MAX_MEMORY_RANGES_EXCEEDED));
        let other = MemoryRange { nsid: nsid::COMPUTE, sb: 0, length: 1 };
        assert_eq!(s.create_set(vec![other]).map_err(|r| r.status), Err(status::INVALID_MEMORY_NAMESPACE));
        assert_eq!(s.create_set(vec![r(u64::MAX - 2, 8)]).map_err(|r| r.status), Err(status::INVALID_MEMORY_RANGE_SET), "wrapping end");
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
        assert_eq!(MemoryRange::decode_all(&bad, 1).map_err(|r| r.status), Err(status::INVALID_MEMORY_RANGE_SET));
        let mut s = Slm::new(128, 4, 4);
        s.validate(&ranges).unwrap();
        let mut v = s.views(&ranges);
        v[0].fill(7);
        v[1].fill(9);
        assert_eq!(s.bytes(60..76), &[0, 0, 0, 0, 7, 7, 7, 7, 7, 7, 7, 7, 0, 0, 0, 0]);
        assert_eq!(s.bytes(0..5), &[9, 9, 9, 9, 0]);
        assert_eq!(s.span(120, 9, "SB", 40).map_err(|r| (r.status, r.byte)), Err((Status::LBA_OUT_OF_RANGE, Some(40))));
    }
}
