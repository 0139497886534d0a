//! The paper's near-data baselines (NDSearch Sec. VII-B, Fig. 13 and 20) as compute-placement variants of
//! SearSSD's timing: the same graph, LUNCSR layout, lock-step trace and allocation (`allocate::LunWork` per
//! iteration), the same flash timings and FPGA sorter; only where the distances are computed, and so which bytes
//! cross which link, changes.
//!
//! - **SearSSD**: distances beside each LUN's page buffers (`timing::iteration_time`); only tuples leave the dies.
//! - **DS-cp** (DeepStore, chip-level accelerators, with dynamic allocating as the paper built it): each chip's
//!   pages leave the die over the chip's own interface (one LUN selected at a time, at the channel's rate) to the
//!   chip's accelerator; the chip's LUNs sense in parallel; tuples cross the channel as SearSSD's do.
//! - **DS-c** (DeepStore, channel-level): every page crosses the shared channel to the channel's accelerator;
//!   tuples stay on the controller.
//! - **SmartSSD-only**: every page crosses its channel and then the private PCIe link to the FPGA, which computes
//!   all distances and sorts.
//!
//! DeepStore's accelerators get SearSSD's MAC budget (`ds_mac_budget` MACs of `mac_lanes` lanes, split evenly over
//! chips or channels: "the same budget with NDSEARCH"). Within a unit the stages (sensing, page transfer, compute)
//! are pipelined: the unit takes its slowest stage's total plus the other stages' time for one page.
//!
//! Energy (Fig. 20, `batch_energy_pj`): Table I powers x busy time as the firmware's units charge them
//! (Vgenerator/Allocator buffers and control x allocating, the distance units x their MACs' busy time, the FPGA x
//! sorting); DeepStore's accelerators, with the same budget, are charged the same powers; the SmartSSD FPGA its power
//! over traversal, distances and sort; every design also pays the SSD's static power over the batch, each page
//! sense, and each byte on the NAND interfaces and the FPGA link (`BaselineParams`, the searssd preset's values).

use serde::Serialize;

use crate::allocate::LunWork;
use crate::timing::{bitonic_ops, FlashTiming, IterationTime, SearssdParams};

nearflash_core::ext_params! {
    /// Baselines' placement, budget and energy parameters (canonical units: Hz, mW, pJ, pJ/B).
    pub struct BaselineParams {
        /// LUNs per flash chip (DS-cp's accelerator serves one chip).
        luns_per_chip: Int = 2 in 1..=64, "count", "NDSearch Sec. IV-C: 32 channels x 4 chips, 256 LUNs, so 2 LUNs per chip (the searssd preset: 4 chips x 2 LUNs per channel)";
        /// MACs shared by all DeepStore accelerators (each of SearSSD's `mac_lanes` lanes).
        ds_mac_budget: Int = 1024 in 1..=1048576, "count", "NDSearch Sec. VII-A: DeepStore built 'using the same budget with NDSEARCH'; Table I: 512 MAC groups x 2 MACs";
        /// Clock of DeepStore's accelerators.
        ds_clock: Frequency = 800, "MHz", "assumed: the same 32 nm / 800 MHz logic as SearSSD (same budget; DeepStore's own clock differs)";
        /// Element MACs per FPGA cycle for the SmartSSD-only design's distances.
        smartssd_lanes: Int = 256 in 1..=65536, "count", "assumed: 256 8-bit MACs per cycle at fpga_clock (the KU15P has 1,968 DSP slices; the sorter and the link logic take the rest)";
        /// The SSD's own power (controller cores, DRAM, NAND background) while a batch runs, reads excluded.
        p_ssd: Power = 154, "mW", "the searssd preset's energy.ssd_static (iSSD Fig. 10: SSD DRAM 154 mW; NDSearch gives none), charged alike to every in-SSD design";
        /// Energy of one page sense (tR).
        e_page_sense: Energy = 6.62, "uJ", "the searssd preset's energy.nand_read_page (iSSD Fig. 10: 3.31 uJ per 8 KiB, scaled to 16 KiB)";
        /// Energy per byte on a NAND interface (die to chip accelerator, or over the channel).
        e_nand_io: EnergyPerByte = 50, "pJ/B", "the searssd preset's energy.channel_per_byte (assumed there: NAND I/O at 1.2-1.8 V)";
        /// Energy per byte on the private PCIe 3.0 x4 link to the FPGA.
        e_link: EnergyPerByte = 40, "pJ/B", "assumed: ~5 pJ/bit for a PCIe 3.0 SerDes link";
        /// CPU power per core running the host search (energy of the CPU baseline).
        cpu_power_per_core: Power = 11.1, "W", "Intel Xeon Gold 6254 (the paper's CPU): 200 W TDP / 18 cores; our CPU runs are charged per thread used";
    }
}

