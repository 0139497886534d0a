//! The NVMe side of an NDP SLS request (paper §4.3): a Write and a Read with one reserved bit set, and the
//! completion statuses the firmware answers with.
//!
//! * The **flag** is CDW12 bit 16: the first bit of the `reserved0` field of the artifact's
//!   `IO_READ_COMMAND_DW12` (`NLB:16, reserved0:10, PRINFO:4, FUA:1, LR:1`), which `handle_nvme_io_read/write`
//!   test to route a command to the SLS engine. Standard decoding rejects the bit, so an SSD without RecSSD fails
//!   such commands with Invalid Field instead of misreading them.
//! * **Faults** ([`NdpFault`]) complete with a standard status (Invalid Field, Command Sequence Error, Data
//!   Transfer Error, LBA Out of Range) and the fault's code in CQE dword 0, so a host can tell them apart.

use nearflash_core::nvme::{opcode, Sqe, Status};

/// CDW12 bit marking an NDP command [artifact `IO_READ_COMMAND_DW12.reserved0`].
pub const NDP_FLAG_BIT: u32 = 16;

/// The config Write of a request: `nlb` blocks of payload at `slba` (table start + request id).
pub fn config_sqe(cid: u16, slba: u64, nlb: u32) -> Sqe {
    let mut s = Sqe::rw(opcode::WRITE, cid, slba, nlb);
    s.cdw12 |= 1 << NDP_FLAG_BIT;
    s
}

/// The result Read of a request: `nlb` result sectors.
pub fn result_sqe(cid: u16, slba: u64, nlb: u32) -> Sqe {
    let mut s = Sqe::rw(opcode::READ, cid, slba, nlb);
    s.cdw12 |= 1 << NDP_FLAG_BIT;
    s
}

/// Whether `sqe` is an NDP config or result command.
pub fn is_ndp(sqe: &Sqe) -> bool {
    (sqe.opcode == opcode::READ || sqe.opcode == opcode::WRITE) && sqe.cdw12 & (1 << NDP_FLAG_BIT) != 0
}

/// Why the firmware refused an NDP or table-registration command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum NdpFault {
    /// The config payload is shorter than its header or its pairs.
    ConfigTruncated = 1,
    /// attributeSize is not 4 (fp32), 2 (fp16) or 1 (int8).
    UnsupportedAttribute = 2,
    /// embeddingLength does not match the table, or is zero.
    DimensionMismatch = 3,
    /// resultEmbeddings is zero.
    NoResults = 4,
    /// The config exceeds the config buffer.
    ConfigTooLarge = 5,
    /// The results exceed the result scratchpad.
    ResultTooLarge = 6,
    /// Pairs are not sorted by input id.
    UnsortedPairs = 7,
    /// An input id is not a row of the table.
    InputBeyondTable = 8,
    /// A result id is not below resultEmbeddings.
    ResultBeyondRange = 9,
    /// No table starts at the command's table LBA.
    NoSuchTable = 10,
    /// A result read arrived with no configured request for its (table, request id).
    NoConfig = 11,
    /// A config arrived for a (table, request id) that is still in flight.
    DuplicateRequest = 12,
    /// Every pending-request entry holds a request whose results were not read yet.
    BufferFull = 13,
    /// The data buffer is missing or shorter than the command's blocks.
    DataBuffer = 14,
    /// The result read asks for more sectors than the request has left.
    TooManySectors = 15,
    /// A table descriptor is malformed or overlaps another table.
    BadTable = 16,
    /// The command has fields the firmware does not accept (NLB above MDTS, namespace, fused/SGL).
    BadCommand = 17,
    /// A flash page of the request could not be read.
    MediaError = 18,
}

impl NdpFault {
    /// The NVMe status the command completes with.
    pub fn status(self) -> Status {
        match self {
            NdpFault::NoConfig | NdpFault::DuplicateRequest | NdpFault::BufferFull => Status::SEQUENCE_ERROR,
            NdpFault::DataBuffer => Status::DATA_TRANSFER_ERROR,
            NdpFault::NoSuchTable => Status::LBA_OUT_OF_RANGE,
            NdpFault::MediaError => Status::UNRECOVERED_READ_ERROR,
            _ => Status::INVALID_FIELD,
        }
    }

    /// The code carried in CQE dword 0.
    pub fn code(self) -> u32 {
        self as u32
    }

    /// The fault of a dword-0 code, if it is one.
    pub fn from_code(code: u32) -> Option<Self> {
        ALL.iter().copied().find(|f| f.code() == code)
    }

