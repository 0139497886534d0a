//! The OOB record's checksum: CRC-32 (IEEE, as `crc32fast::hash`) of the sequence number, bytes 8..16 and bytes
//! 20..`record_bytes(spp)` of the record, in that order (the image format's value).
//!
//! Computed once per page programmed. For an even slot count on a CPU with carry-less multiplication it is folded
//! straight from the record (`clmul`): the checksummed bytes, behind 12 zero bytes, are whole 16-byte blocks whose
//! first two are made from the sequence number and the header words and whose others are the record's own slots,
//! so nothing is gathered or hashed a byte at a time (crc32fast's path for inputs this short gathers them and folds a
//! partial block: ~186 instructions a page on cosmos-plus's 52 bytes, about 60 this way). Otherwise the bytes are
//! gathered and hashed (`hashed`).

use super::oob::record_bytes;

/// The record checksum of record `b` (`spp` slots) with sequence number `seq`.
#[inline]
pub(super) fn record_crc(seq: u64, b: &[u8], spp: usize) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if spp.is_multiple_of(2) && std::arch::is_x86_feature_detected!("pclmulqdq") {
        // SAFETY: the CPU has the instructions `clmul` is compiled for (checked just above).
        return unsafe { clmul::record_crc(seq, b, spp) };
    }
    hashed(seq, b, spp)
}

/// The checksummed bytes gathered into one run and hashed by crc32fast.
pub(super) fn hashed(seq: u64, b: &[u8], spp: usize) -> u32 {
    // The buffer fits 8 slots (up to 32 KiB pages of 4 KiB sectors; zeroing the 32-slot size took a `memset` call per
    // page programmed); more go through the hasher in three updates.
    let mut buf = [0u8; record_bytes(8) - 4];
    let n = record_bytes(spp) - 4;
    // A hasher made once and copied: `Hasher::new` looks up the CPU's features on every call.
    static BASE: std::sync::OnceLock<crc32fast::Hasher> = std::sync::OnceLock::new();
    let mut h = BASE.get_or_init(crc32fast::Hasher::new).clone();
    if n > buf.len() {
        h.update(&seq.to_le_bytes());
        h.update(&b[8..16]);
        h.update(&b[20..record_bytes(spp)]); // the reserved bytes and the slots
        return h.finalize();
    }
    buf[..8].copy_from_slice(&seq.to_le_bytes());
    buf[8..16].copy_from_slice(&b[8..16]);
    buf[16..n].copy_from_slice(&b[20..record_bytes(spp)]);
    h.update(&buf[..n]);
    h.finalize()
}

#[cfg(target_arch = "x86_64")]
mod clmul {
    //! Folding by carry-less multiplication, as crc32fast's `specialized::pclmulqdq` (after Gopal et al., "Fast CRC
    //! computation for generic polynomials using PCLMULQDQ instruction", Intel, 2009): its constants and its final
    //! reduction, for a message of whole 16-byte blocks.
    //!
    //! The checksummed bytes `M` number 20 + 8 * spp, 12 short of whole blocks for an even `spp`. CRC-32 with its
    //! initial value is the CRC without one of `M` with its first 4 bytes inverted, and a CRC without an initial value
    //! is unchanged by leading zero bytes: so the blocks are 12 zero bytes, then `M` with its first 4 bytes inverted.
    //! The first block is those zeros and the sequence number's low half; the second its high half, the erase count,
    //! the present mask and the reserved word (bytes 8..16 and 20..24); the rest the record's slots from byte 24 on.
    use super::record_bytes;
    use std::arch::x86_64 as arch;

    const K3: i64 = 0x1751997d0;
    const K4: i64 = 0x0ccaa009e;
    const K5: i64 = 0x163cd6124;
    const P_X: i64 = 0x1DB710641;
    const U_PRIME: i64 = 0x1F7011641;

    #[inline]
    fn word(b: &[u8], o: usize) -> i32 {
        i32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"))
    }

