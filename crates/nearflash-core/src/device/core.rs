//! The device's components and the timed data paths shared by NVMe commands and firmware extensions: reading
//! LBAs into controller memory, writing them through the write buffer, and the FTL's flash work on the array.

use crate::config::{DeviceConfig, UnmappedRead};
use super::exec::{FlashRead, PageDone, ReadTo};
use crate::ctrl::{ComputeUnits, Controller, WriteBuffer};
use crate::engine::{rng_stream, EnergyLedger, IntMap, Resources, Rng, Time};
use crate::ftl::oob::SPARE_BYTES;
use crate::ftl::{FlashSink, Ftl, Location};
use crate::host::HostModel;
use crate::nand::{EccOutcome, NandArray};
use crate::nvme::Status;

/// Everything a command touches. Private to the core: extensions reach it through `ExecCtx`, host libraries
/// through `HostCtx`.
pub struct DeviceCore {
    pub(crate) cfg: DeviceConfig,
    pub(crate) res: Resources,
    pub(crate) ledger: EnergyLedger,
    pub(crate) nand: NandArray,
    pub(crate) ftl: Ftl,
    pub(crate) ctrl: Controller,
    pub(crate) host: HostModel,
    pub(crate) wbuf: WriteBuffer,
    pub(crate) units: ComputeUnits,
    pub(crate) ecc_rng: Rng,
    /// Media errors returned to the host.
    pub(crate) media_errors: u64,
    /// A simulator fault met while executing the current command (reported as an error, not a device status).
    pub(crate) fault: Option<crate::error::SimError>,
    /// Why the current command failed, as the firmware explained it (`ExecCtx::explain`); goes to the error log.
    pub(crate) error_detail: Option<crate::nvme::ErrorDetail>,
    /// Completion times of recent page programs: until a program ends, its data is still served from the
    /// write buffer in DRAM.
    programming: IntMap<u64, Time>,
    /// End of the latest page program (a Flush waits for it).
    pub(crate) last_program: Time,
    /// Buffers of `read_lbas`, kept between calls so that a read allocates nothing.
    scratch: ReadScratch,
    /// Set while a host read executes under `mqsim_tsu`: `read_lbas` queues its pages on the array's issue queue
    /// instead of booking them, and lists them in `deferred` as (token, index in `FlashRead::pages`).
    pub(crate) defer_reads: bool,
    pub(crate) deferred: Vec<(u64, usize)>,
    /// The pages of the deferred host read just executed.
    pub(crate) deferred_pages: Vec<PageDone>,
}

/// Working buffers of one `read_lbas` call.
#[derive(Default)]
struct ReadScratch {
    locs: Vec<Location>,
    /// (ppn, first index in `locs`, sectors)
    page_reads: Vec<(u64, usize, u32)>,
    group: Vec<usize>,
    xfer: Vec<u64>,
    /// A spent `FlashRead::pages` given back by `recycle`.
    pages: Vec<PageDone>,
}

/// What a read does with a page the ECC cannot correct, or a sector whose stored data fails its checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnMediaError {
    /// The whole read fails with Unrecovered Read Error (a host Read; most firmware reads).
    Fail,
    /// The read completes: the page's `PageDone::ecc` says `Uncorrectable` and its bytes in `out` are zeroes (never
    /// the damaged data), so that firmware can tell its caller which page was lost (computational programs' reads).
    Report,
}

/// The FTL's flash work, timed on the array.
struct FlashTiming<'a> {
    nand: &'a mut NandArray,
    res: &'a mut Resources,
    ledger: &'a mut EnergyLedger,
    wbuf: &'a mut WriteBuffer,
    rng: &'a mut Rng,
    programming: &'a mut IntMap<u64, Time>,
    last_program: &'a mut Time,
}

