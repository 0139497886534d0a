//! DLG-x on the device: the NPE runs the int8 network with its weights streamed from flash through the channels
//! (Sec. 4.2), the GSE searches the graph reading its pages from flash (Sec. 4.3). Both do the real computation on
//! the data read back from the reserved area, and book their time on the shared timelines: page reads on the dies
//! and channels (contending with ordinary I/O), NPE and GSE cycles on their own units.
//!
//! Weight reads (`weight_reads`): by default a column read per page of each channel moves only the ECC codewords
//! that hold the layer's bytes there (Eq. 3 counts weight bytes; ONFI Change Read Column after one sensing), so the
//! Fashion CNN's four layers, packed in one page per channel, sense that page four times but move it about once;
//! `page` moves every page a layer touches whole.
//!
//! NPE timing per layer (Eqs. 2-4 for the cycles): a layer's weight pages are requested when the previous layer
//! starts computing (the ping-pong bank fills while the other is used); it starts when its first row of pages (one
//! page per channel) is in, runs its compute cycles, and cannot end before its last page is in plus one kernel's
//! compute. Weight reads share the dies with ordinary I/O as a flash class of their own (`cognitive.weights`, the
//! firmware's `weight_stream_share`): the scheduler's work-conserving round robin gives them their turns when host
//! reads wait on the same die, and all of it when none do. GSE timing: the next page to read is known only after the previous expansion's distances, so the reads
//! of one query are sequential; the per-neighbour cycles follow on the GSE.

use crate::error::CognitiveError;
use crate::graph_pages::{Entry, PageFormat};
use crate::gse::{self, PageSource, SearchConfig, SearchStats};
use crate::npe::LayerTiming;
use crate::package::{gather_tensors, ModelDescriptor};
use crate::params::CognitiveParams;
use crate::quant::QModel;
use crate::weight_layout::WeightLayout;
use nearflash_core::ext::Time;
use nearflash_core::ext::{ExecCtx, ReadTo, Status, UnitHandle};

/// A deployed model as the firmware holds it: the description, the layout and where every weight page is. The
/// int8 weights themselves stay in flash.
#[derive(Debug, Clone)]
pub struct DeployedModel {
    pub descriptor: ModelDescriptor,
    pub skeleton: QModel,
    pub layout: WeightLayout,
    /// Physical page of each weight page, `[channel][page index]`.
    pub ppns: Vec<Vec<u64>>,
    /// NPE cycles per body layer (Eqs. 2-4).
    pub timing: Vec<LayerTiming>,
}

/// A deployed graph: its format, entry vertices, seed and the physical page of each graph page.
#[derive(Debug, Clone)]
pub struct DeployedGraph {
    pub format: PageFormat,
    pub entries: Vec<Entry>,
    pub seed: u64,
    pub ppns: Vec<u64>,
}

/// What a task cost, for the report.
#[derive(Debug, Clone, Copy, Default)]
pub struct TaskCost {
    /// Weight reads (one sensing of a page each, whole page or column range).
    pub weight_pages: u64,
    /// Weight bytes moved over the channels (whole pages, or a column read's ECC codewords).
    pub weight_bytes: u64,
    pub graph_pages: u64,
    pub npe_cycles: f64,
    pub gse_cycles: f64,
}

fn weighted_index(timing: &[LayerTiming], i: usize) -> usize {
    timing[..i].iter().filter(|t| t.weight_bytes > 0.0).count()
}

/// One image's hash layer: its int32 accumulators and their real values.
pub type HashLayerOut = (Vec<i32>, Vec<f32>);

/// Runs the NPE over `images` (each the model's input size) from `ready`. The weights are read from flash for
/// every image (DLG-x keeps none of them on chip between queries); the first image's reads also return the bytes
/// the int8 executor computes with. Returns when the last image's hash layer is done, and per image the hash
/// layer's int32 accumulators and real values. The clock comes from `params`.
pub fn hash(
    ctx: &mut ExecCtx<'_>,
    m: &DeployedModel,
    npe: UnitHandle,
    params: &CognitiveParams,
    images: &[&[u8]],
    ready: Time,
    cost: &mut TaskCost,
) -> Result<(Time, Vec<HashLayerOut>), Status> {
    let cycle_ns = params.cycle_ns();
    let ps = ctx.geometry().page_size as usize;
    let column = params.weight_reads == "column";
    let mut pages: Vec<Vec<Vec<u8>>> = m.ppns.iter().map(|ch| vec![vec![0u8; ps]; ch.len()]).collect();
    let mut t = ready;
    let mut model: Option<QModel> = None;
    let mut out = Vec::with_capacity(images.len());
    for image in images {
        let mut prev_start = t;
        for (i, lt) in m.timing.iter().enumerate() {
            let (start, done) = if lt.weight_bytes > 0.0 {
                let wi = weighted_index(&m.timing, i);
                let span = if column { m.layout.layers[wi].span(&m.layout.area) } else { whole_pages(m.layout.layers[wi].span(&m.layout.area), ps) };
                let (first, last) = read_layer(ctx, m, span, prev_start, model.is_none().then_some(&mut pages), ps, cost)?;
                let start = t.max(first);
                let computed = ctx.compute(start, npe, 0, lt.compute_cycles);
                let out_ch = m.skeleton.layers[wi].bias.len().max(1) as f64;
                (start, computed.max(last + (lt.compute_cycles / out_ch * cycle_ns) as u64))
            } else {
                (t, ctx.compute(t, npe, 0, lt.cycles))
            };
            cost.npe_cycles += if lt.weight_bytes > 0.0 { lt.compute_cycles } else { lt.cycles };
            prev_start = start;
            t = done;
        }
        if model.is_none() {
            model = Some(m.descriptor.qmodel(Some(gather_tensors(&m.layout, &m.skeleton, &pages))));
        }
        let q = model.as_ref().expect("built from the first image's reads");
        out.push(q.forward(image).map_err(|_| Status::INVALID_FIELD)?);
    }
    Ok((t, out))
}

