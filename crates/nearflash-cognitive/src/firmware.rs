//! Cognitive SSD's runtime and DLG-x as a nearflash firmware extension (paper Sec. 3-4). It claims the DLG
//! library's six vendor opcodes (Table 1, [`crate::wire`]) and keeps everything it stores in the DLG area, the
//! blocks the FTL never uses ([`crate::area`]):
//!
//! * `DLG_config` (0xC3): DW12 = 1 deploys a model (descriptor + weight pages, [`crate::package`]), DW12 = 0 the
//!   instructions (checked against the deployed model's layout) and the graph pages. Each payload is decoded and
//!   checked whole before anything is erased or programmed; a model deployment drops the previous instructions and
//!   graph. The instruction payload's header is programmed into the instruction area.
//! * `DLG_hashing` (0xC0): DW10 names a session (an address in the data cache), DW11 the bytes of n images, DW12 the
//!   code length (must be the model's). The NPE hashes them with weights read from flash ([`crate::dlgx`]); the
//!   session keeps the codes and hash-layer values.
//! * `DLG_index` (0xC1): the session's queries' top-T ids (u32 each, DW11 = 4 T n bytes back); without a
//!   session at DW10: Command Sequence Error (the task scheduler's rule: an index task waits for its hashing).
//! * `DLG_analysis` (0xC2): DW12 = 0 the class of each session image (1 byte each), 1 its hash code (8 bytes each).
//! * `SSD_read` / `SSD_write` (0xC4 / 0xC5): DW10 a physical page number, DW11 up to a page; pages outside the DLG
//!   area are refused with Access Denied (SCT 2h, SC 86h), so the FTL's blocks are never touched.
//!
//! Method A: the runtime blocks every controller core from dispatch until DLG-x finishes (no ordinary command is
//! handled meanwhile). Method B: it rings DLG-x's doorbell and polls its status every `poll_interval`, so ordinary
//! commands run between polls; both share the flash with ordinary I/O, DLG-x's weight reads a flash class of their
//! own (`cognitive.weights`) taking work-conserving turns with it on the dies at their declared share
//! (`weight_stream_share`; 0: the weight stream first). Each weighted layer's bytes are read from the channels' pages as column reads
//! of the layer's byte range (`weight_reads = column`) or as whole pages (`page`).

use crate::area::DlgArea;
use crate::dlgx::{self, DeployedGraph, DeployedModel, TaskCost};
use crate::gse::SearchConfig;
use crate::instr::{self, Instr};
use crate::package::{decode_instructions, decode_model, GraphDescriptor, ModelDescriptor};
use crate::params::CognitiveParams;
use crate::wire::{ConfigTarget, DlgCommand, OP_ANALYSIS, OP_CONFIG, OP_HASHING, OP_INDEX, OP_SSD_READ, OP_SSD_WRITE};
use crate::weight_layout::WeightLayout;
use nearflash_core::config::ExtParams;
use nearflash_core::ext::Time;
use nearflash_core::ext::{AttachCtx, ClassId, DataBuf, ExecCtx, ExtCompletion, Extension, Level, ReadTo, Sqe, Status, UnitHandle, UnitSpec};
use nearflash_core::SimError;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Name the extension registers under.
pub const NAME: &str = "cognitive";
/// NVMe Access Denied (Media and Data Integrity Errors): a physical access outside the DLG area.
pub const ACCESS_DENIED: Status = Status { sct: 2, sc: 0x86 };

/// Codes and hash-layer values of one `DLG_hashing` task.
#[derive(Debug, Clone)]
struct Session {
    codes: Vec<u64>,
    real: Vec<Vec<f32>>,
}

