//! RecSSD's FTL-side SLS engine as a nearflash firmware extension (paper §4, Fig. 7; artifact
//! RecSSD-OpenSSDFirmware). It takes:
//!
//! * **NDP config Writes** (CDW12 bit 16, [`crate::ndp_command`]): an entry of the pending-request buffer is taken
//!   (waiting if all are busy), the config is DMA'd into it, decoded and validated against the registered table,
//!   and processed on the FTL core - SSD-cache probes (hits summed at once), grouping by flash page, sector
//!   counters, scratchpad zeroing. The Write completes when processing ends (so a bad config completes with its
//!   fault).
//! * **NDP result Reads**: the entry's flash work is scheduled ([`crate::ftl_loop`]) together with every other
//!   configured entry; each requested 4 KiB result sector leaves as soon as all its inputs are summed; the entry
//!   is freed after its last sector.
//! * **Table registrations** (a vendor opcode, [`crate::table_dir`]).
//! * **Ordinary Reads**, optionally ([`RecssdParams::serve_host_reads`]): through GreedyFTL's whole-page LRU
//!   buffer ([`crate::page_buffer`]), as the RecSSD firmware serves them - a miss reads the whole 16 KiB page.
//!   Misses cost what the device's own read path costs (decode, FTL lookup, NAND, DRAM, link) plus GreedyFTL's
//!   per-page handling on the FTL core (overlapping the NAND read); a hit skips both.

use crate::entries::{EntryPool, RequestKey};
use crate::ftl_loop::{plan_round_robin, FlashPort, PendingRequest};
use crate::fw_costs::FirmwareCosts;
use crate::ndp_command::{is_ndp, NdpFault, NDP_FLAG_BIT};
use crate::ndp_exec::{ExecError, SlsRequest};
use crate::ndp_wire::{split_request_slba, NdpConfig, WireLimits};
use crate::page_buffer::PageBuffer;
use crate::params::RecssdParams;
use crate::ssd_cache::{CacheStats, SsdEmbeddingCache};
use crate::table_dir::{TableDescriptor, TableDirectory};

/// A refusal: the fault, the byte of the command holding the offending field (if the field is in the command) and
/// the reason in words.
type Refusal = (NdpFault, Option<u8>, String);
/// Bytes of the command's CDW10 (SLBA: table start + request id) and CDW12 (NLB), for the error log.
const CDW10: Option<u8> = Some(40);
const CDW12: Option<u8> = Some(48);
use nearflash_core::ext::{AttachCtx, ClassId, DataBuf, ExecCtx, ExtCompletion, Extension, HostEvent, Intercept, Placement, ReadTo};
use nearflash_core::ext::OpClass;
use nearflash_core::ext::Time;
use nearflash_core::nvme::{decode_io, opcode, IoCommand, Namespace, Sqe, Status};
use serde::Serialize;

/// Name the extension registers under.
pub const NAME: &str = "recssd";

/// Cumulative work and time of the engine (reported under `extensions.recssd`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct FirmwareStats {
    pub tables: u64,
    pub configs: u64,
    pub config_faults: u64,
    pub result_reads: u64,
    pub result_faults: u64,
    /// Requests whose last sector left.
    pub requests: u64,
    pub pairs: u64,
    pub pages_from_flash: u64,
    pub pages_from_buffer: u64,
    pub rows_from_flash: u64,
    pub result_sectors: u64,
    /// Wall-time breakdown of completed requests, summed (ns): waiting for an entry, config DMA, config
    /// processing, Translation on the FTL core, waiting on flash, returning results; they add up to `total_ns`.
    pub entry_wait_ns: u64,
    pub config_write_ns: u64,
    pub config_process_ns: u64,
    pub translation_ns: u64,
    pub flash_read_ns: u64,
    pub return_ns: u64,
    pub total_ns: u64,
    /// The artifact's per-page statistics, summed over pages: issue to translation start, and translation.
    pub page_flash_latency_sum_ns: u64,
    pub page_translation_sum_ns: u64,
    pub host_reads: u64,
    pub host_read_pages_from_buffer: u64,
    pub host_read_pages_from_flash: u64,
    /// SSD-cache rows dropped because the host wrote or trimmed where they are stored.
    pub cache_rows_invalidated: u64,
}

