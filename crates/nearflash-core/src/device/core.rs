//! The device's components and the data paths shared by NVMe commands and firmware extensions: reading LBAs into
//! controller memory, writing them through the write buffer, and the FTL's flash work. Each path does its functional
//! work at once and builds its timing as steps of a plan (`engine::flow`, run by `timing`): flash transactions go to
//! the scheduler, reservations to their timelines.

use super::timing::{Booking, Ev, Posting, Step};
use crate::config::{DeviceConfig, GcPriority, UnmappedRead};
use crate::ctrl::sched::suspend::{Rule, Rules};
use crate::ctrl::sched::{ClassId, ClassTable, Level, SchedConfig, Scheduler, TxnReq, GC, GC_URGENT};
use super::exec::ReadTo;
use super::programming::Programming;
use crate::ctrl::{ComputeUnits, Controller, WriteBuffer};
use crate::engine::{rng_stream, At, EnergyLedger, EventQueue, Flow, Lazy, Resources, Rng, Time};
use crate::ftl::oob::SPARE_BYTES;
use crate::ftl::{FlashSink, Ftl, Location, Work};
use crate::host::HostModel;
use crate::nand::{EccModel, EccOutcome, FastGeometry, NandArray};
use crate::nvme::arbitration::{Fetcher, Mechanism};
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
    /// The flash transaction scheduler and the event loop's queue.
    pub(crate) sched: Scheduler,
    pub(crate) events: EventQueue<Ev>,
    /// The timing plans of the commands in flight.
    pub(crate) flow: Flow<Step>,
    /// The host's clock (nothing starts before it).
    pub(crate) host_now: Time,
    /// Completions whose posting time is known, for the device to queue.
    pub(crate) posted: Vec<(Posting, Time)>,
    /// Forecasts of the flash work of the extension command being executed (`None` outside `ExecCtx`).
    pub(crate) forecast: Option<super::forecast::Forecast>,
    /// Where extension commands' forecasts left the dies and channels (carried to the next extension command).
    pub(crate) horizons: super::forecast::Horizons,
    /// The class of the flash work of the command being executed.
    pub(crate) class: ClassId,
    /// A one-page read's flash step delivers its data itself (`deliver_pages`); off only in tests, which compare
    /// both ways.
    pub(crate) deliver_in_flash_step: bool,
    /// The I/O command being submitted (`Device::submit`): a successful read's completion, which a flash step that
    /// delivers its data itself is given with its delivery (`deliver_pages`).
    pub(crate) read_posting: Posting,
    /// The command's completion goes with its read's delivery (`read_posting`), for `complete` to leave alone.
    pub(crate) posting_given: bool,
    /// Deliveries and completions of timing-only host reads whose flash transactions carry them out at their end,
    /// without a step (`flash_read_delivering`): the scheduler's token `DELIVERY | i` names entry `i`.
    pub(crate) deliveries: Vec<(u64, Posting)>,
    /// Entries of `deliveries` free for reuse.
    pub(crate) free_deliveries: Vec<u32>,
    /// A host Write's admission is scheduled at once where the next drain would schedule it first
    /// (`admit_at_once`); off only in tests, which compare both ways.
    pub(crate) admit_writes_at_once: bool,
    /// A command's completion rides on the step it waits for (`DeviceCore::complete`, `Flow::add_rider`); off only
    /// in tests, which compare both ways.
    pub(crate) completions_ride: bool,
    /// GC's priority (`controller.gc_priority`).
    gc_priority: GcPriority,
    /// Programs of recent pages: until one ends, its data is still served from the write buffer in DRAM.
    programming: Programming,
    /// Programs not known to have ended (a Flush waits for them).
    programs: Vec<At>,
    programs_pruned_at: usize,
    /// Buffers of `read_lbas`, kept between calls so that a read allocates nothing (boxed: taking it out and putting
    /// it back moves a pointer).
    scratch: Option<Box<ReadScratch>>,
    pub(crate) txn_done: Vec<(u32, Time)>,
    pub(crate) admitted: Vec<u32>,
    /// Command fetch from the submission queues: slots and arbitration (`nvme.arbitration`, `nvme.fetch_window`).
    pub(crate) fetcher: Fetcher,
}

/// One flash page's part of a read: its sectors and when its data is in the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PageAt {
    /// First LBA of the read served by this page.
    pub lba: u64,
    pub sectors: u32,
    /// Byte offset of those sectors in the output buffer.
    pub offset: usize,
    pub channel: u32,
    pub die: u32,
    /// When the page's data is decoded in the controller (buffered or unmapped sectors: when looked up).
    pub done: At,
    /// How the ECC decoded the page (buffered or unmapped sectors: `Corrected`).
    pub ecc: EccOutcome,
}

/// What a read does with a page the ECC cannot correct, or a sector whose stored data fails its checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnMediaError {
    /// The whole read fails with Unrecovered Read Error (a host Read; most firmware reads).
    Fail,
    /// The read completes: the page's `PageAt::ecc` says `Uncorrectable` and its bytes in `out` are zeroes (never
    /// the damaged data), so that firmware can tell its caller which page was lost (computational programs' reads).
    Report,
}

/// The outcome of reading LBAs into controller memory.
#[derive(Debug, Clone, Default)]
pub(crate) struct Reads {
    /// When the mapping lookups are done.
    pub lookup: At,
    pub pages: Vec<PageAt>,
}