/// Where the distances are computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Design {
    SearSsd,
    DsCp,
    DsC,
    SmartSsdOnly,
}

impl Design {
    pub const ALL: [Design; 4] = [Design::SearSsd, Design::DsCp, Design::DsC, Design::SmartSsdOnly];

    pub fn name(self) -> &'static str {
        match self {
            Design::SearSsd => "searssd",
            Design::DsCp => "ds-cp",
            Design::DsC => "ds-c",
            Design::SmartSsdOnly => "smartssd-only",
        }
    }

    pub fn parse(s: &str) -> Option<Design> {
        Design::ALL.into_iter().find(|d| d.name() == s)
    }
}

/// A unit's pipelined stages `(total, one page)`: the slowest stage's total plus the others' time for one page.
fn pipelined(stages: &[(f64, f64)]) -> f64 {
    let Some(slow) = (0..stages.len()).max_by(|&a, &b| stages[a].0.total_cmp(&stages[b].0)) else { return 0.0 };
    if stages[slow].0 <= 0.0 {
        return 0.0;
    }
    stages[slow].0 + stages.iter().enumerate().filter(|&(i, _)| i != slow).map(|(_, s)| s.1).sum::<f64>()
}

/// One LUN's sense chain: its multi-plane reads of `tR + hard decode` plus the expected soft decodes.
fn sense_ns(p: &SearssdParams, f: &FlashTiming, w: &LunWork) -> f64 {
    w.multiplane_reads() as f64 * (f.t_read_ns + f.t_decode_ns) + p.ecc_fail_probability * w.pages.len() as f64 * f.t_soft_decode_ns
}

/// Work of a group of LUNs (a chip, a channel or the whole SSD): slowest LUN's sense chain, pages, pairs.
#[derive(Default, Clone, Copy)]
struct Group {
    sense: f64,
    pages: usize,
    pairs: usize,
}

fn groups(p: &SearssdParams, f: &FlashTiming, work: &[LunWork], luns_per_group: usize) -> Vec<Group> {
    let mut out: Vec<Group> = Vec::new();
    for w in work {
        let g = w.lun as usize / luns_per_group.max(1);
        if out.len() <= g {
            out.resize(g + 1, Group::default());
        }
        out[g].sense = out[g].sense.max(sense_ns(p, f, w));
        out[g].pages += w.pages.len();
        out[g].pairs += w.pairs();
    }
    out
}

