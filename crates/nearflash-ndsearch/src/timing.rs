//! SearSSD's timing and energy as formulas over one lock-step iteration's allocation (`allocate::LunWork`), with
//! every constant a named parameter (`[ext.ndsearch]` of a preset overrides the defaults below). Flash timings
//! (tR, hard and soft LDPC decode, channel rate) come from the device preset (`FlashTiming`), not from here.
//!
//! Per iteration (NDSearch Sec. IV-V, Algorithm 1):
//! - allocating (Vgenerator + Allocator on 800 MHz logic): `(live x qpt_cycles + pairs x (vgen + alloc cycles)) / f`,
//!   overlapped with the FPGA sort of the previous iteration (the paper's pipelining), so the pair costs
//!   `max(alloc, sort_prev)`;
//! - searching: LUNs in parallel; a LUN issues its multi-plane reads one after another, each `tR + t_decode`, plus
//!   the expected soft decodes (`p_fail x reads x t_soft`); its two MAC groups (one per plane) measure the pairs of
//!   their plane, `ceil(dim / mac_lanes) / macs_per_group` cycles per pair, overlapped with the next read except
//!   for the last page (so `reads x (tR + t_dec) + soft + last page's compute`, [assumed]);
//! - gathering: each channel carries its LUNs' (query, vertex, distance) tuples to the controller;
//! - sorting (FPGA over the private PCIe 3.0 x4 link): tuples in, a bitonic merge of each query's ef-list with its
//!   new candidates (`m log2(m)^2 / 2` compare-exchanges on `sort_lanes` comparators), and the top lists back.

use crate::allocate::LunWork;

