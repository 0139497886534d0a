//! Decoding and validation of submission entries into typed commands.
//!
//! Everything a host can put in an SQE is checked here, before any work: unknown opcodes, fused or SGL commands,
//! reserved bits, namespaces, LBA ranges and transfer sizes. A malformed command becomes an NVMe status, never a
//! panic (a cargo-fuzz target and a property test feed this module arbitrary bytes).

use super::{Refusal, Sqe, Status};
use crate::ctrl::sched::Priority;

/// Opcodes (NVMe base and NVM command set specifications).
pub mod opcode {
    pub const ADMIN_DELETE_SQ: u8 = 0x00;
    pub const ADMIN_CREATE_SQ: u8 = 0x01;
    pub const ADMIN_GET_LOG_PAGE: u8 = 0x02;
    pub const ADMIN_DELETE_CQ: u8 = 0x04;
    pub const ADMIN_CREATE_CQ: u8 = 0x05;
    pub const ADMIN_IDENTIFY: u8 = 0x06;
    pub const FLUSH: u8 = 0x00;
    pub const WRITE: u8 = 0x01;
    pub const READ: u8 = 0x02;
    pub const WRITE_ZEROES: u8 = 0x08;
    pub const DSM: u8 = 0x09;
    /// First I/O opcode of the vendor-specific range.
    pub const IO_VENDOR_FIRST: u8 = 0x80;
    /// First admin opcode of the vendor-specific range.
    pub const ADMIN_VENDOR_FIRST: u8 = 0xC0;
}

