//! Cognitive SSD's untrusted parsers: DLG library commands (Table 1) from submission entries, DLG-x instructions
//! from the instruction area, and graph page records. None may panic; what decodes must re-encode to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nearflash_cognitive::instr::{Instr, INSTR_BYTES};
use nearflash_cognitive::wire::DlgCommand;
use nearflash_core::nvme::{Sqe, SQE_BYTES};

fuzz_target!(|data: &[u8]| {
    if data.len() >= SQE_BYTES {
        let sqe = Sqe::from_bytes(data[..SQE_BYTES].try_into().unwrap());
        if let Ok(cmd) = DlgCommand::decode(&sqe) {
            let back = cmd.encode(sqe.cid, sqe.nsid).expect("a decoded command encodes");
            assert_eq!(DlgCommand::decode(&back).unwrap(), cmd);
        }
    }
    if data.len() >= INSTR_BYTES {
        if let Ok(i) = Instr::decode(&data[..INSTR_BYTES]) {
            assert_eq!(Instr::decode(&i.encode()).unwrap(), i);
        }
    }
});
