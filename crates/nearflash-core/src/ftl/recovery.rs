//! Checkpoints and recovery after an unclean shutdown.
//!
//! A checkpoint records the block table and the sequence number at which it was taken; the mapping table lives
//! in its own (mmap'd) file. After a crash, every page programmed since the checkpoint is found by its OOB
//! sequence number and replayed in order together with the journaled trims; valid counts are then recounted
//! from the mapping table, and any entry whose page does not name its LBA is dropped (never returned as data).
//!
//! Every OOB record read carries a checksum. Strict recovery (every open) refuses a damaged record or trim
//! record with its place; lenient recovery (`nearflash repair`) skips them and lists what was lost.

use super::oob::{Oob, INVALID_LPN};
use super::{BlockState, BlockTable, Ftl, FtlStore};
use crate::config::DeviceConfig;
use crate::error::{Result, SimError};
use crate::nand::Geometry;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Page(u64),
    Trim(usize),
}

/// What a recovery found and did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RecoveryReport {
    pub pages_replayed: u64,
    pub trims_replayed: u64,
    pub blocks_scanned: u64,
    pub entries_dropped: u64,
    /// Lenient mode: pages whose OOB record failed its checksum (their sectors were not replayed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub damaged_pages: Vec<u64>,
    /// Lenient mode: LBAs whose mapping was dropped (they now read as zeroes).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lost_lbas: Vec<u64>,
}

/// How `recover_with` treats damage.
#[derive(Debug, Clone, Copy, Default)]
pub struct RecoverOptions {
    /// Skip and report damaged OOB records instead of refusing them.
    pub lenient: bool,
    /// The mapping table is current (only the block table is rebuilt): replay nothing.
    pub trust_l2p: bool,
}

fn damaged(ppn: u64, block: u32) -> SimError {
    SimError::Image(format!(
        "oob.bin: the record of page {ppn} (block {block}) fails its checksum; see `nearflash repair`"
    ))
}

impl Ftl {
    /// Block table bytes and next sequence number for a checkpoint.
    pub fn checkpoint_state(&self) -> (Vec<u8>, u64) {
        (self.blocks.to_bytes(), self.seq)
    }

    /// Rebuilds an FTL from a checkpoint (`None`: from nothing) and the OOB area.
    pub fn recover(
        cfg: &DeviceConfig,
        store: FtlStore,
        checkpoint: Option<(BlockTable, u64)>,
    ) -> Result<(Ftl, RecoveryReport)> {
        Self::recover_with(cfg, store, checkpoint, RecoverOptions::default())
    }