nearflash_core::ext_params! {
    /// SearSSD's logic, link and power parameters (canonical units: ns, bytes, B/s, Hz, mW).
    pub struct SearssdParams {
        /// Clock of the Vgenerator, Allocator, LUN accelerators.
        logic_clock: Frequency = 800, "MHz", "NDSearch Sec. VII-A: SearSSD logic synthesised at 800 MHz (32 nm)";
        /// Query Property Table access per live query and iteration (read entry vertex, write back state).
        qpt_cycles: Real = 8, "cycles", "assumed: two DRAM-buffered table accesses per query in the Vgenerator's QP reader";
        /// Vgenerator cycles per (query, neighbour) pair: OFS, NBR and LUN fetchers, pipelined.
        vgen_cycles_per_pair: Real = 2, "cycles", "assumed: three pipelined fetch stages issuing one neighbour per cycle, 2 with buffer conflicts";
        /// Allocator cycles per pair: per-LUN dispatch and address generation from the LUN/BLK arrays.
        alloc_cycles_per_pair: Real = 2, "cycles", "assumed: one dispatch and one address per pair";
        /// MACs per group (one group per plane).
        macs_per_group: Int = 2 in 1..=64, "count", "NDSearch Sec. IV-C: two MAC groups per LUN accelerator, 2 MACs each";
        /// Lanes of one MAC (elements per cycle).
        mac_lanes: Int = 16 in 1..=1024, "count", "assumed: 16-lane MAC (Table II, which would give it, is missing from the text)";
        /// Probability that hard-decision LDPC beside the plane fails and the FTL soft-decodes the page.
        ecc_fail_probability: Real = 0.01 in 0..=1, "ratio", "NDSearch Sec. VII-B: 1% default (swept 1-30%)";
        /// Bytes of one (query id, vertex id, distance) tuple crossing a channel or the FPGA link.
        tuple_bytes: Bytes = 12, "B", "assumed: three 32-bit fields (NDSearch Sec. IV: only query id, candidate ids and distances leave the SSD)";
        /// FPGA kernel clock.
        fpga_clock: Frequency = 250, "MHz", "assumed: typical SmartSSD (KU15P) kernel clock; the paper gives none";
        /// Compare-exchange units of the bitonic sorter working in parallel.
        sort_lanes: Int = 64 in 1..=65536, "count", "assumed: a 64-wide bitonic network stage";
        /// Whether the FPGA merges every query's list with its new candidates in every iteration (the earlier
        /// model) rather than sorting the final lists once per batch while the controller keeps the lists.
        sort_per_iteration: Bool = false, "bool", "NDSearch Algorithm 1 line 12 and Sec. V: BitonicSort runs once, 'when all queries have met the termination condition'; within the iterations the Reduce/Apply operators update each query's list in the Query Property Table";
        /// Allocator-logic cycles to apply one gathered tuple to its query's list (compare with the worst, insert).
        apply_cycles_per_pair: Real = 2, "cycles", "assumed: one comparison with the list's worst and one insertion into the QPT's list (Sec. V Reduce/Apply), pipelined in the Vgenerator/Allocator logic like its fetch stages";
        /// Private FPGA link bandwidth (PCIe 3.0 x4 at 85% efficiency).
        fpga_link: Rate = 3.35, "GB/s", "NDSearch Sec. IV-A: private PCIe 3.0 x4 (3.94 GB/s raw), 0.85 efficiency as the searssd preset's host link";
        /// Batch size (queries in lock-step).
        batch: Int = 2048 in 1..=1048576, "count", "NDSearch Sec. VII-A: one batch of 2048 queries";
        /// The Vgenerator's buffer, which holds the batch's queries and their entry vertices' neighbour lists.
        vgen_buffer: Bytes = 2, "MiB", "NDSearch Table I: Vgen Buffer 2 MB (Query, NBR and Pref portions, Sec. IV-C2)";
        /// Bytes of one neighbour-list entry in the Vgenerator's NBR buffer (neighbour id and its LUN id).
        nbr_entry_bytes: Bytes = 5, "B", "assumed: a 32-bit neighbour id N_ij and a LUN id L_ij of one byte (256 LUNs), Sec. IV-C2";
        /// Whether the pure model reads speculative pages while the LUNs would idle (the controller's gathering and
        /// the next allocating) instead of with the iteration's own pages; the firmware always reads them together.
        speculate_overlap: Bool = false, "bool", "NDSearch Sec. VI-B2, Fig. 12: the speculative Searching stage runs during Gathering and the next Allocating, and is cancelled if unfinished; off: the firmware's booking, the same in the model";
        /// Second-order neighbours speculated per query and iteration (0: off).
        speculate: Int = 0 in 0..=1024, "count", "assumed: the paper does not give the count; swept in Fig. 15";
        /// Table I powers (32 nm): MAC groups (x512).
        p_mac: Power = 1.95, "W", "NDSearch Table I";
        /// Vgenerator buffer 2 MB.
        p_vgen_buffer: Power = 1.71, "W", "NDSearch Table I";
        /// Allocator buffer 6 MB.
        p_alloc_buffer: Power = 4.57, "W", "NDSearch Table I";
        /// Query queues 24 KB x256.
        p_query_queue: Power = 5.84, "W", "NDSearch Table I";
        /// Vaddr queues 3 KB x256.
        p_vaddr_queue: Power = 0.87, "W", "NDSearch Table I";
        /// Output buffers 1 KB x512.
        p_output_buffer: Power = 0.56, "W", "NDSearch Table I";
        /// Hard-decision LDPC x1024.
        p_ldpc: Power = 1.18, "W", "NDSearch Table I";
        /// Control logic.
        p_control: Power = 2.14, "W", "NDSearch Table I";
        /// FPGA (SmartSSD) power.
        p_fpga: Power = 7.5, "W", "NDSearch Sec. VII-D: 7.5 W FPGA, 26.32 W in all";
    }
}

/// Flash timings the device preset supplies (ns, B/s).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlashTiming {
    pub t_read_ns: f64,
    pub t_decode_ns: f64,
    pub t_soft_decode_ns: f64,
    /// One channel's rate.
    pub channel_bytes_per_s: f64,
    pub luns_per_channel: usize,
}

impl FlashTiming {
    /// The searssd preset's values: tR 60 us, hard decode 1 us, soft decode 10 us, 533 MT/s x 8 bit, 8 LUNs per
    /// channel (4 chips x 2 LUNs).
    pub const SEARSSD: FlashTiming = FlashTiming {
        t_read_ns: 60_000.0,
        t_decode_ns: 1_000.0,
        t_soft_decode_ns: 10_000.0,
        channel_bytes_per_s: 533e6,
        luns_per_channel: 8,
    };
}

/// Time of one iteration's parts (ns).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IterationTime {
    pub allocating: f64,
    pub searching: f64,
    pub gathering: f64,
    pub sorting: f64,
    /// Page reads (each plane's page counted) and multi-plane read operations.
    pub page_reads: usize,
    pub read_ops: usize,
    /// Bytes that left the dies over NAND interfaces (tuples here; pages in the baselines) and bytes over the
    /// FPGA link (energy, `baselines::batch_energy_pj`).
    pub nand_io_bytes: f64,
    pub link_bytes: f64,
}

/// Cycles of the bitonic merge of an `ef`-list with `new` candidates.
pub fn bitonic_ops(ef: usize, new: usize) -> f64 {
    // Comparators of a bitonic network over m = ef + new (padded to a power of two): m log2(m)^2 / 2.
    let m = (ef + new).max(2).next_power_of_two() as f64;
    m * m.log2() * m.log2() / 2.0
}

