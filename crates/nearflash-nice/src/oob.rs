//! The file-aware page layout (paper Sec. IV-B): every data page of a file carries, in its sector's OOB spare
//! bytes, a doubly linked list entry (predecessor/successor LPN and PPN), its own LPN, and on the first page the
//! file's inode number. Reading a file's first page gives the inode; the inode page gives the LPN list: at most two
//! flash reads locate a whole file, and streaming it follows the successor PPNs without mapping lookups.
//!
//! The record is 32 bytes, little endian, fitting the platform's per-sector spare bytes (the nice-zu7eg preset has
//! 416 B per 4 KiB page, 280 B of it ECC parity):
//!
//! | bytes | field |
//! |---|---|
//! | 0 | magic 0x4E ('N') |
//! | 1 | flags: bit 0 first page, bit 1 last page |
//! | 2 | op: accelerator / model id of the last `NICE_Write` (0 = none) |
//! | 3 | partition index in the Superblock Table |
//! | 4..8 | own LPN |
//! | 8..12 | predecessor LPN (`NONE` = none) |
//! | 12..16 | successor LPN |
//! | 16..20 | predecessor PPN |
//! | 20..24 | successor PPN |
//! | 24..28 | inode number (first page; 0 elsewhere) |
//! | 28..32 | CRC-32 of bytes 0..28 |
//!
//! LPNs and PPNs are 32-bit: 2^32 4 KiB pages is 16 TiB, beyond the 512 GB device; wider devices are refused.

use crate::error::{corrupt, invalid, Result};

pub const OOB_RECORD_BYTES: usize = 32;
const MAGIC: u8 = 0x4E;
/// "No neighbour" in a link field.
pub const NONE: u32 = u32::MAX;
const FIRST: u8 = 1;
const LAST: u8 = 2;

/// One page's OOB record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OobRecord {
    pub lpn: u32,
    pub pred_lpn: u32,
    pub succ_lpn: u32,
    pub pred_ppn: u32,
    pub succ_ppn: u32,
    /// Inode number on the first page, 0 elsewhere.
    pub inode: u32,
    pub first: bool,
    pub last: bool,
    pub op: u8,
    pub partition: u8,
}

impl OobRecord {
    pub fn encode(&self) -> [u8; OOB_RECORD_BYTES] {
        let mut b = [0u8; OOB_RECORD_BYTES];
        b[0] = MAGIC;
        b[1] = (u8::from(self.first) * FIRST) | (u8::from(self.last) * LAST);
        b[2] = self.op;
        b[3] = self.partition;
        for (i, v) in [self.lpn, self.pred_lpn, self.succ_lpn, self.pred_ppn, self.succ_ppn, self.inode].iter().enumerate() {
            b[4 + 4 * i..8 + 4 * i].copy_from_slice(&v.to_le_bytes());
        }
        let crc = crc32fast::hash(&b[..28]);
        b[28..32].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes a record; an erased spare (all 0xFF), a page without a NICE record or damaged bytes are errors.
    pub fn decode(b: &[u8]) -> Result<Self> {
        const W: &str = "OOB record";
        let b: &[u8; OOB_RECORD_BYTES] = b
            .get(..OOB_RECORD_BYTES)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(|| corrupt(W, format!("{} bytes, need {OOB_RECORD_BYTES}", b.len())))?;
        if b[0] != MAGIC {
            return Err(corrupt(W, format!("magic {:#04x}", b[0])));
        }
        let crc = u32::from_le_bytes([b[28], b[29], b[30], b[31]]);
        if crc != crc32fast::hash(&b[..28]) {
            return Err(corrupt(W, "CRC mismatch"));
        }
        if b[1] & !(FIRST | LAST) != 0 {
            return Err(corrupt(W, format!("flags {:#04x}", b[1])));
        }
        let f = |i: usize| u32::from_le_bytes([b[4 + 4 * i], b[5 + 4 * i], b[6 + 4 * i], b[7 + 4 * i]]);
        let r = OobRecord {
            lpn: f(0),
            pred_lpn: f(1),
            succ_lpn: f(2),
            pred_ppn: f(3),
            succ_ppn: f(4),
            inode: f(5),
            first: b[1] & FIRST != 0,
            last: b[1] & LAST != 0,
            op: b[2],
            partition: b[3],
        };
        if r.first != (r.pred_lpn == NONE) || r.last != (r.succ_lpn == NONE) || r.first != (r.inode != 0) {
            return Err(corrupt(W, "first/last flags disagree with the links or the inode"));
        }
        Ok(r)
    }
}

/// Narrows a page number to the 32-bit OOB field.
pub fn page32(n: u64, what: &str) -> Result<u32> {
    u32::try_from(n).ok().filter(|&v| v != NONE).ok_or_else(|| invalid(format!("{what} {n} does not fit the 32-bit OOB field")))
}

/// The OOB records of a whole file whose pages `lpns` (file order) sit at `ppns`.
pub fn chain_records(inode: u32, partition: u8, op: u8, lpns: &[u64], ppns: &[u64]) -> Result<Vec<OobRecord>> {
    if lpns.len() != ppns.len() || lpns.is_empty() || inode == 0 {
        return Err(invalid(format!("{} LPNs, {} PPNs, inode {inode}", lpns.len(), ppns.len())));
    }
    let l: Vec<u32> = lpns.iter().map(|&x| page32(x, "LPN")).collect::<Result<_>>()?;
    let p: Vec<u32> = ppns.iter().map(|&x| page32(x, "PPN")).collect::<Result<_>>()?;
    let n = l.len();
    Ok((0..n)
        .map(|i| OobRecord {
            lpn: l[i],
            pred_lpn: if i == 0 { NONE } else { l[i - 1] },
            succ_lpn: if i + 1 == n { NONE } else { l[i + 1] },
            pred_ppn: if i == 0 { NONE } else { p[i - 1] },
            succ_ppn: if i + 1 == n { NONE } else { p[i + 1] },
            inode: if i == 0 { inode } else { 0 },
            first: i == 0,
            last: i + 1 == n,
            op,
            partition,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn records_round_trip(lpns in proptest::collection::vec(0u64..1 << 31, 1..20), ino in 1u32..1000, op: u8) {
            let ppns: Vec<u64> = lpns.iter().map(|l| l + 7).collect();
            for r in chain_records(ino, 0, op, &lpns, &ppns).unwrap() {
                prop_assert_eq!(OobRecord::decode(&r.encode()).unwrap(), r);
            }
        }

        #[test]
        fn any_flipped_bit_is_detected(bit in 0usize..256) {
            let r = chain_records(5, 0, 1, &[10, 11], &[20, 21]).unwrap()[0];
            let mut b = r.encode();
            b[bit / 8] ^= 1 << (bit % 8);
            prop_assert!(OobRecord::decode(&b).is_err());
        }
    }

    #[test]
    fn erased_and_short_spares_are_refused() {
        assert!(OobRecord::decode(&[0xFF; 32]).is_err());
        assert!(OobRecord::decode(&[0; 31]).is_err());
        assert!(chain_records(0, 0, 0, &[1], &[2]).is_err());
        assert!(chain_records(1, 0, 0, &[1, 2], &[2]).is_err());
        assert!(chain_records(1, 0, 0, &[1 << 33], &[2]).is_err());
    }
}