/// When a one-LBA read's lookup is done (`read_one`).
#[derive(Clone, Copy)]
enum Start {
    /// Once this is known.
    At(At),
    /// After this many instructions of the command's firmware on a core from this time (`read_command`: booked
    /// with the page's transaction in one call).
    Firmware(Time, f64),
}

/// Working buffers of one `read_lbas` call.
#[derive(Default)]
struct ReadScratch {
    locs: Vec<Location>,
    /// (ppn, first index in `locs`, sectors)
    page_reads: Vec<(u64, usize, u32)>,
    group: Vec<usize>,
    xfer: Vec<u64>,
    /// A spent `Reads::pages` given back by `recycle`.
    pages: Vec<PageAt>,
}

/// The FTL's flash work, as steps of the current command's plan.
pub(crate) struct FlashTiming<'a> {
    geo: &'a FastGeometry,
    ecc: &'a EccModel,
    flow: &'a mut Flow<Step>,
    rng: &'a mut Rng,
    programming: &'a mut Programming,
    programs: &'a mut Vec<At>,
    floor: Time,
    class: ClassId,
    gc_priority: GcPriority,
}

impl FlashTiming<'_> {
    fn class_of(&self, work: Work) -> ClassId {
        match work {
            Work::Host => self.class,
            Work::Gc { urgent } if urgent && self.gc_priority == GcPriority::Background => GC_URGENT,
            Work::Gc { .. } => GC,
        }
    }

    fn flash(&mut self, req: TxnReq, ready: At, release: u32) -> At {
        self.flow.add1(Step::Flash { req, release, counted: false }, self.floor, ready)
    }
}

impl FlashTiming<'_> {
    /// `max_all(floor, times)` for a step that will be its only dependent (`Flow::add_lazy`).
    fn lazy_max_all(&mut self, floor: At, times: &[At]) -> Lazy {
        match times {
            [] => Lazy::At(floor),
            &[t] if floor == At::ZERO => Lazy::At(t),
            _ => self.flow.lazy_max_all_of(floor, times),
        }
    }

    /// `max_all(l, &[more])` of a lazy `l`, as lazy.
    fn lazy_max(&mut self, l: Lazy, more: At) -> Lazy {
        match l {
            Lazy::At(a) => self.lazy_max_all(a, &[more]),
            l => self.flow.lazy_max(l, more),
        }
    }
}

impl FlashSink for FlashTiming<'_> {
    fn read_page(&mut self, ready: At, ppn: u64, sectors: u32, raw_errors: u32, pe: u32, work: Work) -> At {
        let a = self.geo.page_addr(ppn);
        let die = self.geo.die_of_plane(a.plane);
        let bytes = u64::from(sectors) * u64::from(self.geo.sector_size);
        let sampled = self.ecc.sample_worst(self.rng, self.ecc.codewords(bytes), pe);
        let outcome = self.ecc.decode(raw_errors.max(sampled));
        let req = read_req(die, a.page, self.geo.plane_in_die(a.plane), bytes, outcome, self.class_of(work));
        self.flash(req, ready, 0)
    }

    fn program_pages(&mut self, floor: At, readies: &[At], erased: At, ppns: &[u64], sectors_released: u32, work: Work) -> At {
        let a = self.geo.page_addr(ppns[0]);
        let die = self.geo.die_of_plane(a.plane);
        let bytes = u64::from(self.geo.page_size) * ppns.len() as u64;
        let req = TxnReq::program(die, a.page, ppns.len() as u32, bytes, self.class_of(work));
        // The joins in front of the program (its data's arrival, the erase) are made lazily: each has the next step
        // as its only dependent, which waits for the join's inputs itself (`Flow::add_lazy`), in the same order.
        let ready = self.lazy_max_all(floor, readies);
        let (step, floor) = (Step::Flash { req, release: sectors_released, counted: false }, self.floor);
        let done = if erased == At::ZERO {
            self.flow.add_lazy(step, floor, ready)
        } else if erased.known().is_some() || sectors_released == 0 {
            let ready = self.lazy_max(ready, erased);
            self.flow.add_lazy(step, floor, ready)
        } else {
            // The buffer counts the sectors as being released once the data is in, not once the erase has ended.
            let counted = self.flow.add_lazy(Step::Releasing(sectors_released), floor, ready);
            let ready = self.lazy_max_all(counted, &[erased]);
            self.flow.add_lazy(Step::Flash { req, release: sectors_released, counted: true }, floor, ready)
        };
        for &p in ppns {
            self.programming.insert(p, done, self.flow);
        }
        // A Flush waits for the host's data only: a page GC moves stays readable where it was until its copy is
        // programmed (the victim is erased after its moves), so nothing acknowledged depends on GC's programs.
        if work == Work::Host {
            self.programs.push(done);
        }
        done
    }

    fn copyback(&mut self, ready: At, src: u64, dst: u64, work: Work) -> At {
        let (s, d) = (self.geo.page_addr(src), self.geo.page_addr(dst));
        let req = TxnReq::copyback(self.geo.die_of_plane(s.plane), s.page, d.page, self.class_of(work));
        self.flash(req, ready, 0)
    }

    fn erase_block(&mut self, ready: At, block_id: u32, work: Work) -> At {
        let die = self.geo.die_of_plane(self.geo.plane_of_block(block_id));
        self.flash(TxnReq::erase(die, 1, self.class_of(work)), ready, 0)
    }

    fn map_read(&mut self, ready: At, tpage: u64) -> At {
        let die = (tpage % u64::from(self.geo.dies())) as u32;
        let req = TxnReq::read(die, 0, u32::MAX, u64::from(self.geo.page_size), self.class);
        self.flash(req, ready, 0)
    }

    fn map_write(&mut self, ready: At, tpage: u64) -> At {
        let die = (tpage % u64::from(self.geo.dies())) as u32;
        let done = self.flash(TxnReq::program(die, 0, 1, u64::from(self.geo.page_size), self.class), ready, 0);
        self.programs.push(done);
        done
    }

    fn max_all(&mut self, floor: At, times: &[At]) -> At {
        // As `DeviceCore::max_all`: no join step where one input is the answer (a GC step that finished no page,
        // a page whose sectors all arrived together).
        match times {
            [] => floor,
            &[t] if floor == At::ZERO => t,
            _ => self.flow.max_all_of(floor, times),
        }
    }

    fn max_all_programs(&mut self, floor: At, programs: &[At]) -> At {
        // Each a step just added (nothing resolves within the FTL's call): a join wired without gathering.
        match programs {
            [] => floor,
            &[t] if floor == At::ZERO => t,
            _ => self.flow.max_all_fresh(floor, programs),
        }
    }

    /// Resolved before the command's floor (the present: the later of the host's clock and the loop's). Strictly
    /// before: every driver has run the loop's events before the present when it submits (the bench and the SDK
    /// run them up to and including the host's time, `Device::advance_to`; serve's pace none submits at the
    /// loop's clock, where events of that very time may still wait), and an erase resolves at its event; a step
    /// the loop resolved past the present (a blocking wait ran ahead) does not count either.
    fn done(&self, at: At) -> bool {
        self.flow.value(at).is_some_and(|t| t < self.floor)
    }
}

