//! Submission and completion queue entries: the 64-byte SQE and the 16-byte CQE, byte for byte.

/// A submission queue entry (common command format).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sqe {
    pub opcode: u8,
    /// FUSE (bits 1:0) and PSDT (bits 7:6).
    pub flags: u8,
    pub cid: u16,
    pub nsid: u32,
    pub cdw2: u32,
    pub cdw3: u32,
    pub mptr: u64,
    pub prp1: u64,
    pub prp2: u64,
    pub cdw10: u32,
    pub cdw11: u32,
    pub cdw12: u32,
    pub cdw13: u32,
    pub cdw14: u32,
    pub cdw15: u32,
}

/// Size of a submission queue entry.
pub const SQE_BYTES: usize = 64;
/// Size of a completion queue entry.
pub const CQE_BYTES: usize = 16;
/// Most logical blocks one Read or Write can carry (NLB is a 0's-based 16-bit field).
pub const MAX_NLB: u32 = 1 << 16;

fn u32_at(b: &[u8; SQE_BYTES], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn u64_at(b: &[u8; SQE_BYTES], o: usize) -> u64 {
    u64::from(u32_at(b, o)) | (u64::from(u32_at(b, o + 4)) << 32)
}

impl Sqe {
    pub fn from_bytes(b: &[u8; SQE_BYTES]) -> Sqe {
        Sqe {
            opcode: b[0],
            flags: b[1],
            cid: u16::from_le_bytes([b[2], b[3]]),
            nsid: u32_at(b, 4),
            cdw2: u32_at(b, 8),
            cdw3: u32_at(b, 12),
            mptr: u64_at(b, 16),
            prp1: u64_at(b, 24),
            prp2: u64_at(b, 32),
            cdw10: u32_at(b, 40),
            cdw11: u32_at(b, 44),
            cdw12: u32_at(b, 48),
            cdw13: u32_at(b, 52),
            cdw14: u32_at(b, 56),
            cdw15: u32_at(b, 60),
        }
    }

    pub fn to_bytes(&self) -> [u8; SQE_BYTES] {
        let mut b = [0u8; SQE_BYTES];
        b[0] = self.opcode;
        b[1] = self.flags;
        b[2..4].copy_from_slice(&self.cid.to_le_bytes());
        let mut put = |o: usize, v: u32| b[o..o + 4].copy_from_slice(&v.to_le_bytes());
        put(4, self.nsid);
        put(8, self.cdw2);
        put(12, self.cdw3);
        put(16, self.mptr as u32);
        put(20, (self.mptr >> 32) as u32);
        put(24, self.prp1 as u32);
        put(28, (self.prp1 >> 32) as u32);
        put(32, self.prp2 as u32);
        put(36, (self.prp2 >> 32) as u32);
        put(40, self.cdw10);
        put(44, self.cdw11);
        put(48, self.cdw12);
        put(52, self.cdw13);
        put(56, self.cdw14);
        put(60, self.cdw15);
        b
    }

    /// Starting LBA of Read/Write-like commands (CDW10-11).
    /// Command dword `n` (0-15; dwords 1-9 hold the namespace, metadata and data pointers: 0 here).
    pub fn dword(&self, n: u8) -> u32 {
        match n {
            2 => self.cdw2,
            3 => self.cdw3,
            10 => self.cdw10,
            11 => self.cdw11,
            12 => self.cdw12,
            13 => self.cdw13,
            14 => self.cdw14,
            15 => self.cdw15,
            _ => 0,
        }
    }

    pub fn slba(&self) -> u64 {
        u64::from(self.cdw10) | (u64::from(self.cdw11) << 32)
    }

    /// Number of logical blocks of Read/Write-like commands (CDW12 bits 15:0 are zero-based).
    pub fn nlb(&self) -> u32 {
        (self.cdw12 & 0xFFFF) + 1
    }

    /// A Read or Write SQE; `nlb` must be 1..=`MAX_NLB` (callers validate: the field cannot express more).
    pub fn rw(opcode: u8, cid: u16, slba: u64, nlb: u32) -> Sqe {
        Sqe {
            opcode,
            cid,
            nsid: 1,
            cdw10: slba as u32,
            cdw11: (slba >> 32) as u32,
            cdw12: nlb.saturating_sub(1) & 0xFFFF,
            ..Sqe::default()
        }
    }
}

/// A completion queue entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cqe {
    /// Command-specific result.
    pub dw0: u32,
    pub dw1: u32,
    pub sq_head: u16,
    pub sq_id: u16,
    pub cid: u16,
    /// Phase tag (bit 0) and status field (bits 15:1).
    pub status: u16,
}

impl Cqe {
    pub fn to_bytes(&self) -> [u8; CQE_BYTES] {
        let mut b = [0u8; CQE_BYTES];
        b[0..4].copy_from_slice(&self.dw0.to_le_bytes());
        b[4..8].copy_from_slice(&self.dw1.to_le_bytes());
        b[8..10].copy_from_slice(&self.sq_head.to_le_bytes());
        b[10..12].copy_from_slice(&self.sq_id.to_le_bytes());
        b[12..14].copy_from_slice(&self.cid.to_le_bytes());
        b[14..16].copy_from_slice(&self.status.to_le_bytes());
        b
    }

    pub fn from_bytes(b: &[u8; CQE_BYTES]) -> Cqe {
        let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
        Cqe {
            dw0: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            dw1: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            sq_head: u16_at(8),
            sq_id: u16_at(10),
            cid: u16_at(12),
            status: u16_at(14),
        }
    }

    pub fn status(&self) -> super::Status {
        super::Status::from_field(self.status >> 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn sqe_bytes_round_trip(bytes in prop::array::uniform32(any::<u8>()), more in prop::array::uniform32(any::<u8>())) {
            let mut b = [0u8; SQE_BYTES];
            b[..32].copy_from_slice(&bytes);
            b[32..].copy_from_slice(&more);
            prop_assert_eq!(Sqe::from_bytes(&b).to_bytes(), b);
        }
    }

    #[test]
    fn rw_fields() {
        let s = Sqe::rw(0x02, 9, 0x1_0000_0005, 8);
        assert_eq!((s.slba(), s.nlb(), s.cid), (0x1_0000_0005, 8, 9));
        let c = Cqe { dw0: 1, dw1: 2, sq_head: 3, sq_id: 4, cid: 5, status: 0x8001 };
        assert_eq!(Cqe::from_bytes(&c.to_bytes()), c);
    }
}
