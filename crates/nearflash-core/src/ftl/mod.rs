//! Flash translation layer: page-level mapping of sectors, write frontiers, garbage collection, TRIM, wear.
//!
//! Placement is static per logical group, as in MQSim: the page-sized group `lpn / sectors_per_page` always lives
//! in the plane `stripe[group % planes]` (ordered by `ftl.allocation`, channel first by default), so sequential
//! data spreads over all channels and dies, and each plane is an independent log with its own free pool and GC.
//! Within a plane, sectors fill the open page of the host frontier in arrival order; a full page is programmed
//! (waiting briefly for its sibling planes to form a multi-plane program). The mapping table points at a sector
//! only once its page is programmed; until then it is found in its plane's open host page (the write buffer in
//! controller DRAM: `Ftl::buffered_slot`).
//!
//! The FTL decides *what* flash work happens; *when* it happens is the [`FlashSink`]'s business (the device's
//! timing model, or nothing at all while preconditioning).

mod blocks;
pub mod cmt;
pub mod gc;
pub mod oob;
mod physical;
mod precondition;
mod read_alloc;
mod record_crc;
mod recovery;

pub use blocks::{BlockInfo, BlockState, BlockTable};
pub use physical::{PageData, PhysError};
pub use precondition::FillPattern;
pub use recovery::{RecoverOptions, RecoveryReport};

use crate::config::{DeviceConfig, GcFree, GcPacing, MappingMode};
use crate::engine::{At, IntMap};
use crate::error::{Result, SimError};
use crate::store::{DataStore, MappedRecords, MappedU32, TrimJournal, TrimRecord};
use crate::nand::{FastGeometry, Geometry};
use cmt::Cmt;
use oob::{Oob, OobMut, INVALID_LPN, SPARE_BYTES};
use std::collections::BTreeMap;
use strength_reduce::StrengthReducedU32;

/// Who a flash operation of the FTL is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// The host's data (the command being executed).
    Host,
    /// Garbage collection; `urgent` once the plane's free pool is below `ftl.gc_hard_free_blocks`.
    Gc { urgent: bool },
}

/// Where the FTL's flash work gets its timing: each operation starts once `ready` is known and returns when it
/// ends (an [`At`] the device's event loop resolves).
pub trait FlashSink {
    /// Reads `sectors` sectors of page `ppn` (in a block with `pe` erase cycles) into the controller;
    /// `raw_errors` is the worst codeword's injected error count. Returns when the data is in the controller.
    fn read_page(&mut self, ready: At, ppn: u64, sectors: u32, raw_errors: u32, pe: u32, work: Work) -> At;
    /// Programs `ppns` (one die, one page offset, distinct planes: a multi-plane program if several); the program
    /// releases `sectors_released` sectors of the write buffer when it ends.
    /// Programs `ppns` once their data is in the controller (the latest of `floor` and `readies`, as `max_all`
    /// gives it) and `erased` (the erase of their block) is known.
    fn program_pages(&mut self, floor: At, readies: &[At], erased: At, ppns: &[u64], sectors_released: u32, work: Work) -> At;
    /// Moves page `src` to `dst` on-die (GC copyback).
    fn copyback(&mut self, ready: At, src: u64, dst: u64, work: Work) -> At;
    fn erase_block(&mut self, ready: At, block_id: u32, work: Work) -> At;
    /// Reads / writes a translation page of the demand-paged map.
    fn map_read(&mut self, ready: At, tpage: u64) -> At;
    fn map_write(&mut self, ready: At, tpage: u64) -> At;
    /// The latest of `floor` and `times`.
    fn max_all(&mut self, floor: At, times: &[At]) -> At;
    /// `max_all(floor, programs)` where `programs` are ends this sink has just returned for distinct operations
    /// (GC's moves), none known yet where the sink's times can be pending, none `floor`.
    fn max_all_programs(&mut self, floor: At, programs: &[At]) -> At {
        self.max_all(floor, programs)
    }
    /// Whether `at` has passed by the present (the command being executed was submitted): known, and before it.
    /// Only what every driver has run by then may count (the loop has run every event before the present; one
    /// it has run past it must not change the answer), so that the FTL's decisions on it repeat exactly.
    fn done(&self, at: At) -> bool;
}

/// A sink that takes no time (preconditioning, recovery): every time it is given must be known.
pub struct Untimed;

impl FlashSink for Untimed {
    fn read_page(&mut self, ready: At, _: u64, _: u32, _: u32, _: u32, _: Work) -> At {
        ready
    }
    fn program_pages(&mut self, floor: At, readies: &[At], erased: At, _: &[u64], _: u32, _: Work) -> At {
        let ready = self.max_all(floor, readies);
        self.max_all(ready, &[erased])
    }
    fn copyback(&mut self, ready: At, _: u64, _: u64, _: Work) -> At {
        ready
    }
    fn erase_block(&mut self, ready: At, _: u32, _: Work) -> At {
        ready
    }
    fn map_read(&mut self, ready: At, _: u64) -> At {
        ready
    }
    fn map_write(&mut self, ready: At, _: u64) -> At {
        ready
    }
    fn max_all(&mut self, floor: At, times: &[At]) -> At {
        let known = |a: At| a.known().expect("the untimed sink is given known times only");
        At::at(times.iter().fold(known(floor), |m, &t| m.max(known(t))))
    }
    /// Nothing takes time: every operation is done.
    fn done(&self, _: At) -> bool {
        true
    }
}

/// Where a logical sector currently is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    Unmapped,
    /// In an unprogrammed page (controller DRAM).
    Buffered(u64),
    /// In a programmed flash page.
    Flash(u64),
}

/// FTL counters (sectors unless stated).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct FtlStats {
    pub host_sectors_written: u64,
    pub host_sectors_trimmed: u64,
    pub pages_programmed: u64,
    pub padded_slots: u64,
    pub gc_runs: u64,
    /// Host writes that waited for blocking collection (every collection under blocking pacing).
    pub gc_stalls: u64,
    pub gc_sectors_moved: u64,
    pub gc_pages_copied_back: u64,
    pub blocks_erased: u64,
    pub map_reads: u64,
    pub map_writes: u64,
    /// Pages given to never-written sectors by reads (`ftl.unmapped_read = allocate`); absent from reports while 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub read_allocated_pages: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

