//! The commands' 64-byte submission entries: typed commands, decoded with every field checked (reserved bits
//! included) and encoded by the host library. Field layouts are in docs/programs.md, one table per command.
//!
//! The CP admin commands (Load Program 85h, Program Activation Management 88h, Memory Range Set Management 89h)
//! keep their admin opcode values but travel on an I/O queue: nearflash's extension interface carries vendor I/O
//! opcodes (80h-FFh), and those values fall in that range. The CP and SLM I/O commands (Execute Program, Memory
//! Copy, Memory Read, Memory Write), whose command sets number opcodes on their own namespaces, are carried on the
//! vendor I/O opcodes below because the emulated controller has one I/O command set.

use crate::status::Refusal;
use nearflash_core::nvme::{Sqe, Status};

/// Opcodes this extension claims.
pub mod opcode {
    pub const LOAD_PROGRAM: u8 = 0x85;
    pub const PROGRAM_ACTIVATION: u8 = 0x88;
    pub const MEMORY_RANGE_SET_MANAGEMENT: u8 = 0x89;
    pub const EXECUTE_PROGRAM: u8 = 0x90;
    pub const MEMORY_COPY: u8 = 0x91;
    pub const MEMORY_READ: u8 = 0x92;
    pub const MEMORY_WRITE: u8 = 0x93;
    pub const IDENTIFY_RESOURCES: u8 = 0x94;
    pub const ALL: [u8; 8] = [
        LOAD_PROGRAM,
        PROGRAM_ACTIVATION,
        MEMORY_RANGE_SET_MANAGEMENT,
        EXECUTE_PROGRAM,
        MEMORY_COPY,
        MEMORY_READ,
        MEMORY_WRITE,
        IDENTIFY_RESOURCES,
    ];
}

/// Namespace identifiers: the NVM namespace holding the data, the SLM namespace, the compute namespace.
pub mod nsid {
    pub const NVM: u32 = 1;
    pub const SLM: u32 = 2;
    pub const COMPUTE: u32 = 3;
}

/// Program Type values accepted by Load Program.
pub const PTYPE_EBPF_ELF: u8 = 1;

/// Bytes of a memory range descriptor and of a Memory Copy source range.
pub const RANGE_DESCRIPTOR_BYTES: usize = 32;

/// The first `count` 32-byte descriptors of `data`, numbered; too little data (or a count whose bytes overflow) is
/// refused with Invalid Field, naming `what` the descriptors are.
pub(crate) fn descriptors<'a>(data: &'a [u8], count: usize, what: &str) -> Result<impl Iterator<Item = (usize, &'a [u8])>, Refusal> {
    let short = || Refusal::new(Status::INVALID_FIELD, None, format!("{count} {what} need {count} x {RANGE_DESCRIPTOR_BYTES} bytes of data, got {}", data.len()));
    let need = count.checked_mul(RANGE_DESCRIPTOR_BYTES).ok_or_else(short)?;
    if data.len() < need {
        return Err(short());
    }
    Ok(data[..need].chunks_exact(RANGE_DESCRIPTOR_BYTES).enumerate())
}

/// Load Program (chunked download or unload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadProgram {
    pub pind: u16,
    pub ptype: u8,
    /// true: unload the program at `pind`.
    pub unload: bool,
    /// Program Identifier Type (0: none; 1: `pid` names the program).
    pub pit: u8,
    /// Total program size in bytes.
    pub psize: u32,
    pub pid: u64,
    /// Bytes carried by this command.
    pub numb: u32,
    /// Offset of this command's bytes in the program.
    pub loff: u32,
}

/// Program Activation Management.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgramActivation {
    pub pind: u16,
    pub activate: bool,
}

/// Memory Range Set Management.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeSetManagement {
    /// Create a set from `numr` descriptors in the data buffer; completes with the new RSID in DW0.
    Create { numr: u8 },
    Delete { rsid: u16 },
}

/// Execute Program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecuteProgram {
    pub pind: u16,
    /// Stored memory range set (0: none).
    pub rsid: u16,
    /// Inline memory range descriptors at the start of the data buffer (only when `rsid` is 0).
    pub numr: u32,
    /// Bytes of the data buffer (inline descriptors, then parameter data).
    pub dlen: u32,
    pub cparam1: u64,
    pub cparam2: u64,
}

