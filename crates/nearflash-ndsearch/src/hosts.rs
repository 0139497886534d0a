//! The host baselines NDSearch's comparisons divide by, costed from counted work: the paper's CPU (2 x Intel Xeon
//! Gold 6254) and GPU (NVIDIA TITAN RTX), each running the search a practitioner would run on it - the graph search
//! (hnswlib / cuhnsw: the same best-first search over the same graph, so the lock-step trace's distances and
//! expansions are its work) or brute force (FAISS's flat index: a BLAS matrix product and a top-k selection),
//! whichever is faster for the batch. Nothing here reads a clock: the same trace gives the same times on any
//! machine under any load (issue 22), and every per-operation cost is a named parameter with its unit and source.
//!
//! CPU graph search (per batch): each distance streams its float32 vector (hnswlib and FAISS's HNSW store
//! float32) through AVX-512 - `ceil(dim / lanes)` vector steps plus a fixed overhead - and each expansion pops the
//! candidate heap and checks every listed neighbour against the visited array; the cycles of a step, a distance and
//! an expansion are hnswlib's, measured once on a reference machine (`benches/ndsearch_cpu_costs.py`) with its
//! data in cache, and taken to hold for the 6254's core (same ISA, similar core). The vectors and rows a search touches miss the last
//! level cache in proportion to how much of the index does not fit it (uniform access, [assumed]); missed lines
//! come from DRAM at one core's fill-buffer-bound rate, and each expansion's neighbour row is a dependent miss
//! (one DRAM latency). Queries run one per core in parallel; the sockets' DRAM bandwidth caps the whole.
//!
//! GPU graph search (cuhnsw: one thread block per query, candidate and result lists in shared memory): a query's
//! expansions are a dependent chain - the neighbour row, then the neighbours' vectors (two global-memory
//! latencies), the warp's distances and the serial heap insertions - and the queries run in waves of the resident
//! blocks; the memory bandwidth and FP32 peak bound the whole. Queries in and results out cross PCIe 3.0 x16.
//!
//! Brute force (both): `2 nq n dim` FLOPs at a share of the FMA peak, plus the top-k selection's pass over the
//! `nq x n` distances.

use serde::Serialize;

