//! The out-of-band (spare) area record written with every flash page.
//!
//! Layout (little endian): `seq: u64`, `erase_count: u32`, `flags: u32`, then per sector slot `lpn: u32` and
//! `crc: u32`, then spare bytes that firmware extensions may use. The sequence number orders pages for recovery;
//! the LPNs make the page self-describing (reverse map for GC and recovery); the CRCs catch data that would
//! otherwise be returned corrupted.

/// Bytes of the fixed header.
pub const HEADER_BYTES: usize = 16;

/// Bytes the record needs for `sectors` sector slots (before extension spare bytes).
pub const fn record_bytes(sectors: usize) -> usize {
    HEADER_BYTES + sectors * 8
}
