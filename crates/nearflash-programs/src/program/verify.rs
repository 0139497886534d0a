//! nearflash's verifier pass over a relocated program, before the VM's own (`RequisiteVerifier`: known opcodes,
//! registers, jump targets in range, shift and division immediates).
//!
//! What is refused here, at load: programs over the size limit; calls to helpers other than nearflash's flash
//! reads (`reads::HELPERS`; their arguments are checked at run time by the helpers) and indirect calls; local calls or jumps into the middle of
//! a 64-bit immediate load or out of the code; stack accesses through r10 outside the 512-byte frame; and the
//! 32-bit add/sub/mul instructions, whose results the VM sign-extends where eBPF zero-extends (clang emits them
//! only with `-mcpu=v3` or `-mattr=+alu32`). Loops are allowed: they are bounded at run time by the instruction
//! budget, and every other memory access is bounded at run time by the VM's region checks (see `vm`).

use super::reads::HELPERS;

/// eBPF stack bytes per call frame (the clang BPF backend's limit).
pub const STACK_FRAME: i64 = 512;

const INSN: usize = 8;

/// Why a program is refused (reported as Invalid Program Data).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("instruction {pc}: {why}")]
pub struct VerifyError {
    pub pc: usize,
    pub why: String,
}

fn size_of_access(opc: u8) -> i64 {
    match opc & 0x18 {
        0x00 => 4,
        0x08 => 2,
        0x10 => 1,
        _ => 8,
    }
}

/// Checks `text` (whole instructions) of at most `max_insns` instructions; `entry` must be an instruction start.
pub fn verify(text: &[u8], entry: usize, max_insns: usize) -> Result<(), VerifyError> {
    let err = |pc: usize, why: &str| Err(VerifyError { pc, why: why.to_string() });
    if text.is_empty() || !text.len().is_multiple_of(INSN) {
        return err(0, "the code is not a whole number of 8-byte instructions");
    }
    let n = text.len() / INSN;
    if n > max_insns {
        return err(n, &format!("{n} instructions exceed the limit of {max_insns}"));
    }
    // Instruction starts (the second half of a 64-bit immediate load is not one).
    let mut start = vec![true; n];
    let mut pc = 0;
    while pc < n {
        if text[pc * INSN] == 0x18 {
            if pc + 1 >= n {
                return err(pc, "64-bit immediate load cut off at the end");
            }
            start[pc + 1] = false;
            pc += 2;
        } else {
            pc += 1;
        }
    }
    if entry >= n || !start[entry] {
        return err(entry, "the entry is not an instruction");
    }
    let target_ok = |to: i64| to >= 0 && (to as usize) < n && start[to as usize];
    for pc in (0..n).filter(|&p| start[p]) {
        let i = &text[pc * INSN..pc * INSN + INSN];
        let (opc, dst, src) = (i[0], i[1] & 0xF, i[1] >> 4);
        let off = i64::from(i16::from_le_bytes([i[2], i[3]]));
        let imm = i64::from(i32::from_le_bytes([i[4], i[5], i[6], i[7]]));
        match opc {
            0x04 | 0x0c | 0x14 | 0x1c | 0x24 | 0x2c => {
                return err(pc, "32-bit add/sub/mul (alu32): the VM sign-extends their results where eBPF zero-extends; compile without -mcpu=v3/-mattr=+alu32");
            }
            0x85 => match src {
                0 if HELPERS.iter().any(|h| i64::from(h.0) == imm) => {}
                0 => {
                    let known: Vec<String> = HELPERS.iter().map(|h| format!("{} ({})", h.0, h.1)).collect();
                    return err(pc, &format!("call to helper {imm}: the helpers provided are {}", known.join(", ")));
                }
                1 if target_ok(pc as i64 + 1 + imm) => {}
                1 => return err(pc, "local call outside the code or into an instruction's middle"),
                _ => return err(pc, "call with an unknown source"),
            },
            0x8d => return err(pc, "indirect calls are not supported"),
            _ => {}
        }
        let class = opc & 0x07;
        if (class == 0x05 || class == 0x06) && !matches!(opc, 0x85 | 0x95 | 0x8d) && !target_ok(pc as i64 + 1 + off) {
            return err(pc, "jump outside the code or into an instruction's middle");
        }
        // Memory accesses through the frame pointer with a constant offset: inside the frame.
        let base = match class {
            0x01 => Some(src),      // LDX: dst = *(src + off)
            0x02 | 0x03 => Some(dst), // ST / STX: *(dst + off) = ...
            _ => None,
        };
        if base == Some(10) && (opc & 0xE0) == 0x60 {
            let size = size_of_access(opc);
            if off < -STACK_FRAME || off + size > 0 {
                return err(pc, &format!("stack access at r10{off:+} ({size} bytes) outside the {STACK_FRAME}-byte frame"));
            }
        }
    }
    Ok(())
}