/// Counters reported under `extensions.cognitive`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FirmwareStats {
    pub configs: u64,
    pub hashed_images: u64,
    pub queries: u64,
    pub analyses: u64,
    pub ssd_reads: u64,
    pub ssd_writes: u64,
    /// Weight reads (one page sensed each, moved whole or as a column range).
    pub weight_pages_read: u64,
    /// Weight bytes moved over the channels.
    pub weight_bytes_read: u64,
    pub graph_pages_read: u64,
    pub pages_programmed: u64,
    pub blocks_erased: u64,
    pub npe_cycles: f64,
    pub gse_cycles: f64,
    /// Time DLG-x was busy with tasks (dispatch to finish), ns.
    pub dlgx_busy_ns: u64,
    pub polls: u64,
}

/// What is saved with the image (the pages themselves are in flash).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Saved {
    model: Option<ModelDescriptor>,
    instructions: Vec<u8>,
    graph: Option<GraphDescriptor>,
    dirty: Vec<u32>,
    #[serde(default)]
    digest: Digest,
}

/// CRC-32s of the two `DLG_config` payloads of the current deployment (model, then instructions and graph), so that
/// a host can tell the deployment it made from another one of the same size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Digest {
    model: Option<u32>,
    instructions: Option<u32>,
}

impl Digest {
    /// `"<model>-<instructions>"` in hex once both are deployed.
    fn hex(&self) -> Option<String> {
        Some(format!("{:08x}-{:08x}", self.model?, self.instructions?))
    }
}

/// The extension.
pub struct CognitiveFirmware {
    params: CognitiveParams,
    overrides: serde_json::Value,
    area: Option<DlgArea>,
    units: Option<(UnitHandle, UnitHandle)>,
    /// The flash class of DLG-x's weight-stream reads (`weight_stream_share`).
    weight_class: Option<ClassId>,
    ns_per_instruction: f64,
    model: Option<DeployedModel>,
    instructions: Vec<Instr>,
    graph: Option<(DeployedGraph, GraphDescriptor)>,
    sessions: BTreeMap<u32, Session>,
    session_order: VecDeque<u32>,
    /// DLG-area blocks programmed since their last erase.
    dirty: BTreeSet<u32>,
    digest: Digest,
    stats: FirmwareStats,
    faults: BTreeMap<String, u64>,
}

