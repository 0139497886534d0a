//! Program loading: any bytes as an ELF object, and hostile bytecode, read-only data and relocations inside a
//! well-formed object, through loading, verification and one budgeted run over a small range. Loading either
//! refuses with a reason or yields a program whose run stops within its budget; nothing panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nearflash_programs::program::{elf::minimal_object, prepare};

fuzz_target!(|data: &[u8]| {
    if data.is_empty() {
        return;
    }
    let body = &data[1..];
    let object = if data[0] & 1 == 0 {
        body.to_vec()
    } else {
        // [text length / 8][relocation: offset, symbol, type][text][rodata]
        let n = (data[0] as usize >> 1) * 8;
        let (rel, rest) = body.split_at(body.len().min(3));
        let (text, rodata) = rest.split_at(rest.len().min(n) / 8 * 8);
        let relocs: Vec<(u64, u32, u32)> = match rel {
            [o, s, t] => vec![(u64::from(*o) * 8 % 512, u32::from(*s % 4), u32::from(*t % 12))],
            _ => vec![],
        };
        minimal_object(text, rodata, &relocs)
    };
    if let Ok(p) = prepare(&object, 1 << 16, 1 << 12) {
        let mut range = vec![0u8; 64];
        let out = p.run(&mut [&mut range[..]], b"params", (1, 2), 10_000);
        assert!(out.instructions <= 10_000);
    }
});