const NO_BLOCK: u32 = u32::MAX;
const MAX_SPP: usize = 32;

/// The page being filled in one plane.
///
/// Laid out so that what a host write touches shares a cache line: the page's state, then each slot's LPN beside its
/// data's checksum (a page of up to 4 slots all in the first line; as separate arrays of 32, three lines, ~2 D1
/// misses a write over the 128 planes' frontiers).
#[derive(Clone)]
#[repr(C, align(64))]
struct Frontier {
    block: u32,
    page: u32,
    filled: u32,
    /// Host frontiers: filled slots whose sector was written again into a later slot, or trimmed, while buffered (not
    /// current: programmed as padding).
    stale: u32,
    present: u32,
    /// Slots whose extension spare bytes were given (in `Ftl::spares`; the others program zeroes).
    tagged: u32,
    held: bool,
    slots: [Slot; MAX_SPP],
    /// GC frontiers: the source PSA each slot was copied from.
    src: [u64; MAX_SPP],
}

/// A frontier slot: its sector's LPN and the CRC-32 of its data (0 without data).
#[derive(Clone, Copy)]
struct Slot {
    lpn: u32,
    crc: u32,
}

impl Frontier {
    fn empty() -> Self {
        Frontier {
            block: NO_BLOCK,
            page: 0,
            filled: 0,
            stale: 0,
            present: 0,
            tagged: 0,
            held: false,
            slots: [Slot { lpn: INVALID_LPN, crc: 0 }; MAX_SPP],
            src: [0; MAX_SPP],
        }
    }

    /// Empties the page (its slots' LPNs are left as they were: only the filled ones are ever read).
    fn reset_page(&mut self) {
        self.filled = 0;
        self.stale = 0;
        self.present = 0;
        self.tagged = 0;
        self.held = false;
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stream {
    Host,
    Gc,
}

/// The storage the FTL keeps its state in (file-backed for an image, anonymous otherwise).
pub struct FtlStore {
    pub l2p: MappedU32,
    pub oob: MappedRecords,
    pub data: DataStore,
    pub trims: TrimJournal,
}

pub struct Ftl {
    pub geo: FastGeometry,
    spp: u32,
    /// Sectors per block (`spp * pages_per_block`), strength-reduced: every mapping update divides an old PSA by it.
    sectors_per_block: StrengthReducedU32,
    logical_sectors: u64,
    stripe: Vec<u32>,
    /// Blocks per plane set aside for extensions (the last ones of each plane).
    reserved: u32,
    pub(crate) store: FtlStore,
    pub blocks: BlockTable,
    host: Vec<Frontier>,
    gc: Vec<Frontier>,
    /// Sectors in the write buffer: the host frontiers' current slots (a sector's latest copy, not trimmed). A buffered
    /// sector can only be in its plane's open host page, so that page is its index (an `IntMap` from LPN to PSA cost
    /// an insert and a removal a host sector, ~100 instructions a write, and duplicated the page's slots).
    buffered: u64,
    injected: BTreeMap<u64, u32>,
    seq: u64,
    gc_start: u32,
    gc_stop: u32,
    /// `ftl.gc_pacing` = incremental (else blocking).
    incremental_gc: bool,
    victim_policy: crate::config::VictimPolicy,
    /// Random victim choices (rga, random): a fixed stream, so runs repeat exactly.
    gc_rng: crate::engine::Rng,
    /// Per plane: the victim being collected incrementally.
    gc_cursor: Vec<Option<gc::GcCursor>>,
    /// Per plane: incremental GC runs until `gc_stop` blocks are free (hysteresis).
    gc_active: Vec<bool>,
    copyback: bool,
    multi_plane: bool,
    cmt: Option<Cmt>,
    /// Sectors GC moved since the log was last drained, when an extension asked for them (`track_relocations`).
    relocations: Option<Vec<Relocation>>,
    /// Extension spare bytes of the open pages' slots: host frontiers at `2 * plane`, GC frontiers at `2 * plane + 1`.
    spares: Vec<[[u8; SPARE_BYTES]; MAX_SPP]>,
    /// Whether any sector may carry extension spare bytes (given to a write or set in place since the FTL was made
    /// fresh, or found in an opened image): until then GC's moves do not read them (a line of the OOB record per
    /// moved sector, all zeroes).
    spares_written: bool,
    /// When each slot's data is in the controller (indexed as `spares`), and a time the whole page waits for (a
    /// flush's): a page is programmed once all are known.
    slot_ready: Vec<[At; MAX_SPP]>,
    page_floor: Vec<At>,
    /// When the erase of each frontier's open block ends (indexed as `spares`): no page of a block is programmed
    /// before its erase has ended, so the flash work GC still owes before an erase holds back the writes that need
    /// the block it frees.
    block_erased: Vec<At>,
    /// Erases still owed on free blocks (the GC's erase of a victim waits for its moved data to be programmed),
    /// taken by the frontier that opens the block.
    erasing: IntMap<u32, At>,
    /// What GC's thresholds and a frontier's open count as a free block (`ftl.gc_free`).
    gc_free: GcFree,
    /// With `ftl.gc_free = erased`, per plane: the free blocks whose erase GC has issued, in the order it issued
    /// them, until a frontier opens the block or its erase is found done (empty with `issued`).
    owed: Vec<Vec<u32>>,
    /// GC becomes urgent below this many free blocks in its plane (`ftl.gc_hard_free_blocks`).
    gc_hard: u32,
    /// Buffers of `program` and GC, kept between calls so that a write allocates nothing.
    scratch: Scratch,
    pub stats: FtlStats,
    /// Tests: GC moves a victim page's sectors one at a time, as before `move_live` (the reference it must equal).
    #[cfg(test)]
    per_sector_moves: bool,
}

/// Working lists of the write path (taken out while used, then put back with their allocations).
#[derive(Default)]
struct Scratch {
    /// `program`'s pages and the times its slots' data arrive.
    ppns: Vec<u64>,
    readies: Vec<At>,
    /// The planes programmed together (`program_with_held_siblings`).
    group: Vec<u32>,
    /// The ends of the moves of a GC step (`advance_victim`).
    moved: Vec<At>,
}

/// A sector GC moved to another physical place (its LBA's data is unchanged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Relocation {
    pub lpn: u32,
    pub from_psa: u64,
    pub to_psa: u64,
}

/// The FTL's own demands on a configuration, checked whenever an FTL is built: its OOB record must fit the page's
/// spare area, and incremental GC needs a free block of slack above its floor.
pub fn check_config(cfg: &DeviceConfig) -> Result<()> {
    let bad = |why: String| Err(SimError::Config(why));
    let spp = cfg.sectors_per_page();
    // OOB record: sequence number + per-sector LPN and checksum + extension spare bytes (see `oob`).
    let oob_need = oob::stride(spp as usize) as u64;
    if cfg.nand.oob_size.0 < oob_need {
        return bad(format!("nand.oob_size {} B is too small: {spp} sectors per page need {oob_need} B", cfg.nand.oob_size.0));
    }
    let (floor, start) = (gc::FREE_FLOOR, cfg.ftl.gc_start_free_blocks.0);
    if cfg.gc_pacing() == GcPacing::Incremental && start <= u64::from(floor) {
        return bad(format!(
            "ftl.gc_start_free_blocks {start} must be above {floor} with ftl.gc_pacing incremental (a block for the host \
             frontier, one for the GC frontier, and one of slack); raise it or set ftl.gc_pacing blocking"
        ));
    }
    Ok(())
}

impl Ftl {
    /// A fresh (all erased) FTL over `store`.
    pub fn new(cfg: &DeviceConfig, store: FtlStore) -> Result<Self> {
        let geo = Geometry::from_config(cfg);
        let mut blocks = BlockTable::new(geo.planes(), geo.blocks_per_plane);
        blocks.reserve_last(cfg.reserved_blocks_per_plane() as u32);
        let mut ftl = Self::with_state(cfg, store, blocks, 1)?;
        ftl.spares_written = false; // a fresh store: every OOB record is zero
        Ok(ftl)
    }