/// The namespace limits commands are checked against.
#[derive(Debug, Clone, Copy)]
pub struct Namespace {
    /// Logical blocks in namespace 1.
    pub lbas: u64,
    /// Maximum logical blocks per command (MDTS).
    pub max_lbas: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoCommand {
    Flush,
    Read { slba: u64, nlb: u32, fua: bool },
    Write { slba: u64, nlb: u32, fua: bool },
    WriteZeroes { slba: u64, nlb: u32, deallocate: bool },
    /// Dataset Management with `ranges` range descriptors in the data buffer.
    Dsm { ranges: u32, deallocate: bool },
    /// A vendor-specific opcode, for the extension that claimed it.
    Vendor(u8),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminCommand {
    Identify { cns: u8, nsid: u32 },
    GetLogPage { lid: u8, dwords: u32, offset: u64 },
    CreateIoCq { qid: u16, size: u32 },
    /// `prio`: the QPRIO field (CDW11 bits 2:1), the class of the queue's commands' flash work.
    CreateIoSq { qid: u16, size: u32, cqid: u16, prio: Priority },
    DeleteIoSq { qid: u16 },
    DeleteIoCq { qid: u16 },
    Vendor(u8),
}

/// CDW12 bits a Read/Write may set: NLB (15:0), FUA (30), LR (31). DTYPE, DSPEC, PRINFO are unsupported.
const RW_CDW12_ALLOWED: u32 = 0xFFFF | (1 << 30) | (1 << 31);

/// Byte offsets of the submission entry's fields, as the Error Information log's Parameter Error Location names them.
pub mod field {
    pub const OPCODE: u8 = 0;
    pub const FLAGS: u8 = 1;
    pub const NSID: u8 = 4;
    pub const CDW10: u8 = 40;
    pub const CDW11: u8 = 44;
    pub const CDW12: u8 = 48;
    pub const CDW13: u8 = 52;
}

/// A refusal whose reason is made only when refused: out of line and cold, so that the decoders' common path
/// (every command) carries neither the formatting nor the registers it needs.
#[cold]
#[inline(never)]
fn refuse<T, R: Into<String>>(status: Status, byte: u8, reason: impl FnOnce() -> R) -> Result<T, Refusal> {
    Err(Refusal::new(status, Some(byte), reason()))
}

#[inline]
fn common_checks(sqe: &Sqe) -> Result<(), Refusal> {
    if sqe.flags & 0x3 != 0 {
        return refuse(Status::INVALID_FIELD, field::FLAGS, || format!("FUSE = {}: fused operations are not supported", sqe.flags & 0x3));
    }
    if sqe.flags >> 6 != 0 {
        return refuse(Status::INVALID_FIELD, field::FLAGS, || format!("PSDT = {}: only PRPs are supported, no SGLs", sqe.flags >> 6));
    }
    Ok(())
}

#[inline]
fn check_range(ns: &Namespace, slba: u64, nlb: u32, byte: u8) -> Result<(), Refusal> {
    match slba.checked_add(u64::from(nlb)) {
        Some(end) if end <= ns.lbas => Ok(()),
        _ => refuse(Status::LBA_OUT_OF_RANGE, byte, || format!("LBAs {slba} + {nlb}: the namespace has {} LBAs", ns.lbas)),
    }
}

/// Decodes an I/O command; a refusal says which field is wrong and why. Inlined: its refusals are cold calls, and
/// the call's saved registers and result through memory were a third of its cost per command.
#[inline]
pub fn decode_io(sqe: &Sqe, ns: &Namespace) -> Result<IoCommand, Refusal> {
    common_checks(sqe)?;
    if sqe.opcode >= opcode::IO_VENDOR_FIRST {
        return Ok(IoCommand::Vendor(sqe.opcode));
    }
    let ns_ok = sqe.nsid == 1 || (sqe.opcode == opcode::FLUSH && sqe.nsid == 0xFFFF_FFFF);
    if !ns_ok {
        let status = if sqe.nsid == 0 || sqe.nsid == 0xFFFF_FFFF { Status::INVALID_FIELD } else { Status::INVALID_NAMESPACE };
        return refuse(status, field::NSID, || format!("NSID = {:#x}: the device has namespace 1 only (0xFFFFFFFF: Flush only)", sqe.nsid));
    }
    match sqe.opcode {
        opcode::FLUSH => Ok(IoCommand::Flush),
        opcode::READ | opcode::WRITE => {
            let unsupported = sqe.cdw12 & !RW_CDW12_ALLOWED;
            if unsupported != 0 {
                return refuse(Status::INVALID_FIELD, field::CDW12, || format!("CDW12 bits {unsupported:#010x} set: only NLB, FUA and LR are supported"));
            }
            let (slba, nlb) = (sqe.slba(), sqe.nlb());
            if nlb > ns.max_lbas {
                return refuse(Status::INVALID_FIELD, field::CDW12, || format!("{nlb} LBAs: more than the {} a command may transfer (MDTS)", ns.max_lbas));
            }
            check_range(ns, slba, nlb, field::CDW10)?;
            let fua = sqe.cdw12 & (1 << 30) != 0;
            Ok(if sqe.opcode == opcode::READ {
                IoCommand::Read { slba, nlb, fua }
            } else {
                IoCommand::Write { slba, nlb, fua }
            })
        }
        opcode::WRITE_ZEROES => {
            let (slba, nlb) = (sqe.slba(), sqe.nlb());
            check_range(ns, slba, nlb, field::CDW10)?;
            Ok(IoCommand::WriteZeroes { slba, nlb, deallocate: sqe.cdw12 & (1 << 25) != 0 })
        }
        opcode::DSM => {
            let ranges = (sqe.cdw10 & 0xFF) + 1;
            if sqe.cdw10 >> 8 != 0 {
                return refuse(Status::INVALID_FIELD, field::CDW10, || format!("CDW10 = {:#x}: bits 31:8 are reserved (NR is bits 7:0)", sqe.cdw10));
            }
            Ok(IoCommand::Dsm { ranges, deallocate: sqe.cdw11 & (1 << 2) != 0 })
        }
        op => refuse(Status::INVALID_OPCODE, field::OPCODE, || format!("I/O opcode {op:#04x} is not supported")),
    }
}

/// Parses the Dataset Management range descriptors (16 bytes each: attributes, length, starting LBA).
pub fn parse_dsm_ranges(data: &[u8], ranges: u32, ns: &Namespace) -> Result<Vec<(u64, u32)>, Refusal> {
    let need = ranges as usize * 16;
    if data.len() < need {
        let why = format!("{ranges} ranges need {need} bytes of range descriptors; the data buffer holds {}", data.len());
        return Err(Refusal::new(Status::DATA_TRANSFER_ERROR, None, why));
    }
    data[..need]
        .chunks_exact(16)
        .enumerate()
        .map(|(i, c)| {
            let len = u32::from_le_bytes(c[4..8].try_into().expect("4 bytes"));
            let slba = u64::from_le_bytes(c[8..16].try_into().expect("8 bytes"));
            check_range(ns, slba, len, field::CDW10).map_err(|r| Refusal::new(r.status, None, format!("range {i}: {}", r.detail.reason)))?;
            Ok((slba, len))
        })
        .collect()
}

/// Encodes range descriptors (host side helper).
pub fn encode_dsm_ranges(ranges: &[(u64, u32)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(ranges.len() * 16);
    for &(slba, len) in ranges {
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&slba.to_le_bytes());
    }
    out
}

/// Decodes an admin command; a refusal says which field is wrong and why.
pub fn decode_admin(sqe: &Sqe) -> Result<AdminCommand, Refusal> {
    common_checks(sqe)?;
    if sqe.opcode >= opcode::ADMIN_VENDOR_FIRST {
        return Ok(AdminCommand::Vendor(sqe.opcode));
    }
    let qid = (sqe.cdw10 & 0xFFFF) as u16;
    let size = (sqe.cdw10 >> 16) + 1;
    match sqe.opcode {
        opcode::ADMIN_IDENTIFY => Ok(AdminCommand::Identify { cns: (sqe.cdw10 & 0xFF) as u8, nsid: sqe.nsid }),
        opcode::ADMIN_GET_LOG_PAGE => {
            let numdl = sqe.cdw10 >> 16;
            let numdu = sqe.cdw11 & 0xFFFF;
            // NUMD is 32 bits wide, so NUMD + 1 overflows only at 0xFFFFFFFF
            let Some(dwords) = ((numdu << 16) | numdl).checked_add(1) else {
                return refuse(Status::INVALID_FIELD, field::CDW11, || "NUMD = 0xFFFFFFFF: the transfer length does not fit");
            };
            let offset = u64::from(sqe.cdw12) | (u64::from(sqe.cdw13) << 32);
            if offset % 4 != 0 {
                return refuse(Status::INVALID_FIELD, field::CDW12, || format!("log page offset {offset}: must be a multiple of 4 bytes"));
            }
            Ok(AdminCommand::GetLogPage { lid: (sqe.cdw10 & 0xFF) as u8, dwords, offset })
        }
        opcode::ADMIN_CREATE_CQ | opcode::ADMIN_CREATE_SQ if sqe.cdw11 & 1 == 0 => {
            refuse(Status::INVALID_FIELD, field::CDW11, || "PC = 0: only physically contiguous queues are supported")
        }
        opcode::ADMIN_CREATE_CQ => Ok(AdminCommand::CreateIoCq { qid, size }),
        opcode::ADMIN_CREATE_SQ => {
            Ok(AdminCommand::CreateIoSq { qid, size, cqid: (sqe.cdw11 >> 16) as u16, prio: Priority::from_qprio(sqe.cdw11 >> 1) })
        }
        opcode::ADMIN_DELETE_SQ => Ok(AdminCommand::DeleteIoSq { qid }),
        opcode::ADMIN_DELETE_CQ => Ok(AdminCommand::DeleteIoCq { qid }),
        op => refuse(Status::INVALID_OPCODE, field::OPCODE, || format!("admin opcode {op:#04x} is not supported")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NS: Namespace = Namespace { lbas: 1000, max_lbas: 64 };

    fn status<T>(r: Result<T, Refusal>) -> Result<T, Status> {
        r.map_err(|e| e.status)
    }

    #[test]
    fn read_write_validation() {
        assert_eq!(decode_io(&Sqe::rw(opcode::READ, 1, 10, 8), &NS), Ok(IoCommand::Read { slba: 10, nlb: 8, fua: false }));
        assert_eq!(status(decode_io(&Sqe::rw(opcode::WRITE, 1, 996, 8), &NS)), Err(Status::LBA_OUT_OF_RANGE));
        assert_eq!(status(decode_io(&Sqe::rw(opcode::READ, 1, u64::MAX, 8), &NS)), Err(Status::LBA_OUT_OF_RANGE));
        assert_eq!(status(decode_io(&Sqe::rw(opcode::READ, 1, 0, 65), &NS)), Err(Status::INVALID_FIELD));
        let mut s = Sqe::rw(opcode::READ, 1, 0, 1);
        s.cdw12 |= 1 << 20; // DTYPE
        assert_eq!(status(decode_io(&s, &NS)), Err(Status::INVALID_FIELD));
        s = Sqe::rw(opcode::READ, 1, 0, 1);
        s.nsid = 2;
        assert_eq!(status(decode_io(&s, &NS)), Err(Status::INVALID_NAMESPACE));
        s.nsid = 1;
        s.flags = 1; // fused
        assert_eq!(status(decode_io(&s, &NS)), Err(Status::INVALID_FIELD));
        s = Sqe { opcode: 0x7F, nsid: 1, ..Sqe::default() };
        assert_eq!(status(decode_io(&s, &NS)), Err(Status::INVALID_OPCODE));
        s.opcode = 0x90;
        assert_eq!(decode_io(&s, &NS), Ok(IoCommand::Vendor(0x90)));
    }

    #[test]
    fn dsm_ranges() {
        let d = encode_dsm_ranges(&[(5, 10), (100, 1)]);
        assert_eq!(parse_dsm_ranges(&d, 2, &NS), Ok(vec![(5, 10), (100, 1)]));
        assert_eq!(status(parse_dsm_ranges(&d, 3, &NS)), Err(Status::DATA_TRANSFER_ERROR));
        let bad = encode_dsm_ranges(&[(995, 10)]);
        assert_eq!(status(parse_dsm_ranges(&bad, 1, &NS)), Err(Status::LBA_OUT_OF_RANGE));
    }

    proptest! {
        /// Arbitrary bytes decode to a command or a refusal with its reason, never a panic; decoded ranges are in
        /// bounds.
        #[test]
        fn arbitrary_entries_never_panic(bytes in prop::collection::vec(any::<u8>(), 64..=64), data in prop::collection::vec(any::<u8>(), 0..512)) {
            let sqe = Sqe::from_bytes(bytes.as_slice().try_into().unwrap());
            match decode_io(&sqe, &NS) {
                Ok(IoCommand::Read { slba, nlb, .. } | IoCommand::Write { slba, nlb, .. }) => {
                    prop_assert!(slba + u64::from(nlb) <= NS.lbas && nlb <= NS.max_lbas);
                }
                Ok(IoCommand::Dsm { ranges, .. }) => {
                    if let Ok(r) = parse_dsm_ranges(&data, ranges, &NS) {
                        prop_assert!(r.iter().all(|&(s, n)| s + u64::from(n) <= NS.lbas));
                    }
                }
                Err(r) => prop_assert!(!r.detail.reason.is_empty(), "a refusal without a reason: {r:?}"),
                _ => {}
            }
            if let Err(r) = decode_admin(&sqe) {
                prop_assert!(!r.detail.reason.is_empty(), "a refusal without a reason: {r:?}");
            }
        }
    }
}
