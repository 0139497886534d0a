//! Data structures returned by Identify and Get Log Page, laid out at the offsets the NVMe base specification
//! gives, so that tools reading real drives read these too.

/// Log page identifiers.
pub const LOG_ERROR_INFO: u8 = 0x01;
pub const LOG_SMART: u8 = 0x02;
/// Vendor-specific log page: each entry of the Error Information log with its LBA and reason, as UTF-8 JSON.
pub const LOG_VENDOR_ERROR_REASONS: u8 = 0xC1;
/// Vendor-specific log page: the device statistics as UTF-8 JSON (same content as the SDK's report).
pub const LOG_VENDOR_STATS: u8 = 0xCA;

/// Identify CNS values.
pub const CNS_NAMESPACE: u8 = 0x00;
pub const CNS_CONTROLLER: u8 = 0x01;
pub const CNS_ACTIVE_NAMESPACES: u8 = 0x02;

/// Fields of Identify Controller that describe this device.
pub struct ControllerIdentity<'a> {
    pub serial: &'a str,
    pub model: &'a str,
    pub firmware: &'a str,
    /// Maximum data transfer size in bytes.
    pub mdts_bytes: u64,
    pub max_queue_entries: u32,
}

/// Space-padded ASCII field (non-printable characters become '?').
fn put_ascii(b: &mut [u8], s: &str) {
    b.fill(b' ');
    for (d, c) in b.iter_mut().zip(s.bytes()) {
        *d = if c.is_ascii_graphic() || c == b' ' { c } else { b'?' };
    }
}

/// Identify Controller data structure (4096 bytes).
pub fn identify_controller(id: &ControllerIdentity) -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    b[0..2].copy_from_slice(&0x1d1du16.to_le_bytes()); // VID
    b[2..4].copy_from_slice(&0x1d1du16.to_le_bytes()); // SSVID
    put_ascii(&mut b[4..24], id.serial);
    put_ascii(&mut b[24..64], id.model);
    put_ascii(&mut b[64..72], id.firmware);
    // MDTS: power of two in units of the 4 KiB minimum memory page.
    b[77] = (id.mdts_bytes / 4096).max(1).ilog2() as u8;
    b[80..84].copy_from_slice(&0x0001_0400u32.to_le_bytes()); // VER 1.4
    b[258] = 0x02; // AERL
    b[262] = (super::error_log::ERROR_LOG_ENTRIES - 1) as u8; // ELPE (0's based)
    b[512] = 0x66; // SQES: 64-byte entries
    b[513] = 0x44; // CQES: 16-byte entries
    b[514..516].copy_from_slice(&(id.max_queue_entries.min(65535) as u16).to_le_bytes()); // MAXCMD
    b[516..520].copy_from_slice(&1u32.to_le_bytes()); // NN
    b[520..522].copy_from_slice(&0x000Cu16.to_le_bytes()); // ONCS: DSM, Write Zeroes
    b[525] = 1; // VWC: volatile write cache present
    b
}

/// Identify Namespace data structure (4096 bytes) for namespace 1.
pub fn identify_namespace(lbas: u64, used_lbas: u64, lba_bytes: u32) -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    b[0..8].copy_from_slice(&lbas.to_le_bytes()); // NSZE
    b[8..16].copy_from_slice(&lbas.to_le_bytes()); // NCAP
    b[16..24].copy_from_slice(&used_lbas.to_le_bytes()); // NUSE
    b[24] = 0x01; // NSFEAT: thin provisioning (deallocated blocks free space)
    b[25] = 0; // NLBAF: one format
    b[26] = 0; // FLBAS: format 0
    b[33] = 0x01; // DLFEAT: deallocated blocks read as zeroes
    b[130] = lba_bytes.ilog2() as u8; // LBAF0.LBADS
    b
}

/// Active namespace list (4096 bytes): namespace 1.
pub fn active_namespaces() -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    b[0..4].copy_from_slice(&1u32.to_le_bytes());
    b
}

/// Inputs of the SMART / Health log.
#[derive(Debug, Clone, Default)]
pub struct SmartInfo {
    pub available_spare_pct: u8,
    pub percentage_used: u8,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub read_commands: u64,
    pub write_commands: u64,
    pub busy_minutes: u64,
    pub media_errors: u64,
}

/// SMART / Health Information log page (512 bytes).
pub fn smart_log(s: &SmartInfo) -> Vec<u8> {
    let mut b = vec![0u8; 512];
    let put128 = |b: &mut [u8], o: usize, v: u64| b[o..o + 16].copy_from_slice(&u128::from(v).to_le_bytes());
    b[1..3].copy_from_slice(&313u16.to_le_bytes()); // composite temperature, K
    b[3] = s.available_spare_pct;
    b[4] = 10; // available spare threshold
    b[5] = s.percentage_used;
    // Data units are thousands of 512-byte units, rounded up.
    put128(&mut b, 32, (s.bytes_read / 512).div_ceil(1000));
    put128(&mut b, 48, (s.bytes_written / 512).div_ceil(1000));
    put128(&mut b, 64, s.read_commands);
    put128(&mut b, 80, s.write_commands);
    put128(&mut b, 96, s.busy_minutes);
    put128(&mut b, 160, s.media_errors);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_at_spec_offsets() {
        let c = identify_controller(&ControllerIdentity {
            serial: "NF0001",
            model: "nearflash cosmos-plus",
            firmware: "0.1.0",
            mdts_bytes: 1 << 20,
            max_queue_entries: 1024,
        });
        assert_eq!(&c[4..10], b"NF0001");
        assert_eq!(c[10], b' ');
        assert_eq!(c[77], 8, "1 MiB = 2^8 x 4 KiB");
        let n = identify_namespace(1000, 10, 4096);
        assert_eq!(u64::from_le_bytes(n[0..8].try_into().unwrap()), 1000);
        assert_eq!(n[130], 12);
        let s = smart_log(&SmartInfo { bytes_read: 512_000, read_commands: 7, ..Default::default() });
        assert_eq!(s[32], 1);
        assert_eq!(s[64], 7);
    }
}