    /// An FTL over existing state (after a checkpoint load or recovery); `seq` is the next sequence number.
    pub(crate) fn with_state(cfg: &DeviceConfig, store: FtlStore, blocks: BlockTable, seq: u64) -> Result<Self> {
        check_config(cfg)?;
        let geo = FastGeometry::from_config(cfg);
        let spp = geo.sectors_per_page;
        if store.l2p.len() != cfg.logical_sectors() || store.oob.len() != geo.pages() {
            return Err(SimError::Image("mapping or OOB table size does not match the configuration".into()));
        }
        let cmt = (cfg.mapping_mode() == MappingMode::Demand).then(|| {
            let entries = u64::from(geo.page_size) / 4;
            Cmt::new((cfg.ftl.cmt_size.0 / u64::from(geo.page_size)) as usize, entries)
        });
        let mut ftl = Ftl {
            spp,
            sectors_per_block: StrengthReducedU32::new((spp * geo.pages_per_block).max(1)),
            logical_sectors: cfg.logical_sectors(),
            stripe: geo.stripe_table(&cfg.ftl.allocation.0),
            reserved: cfg.reserved_blocks_per_plane() as u32,
            store,
            blocks,
            host: vec![Frontier::empty(); geo.planes() as usize],
            gc: vec![Frontier::empty(); geo.planes() as usize],
            buffered: 0,
            injected: BTreeMap::new(),
            seq,
            gc_start: cfg.ftl.gc_start_free_blocks.0 as u32,
            gc_stop: cfg.ftl.gc_stop_free_blocks.0 as u32,
            incremental_gc: cfg.gc_pacing() == GcPacing::Incremental,
            victim_policy: cfg.victim_policy(),
            gc_rng: crate::engine::rng_stream(0, "gc-victims"),
            gc_cursor: vec![None; geo.planes() as usize],
            gc_active: vec![false; geo.planes() as usize],
            copyback: cfg.ftl.gc_copyback.0,
            multi_plane: cfg.nand.multi_plane.0 && geo.planes_per_die > 1,
            cmt,
            relocations: None,
            spares: vec![[[0; SPARE_BYTES]; MAX_SPP]; 2 * geo.planes() as usize],
            spares_written: true,
            slot_ready: vec![[At::ZERO; MAX_SPP]; 2 * geo.planes() as usize],
            page_floor: vec![At::ZERO; 2 * geo.planes() as usize],
            block_erased: vec![At::ZERO; 2 * geo.planes() as usize],
            erasing: IntMap::default(),
            gc_free: cfg.gc_free(),
            owed: vec![Vec::new(); geo.planes() as usize],
            gc_hard: cfg.ftl.gc_hard_free_blocks.0 as u32,
            scratch: Scratch::default(),
            stats: FtlStats::default(),
            #[cfg(test)]
            per_sector_moves: false,
            geo,
        };
        ftl.adopt_open_blocks();
        Ok(ftl)
    }

    /// Open blocks found in the table become the plane's frontiers again (host first, then GC); extra ones are
    /// closed. Resuming both matters: a closed partial block holds its free pages until it is collected, so
    /// closing the GC frontier at every reopen cost a free block each time, and a few reopens in a row left GC
    /// with none to move into (found by the device_model fuzzer).
    fn adopt_open_blocks(&mut self) {
        for id in 0..self.blocks.info.len() as u32 {
            let b = self.blocks.info[id as usize];
            if b.state != BlockState::Open {
                continue;
            }
            let plane = self.geo.plane_of_block(id) as usize;
            let resumable = b.pages_written < self.geo.pages_per_block;
            let fr = [&mut self.host[plane], &mut self.gc[plane]].into_iter().find(|fr| fr.block == NO_BLOCK);
            match fr {
                Some(fr) if resumable => {
                    fr.block = id;
                    fr.page = b.pages_written;
                    fr.reset_page();
                }
                _ => self.blocks.info[id as usize].state = BlockState::Full,
            }
        }
    }

