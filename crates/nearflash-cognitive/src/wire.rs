//! The DLG library's NVMe vendor commands, exactly as the paper's Table 1: opcode, DW10 (address), DW11 (size in
//! bytes), DW12 (per command). Addresses are byte addresses in the device's data cache region for the task plane and
//! physical page numbers for `SSD_read`/`SSD_write`; the encoder refuses what the decoder would refuse.

use nearflash_core::nvme::{Sqe, Status};

pub const OP_HASHING: u8 = 0xC0;
pub const OP_INDEX: u8 = 0xC1;
pub const OP_ANALYSIS: u8 = 0xC2;
pub const OP_CONFIG: u8 = 0xC3;
pub const OP_SSD_READ: u8 = 0xC4;
pub const OP_SSD_WRITE: u8 = 0xC5;

/// What `DLG_config` updates (DW12).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigTarget {
    Instructions = 0,
    Model = 1,
}

/// One DLG library call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DlgCommand {
    /// 0xC3: update the instructions or the model from `size` bytes at `address`.
    Config { address: u32, size: u32, target: ConfigTarget },
    /// 0xC0: hash the input at `address` into a `bits`-bit code.
    Hashing { address: u32, size: u32, bits: u32 },
    /// 0xC1: top-`t` search with the session's hash code.
    Index { address: u32, size: u32, t: u32 },
    /// 0xC2: DNN analysis (classification); DW12 user-defined.
    Analysis { address: u32, size: u32, user: u32 },
    /// 0xC4: read `size` bytes from physical page `address`.
    SsdRead { address: u32, size: u32 },
    /// 0xC5: write `size` bytes to physical page `address`.
    SsdWrite { address: u32, size: u32 },
}

/// Why a command is refused, with its NVMe status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}")]
pub struct WireError {
    pub status: Status,
    pub what: String,
}

fn field(what: String) -> WireError {
    WireError { status: Status::INVALID_FIELD, what }
}

impl DlgCommand {
    pub fn opcode(&self) -> u8 {
        match self {
            DlgCommand::Hashing { .. } => OP_HASHING,
            DlgCommand::Index { .. } => OP_INDEX,
            DlgCommand::Analysis { .. } => OP_ANALYSIS,
            DlgCommand::Config { .. } => OP_CONFIG,
            DlgCommand::SsdRead { .. } => OP_SSD_READ,
            DlgCommand::SsdWrite { .. } => OP_SSD_WRITE,
        }
    }

    /// (DW10, DW11, DW12).
    pub fn dwords(&self) -> (u32, u32, u32) {
        match *self {
            DlgCommand::Config { address, size, target } => (address, size, target as u32),
            DlgCommand::Hashing { address, size, bits } => (address, size, bits),
            DlgCommand::Index { address, size, t } => (address, size, t),
            DlgCommand::Analysis { address, size, user } => (address, size, user),
            DlgCommand::SsdRead { address, size } | DlgCommand::SsdWrite { address, size } => (address, size, 0),
        }
    }

    /// Checks the fields the wire format constrains.
    pub fn validate(&self) -> Result<(), WireError> {
        let (_, size, _) = self.dwords();
        if size == 0 {
            return Err(field(format!("opcode {:#04x}: DW11 data size is 0", self.opcode())));
        }
        match self {
            DlgCommand::Hashing { bits, .. } if !(1..=64).contains(bits) => {
                Err(field(format!("DLG_hashing: DW12 hash code length {bits}; 1 to 64 bits allowed")))
            }
            DlgCommand::Index { t: 0, .. } => Err(field("DLG_index: DW12 T is 0".into())),
            _ => Ok(()),
        }
    }

    /// The submission entry (CDW13-15 zero).
    pub fn encode(&self, cid: u16, nsid: u32) -> Result<Sqe, WireError> {
        self.validate()?;
        let (cdw10, cdw11, cdw12) = self.dwords();
        Ok(Sqe { opcode: self.opcode(), cid, nsid, cdw10, cdw11, cdw12, ..Sqe::default() })
    }