nearflash_core::ext_params! {
    /// The paper's host CPU and GPU, per-operation costs (canonical units: ns, bytes, B/s, Hz, mW).
    pub struct HostParams {
        /// CPU sockets.
        cpu_sockets: Int = 2 in 1..=64, "count", "NDSearch Sec. VII-A: 2 Intel Xeon Gold 6254 CPUs";
        /// Cores per socket.
        cpu_cores_per_socket: Int = 18 in 1..=1024, "count", "Intel ARK, Xeon Gold 6254: 18 cores";
        /// Core clock.
        cpu_clock: Frequency = 3.1, "GHz", "NDSearch Sec. VII-A: 3.1 GHz (Intel ARK, Xeon Gold 6254: base frequency 3.10 GHz)";
        /// float32 lanes of one SIMD vector.
        cpu_simd_lanes: Int = 16 in 1..=64, "count", "Intel ARK, Xeon Gold 6254: Intel AVX-512 (16 float32 lanes per 512-bit register)";
        /// SIMD FMA units per core.
        cpu_fma_units: Int = 2 in 1..=8, "count", "Intel ARK, Xeon Gold 6254: '# of AVX-512 FMA Units: 2'";
        /// Cycles of one 16-lane step of a distance (loads, subtract, FMA) on vectors in the caches.
        cpu_step_cycles: Real = 10.7, "cycles", "measured by benches/ndsearch_cpu_costs.py on 2026-11-28: hnswlib 0.8, one thread, CPU time over counted work (sift-like, glove-100-like, Fashion-MNIST, 20k float32 vectors, ef 16-64, least squares, worst fit error 17%), a 2-vCPU VM of an AVX-512 Intel Xeon at 2.3 GHz nominal shared with other jobs (load ~12); the reference machine's per-cycle costs applied to the 6254's AVX-512 core";
        /// Last-level cache per socket.
        cpu_llc_per_socket: Bytes = 24.75, "MiB", "Intel ARK, Xeon Gold 6254: 24.75 MB cache";
        /// Peak DRAM bandwidth per socket.
        cpu_dram_bandwidth: Rate = 140.8, "GB/s", "Intel ARK, Xeon Gold 6254: 6 memory channels of DDR4-2933 (6 x 2933 MT/s x 8 B), as the searssd preset's host.dram_bandwidth";
        /// Share of the peak DRAM bandwidth a streaming load sustains.
        cpu_dram_efficiency: Real = 0.8 in 0..=1, "ratio", "assumed: STREAM-class kernels sustain ~75-85% of a DDR4 server's peak";
        /// Latency of a load that misses every cache.
        cpu_dram_latency: Time = 90, "ns", "assumed: idle local DRAM latency of a 2-socket Skylake-SP/Cascade Lake server, 80-95 ns in memory-latency-checker reports";
        /// Cache-line misses one core keeps in flight.
        cpu_fill_buffers: Int = 12 in 1..=256, "count", "assumed: 12 L1D fill buffers per Skylake-SP core (Intel's optimization manual), so one core streams at most 12 x 64 B per DRAM latency";
        /// Fixed cycles of one distance besides its SIMD steps.
        cpu_distance_overhead: Real = 87.7, "cycles", "measured by benches/ndsearch_cpu_costs.py on 2026-11-28 (as cpu_step_cycles): the call, the horizontal sum, the comparison with the result list's worst and the heap pushes of accepted candidates";
        /// Cycles of one expansion besides its neighbours' distances.
        cpu_hop_cycles: Real = 403, "cycles", "measured by benches/ndsearch_cpu_costs.py on 2026-11-28 (as cpu_step_cycles): the candidate-heap pop, reading the neighbour row, the visited check of each neighbour and the prefetches";
        /// Share of the FMA peak a BLAS SGEMM sustains (FAISS's flat search).
        cpu_gemm_efficiency: Real = 0.7 in 0..=1, "ratio", "assumed: MKL/OpenBLAS SGEMM on large products reaches 70-90% of AVX-512 peak; the lower end for the all-core AVX-512 clock";
        /// Cycles per distance of the flat search's top-k selection.
        cpu_select_cycles: Real = 2, "cycles", "assumed: FAISS compares each distance with its result heap's top; updates are rare after the first k";
        /// Power of one socket under load.
        cpu_power_per_socket: Power = 200, "W", "Intel ARK, Xeon Gold 6254: TDP 200 W";
        /// Streaming multiprocessors.
        gpu_sms: Int = 72 in 1..=1024, "count", "NVIDIA TITAN RTX (TU102): 72 SMs, 4,608 CUDA cores";
        /// FP32 operations per SM per cycle.
        gpu_fp32_per_sm_cycle: Real = 128, "ops/cycle", "NVIDIA Turing SM: 64 FP32 cores x 2 (FMA); 4,608 x 2 x 1.77 GHz = 16.3 TFLOPS, NVIDIA's figure for the TITAN RTX";
        /// GPU boost clock.
        gpu_clock: Frequency = 1.77, "GHz", "NVIDIA TITAN RTX: boost clock 1,770 MHz";
        /// Memory bandwidth.
        gpu_memory_bandwidth: Rate = 672, "GB/s", "NVIDIA TITAN RTX: 24 GB GDDR6, 672 GB/s";
        /// Share of the memory bandwidth a streaming kernel sustains.
        gpu_memory_efficiency: Real = 0.8 in 0..=1, "ratio", "assumed: ~80% of GDDR6 peak for coalesced streams";
        /// Latency of a dependent global-memory load.
        gpu_memory_latency: Time = 500, "ns", "assumed: ~500-600 core cycles per dependent global load on Turing in microbenchmark studies, at ~1.5-1.8 GHz (L2 hits are faster; cuhnsw's rows and vectors are scattered)";
        /// L2 cache.
        gpu_l2: Bytes = 6, "MiB", "NVIDIA Turing TU102: 6 MB L2";
        /// Query blocks resident per SM.
        gpu_queries_per_sm: Int = 16 in 1..=64, "count", "assumed: cuhnsw runs one 32-thread block per query; shared memory for its ef-long candidate and result lists keeps ~16 resident per SM";
        /// Cycles of one level of a shared-memory heap insertion.
        gpu_heap_level_cycles: Real = 30, "cycles", "assumed: one dependent shared-memory load and store (~30 cycles on Turing) per heap level; cuhnsw inserts each neighbour serially, log2(ef) levels";
        /// Share of the FP32 peak a cuBLAS SGEMM sustains (FAISS's GPU flat search).
        gpu_gemm_efficiency: Real = 0.7 in 0..=1, "ratio", "assumed: cuBLAS SGEMM on large products reaches 70-85% of FP32 peak";
        /// Host-GPU copies.
        gpu_pcie: Rate = 12, "GB/s", "assumed: PCIe 3.0 x16 (15.75 GB/s raw) as pinned cudaMemcpy sustains it";
        /// Launches and synchronisation of one batch.
        gpu_launch: Time = 10, "us", "assumed: a few kernel launches and a synchronisation per batch";
        /// Board power under load.
        gpu_power: Power = 280, "W", "NVIDIA TITAN RTX: 280 W total board power";
    }
}