    pub fn logical_sectors(&self) -> u64 {
        self.logical_sectors
    }

    pub fn sectors_per_page(&self) -> u32 {
        self.spp
    }

    /// Next sequence number (pages and trims are ordered by it).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    pub(super) fn next_seq(&mut self) -> u64 {
        let s = self.seq;
        self.seq += 1;
        s
    }

    #[inline]
    pub fn plane_of(&self, lpn: u32) -> u32 {
        self.stripe[((lpn / self.spp) % self.stripe.len() as u32) as usize]
    }

    fn check_lpn(&self, lpn: u32) -> Result<()> {
        if u64::from(lpn) >= self.logical_sectors {
            return Err(SimError::InvalidArgument(format!("LBA {lpn} beyond {} sectors", self.logical_sectors)));
        }
        Ok(())
    }

    /// Where `lpn` is now.
    #[inline]
    pub fn locate(&self, lpn: u32) -> Location {
        if self.buffered != 0 {
            if let Some(psa) = self.buffered_psa(lpn) {
                return Location::Buffered(psa);
            }
        }
        match self.store.l2p.get(u64::from(lpn)) {
            0 => Location::Unmapped,
            e => Location::Flash(u64::from(e - 1)),
        }
    }

    /// Starts loading `lpn`'s mapping entry into the host's cache (a hint for hot loops; no effect on state).
    #[inline]
    pub fn prefetch(&self, lpn: u64) {
        self.store.l2p.prefetch(lpn);
    }

    /// Starts loading what reading `lpn`'s stored sector will touch: its OOB record and its data (a hint).
    #[inline]
    pub fn prefetch_data(&self, lpn: u64) {
        if lpn >= self.logical_sectors || self.buffered != 0 && self.buffered_psa(lpn as u32).is_some() {
            return;
        }
        let e = self.store.l2p.get(lpn);
        if e != 0 {
            self.prefetch_stored(u64::from(e - 1));
        }
    }

    /// Starts loading what reading the stored sector at `psa` will touch: its OOB record and its data (a hint;
    /// nothing for a store that keeps no data, whose reads look neither up).
    #[inline]
    pub fn prefetch_stored(&self, psa: u64) {
        let ppn = self.geo.ppn_of_psa(psa);
        if ppn < self.geo.pages() && self.store.data.materialises() {
            self.store.oob.prefetch(ppn);
            self.store.data.prefetch(psa);
        }
    }

    /// Charges a mapping-table access under demand mapping; returns when the entry is available.
    pub fn map_access(&mut self, lpn: u32, dirty: bool, ready: impl Into<At>, sink: &mut dyn FlashSink) -> At {
        let ready = ready.into();
        let Some(cmt) = &mut self.cmt else { return ready };
        let a = cmt.access(lpn, dirty);
        let mut t = ready;
        if let Some(tp) = a.write_back {
            self.stats.map_writes += 1;
            sink.map_write(ready, tp);
        }
        if let Some(tp) = a.load {
            self.stats.map_reads += 1;
            t = sink.map_read(ready, tp);
        }
        t
    }

    /// Whether the mapping table is demand-paged (lookups may need translation reads).
    #[inline]
    pub fn demand_mapped(&self) -> bool {
        self.cmt.is_some()
    }

    pub fn cmt_stats(&self) -> Option<cmt::CmtStats> {
        self.cmt.as_ref().map(|c| c.stats)
    }

    /// Writes one sector (data `None`: timing-only, nothing stored). `ready` is when its data is in DRAM.
    pub fn write(&mut self, lpn: u32, data: Option<&[u8]>, ready: impl Into<At>, sink: &mut dyn FlashSink) -> Result<()> {
        self.write_tagged(lpn, data, None, ready, sink)
    }

    /// As `write`, with extension spare bytes programmed into the sector's OOB slot (and carried by GC).
    pub fn write_tagged(
        &mut self,
        lpn: u32,
        data: Option<&[u8]>,
        spare: Option<&[u8; SPARE_BYTES]>,
        ready: impl Into<At>,
        sink: &mut dyn FlashSink,
    ) -> Result<()> {
        let ready = ready.into();
        self.check_lpn(lpn)?;
        let plane = self.plane_of(lpn);
        self.ensure_slot(Stream::Host, plane, ready, sink)?;
        let (psa, slot) = self.next_psa(Stream::Host, plane);
        // An earlier copy still in the page is stale from now on (before the slot is counted filled).
        self.unbuffer(plane, lpn);
        self.buffered += 1;
        let (present, crc) = match data {
            Some(d) if self.store.data.materialises() => {
                if d.len() != self.geo.sector_size as usize {
                    return Err(SimError::InvalidArgument(format!("sector data must be {} bytes", self.geo.sector_size)));
                }
                self.store.data.write_sector(psa, d)?;
                (true, crc32fast::hash(d))
            }
            _ => (false, 0),
        };
        let fr = &mut self.host[plane as usize];
        fr.slots[slot] = Slot { lpn, crc };
        fr.present |= u32::from(present) << slot;
        if let Some(b) = spare {
            fr.tagged |= 1 << slot;
            self.spares[Self::spare_index(Stream::Host, plane)][slot] = *b;
            self.spares_written = true;
        }
        self.slot_ready[Self::spare_index(Stream::Host, plane)][slot] = ready;
        let fr = &mut self.host[plane as usize];
        fr.filled += 1;
        self.stats.host_sectors_written += 1;
        if self.host[plane as usize].filled == self.spp {
            self.page_full(plane, sink);
            self.pace_gc(plane, ready, sink)?;
        }
        Ok(())
    }

    /// PSA of the next free slot of a frontier (which must have one).
    fn next_psa(&self, s: Stream, plane: u32) -> (u64, usize) {
        let filled = self.frontier(s, plane).filled as usize;
        (self.slot_psa(s, plane, filled), filled)
    }