/// The whole pages a byte span `[start, end)` of a channel touches, as a byte span.
fn whole_pages((start, end): (usize, usize), ps: usize) -> (usize, usize) {
    (start / ps * ps, end.div_ceil(ps) * ps)
}

/// Reads the byte span `[start, end)` of every channel's weight pages (one weighted layer) from `ready`, page by page
/// (a part of a page as a column read; into `pages` when given). Returns when the first row (one read per channel)
/// and the last read are in.
fn read_layer(
    ctx: &mut ExecCtx<'_>,
    m: &DeployedModel,
    (start, end): (usize, usize),
    ready: Time,
    mut pages: Option<&mut Vec<Vec<Vec<u8>>>>,
    ps: usize,
    cost: &mut TaskCost,
) -> Result<(Time, Time), Status> {
    let (mut first, mut last) = (ready, ready);
    let mut buf = Vec::new();
    for idx in start / ps..end.div_ceil(ps) {
        let (lo, hi) = (start.max(idx * ps) - idx * ps, end.min((idx + 1) * ps) - idx * ps);
        for (ch, ppns) in m.ppns.iter().enumerate() {
            buf.resize(if pages.is_some() { hi - lo } else { 0 }, 0);
            let r = ctx.read_page_range(ready, ppns[idx], lo as u64, (hi - lo) as u64, ReadTo::UnitBuffer, &mut buf)?;
            cost.weight_pages += 1;
            cost.weight_bytes += r.moved;
            if idx == start / ps {
                first = first.max(r.done);
            }
            last = last.max(r.done);
            if let Some(p) = pages.as_deref_mut() {
                p[ch][idx][lo..hi].copy_from_slice(&buf);
            }
        }
    }
    Ok((first, last))
}

/// Graph pages read from flash on demand, one after another.
struct FlashPages<'a, 'b> {
    ctx: &'a mut ExecCtx<'b>,
    ppns: &'a [u64],
    t: Time,
    failed: Option<Status>,
}

impl PageSource for FlashPages<'_, '_> {
    fn read(&mut self, page: usize) -> crate::Result<Vec<u8>> {
        let mut buf = vec![0u8; self.ctx.geometry().page_size as usize];
        let ppn = *self.ppns.get(page).ok_or_else(|| CognitiveError::invalid("page", format!("{page} is not a graph page")))?;
        match self.ctx.read_page(self.t, ppn, ReadTo::UnitBuffer, &mut buf) {
            Ok(r) => {
                self.t = r.done;
                Ok(buf)
            }
            Err(s) => {
                self.failed = Some(s);
                Err(CognitiveError::bad_file("graph page", format!("physical page {ppn}: {s}")))
            }
        }
    }
}

/// Searches the top-`t` for `query` on the GSE from `ready`, reading graph pages from flash.
#[allow(clippy::too_many_arguments)]
pub fn search(
    ctx: &mut ExecCtx<'_>,
    g: &DeployedGraph,
    gse_unit: UnitHandle,
    cfg: &SearchConfig,
    neighbour_cycles: f64,
    query: u64,
    t: usize,
    seed: u64,
    ready: Time,
    cost: &mut TaskCost,
) -> Result<(Time, Vec<u32>, SearchStats), Status> {
    let mut src = FlashPages { ctx, ppns: &g.ppns, t: ready, failed: None };
    let found = gse::search(&g.format, &mut src, &g.entries, query, t, cfg, seed);
    let (reads_done, failed) = (src.t, src.failed);
    let (ids, st) = match (found, failed) {
        (Ok(r), _) => r,
        (Err(_), Some(s)) => return Err(s),
        (Err(_), None) => return Err(Status::INVALID_FIELD),
    };
    let cycles = st.neighbour_steps as f64 * neighbour_cycles;
    cost.graph_pages += st.pages_read;
    cost.gse_cycles += cycles;
    Ok((ctx.compute(reads_done, gse_unit, 0, cycles), ids, st))
}
