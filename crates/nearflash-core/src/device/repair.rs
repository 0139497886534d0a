//! `Device::repair`: the explicit way back from a damaged image. It salvages the files (`image::Salvage`),
//! rebuilds the FTL leniently, checks every mapped sector against its checksum, drops what fails, closes the
//! image cleanly, and reports exactly what it could not recover.

use super::Device;
use crate::error::Result;
use crate::ftl::{Ftl, Location, RecoverOptions};
use crate::image::{RepairReport, Salvage};
use std::path::Path;

impl Device {
    /// Repairs the image in `dir` in place (it must not be open). Afterwards it opens cleanly; the report lists
    /// every file found damaged, the action taken, and the LBAs whose data was lost.
    pub fn repair(dir: &Path) -> Result<RepairReport> {
        let s = Salvage::open(dir)?;
        let Salvage { image, cfg, store, checkpoint, l2p_rebuilt, l2p_current, mut report, .. } = s;
        let opts = RecoverOptions { lenient: true, trust_l2p: !l2p_rebuilt && (l2p_current || checkpoint.is_none()) };
        let (mut ftl, rec) = Ftl::recover_with(&cfg, store, checkpoint, opts)?;
        let mut lost = rec.lost_lbas.clone();
        // Every mapped sector must match the checksum its OOB record holds.
        if ftl.store.data.materialises() {
            let mut buf = vec![0u8; cfg.ftl.sector_size.0 as usize];
            let mut bad = Vec::new();
            for lpn in 0..ftl.logical_sectors() {
                let loc = ftl.locate(lpn as u32);
                if matches!(loc, Location::Flash(_)) && !ftl.read_sector(loc, &mut buf).unwrap_or(false) {
                    bad.push(lpn);
                }
            }
            if !bad.is_empty() {
                report.actions.push(format!("data.bin: {} mapped sector(s) fail their checksum; unmapped", bad.len()));
            }
            for &lpn in &bad {
                ftl.trim(lpn as u32, 1)?;
            }
            lost.extend(bad);
        }
        report.damaged_pages = rec.damaged_pages.clone();
        if !report.damaged_pages.is_empty() {
            report.actions.push(format!(
                "oob.bin: {} page record(s) fail their checksum; their sectors were not recovered",
                report.damaged_pages.len()
            ));
        }
        report.set_lost(lost);
        if report.lost_lbas() > 0 {
            report.unrecoverable.push(format!(
                "{} LBA(s) lost their data and now read as zeroes: {}",
                report.lost_lbas(),
                summarise(&report.lost_lba_ranges)
            ));
        }
        ftl.check_consistency()?;
        image.close(&mut ftl)?;
        if report.actions.is_empty() {
            report.actions.push("no damage found".into());
        }
        Ok(report)
    }
}

fn summarise(ranges: &[(u64, u64)]) -> String {
    let mut parts: Vec<String> =
        ranges.iter().take(8).map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") }).collect();
    if ranges.len() > 8 {
        parts.push(format!("and {} more ranges", ranges.len() - 8));
    }
    parts.join(", ")
}