    /// PSA of slot `slot` of a frontier's open page.
    #[inline]
    fn slot_psa(&self, s: Stream, plane: u32, slot: usize) -> u64 {
        let fr = self.frontier(s, plane);
        let ppn = self.geo.block_first_ppn(fr.block) + u64::from(fr.page);
        ppn * u64::from(self.spp) + slot as u64
    }

    /// The PSA of `lpn`'s buffered copy, if it has one. Out of line: `locate` stays small where the buffer is empty
    /// (reads without writes), which is the common case it is inlined for.
    #[inline(never)]
    fn buffered_psa(&self, lpn: u32) -> Option<u64> {
        let plane = self.plane_of(lpn);
        self.buffered_slot(plane, lpn).map(|slot| self.slot_psa(Stream::Host, plane, slot))
    }

    /// Takes `lpn`'s buffered copy, if it has one (`plane` is its plane), out of the write buffer: stale in the open
    /// page (programmed as padding), no longer counted.
    #[inline]
    fn unbuffer(&mut self, plane: u32, lpn: u32) {
        if let Some(slot) = self.buffered_slot(plane, lpn) {
            self.host[plane as usize].stale |= 1 << slot;
            self.buffered -= 1;
        }
    }

    /// The slot of `lpn`'s buffered copy (`plane` is its plane): the one filled slot of the plane's open host page
    /// that holds it and is not stale.
    #[inline]
    fn buffered_slot(&self, plane: u32, lpn: u32) -> Option<usize> {
        let fr = &self.host[plane as usize];
        let stale = fr.stale;
        fr.slots[..fr.filled as usize].iter().enumerate().position(|(slot, s)| s.lpn == lpn && stale & (1 << slot) == 0)
    }

    /// The slots of `slots` (a page's filled ones) that name a sector, as a mask (a slot holding `INVALID_LPN` does
    /// not).
    #[inline]
    fn named_slots(slots: &[Slot]) -> u32 {
        slots.iter().enumerate().fold(0, |m, (slot, s)| m | u32::from(s.lpn != INVALID_LPN) << slot)
    }

    fn spare_index(s: Stream, plane: u32) -> usize {
        2 * plane as usize + usize::from(s == Stream::Gc)
    }

    fn frontier(&self, s: Stream, plane: u32) -> &Frontier {
        match s {
            Stream::Host => &self.host[plane as usize],
            Stream::Gc => &self.gc[plane as usize],
        }
    }

    fn frontier_mut(&mut self, s: Stream, plane: u32) -> &mut Frontier {
        match s {
            Stream::Host => &mut self.host[plane as usize],
            Stream::Gc => &mut self.gc[plane as usize],
        }
    }

    /// Makes sure the frontier has a free slot: programs a held page, opens a block (collecting garbage first
    /// when the plane runs low on free blocks).
    #[inline]
    fn ensure_slot(&mut self, s: Stream, plane: u32, ready: At, sink: &mut dyn FlashSink) -> Result<()> {
        // The common case (an open page with room) without the call: the slow path's prologue alone cost ~20
        // instructions per sector written or moved.
        let fr = self.frontier(s, plane);
        if !fr.held && fr.block != NO_BLOCK {
            return Ok(());
        }
        self.open_slot(s, plane, ready, sink)
    }

    /// `ensure_slot` for a held page or a frontier without a block.
    #[inline(never)]
    fn open_slot(&mut self, s: Stream, plane: u32, ready: At, sink: &mut dyn FlashSink) -> Result<()> {
        if self.frontier(s, plane).held {
            self.program_with_held_siblings(plane, sink);
        }
        if self.frontier(s, plane).block != NO_BLOCK {
            return Ok(());
        }
        if s == Stream::Host {
            self.collect_before_open(plane, ready, sink)?;
        }
        let id = match self.gc_free {
            GcFree::Issued => self.blocks.open_free(plane),
            GcFree::Erased => self.open_erased(plane, sink),
        };
        let id = id.ok_or_else(|| {
            SimError::Fault(format!(
                "plane {plane} has no free block left: GC cannot keep up (over-provisioning exhausted)"
            ))
        })?;
        self.block_erased[Self::spare_index(s, plane)] = self.erasing.remove(&id).unwrap_or(At::ZERO);
        let fr = self.frontier_mut(s, plane);
        fr.block = id;
        fr.page = 0;
        fr.reset_page();
        Ok(())
    }

    /// A host page just filled: program it now, or hold it until sibling planes fill the same page offset.
    fn page_full(&mut self, plane: u32, sink: &mut dyn FlashSink) {
        if self.multi_plane {
            let page = self.host[plane as usize].page;
            let waiting = self.siblings(plane).any(|p| {
                let f = &self.host[p as usize];
                f.block != NO_BLOCK && f.page == page && !f.held && f.filled > 0
            });
            if waiting {
                self.host[plane as usize].held = true;
                return;
            }
        }
        self.program_with_held_siblings(plane, sink);
    }

    fn siblings(&self, plane: u32) -> impl Iterator<Item = u32> {
        let ppd = self.geo.planes_per_die;
        let first = plane - plane % ppd;
        (first..first + ppd).filter(move |&p| p != plane)
    }

    /// Programs `plane`'s host page together with held sibling pages at the same offset.
    fn program_with_held_siblings(&mut self, plane: u32, sink: &mut dyn FlashSink) -> At {
        let page = self.host[plane as usize].page;
        let mut group = std::mem::take(&mut self.scratch.group);
        group.clear();
        group.push(plane);
        if self.multi_plane {
            group.extend(self.siblings(plane).filter(|&p| {
                let f = &self.host[p as usize];
                f.held && f.page == page
            }));
        }
        let done = self.program(Stream::Host, &group, sink);
        self.scratch.group = group;
        done
    }

