//! Lines of a trace read with a bound on their length: a hostile file with one endless line costs at most
//! `MAX_LINE` bytes of memory, and bytes that are not UTF-8 are a malformed line, not a panic.

use super::MAX_LINE;
use std::io::BufRead;

/// UTF-8's byte order mark, which some tools write at the start of a text file.
pub(crate) const BOM: &[u8] = b"\xEF\xBB\xBF";

pub(crate) struct Lines<R: BufRead> {
    src: R,
    buf: Vec<u8>,
    line: u64,
    consumed: u64,
    eof: bool,
    /// The rest of a line already reported too long is still to be passed over (up to its end of line).
    skipping: bool,
}

impl<R: BufRead> Lines<R> {
    pub fn new(src: R) -> Self {
        Lines { src, buf: Vec::new(), line: 0, consumed: 0, eof: false, skipping: false }
    }

    pub fn consumed(&self) -> u64 {
        self.consumed
    }

    /// The source's buffered bytes (empty at its end), retried when interrupted, with how many of them reach the
    /// line's end and whether they include it.
    fn chunk(src: &mut R) -> std::io::Result<(&[u8], usize, bool)> {
        loop {
            match src.fill_buf() {
                Ok(_) => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        // Filled: this call hands back what is buffered (the borrow checker takes no slice out of the loop).
        let c = src.fill_buf()?;
        let (take, done) = match memchr::memchr(b'\n', c) {
            Some(i) => (i + 1, true),
            None => (c.len(), false),
        };
        Ok((c, take, done))
    }

    /// Passes over the rest of a line reported too long, up to and including its end of line.
    fn skip_rest(&mut self) -> Result<(), (u64, String)> {
        loop {
            let (chunk, take, done) = Self::chunk(&mut self.src).map_err(|e| {
                self.eof = true;
                (self.line, format!("cannot read the file: {e}"))
            })?;
            if chunk.is_empty() {
                self.eof = true;
                self.skipping = false;
                return Ok(());
            }
            self.src.consume(take);
            self.consumed += take as u64;
            if done {
                self.skipping = false;
                return Ok(());
            }
        }
    }

    /// The next line (number, text without its end of line), `None` at the end; `Err((number, why))` for a line
    /// that is too long, not UTF-8, or unreadable (the reader goes on after it).
    pub fn next_line(&mut self) -> Result<Option<(u64, &str)>, (u64, String)> {
        if self.eof {
            return Ok(None);
        }
        if self.skipping {
            self.skip_rest()?;
            if self.eof {
                return Ok(None);
            }
        }
        self.buf.clear();
        let mut too_long = false;
        loop {
            let (chunk, take, done) = match Self::chunk(&mut self.src) {
                Ok(c) => c,
                Err(e) => {
                    self.eof = true;
                    self.line += 1;
                    return Err((self.line, format!("cannot read the file: {e}")));
                }
            };
            if chunk.is_empty() {
                self.eof = true;
                if self.buf.is_empty() && !too_long {
                    return Ok(None);
                }
                break;
            }
            // Room for the longest line and its "\r\n"; one byte more marks it too long.
            let room = MAX_LINE + 3 - self.buf.len().min(MAX_LINE + 3);
            let keep = take.min(room);
            self.buf.extend_from_slice(&chunk[..keep]);
            too_long = self.buf.len() > MAX_LINE + 2;
            self.src.consume(keep);
            self.consumed += keep as u64;
            if too_long {
                // Reported now, its rest passed over on the next call: a line without end (a device such as
                // /dev/zero, a damaged file) stops the reader at once instead of being read to its end first.
                self.skipping = !(keep == take && done);
                break;
            }
            if done {
                break;
            }
        }
        self.line += 1;
        if self.buf.last() == Some(&b'\n') {
            self.buf.pop();
        }
        if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        if self.line == 1 && self.buf.starts_with(BOM) {
            self.buf.drain(..BOM.len()); // a Windows tool's UTF-8 byte order mark (MSR's traces came from Windows)
        }
        if too_long || self.buf.len() > MAX_LINE {
            return Err((self.line, format!("line longer than {MAX_LINE} bytes")));
        }
        match std::str::from_utf8(&self.buf) {
            Ok(s) => Ok(Some((self.line, s))),
            Err(e) => Err((self.line, format!("not UTF-8 text (byte {} of the line)", e.valid_up_to() + 1))),
        }
    }
}