    /// Parses a submission entry (untrusted bytes from the host).
    pub fn decode(sqe: &Sqe) -> Result<DlgCommand, WireError> {
        let (address, size, dw12) = (sqe.cdw10, sqe.cdw11, sqe.cdw12);
        if sqe.cdw13 != 0 || sqe.cdw14 != 0 || sqe.cdw15 != 0 {
            return Err(field(format!("opcode {:#04x}: CDW13-15 are reserved and must be 0", sqe.opcode)));
        }
        let cmd = match sqe.opcode {
            OP_HASHING => DlgCommand::Hashing { address, size, bits: dw12 },
            OP_INDEX => DlgCommand::Index { address, size, t: dw12 },
            OP_ANALYSIS => DlgCommand::Analysis { address, size, user: dw12 },
            OP_CONFIG => DlgCommand::Config {
                address,
                size,
                target: match dw12 {
                    0 => ConfigTarget::Instructions,
                    1 => ConfigTarget::Model,
                    other => return Err(field(format!("DLG_config: DW12 {other}; 0 (instructions) or 1 (model) allowed"))),
                },
            },
            OP_SSD_READ | OP_SSD_WRITE if dw12 != 0 => {
                return Err(field(format!("opcode {:#04x}: DW12 is reserved, got {dw12:#x}", sqe.opcode)))
            }
            OP_SSD_READ => DlgCommand::SsdRead { address, size },
            OP_SSD_WRITE => DlgCommand::SsdWrite { address, size },
            op => return Err(WireError { status: Status::INVALID_OPCODE, what: format!("opcode {op:#04x} is not a DLG command (0xC0-0xC5)") }),
        };
        cmd.validate()?;
        Ok(cmd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn table_1_opcodes_and_dwords() {
        let c = DlgCommand::Hashing { address: 0x1000, size: 784, bits: 48 };
        let s = c.encode(7, 1).unwrap();
        assert_eq!((s.opcode, s.cdw10, s.cdw11, s.cdw12), (0xC0, 0x1000, 784, 48));
        assert_eq!(DlgCommand::Index { address: 0, size: 8, t: 200 }.opcode(), 0xC1);
        assert_eq!(DlgCommand::Analysis { address: 0, size: 8, user: 0 }.opcode(), 0xC2);
        assert_eq!(DlgCommand::Config { address: 0, size: 8, target: ConfigTarget::Model }.encode(0, 1).unwrap().cdw12, 1);
        assert_eq!(DlgCommand::SsdRead { address: 5, size: 8 }.opcode(), 0xC4);
        assert_eq!(DlgCommand::SsdWrite { address: 5, size: 8 }.opcode(), 0xC5);
    }

    #[test]
    fn refuses_bad_fields() {
        let st = |s: Sqe| DlgCommand::decode(&s).unwrap_err().status;
        let base = Sqe { opcode: 0xC0, cdw11: 784, cdw12: 48, ..Sqe::default() };
        assert_eq!(st(Sqe { opcode: 0xC6, ..base }), Status::INVALID_OPCODE);
        assert_eq!(st(Sqe { cdw12: 0, ..base }), Status::INVALID_FIELD);
        assert_eq!(st(Sqe { cdw12: 65, ..base }), Status::INVALID_FIELD);
        assert_eq!(st(Sqe { cdw11: 0, ..base }), Status::INVALID_FIELD);
        assert_eq!(st(Sqe { cdw13: 1, ..base }), Status::INVALID_FIELD);
        assert_eq!(st(Sqe { opcode: 0xC1, cdw12: 0, ..base }), Status::INVALID_FIELD);
        assert_eq!(st(Sqe { opcode: 0xC3, cdw12: 2, ..base }), Status::INVALID_FIELD);
        assert_eq!(st(Sqe { opcode: 0xC4, cdw12: 1, ..base }), Status::INVALID_FIELD);
        assert!(DlgCommand::Index { address: 0, size: 6, t: 0 }.encode(0, 1).is_err());
    }

    proptest! {
        #[test]
        fn decode_never_panics_and_roundtrips(op in 0xBEu8..0xC8, a: u32, s: u32, d12: u32, d13 in 0u32..2) {
            let sqe = Sqe { opcode: op, cdw10: a, cdw11: s, cdw12: d12, cdw13: d13, ..Sqe::default() };
            if let Ok(cmd) = DlgCommand::decode(&sqe) {
                let back = cmd.encode(sqe.cid, sqe.nsid).unwrap();
                prop_assert_eq!(DlgCommand::decode(&back).unwrap(), cmd);
                prop_assert_eq!((back.opcode, back.cdw10, back.cdw11, back.cdw12), (op, a, s, d12));
            }
        }
    }
}