    /// Programs the current page of each listed plane's frontier (one die, one offset), padding unfilled slots.
    fn program(&mut self, s: Stream, planes: &[u32], sink: &mut dyn FlashSink) -> At {
        let spp = self.spp as usize;
        let mut ppns = std::mem::take(&mut self.scratch.ppns);
        ppns.clear();
        let mut released = 0;
        // The page goes to flash once every slot's data is in the controller.
        let mut readies = std::mem::take(&mut self.scratch.readies);
        readies.clear();
        let mut floor = At::ZERO;
        let mut erased = At::ZERO;
        for &plane in planes {
            let i = Self::spare_index(s, plane);
            let filled = self.frontier(s, plane).filled as usize;
            // Only a repeat of the last entry is dropped (a GC run read from one page shares its arrival; a host
            // page's slots have one each): the sink's join drops the others itself, keeping first occurrences in
            // order, so the join is the same, and a list of one arrival stays one (the sink's join-free case).
            for &r in &self.slot_ready[i][..filled] {
                if r != At::ZERO && readies.last() != Some(&r) {
                    readies.push(r);
                }
            }
            floor = if floor == At::ZERO { self.page_floor[i] } else { sink.max_all(floor, &[self.page_floor[i]]) };
            self.page_floor[i] = At::ZERO;
            erased = if erased == At::ZERO { self.block_erased[i] } else { sink.max_all(erased, &[self.block_erased[i]]) };
        }
        let work = match s {
            Stream::Host => Work::Host,
            Stream::Gc => Work::Gc { urgent: self.gc_urgent(planes[0], sink) },
        };
        // The host sectors' mapping entries about to be updated are scattered over the table: start loading them
        // all at once, so their cache misses overlap instead of following one another. (A GC page's were read by the
        // victim scan that moved its sectors, just before.)
        if s == Stream::Host {
            for &plane in planes {
                let fr = self.frontier(s, plane);
                for s in &fr.slots[..fr.filled as usize] {
                    self.store.l2p.prefetch(u64::from(s.lpn));
                }
            }
        }
        for &plane in planes {
            // The frontier is read in place (a copy of it was ~600 bytes per page programmed).
            let fr = match s {
                Stream::Host => &self.host[plane as usize],
                Stream::Gc => &self.gc[plane as usize],
            };
            let ppn = self.geo.block_first_ppn(fr.block) + u64::from(fr.page);
            let seq = self.seq;
            self.seq += 1;
            let erase_count = self.blocks.info[fr.block as usize].erase_count;
            // Which slots still hold the current copy of their sector (a host sector rewritten or trimmed while
            // buffered, or a GC copy overtaken by a newer program, is stale), as a mask. The current host sectors
            // leave the write buffer here (nothing looks for them there before the mapping update below).
            let first_psa = ppn * spp as u64;
            let filled = fr.filled;
            let slots = &fr.slots[..filled as usize];
            let current = match s {
                // A host slot is current unless marked stale (the page's stale mask).
                Stream::Host => Self::named_slots(slots) & !fr.stale,
                Stream::Gc => {
                    let mut current = 0u32;
                    for (slot, (&Slot { lpn, .. }, &src)) in slots.iter().zip(&fr.src).enumerate() {
                        let is = lpn != INVALID_LPN && self.store.l2p.get(u64::from(lpn)) == (src + 1) as u32;
                        current |= u32::from(is) << slot;
                    }
                    current
                }
            };
            // The OOB record goes first: a process killed before the mapping update is repaired by recovery,
            // while a mapping entry pointing at an unrecorded page could not be.
            let mut rec = OobMut::new(self.store.oob.get_mut(ppn), spp);
            rec.set_slots(current, fr.slots[..spp].iter().map(|s| (s.lpn, s.crc)));
            let present = fr.present & current;
            let tagged = fr.tagged & current;
            if tagged != 0 {
                let spares = &self.spares[Self::spare_index(s, plane)];
                for slot in 0..spp {
                    if tagged & (1 << slot) != 0 {
                        rec.set_spare(slot, &spares[slot]);
                    }
                }
            }
            // Last: the sequence number makes the record count as programmed.
            rec.set_header(seq, erase_count, present);
            self.remap_page(s, plane, first_psa, current);
            self.stats.padded_slots += u64::from(self.spp - filled);
            self.stats.pages_programmed += 1;
            if s == Stream::Host {
                released += filled; // GC sectors never occupied the host write buffer
                self.buffered -= u64::from(current.count_ones());
            }
            ppns.push(ppn);
            self.next_page(s, plane);
        }
        // The sink joins the readies (no flash work is booked between here and the computation of `floor`).
        let done = sink.program_pages(floor, &readies, erased, &ppns, released, work);
        self.scratch.readies = readies;
        self.scratch.ppns = ppns;
        done
    }

    /// `ftl.gc_free = erased`: opens the least-worn free block of `plane` whose erase has ended (a block whose erase
    /// GC has issued but the flash has not done holds up every page written into it, and that erase waits for the
    /// victim's moves); if every free block still owes its erase, the one GC issued first, whose pages wait for it
    /// (MQSim: a plane's writes wait until an erase returns a block to its pool).
    fn open_erased(&mut self, plane: u32, sink: &dyn FlashSink) -> Option<u32> {
        let (erasing, owed) = (&self.erasing, &mut self.owed[plane as usize]);
        owed.retain(|id| erasing.get(id).is_some_and(|&at| !sink.done(at)));
        let order = |id: u32| owed.iter().position(|&o| o == id).map(|i| i as u64);
        let id = self.blocks.open_free_erased(plane, order)?;
        if let Some(i) = owed.iter().position(|&o| o == id) {
            owed.remove(i);
        }
        Some(id)
    }

    /// The free blocks of `plane` as GC's thresholds count them (`ftl.gc_free`): every free block (`issued`), or
    /// those whose erase has ended (`erased`).
    /// Inlined: `issued`'s count is one look-up, asked per GC page moved and per program (its call cost ~20 a time).
    #[inline]
    fn free_counted(&self, plane: u32, sink: &dyn FlashSink) -> u32 {
        let free = self.blocks.free_blocks(plane);
        match self.gc_free {
            GcFree::Issued => free,
            GcFree::Erased => free.saturating_sub(self.owed_erasing(plane, sink)),
        }
    }

