//! The Error Information log (Get Log Page 0x01) and its vendor companion (0xC1), which carries each error's reason
//! in words: a host library that gets "Invalid Field in Command" reads these to say *which* field and why, as
//! `nvme error-log` does on a real drive.

use super::Status;
use std::collections::VecDeque;

/// Entries the device keeps (Identify Controller's ELPE is this minus one); older ones are dropped.
pub const ERROR_LOG_ENTRIES: usize = 64;
/// Bytes of one Error Information entry.
pub const ERROR_ENTRY_BYTES: usize = 64;

/// Longest reason kept (longer ones are cut at a character boundary), so the 0xC1 page stays bounded.
pub const MAX_REASON_BYTES: usize = 512;

/// Why a command failed, as the firmware that rejected it explains it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ErrorDetail {
    /// Byte of the 64-byte command that holds the offending field (e.g. 40 for CDW10), if one does.
    pub byte: Option<u8>,
    pub reason: String,
}

/// A command the device refused: the status it completes with and why (the error logs' reason).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: Status,
    pub detail: ErrorDetail,
}

impl Refusal {
    /// `status` because of `reason`; `byte`: the byte of the 64-byte command holding the offending field.
    pub fn new(status: Status, byte: Option<u8>, reason: impl Into<String>) -> Self {
        Refusal { status, detail: ErrorDetail { byte, reason: reason.into() } }
    }
}

/// One failed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorEntry {
    /// A number unique to this error (1, 2, ...), as the specification's Error Count.
    pub count: u64,
    pub sqid: u16,
    pub cid: u16,
    pub status: Status,
    /// First LBA of the command, for commands that address LBAs.
    pub lba: Option<u64>,
    pub detail: Option<ErrorDetail>,
}

/// The most recent errors, newest last.
#[derive(Debug, Default)]
pub struct ErrorLog {
    count: u64,
    entries: VecDeque<ErrorEntry>,
}

impl ErrorLog {
    pub fn record(&mut self, sqid: u16, cid: u16, status: Status, lba: Option<u64>, mut detail: Option<ErrorDetail>) {
        if let Some(d) = detail.as_mut().filter(|d| d.reason.len() > MAX_REASON_BYTES) {
            let cut = (0..=MAX_REASON_BYTES).rev().find(|&i| d.reason.is_char_boundary(i)).unwrap_or(0);
            d.reason.truncate(cut);
        }
        self.count += 1;
        if self.entries.len() == ERROR_LOG_ENTRIES {
            self.entries.pop_front();
        }
        self.entries.push_back(ErrorEntry { count: self.count, sqid, cid, status, lba, detail });
    }

    /// Errors recorded since the device was opened.
    pub fn total(&self) -> u64 {
        self.count
    }

    /// The entry of command `cid` on `sqid`, if it is still kept (the newest such).
    pub fn find(&self, sqid: u16, cid: u16) -> Option<&ErrorEntry> {
        self.entries.iter().rev().find(|e| e.sqid == sqid && e.cid == cid)
    }

    /// Log page 0x01: [`ERROR_LOG_ENTRIES`] entries of 64 bytes, newest first, unused ones zero.
    pub fn page(&self) -> Vec<u8> {
        let mut b = vec![0u8; ERROR_LOG_ENTRIES * ERROR_ENTRY_BYTES];
        for (e, out) in self.entries.iter().rev().zip(b.chunks_exact_mut(ERROR_ENTRY_BYTES)) {
            out[0..8].copy_from_slice(&e.count.to_le_bytes());
            out[8..10].copy_from_slice(&e.sqid.to_le_bytes());
            out[10..12].copy_from_slice(&e.cid.to_le_bytes());
            // Status Field as in the CQE's dword 3 bits 31:17 (bit 0 is the phase tag, reported as 0)
            out[12..14].copy_from_slice(&(e.status.field() << 1).to_le_bytes());
            let location = e.detail.as_ref().and_then(|d| d.byte).map_or(0xFFFF, u16::from);
            out[14..16].copy_from_slice(&location.to_le_bytes());
            out[16..24].copy_from_slice(&e.lba.unwrap_or(0).to_le_bytes());
            out[24..28].copy_from_slice(&1u32.to_le_bytes()); // namespace
            out[28] = super::pages::LOG_VENDOR_ERROR_REASONS; // Vendor Specific Information Available
        }
        b
    }

