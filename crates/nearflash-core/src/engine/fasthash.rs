//! A one-multiply hasher for small integer keys (LBAs, packed queue/command ids). Keys here are not adversarial,
//! so SipHash's protection is not needed, and hashing is on the simulator's hot paths.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

#[derive(Default, Clone, Copy)]
pub struct IntHasher(u64);

const K: u64 = 0x9E37_79B9_7F4A_7C15;

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(K);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = (self.0 ^ u64::from(v)).wrapping_mul(K);
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).wrapping_mul(K);
    }
}

/// A `HashMap` keyed by small integers.
pub type IntMap<K, V> = HashMap<K, V, BuildHasherDefault<IntHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_map_works_as_a_map() {
        let mut m: IntMap<u32, u64> = IntMap::default();
        for i in 0..1000u32 {
            m.insert(i * 4096, u64::from(i));
        }
        assert_eq!(m.len(), 1000);
        assert_eq!(m[&(512 * 4096)], 512);
        assert!(!m.contains_key(&1));
    }
}