impl FlashSink for FlashTiming<'_> {
    fn read_page(&mut self, ready: Time, ppn: u64, sectors: u32, raw_errors: u32, pe: u32) -> Time {
        let geo = &self.nand.geo;
        let a = geo.page_addr(ppn);
        let die = geo.die_of_plane(a.plane);
        let bytes = u64::from(sectors) * u64::from(geo.sector_size);
        let sampled = self.nand.ecc.sample_worst(self.rng, self.nand.ecc.codewords(bytes), pe);
        let outcome = self.nand.ecc.decode(raw_errors.max(sampled));
        self.nand.read(self.res, self.ledger, ready, die, a.page, &[bytes], outcome)
    }

    fn program_pages(&mut self, ready: Time, ppns: &[u64], sectors_released: u32) -> Time {
        let geo = &self.nand.geo;
        let a = geo.page_addr(ppns[0]);
        let die = geo.die_of_plane(a.plane);
        let page_bytes = u64::from(geo.page_size);
        let done = self.nand.program(self.res, self.ledger, ready, die, a.page, ppns.len() as u32, page_bytes);
        self.wbuf.release(done, u64::from(sectors_released));
        if self.programming.len() > 1 << 16 {
            self.programming.retain(|_, &mut t| t > ready);
        }
        for &p in ppns {
            self.programming.insert(p, done);
        }
        *self.last_program = (*self.last_program).max(done);
        done
    }

    fn copyback(&mut self, ready: Time, src: u64, dst: u64) -> Time {
        let geo = &self.nand.geo;
        let (s, d) = (geo.page_addr(src), geo.page_addr(dst));
        self.nand.copyback(self.res, self.ledger, ready, geo.die_of_plane(s.plane), s.page, d.page)
    }

    fn erase_block(&mut self, ready: Time, block_id: u32) -> Time {
        let die = self.nand.geo.die_of_plane(self.nand.geo.plane_of_block(block_id));
        self.nand.erase(self.res, self.ledger, ready, die, 1)
    }

    fn map_read(&mut self, ready: Time, tpage: u64) -> Time {
        let geo = &self.nand.geo;
        let die = (tpage % u64::from(geo.dies())) as u32;
        let bytes = u64::from(geo.page_size);
        self.nand.read(self.res, self.ledger, ready, die, 0, &[bytes], EccOutcome::Corrected)
    }

    fn map_write(&mut self, ready: Time, tpage: u64) -> Time {
        let geo = &self.nand.geo;
        let die = (tpage % u64::from(geo.dies())) as u32;
        let bytes = u64::from(geo.page_size);
        self.nand.program(self.res, self.ledger, ready, die, 0, 1, bytes)
    }
}

impl DeviceCore {
    pub(crate) fn new(cfg: DeviceConfig, ftl: Ftl, seed: u64) -> Self {
        let mut res = Resources::new();
        let mut ledger = EnergyLedger::new();
        let nand = NandArray::new(&cfg, &mut res, &mut ledger);
        let ctrl = Controller::new(&cfg, &mut res, &mut ledger);
        let host = HostModel::new(&cfg, &mut res, &mut ledger);
        let wbuf = WriteBuffer::new(cfg.ftl.write_buffer.0 / cfg.ftl.sector_size.0);
        DeviceCore {
            res,
            ledger,
            nand,
            ftl,
            ctrl,
            host,
            wbuf,
            units: ComputeUnits::default(),
            ecc_rng: rng_stream(seed, "ecc"),
            media_errors: 0,
            fault: None,
            error_detail: None,
            programming: IntMap::default(),
            last_program: 0,
            scratch: ReadScratch::default(),
            defer_reads: false,
            deferred: Vec::new(),
            deferred_pages: Vec::new(),
            cfg,
        }
    }

    /// Fails the current command with `status` and says why (`byte`: the command byte holding the offending field):
    /// the reason goes into the error logs with the status. Returns `status`.
    pub(crate) fn refuse(&mut self, status: Status, byte: Option<u8>, reason: impl Into<String>) -> Status {
        self.error_detail = Some(crate::nvme::ErrorDetail { byte, reason: reason.into() });
        status
    }