/// The timing of one iteration of `design` (see the module documentation); `luns` and `page_bytes` are the
/// flash geometry's. SearSSD's is `timing::iteration_time`.
#[allow(clippy::too_many_arguments)]
pub fn iteration_time(
    design: Design,
    p: &SearssdParams,
    b: &BaselineParams,
    f: &FlashTiming,
    work: &[LunWork],
    live: usize,
    new_per_query: &[usize],
    dim: usize,
    ef: usize,
    luns: usize,
    page_bytes: usize,
) -> IterationTime {
    let base = crate::timing::iteration_time(p, f, work, live, new_per_query, dim, ef);
    if design == Design::SearSsd {
        return base;
    }
    let page = page_bytes as f64;
    let ns_per_byte = 1e9 / f.channel_bytes_per_s;
    let page_xfer = page * ns_per_byte;
    let first_sense = f.t_read_ns + f.t_decode_ns;
    let pages: usize = work.iter().map(|w| w.pages.len()).sum();
    let pairs: usize = work.iter().map(LunWork::pairs).sum();
    let ds_cycles = (dim as f64 / p.mac_lanes as f64).ceil(); // MAC cycles per pair on one MAC
    let link = |bytes: f64| bytes / p.fpga_link * 1e9;
    let sort = new_per_query.iter().map(|&m| bitonic_ops(ef, m)).sum::<f64>() / p.sort_lanes as f64 / (p.fpga_clock / 1e9);
    let results = (live * ef) as f64 * 8.0;
    let ds_unit = |luns_per_unit: usize| {
        let units = luns.div_ceil(luns_per_unit).max(1);
        let macs = (b.ds_mac_budget as f64 / units as f64).max(1.0);
        let per_pair = ds_cycles / macs / (b.ds_clock / 1e9);
        groups(p, f, work, luns_per_unit)
            .iter()
            .filter(|g| g.pages > 0)
            .map(|g| {
                let compute = g.pairs as f64 * per_pair;
                pipelined(&[(g.sense, first_sense), (g.pages as f64 * page_xfer, page_xfer), (compute, compute / g.pages as f64)])
            })
            .fold(0.0, f64::max)
    };
    let mut t = IterationTime { allocating: base.allocating, page_reads: base.page_reads, read_ops: base.read_ops, ..Default::default() };
    let tuples = pairs as f64 * p.tuple_bytes;
    match design {
        Design::SearSsd => unreachable!(),
        Design::DsCp => {
            t.searching = ds_unit(b.luns_per_chip as usize);
            t.gathering = base.gathering;
            t.sorting = base.sorting;
            t.nand_io_bytes = pages as f64 * page + tuples;
            t.link_bytes = base.link_bytes;
        }
        Design::DsC => {
            t.searching = ds_unit(f.luns_per_channel);
            t.sorting = base.sorting;
            t.nand_io_bytes = pages as f64 * page;
            t.link_bytes = base.link_bytes;
        }
        Design::SmartSsdOnly => {
            let chans = groups(p, f, work, f.luns_per_channel);
            let sense = chans.iter().map(|g| g.sense).fold(0.0, f64::max);
            let channel = chans.iter().map(|g| g.pages as f64 * page_xfer).fold(0.0, f64::max);
            let fpga = pairs as f64 * (dim as f64 / b.smartssd_lanes as f64).ceil() / (p.fpga_clock / 1e9);
            let per_page = |x: f64| if pages > 0 { x / pages as f64 } else { 0.0 };
            t.searching = pipelined(&[
                (sense, first_sense),
                (channel, page_xfer),
                (link(pages as f64 * page), link(page)),
                (fpga, per_page(fpga)),
            ]);
            t.sorting = sort + link(results);
            t.nand_io_bytes = pages as f64 * page;
            t.link_bytes = pages as f64 * page + results;
        }
    }
    t
}

/// What a batch did, for its energy: stage times (ns), page senses, distances computed, bytes moved.
#[derive(Clone, Copy, Debug, Default)]
pub struct BatchWork {
    pub allocating_ns: f64,
    pub sorting_ns: f64,
    pub total_ns: f64,
    pub page_reads: usize,
    pub pairs: usize,
    pub dim: usize,
    /// Planes of the flash (SearSSD has one MAC group per plane).
    pub planes: usize,
    pub nand_io_bytes: f64,
    pub link_bytes: f64,
}