/// The timing of one iteration: `work` from `allocate`, `live` queries, `new_per_query[q]` candidates per live
/// query, `dim` elements per vector, list size `ef`.
pub fn iteration_time(
    p: &SearssdParams,
    f: &FlashTiming,
    work: &[LunWork],
    live: usize,
    new_per_query: &[usize],
    dim: usize,
    ef: usize,
) -> IterationTime {
    let clk = p.logic_clock / 1e9; // cycles per ns
    let pairs: usize = work.iter().map(LunWork::pairs).sum();
    let allocating = (live as f64 * p.qpt_cycles + pairs as f64 * (p.vgen_cycles_per_pair + p.alloc_cycles_per_pair)) / clk;
    let pair_cycles = (dim as f64 / p.mac_lanes as f64).ceil() / p.macs_per_group as f64;
    let mut searching = 0f64;
    let mut per_channel: Vec<usize> = Vec::new();
    let (mut page_reads, mut read_ops) = (0, 0);
    for w in work {
        let ops = w.multiplane_reads();
        read_ops += ops;
        page_reads += w.pages.len();
        let soft = p.ecc_fail_probability * w.pages.len() as f64 * f.t_soft_decode_ns;
        let last_row = w.pages.last().map_or(0, |g| g.page);
        let last: usize = w.pages.iter().filter(|g| g.page == last_row).map(|g| g.pairs.len()).max().unwrap_or(0);
        let t = ops as f64 * (f.t_read_ns + f.t_decode_ns) + soft + last as f64 * pair_cycles / clk;
        searching = searching.max(t);
        let ch = w.lun as usize / f.luns_per_channel.max(1);
        if per_channel.len() <= ch {
            per_channel.resize(ch + 1, 0);
        }
        per_channel[ch] += w.pairs();
    }
    let gathering = per_channel.iter().map(|&n| n as f64 * p.tuple_bytes / f.channel_bytes_per_s * 1e9).fold(0.0, f64::max);
    let tuples = pairs as f64 * p.tuple_bytes;
    if !p.sort_per_iteration {
        // The controller applies the tuples to the queries' lists; the FPGA sorts once, at the end (`final_sort`).
        let gathering = gathering + pairs as f64 * p.apply_cycles_per_pair / clk;
        return IterationTime { allocating, searching, gathering, sorting: 0.0, page_reads, read_ops, nand_io_bytes: tuples, link_bytes: 0.0 };
    }
    let link = |bytes: f64| bytes / p.fpga_link * 1e9;
    let sort_cycles: f64 = new_per_query.iter().map(|&m| bitonic_ops(ef, m)).sum::<f64>() / p.sort_lanes as f64;
    let results = (live * ef) as f64 * 8.0;
    let sorting = link(tuples) + sort_cycles / (p.fpga_clock / 1e9) + link(results);
    IterationTime { allocating, searching, gathering, sorting, page_reads, read_ops, nand_io_bytes: tuples, link_bytes: tuples + results }
}

/// The FPGA's sort of a (sub-)batch's final lists when it sorts once per batch (`sort_per_iteration` off): every
/// query's `ef` (id, distance) tuples over the private link, a bitonic sort of each list, the top `k` back. Time
/// (ns) and link bytes; zero when the FPGA merged every iteration.
pub fn final_sort(p: &SearssdParams, queries: usize, ef: usize, k: usize) -> (f64, f64) {
    if p.sort_per_iteration || queries == 0 {
        return (0.0, 0.0);
    }
    let (lists, top) = ((queries * ef) as f64 * p.tuple_bytes, (queries * k) as f64 * 8.0);
    let cycles = queries as f64 * bitonic_ops(ef, 0) / p.sort_lanes as f64;
    ((lists + top) / p.fpga_link * 1e9 + cycles / (p.fpga_clock / 1e9), lists + top)
}

/// Queries one lock-step (sub-)batch holds: the Vgenerator's buffer keeps each live query's vector and its entry
/// vertex's neighbour list (`max_degree` entries); a larger batch runs as sub-batches one after another (NDSearch
/// Sec. VII-B: past ~4096 "the batch have to be split into two or more sub-batches ... due to the limited
/// resources"). Never more than `batch`.
pub fn sub_batch(p: &SearssdParams, vector_bytes: usize, max_degree: usize) -> usize {
    let per_query = vector_bytes as f64 + max_degree as f64 * p.nbr_entry_bytes;
    ((p.vgen_buffer / per_query.max(1.0)).floor() as usize).clamp(1, p.batch.max(1) as usize)
}