/// The work a host search of one batch does, counted from the lock-step trace (the host search's own).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct HostWork {
    pub queries: usize,
    /// Layer-0 distances (every distance the host search measures, speculation aside).
    pub distances: usize,
    /// Distances of the HNSW upper-layer descent to each query's layer-0 entry.
    pub upper_distances: usize,
    /// Expansions (one popped vertex, its neighbour row read) over all queries, and the longest query's.
    pub hops: usize,
    pub max_hops: usize,
    pub dim: usize,
    /// Vectors in the index and the layer-0 row capacity (ids per row).
    pub n: usize,
    pub row_cap: usize,
    pub k: usize,
    pub ef: usize,
}

/// Costed times (ns), the choice each processor's practitioner makes, and energy (J).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct HostCosts {
    pub cpu_graph_ns: f64,
    pub cpu_flat_ns: f64,
    /// The faster of the two (what a practitioner runs for this batch): `"graph"` or `"flat"`.
    pub cpu_ns: f64,
    pub cpu_choice: &'static str,
    pub cpu_qps: f64,
    pub cpu_energy_j: f64,
    pub cpu_queries_per_joule: f64,
    /// Share of the graph search's vectors and rows that miss the last-level cache, and its DRAM bytes.
    pub cpu_llc_miss: f64,
    pub cpu_dram_bytes: f64,
    pub gpu_graph_ns: f64,
    pub gpu_flat_ns: f64,
    pub gpu_ns: f64,
    pub gpu_choice: &'static str,
    pub gpu_qps: f64,
    pub gpu_energy_j: f64,
    pub gpu_queries_per_joule: f64,
}

const LINE: f64 = 64.0;
/// Bytes of one float32 element (hnswlib, FAISS's HNSWFlat and cuhnsw store float32).
const F32: f64 = 4.0;

fn lines(bytes: f64) -> f64 {
    (bytes / LINE).ceil() * LINE
}

/// Share of uniformly spread accesses to `working_set` bytes that miss a `cache`-byte cache.
fn miss_share(cache: f64, working_set: f64) -> f64 {
    if working_set <= 0.0 {
        return 0.0;
    }
    (1.0 - cache / working_set).clamp(0.0, 1.0)
}

fn flat_flops(w: &HostWork) -> f64 {
    2.0 * w.queries as f64 * w.n as f64 * w.dim as f64
}

/// The CPU's graph search of the batch (ns), its LLC miss share and DRAM bytes.
pub fn cpu_graph(p: &HostParams, w: &HostWork) -> (f64, f64, f64) {
    let (core_ns, miss, dram) = cpu_graph_core(p, w);
    let cores = (p.cpu_sockets * p.cpu_cores_per_socket) as usize;
    let parallel = core_ns / w.queries.clamp(1, cores) as f64;
    let bandwidth = dram / (p.cpu_sockets as f64 * p.cpu_dram_bandwidth * p.cpu_dram_efficiency / 1e9);
    (parallel.max(bandwidth), miss, dram)
}

/// The CPU time of the batch's graph search summed over the cores that run it (ns: what it takes from a host's
/// cores, before it is spread over them), its LLC miss share and DRAM bytes.
pub fn cpu_graph_core(p: &HostParams, w: &HostWork) -> (f64, f64, f64) {
    let vec_bytes = w.dim as f64 * F32;
    let row_bytes = 4.0 * (w.row_cap as f64 + 1.0);
    let miss = miss_share(p.cpu_llc_per_socket, w.n as f64 * (vec_bytes + row_bytes));
    let dists = (w.distances + w.upper_distances) as f64;
    let hops = w.hops as f64;
    let cycles = dists * ((w.dim as f64 / p.cpu_simd_lanes as f64).ceil() * p.cpu_step_cycles + p.cpu_distance_overhead)
        + hops * p.cpu_hop_cycles;
    let dram = miss * (dists * lines(vec_bytes) + hops * lines(row_bytes));
    let core_bw = p.cpu_fill_buffers as f64 * LINE / p.cpu_dram_latency; // bytes per ns
    let core_ns = (cycles / (p.cpu_clock / 1e9)).max(dram / core_bw) + miss * hops * p.cpu_dram_latency;
    (core_ns, miss, dram)
}