/// Why a command failed: its status and a name for the report.
type Fault = (Status, &'static str);

impl CognitiveFirmware {
    pub fn new(overrides: serde_json::Value) -> Self {
        CognitiveFirmware {
            params: CognitiveParams::default(),
            overrides,
            area: None,
            units: None,
            weight_class: None,
            ns_per_instruction: 1.0,
            model: None,
            instructions: Vec::new(),
            graph: None,
            sessions: BTreeMap::new(),
            session_order: VecDeque::new(),
            dirty: BTreeSet::new(),
            digest: Digest::default(),
            stats: FirmwareStats::default(),
            faults: BTreeMap::new(),
        }
    }

    pub fn params(&self) -> &CognitiveParams {
        &self.params
    }

    fn area(&self) -> &DlgArea {
        self.area.as_ref().expect("attached")
    }

    fn deployed(&self, d: ModelDescriptor) -> crate::Result<DeployedModel> {
        let area = self.area();
        let skeleton = d.qmodel(None);
        let layout = WeightLayout::plan(&skeleton, area.data_area())?;
        let ppns = (0..layout.area.channels)
            .map(|ch| (0..layout.pages_per_channel).map(|i| area.ppn(layout.area.page(ch, i)?)).collect())
            .collect::<crate::Result<Vec<Vec<u64>>>>()?;
        let timing = crate::npe::timing(&skeleton.network, &self.params)?;
        Ok(DeployedModel { descriptor: d, skeleton, layout, ppns, timing })
    }

    fn deployed_graph(&self, d: &GraphDescriptor, weight_pages: usize) -> crate::Result<DeployedGraph> {
        let format = d.format(self.area().geo.page_size as usize)?;
        let ppns = (0..format.pages()).map(|j| self.area().graph_page(weight_pages, j)).collect::<crate::Result<Vec<_>>>()?;
        Ok(DeployedGraph { format, entries: d.entries(), seed: d.seed, ppns })
    }

    /// Erases the dirty blocks among `blocks` (all dirty ones if `None`); returns when the last erase ends.
    fn erase(&mut self, ctx: &mut ExecCtx<'_>, blocks: Option<&BTreeSet<u32>>, ready: Time) -> Result<Time, Status> {
        let victims: Vec<u32> = self.dirty.iter().copied().filter(|b| blocks.is_none_or(|s| s.contains(b))).collect();
        let mut done = ready;
        for b in victims {
            done = done.max(ctx.erase_block(ready, b)?);
            self.dirty.remove(&b);
            self.stats.blocks_erased += 1;
        }
        Ok(done)
    }

    /// Programs `(ppn, bytes)` pages from `ready`; returns when the last one ends. A block this firmware believed
    /// erased that refuses the program (its record was lost: the device stopped before saving it) is erased and
    /// programmed again.
    fn program(&mut self, ctx: &mut ExecCtx<'_>, pages: &[(u64, &[u8])], ready: Time) -> Result<Time, Status> {
        let ppb = u64::from(ctx.geometry().pages_per_block);
        let mut done = ready;
        for &(ppn, bytes) in pages {
            let block = (ppn / ppb) as u32;
            let believed_erased = self.dirty.insert(block);
            let end = match ctx.program_page(ready, ppn, bytes, &[]) {
                Err(_) if believed_erased && ppn % ppb == 0 => {
                    let erased = ctx.erase_block(ready, block)?;
                    self.stats.blocks_erased += 1;
                    ctx.program_page(erased, ppn, bytes, &[])?
                }
                other => other?,
            };
            done = done.max(end);
            self.stats.pages_programmed += 1;
        }
        Ok(done)
    }

    fn config(&mut self, ctx: &mut ExecCtx<'_>, target: ConfigTarget, size: u32, data: DataBuf<'_>) -> Result<Time, Fault> {
        let DataBuf::ToDevice(buf) = data else { return Err((Status::DATA_TRANSFER_ERROR, "config_without_data")) };
        let payload = buf.get(..size as usize).ok_or((Status::DATA_TRANSFER_ERROR, "config_short_buffer"))?;
        let arrived = ctx.from_host(ctx.start, u64::from(size));
        let in_dram = ctx.dram(arrived, u64::from(size));
        let t = ctx.firmware(in_dram, self.params.dispatch_instructions);
        let area = self.area().clone();
        let refused = |e: crate::CognitiveError| match e {
            crate::CognitiveError::NoSpace(_) => (Status::CAPACITY_EXCEEDED, "does_not_fit"),
            _ => (Status::INVALID_FIELD, "bad_payload"),
        };
        let ps = area.geo.page_size as usize;
        match target {
            ConfigTarget::Model => {
                let crate::package::ModelPayload { descriptor, pages: weight_pages, .. } = decode_model(payload, &area).map_err(refused)?;
                let dep = self.deployed(descriptor).map_err(refused)?;
                // A new model invalidates the old deployment whole: erase everything this extension wrote.
                let erased = self.erase(ctx, None, t).map_err(|s| (s, "erase_failed"))?;
                let pages: Vec<(u64, &[u8])> =
                    dep.ppns.iter().zip(&weight_pages).flat_map(|(ps, bs)| ps.iter().copied().zip(bs.iter().map(Vec::as_slice))).collect();
                self.model = None;
                self.instructions.clear();
                self.graph = None;
                self.sessions.clear();
                self.session_order.clear();
                self.digest = Digest::default();
                let done = self.program(ctx, &pages, erased).map_err(|s| (s, "program_failed"))?;
                self.model = Some(dep);
                self.digest.model = Some(crc32fast::hash(payload));
                Ok(done)
            }
            ConfigTarget::Instructions => {
                let m = self.model.as_ref().ok_or((Status::SEQUENCE_ERROR, "instructions_before_model"))?;
                let wpc = m.layout.pages_per_channel;
                let p = decode_instructions(payload, &area, wpc).map_err(refused)?;
                if p.instructions != instr::compile(&m.skeleton, &m.layout).map_err(refused)? {
                    return Err((Status::INVALID_FIELD, "instructions_do_not_match_model"));
                }
                let graph = match &p.graph {
                    Some((d, _)) => Some((self.deployed_graph(d, wpc).map_err(refused)?, d.clone())),
                    None => None,
                };
                // The instruction area holds the payload's header (descriptor and instructions), page by page.
                let header_len = payload.len() - p.graph_pages.len() * ps;
                let instr_pages = area.instruction_pages().map_err(refused)?;
                let chunks: Vec<&[u8]> = payload[..header_len].chunks(ps).collect();
                if chunks.len() > instr_pages.len() {
                    return Err((Status::CAPACITY_EXCEEDED, "instructions_do_not_fit"));
                }
                let ppb = u64::from(area.geo.pages_per_block);
                let mut blocks: BTreeSet<u32> = instr_pages.iter().map(|p| (p / ppb) as u32).collect();
                if let Some((g, _)) = &graph {
                    blocks.extend(g.ppns.iter().map(|p| (p / ppb) as u32));
                }
                let erased = self.erase(ctx, Some(&blocks), t).map_err(|s| (s, "erase_failed"))?;
                self.instructions.clear();
                self.graph = None;
                self.digest.instructions = None;
                let mut pages: Vec<(u64, &[u8])> = instr_pages.iter().copied().zip(chunks).collect();
                if let Some((g, _)) = &graph {
                    pages.extend(g.ppns.iter().copied().zip(p.graph_pages.iter().map(Vec::as_slice)));
                }
                let done = self.program(ctx, &pages, erased).map_err(|s| (s, "program_failed"))?;
                self.instructions = p.instructions;
                self.graph = graph;
                self.digest.instructions = Some(crc32fast::hash(payload));
                Ok(done)
            }
        }
    }

    /// Dispatches a DLG-x task at `t` and waits for it as `method` says; returns when the firmware knows it ended.
    fn wait_for_dlgx(&mut self, ctx: &mut ExecCtx<'_>, dispatched: Time, finished: Time) -> Time {
        self.stats.dlgx_busy_ns += finished.saturating_since(dispatched);
        let busy = finished.saturating_since(dispatched) as f64;
        if self.params.method == "A" {
            // The runtime is blocked: no controller core handles anything else until DLG-x is done. The wait is
            // booked in 1-us slices so that it fills every gap a core has in that interval (one long booking would
            // be placed after the core's next short job and leave the interval free).
            let slice = (1000.0 / self.ns_per_instruction).max(1.0);
            let mut seen = finished;
            for c in 0..ctx.controller_cores() {
                let mut at = dispatched;
                while at < finished {
                    seen = seen.max(ctx.firmware_on(at, c, slice));
                    at += 1000;
                }
            }
            seen
        } else {
            let step = self.params.poll_interval.max(1.0);
            let polls = (busy / step).ceil().max(1.0) as u64;
            let mut seen = dispatched;
            for i in 1..=polls {
                seen = ctx.firmware(dispatched + (i as f64 * step) as u64, self.params.poll_instructions);
            }
            self.stats.polls += polls;
            seen.max(finished)
        }
    }

    fn hashing(&mut self, ctx: &mut ExecCtx<'_>, address: u32, size: u32, bits: u32, data: DataBuf<'_>) -> Result<Time, Fault> {
        let m = self.model.as_ref().ok_or((Status::SEQUENCE_ERROR, "hashing_without_model"))?;
        let want_bits = m.skeleton.network.bits().unwrap_or(0) as u32;
        if bits != want_bits {
            return Err((Status::INVALID_FIELD, "hash_length_differs_from_model"));
        }
        let input: usize = m.skeleton.network.input.iter().product();
        if !(size as usize).is_multiple_of(input) {
            return Err((Status::INVALID_FIELD, "image_size"));
        }
        let DataBuf::ToDevice(buf) = data else { return Err((Status::DATA_TRANSFER_ERROR, "hashing_without_data")) };
        let bytes = buf.get(..size as usize).ok_or((Status::DATA_TRANSFER_ERROR, "hashing_short_buffer"))?;
        let arrived = ctx.from_host(ctx.start, u64::from(size));
        let in_dram = ctx.dram(arrived, u64::from(size));
        let dispatched = ctx.firmware(in_dram, self.params.dispatch_instructions);
        let (npe, _) = self.units.expect("attached");
        if let Some(class) = self.weight_class {
            ctx.use_class(class);
        }
        let images: Vec<&[u8]> = bytes.chunks(input).collect();
        let mut cost = TaskCost::default();
        let m = self.model.as_ref().expect("checked above");
        let (finished, out) = dlgx::hash(ctx, m, npe, &self.params, &images, dispatched, &mut cost).map_err(|s| (s, "weight_read_failed"))?;
        let codes = out.iter().map(|(acc, _)| acc.iter().enumerate().filter(|(_, &a)| a >= 0).fold(0u64, |c, (i, _)| c | (1 << i))).collect();
        self.stats.hashed_images += images.len() as u64;
        self.account(&cost);
        let done = self.wait_for_dlgx(ctx, dispatched, finished);
        self.open_session(address, Session { codes, real: out.into_iter().map(|o| o.1).collect() });
        Ok(done)
    }

    fn open_session(&mut self, address: u32, s: Session) {
        if self.sessions.insert(address, s).is_none() {
            self.session_order.push_back(address);
        }
        while self.session_order.len() > self.params.sessions as usize {
            let old = self.session_order.pop_front().expect("non-empty");
            self.sessions.remove(&old);
        }
    }

    fn account(&mut self, c: &TaskCost) {
        self.stats.weight_pages_read += c.weight_pages;
        self.stats.weight_bytes_read += c.weight_bytes;
        self.stats.graph_pages_read += c.graph_pages;
        self.stats.npe_cycles += c.npe_cycles;
        self.stats.gse_cycles += c.gse_cycles;
    }

    fn out_buf<'a>(data: DataBuf<'a>, size: u32, want: usize) -> Result<&'a mut [u8], Fault> {
        if size as usize != want {
            return Err((Status::INVALID_FIELD, "result_size"));
        }
        match data {
            DataBuf::FromDevice(b) if b.len() >= want => Ok(&mut b[..want]),
            _ => Err((Status::DATA_TRANSFER_ERROR, "result_buffer")),
        }
    }

    fn index(&mut self, ctx: &mut ExecCtx<'_>, address: u32, size: u32, t: u32, data: DataBuf<'_>) -> Result<Time, Fault> {
        let s = self.sessions.get(&address).ok_or((Status::SEQUENCE_ERROR, "index_without_hashing_session"))?;
        let (g, _) = self.graph.as_ref().ok_or((Status::SEQUENCE_ERROR, "index_without_graph"))?;
        if t == 0 || t as usize > g.format.vertices {
            return Err((Status::INVALID_FIELD, "t_out_of_range"));
        }
        let cfg = SearchConfig::from_params(&self.params);
        if cfg.limits(t as usize).is_err() {
            return Err((Status::INVALID_FIELD, "t_beyond_inout_buffer"));
        }
        let out = Self::out_buf(data, size, 4 * t as usize * s.codes.len())?;
        let dispatched = ctx.firmware(ctx.start, self.params.dispatch_instructions);
        let (_, gse_unit) = self.units.expect("attached");
        let mut cost = TaskCost::default();
        let mut finished = dispatched;
        for (j, &code) in s.codes.iter().enumerate() {
            let seed = g.seed.wrapping_add(u64::from(address)).wrapping_add(j as u64);
            let (done, ids, _) =
                dlgx::search(ctx, g, gse_unit, &cfg, self.params.gse_neighbour_cycles, code, t as usize, seed, finished, &mut cost)
                    .map_err(|s| (s, "graph_read_failed"))?;
            finished = done;
            for (k, id) in ids.iter().enumerate() {
                let at = (j * t as usize + k) * 4;
                out[at..at + 4].copy_from_slice(&id.to_le_bytes());
            }
        }
        self.stats.queries += s.codes.len() as u64;
        self.account(&cost);
        let seen = self.wait_for_dlgx(ctx, dispatched, finished);
        Ok(ctx.to_host(seen, u64::from(size)))
    }

    fn analysis(&mut self, ctx: &mut ExecCtx<'_>, address: u32, size: u32, user: u32, data: DataBuf<'_>) -> Result<Time, Fault> {
        let s = self.sessions.get(&address).ok_or((Status::SEQUENCE_ERROR, "analysis_without_hashing_session"))?;
        let m = self.model.as_ref().ok_or((Status::SEQUENCE_ERROR, "analysis_without_model"))?;
        let dispatched = ctx.firmware(ctx.start, self.params.dispatch_instructions);
        let (npe, _) = self.units.expect("attached");
        let finished = match user {
            0 => {
                let head = m.descriptor.head.as_ref().ok_or((Status::INVALID_FIELD, "model_without_classifier"))?;
                let out = Self::out_buf(data, size, s.real.len())?;
                for (o, r) in out.iter_mut().zip(&s.real) {
                    *o = crate::analysis::classify(head, r).map_err(|_| (Status::INVALID_FIELD, "bad_head"))?;
                }
                // The head is an FC layer on one PE column (Sec. 4.2), bandwidth-free: its weights are on chip.
                let cycles = (head.weight.len() * s.real.len()) as f64 / self.params.pe_column;
                ctx.compute(dispatched, npe, 0, cycles)
            }
            1 => {
                let out = Self::out_buf(data, size, 8 * s.codes.len())?;
                for (o, c) in out.chunks_exact_mut(8).zip(&s.codes) {
                    o.copy_from_slice(&c.to_le_bytes());
                }
                dispatched
            }
            _ => return Err((Status::INVALID_FIELD, "analysis_kind")),
        };
        self.stats.analyses += 1;
        let seen = self.wait_for_dlgx(ctx, dispatched, finished);
        Ok(ctx.to_host(seen, u64::from(size)))
    }

    /// Checks a physical page for `SSD_read`/`SSD_write`: inside the device and the DLG area.
    fn dlg_page(&self, ctx: &ExecCtx<'_>, ppn: u32, size: u32) -> Result<u64, Fault> {
        let addr = ctx.page_addr(u64::from(ppn)).map_err(|s| (s, "page_out_of_range"))?;
        if !ctx.is_reserved_block(addr.block) {
            return Err((ACCESS_DENIED, "page_owned_by_ftl"));
        }
        if size > ctx.geometry().page_size {
            return Err((Status::INVALID_FIELD, "size_above_page"));
        }
        Ok(u64::from(ppn))
    }

    fn ssd_read(&mut self, ctx: &mut ExecCtx<'_>, ppn: u32, size: u32, data: DataBuf<'_>) -> Result<Time, Fault> {
        let ppn = self.dlg_page(ctx, ppn, size)?;
        let DataBuf::FromDevice(out) = data else { return Err((Status::DATA_TRANSFER_ERROR, "read_without_buffer")) };
        let out = out.get_mut(..size as usize).ok_or((Status::DATA_TRANSFER_ERROR, "read_short_buffer"))?;
        let mut page = vec![0u8; ctx.geometry().page_size as usize];
        // SSD_read is the firmware's data plane: the page goes through DRAM to the host, as an ordinary read.
        let r = ctx.read_page(ctx.start, ppn, ReadTo::Dram, &mut page).map_err(|s| (s, "read_failed"))?;
        out.copy_from_slice(&page[..size as usize]);
        self.stats.ssd_reads += 1;
        Ok(ctx.to_host(r.done, u64::from(size)))
    }

    fn ssd_write(&mut self, ctx: &mut ExecCtx<'_>, ppn: u32, size: u32, data: DataBuf<'_>) -> Result<Time, Fault> {
        let ppn = self.dlg_page(ctx, ppn, size)?;
        if self.deployment_pages().contains(&ppn) {
            return Err((ACCESS_DENIED, "page_holds_deployment"));
        }
        let DataBuf::ToDevice(src) = data else { return Err((Status::DATA_TRANSFER_ERROR, "write_without_data")) };
        let src = src.get(..size as usize).ok_or((Status::DATA_TRANSFER_ERROR, "write_short_buffer"))?;
        let arrived = ctx.from_host(ctx.start, u64::from(size));
        let arrived = ctx.dram(arrived, u64::from(size));
        let done = self.program(ctx, &[(ppn, src)], arrived).map_err(|s| (s, "program_refused"))?;
        self.stats.ssd_writes += 1;
        Ok(done)
    }

    /// Physical pages the current deployment occupies.
    fn deployment_pages(&self) -> BTreeSet<u64> {
        let mut s: BTreeSet<u64> = self.model.iter().flat_map(|m| m.ppns.iter().flatten().copied()).collect();
        if let Some((g, _)) = &self.graph {
            s.extend(g.ppns.iter().copied());
        }
        s
    }

    fn run(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>) -> Result<Time, Fault> {
        let cmd = DlgCommand::decode(sqe).map_err(|e| {
            ctx.explain(e.status, None, e.what);
            (e.status, "bad_command")
        })?;
        self.stats.configs += u64::from(matches!(cmd, DlgCommand::Config { .. }));
        match cmd {
            DlgCommand::Config { size, target, .. } => self.config(ctx, target, size, data),
            DlgCommand::Hashing { address, size, bits } => self.hashing(ctx, address, size, bits, data),
            DlgCommand::Index { address, size, t } => self.index(ctx, address, size, t, data),
            DlgCommand::Analysis { address, size, user } => self.analysis(ctx, address, size, user, data),
            DlgCommand::SsdRead { address, size } => self.ssd_read(ctx, address, size, data),
            DlgCommand::SsdWrite { address, size } => self.ssd_write(ctx, address, size, data),
        }
    }

    /// Whether a model (and a graph) are deployed.
    pub fn deployed_state(&self) -> (bool, bool) {
        (self.model.is_some(), self.graph.is_some())
    }
}