/// The suspension rules of `nand.suspend` (None when off: no suspension code runs).
fn suspend_rules(cfg: &DeviceConfig) -> Option<Rules> {
    let n = &cfg.nand;
    let (program, erase) = match n.suspend.0.as_str() {
        "program" => (true, false),
        "erase" => (false, true),
        "both" => (true, true),
        _ => return None,
    };
    let e = &cfg.energy;
    let rule = |t_suspend: u64, t_resume: u64, min_left: u64, energy_resume: f64| Rule { t_suspend, t_resume, min_left, energy_resume };
    Some(Rules {
        program: program.then(|| rule(n.t_suspend_program.0, n.t_resume_program.0, n.suspend_min_left_program.0, e.nand_resume_program.0)),
        erase: erase.then(|| rule(n.t_suspend_erase.0, n.t_resume_erase.0, n.suspend_min_left_erase.0, e.nand_resume_erase.0)),
        programs_suspend_erases: n.suspend_erase_for_writes.0,
        max_per_op: n.max_suspensions.0.min(u64::from(u32::MAX)) as u32,
    })
}

/// A read transaction of `bytes` of one page with its ECC outcome's retries and soft decode.
fn read_req(die: u32, page: u32, plane: u32, bytes: u64, outcome: EccOutcome, class: ClassId) -> TxnReq {
    TxnReq {
        senses: 1 + outcome.retries(),
        soft: outcome.soft_decoded(),
        uncorrectable: !outcome.is_ok(),
        ..TxnReq::read(die, page, plane, bytes, class)
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
        let gc_priority = cfg.gc_priority();
        let gc_level = match gc_priority {
            GcPriority::Urgent => Level::Urgent,
            GcPriority::Equal => Level::Normal,
            GcPriority::Background => Level::Background,
        };
        let sc = SchedConfig {
            order: cfg.flash_order(),
            tsu: nand.timing.data_outs_first,
            multi_plane: nand.timing.multi_plane,
            suspend: suspend_rules(&cfg),
        };
        let sched = Scheduler::new(sc, ClassTable::new(cfg.priority_weights(), gc_level), &nand, &mut ledger);
        let nv = &cfg.nvme;
        let fetcher = Fetcher::new(Mechanism::of(&cfg), nv.arbitration_burst.0 as u32, nv.fetch_window.0.min(u64::from(u32::MAX)) as u32);
        let programming = Programming::new(nand.geo.pages_per_block);
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
            sched,
            events: EventQueue::new(),
            flow: Flow::new(),
            host_now: Time::ZERO,
            posted: Vec::new(),
            class: crate::ctrl::sched::Priority::Medium.class(),
            deliver_in_flash_step: true,
            read_posting: Posting { sqid: 0, cid: 0, status: crate::nvme::Status::SUCCESS, dw0: 0 },
            posting_given: false,
            deliveries: Vec::new(),
            free_deliveries: Vec::new(),
            admit_writes_at_once: true,
            completions_ride: true,
            gc_priority,
            programming,
            programs: Vec::new(),
            programs_pruned_at: 0,
            scratch: None,
            forecast: None,
            horizons: Default::default(),
            txn_done: Vec::new(),
            admitted: Vec::new(),
            fetcher,
            cfg,
        }
    }

    /// Fails the current command with `status` and says why (`byte`: the command byte holding the offending field):
    /// the reason goes into the error logs with the status. Returns `status`.
    pub(crate) fn refuse(&mut self, status: Status, byte: Option<u8>, reason: impl Into<String>) -> Status {
        self.error_detail = Some(crate::nvme::ErrorDetail { byte, reason: reason.into() });
        status
    }

    /// Splits the borrow: the FTL and the timing sink.
    pub(crate) fn ftl_and_sink(&mut self) -> (&mut Ftl, FlashTiming<'_>) {
        let floor = self.floor();
        (
            &mut self.ftl,
            FlashTiming {
                geo: &self.nand.geo,
                ecc: &self.nand.ecc,
                flow: &mut self.flow,
                rng: &mut self.ecc_rng,
                programming: &mut self.programming,
                programs: &mut self.programs,
                floor,
                class: self.class,
                gc_priority: self.gc_priority,
            },
        )
    }

    /// Looks up and reads `nlb` sectors from `slba` into controller memory (`out`, `nlb` sectors long; empty:
    /// timing only), once `ready`. Sectors of one physical page share one read; pages at the same offset in sibling
    /// planes of a die, adjacent in the request, share a multi-plane read (under `mqsim_tsu` each page is a
    /// transaction of its own and the scheduler gathers them). `issue_on_cores`: charge the firmware's per-page
    /// transaction cost to the controller cores. `media`: what an unreadable page does ([`OnMediaError`]).
    pub(crate) fn read_lbas(&mut self, slba: u64, nlb: u32, ready: At, out: &mut [u8], issue_on_cores: bool, media: OnMediaError) -> Result<Reads, Status> {
        let mut sc = self.scratch.take().unwrap_or_default();
        let r = self.read_lbas_with(&mut sc, slba, nlb, ready, out, issue_on_cores, media);
        self.scratch = Some(sc);
        r
    }

    /// A host Read's command: its firmware (`fw` instructions on a core once `after` is known), then `read_lbas`
    /// from the firmware's end, with the page steps' firmware on the cores; returns that end with the result. A
    /// one-LBA read whose start is known (most host reads) books the command's firmware and its page step in one
    /// call (`read_one`, `Controller::run_then`: the page step on the command's core when it is free then, else on
    /// any; nothing between the two, the lookup and the checks, books anything). Reads of more LBAs book their steps
    /// one by one, each on the pool's earliest core. Inlined into the submission, its one caller.
    #[inline]
    pub(crate) fn read_command(&mut self, slba: u64, nlb: u32, fw: f64, after: At, out: &mut [u8], media: OnMediaError) -> (At, Result<Reads, Status>) {
        let sector = u64::from(self.nand.geo.sector_size);
        let one = nlb == 1
            && !self.ftl.demand_mapped()
            && self.cfg.unmapped_read() != UnmappedRead::Allocate
            && slba < self.ftl.logical_sectors()
            && (out.is_empty() || out.len() as u64 >= sector);
        match self.flow.value(after) {
            Some(t) if one => {
                let ready = t.max(self.floor());
                // Only the spent list of pages is reused: the scratch stays where it is.
                let pages = std::mem::take(&mut self.scratch.get_or_insert_with(Default::default).pages);
                self.read_one(pages, slba, Start::Firmware(ready, fw), out, true, media)
            }
            _ => {
                let at = self.book_firmware(fw, after);
                (at, self.read_lbas(slba, nlb, at, out, true, media))
            }
        }
    }

    /// The bytes to move per page of `group` (into `xfer`) and how the ECC decodes them together: the worst
    /// injected or sampled error count of the group's sectors.
    fn group_outcome(&mut self, page_reads: &[(u64, usize, u32)], group: &[usize], locs: &[Location], xfer: &mut Vec<u64>) -> EccOutcome {
        let sector = u64::from(self.nand.geo.sector_size);
        xfer.clear();
        let mut worst = 0;
        let mut pe = 0;
        // The wear only matters to sampled errors (an erase count look-up is a cache miss per read on a large device).
        let sampling = self.nand.ecc.samples_errors();
        for &g in group {
            let (ppn, first, n) = page_reads[g];
            xfer.push(u64::from(n) * sector);
            if sampling {
                pe = pe.max(self.ftl.erase_count_of(ppn));
            }
            for loc in &locs[first..first + n as usize] {
                if let Location::Flash(psa) = loc {
                    worst = worst.max(self.ftl.injected_errors(*psa));
                }
            }
        }
        self.decode_read(worst, pe, xfer.iter().sum())
    }

    /// How the ECC decodes `bytes` read together whose worst injected error count is `worst` and whose pages' highest
    /// erase count is `pe` (looked up only when errors are sampled): the sampled errors (one random draw when
    /// sampling) and the decode. Every read's outcome ends here: `group_outcome`, the one-LBA read (`read_one`) and
    /// the extensions' page reads (`ecc_outcome`).
    #[inline]
    fn decode_read(&mut self, worst: u32, pe: u32, bytes: u64) -> EccOutcome {
        let sampled = if self.nand.ecc.samples_errors() {
            let cws = self.nand.ecc.codewords(bytes);
            self.nand.ecc.sample_worst(&mut self.ecc_rng, cws, pe)
        } else {
            0
        };
        self.nand.ecc.decode(worst.max(sampled))
    }

    /// Moves `bytes` read from flash, decoded at `decoded`, where `to` says: into controller DRAM and out once to
    /// their consumer (the host DMA, a firmware core, a compute unit: the DRAM port carries twice the bytes), into
    /// DRAM to stay (once), or into a unit's own buffer (no DRAM). Returns when they are there. The one place where
    /// flash reads book DRAM: host Reads (`Booking::Deliver`) and the `ExecCtx` reads come here.
    pub(crate) fn through_dram(&mut self, decoded: Time, bytes: u64, to: ReadTo) -> Time {
        let passes = match to {
            ReadTo::Dram => 2,
            ReadTo::DramKept => 1,
            ReadTo::UnitBuffer => return decoded,
        };
        self.ctrl.dram(&mut self.res, &mut self.ledger, decoded, passes * bytes)
    }

    /// Moves the pages of a host read through DRAM to the host, each as soon as its data is decoded; returns when
    /// the last has arrived (at least `fw`). Inlined: most reads' transactions deliver and complete them.
    #[inline]
    pub(crate) fn deliver_pages(&mut self, fw: At, pages: Vec<PageAt>) -> At {
        if pages.is_empty() && self.posting_given {
            // A one-page read whose transaction delivers and completes it (`flash_read_delivering`): no step waits
            // for that end, and the completion's step ignores the time returned (`complete`).
            self.recycle(pages);
            return fw;
        }
        self.deliver_pages_by_steps(fw, pages)
    }

    /// `deliver_pages` of pages whose deliveries are steps (or a flash step's payload).
    fn deliver_pages_by_steps(&mut self, fw: At, pages: Vec<PageAt>) -> At {
        let sector = u64::from(self.nand.geo.sector_size);
        let deliver = |core: &mut Self, p: &PageAt| core.book(Booking::Deliver(u64::from(p.sectors) * sector), p.done);
        // A one-page read (most host reads) needs no list of arrivals: nothing allocated per read.
        if let [p] = pages.as_slice() {
            // Its flash step running with nothing waiting for it (handed to the scheduler at once: `flash_read`)
            // does the delivery itself when it ends, instead of a step that waits for it (`DeviceCore::txn_ended`),
            // and the read's completion with it (`complete` leaves that step alone): the step's end is then the
            // completion's.
            let bytes = u64::from(p.sectors) * sector;
            let with_completion = Step::DeliverThenComplete(bytes, self.read_posting);
            let arrived = if self.deliver_in_flash_step && self.forecast.is_none() && self.flow.give_step(p.done, with_completion) {
                self.posting_given = true;
                p.done
            } else {
                deliver(self, p)
            };
            self.recycle(pages);
            return arrived;
        }
        let arrived: Vec<At> = pages.iter().map(|p| deliver(self, p)).collect();
        self.recycle(pages);
        // Every page is read after the firmware's lookup (`fw`), so it bounds nothing once a page was read.
        let floor = if arrived.is_empty() { fw } else { At::ZERO };
        self.max_all(floor, &arrived)
    }

    /// Gives a spent `Reads::pages` back, so that the next read reuses its allocation.
    #[inline]
    pub(crate) fn recycle(&mut self, mut pages: Vec<PageAt>) {
        pages.clear();
        if let Some(sc) = self.scratch.as_mut() {
            sc.pages = pages;
        }
    }

    /// Whether page `ppn` is being programmed (its data is still served from the write buffer). Inlined: asked on
    /// every read, and its call was as long as its look-up.
    #[inline]
    fn programming(&self, ppn: u64) -> bool {
        self.programming.get(ppn).is_some_and(|p| self.flow.pending(p))
    }

    #[allow(clippy::too_many_arguments)]
    fn read_lbas_with(
        &mut self,
        sc: &mut ReadScratch,
        slba: u64,
        nlb: u32,
        ready: At,
        out: &mut [u8],
        issue_on_cores: bool,
        media: OnMediaError,
    ) -> Result<Reads, Status> {
        let sector = u64::from(self.nand.geo.sector_size);
        self.check_lbas(slba, nlb)?;
        if !out.is_empty() && (out.len() as u64) < u64::from(nlb) * sector {
            let why = format!("{nlb} blocks of {sector} bytes read into a {}-byte buffer", out.len());
            return Err(self.refuse(Status::DATA_TRANSFER_ERROR, None, why));
        }
        // Mapping lookups (demand-paged maps may need translation reads first).
        let allocate = self.cfg.unmapped_read() == UnmappedRead::Allocate;
        let demand = self.ftl.demand_mapped();
        if nlb == 1 && !demand && !allocate {
            return self.read_one(std::mem::take(&mut sc.pages), slba, Start::At(ready), out, issue_on_cores, media).1;
        }
        let mut lookups: Vec<At> = Vec::new();
        let locs = &mut sc.locs;
        locs.clear();
        for i in 0..u64::from(nlb) {
            let lpn = (slba + i) as u32;
            let (ftl, mut sink) = self.ftl_and_sink();
            if demand {
                lookups.push(ftl.map_access(lpn, false, ready, &mut sink));
            }
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
            if let (Location::Flash(psa), false) = (loc, out.is_empty()) {
                ftl.prefetch_stored(psa); // on its way while the flash work is booked
            }
            locs.push(loc);
        }
        let lookup_done = self.max_all(ready, &lookups);
        // Group flash sectors by page: runs of consecutive sectors on one page.
        let mut result = Reads { lookup: lookup_done, pages: std::mem::take(&mut sc.pages) };
        let mut ok = true;
        let mut i = 0usize;
        let page_reads = &mut sc.page_reads; // (ppn, first index, sectors)
        let geo = &self.nand.geo;
        page_reads.clear();
        while i < locs.len() {
            match locs[i] {
                Location::Flash(psa) if !self.programming(geo.ppn_of_psa(psa)) => {
                    let ppn = geo.ppn_of_psa(psa);
                    let mut n = 1;
                    while i + n < locs.len() && matches!(locs[i + n], Location::Flash(p) if geo.ppn_of_psa(p) == ppn) {
                        n += 1;
                    }
                    page_reads.push((ppn, i, n as u32));
                    i += n;
                }
                _ => {
                    result.pages.push(PageAt {
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
            let n = self.ctrl.fw_page * page_reads.len() as f64;
            self.book(Booking::Firmware(n), lookup_done)
        };
        let geo = self.nand.geo.clone();
        let ppd = geo.planes_per_die;
        // Under mqsim_tsu each page is a transaction of its own (the scheduler gathers them across requests, as
        // MQSim); otherwise pages at one offset of sibling planes, adjacent in the list, are one multi-plane read.
        let per_page = self.nand.timing.data_outs_first;
        let mut k = 0;
        while k < page_reads.len() {
            let a0 = geo.page_addr(page_reads[k].0);
            let die = geo.die_of_plane(a0.plane);
            let group = &mut sc.group;
            group.clear();
            group.push(k);
            if self.nand.timing.multi_plane && !per_page {
                let mut j = k + 1;
                while j < page_reads.len() && group.len() < ppd as usize {
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
            let outcome = self.group_outcome(page_reads, &sc.group, locs, &mut sc.xfer);
            let bytes: u64 = sc.xfer.iter().sum();
            let planes = sc.group.len() as u32;
            let plane = if planes == 1 { a0.plane % ppd } else { u32::MAX };
            let req = TxnReq { planes, ..read_req(die, a0.page, plane, bytes, outcome, self.class) };
            let done = self.flash_read(req, issue);
            ok &= outcome.is_ok();
            for &g in sc.group.iter() {
                let (_, first, n) = page_reads[g];
                result.pages.push(PageAt {
                    lba: slba + first as u64,
                    sectors: n,
                    offset: first * sector as usize,
                    channel: geo.channel_of_die(die),
                    die,
                    done,
                    ecc: outcome,
                });
            }
            k += sc.group.len();
        }
        self.read_done(result, locs, slba, nlb, out, ok, media)
    }

    /// `read_lbas_with` for one LBA without demand-paged mapping or allocating reads (most host reads): the same
    /// steps in the same order (the lookup, the firmware's transaction on a core, the ECC outcome, the flash
    /// transaction) without the lists that group sectors by page.
    /// `start`: when the lookup is done, or the command's firmware still to book before it (`read_command`).
    /// `pages`: a spent list (`recycle`) for the result. Returns when the lookup is done with the result.
    fn read_one(&mut self, pages: Vec<PageAt>, slba: u64, start: Start, out: &mut [u8], issue_on_cores: bool, media: OnMediaError) -> (At, Result<Reads, Status>) {
        let sector = u64::from(self.nand.geo.sector_size);
        let loc = self.ftl.locate(slba as u32);
        if let (Location::Flash(psa), false) = (loc, out.is_empty()) {
            self.ftl.prefetch_stored(psa);
        }
        // The sector's page, split from its address once (for the programming look-up and the transaction).
        let flash = match loc {
            Location::Flash(psa) => Some((psa, self.nand.geo.ppn_of_psa(psa))).filter(|&(_, ppn)| !self.programming(ppn)),
            _ => None,
        };
        // The firmware: the command's (if still to book) and the page's transaction (a page to sense, on the cores).
        let (ready, issue) = match (start, flash.is_some() && issue_on_cores) {
            (Start::At(ready), false) => (ready, ready),
            (Start::At(ready), true) => (ready, self.book_firmware(self.ctrl.fw_page * 1.0, ready)),
            (Start::Firmware(t, n), false) => {
                let end = self.ctrl.run(&mut self.res, &mut self.ledger, t, n);
                (At::at(end), At::at(end))
            }
            (Start::Firmware(t, n), true) => {
                let (end, page) = self.ctrl.run_then(&mut self.res, &mut self.ledger, t, n, self.ctrl.fw_page * 1.0);
                (At::at(end), At::at(page))
            }
        };
        // No lookup to wait for: it is done at `ready`.
        let mut result = Reads { lookup: ready, pages };
        let ok = match flash {
            Some((psa, ppn)) => {
                let geo = &self.nand.geo;
                let a0 = geo.page_addr(ppn);
                let die = geo.die_of_plane(a0.plane);
                let (plane, channel) = (geo.plane_in_die(a0.plane), geo.channel_of_die(die));
                // `group_outcome` of one page holding one sector.
                let pe = if self.nand.ecc.samples_errors() { self.ftl.erase_count_of(ppn) } else { 0 };
                let outcome = self.decode_read(self.ftl.injected_errors(psa), pe, sector);
                let req = TxnReq { planes: 1, ..read_req(die, a0.page, plane, sector, outcome, self.class) };
                // A host Read's command (`read_command`'s start) of timing only whose page decodes: its transaction
                // can carry out its delivery and completion itself, with no step (the page is left out of the result).
                let host = matches!(start, Start::Firmware(..));
                if host && out.is_empty() && outcome.is_ok() && self.flash_read_delivering(req, issue, sector, self.read_posting) {
                    return (ready, Ok(result));
                }
                let done = self.flash_read(req, issue);
                result.pages.push(PageAt { lba: slba, sectors: 1, offset: 0, channel, die, done, ecc: outcome });
                outcome.is_ok()
            }
            None => {
                result.pages.push(PageAt { lba: slba, sectors: 1, offset: 0, channel: 0, die: 0, done: ready, ecc: EccOutcome::Corrected });
                true
            }
        };
        if ok && out.is_empty() {
            // `read_done`'s timing-only answer, returned from here: the result is moved once, not through the call's
            // temporaries.
            return (ready, Ok(result));
        }
        (ready, self.read_done_checked(result, std::slice::from_ref(&loc), slba, 1, out, ok, media))
    }

    /// The end of a read of `nlb` LBAs from `slba` located at `locs`, its flash work booked (`ok`: every page
    /// decodes): the media error, or the functional read into `out` (none for timing-only callers). Inlined for a
    /// timing-only read whose pages all decode (nothing to check or copy: the result as it is), which was a call
    /// and a copy of the result each way per read.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn read_done(&mut self, result: Reads, locs: &[Location], slba: u64, nlb: u32, out: &mut [u8], ok: bool, media: OnMediaError) -> Result<Reads, Status> {
        if ok && out.is_empty() {
            return Ok(result);
        }
        self.read_done_checked(result, locs, slba, nlb, out, ok, media)
    }

    /// `read_done` with a page that does not decode or data to copy.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn read_done_checked(&mut self, mut result: Reads, locs: &[Location], slba: u64, nlb: u32, out: &mut [u8], ok: bool, media: OnMediaError) -> Result<Reads, Status> {
        let sector = u64::from(self.nand.geo.sector_size);
        if !ok && media == OnMediaError::Fail {
            // The pages are still read (the array's time is spent); the command fails.
            self.media_errors += 1;
            let why = format!("LBAs {slba} + {nlb}: a page's bit errors are beyond what ECC, read retry and soft decoding correct");
            return Err(self.refuse(Status::UNRECOVERED_READ_ERROR, None, why));
        }
        // Functional read (skipped for timing-only callers); a checksum mismatch is a media error, never silently
        // returned data. Reporting: a lost page's bytes are zeroes and its outcome says so.
        if out.is_empty() {
            return Ok(result);
        }
        let sector = sector as usize;
        for p in result.pages.iter_mut() {
            let span = p.offset..p.offset + p.sectors as usize * sector;
            let mut lost = !p.ecc.is_ok();
            for idx in span.start / sector..span.end / sector {
                if lost {
                    break;
                }
                match self.ftl.read_sector(locs[idx], &mut out[idx * sector..(idx + 1) * sector]) {
                    Ok(true) => {}
                    Ok(false) | Err(_) if media == OnMediaError::Report => lost = true,
                    Ok(false) | Err(_) => {
                        self.media_errors += 1;
                        let why = format!("LBA {}: the stored data fails its checksum", slba + idx as u64);
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
    pub(crate) fn write_lbas(&mut self, slba: u64, data: &[u8], spare: Option<&[u8]>, ready: At) -> Result<At, Status> {
        let sector = self.nand.geo.sector_size as usize;
        let nlb = if data.is_empty() { 0 } else { data.len() / sector };
        let nlb = u32::try_from(nlb).map_err(|_| self.refuse(Status::INVALID_FIELD, None, format!("{nlb} blocks in one write: at most {} are allowed", u32::MAX)))?;
        self.write_sectors(slba, nlb, Some(data), spare, ready, false)
    }

    /// Writes `nlb` sectors (data `None` or empty: timing-only) whose data is in controller DRAM at `ready`;
    /// returns when the write buffer has admitted them. `host_write`: a host Write's command, whose admission may
    /// be scheduled at once (`admit_at_once`: its submission drains the steps next).
    pub(crate) fn write_sectors(
        &mut self,
        slba: u64,
        nlb: u32,
        data: Option<&[u8]>,
        spare: Option<&[u8]>,
        ready: At,
        host_write: bool,
    ) -> Result<At, Status> {
        let sector = self.nand.geo.sector_size as usize;
        self.check_lbas(slba, nlb)?;
        let data = data.filter(|d| !d.is_empty());
        if let Some(d) = data {
            if d.len() < nlb as usize * sector {
                let why = format!("{nlb} blocks of {sector} bytes written from a {}-byte buffer", d.len());
                return Err(self.refuse(Status::DATA_TRANSFER_ERROR, None, why));
            }
        }
        let admitted = if host_write && self.admit_writes_at_once {
            self.admit_at_once(u64::from(nlb), ready)
        } else {
            self.admit(u64::from(nlb), ready)
        };
        let mut maps = Vec::new();
        let demand = self.ftl.cmt_stats().is_some();
        for i in 0..nlb as usize {
            let lpn = (slba + i as u64) as u32;
            let chunk = data.map(|d| &d[i * sector..(i + 1) * sector]);
            let tag: Option<&[u8; SPARE_BYTES]> =
                spare.and_then(|s| s.get(i * SPARE_BYTES..(i + 1) * SPARE_BYTES)).and_then(|s| s.try_into().ok());
            let (ftl, mut sink) = self.ftl_and_sink();
            if demand {
                maps.push(ftl.map_access(lpn, true, admitted, &mut sink));
            }
            if let Err(e) = ftl.write_tagged(lpn, chunk, tag, admitted, &mut sink) {
                // Range and size were checked above: what remains is the model's own failure.
                let why = format!("the FTL failed to place LBA {lpn}: {e}");
                self.fault.get_or_insert(e);
                return Err(self.refuse(Status::INTERNAL_ERROR, None, why));
            }
        }
        Ok(self.max_all(admitted, &maps))
    }

    /// Programs all buffered partial pages; returns when every program of host data (and mapping and extension
    /// program) issued so far has ended. GC's moves are not waited for (`FlashTiming::program_pages`).
    pub(crate) fn flush_buffer(&mut self, ready: At) -> At {
        let (ftl, mut sink) = self.ftl_and_sink();
        ftl.flush(ready, &mut sink);
        let pending: Vec<At> = self.programs.iter().copied().filter(|&p| self.flow.pending(p)).collect();
        self.programs = pending.clone();
        self.programs_pruned_at = self.programs.len();
        self.max_all(ready, &pending)
    }

    /// The programs (host and GC) not yet known to have ended.
    #[cfg(test)]
    pub(crate) fn programs_in_flight(&self) -> Vec<At> {
        self.programming.pending(&self.flow)
    }

    /// Drops programs known to have ended from the Flush list now and then.
    pub(crate) fn prune_programs(&mut self) {
        if self.programs.len() > 2 * self.programs_pruned_at + 1024 {
            let flow = &self.flow;
            self.programs.retain(|&p| flow.pending(p));
            self.programs_pruned_at = self.programs.len();
        }
    }

    /// Senses page `ppn` (at offset `page` of `die`) and moves `xfer_bytes` of it to the controller, with the ECC
    /// outcome of those bytes (bit errors sampled with the block's wear, plus any injected into its sectors).
    /// `column`: a column read, the bytes (whole ECC codewords) start inside the page, after a Change Read Column.
    pub(crate) fn read_page_timed(&mut self, die: u32, page: u32, ppn: u64, xfer_bytes: u64, column: bool, ready: At) -> (At, EccOutcome) {
        let outcome = self.ecc_outcome(ppn, xfer_bytes);
        let req = TxnReq { column, ..read_req(die, page, u32::MAX, xfer_bytes, outcome, self.class) };
        (self.flash(req, ready, 0), outcome)
    }

    /// The ECC outcome of moving `xfer_bytes` of page `ppn` (bit errors sampled with the block's wear, plus any
    /// injected into its sectors).
    fn ecc_outcome(&mut self, ppn: u64, xfer_bytes: u64) -> EccOutcome {
        if xfer_bytes == 0 {
            return EccOutcome::Corrected;
        }
        let spp = u64::from(self.nand.geo.sectors_per_page);
        let injected = (0..spp).map(|s| self.ftl.injected_errors(ppn * spp + s)).max().unwrap_or(0);
        let pe = if self.nand.ecc.samples_errors() { self.ftl.erase_count_of(ppn) } else { 0 };
        self.decode_read(injected, pe, xfer_bytes)
    }

    /// One multi-plane read of pages `ppns` (offset `page` of `die`, one per plane), moving `xfer[i]` of each: the
    /// planes are sensed together, and the worst plane's ECC outcome (retries, soft decode) holds up the operation.
    pub(crate) fn read_planes_timed(&mut self, die: u32, page: u32, ppns: &[u64], xfer: &[u64], ready: At) -> (At, Vec<EccOutcome>) {
        let outcomes: Vec<EccOutcome> = ppns.iter().zip(xfer).map(|(&p, &x)| self.ecc_outcome(p, x)).collect();
        let rank = |o: &EccOutcome| match *o {
            EccOutcome::Corrected => (0, 0),
            EccOutcome::Retried(n) => (1, n),
            EccOutcome::SoftDecoded(n) => (2, n),
            EccOutcome::Uncorrectable(n) => (3, n),
        };
        let worst = outcomes.iter().copied().max_by_key(rank).unwrap_or(EccOutcome::Corrected);
        let bytes = xfer.iter().sum();
        let req = TxnReq { planes: ppns.len() as u32, ..read_req(die, page, u32::MAX, bytes, worst, self.class) };
        (self.flash(req, ready, 0), outcomes)
    }

    /// Moves a page of data from controller DRAM to `die` and programs it at offset `page`; returns when tPROG ends.
    pub(crate) fn program_page_timed(&mut self, die: u32, page: u32, ready: At) -> At {
        let bytes = u64::from(self.nand.geo.page_size);
        let in_dram = self.book(Booking::Dram(bytes), ready);
        let done = self.flash(TxnReq::program(die, page, 1, bytes, self.class), in_dram, 0);
        self.programs.push(done);
        done
    }

    /// Erases one block of `die`; returns when tBERS ends.
    pub(crate) fn erase_block_timed(&mut self, die: u32, ready: At) -> At {
        self.flash(TxnReq::erase(die, 1, self.class), ready, 0)
    }
}