/// The extension.
pub struct RecssdFirmware {
    params: RecssdParams,
    overrides: serde_json::Value,
    tables: TableDirectory,
    entries: EntryPool,
    pending: Vec<PendingRequest>,
    buffer: PageBuffer,
    cache: Option<SsdEmbeddingCache>,
    costs: FirmwareCosts,
    limits: WireLimits,
    stats: FirmwareStats,
    faults: std::collections::BTreeMap<String, u64>,
    /// The flash class of NDP page reads (declared at attach).
    ndp_class: Option<ClassId>,
}

impl RecssdFirmware {
    /// The engine with `overrides` (a JSON object of parameter values, see [`RecssdParams::set`]) applied on
    /// top of the preset's `[ext.recssd]` section at attach time.
    pub fn new(overrides: serde_json::Value) -> Self {
        let params = RecssdParams::default();
        Self {
            costs: FirmwareCosts::new(&params, 1.0),
            entries: EntryPool::new(params.pending_entries as usize),
            params,
            overrides,
            tables: TableDirectory::default(),
            pending: Vec::new(),
            buffer: PageBuffer::new(1, 0),
            cache: None,
            limits: WireLimits::default(),
            stats: FirmwareStats::default(),
            faults: Default::default(),
            ndp_class: None,
        }
    }

    /// Drops SSD-cache rows stored in LBAs `[first, first + n)`: the host overwrote or trimmed them with ordinary
    /// commands, so a cached copy would be stale. Returns the entries dropped. (The page buffer needs no such
    /// call: its entries remember their physical addresses and a moved page no longer matches.)
    /// Called from `Extension::observe` for completed standard writes and trims.
    pub fn invalidate_lbas(&mut self, first: u64, n: u64) -> u64 {
        let Some(cache) = self.cache.as_mut() else { return 0 };
        self.tables.rows_in_lbas(first, n).into_iter().map(|(table, rows)| cache.invalidate_rows(table, rows)).sum()
    }

    /// The parameters in force (after attach).
    pub fn params(&self) -> &RecssdParams {
        &self.params
    }

    /// Completes with fault `f` and puts its reason into the error log: `why` names the field (`byte`: where it
    /// is in the command, if it is in the command) and what it may hold.
    fn fault(&mut self, ctx: &mut ExecCtx<'_>, f: NdpFault, byte: Option<u8>, why: impl std::fmt::Display, done: Time) -> ExtCompletion {
        *self.faults.entry(format!("{f:?}")).or_default() += 1;
        ctx.explain(f.status(), byte, why.to_string());
        ExtCompletion { status: f.status(), dw0: f.code(), done }
    }

    fn namespace(ctx: &ExecCtx<'_>) -> Namespace {
        let max_lbas = (ctx.config().nvme.mdts.0 / ctx.lba_bytes()).max(1) as u32;
        Namespace { lbas: ctx.lbas(), max_lbas }
    }

    /// Checks what standard decoding would (namespace, fused/SGL, transfer size, range) for an NDP command.
    fn check_ndp_command(ctx: &ExecCtx<'_>, sqe: &Sqe) -> Result<(), Refusal> {
        let mut plain = *sqe;
        plain.cdw12 &= !(1 << crate::ndp_command::NDP_FLAG_BIT);
        let ns = Self::namespace(ctx);
        decode_io(&plain, &ns).map(|_| ()).map_err(|r| {
            let s = r.status;
            let (byte, why) = if s == Status::LBA_OUT_OF_RANGE {
                (CDW10, format!("SLBA {} + NLB {}: beyond the namespace's {} blocks", sqe.slba(), sqe.nlb(), ns.lbas))
            } else if sqe.nlb() > ns.max_lbas {
                (CDW12, format!("NLB {}: expected 1..={} blocks (MDTS)", sqe.nlb(), ns.max_lbas))
            } else {
                (None, format!("{s}: NDP commands go to namespace 1 with PRP data, not fused (CDW12 holds only NLB and the NDP flag)"))
            };
            (NdpFault::BadCommand, byte, why)
        })
    }

    fn key_of(&self, sqe: &Sqe) -> Result<(RequestKey, TableDescriptor), Refusal> {
        let m = self.params.request_modulus;
        let (table_start, request_id) = split_request_slba(sqe.slba(), m)
            .ok_or_else(|| (NdpFault::BadCommand, CDW10, format!("SLBA {}: the request modulus is 0", sqe.slba())))?;
        let table = *self.tables.get(table_start).ok_or_else(|| {
            let why = format!("SLBA {} = table start {table_start} + request id {request_id} (modulus {m}): no table is registered at LBA {table_start} ({} tables are)", sqe.slba(), self.tables.len());
            (NdpFault::NoSuchTable, CDW10, why)
        })?;
        Ok((RequestKey { table_start, request_id }, table))
    }