/// Memory Copy: NVM logical blocks into SLM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryCopy {
    /// Destination starting byte in SLM.
    pub sdaddr: u64,
    /// Source ranges, 1-based count (the SQE holds it 0-based).
    pub ranges: u32,
}

/// Memory Read / Memory Write: bytes between host and SLM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryAccess {
    pub sb: u64,
    pub length: u32,
}

/// A decoded command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Load(LoadProgram),
    Activation(ProgramActivation),
    RangeSet(RangeSetManagement),
    Execute(ExecuteProgram),
    Copy(MemoryCopy),
    Read(MemoryAccess),
    Write(MemoryAccess),
    Identify,
}

/// Command bytes of the dwords, for the error log's parameter location.
const CDW2: u8 = 8;
const CDW3: u8 = 12;
const DPTR_HI: u8 = 20;
const CDW10: u8 = 40;
const CDW11: u8 = 44;
const CDW12: u8 = 48;
const CDW13: u8 = 52;
const CDW14: u8 = 56;
const CDW15: u8 = 60;

fn nsid_is(sqe: &Sqe, want: u32) -> Result<(), Refusal> {
    if sqe.nsid == want {
        return Ok(());
    }
    let name = match want {
        nsid::SLM => "SLM",
        nsid::COMPUTE => "compute",
        _ => "NVM",
    };
    Err(Refusal::new(Status::INVALID_NAMESPACE, Some(4), format!("NSID {}: expected {want} (the {name} namespace)", sqe.nsid)))
}

/// Data pointers and fused/SGL bits are the host library's business here: only PRP, non-fused commands.
fn plain(sqe: &Sqe) -> Result<(), Refusal> {
    if sqe.flags != 0 {
        return Err(Refusal::field(1, format!("flags (byte 1) = {:#04x}: expected 0 (PRP data, not fused)", sqe.flags)));
    }
    Ok(())
}

/// Reserved dwords, as (command byte, value): each must be 0.
fn zero(dwords: &[(u8, u32)]) -> Result<(), Refusal> {
    match dwords.iter().find(|&&(_, d)| d != 0) {
        Some(&(byte, d)) => Err(Refusal::field(byte, format!("{} = {d:#x}: reserved for this command, expected 0", dword_name(byte)))),
        None => Ok(()),
    }
}

fn dword_name(byte: u8) -> String {
    if byte == DPTR_HI {
        "data length's upper dword (bytes 20..24)".to_string()
    } else {
        format!("CDW{} (bytes {byte}..{})", byte / 4, byte + 4)
    }
}