impl Extension for CognitiveFirmware {
    fn name(&self) -> &str {
        NAME
    }

    fn attach(&mut self, ctx: &mut AttachCtx<'_>) -> nearflash_core::Result<()> {
        let mut p = CognitiveParams::from_section(ctx.section(NAME)).map_err(|e| SimError::Config(format!("{NAME}: {e}")))?;
        p.apply_json_object(&self.overrides, &[]).map_err(|e| SimError::Config(format!("{NAME}: {e}")))?;
        let area = DlgArea::new(ctx.geometry().clone(), ctx.reserved_blocks_per_plane()).map_err(|e| SimError::Config(format!("{NAME}: {e}")))?;
        if area.geo.page_size as f64 != p.page_size {
            return Err(SimError::Config(format!("{NAME}: page_size {} B but the device's pages are {} B", p.page_size, area.geo.page_size)));
        }
        for op in [OP_HASHING, OP_INDEX, OP_ANALYSIS, OP_CONFIG, OP_SSD_READ, OP_SSD_WRITE] {
            ctx.claim_opcode(op)?;
        }
        let pj = p.dlgx_active_power * 1e9 / p.clock; // mW x 1e9 / Hz = pJ per cycle
        let spec = |name: &str| UnitSpec { name: name.into(), count: 1, freq_hz: p.clock, pj_per_cycle: pj, static_mw: 0.0 };
        let npe = ctx.add_units(&spec("cognitive.npe"))?;
        let gse = ctx.add_units(&spec("cognitive.gse"))?;
        let c = &ctx.config().controller;
        self.ns_per_instruction = c.cpi.0 * 1e9 / c.core_freq.0;
        self.units = Some((npe, gse));
        let share = p.weight_stream_share as u32;
        let (level, weight) = if share == 0 { (Level::Urgent, 1) } else { (Level::Normal, share) };
        self.weight_class = Some(ctx.flash_class("weights", level, weight)?);
        self.area = Some(area);
        self.params = p;
        Ok(())
    }

