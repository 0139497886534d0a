//! The job descriptor the Initiator loads into the Agent (the data of the LOAD command): where the input is, how it
//! is paged, which kernel maps it, whether the stream processors map it, and what comes back.
//!
//! Wire format (little endian; total length = 32 + 16 x extents + spec bytes, then only zero padding):
//!
//! ```text
//! offset size field
//!      0    4 magic "iSSD"
//!      4    2 version (1)
//!      6    1 flags: bit 0 map on the stream processors, bit 1 return the merged partial (partitioned jobs)
//!              instead of the finished output; other bits zero
//!      7    1 reserved (0)
//!      8    4 page size of the kernel's paged layout, bytes
//!     12    4 extent count n (1..=4096)
//!     16    4 kernel spec length m (1..=65536), bytes of JSON (`{"kernel": "scan", ...}`)
//!     20    4 index of the input's first kernel page in the whole job (0 unless the job is one share of a
//!              partitioned input: page indices order selected rows and locate matches)
//!     24    4 host cycles per result byte (f32, finite, >= 0): the Initiator's cost of consuming results
//!     28    4 host instructions per result byte (f32, finite, >= 0)
//!     32 16 n extents: first LBA (u64), LBAs (u32, >= 1), reserved (u32, 0)
//! 32+16n    m kernel spec, UTF-8 JSON
//! ```
//!
//! The host's consumption cost lets the Agent book the Initiator's stage (f) on each result batch as it lands in
//! host memory (RUN is simulated in one step; see [`super`]). The extents, in order, are the input: a file's block list or one LBA range. Parsing checks only the
//! descriptor itself (any byte string is either a descriptor or a [`DescriptorError`], never a panic); the Agent
//! checks it against the device (LBA range, page size against LBA and flash page sizes) when it is loaded.

use crate::kernel::KernelSpec;
use thiserror::Error;

pub const MAGIC: &[u8; 4] = b"iSSD";
pub const VERSION: u16 = 1;
pub const HEADER_BYTES: usize = 32;
pub const EXTENT_BYTES: usize = 16;
pub const MAX_EXTENTS: usize = 4096;
pub const MAX_SPEC_BYTES: usize = 65536;
/// Largest descriptor: header, the most extents and the longest spec.
pub const MAX_DESCRIPTOR_BYTES: usize = HEADER_BYTES + MAX_EXTENTS * EXTENT_BYTES + MAX_SPEC_BYTES;

const FLAG_ACCELERATE: u8 = 1;
const FLAG_PARTIAL: u8 = 2;

/// Why a byte string is not a descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("bad iSSD job descriptor: {0}")]
pub struct DescriptorError(pub String);

fn bad(msg: impl Into<String>) -> DescriptorError {
    DescriptorError(msg.into())
}

/// A run of LBAs of the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub slba: u64,
    pub nlb: u32,
}

/// What the job returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultKind {
    /// The kernel's finished output (pipelining).
    Output,
    /// The merged partial of the device's share (partitioning: the host merges it with its own).
    Partial,
}

/// A decoded job.
#[derive(Debug, Clone, PartialEq)]
pub struct JobDescriptor {
    pub spec: KernelSpec,
    pub page_size: u32,
    pub extents: Vec<Extent>,
    /// Index of the first kernel page in the whole job (the shares of a partitioned job number their pages apart).
    pub first_page: u32,
    /// Map on the stream processors (Table 2's accelerated CPB).
    pub accelerate: bool,
    /// Host cycles and instructions per result byte the Initiator spends consuming the result (stage (f)).
    pub host_cpb: f32,
    pub host_ipb: f32,
    pub result: ResultKind,
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

impl JobDescriptor {
    /// LBAs of the whole input.
    pub fn total_lbas(&self) -> u64 {
        self.extents.iter().map(|e| u64::from(e.nlb)).sum()
    }