/// Energy of a batch (pJ). Logic is charged per busy time, as the firmware's units are: the Vgenerator/Allocator
/// buffers and control over allocating, the distance units (Table I's MACs, queues, output buffers and LDPC) over
/// their MACs' busy time (the same work on the same MAC budget for SearSSD and DeepStore), the FPGA over the sort
/// (and, SmartSSD-only, its distances); plus the SSD's static power over the batch, page senses and bytes moved.
pub fn batch_energy_pj(design: Design, p: &SearssdParams, b: &BaselineParams, w: &BatchWork) -> f64 {
    // mW x ns = pJ
    let fpga_ns_per_cycle = 1e9 / p.fpga_clock;
    let logic = match design {
        Design::SmartSsdOnly => {
            let distances = w.pairs as f64 * (w.dim as f64 / b.smartssd_lanes as f64).ceil() * fpga_ns_per_cycle;
            p.p_fpga * (w.allocating_ns + distances + w.sorting_ns)
        }
        _ => {
            let (macs, clock) = match design {
                Design::SearSsd => ((p.macs_per_group as usize * w.planes) as f64, p.logic_clock),
                _ => (b.ds_mac_budget as f64, b.ds_clock),
            };
            let mac_busy_ns = w.pairs as f64 * (w.dim as f64 / p.mac_lanes as f64).ceil() / macs.max(1.0) * 1e9 / clock;
            (p.p_vgen_buffer + p.p_alloc_buffer + p.p_control) * w.allocating_ns
                + (p.p_mac + p.p_query_queue + p.p_vaddr_queue + p.p_output_buffer + p.p_ldpc) * mac_busy_ns
                + p.p_fpga * w.sorting_ns
        }
    };
    logic + b.p_ssd * w.total_ns + b.e_page_sense * w.page_reads as f64 + b.e_nand_io * w.nand_io_bytes + b.e_link * w.link_bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::allocate::{allocate, Pair};
    use crate::graph::Adjacency;
    use crate::luncsr::{Geometry, LunCsr};
    use nearflash_core::config::ExtParams;

    fn work(pairs: &[Pair]) -> (Vec<LunWork>, Geometry) {
        let g = Geometry { luns: 64, planes_per_lun: 2, blocks_per_plane: 8, pages_per_block: 8, page_bytes: 4096 }; // 8 channels: more than the FPGA link
        let mut a = Adjacency::new(1);
        a.resize(4000);
        let l = LunCsr::build(&a, 128, g).unwrap(); // 32 per page
        (allocate(pairs, &l), g)
    }

    #[test]
    fn every_parameter_has_a_unit_and_a_source_and_names_parse() {
        assert!(BaselineParams::DOCS.iter().all(|d| !d.2.is_empty() && !d.3.is_empty()));
        for d in Design::ALL {
            assert_eq!(Design::parse(d.name()), Some(d));
        }
        assert_eq!(Design::parse("deepstore"), None);
    }

    #[test]
    fn moving_pages_costs_more_than_moving_tuples() {
        // 64 queries over pages spread across all LUNs
        let pairs: Vec<Pair> = (0..64u32).flat_map(|q| (0..8).map(move |i| Pair { query: q, vertex: (q * 61 + i * 97) % 4000 })).collect();
        let (w, g) = work(&pairs);
        let (p, b, f) = (SearssdParams::default(), BaselineParams::default(), FlashTiming::SEARSSD);
        let npq = vec![8; 64];
        let t = |d| iteration_time(d, &p, &b, &f, &w, 64, &npq, 128, 32, g.luns, g.page_bytes);
        let (s, cp, c, smart) = (t(Design::SearSsd), t(Design::DsCp), t(Design::DsC), t(Design::SmartSsdOnly));
        let total = |x: IterationTime| x.allocating + x.searching + x.gathering + x.sorting;
        assert!(total(s) < total(cp), "{s:?} {cp:?}");
        assert!(total(cp) < total(c), "{cp:?} {c:?}");
        assert!(total(c) < total(smart), "{c:?} {smart:?}");
        assert!(s.nand_io_bytes < cp.nand_io_bytes && smart.link_bytes > s.link_bytes);
        // all read the same pages
        assert!([cp, c, smart].iter().all(|x| x.page_reads == s.page_reads));
        let e = |d, x: IterationTime| {
            let w = BatchWork {
                allocating_ns: x.allocating, sorting_ns: x.sorting, total_ns: total(x), page_reads: x.page_reads,
                pairs: pairs.len(), dim: 128, planes: 2 * g.luns, nand_io_bytes: x.nand_io_bytes, link_bytes: x.link_bytes };
            batch_energy_pj(d, &p, &b, &w)
        };
        assert!(e(Design::SearSsd, s) < e(Design::DsCp, cp) && e(Design::DsCp, cp) < e(Design::SmartSsdOnly, smart));
    }

    #[test]
    fn pipelining_takes_the_slowest_stage_plus_the_others_first_page() {
        assert_eq!(pipelined(&[(10.0, 1.0), (30.0, 3.0), (5.0, 0.5)]), 31.5);
        assert_eq!(pipelined(&[]), 0.0);
        assert_eq!(pipelined(&[(0.0, 0.0)]), 0.0);
    }
}