    /// Splits the borrow: the FTL and the timing sink over the array.
    fn ftl_and_sink(&mut self) -> (&mut Ftl, FlashTiming<'_>) {
        (
            &mut self.ftl,
            FlashTiming {
                nand: &mut self.nand,
                res: &mut self.res,
                ledger: &mut self.ledger,
                wbuf: &mut self.wbuf,
                rng: &mut self.ecc_rng,
                programming: &mut self.programming,
                last_program: &mut self.last_program,
            },
        )
    }

    /// Looks up and reads `nlb` sectors from `slba` into controller memory (`out`, `nlb` sectors long), starting
    /// at `ready`. Sectors of one physical page share one sensing; pages at the same offset in sibling planes of
    /// a die share a multi-plane read.
    /// `issue_on_cores`: charge the firmware's per-page transaction cost to the controller cores.
    /// `media`: what an unreadable page does ([`OnMediaError`]).
    pub(crate) fn read_lbas(
        &mut self,
        slba: u64,
        nlb: u32,
        ready: Time,
        out: &mut [u8],
        issue_on_cores: bool,
        media: OnMediaError,
    ) -> Result<FlashRead, Status> {
        let mut sc = std::mem::take(&mut self.scratch);
        let r = self.read_lbas_with(&mut sc, slba, nlb, ready, out, issue_on_cores, media);
        self.scratch = sc;
        r
    }

    /// The bytes to move per page of `group` (into `xfer`) and how the ECC decodes them together: the worst
    /// injected or sampled error count of the group's sectors.
    fn group_outcome(&mut self, page_reads: &[(u64, usize, u32)], group: &[usize], locs: &[Location], xfer: &mut Vec<u64>) -> EccOutcome {
        let sector = u64::from(self.nand.geo.sector_size);
        xfer.clear();
        let mut worst = 0;
        let mut pe = 0;
        for &g in group {
            let (ppn, first, n) = page_reads[g];
            xfer.push(u64::from(n) * sector);
            pe = pe.max(self.ftl.erase_count_of(ppn));
            for loc in &locs[first..first + n as usize] {
                if let Location::Flash(psa) = loc {
                    worst = worst.max(self.ftl.injected_errors(*psa));
                }
            }
        }
        let cws = self.nand.ecc.codewords(xfer.iter().sum());
        let sampled = if self.nand.ecc.samples_errors() { self.nand.ecc.sample_worst(&mut self.ecc_rng, cws, pe) } else { 0 };
        self.nand.ecc.decode(worst.max(sampled))
    }

    /// Moves `bytes` read from flash, decoded at `decoded`, where `to` says: into controller DRAM and out once to
    /// their consumer (the host DMA, a firmware core, a compute unit: the DRAM port carries twice the bytes), into
    /// DRAM to stay (once), or into a unit's own buffer (no DRAM). Returns when they are there. The one place where
    /// flash reads book DRAM: host Reads (`deliver_pages`, `ReadTo::Dram`) and the `ExecCtx` reads come here.
    pub(crate) fn through_dram(&mut self, decoded: Time, bytes: u64, to: ReadTo) -> Time {
        let passes = match to {
            ReadTo::Dram => 2,
            ReadTo::DramKept => 1,
            ReadTo::UnitBuffer => return decoded,
        };
        self.ctrl.dram(&mut self.res, &mut self.ledger, decoded, passes * bytes)
    }

    /// Moves the pages of a read `to` their place (`through_dram`) in the order they are decoded: `pages` is sorted
    /// by decode time and each page's `done` becomes when its data is there.
    pub(crate) fn stage_in_dram(&mut self, pages: &mut [PageDone], to: ReadTo) {
        pages.sort_by_key(|p| p.done);
        let sector = u64::from(self.nand.geo.sector_size);
        for p in pages {
            p.done = self.through_dram(p.done, u64::from(p.sectors) * sector, to);
        }
    }

