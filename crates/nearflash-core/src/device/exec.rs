//! `ExecCtx`: what firmware extensions may do while executing a command. Every call books its time on the shared
//! timelines and its energy on the shared ledger, and does its functional work on the stored data.
//!
//! Logical access goes through the FTL (`flash_read`, `write_lbas`); physical access (`read_page`,
//! `read_page_range`, `sense_page`, `program_page`, `erase_block`) bypasses it: reads may address any page, programs and erases only the
//! extension-reserved blocks (`ftl.ext_reserved_blocks`). Addresses out of range are errors, never clamped.
//!
//! A read that brings data into the controller says where it goes ([`ReadTo`]): into controller DRAM, booked as the
//! host read path books it (`DeviceCore::through_dram`, the one place), into DRAM to stay, or into a compute unit's
//! own buffer on the flash interface, bypassing DRAM. Sensing for logic beside the die (`sense_page*`) moves nothing
//! into DRAM.
//!
//! One convention for time: every call that books work takes `ready` (the earliest virtual time, in ns, the work
//! may start) as its first argument after `&mut self`, and returns when the work is done (`HostCtx` does the same).

use super::core::{DeviceCore, OnMediaError};
use super::report::OpClass;
use crate::config::DeviceConfig;
use crate::ctrl::UnitHandle;
use crate::engine::{At, Rng, Time};
use crate::ftl::oob::SPARE_BYTES;
use crate::ftl::{Location, PageData, PhysError};
use crate::nand::{EccOutcome, Geometry};
use crate::nvme::Status;

/// Where a read's data goes in the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadTo {
    /// Controller DRAM: written in by the flash interface and read out once by its consumer (a firmware core, a
    /// compute unit, the host DMA), as for a host Read: the DRAM port carries twice the bytes, and the data is ready
    /// when it is through. The consumer books no DRAM of its own for that first read-out.
    Dram,
    /// Controller DRAM, to stay there for later use (computational programs' SLM): written in once; whatever reads
    /// it later books that read (`dram`).
    DramKept,
    /// A compute unit's own buffer on the flash interface, bypassing DRAM (iSSD's per-channel FMCs, Cognitive SSD's
    /// DLG-x reading weights and graph pages straight from NAND): the data is ready when decoded; the caller books
    /// DRAM (`dram`) where the data crosses it later.
    UnitBuffer,
}

/// One flash page's part of a [`FlashRead`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageDone {
    /// First LBA of the read served by this page.
    pub lba: u64,
    pub sectors: u32,
    /// Byte offset of those sectors in the output buffer.
    pub offset: usize,
    pub channel: u32,
    pub die: u32,
    /// When the page's data is decoded in the controller (buffered or unmapped sectors: when looked up); read into
    /// DRAM ([`ReadTo`]), when it is through DRAM.
    pub done: Time,
    /// How the ECC decoded the page (buffered or unmapped sectors: `Corrected`). `Uncorrectable` only from
    /// [`ExecCtx::flash_read_reporting`], where such a page's bytes are zeroes.
    pub ecc: EccOutcome,
}

/// The outcome of reading LBAs into controller memory.
#[derive(Debug, Clone, Default)]
pub struct FlashRead {
    pub done: Time,
    pub pages: Vec<PageDone>,
}

/// The real end of flash work a command entered ([`ExecCtx::flash_end`]). The times `ExecCtx`'s flash calls return
/// are forecasts (the dies unloaded); this handle names when the work really ends, which the event loop learns
/// later. It may be kept across commands: a later command asks whether it has ended (`ended`) or waits for it
/// (`complete_after`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlashEnd(At);

/// Where a physical page sits in the array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhysAddr {
    pub ppn: u64,
    pub channel: u32,
    /// Chip (way) on its channel.
    pub chip: u32,
    /// Global die (LUN) number.
    pub die: u32,
    /// Global plane number, and the plane's index within its die.
    pub plane: u32,
    pub plane_in_die: u32,
    /// Global block number, and the block's index within its plane.
    pub block: u32,
    pub block_in_plane: u32,
    /// Page within its block.
    pub page: u32,
}

