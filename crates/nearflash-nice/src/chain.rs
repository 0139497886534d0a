//! Locating and streaming a file through its OOB list, and repairing the list after GC (paper Sec. IV-B), as
//! functions over an abstract mapping and flash so that the firmware and property tests share them.
//!
//! * Locate: the head page's OOB gives the inode number (read 1); the inode's page gives the LPN list (read 2).
//! * Stream: page i's OOB gives page i+1's PPN, so the pages are read without mapping lookups.
//! * GC moves a page: its LPN is unchanged but the neighbours' PPN links to it are stale. A walk detects the
//!   mismatch (the page found at the linked PPN is erased, not NICE's, or holds another LPN), takes the newest PPN
//!   from the mapping, and marks the link "vulnerable" so later walks skip it. The firmware may also mark links
//!   eagerly when it relocates a page or the host overwrites one ([`FileChain::page_moved`]). When every link of a
//!   file is vulnerable, [`FileChain::rebuild`] gives fresh records for all its pages (the paper rebuilds the
//!   file's PPN list then).
//!
//! A GC move whose old copy is still readable (block not yet erased) leaves a link to identical data: following
//! it reads correct bytes, so it is not a mismatch. Host overwrites change the data, and the firmware sees them:
//! they must be reported with `page_moved` before the next walk.

use crate::error::{invalid, Result};
use crate::oob::{chain_records, OobRecord, NONE};

/// The FTL's logical-to-physical map (the newest mapping).
pub trait Mapping {
    fn ppn(&self, lpn: u64) -> Option<u64>;
}

/// Flash as the chain sees it: reading a page yields its OOB record (None when erased or not decodable).
pub trait PageReader {
    fn read_oob(&mut self, ppn: u64) -> Option<OobRecord>;
}

/// The firmware's DRAM state of one file: its LPN list (from the inode) and which successor links are stale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChain {
    pub inode: u32,
    pub lpns: Vec<u64>,
    /// `vulnerable[i]`: the successor PPN stored in page i's OOB may be stale.
    pub vulnerable: Vec<bool>,
}

/// How a file was located: flash reads spent (at most 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Located {
    pub inode: u32,
    pub flash_reads: u32,
}

/// Locates the file whose first page is `head_lpn`: reads its page (OOB: inode number), then the inode's page
/// through `inode_lpns` (one read; it returns the file's LPN list). Errors when the page is not a file's first.
pub fn locate(
    head_lpn: u64,
    map: &dyn Mapping,
    flash: &mut dyn PageReader,
    inode_lpns: &mut dyn FnMut(u32) -> Option<Vec<u64>>,
) -> Result<(Located, FileChain)> {
    let ppn = map.ppn(head_lpn).ok_or_else(|| invalid(format!("LPN {head_lpn} is not mapped")))?;
    let rec = flash.read_oob(ppn).ok_or_else(|| invalid(format!("LPN {head_lpn} carries no NICE record")))?;
    if !rec.first || u64::from(rec.lpn) != head_lpn {
        return Err(invalid(format!("LPN {head_lpn} is not the first page of a file")));
    }
    let lpns = inode_lpns(rec.inode).ok_or_else(|| invalid(format!("inode {} is unknown", rec.inode)))?;
    if lpns.first() != Some(&head_lpn) {
        return Err(invalid(format!("inode {} no longer starts at LPN {head_lpn}", rec.inode)));
    }
    let n = lpns.len();
    Ok((Located { inode: rec.inode, flash_reads: 2 }, FileChain { inode: rec.inode, lpns, vulnerable: vec![false; n] }))
}

/// The outcome of streaming a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Walk {
    /// The PPN each page was finally read from, in file order.
    pub ppns: Vec<u64>,
    /// Pages read (including reads of stale PPNs that did not hold the expected page).
    pub page_reads: u64,
    /// Links found stale during this walk.
    pub mismatches: u64,
    /// Mapping lookups (first page, vulnerable links and mismatches).
    pub map_lookups: u64,
}

impl FileChain {
    /// Marks the links into page `index` stale (GC relocated it, or the host overwrote it).
    pub fn page_moved(&mut self, index: usize) {
        // Only the predecessor's successor link names the moved page's PPN; the moved page keeps its own links.
        if index > 0 && index <= self.vulnerable.len() {
            self.vulnerable[index - 1] = true;
        }
    }

    /// Whether every link is stale (the paper's trigger for rebuilding the list). A one-page file has no links.
    pub fn needs_rebuild(&self) -> bool {
        self.lpns.len() > 1 && self.vulnerable[..self.lpns.len() - 1].iter().all(|&v| v)
    }

    /// Streams the file: follows OOB successor links, falling back to the mapping for vulnerable or mismatching
    /// links. Errors when a page is unmapped or the mapping points at a page that is not this file's.
    pub fn walk(&mut self, map: &dyn Mapping, flash: &mut dyn PageReader) -> Result<Walk> {
        let n = self.lpns.len();
        let mut w = Walk { ppns: Vec::with_capacity(n), page_reads: 0, mismatches: 0, map_lookups: 0 };
        let mut next: Option<u64> = None;
        for i in 0..n {
            let lpn = self.lpns[i];
            let mut found = None;
            if let Some(ppn) = next.filter(|_| i == 0 || !self.vulnerable[i - 1]) {
                w.page_reads += 1;
                match flash.read_oob(ppn) {
                    Some(r) if u64::from(r.lpn) == lpn => found = Some((ppn, r)),
                    _ => {
                        w.mismatches += 1;
                        self.vulnerable[i - 1] = true;
                    }
                }
            }
            let (ppn, rec) = match found {
                Some(x) => x,
                None => {
                    w.map_lookups += 1;
                    let ppn = map.ppn(lpn).ok_or_else(|| invalid(format!("LPN {lpn} of inode {} unmapped", self.inode)))?;
                    w.page_reads += 1;
                    let rec = flash
                        .read_oob(ppn)
                        .filter(|r| u64::from(r.lpn) == lpn)
                        .ok_or_else(|| invalid(format!("page of LPN {lpn} (PPN {ppn}) holds no matching record")))?;
                    (ppn, rec)
                }
            };
            w.ppns.push(ppn);
            next = (rec.succ_ppn != NONE && rec.succ_lpn != NONE && i + 1 < n && u64::from(rec.succ_lpn) == self.lpns[i + 1])
                .then_some(u64::from(rec.succ_ppn));
            if next.is_none() && i + 1 < n {
                // The record's successor is not the inode's next page: the link is useless.
                self.vulnerable[i] = true;
            }
        }
        Ok(w)
    }

    /// Fresh records for every page at its newest PPN (the firmware reprograms them), clearing the stale marks.
    pub fn rebuild(&mut self, map: &dyn Mapping, partition: u8, op: u8) -> Result<Vec<OobRecord>> {
        let ppns: Vec<u64> = self
            .lpns
            .iter()
            .map(|&l| map.ppn(l).ok_or_else(|| invalid(format!("LPN {l} unmapped"))))
            .collect::<Result<_>>()?;
        let recs = chain_records(self.inode, partition, op, &self.lpns, &ppns)?;
        self.vulnerable.iter_mut().for_each(|v| *v = false);
        Ok(recs)
    }
}