    /// What went wrong, for error messages.
    pub fn describe(self) -> &'static str {
        match self {
            NdpFault::ConfigTruncated => "config payload truncated",
            NdpFault::UnsupportedAttribute => "attribute size is not 4 (fp32), 2 (fp16) or 1 (int8)",
            NdpFault::DimensionMismatch => "embedding length does not match the table",
            NdpFault::NoResults => "config has no result embeddings",
            NdpFault::ConfigTooLarge => "config exceeds the 1 MiB config buffer",
            NdpFault::ResultTooLarge => "results exceed the 256-sector result scratchpad",
            NdpFault::UnsortedPairs => "pairs are not sorted by input id",
            NdpFault::InputBeyondTable => "an input id is outside the table",
            NdpFault::ResultBeyondRange => "a result id is not below resultEmbeddings",
            NdpFault::NoSuchTable => "no registered table starts at the command's table LBA",
            NdpFault::NoConfig => "result read without a configured request (send the config first)",
            NdpFault::DuplicateRequest => "a request with this table and request id is already in flight",
            NdpFault::BufferFull => "all pending-request entries hold unread results (read results first)",
            NdpFault::DataBuffer => "data buffer missing or shorter than the command's blocks",
            NdpFault::TooManySectors => "result read asks for more sectors than remain",
            NdpFault::BadTable => "table descriptor malformed or overlapping another table",
            NdpFault::BadCommand => "command fields not accepted (NLB above MDTS, namespace, fused or SGL)",
            NdpFault::MediaError => "a flash page of the request could not be read",
        }
    }
}

const ALL: [NdpFault; 18] = [
    NdpFault::ConfigTruncated,
    NdpFault::UnsupportedAttribute,
    NdpFault::DimensionMismatch,
    NdpFault::NoResults,
    NdpFault::ConfigTooLarge,
    NdpFault::ResultTooLarge,
    NdpFault::UnsortedPairs,
    NdpFault::InputBeyondTable,
    NdpFault::ResultBeyondRange,
    NdpFault::NoSuchTable,
    NdpFault::NoConfig,
    NdpFault::DuplicateRequest,
    NdpFault::BufferFull,
    NdpFault::DataBuffer,
    NdpFault::TooManySectors,
    NdpFault::BadTable,
    NdpFault::BadCommand,
    NdpFault::MediaError,
];

impl From<&crate::ndp_wire::WireError> for NdpFault {
    fn from(e: &crate::ndp_wire::WireError) -> Self {
        use crate::ndp_wire::WireError as W;
        match e {
            W::Truncated { .. } => NdpFault::ConfigTruncated,
            W::UnsupportedAttributeSize(_) => NdpFault::UnsupportedAttribute,
            W::ZeroEmbeddingLength => NdpFault::DimensionMismatch,
            W::NoResults => NdpFault::NoResults,
            W::ConfigTooLarge { .. } | W::TooManyPairs(_) => NdpFault::ConfigTooLarge,
            W::ResultTooLarge { .. } => NdpFault::ResultTooLarge,
            W::UnsortedPairs { .. } => NdpFault::UnsortedPairs,
            W::InputBeyondTable { .. } => NdpFault::InputBeyondTable,
            W::ResultBeyondRange { .. } => NdpFault::ResultBeyondRange,
            _ => NdpFault::BadCommand,
        }
    }
}

impl std::fmt::Display for NdpFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}, code {})", self.describe(), self.status(), self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_and_builders() {
        let c = config_sqe(3, 5007, 2);
        let r = result_sqe(4, 5007, 1);
        assert!(is_ndp(&c) && is_ndp(&r));
        assert_eq!((c.opcode, c.slba(), c.nlb()), (opcode::WRITE, 5007, 2));
        assert_eq!((r.opcode, r.slba(), r.nlb()), (opcode::READ, 5007, 1));
        assert!(!is_ndp(&Sqe::rw(opcode::READ, 1, 0, 1)));
        let mut flush = Sqe { opcode: opcode::FLUSH, ..Sqe::default() };
        flush.cdw12 = 1 << NDP_FLAG_BIT;
        assert!(!is_ndp(&flush));
        // Standard decoding rejects the flag: an SSD without the extension fails the command cleanly.
        let ns = nearflash_core::nvme::Namespace { lbas: 1 << 20, max_lbas: 256 };
        assert_eq!(nearflash_core::nvme::decode_io(&c, &ns).map_err(|r| r.status), Err(Status::INVALID_FIELD));
    }

    #[test]
    fn codes_round_trip_and_map_to_statuses() {
        for f in ALL {
            assert_eq!(NdpFault::from_code(f.code()), Some(f));
            assert!(!f.status().is_success());
        }
        assert_eq!(NdpFault::from_code(0), None);
        assert_eq!(NdpFault::NoConfig.status(), Status::SEQUENCE_ERROR);
        assert_eq!(NdpFault::UnsortedPairs.status(), Status::INVALID_FIELD);
        assert!(NdpFault::BufferFull.to_string().contains("read results first"));
    }
}