/// Rewrites the helper calls of verified `text` (`call <id>`) to the VM's keys for them (`key(id)`).
pub fn bind_helpers(text: &mut [u8], key: impl Fn(u32) -> Option<u32>) {
    let mut pc = 0;
    while pc + INSN <= text.len() {
        let i = &mut text[pc..pc + INSN];
        if i[0] == 0x85 && i[1] >> 4 == 0 {
            let id = i32::from_le_bytes([i[4], i[5], i[6], i[7]]);
            if let Some(k) = u32::try_from(id).ok().and_then(&key) {
                i[4..8].copy_from_slice(&k.to_le_bytes());
            }
        }
        pc += if i[0] == 0x18 { 2 * INSN } else { INSN };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insn(opc: u8, dst: u8, src: u8, off: i16, imm: i32) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[0] = opc;
        b[1] = dst | (src << 4);
        b[2..4].copy_from_slice(&off.to_le_bytes());
        b[4..8].copy_from_slice(&imm.to_le_bytes());
        b
    }

    fn prog(list: &[[u8; 8]]) -> Vec<u8> {
        list.concat()
    }

    const EXIT: [u8; 8] = [0x95, 0, 0, 0, 0, 0, 0, 0];

    #[test]
    fn accepts_plain_code_and_refuses_each_hazard() {
        let ok = prog(&[insn(0xb7, 0, 0, 0, 1), insn(0x7b, 10, 1, -8, 0), insn(0x79, 2, 10, -8, 0), EXIT]);
        verify(&ok, 0, 100).unwrap();
        for (id, _) in HELPERS {
            verify(&prog(&[insn(0x85, 0, 0, 0, id as i32), EXIT]), 0, 100).unwrap();
        }
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (prog(&[insn(0x04, 0, 0, 0, 1), EXIT]), "alu32"),
            (prog(&[insn(0x85, 0, 0, 0, 6), EXIT]), "helper 6"),
            (prog(&[insn(0x85, 0, 0, 0, 0), EXIT]), "helper 0"),
            (prog(&[insn(0x85, 0, 1, 0, 5), EXIT]), "outside"),
            (prog(&[insn(0x8d, 0, 0, 0, 1), EXIT]), "indirect"),
            (prog(&[insn(0x7b, 10, 1, -520, 0), EXIT]), "frame"),
            (prog(&[insn(0x79, 1, 10, 0, 0), EXIT]), "frame"),
            (prog(&[insn(0x05, 0, 0, 1, 0), insn(0x18, 0, 0, 0, 0), [0; 8], EXIT]), "middle"),
            (prog(&[insn(0x05, 0, 0, -5, 0), EXIT]), "outside"),
            (prog(&[EXIT, insn(0x18, 0, 0, 0, 0)]), "cut off"),
        ];
        for (p, what) in cases {
            let e = verify(&p, 0, 100).unwrap_err();
            assert!(e.why.contains(what), "{what}: {e}");
        }
        assert!(verify(&ok, 0, 3).unwrap_err().why.contains("limit"));
        assert!(verify(&ok[..7], 0, 100).is_err());
        assert!(verify(&ok, 9, 100).is_err());
    }
}