/// Batch time (ns) of a sequence of iterations with allocating overlapped by the previous sort.
pub fn batch_time(its: &[IterationTime]) -> f64 {
    let mut total = 0.0;
    let mut prev_sort = 0.0;
    for t in its {
        total += f64::max(t.allocating, prev_sort) + t.searching + t.gathering;
        prev_sort = t.sorting;
    }
    total + prev_sort
}

/// SearSSD logic + FPGA power (mW) from Table I.
pub fn logic_power_mw(p: &SearssdParams) -> f64 {
    p.p_mac + p.p_vgen_buffer + p.p_alloc_buffer + p.p_query_queue + p.p_vaddr_queue + p.p_output_buffer + p.p_ldpc + p.p_control
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::allocate::{allocate, Pair};
    use crate::graph::Adjacency;
    use crate::luncsr::{Geometry, LunCsr};
    use nearflash_core::config::ExtParams;

    #[test]
    fn table_one_powers_sum_to_the_papers_total() {
        let p = SearssdParams::default();
        assert!((logic_power_mw(&p) / 1e3 - 18.82).abs() < 0.03, "{}", logic_power_mw(&p));
        assert!(((logic_power_mw(&p) + p.p_fpga) / 1e3 - 26.32).abs() < 0.03);
        assert_eq!(p.batch, 2048);
        assert!(SearssdParams::DOCS.iter().all(|d| !d.3.is_empty()));
    }

    #[test]
    fn a_batch_splits_into_what_the_vgen_buffer_holds() {
        let p = SearssdParams { batch: 8192, ..SearssdParams::default() };
        // Fashion-MNIST (784 B uint8, 32 neighbours): 2 MiB / (784 + 32 x 5) B
        assert_eq!(sub_batch(&p, 784, 32), (2.0 * 1048576.0 / 944.0) as usize);
        assert_eq!(sub_batch(&p, 128, 32), (2.0 * 1048576.0 / 288.0) as usize);
        assert_eq!(sub_batch(&SearssdParams::default(), 128, 32), 2048, "never more than the batch");
        assert_eq!(sub_batch(&p, 1 << 30, 32), 1);
    }

    #[test]
    fn more_reads_on_one_lun_take_longer_and_sharing_helps() {
        let g = Geometry { luns: 4, planes_per_lun: 2, blocks_per_plane: 8, pages_per_block: 8, page_bytes: 1024 };
        let mut a = Adjacency::new(1);
        a.resize(2000);
        let l = LunCsr::build(&a, 64, g).unwrap(); // 16 per page
        let p = SearssdParams::default();
        let f = FlashTiming::SEARSSD;
        // 16 queries on one page vs 16 queries on 16 different pages of LUN 0
        let shared: Vec<Pair> = (0..16).map(|q| Pair { query: q, vertex: 3 }).collect();
        let spread: Vec<Pair> = (0..16).map(|q| Pair { query: q, vertex: q * 16 * 8 }).collect();
        let t1 = iteration_time(&p, &f, &allocate(&shared, &l), 16, &[1; 16], 16, 10);
        let t2 = iteration_time(&p, &f, &allocate(&spread, &l), 16, &[1; 16], 16, 10);
        assert_eq!((t1.page_reads, t1.read_ops), (1, 1));
        assert!(t2.searching > 3.0 * t1.searching, "{t1:?} {t2:?}");
        assert!(t1.searching >= f.t_read_ns);
        let total = batch_time(&[t1, t2]);
        assert!(total > t1.searching + t2.searching);
        // the FPGA sorts once per batch by default (Algorithm 1); per iteration only when asked
        assert_eq!(t1.sorting, 0.0);
        let every = SearssdParams { sort_per_iteration: true, ..p.clone() };
        assert!(iteration_time(&every, &f, &allocate(&shared, &l), 16, &[1; 16], 16, 10).sorting > 0.0);
        let (ns, bytes) = final_sort(&p, 16, 10, 5);
        assert!(ns > 0.0 && bytes == 16.0 * 10.0 * 12.0 + 16.0 * 5.0 * 8.0);
        assert_eq!(final_sort(&every, 16, 10, 5), (0.0, 0.0));
        // a higher hard-decode failure rate slows searching
        let worse = SearssdParams { ecc_fail_probability: 0.3, ..p.clone() };
        assert!(iteration_time(&worse, &f, &allocate(&spread, &l), 16, &[1; 16], 16, 10).searching > t2.searching);
    }
}