/// The CPU's brute-force search of the batch (ns): SGEMM plus the top-k pass, or the base vectors' stream.
pub fn cpu_flat(p: &HostParams, w: &HostWork) -> f64 {
    let cores = (p.cpu_sockets * p.cpu_cores_per_socket) as f64;
    let hz = p.cpu_clock / 1e9;
    let peak = cores * hz * p.cpu_fma_units as f64 * p.cpu_simd_lanes as f64 * 2.0; // FLOP per ns
    let compute = flat_flops(w) / (peak * p.cpu_gemm_efficiency);
    let select = w.queries as f64 * w.n as f64 * p.cpu_select_cycles / (cores * hz);
    // FAISS multiplies in blocks of 4,096 queries: the base streams from DRAM once per block.
    let stream = w.n as f64 * w.dim as f64 * F32 * (w.queries as f64 / 4096.0).ceil()
        / (p.cpu_sockets as f64 * p.cpu_dram_bandwidth * p.cpu_dram_efficiency / 1e9);
    (compute + select).max(stream)
}

/// Queries in and results out over PCIe, plus the launches (ns).
fn gpu_fixed(p: &HostParams, w: &HostWork) -> f64 {
    let bytes = w.queries as f64 * (w.dim as f64 * F32 + w.k as f64 * 12.0);
    p.gpu_launch + bytes / (p.gpu_pcie / 1e9)
}

/// The GPU's graph search of the batch (cuhnsw-like, ns).
pub fn gpu_graph(p: &HostParams, w: &HostWork) -> f64 {
    let hz = p.gpu_clock / 1e9;
    let vec_bytes = w.dim as f64 * F32;
    let row_bytes = 4.0 * (w.row_cap as f64 + 1.0);
    let miss = miss_share(p.gpu_l2, w.n as f64 * (vec_bytes + row_bytes));
    let dists = (w.distances + w.upper_distances) as f64;
    let hops = w.hops.max(1) as f64;
    // One query's expansion: its row, then its neighbours' vectors (two dependent loads), then per neighbour the
    // warp's distance (dim / 32 FMAs per thread and a 5-step shuffle reduction) and the serial heap insertion.
    let per_neighbour = (w.dim as f64 / 32.0).ceil() + 5.0 + (w.ef.max(2) as f64).log2() * p.gpu_heap_level_cycles;
    let hop_ns = 2.0 * p.gpu_memory_latency + dists / hops * per_neighbour / hz;
    let resident = (p.gpu_sms * p.gpu_queries_per_sm) as usize;
    let waves = w.queries.div_ceil(resident.max(1)).max(1) as f64;
    let latency = waves * w.max_hops as f64 * hop_ns;
    let bytes = miss * (dists * vec_bytes + hops * row_bytes);
    let bandwidth = bytes / (p.gpu_memory_bandwidth * p.gpu_memory_efficiency / 1e9);
    let compute = dists * 2.0 * w.dim as f64 / (p.gpu_sms as f64 * p.gpu_fp32_per_sm_cycle * hz);
    gpu_fixed(p, w) + latency.max(bandwidth).max(compute)
}

/// The GPU's brute-force search of the batch (FAISS GPU flat, ns): SGEMM, the distances written and read once by
/// the k-selection.
pub fn gpu_flat(p: &HostParams, w: &HostWork) -> f64 {
    let hz = p.gpu_clock / 1e9;
    let compute = flat_flops(w) / (p.gpu_sms as f64 * p.gpu_fp32_per_sm_cycle * hz * p.gpu_gemm_efficiency);
    let select = 2.0 * w.queries as f64 * w.n as f64 * F32 / (p.gpu_memory_bandwidth * p.gpu_memory_efficiency / 1e9);
    gpu_fixed(p, w) + compute + select
}