    /// The wire form.
    pub fn encode(&self) -> Vec<u8> {
        let spec = self.spec.to_json();
        let mut out = Vec::with_capacity(HEADER_BYTES + EXTENT_BYTES * self.extents.len() + spec.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        let flags = u8::from(self.accelerate) * FLAG_ACCELERATE + u8::from(self.result == ResultKind::Partial) * FLAG_PARTIAL;
        out.extend_from_slice(&[flags, 0]);
        out.extend_from_slice(&self.page_size.to_le_bytes());
        out.extend_from_slice(&(self.extents.len() as u32).to_le_bytes());
        out.extend_from_slice(&(spec.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.first_page.to_le_bytes());
        out.extend_from_slice(&self.host_cpb.to_le_bytes());
        out.extend_from_slice(&self.host_ipb.to_le_bytes());
        for e in &self.extents {
            out.extend_from_slice(&e.slba.to_le_bytes());
            out.extend_from_slice(&e.nlb.to_le_bytes());
            out.extend_from_slice(&0u32.to_le_bytes());
        }
        out.extend_from_slice(spec.as_bytes());
        out
    }

    /// Parses a descriptor; trailing bytes must be zero (the data buffer may be padded to whole blocks).
    pub fn decode(b: &[u8]) -> Result<Self, DescriptorError> {
        if b.len() < HEADER_BYTES {
            return Err(bad(format!("{} bytes, the header alone is {HEADER_BYTES}", b.len())));
        }
        if &b[0..4] != MAGIC {
            return Err(bad("no \"iSSD\" magic"));
        }
        let version = u16::from_le_bytes([b[4], b[5]]);
        if version != VERSION {
            return Err(bad(format!("version {version}, this Agent speaks {VERSION}")));
        }
        let flags = b[6];
        if flags & !(FLAG_ACCELERATE | FLAG_PARTIAL) != 0 || b[7] != 0 {
            return Err(bad("reserved bits set"));
        }
        let page_size = u32_at(b, 8);
        let (host_cpb, host_ipb) = (f32::from_bits(u32_at(b, 24)), f32::from_bits(u32_at(b, 28)));
        if !(host_cpb.is_finite() && host_cpb >= 0.0 && host_ipb.is_finite() && host_ipb >= 0.0) {
            return Err(bad("host consumption costs must be finite and non-negative"));
        }
        let n = u32_at(b, 12) as usize;
        let m = u32_at(b, 16) as usize;
        if !(1..=MAX_EXTENTS).contains(&n) {
            return Err(bad(format!("{n} extents, expected 1..={MAX_EXTENTS}")));
        }
        if !(1..=MAX_SPEC_BYTES).contains(&m) {
            return Err(bad(format!("kernel spec of {m} bytes, expected 1..={MAX_SPEC_BYTES}")));
        }
        let spec_at = HEADER_BYTES + n * EXTENT_BYTES;
        let end = spec_at + m;
        if b.len() < end {
            return Err(bad(format!("{} bytes, the header announces {end}", b.len())));
        }
        if b[end..].iter().any(|&x| x != 0) {
            return Err(bad("non-zero bytes after the kernel spec"));
        }
        let mut extents = Vec::with_capacity(n);
        for c in b[HEADER_BYTES..spec_at].chunks_exact(EXTENT_BYTES) {
            let slba = u64::from(u32_at(c, 0)) | (u64::from(u32_at(c, 4)) << 32);
            let nlb = u32_at(c, 8);
            if nlb == 0 || u32_at(c, 12) != 0 {
                return Err(bad("an extent is empty or has reserved bits set"));
            }
            if slba.checked_add(u64::from(nlb)).is_none() {
                return Err(bad("an extent overflows the LBA space"));
            }
            extents.push(Extent { slba, nlb });
        }
        let text = std::str::from_utf8(&b[spec_at..end]).map_err(|_| bad("the kernel spec is not UTF-8"))?;
        let spec = KernelSpec::from_json(text).map_err(|e| bad(e.to_string()))?;
        Ok(Self {
            spec,
            page_size,
            extents,
            first_page: u32_at(b, 20),
            accelerate: flags & FLAG_ACCELERATE != 0,
            host_cpb,
            host_ipb,
            result: if flags & FLAG_PARTIAL != 0 { ResultKind::Partial } else { ResultKind::Output },
        })
    }

    /// Checks the job against a device of `lbas` blocks of `lba_bytes` with `flash_page` byte pages: kernel pages
    /// are whole blocks that fit a flash page (so one FMC can map one), extents are whole kernel pages inside
    /// the namespace and do not overlap.
    pub fn check_device(&self, lbas: u64, lba_bytes: u64, flash_page: u64) -> Result<(), DescriptorError> {
        let ps = u64::from(self.page_size);
        if ps == 0 || ps % lba_bytes != 0 || !flash_page.is_multiple_of(ps) {
            return Err(bad(format!(
                "page size {ps} B must be a multiple of the {lba_bytes} B block and divide the {flash_page} B flash page"
            )));
        }
        let per = ps / lba_bytes;
        let mut spans: Vec<(u64, u64)> = Vec::with_capacity(self.extents.len());
        for e in &self.extents {
            if u64::from(e.nlb) % per != 0 {
                return Err(bad(format!("an extent of {} blocks is not whole {ps} B pages", e.nlb)));
            }
            spans.push((e.slba, e.slba + u64::from(e.nlb)));
        }
        spans.sort_unstable();
        if spans.windows(2).any(|w| w[1].0 < w[0].1) {
            return Err(bad("extents overlap"));
        }
        if spans.last().is_some_and(|s| s.1 > lbas) {
            return Err(bad(format!("an extent ends beyond the {lbas} blocks of the namespace")));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn job() -> JobDescriptor {
        JobDescriptor {
            spec: KernelSpec::from_json(r#"{"kernel":"grep","pattern":"x"}"#).unwrap(),
            page_size: 8192,
            extents: vec![Extent { slba: 0, nlb: 8 }, Extent { slba: 100, nlb: 4 }],
            first_page: 7,
            accelerate: true,
            host_cpb: 3.1,
            host_ipb: 3.9,
            result: ResultKind::Partial,
        }
    }

    #[test]
    fn round_trips_with_padding() {
        let j = job();
        let mut b = j.encode();
        assert_eq!(JobDescriptor::decode(&b).unwrap(), j);
        b.resize(4096, 0);
        assert_eq!(JobDescriptor::decode(&b).unwrap(), j);
        assert_eq!(j.total_lbas(), 12);
        j.check_device(1000, 4096, 8192).unwrap();
    }

    #[test]
    fn every_field_is_checked() {
        let good = job().encode();
        let mutate = |i: usize, v: u8| {
            let mut b = good.clone();
            b[i] = v;
            JobDescriptor::decode(&b)
        };
        assert!(mutate(0, b'x').is_err(), "magic");
        assert!(mutate(4, 2).is_err(), "version");
        assert!(mutate(6, 4).is_err(), "flags");
        assert!(mutate(7, 1).is_err(), "reserved");
        assert!(mutate(12, 0).is_err(), "no extents");
        assert!(mutate(16, 200).is_err(), "spec longer than the buffer");
        assert_eq!(mutate(20, 1).unwrap().first_page, 1);
        assert!(mutate(27, 0xFF).is_err(), "NaN host cost");
        assert!(mutate(31, 0x80).is_err(), "negative host cost");
        assert!(mutate(40, 0).is_err(), "empty extent");
        assert!(mutate(44, 1).is_err(), "extent reserved");
        let mut trailing = good.clone();
        trailing.push(7);
        assert!(JobDescriptor::decode(&trailing).is_err());
        assert!(JobDescriptor::decode(&good[..good.len() - 1]).is_err(), "truncated spec");
        assert!(JobDescriptor::decode(&good[..10]).is_err());
        let mut bad_spec = good.clone();
        let at = HEADER_BYTES + 2 * EXTENT_BYTES;
        bad_spec[at] = 0xFF;
        assert!(JobDescriptor::decode(&bad_spec).is_err(), "not UTF-8");
    }

    #[test]
    fn device_checks() {
        let mut j = job();
        assert!(j.check_device(103, 4096, 8192).is_err(), "beyond the namespace");
        j.page_size = 16384;
        assert!(j.check_device(1000, 4096, 8192).is_err(), "page larger than a flash page");
        j.page_size = 6000;
        assert!(j.check_device(1000, 4096, 8192).is_err(), "not whole blocks");
        j.page_size = 8192;
        j.extents = vec![Extent { slba: 0, nlb: 8 }, Extent { slba: 6, nlb: 4 }];
        assert!(j.check_device(1000, 4096, 8192).is_err(), "overlap");
        j.extents = vec![Extent { slba: 0, nlb: 3 }];
        assert!(j.check_device(1000, 4096, 8192).is_err(), "partial page");
    }

    proptest! {
        /// Any bytes decode to a descriptor or an error, never a panic; valid headers with random tails too.
        #[test]
        fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
            let _ = JobDescriptor::decode(&bytes);
        }

        #[test]
        fn mutated_descriptors_never_panic(i in 0usize..80, v in any::<u8>(), cut in 0usize..120) {
            let mut b = job().encode();
            let i = i % b.len();
            b[i] = v;
            b.truncate(b.len().saturating_sub(cut % 8));
            if let Ok(j) = JobDescriptor::decode(&b) {
                let _ = j.check_device(1 << 20, 4096, 8192);
                prop_assert_eq!(JobDescriptor::decode(&j.encode()).unwrap(), j);
            }
        }
    }
}