    fn register(&mut self, ctx: &mut ExecCtx<'_>, data: DataBuf<'_>) -> ExtCompletion {
        let t = ctx.start;
        let DataBuf::ToDevice(bytes) = data else {
            return self.fault(ctx, NdpFault::DataBuffer, None, "table registration without a descriptor: it carries data to the device", t);
        };
        let arrived = ctx.from_host(t, bytes.len() as u64);
        let done = ctx.firmware_on(arrived, self.params.ftl_core as u32, self.costs.register());
        let (lba_bytes, page_bytes) = (ctx.lba_bytes() as u32, ctx.geometry().page_size);
        let registered = TableDescriptor::decode(bytes, lba_bytes, page_bytes)
            .and_then(|d| self.tables.register(d, ctx.lbas(), self.params.request_modulus));
        let registered = registered.map_err(|b| (NdpFault::from(b.clone()), None, b.0));
        match registered {
            Ok(()) => {
                self.stats.tables += 1;
                ExtCompletion { status: Status::SUCCESS, dw0: 0, done }
            }
            Err((f, byte, why)) => self.fault(ctx, f, byte, why, done),
        }
    }

    fn config(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>) -> ExtCompletion {
        let t = ctx.start;
        self.stats.configs += 1;
        let checked = Self::check_ndp_command(ctx, sqe).and_then(|()| self.key_of(sqe));
        let (key, table) = match checked {
            Ok(k) => k,
            Err((f, byte, why)) => {
                self.stats.config_faults += 1;
                return self.fault(ctx, f, byte, why, t);
            }
        };
        let bytes = u64::from(sqe.nlb()) * ctx.lba_bytes();
        let payload = match data {
            DataBuf::ToDevice(b) if b.len() as u64 >= bytes => &b[..bytes as usize],
            other => {
                self.stats.config_faults += 1;
                let got = match other {
                    DataBuf::ToDevice(b) => format!("{} bytes", b.len()),
                    _ => "no data to the device".to_string(),
                };
                return self.fault(ctx, NdpFault::DataBuffer, CDW12, format!("NLB {} needs a config payload of {bytes} bytes, got {got}", sqe.nlb()), t);
            }
        };
        // 1a: an entry, then the config's DMA into its buffer.
        let (entry, entry_start) = match self.entries.allocate(key, t) {
            Ok(e) => e,
            Err(f) => {
                self.stats.config_faults += 1;
                let why = match f {
                    NdpFault::DuplicateRequest => format!("request id {} of the table at LBA {} is still in flight: read its results first", key.request_id, key.table_start),
                    _ => format!("all {} pending-request entries hold unread results: read results first", self.entries.len()),
                };
                return self.fault(ctx, f, CDW10, why, t);
            }
        };
        let latency = ctx.config().host.link_latency.0;
        let arrived = ctx.from_host(entry_start + latency, bytes);
        let in_dram = ctx.dram(arrived, bytes);
        // 2: decode, validate, probe the cache, group by page.
        let core = self.params.ftl_core as u32;
        let req = NdpConfig::decode(payload)
            .map_err(|e| (NdpFault::from(&e), format!("config: {e}")))
            .and_then(|cfg| {
                if cfg.embedding_length != table.layout.dim() {
                    let why = format!("config: embeddingLength {} does not match table {}'s dim {}", cfg.embedding_length, table.table_id, table.layout.dim());
                    return Err((NdpFault::DimensionMismatch, why));
                }
                let cache = self.cache.as_mut().filter(|c| fits_cache(c, &table));
                SlsRequest::process_config(cfg, &table.layout, &self.limits, cache).map_err(|e| {
                    let f = match &e {
                        ExecError::Wire(w) => NdpFault::from(w),
                        ExecError::Mismatch(_) => NdpFault::DimensionMismatch,
                        _ => NdpFault::BadCommand,
                    };
                    (f, format!("config: {e}"))
                })
            });
        let req = match req {
            Ok(r) => r,
            Err((f, why)) => {
                let done = ctx.firmware_on(in_dram, core, self.params.config_base_instructions);
                self.entries.release(entry, done);
                self.stats.config_faults += 1;
                return self.fault(ctx, f, None, why, done);
            }
        };
        let s = req.stats();
        let dim = table.layout.dim();
        let result_elements = u64::from(req.config().result_embeddings) * u64::from(dim);
        let instructions = self.costs.config(s.pairs, s.pages, s.cache_hits, dim, result_elements);
        let processed = ctx.firmware_on(in_dram, core, instructions);
        self.stats.pairs += s.pairs;
        self.pending.push(PendingRequest {
            key,
            entry,
            table,
            req,
            arrived: t,
            entry_start,
            config_in_dram: in_dram,
            processed,
            plan: None,
            next_sector: 0,
            cached: self.cache.as_ref().is_some_and(|c| fits_cache(c, &table)),
        });
        ExtCompletion { status: Status::SUCCESS, dw0: 0, done: processed }
    }

