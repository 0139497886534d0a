//! The byte encoding of partials and outputs: what an FMC really ships to controller DRAM and what the device
//! really sends to the host. Little-endian fixed-width integers plus LEB128 varints for counts (small counts cost
//! one byte, as a compact firmware encoding would), length-prefixed byte strings.

use crate::error::{IssdError, Result};

/// Bytes a LEB128 varint of `v` takes (1..=10).
pub fn varint_len(v: u64) -> usize {
    // 7 payload bits per byte; 0 still takes one byte.
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Zig-zag maps signed to unsigned so that small magnitudes stay short as varints.
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// A value with a byte encoding (the body after a kind tag).
pub trait Body: Sized {
    /// Exact bytes [`Body::encode_body`] writes.
    fn body_len(&self) -> usize;
    fn encode_body(&self, w: &mut Writer);
    fn decode_body(r: &mut Reader<'_>) -> Result<Self>;
}

/// Bytes of a length-prefixed byte string.
pub fn bytes_len(n: usize) -> usize {
    varint_len(n as u64) + n
}

/// Appends encoded values to a byte vector.
#[derive(Debug, Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    pub fn with_capacity(n: usize) -> Self {
        Self { buf: Vec::with_capacity(n) }
    }
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn i128(&mut self, v: i128) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn f64(&mut self, v: f64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }
    pub fn svarint(&mut self, v: i64) {
        self.varint(zigzag(v));
    }
    /// Length (varint) followed by the bytes.
    pub fn bytes(&mut self, b: &[u8]) {
        self.varint(b.len() as u64);
        self.buf.extend_from_slice(b);
    }
    pub fn into_vec(self) -> Vec<u8> {
        self.buf
    }
}

/// Reads values back; every read checks the remaining length so truncated input is an error, not a panic.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len()).ok_or_else(|| {
            IssdError::Decode(format!("truncated: need {n} bytes at offset {} of {}", self.pos, self.buf.len()))
        })?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    pub fn i128(&mut self) -> Result<i128> {
        Ok(i128::from_le_bytes(self.array()?))
    }
    pub fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_le_bytes(self.array()?))
    }
    pub fn varint(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(IssdError::Decode("varint longer than 10 bytes".into()))
    }
    pub fn svarint(&mut self) -> Result<i64> {
        Ok(unzigzag(self.varint()?))
    }
    /// A count that sizes an allocation: bounded by the bytes left so corrupt input cannot ask for huge buffers.
    pub fn count(&mut self, min_bytes_each: usize) -> Result<usize> {
        let n = self.varint()?;
        let left = (self.buf.len() - self.pos) as u64;
        if n.saturating_mul(min_bytes_each.max(1) as u64) > left {
            return Err(IssdError::Decode(format!("count {n} exceeds the {left} bytes left")));
        }
        Ok(n as usize)
    }
    pub fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.count(1)?;
        self.take(n)
    }
    /// Errors if bytes are left over (a decoded value must use its whole encoding).
    pub fn finish(self) -> Result<()> {
        if self.pos != self.buf.len() {
            return Err(IssdError::Decode(format!("{} trailing bytes", self.buf.len() - self.pos)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_report_their_length() {
        for v in [0u64, 1, 127, 128, 300, 16_383, 16_384, u32::MAX as u64, u64::MAX] {
            let mut w = Writer::default();
            w.varint(v);
            let b = w.into_vec();
            assert_eq!(b.len(), varint_len(v), "{v}");
            let mut r = Reader::new(&b);
            assert_eq!(r.varint().unwrap(), v);
            r.finish().unwrap();
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX, -300] {
            let mut w = Writer::default();
            w.svarint(v);
            let b = w.into_vec();
            assert_eq!(b.len(), varint_len(zigzag(v)));
            assert_eq!(Reader::new(&b).svarint().unwrap(), v);
        }
    }

    #[test]
    fn truncated_and_oversized_input_is_an_error() {
        assert!(Reader::new(&[1, 2]).u32().is_err());
        assert!(Reader::new(&[0x80]).varint().is_err());
        assert!(Reader::new(&[0xff; 11]).varint().is_err());
        // a length of 1000 with 2 bytes behind it
        let mut w = Writer::default();
        w.varint(1000);
        w.u8(1);
        assert!(Reader::new(&w.into_vec()).bytes().is_err());
        let mut r = Reader::new(&[1, 2]);
        r.u8().unwrap();
        assert!(r.finish().is_err());
    }
}
