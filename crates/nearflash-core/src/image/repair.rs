//! Salvaging a damaged image, file by file: what can be opened is kept, what cannot is set aside as
//! `<name>.damaged` and recreated empty, and every step is written down. The FTL then rebuilds its state
//! leniently (see `Ftl::recover_with`) and the device layer checks the data (see `Device::repair`).

use crate::store::FileHeader;
use crate::store::{MappedRecords, MappedU32};
use super::{lock, read_checkpoint, read_state, read_tree, DataStore, Durability, Headers, Image, TrimJournal};
use crate::config::{ConfigTree, DeviceConfig};
use crate::error::{Result, SimError};
use crate::ftl::{BlockTable, FtlStore};
use crate::nand::Geometry;
use std::fs;
use std::path::Path;

/// What a repair did and what it could not recover.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RepairReport {
    /// Each file's finding and the action taken, in order.
    pub actions: Vec<String>,
    /// What could not be recovered, in words (empty: nothing was lost).
    pub unrecoverable: Vec<String>,
    /// LBAs that no longer hold their data (they read as zeroes), as inclusive ranges.
    pub lost_lba_ranges: Vec<(u64, u64)>,
    /// Pages whose OOB record was damaged.
    pub damaged_pages: Vec<u64>,
}

impl RepairReport {
    /// Collapses sorted LBAs into inclusive ranges.
    pub fn set_lost(&mut self, mut lbas: Vec<u64>) {
        lbas.sort_unstable();
        lbas.dedup();
        let mut out: Vec<(u64, u64)> = Vec::new();
        for l in lbas {
            match out.last_mut() {
                Some((_, e)) if *e + 1 == l => *e = l,
                _ => out.push((l, l)),
            }
        }
        self.lost_lba_ranges = out;
    }

    pub fn lost_lbas(&self) -> u64 {
        self.lost_lba_ranges.iter().map(|(a, b)| b - a + 1).sum()
    }
}

/// The files of a damaged image, opened or recreated.
pub struct Salvage {
    pub image: Image,
    pub tree: ConfigTree,
    pub cfg: DeviceConfig,
    pub store: FtlStore,
    /// The checkpoint, when it was readable.
    pub checkpoint: Option<(BlockTable, u64)>,
    /// The mapping table was lost and must be rebuilt from the OOB area.
    pub l2p_rebuilt: bool,
    /// The mapping table is intact and current (clean close, digest matches): nothing needs replaying.
    pub l2p_current: bool,
    pub report: RepairReport,
}

fn set_aside(path: &Path, why: &str, report: &mut RepairReport) -> Result<()> {
    let name = path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    if path.exists() {
        let aside = path.with_extension("damaged");
        fs::rename(path, &aside)?;
        report.actions.push(format!("{name}: {why}; moved to {} and recreated", aside.display()));
    } else {
        report.actions.push(format!("{name}: {why}; recreated"));
    }
    Ok(())
}

