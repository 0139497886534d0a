//! word_count (Phoenix, Table 1): counts the occurrences of every distinct word. A word is a maximal run of ASCII
//! letters, compared case-insensitively (stored lowercased); everything else separates words. Text pages hold
//! whole lines, so no word straddles pages. Output: (word, count) by count descending, then word ascending,
//! optionally cut to the `top` most frequent.

use super::partial::Mergeable;
use super::{Chunk, Kernel, Output, Partial};
use crate::codec::{bytes_len, varint_len, Body, Reader, Writer};
use crate::error::{IssdError, Result};
use crate::pages::PageLayout;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Parameters of `word_count`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WordCountParams {
    /// Keep only the most frequent words (all when absent).
    #[serde(default)]
    pub top: Option<usize>,
}

/// Word -> occurrences (a Map task's or a merge's).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WordCounts(pub HashMap<Vec<u8>, u64>);

impl WordCounts {
    fn sorted(&self) -> Vec<(&Vec<u8>, u64)> {
        let mut v: Vec<_> = self.0.iter().map(|(w, &c)| (w, c)).collect();
        v.sort_unstable();
        v
    }

    /// Adds the words of one text payload.
    fn count(&mut self, text: &[u8]) {
        let mut word = Vec::with_capacity(32);
        for &b in text.iter().chain(std::iter::once(&b' ')) {
            if b.is_ascii_alphabetic() {
                word.push(b.to_ascii_lowercase());
            } else if !word.is_empty() {
                match self.0.get_mut(word.as_slice()) {
                    Some(c) => *c += 1,
                    None => {
                        self.0.insert(word.clone(), 1);
                    }
                }
                word.clear();
            }
        }
    }
}

impl Mergeable for WordCounts {
    fn merge(&mut self, other: Self) -> Result<()> {
        if self.0.len() < other.0.len() {
            let mine = std::mem::replace(&mut self.0, other.0);
            return self.merge(WordCounts(mine));
        }
        for (w, c) in other.0 {
            *self.0.entry(w).or_insert(0) += c;
        }
        Ok(())
    }
}

impl Body for WordCounts {
    fn body_len(&self) -> usize {
        varint_len(self.0.len() as u64) + self.0.iter().map(|(w, &c)| bytes_len(w.len()) + varint_len(c)).sum::<usize>()
    }
    fn encode_body(&self, w: &mut Writer) {
        w.varint(self.0.len() as u64);
        for (word, c) in self.sorted() {
            w.bytes(word);
            w.varint(c);
        }
    }
    fn decode_body(r: &mut Reader<'_>) -> Result<Self> {
        let n = r.count(2)?;
        let mut m = HashMap::with_capacity(n);
        for _ in 0..n {
            let word = r.bytes()?.to_vec();
            let c = r.varint()?;
            if m.insert(word, c).is_some() {
                return Err(IssdError::Decode("a word appears twice".into()));
            }
        }
        Ok(Self(m))
    }
}

/// Final word counts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WordCountOutput {
    /// Words counted in the whole input (all of them, even when `words` is cut to the top ones).
    pub total: u64,
    pub distinct: u64,
    /// (word, count), count descending then word ascending.
    pub words: Vec<(Vec<u8>, u64)>,
}

impl Body for WordCountOutput {
    fn body_len(&self) -> usize {
        varint_len(self.total)
            + varint_len(self.distinct)
            + varint_len(self.words.len() as u64)
            + self.words.iter().map(|(w, c)| bytes_len(w.len()) + varint_len(*c)).sum::<usize>()
    }
    fn encode_body(&self, w: &mut Writer) {
        w.varint(self.total);
        w.varint(self.distinct);
        w.varint(self.words.len() as u64);
        for (word, c) in &self.words {
            w.bytes(word);
            w.varint(*c);
        }
    }
    fn decode_body(r: &mut Reader<'_>) -> Result<Self> {
        let (total, distinct) = (r.varint()?, r.varint()?);
        let n = r.count(2)?;
        let mut words = Vec::with_capacity(n);
        for _ in 0..n {
            words.push((r.bytes()?.to_vec(), r.varint()?));
        }
        Ok(Self { total, distinct, words })
    }
}

/// Word counter over text pages.
#[derive(Debug, Clone)]
pub struct WordCountKernel {
    layout: PageLayout,
    top: Option<usize>,
}

impl WordCountKernel {
    pub fn new(params: &WordCountParams, layout: PageLayout) -> Result<Self> {
        Ok(Self { layout, top: params.top })
    }
}

impl Kernel for WordCountKernel {
    fn name(&self) -> &str {
        "word_count"
    }
    fn layout(&self) -> PageLayout {
        self.layout
    }
    fn empty(&self) -> Partial {
        Partial::WordCounts(WordCounts::default())
    }
    fn map(&self, chunk: Chunk<'_>) -> Result<Partial> {
        let mut wc = WordCounts::default();
        for payload in self.layout.payloads(chunk.bytes)? {
            wc.count(payload?);
        }
        Ok(Partial::WordCounts(wc))
    }
    fn finish(&self, p: Partial) -> Result<Output> {
        let Partial::WordCounts(wc) = p else {
            return Err(p.wrong_kind(self.name()));
        };
        let total = wc.0.values().sum();
        let distinct = wc.0.len() as u64;
        let mut words: Vec<(Vec<u8>, u64)> = wc.0.into_iter().collect();
        words.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        if let Some(top) = self.top {
            words.truncate(top);
        }
        Ok(Output::WordCounts(WordCountOutput { total, distinct, words }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::run_serial;
    use crate::pages::pack_lines;

    #[test]
    fn counts_case_insensitive_letter_runs() {
        let layout = PageLayout::new(64).unwrap();
        let pages = pack_lines(layout, b"The cat, the CAT.\nit's 3 cats\nthe\n").unwrap();
        let k = WordCountKernel::new(&WordCountParams { top: Some(3) }, layout).unwrap();
        let Output::WordCounts(o) = run_serial(&k, &pages).unwrap().output else { panic!("word counts") };
        assert_eq!((o.total, o.distinct), (8, 5));
        let w: Vec<(&[u8], u64)> = o.words.iter().map(|(w, c)| (w.as_slice(), *c)).collect();
        assert_eq!(w, vec![(&b"the"[..], 3), (&b"cat"[..], 2), (&b"cats"[..], 1)]);
    }

    #[test]
    fn encoding_round_trips_and_rejects_duplicates() {
        let mut wc = WordCounts::default();
        wc.count(b"a b a c");
        let mut w = Writer::default();
        wc.encode_body(&mut w);
        let b = w.into_vec();
        assert_eq!(b.len(), wc.body_len());
        assert_eq!(WordCounts::decode_body(&mut Reader::new(&b)).unwrap(), wc);
        let mut w = Writer::default();
        w.varint(2);
        for _ in 0..2 {
            w.bytes(b"x");
            w.varint(1);
        }
        assert!(WordCounts::decode_body(&mut Reader::new(&w.into_vec())).is_err());
    }
}