impl Command {
    /// Decodes a claimed command; unknown opcodes are Invalid Opcode, bad fields their status.
    pub fn decode(sqe: &Sqe) -> Result<Command, Refusal> {
        use opcode::*;
        plain(sqe)?;
        match sqe.opcode {
            LOAD_PROGRAM => {
                nsid_is(sqe, nsid::COMPUTE)?;
                zero(&[(CDW2, sqe.cdw2), (CDW3, sqe.cdw3)])?;
                let d = sqe.cdw10;
                if d >> 28 != 0 {
                    return Err(Refusal::field(CDW10, format!("CDW10 bits 31:28 = {:#x}: reserved, expected 0", d >> 28)));
                }
                let pit = ((d >> 25) & 0x7) as u8;
                if pit > 1 {
                    return Err(Refusal::field(CDW10, format!("PIT (CDW10 bits 27:25) = {pit}: expected 0 (none) or 1 (PID names the program)")));
                }
                Ok(Command::Load(LoadProgram {
                    pind: (d & 0xFFFF) as u16,
                    ptype: ((d >> 16) & 0xFF) as u8,
                    unload: (d >> 24) & 1 == 1,
                    pit,
                    psize: sqe.cdw11,
                    pid: u64::from(sqe.cdw12) | (u64::from(sqe.cdw13) << 32),
                    numb: sqe.cdw14,
                    loff: sqe.cdw15,
                }))
            }
            PROGRAM_ACTIVATION => {
                nsid_is(sqe, nsid::COMPUTE)?;
                zero(&[(CDW2, sqe.cdw2), (CDW3, sqe.cdw3), (CDW11, sqe.cdw11), (CDW12, sqe.cdw12), (CDW13, sqe.cdw13), (CDW14, sqe.cdw14), (CDW15, sqe.cdw15)])?;
                let sel = (sqe.cdw10 >> 16) & 0xF;
                if sqe.cdw10 >> 20 != 0 {
                    return Err(Refusal::field(CDW10, format!("CDW10 bits 31:20 = {:#x}: reserved, expected 0", sqe.cdw10 >> 20)));
                }
                if sel > 1 {
                    return Err(Refusal::field(CDW10, format!("SEL (CDW10 bits 19:16) = {sel}: expected 0 (deactivate) or 1 (activate)")));
                }
                Ok(Command::Activation(ProgramActivation { pind: (sqe.cdw10 & 0xFFFF) as u16, activate: sel == 1 }))
            }
            MEMORY_RANGE_SET_MANAGEMENT => {
                nsid_is(sqe, nsid::COMPUTE)?;
                zero(&[(CDW2, sqe.cdw2), (CDW3, sqe.cdw3), (CDW12, sqe.cdw12), (CDW13, sqe.cdw13), (CDW14, sqe.cdw14), (CDW15, sqe.cdw15)])?;
                let sel = sqe.cdw10 & 0xF;
                let rsid = (sqe.cdw10 >> 16) as u16;
                if (sqe.cdw10 >> 4) & 0xFFF != 0 {
                    return Err(Refusal::field(CDW10, format!("CDW10 bits 15:4 = {:#x}: reserved, expected 0", (sqe.cdw10 >> 4) & 0xFFF)));
                }
                if sqe.cdw11 >> 8 != 0 {
                    return Err(Refusal::field(CDW11, format!("CDW11 bits 31:8 = {:#x}: reserved, expected 0 (NUMR is bits 7:0)", sqe.cdw11 >> 8)));
                }
                match sel {
                    0 if rsid == 0 => Ok(Command::RangeSet(RangeSetManagement::Create { numr: sqe.cdw11 as u8 })),
                    0 => Err(Refusal::field(CDW10, format!("RSID (CDW10 bits 31:16) = {rsid} on create: expected 0 (the device picks the identifier)"))),
                    1 if sqe.cdw11 == 0 => Ok(Command::RangeSet(RangeSetManagement::Delete { rsid })),
                    1 => Err(Refusal::field(CDW11, format!("NUMR (CDW11) = {} on delete: expected 0", sqe.cdw11))),
                    _ => Err(Refusal::field(CDW10, format!("SEL (CDW10 bits 3:0) = {sel}: expected 0 (create) or 1 (delete)"))),
                }
            }
            EXECUTE_PROGRAM => {
                nsid_is(sqe, nsid::COMPUTE)?;
                zero(&[(CDW14, sqe.cdw14), (CDW15, sqe.cdw15), (DPTR_HI, (sqe.mptr >> 32) as u32)])?;
                let e = ExecuteProgram {
                    pind: (sqe.cdw2 & 0xFFFF) as u16,
                    rsid: (sqe.cdw2 >> 16) as u16,
                    numr: sqe.cdw3,
                    dlen: sqe.mptr as u32,
                    cparam1: u64::from(sqe.cdw10) | (u64::from(sqe.cdw11) << 32),
                    cparam2: u64::from(sqe.cdw12) | (u64::from(sqe.cdw13) << 32),
                };
                if e.rsid != 0 && e.numr != 0 {
                    return Err(Refusal::field(CDW3, format!("NUMR (CDW3) = {} with RSID {}: inline ranges are given only without a stored range set (RSID 0)", e.numr, e.rsid)));
                }
                Ok(Command::Execute(e))
            }
            MEMORY_COPY => {
                nsid_is(sqe, nsid::SLM)?;
                zero(&[(CDW2, sqe.cdw2), (CDW3, sqe.cdw3), (CDW13, sqe.cdw13), (CDW14, sqe.cdw14), (CDW15, sqe.cdw15)])?;
                if sqe.cdw12 >> 8 != 0 {
                    return Err(Refusal::field(CDW12, format!("CDW12 bits 31:8 = {:#x}: reserved, expected 0 (NR is bits 7:0)", sqe.cdw12 >> 8)));
                }
                let sdaddr = u64::from(sqe.cdw10) | (u64::from(sqe.cdw11) << 32);
                Ok(Command::Copy(MemoryCopy { sdaddr, ranges: (sqe.cdw12 & 0xFF) + 1 }))
            }
            MEMORY_READ | MEMORY_WRITE => {
                nsid_is(sqe, nsid::SLM)?;
                zero(&[(CDW2, sqe.cdw2), (CDW3, sqe.cdw3), (CDW13, sqe.cdw13), (CDW14, sqe.cdw14), (CDW15, sqe.cdw15)])?;
                let a = MemoryAccess { sb: u64::from(sqe.cdw10) | (u64::from(sqe.cdw11) << 32), length: sqe.cdw12 };
                if a.length == 0 {
                    return Err(Refusal::field(CDW12, "length (CDW12) = 0: expected 1..=4294967295 bytes"));
                }
                Ok(if sqe.opcode == MEMORY_READ { Command::Read(a) } else { Command::Write(a) })
            }
            IDENTIFY_RESOURCES => {
                zero(&[(CDW2, sqe.cdw2), (CDW3, sqe.cdw3), (CDW10, sqe.cdw10), (CDW11, sqe.cdw11), (CDW12, sqe.cdw12), (CDW13, sqe.cdw13), (CDW14, sqe.cdw14), (CDW15, sqe.cdw15)])?;
                if sqe.nsid != 0 {
                    return Err(Refusal::new(Status::INVALID_NAMESPACE, Some(4), format!("NSID {}: expected 0 (Identify Resources names no namespace)", sqe.nsid)));
                }
                Ok(Command::Identify)
            }
            op => Err(Refusal::new(Status::INVALID_OPCODE, Some(0), format!("opcode {op:#04x} is not a Computational Programs or SLM command"))),
        }
    }