    /// The blocks of `plane` whose erase GC has issued and the flash has not ended (`ftl.gc_free = erased`).
    #[inline(never)]
    fn owed_erasing(&self, plane: u32, sink: &dyn FlashSink) -> u32 {
        let owed = self.owed[plane as usize].iter();
        owed.filter(|id| self.erasing.get(id).is_some_and(|&at| !sink.done(at))).count() as u32
    }

    /// Whether GC in `plane` is urgent (its free pool, as `ftl.gc_free` counts it, below `ftl.gc_hard_free_blocks`).
    fn gc_urgent(&self, plane: u32, sink: &dyn FlashSink) -> bool {
        self.free_counted(plane, sink) < self.gc_hard
    }

    /// Moves a frontier past its current page (now recorded in its block), closing the block after its last page.
    fn next_page(&mut self, s: Stream, plane: u32) {
        let (block, page) = (self.frontier(s, plane).block, self.frontier(s, plane).page);
        let info = &mut self.blocks.info[block as usize];
        info.pages_written = page + 1;
        let full = page + 1 == self.geo.pages_per_block;
        if full {
            info.state = BlockState::Full;
        }
        let f = self.frontier_mut(s, plane);
        f.reset_page();
        f.page += 1;
        if full {
            f.block = NO_BLOCK;
        }
    }

    /// `remap` of each slot in `current` of the frontier's page (at `first_psa`, in the frontier's block): the old
    /// blocks' valid counts fall slot by slot, the page's block's rises once by them all (one look-up of it, no
    /// division, instead of one per slot: the counts end the same).
    fn remap_page(&mut self, s: Stream, plane: u32, first_psa: u64, current: u32) {
        debug_assert_eq!(self.block_of_psa(first_psa), self.frontier(s, plane).block, "the page is in the frontier's block");
        let spb = self.sectors_per_block;
        let (l2p, info) = (&mut self.store.l2p, &mut self.blocks.info);
        let fr = match s {
            Stream::Host => &self.host[plane as usize],
            Stream::Gc => &self.gc[plane as usize],
        };
        let mut rest = current;
        while rest != 0 {
            let slot = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            let lpn = u64::from(fr.slots[slot].lpn);
            let old = l2p.get(lpn);
            if old != 0 {
                // Mapped PSAs fit 32 bits (`block_of_psa`); a multiply-high, not a division.
                info[((old - 1) / spb) as usize].valid -= 1;
            }
            l2p.set(lpn, (first_psa + slot as u64 + 1) as u32);
        }
        info[fr.block as usize].valid += current.count_ones();
    }

    /// Points `lpn` at `psa`, moving its valid count from the old block.
    fn remap(&mut self, lpn: u32, psa: u64) {
        let old = self.store.l2p.get(u64::from(lpn));
        if old != 0 {
            let ob = self.block_of_psa(u64::from(old - 1));
            self.blocks.info[ob as usize].valid -= 1;
        }
        let nb = self.block_of_psa(psa);
        self.blocks.info[nb as usize].valid += 1;
        self.store.l2p.set(u64::from(lpn), (psa + 1) as u32);
    }

    #[inline]
    fn block_of_psa(&self, psa: u64) -> u32 {
        // Mapped PSAs fit 32 bits (the table stores PSA + 1 as a u32): a strength-reduced 32-bit division.
        match u32::try_from(psa) {
            Ok(p) => p / self.sectors_per_block,
            Err(_) => (psa / u64::from(self.sectors_per_block.get())) as u32,
        }
    }