    /// Moves the pages of a host read, each decoded at its `done`, through DRAM to the host as soon as each is
    /// decoded; returns when the last has arrived (at least `fw`).
    pub(crate) fn deliver_pages(&mut self, fw: Time, mut pages: Vec<PageDone>) -> Time {
        self.stage_in_dram(&mut pages, ReadTo::Dram);
        let sector = u64::from(self.nand.geo.sector_size);
        let mut done = fw;
        for p in &pages {
            let b = u64::from(p.sectors) * sector;
            done = done.max(self.host.to_host(&mut self.res, &mut self.ledger, p.done, b));
        }
        self.recycle(pages);
        done
    }

    /// Gives a spent `FlashRead::pages` back, so that the next read reuses its allocation.
    pub(crate) fn recycle(&mut self, mut pages: Vec<PageDone>) {
        pages.clear();
        self.scratch.pages = pages;
    }

    #[allow(clippy::too_many_arguments)]
    fn read_lbas_with(
        &mut self,
        sc: &mut ReadScratch,
        slba: u64,
        nlb: u32,
        ready: Time,
        out: &mut [u8],
        issue_on_cores: bool,
        media: OnMediaError,
    ) -> Result<FlashRead, Status> {
        let sector = u64::from(self.nand.geo.sector_size);
        let spp = u64::from(self.nand.geo.sectors_per_page);
        self.check_lbas(slba, nlb)?;
        if !out.is_empty() && (out.len() as u64) < u64::from(nlb) * sector {
            let why = format!("{nlb} blocks of {sector} bytes read into a {}-byte buffer", out.len());
            return Err(self.refuse(Status::DATA_TRANSFER_ERROR, None, why));
        }
        // Mapping lookups (demand-paged maps may need translation reads first).
        let mut lookup_done = ready;
        let allocate = self.cfg.unmapped_read() == UnmappedRead::Allocate;
        let locs = &mut sc.locs;
        locs.clear();
        for i in 0..u64::from(nlb) {
            let lpn = (slba + i) as u32;
            let (ftl, mut sink) = self.ftl_and_sink();
            lookup_done = lookup_done.max(ftl.map_access(lpn, false, ready, &mut sink));
            let mut loc = ftl.locate(lpn);
            if allocate && loc == Location::Unmapped {
                // MQSim's page-level FTL: the never-written sector gets a page and is read from flash.
                loc = match ftl.allocate_for_read(lpn, ready, &mut sink) {
                    Ok(l) => l,
                    Err(e) => {
                        let why = format!("mapping a never-written LBA for a read failed: {e}");
                        self.fault.get_or_insert(e);
                        return Err(self.refuse(Status::INTERNAL_ERROR, None, why));
                    }
                };
                if loc != Location::Unmapped {
                    ftl.map_access(lpn, true, ready, &mut sink); // the new entry is dirty (a hit: no time)
                }
            }
            locs.push(loc);
        }
        // Group flash sectors by page: runs of consecutive sectors on one page.
        let mut result = FlashRead { done: lookup_done, pages: std::mem::take(&mut sc.pages) };
        let mut ok = true;
        let mut i = 0usize;
        let page_reads = &mut sc.page_reads; // (ppn, first index, sectors)
        page_reads.clear();
        while i < locs.len() {
            match locs[i] {
                Location::Flash(psa) if self.programming.get(&(psa / spp)).is_none_or(|&t| t <= ready) => {
                    let ppn = psa / spp;
                    let mut n = 1;
                    while i + n < locs.len() && matches!(locs[i + n], Location::Flash(p) if p / spp == ppn) {
                        n += 1;
                    }
                    page_reads.push((ppn, i, n as u32));
                    i += n;
                }
                _ => {
                    result.pages.push(PageDone {
                        lba: slba + i as u64,
                        sectors: 1,
                        offset: i * sector as usize,
                        channel: 0,
                        die: 0,
                        done: lookup_done,
                        ecc: EccOutcome::Corrected,
                    });
                    i += 1;
                }
            }
        }
        // The firmware queues one flash transaction per page group.
        let issue = if page_reads.is_empty() || !issue_on_cores {
            lookup_done
        } else {
            self.ctrl.run(&mut self.res, &mut self.ledger, lookup_done, self.ctrl.fw_page * page_reads.len() as f64)
        };
        let geo = self.nand.geo.clone();
        let ppd = geo.planes_per_die;
        if self.defer_reads && self.nand.defers_reads() {
            // mqsim_tsu: each page waits in its die's queue; the array decides when it is read (tokens in
            // `deferred`, decode ends reported by the array).
            for k in 0..page_reads.len() {
                let a = geo.page_addr(page_reads[k].0);
                let die = geo.die_of_plane(a.plane);
                let outcome = self.group_outcome(page_reads, &[k], locs, &mut sc.xfer);
                let bytes = sc.xfer[0];
                let token = self.nand.queue_read(issue, die, a.page, a.plane % ppd, bytes, outcome);
                ok &= outcome.is_ok();
                let (_, first, n) = page_reads[k];
                self.deferred.push((token, result.pages.len()));
                result.pages.push(PageDone {
                    lba: slba + first as u64,
                    sectors: n,
                    offset: first * sector as usize,
                    channel: geo.channel_of_die(die),
                    die,
                    done: Time::MAX,
                    ecc: outcome,
                });
            }
            page_reads.clear();
        }
        // Multi-plane grouping: same die, same page offset, distinct planes, adjacent in the list.
        let mut k = 0;
        while k < page_reads.len() {
            let a0 = geo.page_addr(page_reads[k].0);
            let die = geo.die_of_plane(a0.plane);
            let group = &mut sc.group;
            group.clear();
            group.push(k);
            if self.nand.timing.multi_plane {
                let mut j = k + 1;
                while j < page_reads.len() && group.len() < geo.planes_per_die as usize {
                    let a = geo.page_addr(page_reads[j].0);
                    let distinct = group.iter().all(|&g| geo.page_addr(page_reads[g].0).plane != a.plane);
                    if geo.die_of_plane(a.plane) == die && a.page == a0.page && distinct {
                        group.push(j);
                        j += 1;
                    } else {
                        break;
                    }
                }
            }
            let outcome = self.group_outcome(page_reads, group, locs, &mut sc.xfer);
            let xfer = &sc.xfer;
            // Planes of the die read (bit per plane; 0, "not known", past 32 planes).
            let mask = if ppd > 32 { 0 } else { group.iter().fold(0u32, |m, &g| m | 1 << (geo.page_addr(page_reads[g].0).plane % ppd)) };
            let done = self.nand.read_on_planes(&mut self.res, &mut self.ledger, issue, die, a0.page, mask, xfer, false, outcome);
            ok &= outcome.is_ok();
            for &g in group.iter() {
                let (_, first, n) = page_reads[g];
                result.pages.push(PageDone {
                    lba: slba + first as u64,
                    sectors: n,
                    offset: first * sector as usize,
                    channel: geo.channel_of_die(die),
                    die,
                    done,
                    ecc: outcome,
                });
            }
            result.done = result.done.max(done);
            k += group.len();
        }
        if !ok && media == OnMediaError::Fail {
            self.media_errors += 1;
            let why = format!("LBAs {slba} + {nlb}: a page's bit errors are beyond what ECC, read retry and soft decoding correct");
            return Err(self.refuse(Status::UNRECOVERED_READ_ERROR, None, why));
        }
        // Functional read (skipped for timing-only callers); a checksum mismatch is a media error, never silently
        // returned data.
        if out.is_empty() {
            return Ok(result);
        }
        let sector = sector as usize;
        for p in result.pages.iter_mut() {
            let span = p.offset..p.offset + p.sectors as usize * sector;
            let mut lost = !p.ecc.is_ok();
            for (k, idx) in (p.offset / sector..span.end / sector).enumerate() {
                if lost {
                    break;
                }
                match self.ftl.read_sector(locs[idx], &mut out[idx * sector..(idx + 1) * sector]) {
                    Ok(true) => {}
                    Ok(false) | Err(_) if media == OnMediaError::Report => lost = true,
                    Ok(false) | Err(_) => {
                        self.media_errors += 1;
                        let why = format!("LBA {}: the stored data fails its checksum", p.lba + k as u64);
                        return Err(self.refuse(Status::UNRECOVERED_READ_ERROR, None, why));
                    }
                }
            }
            if lost {
                self.media_errors += 1;
                p.ecc = EccOutcome::Uncorrectable(p.ecc.retries());
                out[span].fill(0);
            }
        }
        Ok(result)
    }