    /// The submission entry of this command (command identifier `cid`).
    pub fn encode(&self, cid: u16) -> Sqe {
        use opcode::*;
        let mut s = Sqe { cid, ..Sqe::default() };
        let lo = |v: u64| v as u32;
        let hi = |v: u64| (v >> 32) as u32;
        match *self {
            Command::Load(l) => {
                s.opcode = LOAD_PROGRAM;
                s.nsid = nsid::COMPUTE;
                s.cdw10 = u32::from(l.pind)
                    | (u32::from(l.ptype) << 16)
                    | (u32::from(l.unload) << 24)
                    | (u32::from(l.pit & 7) << 25);
                s.cdw11 = l.psize;
                (s.cdw12, s.cdw13) = (lo(l.pid), hi(l.pid));
                s.cdw14 = l.numb;
                s.cdw15 = l.loff;
            }
            Command::Activation(a) => {
                s.opcode = PROGRAM_ACTIVATION;
                s.nsid = nsid::COMPUTE;
                s.cdw10 = u32::from(a.pind) | (u32::from(a.activate) << 16);
            }
            Command::RangeSet(r) => {
                s.opcode = MEMORY_RANGE_SET_MANAGEMENT;
                s.nsid = nsid::COMPUTE;
                match r {
                    RangeSetManagement::Create { numr } => s.cdw11 = u32::from(numr),
                    RangeSetManagement::Delete { rsid } => s.cdw10 = 1 | (u32::from(rsid) << 16),
                }
            }
            Command::Execute(e) => {
                s.opcode = EXECUTE_PROGRAM;
                s.nsid = nsid::COMPUTE;
                s.cdw2 = u32::from(e.pind) | (u32::from(e.rsid) << 16);
                s.cdw3 = e.numr;
                s.mptr = u64::from(e.dlen);
                (s.cdw10, s.cdw11) = (lo(e.cparam1), hi(e.cparam1));
                (s.cdw12, s.cdw13) = (lo(e.cparam2), hi(e.cparam2));
            }
            Command::Copy(c) => {
                s.opcode = MEMORY_COPY;
                s.nsid = nsid::SLM;
                (s.cdw10, s.cdw11) = (lo(c.sdaddr), hi(c.sdaddr));
                s.cdw12 = c.ranges.saturating_sub(1) & 0xFF;
            }
            Command::Read(a) | Command::Write(a) => {
                s.opcode = if matches!(self, Command::Read(_)) { MEMORY_READ } else { MEMORY_WRITE };
                s.nsid = nsid::SLM;
                (s.cdw10, s.cdw11) = (lo(a.sb), hi(a.sb));
                s.cdw12 = a.length;
            }
            Command::Identify => s.opcode = IDENTIFY_RESOURCES,
        }
        s
    }
}

