//! Loading an eBPF ELF object (`clang -O2 -target bpf -c prog.c`): ELF64, little-endian, relocatable, EM_BPF.
//!
//! Executable sections are laid end to end into one instruction stream; allocated data sections go into a
//! read-only image (`.rodata*`) or a writable one (`.data*`, `.bss*`), mapped at fixed VM addresses. Relocations
//! are resolved here, as libbpf would: `R_BPF_64_64` on a 64-bit immediate load gets the VM address of its data
//! symbol, `R_BPF_64_32` on a call gets the pc-relative distance to its function. The entry is the object's only
//! global function. Anything else (external symbols, other relocation types, relocations in data, function
//! addresses taken as data) is refused with a reason; no input makes this panic.

use object::read::elf::{ElfFile64, FileHeader};
use object::{
    Endianness, Object, ObjectSection, ObjectSymbol, RelocationFlags, RelocationTarget, SectionFlags, SectionIndex,
    SectionKind, SymbolKind,
};
use std::collections::HashMap;

/// VM address of the read-only data image.
pub const RODATA_VADDR: u64 = 1 << 32;
/// VM address of the writable data image (a fresh copy for every run).
pub const DATA_VADDR: u64 = 3 << 32;

const EM_BPF: u16 = 247;
const ET_REL: u16 = 1;
const R_BPF_64_64: u32 = 1;
const R_BPF_64_32: u32 = 10;
const LDDW: u8 = 0x18;
const CALL: u8 = 0x85;
const INSN: usize = 8;
/// Largest section alignment honoured (larger ones are refused: they would only waste data memory).
const MAX_ALIGN: u64 = 4096;

/// A program ready for verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramImage {
    pub text: Vec<u8>,
    pub entry_pc: usize,
    pub entry_name: String,
    pub rodata: Vec<u8>,
    pub data: Vec<u8>,
}

/// Why an object cannot be loaded (reported as Invalid Program Data).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LoadError(pub String);

fn fail<T>(why: impl Into<String>) -> Result<T, LoadError> {
    Err(LoadError(why.into()))
}

#[derive(Clone, Copy)]
enum Place {
    Text(usize),
    Rodata(usize),
    Data(usize),
}

fn align_to(v: &mut Vec<u8>, align: u64, limit: usize) -> Result<usize, LoadError> {
    if align > MAX_ALIGN {
        return fail(format!("section alignment {align} exceeds {MAX_ALIGN}"));
    }
    let a = align.max(1) as usize;
    let at = v.len().div_ceil(a) * a;
    if at > limit {
        return fail("program data too large");
    }
    v.resize(at, 0);
    Ok(at)
}

/// Parses and relocates `bytes`; `limit` caps each image's size in bytes.
pub fn load(bytes: &[u8], limit: usize) -> Result<ProgramImage, LoadError> {
    let elf = ElfFile64::<Endianness>::parse(bytes).map_err(|e| LoadError(format!("not an ELF64 object: {e}")))?;
    let h = elf.elf_header();
    let en = elf.endian();
    if h.e_machine(en) != EM_BPF {
        return fail(format!("ELF machine {} is not BPF (247): compile with clang -target bpf", h.e_machine(en)));
    }
    if h.e_type(en) != ET_REL || !elf.is_little_endian() {
        return fail("expected a little-endian relocatable object (clang -target bpf -c)");
    }
    let (mut text, mut rodata, mut data) = (Vec::new(), Vec::new(), Vec::new());
    let mut places: HashMap<SectionIndex, Place> = HashMap::new();
    for s in elf.sections() {
        let SectionFlags::Elf { sh_flags } = s.flags() else { continue };
        const ALLOC: u64 = 0x2;
        const WRITE: u64 = 0x1;
        const EXEC: u64 = 0x4;
        if sh_flags & ALLOC == 0 || s.size() == 0 {
            continue;
        }
        let size = usize::try_from(s.size()).map_err(|_| LoadError("section too large".into()))?;
        if size > limit {
            return fail(format!("section {} is larger than {limit} bytes", s.name().unwrap_or("?")));
        }
        let content: &[u8] = if s.kind() == SectionKind::UninitializedData { &[] } else {
            s.data().map_err(|e| LoadError(format!("section data: {e}")))?
        };
        let (image, place): (&mut Vec<u8>, fn(usize) -> Place) = if sh_flags & EXEC != 0 {
            if size % INSN != 0 {
                return fail("an executable section is not a whole number of instructions");
            }
            (&mut text, Place::Text)
        } else if sh_flags & WRITE != 0 || s.kind() == SectionKind::UninitializedData {
            (&mut data, Place::Data)
        } else {
            (&mut rodata, Place::Rodata)
        };
        let at = align_to(image, s.align().max(if sh_flags & EXEC != 0 { INSN as u64 } else { 1 }), limit)?;
        if at + size > limit {
            return fail("program too large");
        }
        image.extend_from_slice(content);
        image.resize(at + size, 0);
        places.insert(s.index(), place(at));
    }
    if text.is_empty() {
        return fail("no executable section");
    }
    relocate(&elf, &places, &mut text)?;
    let (entry_pc, entry_name) = entry(&elf, &places)?;
    Ok(ProgramImage { text, entry_pc, entry_name, rodata, data })
}

