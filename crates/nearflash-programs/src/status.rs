//! Status codes of the Computational Programs (CP) and Subsystem Local Memory (SLM) command sets.
//!
//! All are command-specific (Status Code Type 1h). Their values follow the draft list an NVMe CSD implementation
//! published with the command sets (docs/programs.md "Sources"): the ratified specifications' tables were not
//! readable where this was written, so the values are a documented choice, kept in this one table.

use nearflash_core::nvme::Status;

const fn cs(sc: u8) -> Status {
    Status { sct: 1, sc }
}

pub const INSUFFICIENT_RESOURCES: Status = cs(0x8A);
pub const INVALID_MEMORY_NAMESPACE: Status = cs(0x8B);
pub const INVALID_MEMORY_RANGE_SET: Status = cs(0x8C);
pub const INVALID_MEMORY_RANGE_SET_ID: Status = cs(0x8D);
pub const INVALID_PROGRAM_DATA: Status = cs(0x8E);
pub const INVALID_PROGRAM_INDEX: Status = cs(0x8F);
pub const INVALID_PROGRAM_TYPE: Status = cs(0x90);
pub const MAX_MEMORY_RANGES_EXCEEDED: Status = cs(0x91);
pub const MAX_MEMORY_RANGE_SETS_EXCEEDED: Status = cs(0x92);
pub const MAX_PROGRAMS_ACTIVATED: Status = cs(0x93);
pub const MAX_PROGRAM_BYTES_EXCEEDED: Status = cs(0x94);
pub const MEMORY_RANGE_SET_IN_USE: Status = cs(0x95);
pub const NO_PROGRAM: Status = cs(0x96);
pub const OVERLAPPING_MEMORY_RANGES: Status = cs(0x97);
pub const PROGRAM_NOT_ACTIVATED: Status = cs(0x98);
pub const PROGRAM_IN_USE: Status = cs(0x99);
pub const PROGRAM_INDEX_NOT_DOWNLOADABLE: Status = cs(0x9A);
pub const PROGRAM_TOO_BIG: Status = cs(0x9B);

/// (status, name) of every code above, for reports and the Python error names.
pub const NAMES: &[(Status, &str)] = &[
    (INSUFFICIENT_RESOURCES, "Insufficient Resources"),
    (INVALID_MEMORY_NAMESPACE, "Invalid Memory Namespace"),
    (INVALID_MEMORY_RANGE_SET, "Invalid Memory Range Set"),
    (INVALID_MEMORY_RANGE_SET_ID, "Invalid Memory Range Set Identifier"),
    (INVALID_PROGRAM_DATA, "Invalid Program Data"),
    (INVALID_PROGRAM_INDEX, "Invalid Program Index"),
    (INVALID_PROGRAM_TYPE, "Invalid Program Type"),
    (MAX_MEMORY_RANGES_EXCEEDED, "Maximum Memory Ranges Exceeded"),
    (MAX_MEMORY_RANGE_SETS_EXCEEDED, "Maximum Memory Range Sets Exceeded"),
    (MAX_PROGRAMS_ACTIVATED, "Maximum Programs Activated"),
    (MAX_PROGRAM_BYTES_EXCEEDED, "Maximum Program Bytes Exceeded"),
    (MEMORY_RANGE_SET_IN_USE, "Memory Range Set In Use"),
    (NO_PROGRAM, "No Program"),
    (OVERLAPPING_MEMORY_RANGES, "Overlapping Memory Ranges"),
    (PROGRAM_NOT_ACTIVATED, "Program Not Activated"),
    (PROGRAM_IN_USE, "Program In Use"),
    (PROGRAM_INDEX_NOT_DOWNLOADABLE, "Program Index Not Downloadable"),
    (PROGRAM_TOO_BIG, "Program Too Big"),
];

/// Why a command is refused: its status, the byte of the command holding the offending field (e.g. 40 for CDW10;
/// `None` for a field of the data buffer) and the reason in words, naming the field and what it may hold. The
/// firmware puts it into the device's error log (`ExecCtx::explain`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: Status,
    pub byte: Option<u8>,
    pub why: String,
}

impl Refusal {
    pub fn new(status: Status, byte: Option<u8>, why: impl Into<String>) -> Refusal {
        Refusal { status, byte, why: why.into() }
    }

    /// Invalid Field in Command for the field at command byte `byte`.
    pub fn field(byte: u8, why: impl Into<String>) -> Refusal {
        Refusal::new(Status::INVALID_FIELD, Some(byte), why)
    }
}

/// The name of a CP/SLM status, or the core's name for a generic one.
pub fn name(s: Status) -> &'static str {
    NAMES.iter().find(|(c, _)| *c == s).map(|(_, n)| *n).unwrap_or_else(|| s.name())
}
