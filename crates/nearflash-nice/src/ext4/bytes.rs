//! Bounds-checked little-endian field reads: every on-disk structure is parsed through these, so a truncated
//! block gives a `Corrupt` error instead of an index panic.

use crate::error::{corrupt, Result};

pub(crate) fn u8_at(b: &[u8], off: usize, what: &'static str) -> Result<u8> {
    b.get(off).copied().ok_or_else(|| corrupt(what, format!("truncated: need byte {off}, have {}", b.len())))
}

pub(crate) fn u16_at(b: &[u8], off: usize, what: &'static str) -> Result<u16> {
    let s = slice(b, off, 2, what)?;
    Ok(u16::from_le_bytes([s[0], s[1]]))
}

pub(crate) fn u32_at(b: &[u8], off: usize, what: &'static str) -> Result<u32> {
    let s = slice(b, off, 4, what)?;
    Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

pub(crate) fn u64_at(b: &[u8], off: usize, what: &'static str) -> Result<u64> {
    let s = slice(b, off, 8, what)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Ok(u64::from_le_bytes(a))
}

pub(crate) fn slice<'a>(b: &'a [u8], off: usize, len: usize, what: &'static str) -> Result<&'a [u8]> {
    off.checked_add(len)
        .and_then(|end| b.get(off..end))
        .ok_or_else(|| corrupt(what, format!("truncated: need bytes {off}..{}, have {}", off + len, b.len())))
}