/// One Memory Copy source range: `nlb` blocks (1-based here, 0-based on the wire) from `slba` of namespace `nsid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceRange {
    pub nsid: u32,
    pub slba: u64,
    pub nlb: u32,
}

impl SourceRange {
    pub fn encode(&self) -> [u8; RANGE_DESCRIPTOR_BYTES] {
        let mut b = [0u8; RANGE_DESCRIPTOR_BYTES];
        b[0..4].copy_from_slice(&self.nsid.to_le_bytes());
        b[8..16].copy_from_slice(&self.slba.to_le_bytes());
        b[16..20].copy_from_slice(&self.nlb.saturating_sub(1).to_le_bytes());
        b
    }

    /// Parses `count` descriptors; reserved bytes must be zero.
    pub fn decode_all(data: &[u8], count: usize) -> Result<Vec<SourceRange>, Refusal> {
        descriptors(data, count, "source ranges")?
            .map(|(i, c)| {
                if c[4..8].iter().chain(&c[20..]).any(|&b| b != 0) {
                    return Err(Refusal::new(Status::INVALID_FIELD, None, format!("source range {i}: reserved bytes 4..8 and 20..32 must be 0")));
                }
                let nlb0 = u32::from_le_bytes(c[16..20].try_into().unwrap());
                Ok(SourceRange {
                    nsid: u32::from_le_bytes(c[0..4].try_into().unwrap()),
                    slba: u64::from_le_bytes(c[8..16].try_into().unwrap()),
                    nlb: nlb0.checked_add(1).ok_or_else(|| Refusal::new(Status::INVALID_FIELD, None, format!("source range {i}: NLB (0-based) = {nlb0:#x}: expected below 0xffffffff")))?,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all_examples() -> Vec<Command> {
        vec![
            Command::Load(LoadProgram { pind: 3, ptype: 1, unload: false, pit: 1, psize: 900, pid: 7 << 40, numb: 512, loff: 512 }),
            Command::Load(LoadProgram { pind: 3, ptype: 0, unload: true, pit: 0, psize: 0, pid: 0, numb: 0, loff: 0 }),
            Command::Activation(ProgramActivation { pind: 9, activate: true }),
            Command::RangeSet(RangeSetManagement::Create { numr: 4 }),
            Command::RangeSet(RangeSetManagement::Delete { rsid: 12 }),
            Command::Execute(ExecuteProgram { pind: 1, rsid: 2, numr: 0, dlen: 16, cparam1: u64::MAX, cparam2: 5 }),
            Command::Copy(MemoryCopy { sdaddr: 1 << 33, ranges: 256 }),
            Command::Read(MemoryAccess { sb: 4096, length: 100 }),
            Command::Write(MemoryAccess { sb: 0, length: 1 }),
            Command::Identify,
        ]
    }

    #[test]
    fn every_command_round_trips_through_its_bytes() {
        for c in all_examples() {
            let raw = c.encode(77).to_bytes();
            assert_eq!(Command::decode(&Sqe::from_bytes(&raw)), Ok(c), "{c:?}");
        }
    }

    #[test]
    fn reserved_bits_wrong_namespaces_and_conflicts_are_refused() {
        let mut s = Command::Activation(ProgramActivation { pind: 1, activate: true }).encode(1);
        s.cdw10 |= 2 << 16;
        assert_eq!(Command::decode(&s), Err(Refusal::field(40, "SEL (CDW10 bits 19:16) = 3: expected 0 (deactivate) or 1 (activate)")), "SEL 3");
        let mut s = Command::Read(MemoryAccess { sb: 0, length: 8 }).encode(1);
        s.nsid = nsid::NVM;
        assert_eq!(Command::decode(&s).map_err(|r| r.status), Err(Status::INVALID_NAMESPACE));
        let mut s = Command::Execute(ExecuteProgram { pind: 1, rsid: 1, numr: 0, dlen: 0, cparam1: 0, cparam2: 0 }).encode(1);
        s.cdw3 = 1;
        assert_eq!(Command::decode(&s).map_err(|r| r.status), Err(Status::INVALID_FIELD), "RSID and NUMR together");
        let mut s = Command::Identify.encode(1);
        s.cdw15 = 1;
        assert_eq!(Command::decode(&s).map_err(|r| r.status), Err(Status::INVALID_FIELD));
        let mut s = Command::Identify.encode(1);
        s.flags = 0x40;
        assert_eq!(Command::decode(&s).map_err(|r| r.status), Err(Status::INVALID_FIELD), "SGL");
        let mut s = Command::Write(MemoryAccess { sb: 0, length: 8 }).encode(1);
        s.cdw12 = 0;
        assert_eq!(Command::decode(&s).map_err(|r| r.status), Err(Status::INVALID_FIELD), "zero length");
        let mut s = Command::RangeSet(RangeSetManagement::Delete { rsid: 1 }).encode(1);
        s.cdw11 = 1;
        assert_eq!(Command::decode(&s).map_err(|r| r.status), Err(Status::INVALID_FIELD), "NUMR on delete");
    }

    #[test]
    fn source_ranges_round_trip_and_refuse_reserved_bytes() {
        let r = [SourceRange { nsid: 1, slba: 99, nlb: 8 }, SourceRange { nsid: 1, slba: 0, nlb: 1 }];
        let bytes: Vec<u8> = r.iter().flat_map(|x| x.encode()).collect();
        assert_eq!(SourceRange::decode_all(&bytes, 2).unwrap(), r);
        assert_eq!(SourceRange::decode_all(&bytes, 3).map_err(|r| r.status), Err(Status::INVALID_FIELD), "short buffer");
        let mut bad = bytes.clone();
        bad[25] = 1;
        assert!(SourceRange::decode_all(&bad, 1).unwrap_err().why.contains("reserved bytes"));
    }

    /// Too few bytes for the count, or a count whose bytes overflow, is Invalid Field naming the descriptors and
    /// both sizes; the count's descriptors come numbered from 0, whatever follows them ignored.
    #[test]
    fn descriptors_refuse_short_data_and_overflowing_counts_by_name() {
        let data = [7u8; 3 * RANGE_DESCRIPTOR_BYTES + 5];
        let got: Vec<(usize, &[u8])> = descriptors(&data, 2, "widgets").unwrap().collect();
        assert_eq!(got.iter().map(|(i, c)| (*i, c.len())).collect::<Vec<_>>(), [(0, 32), (1, 32)]);
        let short = descriptors(&data, 4, "widgets").err().unwrap();
        assert_eq!((short.status, short.why.as_str()), (Status::INVALID_FIELD, "4 widgets need 4 x 32 bytes of data, got 101"));
        let huge = descriptors(&data, usize::MAX, "widgets").err().unwrap();
        assert_eq!(huge.status, Status::INVALID_FIELD);
        assert!(huge.why.starts_with(&format!("{} widgets need", usize::MAX)), "{}", huge.why);
        assert_eq!(descriptors(&[], 0, "widgets").unwrap().count(), 0);
    }

    proptest! {
        #[test]
        fn decoding_any_entry_never_panics_and_reencodes_what_it_accepts(raw in proptest::collection::vec(any::<u8>(), 64)) {
            let mut raw: [u8; 64] = raw.try_into().unwrap();
            raw[0] = opcode::ALL[raw[0] as usize % 8];
            raw[1] = 0;
            let sqe = Sqe::from_bytes(&raw);
            if let Ok(c) = Command::decode(&sqe) {
                prop_assert_eq!(Command::decode(&c.encode(sqe.cid)), Ok(c));
            }
        }
    }
}