/// Where an LBA's current copy is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    Unmapped,
    /// In an open page in controller DRAM (not yet programmed).
    Buffered,
    /// In sector slot `slot` of a programmed page.
    Flash { addr: PhysAddr, slot: u32 },
}

/// The outcome of a physical page read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRead {
    /// When the data is in the controller (read into DRAM, [`ReadTo`]: when it is through DRAM; for a sense without
    /// transfer, in the page register).
    pub done: Time,
    pub addr: PhysAddr,
    /// Bytes that crossed the channel (a page, a column read's codewords, or what a sense asked for).
    pub moved: u64,
    /// How the ECC decoded the moved bytes (retries and soft decoding cost time; nothing moved: `Corrected`).
    pub ecc: EccOutcome,
    /// What the page holds.
    pub page: PageData,
}

fn phys_status(e: PhysError) -> Status {
    match e {
        PhysError::OutOfRange(_) => Status::LBA_OUT_OF_RANGE,
        PhysError::NotReserved(_) | PhysError::OutOfOrder { .. } | PhysError::TooLong { .. } => Status::INVALID_FIELD,
    }
}

/// What an extension may do while executing a command.
pub struct ExecCtx<'a> {
    pub(crate) core: &'a mut DeviceCore,
    pub(crate) rng: &'a mut Rng,
    /// When the firmware has fetched and decoded the command.
    pub start: Time,
    pub(crate) accounted_as: Option<(OpClass, u64)>,
    /// This command's flash work whose end is not known yet (the command completes after it).
    pub(crate) pending: Vec<At>,
}

