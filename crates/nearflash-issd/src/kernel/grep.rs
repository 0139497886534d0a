//! grep (Table 1: GNU grep 2.6.3): returns the lines of a text input that contain a fixed string (searched with
//! `memchr::memmem`) or match a regular expression (`regex` crate, `^`/`$` anchored at line ends). Text pages
//! hold whole lines (see [`crate::pages`]), so a match never straddles pages and each FMC greps its pages alone.

use super::selection::Selection;
use super::{Chunk, Kernel, Output, Partial};
use crate::error::{invalid, Result};
use crate::pages::PageLayout;
use memchr::{memchr, memchr_iter, memmem, memrchr};
use regex::bytes::{Regex, RegexBuilder};
use serde::{Deserialize, Serialize};

/// Parameters of `grep`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrepParams {
    pub pattern: String,
    /// Treat `pattern` as a regular expression (else a fixed string).
    #[serde(default)]
    pub regex: bool,
}

#[derive(Debug, Clone)]
enum Matcher {
    Literal(Box<memmem::Finder<'static>>),
    Regex(Regex),
}

impl Matcher {
    /// Start of the leftmost match in `hay`.
    fn find(&self, hay: &[u8]) -> Option<usize> {
        match self {
            Matcher::Literal(f) => f.find(hay),
            Matcher::Regex(r) => r.find(hay).map(|m| m.start()),
        }
    }
    /// Whether one line (without its `\n`) matches: guards against regex matches that run across lines.
    fn line_matches(&self, line: &[u8]) -> bool {
        match self {
            Matcher::Literal(_) => true,
            Matcher::Regex(r) => r.is_match(line),
        }
    }
}

/// Line filter over text pages.
#[derive(Debug, Clone)]
pub struct GrepKernel {
    layout: PageLayout,
    matcher: Matcher,
}

impl GrepKernel {
    pub fn new(params: &GrepParams, layout: PageLayout) -> Result<Self> {
        if params.pattern.is_empty() {
            return Err(invalid("grep needs a non-empty pattern"));
        }
        let matcher = if params.regex {
            let re = RegexBuilder::new(&params.pattern)
                .multi_line(true)
                .build()
                .map_err(|e| invalid(format!("bad regular expression: {e}")))?;
            Matcher::Regex(re)
        } else {
            if params.pattern.contains('\n') {
                return Err(invalid("a grep fixed string cannot hold a newline"));
            }
            Matcher::Literal(Box::new(memmem::Finder::new(params.pattern.as_bytes()).into_owned()))
        };
        Ok(Self { layout, matcher })
    }

    /// Appends the matching lines of one page payload; returns how many.
    fn grep_payload(&self, payload: &[u8], out: &mut Vec<u8>) -> u64 {
        let (mut pos, mut hits) = (0, 0);
        while pos < payload.len() {
            let Some(m) = self.matcher.find(&payload[pos..]).map(|i| pos + i) else { break };
            let start = memrchr(b'\n', &payload[..m]).map_or(0, |i| i + 1);
            let end = memchr(b'\n', &payload[m..]).map_or(payload.len(), |i| m + i + 1);
            let line = &payload[start..end];
            if self.matcher.line_matches(line.strip_suffix(b"\n").unwrap_or(line)) {
                out.extend_from_slice(line);
                hits += 1;
            }
            pos = end;
        }
        hits
    }
}

impl Kernel for GrepKernel {
    fn name(&self) -> &str {
        "grep"
    }
    fn layout(&self) -> PageLayout {
        self.layout
    }
    fn empty(&self) -> Partial {
        Partial::Selection(Selection::default())
    }
    fn map(&self, chunk: Chunk<'_>) -> Result<Partial> {
        Selection::map_chunk(self.layout, chunk, |out| {
            let (mut lines, mut hits) = (0u64, 0u64);
            for payload in self.layout.payloads(chunk.bytes)? {
                let payload = payload?;
                lines += memchr_iter(b'\n', payload).count() as u64;
                hits += self.grep_payload(payload, out);
            }
            Ok((lines, hits))
        })
    }
    fn finish(&self, p: Partial) -> Result<Output> {
        Selection::finish_partial(self.name(), p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::run_serial;
    use crate::pages::pack_lines;

    fn grep(pattern: &str, regex: bool, text: &[u8]) -> (u64, u64, Vec<u8>) {
        let layout = PageLayout::new(64).unwrap();
        let pages = pack_lines(layout, text).unwrap();
        let k = GrepKernel::new(&GrepParams { pattern: pattern.into(), regex }, layout).unwrap();
        let Output::Selection(o) = run_serial(&k, &pages).unwrap().output else { panic!("selection") };
        (o.scanned, o.items, o.bytes)
    }

    #[test]
    fn fixed_strings_return_whole_lines_once() {
        let text = b"the cat sat\nno match here\ncat cat cat\ncatalog\n";
        let (lines, hits, out) = grep("cat", false, text);
        assert_eq!((lines, hits), (4, 3));
        assert_eq!(out, b"the cat sat\ncat cat cat\ncatalog\n");
    }

    #[test]
    fn regexes_are_anchored_per_line_and_never_span_lines() {
        let text = b"ab\ncd\nabcd\nxab\n";
        assert_eq!(grep("^ab", true, text).2, b"ab\nabcd\n");
        assert_eq!(grep("cd$", true, text).2, b"cd\nabcd\n");
        // `b\sc` would match across "ab\ncd" in the raw bytes; grep is per line
        assert_eq!(grep(r"b\sc", true, text).1, 0);
        assert_eq!(grep(r"x?ab\b", true, text).2, b"ab\nxab\n");
    }

    #[test]
    fn bad_patterns_are_errors() {
        let layout = PageLayout::new(64).unwrap();
        assert!(GrepKernel::new(&GrepParams { pattern: String::new(), regex: false }, layout).is_err());
        assert!(GrepKernel::new(&GrepParams { pattern: "(".into(), regex: true }, layout).is_err());
        assert!(GrepKernel::new(&GrepParams { pattern: "a\nb".into(), regex: false }, layout).is_err());
    }
}