    /// `record_crc` for an even `spp`.
    #[target_feature(enable = "pclmulqdq")]
    pub(super) unsafe fn record_crc(seq: u64, b: &[u8], spp: usize) -> u32 {
        let slots = &b[24..record_bytes(spp)];
        let k3k4 = arch::_mm_set_epi64x(K4, K3);
        let first = arch::_mm_set_epi32(!(seq as u32) as i32, 0, 0, 0);
        let second = arch::_mm_set_epi32(word(b, 20), word(b, 12), word(b, 8), (seq >> 32) as u32 as i32);
        let x = fold(first, second, k3k4);
        // The common slot counts with their blocks counted at compile time (no loop: ~30 instructions a page fewer).
        let x = match spp {
            4 => fold_blocks::<2>(x, slots, k3k4),
            8 => fold_blocks::<4>(x, slots, k3k4),
            _ => slots.chunks_exact(16).fold(x, |x, block| fold_blocks::<1>(x, block, k3k4)),
        };
        // 128 bits to 64 (crc32fast's `reduce_128_to_crc`, after its partial block).
        let x = arch::_mm_xor_si128(arch::_mm_clmulepi64_si128(x, k3k4, 0x10), arch::_mm_srli_si128(x, 8));
        let low32 = arch::_mm_set_epi32(0, 0, 0, !0);
        let x = arch::_mm_xor_si128(
            arch::_mm_clmulepi64_si128(arch::_mm_and_si128(x, low32), arch::_mm_set_epi64x(0, K5), 0x00),
            arch::_mm_srli_si128(x, 4),
        );
        // Barrett reduction from 64 bits to 32 (the bit-reflected variant: the result is the upper half).
        let pu = arch::_mm_set_epi64x(U_PRIME, P_X);
        let t1 = arch::_mm_clmulepi64_si128(arch::_mm_and_si128(x, low32), pu, 0x10);
        let t2 = arch::_mm_clmulepi64_si128(arch::_mm_and_si128(t1, low32), pu, 0x00);
        !(arch::_mm_cvtsi128_si32(arch::_mm_srli_si128(arch::_mm_xor_si128(x, t2), 4)) as u32)
    }

    /// `x` folded over the first `N` 16-byte blocks of `blocks`.
    #[inline]
    #[target_feature(enable = "pclmulqdq")]
    fn fold_blocks<const N: usize>(mut x: arch::__m128i, blocks: &[u8], keys: arch::__m128i) -> arch::__m128i {
        for block in blocks[..16 * N].chunks_exact(16) {
            // SAFETY: 16 readable bytes (an exact chunk); an unaligned load.
            let next = unsafe { arch::_mm_loadu_si128(block.as_ptr().cast()) };
            x = fold(x, next, keys);
        }
        x
    }

    /// `a` folded 128 bits forward onto `b`.
    #[inline]
    #[target_feature(enable = "pclmulqdq")]
    fn fold(a: arch::__m128i, b: arch::__m128i, keys: arch::__m128i) -> arch::__m128i {
        let t1 = arch::_mm_clmulepi64_si128(a, keys, 0x00);
        let t2 = arch::_mm_clmulepi64_si128(a, keys, 0x11);
        arch::_mm_xor_si128(arch::_mm_xor_si128(b, t1), t2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ftl::oob::stride;
    use proptest::prelude::*;

    /// The documented concatenation, hashed whole.
    fn reference(seq: u64, b: &[u8], spp: usize) -> u32 {
        let mut m = seq.to_le_bytes().to_vec();
        m.extend_from_slice(&b[8..16]);
        m.extend_from_slice(&b[20..record_bytes(spp)]);
        crc32fast::hash(&m)
    }

    proptest! {
        /// Both paths give crc32fast's value of the documented bytes, for every slot count a page can have.
        #[test]
        fn both_paths_give_the_documented_crc(
            seq in any::<u64>(),
            spp in prop::sample::select(vec![1usize, 2, 4, 8, 16, 32]),
            bytes in prop::collection::vec(any::<u8>(), stride(32)),
            fill in prop::sample::select(vec![None, Some(0u8), Some(0xff)]),
        ) {
            let mut b = bytes[..stride(spp)].to_vec();
            if let Some(v) = fill {
                b.fill(v);
            }
            let want = reference(seq, &b, spp);
            prop_assert_eq!(record_crc(seq, &b, spp), want);
            prop_assert_eq!(hashed(seq, &b, spp), want);
        }
    }

    #[test]
    fn the_folded_path_is_taken_where_it_can_be() {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("pclmulqdq") {
            let b: Vec<u8> = (0..stride(4)).map(|i| (i * 31 + 7) as u8).collect();
            // SAFETY: the CPU has the instructions (checked above).
            let folded = unsafe { clmul::record_crc(u64::MAX - 5, &b, 4) };
            assert_eq!(folded, reference(u64::MAX - 5, &b, 4));
        }
    }
}