impl ExecCtx<'_> {
    /// The time of `at` for the extension's straight-line code: its value if known, else its forecast
    /// (`device::forecast`), and the command's completion waits for it.
    fn settle(&mut self, at: At) -> Time {
        let floor = self.core.floor();
        match self.core.flow.value(at) {
            Some(t) => t,
            None => {
                self.pending.push(at);
                self.core.forecast.as_ref().map_or(floor, |f| f.time_of(at, &self.core.flow, floor))
            }
        }
    }

    /// A handle on the real end of every flash transaction this command has entered so far (and of what its calls
    /// booked after them), whatever their forecasts said.
    pub fn flash_end(&mut self) -> FlashEnd {
        let pending = self.pending.clone();
        FlashEnd(self.core.max_all(At::ZERO, &pending))
    }

    /// When the flash work `h` names really ended, once the event loop has reached it; `None` while some of it is
    /// still queued or running at the loop's clock, which is the host's clock when this command was submitted. (A
    /// handle of work long gone reads as ended at 0.)
    pub fn ended(&self, h: FlashEnd) -> Option<Time> {
        self.core.flow.value(h.0)
    }

    /// This command completes no earlier than `ns` after the real end of `h`: what follows data that may land later
    /// than forecast (an accelerator's pass after this command's reads, or data it shares with another command still
    /// reading it).
    pub fn complete_after(&mut self, h: FlashEnd, ns: u64) {
        match self.core.flow.value(h.0) {
            Some(t) => self.pending.push(At::at(t + ns)),
            None => self.pending.push(h.0 + ns),
        }
    }

    /// Counts this command in the report as `class` moving `bytes` (e.g. an intercepted standard Read that the
    /// extension served as an ordinary read); by default extension commands count as vendor commands of 0 bytes.
    pub fn account_as(&mut self, class: OpClass, bytes: u64) {
        self.accounted_as = Some((class, bytes));
    }

    /// Says why this command fails: the reason (and the byte of the command holding the offending field, e.g. 40
    /// for CDW10) goes into the Error Information log with the command's status, where a host library reads it
    /// (`Device::error_reason`). Returns `status`, for `return Err(ctx.explain(..))`-style use.
    pub fn explain(&mut self, status: Status, byte: Option<u8>, reason: impl Into<String>) -> Status {
        self.core.refuse(status, byte, reason)
    }

    /// Whether this command's failure has been explained already (`explain`), so that a firmware's catch-all
    /// reason does not replace a more specific one given deeper down.
    pub fn is_explained(&self) -> bool {
        self.core.error_detail.is_some()
    }

    /// The flash work this command enters from now on is of `class` (declared with `AttachCtx::flash_class`), not of
    /// its submission queue's priority: it then overtakes, shares with or yields to host I/O as the class says.
    pub fn use_class(&mut self, class: crate::ctrl::sched::ClassId) {
        self.core.class = class;
    }

    pub fn config(&self) -> &DeviceConfig {
        &self.core.cfg
    }

    pub fn geometry(&self) -> &Geometry {
        &self.core.nand.geo
    }

    /// Bytes per logical block.
    pub fn lba_bytes(&self) -> u64 {
        u64::from(self.core.nand.geo.sector_size)
    }

    /// Logical blocks the FTL holds (the advertised namespace may be larger).
    pub fn lbas(&self) -> u64 {
        self.core.ftl.logical_sectors()
    }

    /// Reads `nlb` blocks from `slba` through the FTL into the controller, `to` DRAM or a unit's buffer (`out`; empty
    /// for timing only), from `ready`; the controller cores issue one flash transaction per page. Fails with LBA Out
    /// of Range or Unrecovered Read Error.
    pub fn flash_read(&mut self, ready: Time, slba: u64, nlb: u32, to: ReadTo, out: &mut [u8]) -> Result<FlashRead, Status> {
        self.logical_read(ready, slba, nlb, to, out, true, OnMediaError::Fail)
    }

    /// As `flash_read`, but the per-page flash transactions are not charged to the controller cores: for firmware
    /// whose own units sequence the flash (iSSD's per-channel FMCs, NICE's R5 or A53 sequencer).
    pub fn flash_read_self_sequenced(&mut self, ready: Time, slba: u64, nlb: u32, to: ReadTo, out: &mut [u8]) -> Result<FlashRead, Status> {
        self.logical_read(ready, slba, nlb, to, out, false, OnMediaError::Fail)
    }

    /// As `flash_read`, but a page the ECC cannot correct (or a sector whose stored data fails its checksum) does not
    /// fail the read: its [`PageDone::ecc`] says `Uncorrectable`, its bytes in `out` are zeroes, and the other pages
    /// are read as usual; the time spent on it (retries, soft decoding) is booked. Fails only with LBA Out of Range
    /// (or Data Transfer Error for a short `out`). For firmware that tells its own caller which block was lost
    /// (computational programs' reads).
    pub fn flash_read_reporting(&mut self, ready: Time, slba: u64, nlb: u32, to: ReadTo, out: &mut [u8]) -> Result<FlashRead, Status> {
        self.logical_read(ready, slba, nlb, to, out, true, OnMediaError::Report)
    }

    /// Reads through the FTL (each page's time as `settle` gives it) and moves the pages `to` their place in the
    /// order they are decoded.
    #[allow(clippy::too_many_arguments)]
    fn logical_read(&mut self, ready: Time, slba: u64, nlb: u32, to: ReadTo, out: &mut [u8], issue_on_cores: bool, media: OnMediaError) -> Result<FlashRead, Status> {
        let r = self.core.read_lbas(slba, nlb, At::at(ready), out, issue_on_cores, media)?;
        let lookup = self.settle(r.lookup);
        let mut read = FlashRead { done: lookup, pages: Vec::with_capacity(r.pages.len()) };
        for p in &r.pages {
            let done = self.settle(p.done);
            read.pages.push(PageDone { lba: p.lba, sectors: p.sectors, offset: p.offset, channel: p.channel, die: p.die, done, ecc: p.ecc });
        }
        self.core.recycle(r.pages);
        read.pages.sort_by_key(|p| p.done);
        let sector = self.lba_bytes();
        for p in &mut read.pages {
            p.done = self.core.through_dram(p.done, u64::from(p.sectors) * sector, to);
            read.done = read.done.max(p.done);
        }
        Ok(read)
    }

    /// Writes whole blocks through the write buffer and FTL; returns when buffered.
    pub fn write_lbas(&mut self, ready: Time, slba: u64, data: &[u8]) -> Result<Time, Status> {
        let at = self.core.write_lbas(slba, data, None, At::at(ready))?;
        Ok(self.settle(at))
    }

    /// As `write_lbas`, with `SPARE_BYTES` of extension spare bytes per block programmed into its OOB slot and
    /// carried along when GC moves it.
    pub fn write_lbas_with_spare(&mut self, ready: Time, slba: u64, data: &[u8], spare: &[u8]) -> Result<Time, Status> {
        let blocks = data.len() / self.lba_bytes().max(1) as usize;
        if spare.len() != blocks * SPARE_BYTES || !data.len().is_multiple_of(self.lba_bytes() as usize) {
            return Err(Status::INVALID_FIELD);
        }
        let at = self.core.write_lbas(slba, data, Some(spare), At::at(ready))?;
        Ok(self.settle(at))
    }

    /// The extension spare bytes written with an LBA's current copy (zeroes if unmapped or written without).
    pub fn spare(&self, lba: u64) -> Result<[u8; SPARE_BYTES], Status> {
        Ok(self.core.ftl.spare_of(self.lpn(lba)?))
    }

    /// Physical sector address (page x sectors per page + slot) of an LBA's current copy, programmed or still in an
    /// open page; None if unmapped.
    pub fn sector_address(&self, lba: u64) -> Result<Option<u64>, Status> {
        Ok(match self.core.ftl.locate(self.lpn(lba)?) {
            Location::Unmapped => None,
            Location::Buffered(psa) | Location::Flash(psa) => Some(psa),
        })
    }

    /// Replaces the extension spare bytes of an LBA's current copy in place (NICE writes a file's OOB list once it
    /// learns the file's inode, after the data pages were written). Timing, assumed: a programmed page costs a page
    /// program on its die (a partial-page program of the spare area, charged as a full one); a copy still in an
    /// open page costs a DRAM write. Returns the copy's physical sector address and when the update is done.
    pub fn annotate_spare(&mut self, ready: Time, lba: u64, spare: &[u8; SPARE_BYTES]) -> Result<(u64, Time), Status> {
        let lpn = self.lpn(lba)?;
        let (psa, programmed) = self.core.ftl.set_spare_of(lpn, spare).ok_or(Status::INVALID_FIELD)?;
        if !programmed {
            return Ok((psa, self.dram(ready, SPARE_BYTES as u64)));
        }
        let addr = self.page_addr(psa / u64::from(self.core.nand.geo.sectors_per_page))?;
        let at = self.core.program_page_timed(addr.die, addr.page, At::at(ready));
        Ok((psa, self.settle(at)))
    }

    fn lpn(&self, lba: u64) -> Result<u32, Status> {
        if lba >= self.core.ftl.logical_sectors() {
            return Err(Status::LBA_OUT_OF_RANGE);
        }
        Ok(lba as u32)
    }

    /// Where a physical page sits (channel, chip, die, plane, block, page).
    pub fn page_addr(&self, ppn: u64) -> Result<PhysAddr, Status> {
        let g = &self.core.nand.geo;
        if ppn >= g.pages() {
            return Err(Status::LBA_OUT_OF_RANGE);
        }
        let a = g.page_addr(ppn);
        let die = g.die_of_plane(a.plane);
        Ok(PhysAddr {
            ppn,
            channel: g.channel_of_die(die),
            chip: (die / g.channels) % g.chips_per_channel,
            die,
            plane: a.plane,
            plane_in_die: g.plane_in_die(a.plane),
            block: g.block_id(a.plane, a.block),
            block_in_plane: a.block,
            page: a.page,
        })
    }

    /// Where an LBA's current copy is (firmware that addresses flash physically at run time).
    pub fn placement(&self, lba: u64) -> Result<Placement, Status> {
        let spp = u64::from(self.core.nand.geo.sectors_per_page);
        Ok(match self.core.ftl.locate(self.lpn(lba)?) {
            Location::Unmapped => Placement::Unmapped,
            Location::Buffered(_) => Placement::Buffered,
            Location::Flash(psa) => Placement::Flash { addr: self.page_addr(psa / spp)?, slot: (psa % spp) as u32 },
        })
    }

    /// Senses physical page `ppn` and moves its whole content to the controller, `to` DRAM or a unit's buffer, into
    /// `out` (a page long; empty: timing only). Any programmed page may be read; unwritten slots read as zeroes. An
    /// uncorrectable page or a checksum mismatch is an Unrecovered Read Error (its data is never returned).
    pub fn read_page(&mut self, ready: Time, ppn: u64, to: ReadTo, out: &mut [u8]) -> Result<PageRead, Status> {
        let bytes = u64::from(self.core.nand.geo.page_size);
        let r = self.physical_read(ready, ppn, bytes, false, out)?;
        Ok(self.land(r, to))
    }

    /// A physical read's data, moved through DRAM if it goes there.
    fn land(&mut self, mut r: PageRead, to: ReadTo) -> PageRead {
        r.done = self.core.through_dram(r.done, r.moved, to);
        r
    }

    /// A column read (ONFI random data out): senses physical page `ppn` whole and moves over the channel only the ECC
    /// codewords that hold bytes `offset .. offset + len`, after a Change Read Column points the data-out at them
    /// (`nand.t_column_change`); each moved codeword is decoded and goes `to` DRAM or a unit's buffer. `out` receives
    /// the range (`len` bytes; empty: timing only). A range whose codewords make up the whole page is exactly a
    /// [`read_page`](Self::read_page).
    /// Refused before anything happens: an empty range or one past the page's end, or `out` of another length
    /// (Invalid Field), a page out of range (LBA Out of Range); errors as `read_page` otherwise.
    pub fn read_page_range(&mut self, ready: Time, ppn: u64, offset: u64, len: u64, to: ReadTo, out: &mut [u8]) -> Result<PageRead, Status> {
        let page_size = u64::from(self.core.nand.geo.page_size);
        let end = match offset.checked_add(len) {
            Some(end) if len > 0 && end <= page_size => end,
            _ => {
                let why = format!("bytes {offset} + {len} of a {page_size}-byte page: the range must be non-empty and inside the page");
                return Err(self.explain(Status::INVALID_FIELD, None, why));
            }
        };
        if !out.is_empty() && out.len() as u64 != len {
            return Err(self.explain(Status::INVALID_FIELD, None, format!("a {len}-byte range read into a {}-byte buffer", out.len())));
        }
        self.page_addr(ppn)?;
        let cw = u64::from(self.core.nand.ecc.codeword_bytes.max(1));
        let (first, last) = (offset / cw * cw, end.div_ceil(cw).saturating_mul(cw).min(page_size));
        let mut page = if out.is_empty() { Vec::new() } else { vec![0u8; page_size as usize] };
        let r = self.physical_read(ready, ppn, last - first, last - first < page_size, &mut page)?;
        if !out.is_empty() {
            out.copy_from_slice(&page[offset as usize..end as usize]);
        }
        Ok(self.land(r, to))
    }

    /// Senses physical page `ppn` and moves only `xfer_bytes` over the channel (0 for computation beside the die,
    /// e.g. NDSearch's search-in-NAND): timing only; ECC is charged on the moved bytes, and nothing goes to DRAM
    /// (the moved bytes go to the logic that asked for them).
    pub fn sense_page(&mut self, ready: Time, ppn: u64, xfer_bytes: u64) -> Result<PageRead, Status> {
        if xfer_bytes > u64::from(self.core.nand.geo.page_size) {
            return Err(Status::INVALID_FIELD);
        }
        self.physical_read(ready, ppn, xfer_bytes, false, &mut [])
    }

    /// As `sense_page`, with the page register's content copied into `out` (a page long) for logic beside the die
    /// (NDSearch's SiN units compute on it); only `xfer_bytes` cross the channel and are ECC-decoded.
    pub fn sense_page_into(&mut self, ready: Time, ppn: u64, xfer_bytes: u64, out: &mut [u8]) -> Result<PageRead, Status> {
        if xfer_bytes > u64::from(self.core.nand.geo.page_size) {
            return Err(Status::INVALID_FIELD);
        }
        self.physical_read(ready, ppn, xfer_bytes, false, out)
    }

    /// A multi-plane `sense_page_into`: pages `ppns` must sit at the same page offset of one die, in different
    /// planes; they are sensed in one operation, each moving `xfer_bytes[i]` over the channel, with its content in
    /// `outs[i]` (a page long each). Any uncorrectable page fails the whole read (no data returned).
    pub fn sense_planes_into(&mut self, ready: Time, ppns: &[u64], xfer_bytes: &[u64], outs: &mut [Vec<u8>]) -> Result<Vec<PageRead>, Status> {
        let page_size = u64::from(self.core.nand.geo.page_size);
        if ppns.is_empty() || ppns.len() != xfer_bytes.len() || ppns.len() != outs.len() || xfer_bytes.iter().any(|&x| x > page_size) {
            return Err(Status::INVALID_FIELD);
        }
        let addrs = ppns.iter().map(|&p| self.page_addr(p)).collect::<Result<Vec<_>, _>>()?;
        let a0 = addrs[0];
        for (i, a) in addrs.iter().enumerate() {
            if a.die != a0.die || a.page != a0.page || addrs[..i].iter().any(|b| b.plane == a.plane) {
                return Err(Status::INVALID_FIELD);
            }
        }
        let mut pages = Vec::with_capacity(ppns.len());
        for (&ppn, out) in ppns.iter().zip(outs.iter_mut()) {
            match self.core.ftl.read_page_data(ppn, out) {
                Ok(Ok(p)) => pages.push(p),
                Ok(Err(e)) => return Err(phys_status(e)),
                Err(_) => return Err(Status::INTERNAL_ERROR),
            }
        }
        let (at, ecc) = self.core.read_planes_timed(a0.die, a0.page, ppns, xfer_bytes, At::at(ready));
        let done = self.settle(at);
        if ecc.iter().any(|e| !e.is_ok()) || pages.iter().any(|p| p.corrupt != 0) {
            self.core.media_errors += 1;
            outs.iter_mut().for_each(|o| o.fill(0));
            return Err(Status::UNRECOVERED_READ_ERROR);
        }
        Ok(addrs.into_iter().zip(ecc).zip(pages).zip(xfer_bytes).map(|(((addr, ecc), page), &moved)| PageRead { done, addr, moved, ecc, page }).collect())
    }

    /// Senses `ppn` and moves `xfer` bytes of it; `column`: they start inside the page (a column read).
    fn physical_read(&mut self, ready: Time, ppn: u64, xfer: u64, column: bool, out: &mut [u8]) -> Result<PageRead, Status> {
        let addr = self.page_addr(ppn)?;
        let page = match self.core.ftl.read_page_data(ppn, out) {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => return Err(phys_status(e)),
            Err(_) => return Err(Status::INTERNAL_ERROR),
        };
        let (at, ecc) = self.core.read_page_timed(addr.die, addr.page, ppn, xfer, column, At::at(ready));
        let done = self.settle(at);
        if !ecc.is_ok() || page.corrupt != 0 {
            self.core.media_errors += 1;
            out.fill(0);
            return Err(Status::UNRECOVERED_READ_ERROR);
        }
        Ok(PageRead { done, addr, moved: xfer, ecc, page })
    }

    /// Blocks per plane reserved for extensions (the last blocks of each plane).
    pub fn reserved_blocks_per_plane(&self) -> u32 {
        self.core.ftl.reserved_per_plane()
    }

    /// Whether global block `block` is in the extension-reserved area.
    pub fn is_reserved_block(&self, block: u32) -> bool {
        self.core.ftl.is_reserved_block(block)
    }

    /// The `n`-th reserved block (0-based, plane-major over the planes in their global order).
    pub fn reserved_block(&self, n: u64) -> Result<u32, Status> {
        let g = &self.core.nand.geo;
        let r = u64::from(self.core.ftl.reserved_per_plane());
        if r == 0 || n >= r * u64::from(g.planes()) {
            return Err(Status::LBA_OUT_OF_RANGE);
        }
        let plane = (n / r) as u32;
        Ok(g.block_id(plane, g.blocks_per_plane - r as u32 + (n % r) as u32))
    }

    /// Programs reserved page `ppn` (its block's next erased page) with `data` (up to a page) and `spare` (up to
    /// `SPARE_BYTES` per sector slot); returns when tPROG ends. The data crosses controller DRAM and the channel.
    pub fn program_page(&mut self, ready: Time, ppn: u64, data: &[u8], spare: &[u8]) -> Result<Time, Status> {
        let addr = self.page_addr(ppn)?;
        match self.core.ftl.program_reserved(ppn, data, spare) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(phys_status(e)),
            Err(_) => return Err(Status::INTERNAL_ERROR),
        }
        let at = self.core.program_page_timed(addr.die, addr.page, At::at(ready));
        Ok(self.settle(at))
    }

    /// Erases reserved block `block` (global number); returns when tBERS ends.
    pub fn erase_block(&mut self, ready: Time, block: u32) -> Result<Time, Status> {
        match self.core.ftl.erase_reserved(block) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(phys_status(e)),
            Err(_) => return Err(Status::INTERNAL_ERROR),
        }
        let g = &self.core.nand.geo;
        let die = g.die_of_plane(g.plane_of_block(block));
        let at = self.core.erase_block_timed(die, At::at(ready));
        Ok(self.settle(at))
    }

    /// The extension spare bytes of a physical page's slots (`SPARE_BYTES` each, in slot order).
    pub fn page_spare(&self, ppn: u64) -> Result<&[u8], Status> {
        self.page_addr(ppn)?;
        Ok(self.core.ftl.oob(ppn).ext())
    }

    /// Runs firmware instructions on whichever controller core is free first.
    pub fn firmware(&mut self, ready: Time, instructions: f64) -> Time {
        let c = &mut *self.core;
        c.ctrl.run(&mut c.res, &mut c.ledger, ready, instructions)
    }

    /// Runs firmware instructions on one specific controller core.
    pub fn firmware_on(&mut self, ready: Time, core: u32, instructions: f64) -> Time {
        let c = &mut *self.core;
        c.ctrl.run_on(&mut c.res, &mut c.ledger, core, ready, instructions)
    }

    /// Controller cores.
    pub fn controller_cores(&self) -> u32 {
        self.core.res.group_len(self.core.ctrl.cores)
    }

    /// Moves bytes through controller DRAM.
    pub fn dram(&mut self, ready: Time, bytes: u64) -> Time {
        let c = &mut *self.core;
        c.ctrl.dram(&mut c.res, &mut c.ledger, ready, bytes)
    }

    /// Device-to-host transfer over the link.
    pub fn to_host(&mut self, ready: Time, bytes: u64) -> Time {
        let c = &mut *self.core;
        c.host.to_host(&mut c.res, &mut c.ledger, ready, bytes)
    }

    /// Host-to-device transfer over the link.
    pub fn from_host(&mut self, ready: Time, bytes: u64) -> Time {
        let c = &mut *self.core;
        c.host.to_device(&mut c.res, &mut c.ledger, ready, bytes)
    }

    /// Busies compute unit `member` of `unit` for `cycles`.
    pub fn compute(&mut self, ready: Time, unit: UnitHandle, member: u32, cycles: f64) -> Time {
        let c = &mut *self.core;
        c.units.run(unit, member, &mut c.res, &mut c.ledger, ready, cycles)
    }

    /// Charges extra dynamic energy to a named account.
    pub fn charge(&mut self, account: &str, picojoules: f64) {
        let a = self.core.ledger.account(account);
        self.core.ledger.charge(a, picojoules);
    }

    /// Host CPU work done on behalf of the command (partitioned jobs).
    pub fn host_compute(&mut self, ready: Time, cycles: f64, instructions: f64, cores: u32) -> Time {
        let c = &mut *self.core;
        c.host.compute(&mut c.res, &mut c.ledger, ready, cycles, instructions, cores)
    }

    /// This extension's own random stream (seeded from the device seed and the extension's name).
    pub fn rng(&mut self) -> &mut Rng {
        self.rng
    }
}