    /// Deallocates `count` sectors from `lpn`.
    pub fn trim(&mut self, lpn: u32, count: u32) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        self.check_lpn(lpn)?;
        self.check_lpn(lpn + count - 1)?;
        for l in lpn..lpn + count {
            if self.buffered != 0 {
                self.unbuffer(self.plane_of(l), l);
            }
            let old = self.store.l2p.get(u64::from(l));
            if old != 0 {
                let psa = u64::from(old - 1);
                let ob = self.block_of_psa(psa);
                self.blocks.info[ob as usize].valid -= 1;
                self.store.l2p.set(u64::from(l), 0);
                self.injected.remove(&psa);
            }
        }
        self.stats.host_sectors_trimmed += u64::from(count);
        let seq = self.next_seq();
        self.store.trims.append(TrimRecord { seq, lpn, count })
    }

    /// Programs every partially filled or held host page (padding), none before `ready`; returns when the last of
    /// these programs ends.
    pub fn flush(&mut self, ready: impl Into<At>, sink: &mut dyn FlashSink) -> At {
        let ready = ready.into();
        let mut programs = Vec::new();
        for plane in 0..self.geo.planes() {
            let f = &self.host[plane as usize];
            if f.block != NO_BLOCK && f.filled > 0 {
                let i = Self::spare_index(Stream::Host, plane);
                self.page_floor[i] = sink.max_all(self.page_floor[i], &[ready]);
                programs.push(self.program_with_held_siblings(plane, sink));
            }
        }
        sink.max_all(ready, &programs)
    }

    /// Sectors waiting in unprogrammed pages.
    pub fn buffered_sectors(&self) -> usize {
        self.buffered as usize
    }

    /// Reads the sector at `loc`; `Ok(false)` if the stored data fails its checksum. Unwritten and unstored
    /// (timing-only) sectors read as zeroes.
    pub fn read_sector(&self, loc: Location, out: &mut [u8]) -> Result<bool> {
        let (psa, present, crc) = match loc {
            Location::Unmapped => {
                out.fill(0);
                return Ok(true);
            }
            Location::Buffered(psa) => {
                let slot = (psa % u64::from(self.spp)) as usize;
                let plane = self.geo.page_addr(psa / u64::from(self.spp)).plane;
                let fr = &self.host[plane as usize];
                (psa, fr.present & (1 << slot) != 0, fr.slots[slot].crc)
            }
            Location::Flash(psa) if psa / u64::from(self.spp) >= self.geo.pages() => return Ok(false),
            // A store that keeps no data never marks a slot present (`write_tagged`, `write_physical`): its OOB
            // record has nothing to say, and looking it up is a cache miss per read on a large device.
            Location::Flash(_) if !self.store.data.materialises() => {
                out.fill(0);
                return Ok(true);
            }
            Location::Flash(psa) => {
                let slot = (psa % u64::from(self.spp)) as usize;
                let r = Oob::new(self.store.oob.get(psa / u64::from(self.spp)), self.spp as usize);
                (psa, r.present(slot), r.crc(slot))
            }
        };
        if !present {
            out.fill(0);
            return Ok(true);
        }
        self.store.data.read_sector(psa, out)?;
        // Bytes in this process's own memory cannot be damaged from outside it (a data file can): only stored files
        // are checked against the checksum their sector was written with.
        Ok(self.store.data.in_memory() || crc32fast::hash(out) == crc)
    }

    /// Injects raw bit errors (worst codeword) into the stored copy of `lpn`.
    pub fn inject_errors(&mut self, lpn: u32, bits: u32) -> Result<()> {
        self.check_lpn(lpn)?;
        match self.locate(lpn) {
            Location::Flash(psa) => {
                self.injected.insert(psa, bits);
                Ok(())
            }
            Location::Buffered(_) => Err(SimError::InvalidArgument(format!(
                "LBA {lpn} is still in the write buffer; flush before injecting flash errors"
            ))),
            Location::Unmapped => Err(SimError::InvalidArgument(format!("LBA {lpn} is not written"))),
        }
    }

    /// Injected raw errors of a sector.
    #[inline]
    pub fn injected_errors(&self, psa: u64) -> u32 {
        if self.injected.is_empty() {
            0
        } else {
            self.injected.get(&psa).copied().unwrap_or(0)
        }
    }

    /// Erase count of the block holding a PPN.
    pub fn erase_count_of(&self, ppn: u64) -> u32 {
        self.blocks.info[self.geo.block_of_ppn(ppn) as usize].erase_count
    }

    /// The extension spare bytes of an LBA's current copy (in flash or still in an open page); zeroes if unmapped.
    pub fn spare_of(&self, lpn: u32) -> [u8; SPARE_BYTES] {
        let spp = u64::from(self.spp);
        match self.locate(lpn) {
            Location::Unmapped => [0; SPARE_BYTES],
            Location::Buffered(psa) => {
                let slot = (psa % spp) as usize;
                let plane = self.geo.page_addr(psa / spp).plane;
                if self.host[plane as usize].tagged & (1 << slot) != 0 {
                    self.spares[Self::spare_index(Stream::Host, plane)][slot]
                } else {
                    [0; SPARE_BYTES]
                }
            }
            Location::Flash(psa) => {
                Oob::new(self.store.oob.get(psa / spp), spp as usize).spare((psa % spp) as usize).try_into().expect("slot")
            }
        }
    }

    /// Replaces the extension spare bytes of an LBA's current copy in place (an open page's slot, or a programmed
    /// page's OOB slot; the record checksum does not cover them). Returns the copy's physical sector address and
    /// whether it is programmed; None if unmapped.
    pub fn set_spare_of(&mut self, lpn: u32, spare: &[u8; SPARE_BYTES]) -> Option<(u64, bool)> {
        let spp = u64::from(self.spp);
        self.spares_written = true;
        match self.locate(lpn) {
            Location::Unmapped => None,
            Location::Buffered(psa) => {
                let slot = (psa % spp) as usize;
                let plane = self.geo.page_addr(psa / spp).plane;
                self.host[plane as usize].tagged |= 1 << slot;
                self.spares[Self::spare_index(Stream::Host, plane)][slot] = *spare;
                Some((psa, false))
            }
            Location::Flash(psa) => {
                OobMut::new(self.store.oob.get_mut(psa / spp), spp as usize).set_spare((psa % spp) as usize, spare);
                Some((psa, true))
            }
        }
    }

    /// The OOB record of a physical page.
    pub fn oob(&self, ppn: u64) -> Oob<'_> {
        Oob::new(self.store.oob.get(ppn), self.spp as usize)
    }

    /// Starts (or stops) logging GC's sector moves for `take_relocations`.
    pub fn track_relocations(&mut self, on: bool) {
        self.relocations = on.then(Vec::new);
    }

    /// The sector moves logged since the last call.
    pub fn take_relocations(&mut self) -> Vec<Relocation> {
        self.relocations.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Write amplification: flash page programs over host-written pages.
    pub fn waf(&self) -> f64 {
        if self.stats.host_sectors_written == 0 {
            return 0.0;
        }
        (self.stats.pages_programmed * u64::from(self.spp)) as f64 / self.stats.host_sectors_written as f64
    }

    /// Fraction of logical sectors mapped.
    pub fn occupancy(&self) -> f64 {
        let valid: u64 = self.blocks.info.iter().map(|b| u64::from(b.valid)).sum();
        (valid + self.buffered) as f64 / self.logical_sectors as f64
    }

    /// Checks internal invariants (tests, debugging): valid counts match the mapping table.
    pub fn check_consistency(&self) -> Result<()> {
        let mut counts = vec![0u32; self.blocks.info.len()];
        for lpn in 0..self.logical_sectors {
            let e = self.store.l2p.get(lpn);
            if e != 0 {
                let psa = u64::from(e - 1);
                let ppn = psa / u64::from(self.spp);
                let slot = (psa % u64::from(self.spp)) as usize;
                if ppn >= self.geo.pages() {
                    return Err(SimError::Image(format!("l2p: LBA {lpn} maps to PSA {psa}, past the flash")));
                }
                let rec = Oob::new(self.store.oob.get(ppn), self.spp as usize);
                if !rec.crc_ok() {
                    return Err(SimError::Image(format!("oob: the record of page {ppn} (LBA {lpn}) fails its checksum")));
                }
                if rec.lpn(slot) != lpn as u32 {
                    return Err(SimError::Image(format!("LBA {lpn} maps to PSA {psa} whose OOB names {}", rec.lpn(slot))));
                }
                counts[self.block_of_psa(psa) as usize] += 1;
            }
        }
        for (id, (b, c)) in self.blocks.info.iter().zip(&counts).enumerate() {
            if b.valid != *c {
                return Err(SimError::Image(format!("block {id}: valid count {} but {c} mapped sectors", b.valid)));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