    /// `recover`, leniently (repair) or trusting the mapping table.
    pub fn recover_with(
        cfg: &DeviceConfig,
        mut store: FtlStore,
        checkpoint: Option<(BlockTable, u64)>,
        opts: RecoverOptions,
    ) -> Result<(Ftl, RecoveryReport)> {
        let geo = Geometry::from_config(cfg);
        let spp = geo.sectors_per_page as usize;
        let ppb = geo.pages_per_block;
        let (mut blocks, ckpt_seq) = checkpoint.unwrap_or_else(|| {
            let mut t = BlockTable::new(geo.planes(), geo.blocks_per_plane);
            t.reserve_last(cfg.reserved_blocks_per_plane() as u32);
            (t, 0)
        });
        let mut report = RecoveryReport::default();
        // 1. Find pages programmed since the checkpoint and re-derive every changed block's state.
        let mut events: Vec<(u64, Event)> = Vec::new();
        let mut max_seq = ckpt_seq;
        for id in 0..blocks.info.len() as u32 {
            let first = geo.block_first_ppn(id);
            let head = Oob::new(store.oob.get(first), spp);
            let was = blocks.info[id as usize];
            let head_ok = head.crc_ok();
            if was.state == BlockState::Full && head.is_programmed() && head_ok && head.seq() < ckpt_seq {
                continue; // unchanged since the checkpoint
            }
            if was.state == BlockState::Reserved {
                // Extensions' pages are never mapped: only their write pointer is re-derived.
                let programmed = (0..ppb).take_while(|&p| Oob::new(store.oob.get(first + u64::from(p)), spp).is_programmed());
                blocks.info[id as usize].pages_written = programmed.count() as u32;
                continue;
            }
            report.blocks_scanned += 1;
            let mut written = 0;
            for page in 0..ppb {
                let ppn = first + u64::from(page);
                let r = Oob::new(store.oob.get(ppn), spp);
                if !r.is_programmed() {
                    // A record a kill interrupted reads as unprogrammed, but only at the end of what was written:
                    // a programmed page after it means the sequence number itself was damaged.
                    let later = page + 1 < ppb && Oob::new(store.oob.get(ppn + 1), spp).is_programmed();
                    if !later {
                        break;
                    }
                    if !opts.lenient {
                        return Err(damaged(ppn, id));
                    }
                    report.damaged_pages.push(ppn);
                    written = page + 1;
                    continue;
                }
                written = page + 1;
                if !r.crc_ok() {
                    if !opts.lenient {
                        return Err(damaged(ppn, id));
                    }
                    report.damaged_pages.push(ppn);
                    continue;
                }
                max_seq = max_seq.max(r.seq());
                if r.seq() >= ckpt_seq && !opts.trust_l2p {
                    events.push((r.seq(), Event::Page(ppn)));
                }
            }
            let info = &mut blocks.info[id as usize];
            if written == 0 {
                if info.state != BlockState::Free {
                    info.erase_count += 1; // erased since the checkpoint
                }
                info.state = BlockState::Free;
            } else {
                if head_ok {
                    info.erase_count = head.erase_count();
                }
                info.state = if written == ppb { BlockState::Full } else { BlockState::Open };
            }
            info.pages_written = written;
        }
        let trims = if opts.lenient { store.trims.records_lenient()?.0 } else { store.trims.records()? };
        let trims: Vec<_> = trims.into_iter().filter(|t| t.seq >= ckpt_seq && !opts.trust_l2p).collect();
        for (i, t) in trims.iter().enumerate() {
            events.push((t.seq, Event::Trim(i)));
            max_seq = max_seq.max(t.seq);
        }
        events.sort_unstable();
        // 2. Replay in sequence order.
        let logical = cfg.logical_sectors();
        for (_, event) in events {
            match event {
                Event::Trim(i) => {
                    let t = trims[i];
                    let end = (u64::from(t.lpn) + u64::from(t.count)).min(logical);
                    for lpn in u64::from(t.lpn)..end {
                        store.l2p.set(lpn, 0);
                    }
                    report.trims_replayed += 1;
                }
                Event::Page(ppn) => {
                    let r = Oob::new(store.oob.get(ppn), spp);
                    for slot in 0..spp {
                        let lpn = r.lpn(slot);
                        if lpn != INVALID_LPN && u64::from(lpn) < logical {
                            store.l2p.set(u64::from(lpn), (ppn * spp as u64 + slot as u64 + 1) as u32);
                        }
                    }
                    report.pages_replayed += 1;
                }
            }
        }
        // 3. Recount valid sectors; drop entries whose page does not name their LBA.
        for b in &mut blocks.info {
            b.valid = 0;
        }
        for lpn in 0..logical {
            let e = store.l2p.get(lpn);
            if e == 0 {
                continue;
            }
            let psa = u64::from(e - 1);
            let ppn = psa / spp as u64;
            let (ok, rec_ok) = if ppn < geo.pages() {
                let r = Oob::new(store.oob.get(ppn), spp);
                let names_it = u64::from(r.lpn((psa % spp as u64) as usize)) == lpn;
                (r.is_programmed() && names_it, !r.is_programmed() || r.crc_ok())
            } else {
                (false, false)
            };
            if !rec_ok && !opts.lenient {
                return Err(if ppn < geo.pages() {
                    damaged(ppn, (ppn / u64::from(ppb)) as u32)
                } else {
                    SimError::Image(format!("l2p.bin: LBA {lpn} maps past the flash; see `nearflash repair`"))
                });
            }
            if ok && rec_ok {
                blocks.info[(ppn / u64::from(ppb)) as usize].valid += 1;
            } else {
                store.l2p.set(lpn, 0);
                report.entries_dropped += 1;
                if opts.lenient {
                    report.lost_lbas.push(lpn);
                }
            }
        }
        // The journal is cleared by the checkpoint the caller writes next, not here: until then a second crash
        // must be able to replay the same trims.
        blocks.rebuild_free_pools();
        let ftl = Ftl::with_state(cfg, store, blocks, max_seq + 1)?;
        Ok((ftl, report))
    }
}