    fn execute(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>) -> ExtCompletion {
        match self.run(ctx, sqe, data) {
            Ok(done) => ExtCompletion::ok(done),
            Err((status, why)) => {
                *self.faults.entry(why.to_string()).or_default() += 1;
                // the fault's tag in words, unless the command decoder already said more (`bad_command`)
                if why != "bad_command" {
                    ctx.explain(status, None, why.replace('_', " "));
                }
                ExtCompletion::failed(status, ctx.start)
            }
        }
    }

    fn save(&self) -> Option<Vec<u8>> {
        let s = Saved {
            model: self.model.as_ref().map(|m| m.descriptor.clone()),
            instructions: self.instructions.iter().flat_map(|i| i.encode()).collect(),
            graph: self.graph.as_ref().map(|g| g.1.clone()),
            dirty: self.dirty.iter().copied().collect(),
            digest: self.digest,
        };
        Some(serde_json::to_vec(&s).expect("plain data serialises"))
    }

    fn restore(&mut self, state: &[u8]) -> nearflash_core::Result<()> {
        let bad = |e: String| SimError::Config(format!("{NAME}: saved state: {e}"));
        let s: Saved = serde_json::from_slice(state).map_err(|e| bad(e.to_string()))?;
        if let Some(d) = s.model {
            d.validate().map_err(|e| bad(e.to_string()))?;
            let m = self.deployed(d).map_err(|e| bad(e.to_string()))?;
            if let Some(g) = s.graph {
                self.graph = Some((self.deployed_graph(&g, m.layout.pages_per_channel).map_err(|e| bad(e.to_string()))?, g));
            }
            self.model = Some(m);
        }
        self.instructions = s.instructions.chunks(instr::INSTR_BYTES).map(Instr::decode).collect::<crate::Result<_>>().map_err(|e| bad(e.to_string()))?;
        self.dirty = s.dirty.into_iter().collect();
        self.digest = s.digest;
        Ok(())
    }

    fn report(&self) -> serde_json::Value {
        serde_json::json!({
            "method": self.params.method,
            "weight_reads": self.params.weight_reads,
            "model_deployed": self.model.is_some(),
            "graph_deployed": self.graph.as_ref().map(|g| g.0.format.vertices),
            "deployment": self.digest.hex(),
            "sessions": self.sessions.len(),
            "stats": self.stats,
            "faults": self.faults,
        })
    }

    fn reset_stats(&mut self) {
        self.stats = FirmwareStats::default();
        self.faults.clear();
    }
}

inventory::submit! {
    nearflash_core::ext::Registration {
        name: NAME,
        about: "Cognitive SSD (ATC'19): DLG-x deep hashing and Hamming graph search on weights and graph pages in flash",
        build: |overrides, cfg| {
            let config = |e: nearflash_core::config::ParamError| SimError::Config(format!("{NAME}: {e}"));
            let mut p = CognitiveParams::from_section(cfg.ext.get(NAME).and_then(|v| v.as_table())).map_err(config)?;
            p.apply_json_object(overrides, &[]).map_err(config)?;
            Ok(Box::new(CognitiveFirmware::new(overrides.clone())))
        },
    }
}