fn entry(elf: &ElfFile64<Endianness>, places: &HashMap<SectionIndex, Place>) -> Result<(usize, String), LoadError> {
    let mut found = Vec::new();
    for sym in elf.symbols() {
        if sym.kind() != SymbolKind::Text || !sym.is_global() {
            continue;
        }
        let Some(Place::Text(base)) = sym.section_index().and_then(|i| places.get(&i).copied()) else { continue };
        let off = (base as u64).checked_add(sym.address()).filter(|o| o.is_multiple_of(INSN as u64));
        let Some(off) = off else {
            return fail("a function does not start on an instruction");
        };
        found.push(((off / INSN as u64) as usize, sym.name().unwrap_or("?").to_string()));
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => fail("no global function: the program's entry must be a non-static function"),
        _ => {
            let names: Vec<_> = found.iter().map(|f| f.1.as_str()).collect();
            fail(format!("several global functions {names:?}: make all but the entry static"))
        }
    }
}

fn relocate(elf: &ElfFile64<Endianness>, places: &HashMap<SectionIndex, Place>, text: &mut [u8]) -> Result<(), LoadError> {
    for s in elf.sections() {
        let target = places.get(&s.index()).copied();
        for (offset, rel) in s.relocations() {
            let base = match target {
                Some(Place::Text(b)) => b,
                Some(_) => return fail("relocations in data sections (pointer tables) are not supported"),
                None => continue,
            };
            let RelocationFlags::Elf { r_type } = rel.flags() else { return fail("unknown relocation") };
            let RelocationTarget::Symbol(si) = rel.target() else { return fail("relocation without a symbol") };
            let sym = elf.symbol_by_index(si).map_err(|e| LoadError(format!("relocation symbol: {e}")))?;
            let name = sym.name().unwrap_or("?").to_string();
            let Some(place) = sym.section_index().and_then(|i| places.get(&i).copied()) else {
                return fail(format!("symbol {name:?} is external or in a section that is not loaded"));
            };
            let at = usize::try_from(offset).ok().and_then(|o| o.checked_add(base)).filter(|o| o % INSN == 0);
            let Some(at) = at.filter(|&a| a + INSN <= text.len()) else { return fail("relocation outside the code") };
            let imm = i32::from_le_bytes(text[at + 4..at + 8].try_into().unwrap());
            match r_type {
                R_BPF_64_64 => {
                    if text[at] != LDDW || at + 2 * INSN > text.len() {
                        return fail("R_BPF_64_64 not on a 64-bit immediate load");
                    }
                    let addr = match place {
                        Place::Rodata(b) => RODATA_VADDR + b as u64,
                        Place::Data(b) => DATA_VADDR + b as u64,
                        Place::Text(_) => return fail(format!("the address of function {name:?} is taken")),
                    }
                    .wrapping_add(sym.address())
                    .wrapping_add(imm as i64 as u64);
                    text[at + 4..at + 8].copy_from_slice(&(addr as u32).to_le_bytes());
                    text[at + INSN + 4..at + INSN + 8].copy_from_slice(&((addr >> 32) as u32).to_le_bytes());
                }
                R_BPF_64_32 => {
                    let Place::Text(tb) = place else { return fail(format!("call to data symbol {name:?}")) };
                    if text[at] != CALL || text[at + 1] >> 4 != 1 {
                        return fail("R_BPF_64_32 not on a local call");
                    }
                    // The symbol's address is the object's: any 64-bit value (checked, never wrapped).
                    let section_offset = if sym.kind() == SymbolKind::Section { (i64::from(imm) + 1) * INSN as i64 } else { 0 };
                    let dest = i64::try_from(sym.address())
                        .ok()
                        .and_then(|a| a.checked_add(tb as i64))
                        .and_then(|d| d.checked_add(section_offset))
                        .filter(|&d| d % INSN as i64 == 0 && d >= 0 && (d as usize) < text.len());
                    let Some(dest) = dest else {
                        return fail(format!("call to {name:?} lands outside the code"));
                    };
                    let rel_pc = dest / INSN as i64 - (at / INSN) as i64 - 1;
                    let rel_pc = i32::try_from(rel_pc).map_err(|_| LoadError("call distance overflows".into()))?;
                    text[at + 4..at + 8].copy_from_slice(&rel_pc.to_le_bytes());
                }
                t => return fail(format!("relocation type {t} is not supported (only R_BPF_64_64 and R_BPF_64_32)")),
            }
        }
    }
    Ok(())
}