    /// LBA Out of Range, with its reason, unless `nlb` blocks from `slba` lie in the FTL's capacity.
    fn check_lbas(&mut self, slba: u64, nlb: u32) -> Result<(), Status> {
        let lbas = self.ftl.logical_sectors();
        if slba.checked_add(u64::from(nlb)).is_none_or(|e| e > lbas) {
            return Err(self.refuse(Status::LBA_OUT_OF_RANGE, None, format!("LBAs {slba} + {nlb}: the device holds {lbas} LBAs")));
        }
        Ok(())
    }

    /// Writes whole sectors from `data` at `slba` through the write buffer (with `SPARE_BYTES` of extension spare
    /// bytes per sector if given); returns when all are buffered. `data` empty means timing-only (nothing stored).
    pub(crate) fn write_lbas(&mut self, slba: u64, data: &[u8], spare: Option<&[u8]>, ready: Time) -> Result<Time, Status> {
        let sector = self.nand.geo.sector_size as usize;
        let nlb = if data.is_empty() { 0 } else { data.len() / sector };
        let nlb = u32::try_from(nlb).map_err(|_| self.refuse(Status::INVALID_FIELD, None, format!("{nlb} blocks in one write: at most {} are allowed", u32::MAX)))?;
        self.write_sectors(slba, nlb, Some(data), spare, ready)
    }

