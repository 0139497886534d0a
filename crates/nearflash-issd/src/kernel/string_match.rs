//! string_match (Phoenix, Table 1): counts and locates the occurrences of a set of keys in a text input. Each key
//! is searched with `memchr::memmem`; occurrences of one key do not overlap (as `bytes.count` in Python). Keys
//! hold no newline, so with whole lines per page no occurrence straddles pages. A location is
//! (page, byte offset inside the page payload); [`logical_offset`] maps it to an offset in the unpaged text.

use super::partial::Mergeable;
use super::{Chunk, Kernel, Output, Partial};
use crate::codec::{bytes_len, varint_len, Body, Reader, Writer};
use crate::error::{invalid, IssdError, Result};
use crate::pages::PageLayout;
use memchr::memmem;
use serde::{Deserialize, Serialize};

/// Parameters of `string_match`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StringMatchParams {
    pub keys: Vec<String>,
    /// Also report where each occurrence is (else counts only).
    #[serde(default = "yes")]
    pub locate: bool,
}

fn yes() -> bool {
    true
}

/// Occurrences of one key.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeyMatches {
    pub key: Vec<u8>,
    pub count: u64,
    /// (page, offset in payload), sorted once finished.
    pub positions: Vec<(u64, u32)>,
}

/// Occurrences of every key, in key order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Matches {
    pub keys: Vec<KeyMatches>,
}

impl Mergeable for Matches {
    fn merge(&mut self, other: Self) -> Result<()> {
        if self.keys.is_empty() {
            *self = other;
            return Ok(());
        }
        if other.keys.is_empty() {
            return Ok(());
        }
        if self.keys.len() != other.keys.len() || self.keys.iter().zip(&other.keys).any(|(a, b)| a.key != b.key) {
            return Err(IssdError::PartialMismatch("string_match partials for different key sets".into()));
        }
        for (a, b) in self.keys.iter_mut().zip(other.keys) {
            a.count += b.count;
            a.positions.extend(b.positions);
        }
        Ok(())
    }
}

impl Body for Matches {
    fn body_len(&self) -> usize {
        varint_len(self.keys.len() as u64)
            + self
                .keys
                .iter()
                .map(|k| {
                    bytes_len(k.key.len())
                        + varint_len(k.count)
                        + varint_len(k.positions.len() as u64)
                        + k.positions.iter().map(|&(p, o)| varint_len(p) + varint_len(o.into())).sum::<usize>()
                })
                .sum::<usize>()
    }
    fn encode_body(&self, w: &mut Writer) {
        w.varint(self.keys.len() as u64);
        for k in &self.keys {
            w.bytes(&k.key);
            w.varint(k.count);
            w.varint(k.positions.len() as u64);
            for &(p, o) in &k.positions {
                w.varint(p);
                w.varint(o.into());
            }
        }
    }
    fn decode_body(r: &mut Reader<'_>) -> Result<Self> {
        let n = r.count(3)?;
        let mut keys = Vec::with_capacity(n);
        for _ in 0..n {
            let key = r.bytes()?.to_vec();
            let count = r.varint()?;
            let np = r.count(2)?;
            let mut positions = Vec::with_capacity(np);
            for _ in 0..np {
                let page = r.varint()?;
                let off = u32::try_from(r.varint()?).map_err(|_| IssdError::Decode("offset over 32 bits".into()))?;
                positions.push((page, off));
            }
            keys.push(KeyMatches { key, count, positions });
        }
        Ok(Self { keys })
    }
}

/// Multi-key occurrence counter over text pages.
#[derive(Debug, Clone)]
pub struct StringMatchKernel {
    layout: PageLayout,
    finders: Vec<memmem::Finder<'static>>,
    locate: bool,
}

impl StringMatchKernel {
    pub fn new(params: &StringMatchParams, layout: PageLayout) -> Result<Self> {
        if params.keys.is_empty() {
            return Err(invalid("string_match needs at least one key"));
        }
        for k in &params.keys {
            if k.is_empty() || k.contains('\n') || k.contains('\0') {
                return Err(invalid(format!("key {k:?} must be non-empty without newline or NUL")));
            }
        }
        let finders = params.keys.iter().map(|k| memmem::Finder::new(k.as_bytes()).into_owned()).collect();
        Ok(Self { layout, finders, locate: params.locate })
    }
}