impl Salvage {
    /// Opens every file of the image in `dir`, recreating those that cannot be used. Fails only when the
    /// configuration (`nearflash.toml`) is unreadable or the image is of another format.
    pub fn open(dir: &Path) -> Result<Salvage> {
        if !dir.is_dir() {
            return Err(SimError::Image(format!("{} is not a directory", dir.display())));
        }
        let mut report = RepairReport::default();
        let state = match read_state(dir) {
            Ok(s) => Some(s),
            Err(e) if e.to_string().contains("image format") => return Err(e),
            Err(e) => {
                if !super::looks_like_image(dir) {
                    return Err(e);
                }
                report.actions.push(format!("state.json: {e}; rewritten"));
                None
            }
        };
        let (tree, cfg) = read_tree(dir).map_err(|e| {
            SimError::Image(format!("cannot repair {}: the configuration is lost ({e})", dir.display()))
        })?;
        let lk = lock(dir)?;
        let h = Headers::new(&cfg);
        let geo = Geometry::from_config(&cfg);
        let materialised = state.as_ref().map_or_else(|| dir.join("data.bin").exists(), |s| s.materialised);
        let clean = state.as_ref().is_some_and(|s| s.clean);
        let durability = Durability::Fsync;
        let image = Image { dir: dir.to_path_buf(), _lock: lk, durability, materialised, ckpt: h.ckpt };

        let p = dir.join("oob.bin");
        let oob = match MappedRecords::open(&p, &h.oob) {
            Ok(m) => m,
            Err(e) => {
                set_aside(&p, &e.to_string(), &mut report)?;
                report.unrecoverable.push("oob.bin was lost: no stored sector can be verified or located".into());
                MappedRecords::create(&p, &h.oob)?
            }
        };
        let p = dir.join("l2p.bin");
        let (l2p, mut l2p_rebuilt) = match MappedU32::open(&p, &h.l2p) {
            Ok(m) => (m, false),
            Err(e) => {
                set_aside(&p, &e.to_string(), &mut report)?;
                (MappedU32::create(&p, &h.l2p)?, true)
            }
        };
        let data = if materialised {
            let p = dir.join("data.bin");
            match DataStore::open(&p, &h.data, geo.sector_size) {
                Ok(d) => d,
                Err(e) => reopen_data(&p, &h.data, geo.sector_size, &e, &mut report)?,
            }
        } else {
            DataStore::none(geo.sector_size, geo.page_size)
        };
        let p = dir.join("trim.log");
        let mut trims = match TrimJournal::open(&p, &h.trim, cfg.logical_sectors()) {
            Ok(j) => j,
            Err(e) => {
                set_aside(&p, &e.to_string(), &mut report)?;
                if !clean {
                    report.unrecoverable.push(
                        "trim.log was lost after an unclean shutdown: trims since the last checkpoint may be undone"
                            .into(),
                    );
                }
                TrimJournal::create(&p, &h.trim, cfg.logical_sectors())?
            }
        };
        let (_, bad) = trims.records_lenient()?;
        for b in &bad {
            report.actions.push(format!("trim.log: record {} {}; skipped", b.index, b.why));
        }
        if !bad.is_empty() && !clean {
            report.unrecoverable.push(format!(
                "{} damaged trim record(s) could not be replayed: the LBAs they trimmed may hold older data",
                bad.len()
            ));
        }
        let p = dir.join("checkpoint.bin");
        let ckpt = match read_checkpoint(&p, &h.ckpt, &geo) {
            Ok(c) => Some(c),
            Err(e) => {
                report.actions.push(format!("checkpoint.bin: {e}; the block table is rebuilt from the OOB area"));
                None
            }
        };
        let limit = geo.pages() * u64::from(geo.sectors_per_page);
        let above = if u64::from(l2p.max_at_open()) > limit { l2p.first_entry_above(limit) } else { None };
        if let Some((lba, _)) = above {
            report.actions.push(format!("l2p.bin: entries past the flash (first at LBA {lba}); dropped"));
        }
        let l2p_current = !l2p_rebuilt && clean && ckpt.as_ref().is_some_and(|c| c.l2p_digest == l2p.digest());
        if !l2p_rebuilt && clean && !l2p_current {
            report.actions.push(
                "l2p.bin: does not match the last clean checkpoint; rebuilt from the OOB area".into(),
            );
            l2p_rebuilt = true;
        }
        let mut store = FtlStore { l2p, oob, data, trims };
        if l2p_rebuilt {
            for lpn in 0..cfg.logical_sectors() {
                if store.l2p.get(lpn) != 0 {
                    store.l2p.set(lpn, 0);
                }
            }
            report.unrecoverable.push(
                "l2p.bin was rebuilt from the OOB area: sectors trimmed before the last checkpoint may read their \
                 old data again"
                    .into(),
            );
        }
        let checkpoint = if l2p_rebuilt { None } else { ckpt.map(|c| (c.table, c.seq)) };
        Ok(Salvage { image, tree, cfg, store, checkpoint, l2p_rebuilt, l2p_current, report })
    }
}

/// A data file with a good header but the wrong length is restored to its length (what was cut off is lost and
/// found by the data check); anything else is set aside and recreated empty.
fn reopen_data(path: &Path, h: &FileHeader, sector: u32, e: &SimError, report: &mut RepairReport) -> Result<DataStore> {
    let header_ok = fs::File::open(path).ok().is_some_and(|f| h.check_file(path, &f).is_ok());
    if header_ok {
        let f = fs::OpenOptions::new().write(true).open(path)?;
        f.set_len(super::HEADER_SPAN + u64::from(h.record) * h.count)?;
        report.actions.push(format!("data.bin: {e}; length restored"));
        return DataStore::open(path, h, sector);
    }
    set_aside(path, &e.to_string(), report)?;
    DataStore::create(path, h, sector)
}