    fn result(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>) -> ExtCompletion {
        let t = ctx.start;
        self.stats.result_reads += 1;
        let found = Self::check_ndp_command(ctx, sqe).and_then(|()| self.key_of(sqe)).and_then(|(key, _)| {
            self.pending.iter().position(|p| p.key == key).ok_or_else(|| {
                let why = format!("result read of request id {} of the table at LBA {}: no config was sent for it (send the config first)", key.request_id, key.table_start);
                (NdpFault::NoConfig, CDW10, why)
            })
        });
        let i = match found {
            Ok(i) => i,
            Err((f, byte, why)) => {
                self.stats.result_faults += 1;
                return self.fault(ctx, f, byte, why, t);
            }
        };
        if self.pending[i].plan.is_none() {
            if let Some(class) = self.ndp_class {
                ctx.use_class(class);
            }
            self.schedule_pending(ctx, t);
        }
        let sector = ctx.lba_bytes() as usize;
        let nlb = sqe.nlb() as usize;
        let fault = {
            let p = &self.pending[i];
            let left = p.req.result_sectors() - p.next_sector;
            match p.plan.as_ref().and_then(|plan| plan.fault) {
                Some(NdpFault::MediaError) => Some((NdpFault::MediaError, None, "a flash page of the request could not be read (Unrecovered Read Error)".to_string())),
                Some(f) => Some((f, None, format!("the table's rows could not be read: {}", f.describe()))),
                None if nlb > left => Some((NdpFault::TooManySectors, CDW12, format!("NLB {nlb}: expected 1..={left} (the request's result sectors not read yet)"))),
                None => match &data {
                    DataBuf::FromDevice(b) if b.len() >= nlb * sector => None,
                    _ => Some((NdpFault::DataBuffer, CDW12, format!("NLB {nlb}: the host buffer must hold {} bytes", nlb * sector))),
                },
            }
        };
        if let Some((f, byte, why)) = fault {
            self.stats.result_faults += 1;
            if f == NdpFault::MediaError {
                let p = self.pending.remove(i);
                self.entries.release(p.entry, t);
            }
            return self.fault(ctx, f, byte, why, t);
        }
        let DataBuf::FromDevice(out) = data else { unreachable!("checked above") };
        // 1b + 6: each requested sector leaves once complete and the host DMA is free.
        let core = self.params.ftl_core as u32;
        let p = &self.pending[i];
        let plan = p.plan.as_ref().expect("scheduled above");
        let first = p.next_sector;
        let mut done = t;
        for k in 0..nlb {
            let s = first + k;
            let bytes = p.req.sector_bytes(s).expect("a planned request's sectors are complete");
            out[k * sector..(k + 1) * sector].copy_from_slice(&bytes[..sector]);
            let fw = ctx.firmware_on(plan.sector_ready[s].max(t), core, self.costs.result_sector());
            let staged = ctx.dram(fw, sector as u64);
            done = done.max(ctx.to_host(staged, sector as u64));
        }
        self.stats.result_sectors += nlb as u64;
        let p = &mut self.pending[i];
        p.next_sector += nlb;
        if p.next_sector == p.req.result_sectors() {
            let p = self.pending.remove(i);
            self.entries.release(p.entry, done);
            self.account_finished(&p, done);
        }
        ExtCompletion { status: Status::SUCCESS, dw0: 0, done }
    }