    /// Writes `nlb` sectors (data `None` or empty: timing-only) admitted to the buffer from `ready`.
    pub(crate) fn write_sectors(
        &mut self,
        slba: u64,
        nlb: u32,
        data: Option<&[u8]>,
        spare: Option<&[u8]>,
        ready: Time,
    ) -> Result<Time, Status> {
        let sector = self.nand.geo.sector_size as usize;
        self.check_lbas(slba, nlb)?;
        let data = data.filter(|d| !d.is_empty());
        if let Some(d) = data {
            if d.len() < nlb as usize * sector {
                let why = format!("{nlb} blocks of {sector} bytes written from a {}-byte buffer", d.len());
                return Err(self.refuse(Status::DATA_TRANSFER_ERROR, None, why));
            }
        }
        let admitted = match self.wbuf.admit(ready, u64::from(nlb)) {
            Some(t) => t,
            None => {
                // Everything buffered is in partial pages: push them out, then the releases they schedule free room.
                let (ftl, mut sink) = self.ftl_and_sink();
                ftl.flush(ready, &mut sink);
                self.wbuf.admit(ready, u64::from(nlb)).unwrap_or(ready)
            }
        };
        let mut done = admitted;
        for i in 0..nlb as usize {
            let lpn = (slba + i as u64) as u32;
            let chunk = data.map(|d| &d[i * sector..(i + 1) * sector]);
            let tag: Option<&[u8; SPARE_BYTES]> =
                spare.and_then(|s| s.get(i * SPARE_BYTES..(i + 1) * SPARE_BYTES)).and_then(|s| s.try_into().ok());
            let (ftl, mut sink) = self.ftl_and_sink();
            done = done.max(ftl.map_access(lpn, true, admitted, &mut sink));
            if let Err(e) = ftl.write_tagged(lpn, chunk, tag, admitted, &mut sink) {
                // Range and size were checked above: what remains is the model's own failure.
                let why = format!("the FTL failed to place LBA {lpn}: {e}");
                self.fault.get_or_insert(e);
                return Err(self.refuse(Status::INTERNAL_ERROR, None, why));
            }
        }
        Ok(done)
    }