    /// Log page 0xC1: UTF-8 JSON, `[{"error_count", "sqid", "cid", "lba", "byte", "reason"}]` for the kept
    /// entries, newest first (`null` where the command addresses no LBA, names no field or gave no reason).
    pub fn reasons_page(&self) -> Vec<u8> {
        let rows: Vec<serde_json::Value> = self
            .entries
            .iter()
            .rev()
            .map(|e| {
                let d = e.detail.as_ref();
                serde_json::json!({
                    "error_count": e.count, "sqid": e.sqid, "cid": e.cid, "lba": e.lba,
                    "byte": d.and_then(|d| d.byte), "reason": d.map(|d| d.reason.as_str()),
                })
            })
            .collect();
        serde_json::Value::Array(rows).to_string().into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detail(byte: Option<u8>, reason: &str) -> Option<ErrorDetail> {
        Some(ErrorDetail { byte, reason: reason.into() })
    }

    #[test]
    fn entries_are_laid_out_newest_first_at_spec_offsets() {
        let mut log = ErrorLog::default();
        log.record(1, 7, Status::LBA_OUT_OF_RANGE, Some(1 << 40), None);
        log.record(2, 9, Status::INVALID_FIELD, None, detail(Some(44), "slot 9 >= 4 slots"));
        let p = log.page();
        assert_eq!(p.len(), ERROR_LOG_ENTRIES * ERROR_ENTRY_BYTES);
        let u16_at = |o: usize| u16::from_le_bytes([p[o], p[o + 1]]);
        assert_eq!(u64::from_le_bytes(p[0..8].try_into().unwrap()), 2);
        assert_eq!((u16_at(8), u16_at(10)), (2, 9));
        assert_eq!((u16_at(12) >> 1) & 0xFF, 0x02, "status code in bits 8:1");
        assert_eq!(u16_at(14), 44);
        assert_eq!(p[28], super::super::pages::LOG_VENDOR_ERROR_REASONS);
        let second = &p[64..128];
        assert_eq!(u64::from_le_bytes(second[16..24].try_into().unwrap()), 1 << 40);
        assert_eq!(u16::from_le_bytes([second[14], second[15]]), 0xFFFF, "no parameter location");
        assert!(p[128..].iter().all(|&b| b == 0));
        let reasons: serde_json::Value = serde_json::from_slice(&log.reasons_page()).unwrap();
        assert_eq!(reasons.as_array().unwrap().len(), 2);
        assert_eq!(reasons[0]["reason"], "slot 9 >= 4 slots");
        assert_eq!(reasons[0]["error_count"], 2);
        assert!(reasons[0]["lba"].is_null() && reasons[1]["reason"].is_null());
        assert_eq!(reasons[1]["lba"], 1u64 << 40);
    }

    #[test]
    fn keeps_the_newest_entries_and_counts_all() {
        let mut log = ErrorLog::default();
        for cid in 0..(ERROR_LOG_ENTRIES as u16 + 10) {
            log.record(1, cid, Status::INVALID_FIELD, None, None);
        }
        assert_eq!(log.total(), ERROR_LOG_ENTRIES as u64 + 10);
        assert!(log.find(1, 3).is_none(), "dropped");
        assert_eq!(log.find(1, ERROR_LOG_ENTRIES as u16 + 9).unwrap().count, ERROR_LOG_ENTRIES as u64 + 10);
        let p = log.page();
        assert_eq!(u64::from_le_bytes(p[p.len() - 64..p.len() - 56].try_into().unwrap()), 11, "oldest kept last");
    }
}