    /// Schedules every configured, unscheduled entry together (round-robin), no earlier than `now`.
    fn schedule_pending(&mut self, ctx: &mut ExecCtx<'_>, now: Time) {
        let which: Vec<usize> = (0..self.pending.len()).filter(|&i| self.pending[i].plan.is_none()).collect();
        let mut port = CtxPort { ctx, core: self.params.ftl_core as u32 };
        plan_round_robin(&mut self.pending, &which, now, &mut port, &mut self.buffer, self.cache.as_mut(), &self.costs);
        for &i in &which {
            let plan = self.pending[i].plan.as_ref().expect("just planned");
            self.stats.pages_from_flash += plan.pages_from_flash;
            self.stats.pages_from_buffer += plan.pages_from_buffer;
            self.stats.page_flash_latency_sum_ns += plan.page_wait_sum_ns;
            self.stats.page_translation_sum_ns += plan.translation_ns;
            self.stats.rows_from_flash += self.pending[i].req.stats().rows_from_flash;
        }
    }

    fn account_finished(&mut self, p: &PendingRequest, done: Time) {
        let plan = p.plan.as_ref().expect("finished requests were planned");
        let s = &mut self.stats;
        s.requests += 1;
        s.entry_wait_ns += p.entry_start - p.arrived;
        s.config_write_ns += p.config_in_dram - p.entry_start;
        s.config_process_ns += p.processed - p.config_in_dram;
        let data_span = plan.data_done.saturating_since(p.processed);
        let translation = plan.translation_ns.min(data_span);
        s.translation_ns += translation;
        s.flash_read_ns += data_span - translation;
        s.return_ns += done.saturating_since(plan.data_done);
        s.total_ns += done - p.arrived;
    }

    /// An ordinary Read through the whole-page LRU buffer.
    fn host_read(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>) -> ExtCompletion {
        let t = ctx.start;
        let (slba, nlb) = match decode_io(sqe, &Self::namespace(ctx)) {
            Ok(IoCommand::Read { slba, nlb, .. }) => (slba, nlb),
            Ok(_) => return ExtCompletion { status: ctx.explain(Status::INVALID_OPCODE, Some(0), "not a Read"), dw0: 0, done: t },
            Err(r) => {
                let ns = Self::namespace(ctx);
                let why = format!("Read of NLB {} at SLBA {}: expected 1..={} blocks (MDTS) inside the namespace's {} blocks", sqe.nlb(), sqe.slba(), ns.max_lbas, ns.lbas);
                return ExtCompletion { status: ctx.explain(r.status, CDW10, why), dw0: 0, done: t };
            }
        };
        let sector = ctx.lba_bytes() as usize;
        let mut out: &mut [u8] = match data {
            DataBuf::FromDevice(b) if b.len() >= nlb as usize * sector => &mut b[..nlb as usize * sector],
            DataBuf::None => &mut [],
            _ => {
                let why = format!("Read of NLB {nlb}: the host buffer must hold {} bytes", nlb as usize * sector);
                return ExtCompletion { status: ctx.explain(Status::DATA_TRANSFER_ERROR, CDW12, why), dw0: 0, done: t };
            }
        };
        self.stats.host_reads += 1;
        // The device already charged fw_other for fetching and decoding this command; the rest of its read path
        // (fw_read, one mapping lookup per block) is charged here.
        let c = &ctx.config().controller;
        let fw_rest = (c.fw_read_instructions.0 - c.fw_other_instructions.0).max(0.0)
            + ctx.config().ftl.map_instructions.0 * f64::from(nlb);
        let fw = ctx.firmware(t, fw_rest);
        let core = self.params.ftl_core as u32;
        let spp = u64::from(ctx.geometry().sectors_per_page);
        let want_data = !out.is_empty();
        let mut page = vec![0u8; spp as usize * sector];
        let mut done = fw;
        let end = slba + u64::from(nlb);
        let mut lba = slba;
        while lba < end {
            let lpage = lba / spp;
            let first = lpage * spp;
            let n = (first + spp).min(ctx.lbas()) - first;
            let take = (first + n).min(end) - lba;
            let psas = (0..n).map(|k| sector_address(ctx, first + k)).collect::<Option<Vec<u64>>>();
            let hit = psas.as_deref().and_then(|p| self.buffer.lookup(lpage, p, want_data)).map(|h| {
                if let Some(d) = h.data {
                    page[..d.len()].copy_from_slice(d);
                }
                h.ready
            });
            // (when the page is ready, whether it is through DRAM already)
            let (ready, through_dram) = match hit {
                Some(r) => {
                    self.stats.host_read_pages_from_buffer += 1;
                    (r.max(fw), false)
                }
                None => {
                    let buf: &mut [u8] = if want_data { &mut page[..n as usize * sector] } else { &mut [] };
                    match ctx.flash_read(fw, first, n as u32, ReadTo::Dram, buf) {
                        Ok(r) => {
                            // GreedyFTL's per-page handling on the FTL core, while the die works (as for NDP pages).
                            let handled = ctx.firmware_on(fw, core, self.costs.page_sched());
                            let ready = r.done.max(handled);
                            if let Some(p) = psas {
                                self.buffer.insert(lpage, p, ready, want_data.then_some(&page[..n as usize * sector]));
                            }
                            self.stats.host_read_pages_from_flash += 1;
                            (ready, true)
                        }
                        Err(s) => {
                            let why = format!("LBAs {first}..{} could not be read from flash", first + n);
                            return ExtCompletion { status: ctx.explain(s, None, why), dw0: 0, done: fw };
                        }
                    }
                }
            };
            if want_data {
                let from = (lba - first) as usize * sector;
                let (dst, rest) = std::mem::take(&mut out).split_at_mut(take as usize * sector);
                dst.copy_from_slice(&page[from..from + take as usize * sector]);
                out = rest;
            }
            let b = take * sector as u64;
            let in_dram = if through_dram { ready } else { ctx.dram(ready, 2 * b) };
            done = done.max(ctx.to_host(in_dram, b));
            lba += take;
        }
        ExtCompletion { status: Status::SUCCESS, dw0: 0, done }
    }