/// A minimal eBPF relocatable object: `.text` (global function `f` at 0), `.rodata`, and `.rel.text` entries
/// `(offset in .text, symbol, type)` where symbol 1 is `.rodata`'s section symbol and 2 is `f`. For tests and
/// fuzzing: hostile bytecode in a well-formed container.
pub fn minimal_object(text: &[u8], rodata: &[u8], relocs: &[(u64, u32, u32)]) -> Vec<u8> {
    fn pad8(v: &mut Vec<u8>) {
        while !v.len().is_multiple_of(8) {
            v.push(0);
        }
    }
    let strtab = b"\0.text\0.rodata\0.symtab\0.strtab\0.rel.text\0f\0".to_vec();
    let name = |s: &str| strtab.windows(s.len()).position(|w| w == s.as_bytes()).unwrap() as u32;
    let mut sym = vec![0u8; 24];
    let mut entry = |n: u32, info: u8, shndx: u16, size: u64| {
        sym.extend_from_slice(&n.to_le_bytes());
        sym.extend_from_slice(&[info, 0]);
        sym.extend_from_slice(&shndx.to_le_bytes());
        sym.extend_from_slice(&0u64.to_le_bytes());
        sym.extend_from_slice(&size.to_le_bytes());
    };
    entry(0, 0x03, 2, 0);
    entry(name("f"), 0x12, 1, text.len() as u64);
    let rel: Vec<u8> = relocs
        .iter()
        .flat_map(|&(off, s, t)| [off.to_le_bytes(), ((u64::from(s) << 32) | u64::from(t)).to_le_bytes()].concat())
        .collect();
    let mut out = vec![0u8; 64];
    let mut placed = Vec::new();
    for body in [text, rodata, &sym[..], &strtab[..], &rel[..]] {
        pad8(&mut out);
        placed.push((out.len() as u64, body.len() as u64));
        out.extend_from_slice(body);
    }
    pad8(&mut out);
    let shoff = out.len() as u64;
    // (name, type, flags, link, info, align, entsize) per section after the null one.
    let shdrs = [
        (name(".text"), 1u32, 6u64, 0u32, 0u32, 8u64, 0u64),
        (name(".rodata"), 1, 2, 0, 0, 8, 0),
        (name(".symtab"), 2, 0, 4, 2, 8, 24),
        (name(".strtab"), 3, 0, 0, 0, 1, 0),
        (name(".rel.text"), 9, 0, 3, 1, 8, 16),
    ];
    out.extend_from_slice(&[0u8; 64]);
    for (i, (n, ty, flags, link, info, align, entsize)) in shdrs.iter().enumerate() {
        let (off, size) = placed[i];
        for v in [u64::from(*n) | (u64::from(*ty) << 32), *flags, 0, off, size] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&link.to_le_bytes());
        out.extend_from_slice(&info.to_le_bytes());
        out.extend_from_slice(&align.to_le_bytes());
        out.extend_from_slice(&entsize.to_le_bytes());
    }
    out[0..16].copy_from_slice(&[0x7f, b'E', b'L', b'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    out[16..18].copy_from_slice(&1u16.to_le_bytes());
    out[18..20].copy_from_slice(&EM_BPF.to_le_bytes());
    out[20..24].copy_from_slice(&1u32.to_le_bytes());
    out[40..48].copy_from_slice(&shoff.to_le_bytes());
    out[52..54].copy_from_slice(&64u16.to_le_bytes());
    out[58..60].copy_from_slice(&64u16.to_le_bytes());
    out[60..62].copy_from_slice(&6u16.to_le_bytes());
    out[62..64].copy_from_slice(&4u16.to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn lddw(dst: u8, imm: u32) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0] = LDDW;
        b[1] = dst;
        b[4..8].copy_from_slice(&imm.to_le_bytes());
        b
    }

    #[test]
    fn a_minimal_object_loads_and_its_rodata_relocation_is_resolved() {
        // r0 = &rodata + 4; r0 = *(u32 *)(r0 + 0); exit
        let text = [&lddw(0, 4)[..], &[0x61, 0x00, 0, 0, 0, 0, 0, 0], &[0x95, 0, 0, 0, 0, 0, 0, 0]].concat();
        let obj = minimal_object(&text, &[1, 2, 3, 4, 42, 0, 0, 0], &[(0, 1, R_BPF_64_64)]);
        let img = load(&obj, 1 << 20).unwrap();
        assert_eq!((img.entry_pc, img.entry_name.as_str()), (0, "f"));
        let addr = u64::from(u32::from_le_bytes(img.text[4..8].try_into().unwrap()))
            | (u64::from(u32::from_le_bytes(img.text[12..16].try_into().unwrap())) << 32);
        assert_eq!(addr, RODATA_VADDR + 4);
        let p = crate::program::Program::new(img, 100).unwrap();
        assert_eq!(p.run(&mut [], &[], (0, 0), 100).result, Ok(42));
    }

    #[test]
    fn malformed_objects_are_refused_with_a_reason() {
        let exit = [0x95, 0, 0, 0, 0, 0, 0, 0];
        let ok = minimal_object(&exit, &[], &[]);
        assert!(load(&ok, 1 << 20).is_ok());
        let mut machine = ok.clone();
        machine[18] = 62;
        assert!(load(&machine, 1 << 20).unwrap_err().0.contains("machine"));
        assert!(load(&ok[..40], 1 << 20).is_err());
        assert!(load(&minimal_object(&exit[..5], &[], &[]), 1 << 20).is_err(), "partial instruction");
        let bad_reloc = minimal_object(&exit, &[7; 8], &[(0, 1, R_BPF_64_64)]);
        assert!(load(&bad_reloc, 1 << 20).unwrap_err().0.contains("64-bit immediate"));
        let far = minimal_object(&exit, &[], &[(800, 1, R_BPF_64_64)]);
        assert!(load(&far, 1 << 20).is_err());
        let other = minimal_object(&lddw(0, 0), &[7; 8], &[(0, 1, 2)]);
        assert!(load(&other, 1 << 20).unwrap_err().0.contains("not supported"));
        let func_addr = minimal_object(&lddw(0, 0), &[], &[(0, 2, R_BPF_64_64)]);
        assert!(load(&func_addr, 1 << 20).unwrap_err().0.contains("address of function"));
        assert!(load(&minimal_object(&exit, &[0; 64], &[]), 32).is_err(), "size limit");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn hostile_bytecode_is_refused_or_runs_within_its_budget(
            text in proptest::collection::vec(any::<u8>(), 8..256),
            rodata in proptest::collection::vec(any::<u8>(), 0..32),
            rel in proptest::option::of((0u64..256, 0u32..4, 0u32..12)),
            range in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let text = &text[..text.len() / 8 * 8];
            let obj = minimal_object(text, &rodata, rel.as_slice());
            if let Ok(p) = crate::program::prepare(&obj, 1 << 16, 1 << 12) {
                let mut r = range.clone();
                let out = p.run(&mut [&mut r[..]], b"params", (1, 2), 5_000);
                prop_assert!(out.instructions <= 5_000);
            }
            let _ = crate::program::prepare(text, 1 << 16, 1 << 12);
        }
    }
}