impl Kernel for StringMatchKernel {
    fn name(&self) -> &str {
        "string_match"
    }
    fn layout(&self) -> PageLayout {
        self.layout
    }
    fn empty(&self) -> Partial {
        Partial::Matches(Matches::default())
    }
    fn map(&self, chunk: Chunk<'_>) -> Result<Partial> {
        let mut keys: Vec<KeyMatches> =
            self.finders.iter().map(|f| KeyMatches { key: f.needle().to_vec(), ..Default::default() }).collect();
        for (i, payload) in self.layout.payloads(chunk.bytes)?.enumerate() {
            let payload = payload?;
            let page = chunk.first_page + i as u64;
            for (f, k) in self.finders.iter().zip(keys.iter_mut()) {
                for off in f.find_iter(payload) {
                    k.count += 1;
                    if self.locate {
                        k.positions.push((page, off as u32));
                    }
                }
            }
        }
        Ok(Partial::Matches(Matches { keys }))
    }
    fn finish(&self, p: Partial) -> Result<Output> {
        let Partial::Matches(mut m) = p else {
            return Err(p.wrong_kind(self.name()));
        };
        if m.keys.is_empty() {
            m.keys =
                self.finders.iter().map(|f| KeyMatches { key: f.needle().to_vec(), ..Default::default() }).collect();
        }
        for k in &mut m.keys {
            k.positions.sort_unstable();
            if k.positions.windows(2).any(|w| w[0] == w[1]) {
                return Err(IssdError::PartialMismatch("an occurrence was reported twice (page mapped twice)".into()));
            }
        }
        Ok(Output::Matches(m))
    }
}

/// Offset in the unpaged text (concatenated payloads) of `(page, offset)` in a paged input.
pub fn logical_offset(layout: PageLayout, data: &[u8], page: u64, offset: u32) -> Result<u64> {
    let mut before = 0u64;
    for (i, p) in layout.payloads(data)?.enumerate() {
        let p = p?;
        if i as u64 == page {
            if offset as usize >= p.len() {
                return Err(invalid(format!("offset {offset} beyond page {page}'s payload")));
            }
            return Ok(before + u64::from(offset));
        }
        before += p.len() as u64;
    }
    Err(invalid(format!("page {page} beyond the input")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::run_serial;
    use crate::pages::pack_lines;

    #[test]
    fn counts_and_locates_every_key() {
        let layout = PageLayout::new(64).unwrap();
        let text = b"aaaa banana\nband on the run\nno keys\nbanana bandana\n";
        let pages = pack_lines(layout, text).unwrap();
        let params = StringMatchParams { keys: vec!["ana".into(), "band".into(), "zz".into()], locate: true };
        let k = StringMatchKernel::new(&params, layout).unwrap();
        let Output::Matches(m) = run_serial(&k, &pages).unwrap().output else { panic!("matches") };
        let counts: Vec<u64> = m.keys.iter().map(|k| k.count).collect();
        // non-overlapping like Python's bytes.count: "banana" holds "ana" once
        assert_eq!(counts, vec![3, 2, 0]);
        let flat: Vec<u64> =
            m.keys[1].positions.iter().map(|&(p, o)| logical_offset(layout, &pages, p, o).unwrap()).collect();
        let expect: Vec<u64> =
            text.windows(4).enumerate().filter(|(_, w)| w == b"band").map(|(i, _)| i as u64).collect();
        assert_eq!(flat, expect);
    }

    #[test]
    fn bad_keys_are_errors() {
        let layout = PageLayout::new(64).unwrap();
        let mk =
            |keys: Vec<&str>| StringMatchParams { keys: keys.into_iter().map(String::from).collect(), locate: true };
        assert!(StringMatchKernel::new(&mk(vec![]), layout).is_err());
        assert!(StringMatchKernel::new(&mk(vec![""]), layout).is_err());
        assert!(StringMatchKernel::new(&mk(vec!["a\nb"]), layout).is_err());
        let mut a = Matches { keys: vec![KeyMatches { key: b"x".to_vec(), ..Default::default() }] };
        let b = Matches { keys: vec![KeyMatches { key: b"y".to_vec(), ..Default::default() }] };
        assert!(a.merge(b).is_err());
    }
}