    /// SSD-cache counters (zero when the cache is off).
    pub fn cache_stats(&self) -> CacheStats {
        self.cache.as_ref().map(|c| c.stats()).unwrap_or_default()
    }
}

/// Whether a table's rows can live in the SSD cache: its id fits the key's table bits and a row fits an entry.
/// (The artifact's 5-bit table field would alias tables 32 and up, and a dim-64 row would overrun its 128-B
/// entry; such tables bypass the cache here instead.)
fn fits_cache(c: &SsdEmbeddingCache, t: &TableDescriptor) -> bool {
    let cfg = c.config();
    u64::from(t.table_id) >> cfg.table_bits == 0 && u64::from(t.layout.dim()) * 4 <= u64::from(cfg.payload_bytes)
}

/// The device seen through an execution context.
struct CtxPort<'a, 'b> {
    ctx: &'a mut ExecCtx<'b>,
    core: u32,
}

impl FlashPort for CtxPort<'_, '_> {
    fn read(&mut self, lba: u64, nlb: u32, ready: Time, out: &mut [u8]) -> Result<Time, Status> {
        self.ctx.flash_read(ready, lba, nlb, ReadTo::Dram, out).map(|r| r.done)
    }
    fn physical(&self, lba: u64, nlb: u32) -> Option<Vec<u64>> {
        (lba..lba + u64::from(nlb)).map(|l| sector_address(self.ctx, l)).collect()
    }
    fn ftl_core(&mut self, ready: Time, instructions: f64) -> Time {
        self.ctx.firmware_on(ready, self.core, instructions)
    }
}

impl Extension for RecssdFirmware {
    fn name(&self) -> &str {
        NAME
    }