/// Every host baseline of the batch, the faster search on each processor, and its energy (power x time).
pub fn costs(p: &HostParams, w: &HostWork) -> HostCosts {
    let (cpu_graph_ns, cpu_llc_miss, cpu_dram_bytes) = cpu_graph(p, w);
    let cpu_flat_ns = cpu_flat(p, w);
    let (gpu_graph_ns, gpu_flat_ns) = (gpu_graph(p, w), gpu_flat(p, w));
    let pick = |g: f64, f: f64| if f < g { (f, "flat") } else { (g, "graph") };
    let (cpu_ns, cpu_choice) = pick(cpu_graph_ns, cpu_flat_ns);
    let (gpu_ns, gpu_choice) = pick(gpu_graph_ns, gpu_flat_ns);
    let q = w.queries as f64;
    let per_s = |ns: f64| if ns > 0.0 { q / (ns * 1e-9) } else { 0.0 };
    // mW x ns = pJ
    let cpu_energy_j = p.cpu_sockets as f64 * p.cpu_power_per_socket * cpu_ns * 1e-12;
    let gpu_energy_j = p.gpu_power * gpu_ns * 1e-12;
    let per_j = |j: f64| if j > 0.0 { q / j } else { 0.0 };
    HostCosts {
        cpu_graph_ns,
        cpu_flat_ns,
        cpu_ns,
        cpu_choice,
        cpu_qps: per_s(cpu_ns),
        cpu_energy_j,
        cpu_queries_per_joule: per_j(cpu_energy_j),
        cpu_llc_miss,
        cpu_dram_bytes,
        gpu_graph_ns,
        gpu_flat_ns,
        gpu_ns,
        gpu_choice,
        gpu_qps: per_s(gpu_ns),
        gpu_energy_j,
        gpu_queries_per_joule: per_j(gpu_energy_j),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nearflash_core::config::ExtParams;

    fn work(n: usize, dim: usize, distances: usize) -> HostWork {
        HostWork { queries: 2048, distances, upper_distances: 2048 * 4, hops: distances / 20, max_hops: 80, dim, n, row_cap: 32, k: 10, ef: 32 }
    }

    #[test]
    fn every_parameter_has_a_unit_and_a_source() {
        assert!(HostParams::DOCS.iter().all(|d| !d.2.is_empty() && !d.3.is_empty()));
        let p = HostParams::default();
        let peak: f64 = 36.0 * 3.1 * 2.0 * 16.0 * 2.0; // GFLOP/s: 2 sockets x 18 cores x 3.1 GHz x 2 FMA x 16 lanes x 2
        assert!((peak - 7142.4).abs() < 1e-6 && p.cpu_clock == 3.1e9);
        assert!((p.gpu_sms as f64 * p.gpu_fp32_per_sm_cycle * p.gpu_clock / 1e12 - 16.3).abs() < 0.05, "NVIDIA's 16.3 TFLOPS");
    }

    #[test]
    fn costs_follow_the_work_and_the_choice_is_the_faster() {
        let p = HostParams::default();
        let small = costs(&p, &work(20_000, 784, 2048 * 1000));
        let more = costs(&p, &work(20_000, 784, 2048 * 2000));
        assert!(more.cpu_graph_ns > 1.8 * small.cpu_graph_ns && more.gpu_graph_ns > small.gpu_graph_ns);
        assert_eq!(small.cpu_ns, small.cpu_graph_ns.min(small.cpu_flat_ns));
        assert_eq!(small.gpu_ns, small.gpu_graph_ns.min(small.gpu_flat_ns));
        // brute force grows with n, the graph search hardly: at 10M vectors the graph search wins on both
        let big = costs(&p, &work(10_000_000, 128, 2048 * 1000));
        assert_eq!((big.cpu_choice, big.gpu_choice), ("graph", "graph"));
        assert!(big.cpu_llc_miss > 0.9 && small.cpu_llc_miss < 0.7);
        // a set that fits the cache misses nothing
        assert_eq!(cpu_graph(&p, &work(1000, 128, 2048 * 100)).1, 0.0);
        // energy is power x time
        assert!((small.cpu_energy_j - 400.0 * small.cpu_ns * 1e-9).abs() < 1e-12);
        // deterministic: the same work, the same numbers
        assert_eq!(format!("{:?}", costs(&p, &work(20_000, 784, 2048 * 1000))), format!("{small:?}"));
    }

    #[test]
    fn the_core_time_is_the_batch_before_it_is_spread_over_the_cores() {
        let p = HostParams::default();
        let w = work(1000, 128, 2048 * 100); // fits the cache: no DRAM term
        let (core, miss, _) = cpu_graph_core(&p, &w);
        let cycles = (w.distances + w.upper_distances) as f64 * (8.0 * p.cpu_step_cycles + p.cpu_distance_overhead)
            + w.hops as f64 * p.cpu_hop_cycles;
        assert_eq!(miss, 0.0);
        assert!((core - cycles / 3.1).abs() < 1e-6 * core, "{core} vs {}", cycles / 3.1);
        assert!((cpu_graph(&p, &w).0 - core / 36.0).abs() < 1e-6 * core, "36 cores share 2,048 queries");
    }
}
