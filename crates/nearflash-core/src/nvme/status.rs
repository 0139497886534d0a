//! NVMe completion status codes (status code type + status code), as the specification numbers them.

/// A completion status: status code type (SCT) and status code (SC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Status {
    pub sct: u8,
    pub sc: u8,
}

impl Status {
    pub const SUCCESS: Status = Status { sct: 0, sc: 0x00 };
    pub const INVALID_OPCODE: Status = Status { sct: 0, sc: 0x01 };
    pub const INVALID_FIELD: Status = Status { sct: 0, sc: 0x02 };
    pub const COMMAND_ID_CONFLICT: Status = Status { sct: 0, sc: 0x03 };
    pub const DATA_TRANSFER_ERROR: Status = Status { sct: 0, sc: 0x04 };
    pub const INTERNAL_ERROR: Status = Status { sct: 0, sc: 0x06 };
    pub const INVALID_NAMESPACE: Status = Status { sct: 0, sc: 0x0B };
    pub const SEQUENCE_ERROR: Status = Status { sct: 0, sc: 0x0C };
    pub const LBA_OUT_OF_RANGE: Status = Status { sct: 0, sc: 0x80 };
    pub const CAPACITY_EXCEEDED: Status = Status { sct: 0, sc: 0x81 };
    pub const INVALID_QUEUE_ID: Status = Status { sct: 1, sc: 0x01 };
    pub const INVALID_QUEUE_SIZE: Status = Status { sct: 1, sc: 0x02 };
    pub const INVALID_LOG_PAGE: Status = Status { sct: 1, sc: 0x09 };
    pub const WRITE_FAULT: Status = Status { sct: 2, sc: 0x80 };
    pub const UNRECOVERED_READ_ERROR: Status = Status { sct: 2, sc: 0x81 };

    pub fn is_success(self) -> bool {
        self == Status::SUCCESS
    }

    /// The 15-bit status field of a CQE (without the phase bit); DNR set for errors retrying cannot fix.
    pub fn field(self) -> u16 {
        let dnr = u16::from(!self.is_success() && self != Status::UNRECOVERED_READ_ERROR);
        u16::from(self.sc) | (u16::from(self.sct & 0x7) << 8) | (dnr << 14)
    }

    pub fn from_field(f: u16) -> Status {
        Status { sc: (f & 0xFF) as u8, sct: ((f >> 8) & 0x7) as u8 }
    }

    pub fn name(self) -> &'static str {
        match self {
            Status::SUCCESS => "Successful Completion",
            Status::INVALID_OPCODE => "Invalid Command Opcode",
            Status::INVALID_FIELD => "Invalid Field in Command",
            Status::COMMAND_ID_CONFLICT => "Command ID Conflict",
            Status::DATA_TRANSFER_ERROR => "Data Transfer Error",
            Status::INTERNAL_ERROR => "Internal Error",
            Status::INVALID_NAMESPACE => "Invalid Namespace or Format",
            Status::SEQUENCE_ERROR => "Command Sequence Error",
            Status::LBA_OUT_OF_RANGE => "LBA Out of Range",
            Status::CAPACITY_EXCEEDED => "Capacity Exceeded",
            Status::INVALID_QUEUE_ID => "Invalid Queue Identifier",
            Status::INVALID_QUEUE_SIZE => "Invalid Queue Size",
            Status::INVALID_LOG_PAGE => "Invalid Log Page",
            Status::WRITE_FAULT => "Write Fault",
            Status::UNRECOVERED_READ_ERROR => "Unrecovered Read Error",
            _ => "Vendor/Other Status",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (SCT {:#x}, SC {:#04x})", self.name(), self.sct, self.sc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_field_round_trips() {
        for s in [Status::SUCCESS, Status::LBA_OUT_OF_RANGE, Status::UNRECOVERED_READ_ERROR, Status::INVALID_LOG_PAGE] {
            assert_eq!(Status::from_field(s.field()), s);
        }
        assert_eq!(Status::INVALID_OPCODE.field() & (1 << 14), 1 << 14, "DNR set");
        assert!(Status::LBA_OUT_OF_RANGE.to_string().contains("0x80"));
    }
}