    fn attach(&mut self, ctx: &mut AttachCtx<'_>) -> nearflash_core::Result<()> {
        use nearflash_core::SimError;
        let mut p = RecssdParams::from_section(ctx.section(NAME)).map_err(|e| SimError::Config(e.to_string()))?;
        p.apply_json(&self.overrides).map_err(|e| SimError::Config(e.to_string()))?;
        let cfg = ctx.config();
        let cores = cfg.controller.cores.0;
        if p.ftl_core >= cores {
            return Err(SimError::Config(format!("recssd: ftl_core {} but the controller has {cores} cores", p.ftl_core)));
        }
        let ns_per_instruction = cfg.controller.cpi.0 * 1e9 / cfg.controller.core_freq.0;
        let dies = cfg.nand.channels.0 * cfg.nand.chips_per_channel.0 * cfg.nand.dies_per_chip.0;
        self.cache = if p.ssd_cache {
            Some(SsdEmbeddingCache::new(p.cache_config()).map_err(|e| SimError::Config(format!("recssd: {e}")))?)
        } else {
            None
        };
        self.buffer = PageBuffer::new(dies as u32, p.page_buffer_pages_per_die as usize);
        self.entries = EntryPool::new(p.pending_entries as usize);
        self.costs = FirmwareCosts::new(&p, ns_per_instruction);
        ctx.claim_opcode(p.register_opcode)?;
        // NDP commands are Reads and Writes flagged in CDW12; with serve_host_reads every Read is the firmware's.
        let flag = Intercept::Flag { opcode: opcode::READ, dword: 12, mask: 1 << NDP_FLAG_BIT };
        ctx.intercept(if p.serve_host_reads { Intercept::Opcode(opcode::READ) } else { flag })?;
        ctx.intercept(Intercept::Flag { opcode: opcode::WRITE, dword: 12, mask: 1 << NDP_FLAG_BIT })?;
        if p.ssd_cache {
            ctx.observe(); // host writes and trims to a table drop its cached rows
        }
        let level: nearflash_core::ext::Level = p.ndp_class_level.parse().map_err(|e| SimError::Config(format!("recssd: ndp_class_level: {e}")))?;
        self.ndp_class = Some(ctx.flash_class("ndp", level, p.ndp_class_weight as u32)?);
        self.params = p;
        Ok(())
    }

    fn observe(&mut self, event: &HostEvent) {
        let (HostEvent::Write { slba, nlb } | HostEvent::Trim { slba, nlb }) = *event;
        self.stats.cache_rows_invalidated += self.invalidate_lbas(slba, nlb);
    }

    fn execute(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>) -> ExtCompletion {
        if sqe.opcode == self.params.register_opcode {
            self.register(ctx, data)
        } else if is_ndp(sqe) && sqe.opcode == opcode::WRITE {
            self.config(ctx, sqe, data)
        } else if is_ndp(sqe) {
            self.result(ctx, sqe, data)
        } else if sqe.opcode == opcode::READ {
            // Served by the firmware's page buffer, but still an ordinary read as far as the host is concerned.
            ctx.account_as(OpClass::Read, u64::from(sqe.nlb()) * ctx.lba_bytes());
            self.host_read(ctx, sqe, data)
        } else {
            let why = format!("opcode {:#04x}: the RecSSD firmware takes table registrations ({:#04x}), NDP Writes/Reads and Reads", sqe.opcode, self.params.register_opcode);
            ExtCompletion { status: ctx.explain(Status::INVALID_OPCODE, Some(0), why), dw0: 0, done: ctx.start }
        }
    }

    fn report(&self) -> serde_json::Value {
        let cache = self.cache_stats();
        let buffer = self.buffer.stats();
        serde_json::json!({
            "stats": self.stats,
            "faults": self.faults,
            "entries": self.entries.stats(),
            "in_flight": self.pending.len(),
            "ssd_cache": {
                "enabled": self.cache.is_some(),
                "hits": cache.hits, "misses": cache.misses, "fills": cache.fills, "evictions": cache.evictions,
                "hit_rate": cache.hit_rate(),
            },
            "page_buffer": {
                "pages": self.buffer.capacity(),
                "hits": buffer.hits, "misses": buffer.misses, "stale": self.buffer.stale(),
            },
        })
    }
}

/// The physical sector address of an LBA's current copy, if it is on flash.
fn sector_address(ctx: &ExecCtx<'_>, lba: u64) -> Option<u64> {
    match ctx.placement(lba) {
        Ok(Placement::Flash { addr, slot }) => Some(addr.ppn * u64::from(ctx.geometry().sectors_per_page) + u64::from(slot)),
        _ => None,
    }
}

inventory::submit! {
    nearflash_core::ext::Registration {
        name: NAME,
        about: "RecSSD (ASPLOS'21): SparseLengthsSum inside the FTL, SSD-side embedding cache",
        build: |overrides, cfg| {
            let config = |e: crate::params::ParamError| nearflash_core::SimError::Config(format!("recssd: {e}"));
            // Resolved against the device's preset now, so that bad overrides fail before anything is attached.
            let mut p = RecssdParams::from_section(cfg.ext.get(NAME).and_then(|v| v.as_table())).map_err(config)?;
            p.apply_json(overrides).map_err(config)?;
            Ok(Box::new(RecssdFirmware::new(overrides.clone())))
        },
    }
}