    /// Programs all buffered partial pages; returns when every program issued so far has ended.
    pub(crate) fn flush_buffer(&mut self, ready: Time) -> Time {
        let (ftl, mut sink) = self.ftl_and_sink();
        ftl.flush(ready, &mut sink).max(self.last_program)
    }

    /// Senses page `ppn` (at offset `page` of `die`) and moves `xfer_bytes` of it to the controller, with the ECC
    /// outcome of those bytes (bit errors sampled with the block's wear, plus any injected into its sectors).
    /// `column`: a column read, the bytes (whole ECC codewords) start inside the page, after a Change Read Column.
    pub(crate) fn read_page_timed(&mut self, die: u32, page: u32, ppn: u64, xfer_bytes: u64, column: bool, ready: Time) -> (Time, EccOutcome) {
        let outcome = self.ecc_outcome(ppn, xfer_bytes);
        let done = self.nand.read_on_planes(&mut self.res, &mut self.ledger, ready, die, page, 0, &[xfer_bytes], column, outcome);
        (done, outcome)
    }

    /// The ECC outcome of moving `xfer_bytes` of page `ppn` (bit errors sampled with the block's wear, plus any
    /// injected into its sectors).
    fn ecc_outcome(&mut self, ppn: u64, xfer_bytes: u64) -> EccOutcome {
        if xfer_bytes == 0 {
            return EccOutcome::Corrected;
        }
        let spp = u64::from(self.nand.geo.sectors_per_page);
        let injected = (0..spp).map(|s| self.ftl.injected_errors(ppn * spp + s)).max().unwrap_or(0);
        let pe = self.ftl.erase_count_of(ppn);
        let cws = self.nand.ecc.codewords(xfer_bytes);
        let sampled = if self.nand.ecc.samples_errors() { self.nand.ecc.sample_worst(&mut self.ecc_rng, cws, pe) } else { 0 };
        self.nand.ecc.decode(injected.max(sampled))
    }

    /// One multi-plane read of pages `ppns` (offset `page` of `die`, one per plane), moving `xfer[i]` of each: the
    /// planes are sensed together, and the worst plane's ECC outcome (retries, soft decode) holds up the operation.
    pub(crate) fn read_planes_timed(&mut self, die: u32, page: u32, ppns: &[u64], xfer: &[u64], ready: Time) -> (Time, Vec<EccOutcome>) {
        let outcomes: Vec<EccOutcome> = ppns.iter().zip(xfer).map(|(&p, &x)| self.ecc_outcome(p, x)).collect();
        let rank = |o: &EccOutcome| match *o {
            EccOutcome::Corrected => (0, 0),
            EccOutcome::Retried(n) => (1, n),
            EccOutcome::SoftDecoded(n) => (2, n),
            EccOutcome::Uncorrectable(n) => (3, n),
        };
        let worst = outcomes.iter().copied().max_by_key(rank).unwrap_or(EccOutcome::Corrected);
        let done = self.nand.read(&mut self.res, &mut self.ledger, ready, die, page, xfer, worst);
        (done, outcomes)
    }

    /// Moves a page of data from controller DRAM to `die` and programs it at offset `page`; returns when tPROG ends.
    pub(crate) fn program_page_timed(&mut self, die: u32, page: u32, ready: Time) -> Time {
        let bytes = u64::from(self.nand.geo.page_size);
        let in_dram = self.ctrl.dram(&mut self.res, &mut self.ledger, ready, bytes);
        let done = self.nand.program(&mut self.res, &mut self.ledger, in_dram, die, page, 1, bytes);
        self.last_program = self.last_program.max(done);
        done
    }

    /// Erases one block of `die`; returns when tBERS ends.
    pub(crate) fn erase_block_timed(&mut self, die: u32, ready: Time) -> Time {
        self.nand.erase(&mut self.res, &mut self.ledger, ready, die, 1)
    }
}
