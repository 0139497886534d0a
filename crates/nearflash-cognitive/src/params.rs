//! Cognitive SSD's modelled sizes and costs, one list with unit and source (the paper: Liang et al., ATC'19).
//! Read from a preset's `[ext.cognitive]` section when present, else these defaults.

pub use nearflash_core::config::ParamError;

nearflash_core::ext_params! {
    /// DLG-x, GSE, graph and layout parameters in canonical units (ns, bytes, B/s, Hz, counts).
    pub struct CognitiveParams {
        // --- DLG-x NPE --------------------------------------------------------------------------------------------
        /// DLG-x clock (NPE, GSE and the flash controllers run at it).
        clock: Frequency = 100, "MHz", "paper Sec. 5.1 and 5.5: DLG-x on the XC7Z045 at 100 MHz";
        /// Processing elements of the NPE (a 16 x 16 array).
        n_pe: Count = 256, "count", "paper Sec. 4.2: N_PE = 256";
        /// PEs of one NPE column, used alone for FC layers.
        pe_column: Count = 16, "count", "paper Sec. 4.2: 'only uses a column of PEs to deal with a FC layer'; sqrt(N_PE) of the square array (assumed)";
        /// Flash channels DLG-x reads weights and graph pages through (M).
        channels: Count = 8, "count", "paper Sec. 5.1: Cosmos+ 8-way NAND interface";
        /// Data rate of one channel into DLG-x (BW_flash).
        channel_bw: Rate = 200, "MB/s", "paper Sec. 4.2: BW^m = 16 B/cycle at 100 MHz over 8 channels = 2 B/cycle = 200 MB/s per channel";
        /// One weight buffer bank (two, ping-pong) and the graph search buffer (S_buffer).
        weight_buffer: Bytes = 256, "KiB", "paper Sec. 4.3: S_buffer = 256 KB";
        /// NAND page (S_page).
        page_size: Bytes = 16, "KiB", "paper Sec. 4.3: S_page = 16 KB; Cosmos+ preset";
        /// Cycles of a pooling or activation step per PE per element.
        elementwise_cycles: Real = 1, "cycles", "assumed: one compare or max per PE per cycle, as the MAC";
        // --- GSE and the graph --------------------------------------------------------------------------------------
        /// Neighbours per vertex of the K-NN graph (K_nbors).
        k_nbors: Count = 25, "count", "paper Sec. 4.3: K_nbors = 25";
        /// Vertex id width (W_id).
        id_bits: Count = 32, "bits", "paper Sec. 4.3: W_id = 32 bits";
        /// Default hash code width (W_hash_code).
        hash_bits: Count = 48, "bits", "paper Sec. 4.3 and 5.5: 48-bit codes";
        /// Vertex ids per distance bucket (D_block).
        d_block: Count = 5000, "count", "paper Sec. 4.3: D_block = 5000";
        /// Random initial vertices of a search.
        initial_vertices: Count = 32, "count", "assumed: the paper starts 'from random initial vertices' without a count; 32 fills the first buckets in one step";
        /// When the termination counter stops a search: `converged` when the next vertex to expand is no nearer
        /// than the L-th nearest vertex held (L = max(T, `search_pool`); the counter reads the buckets' fill
        /// levels), or when the InOut buffer is full; `count` when the held vertices reach `termination_ratio` x T.
        termination: Choice["converged", "count"] = "converged", "choice", "paper Sec. 4.3: the counter stops the search by 'monitoring the total number of vertices stored in the InOut buffer' at a user-configured threshold, not given; `count` at 4T kept 88-96% of brute-force precision@T on Fashion-MNIST (issue 27), `converged` keeps >= 98.9% at T = 10-1000 on 1k-60k images (docs/cognitive.md)";
        /// Smallest L of the `converged` rule: a search holds at least this many vertices before it may stop.
        search_pool: Count = 32, "count", "assumed: the smallest pool that keeps >= 97% of brute-force precision@T at T = 10 on 1k-60k Fashion-MNIST images (pools of 32, 64 and 128 measured, docs/cognitive.md); NSG's search pool plays the same part";
        /// Held vertices at which the `count` rule stops a search, as a multiple of T.
        termination_ratio: Real = 4, "ratio", "assumed: the paper's threshold is user-configured; 4T, the setting before issue 27 (`termination = count` only)";
        /// GSE cycles per neighbour (visited check, XOR-popcount on the NPE, bucket append).
        gse_neighbour_cycles: Real = 2, "cycles", "assumed: VDU lookup and BAG append are single-cycle pipelined stages; the Hamming distance takes one more";
        /// Graph pages the GSE keeps on chip (most recently read first): S_buffer / S_page.
        gse_page_slots: Count = 16, "count", "paper Sec. 4.3: the weight buffer (256 KB) holds neighbour data = 16 pages of 16 KB";
        /// Flash page read (array to register), used for timing the page reads counted by the search.
        t_read: Time = 60, "us", "cosmos-plus preset t_read (assumed there: MLC tR 50-80 us)";
        // --- host-CPU baselines (B-CPU, the CPU parts of B-GPU and B-FPGA, Fig. 9's CPU searches): counted work x
        // --- these, measured once on a reference machine (benches/cognitive_host_costs.py) --------------------------
        /// Host CPU time per int8 multiply-accumulate of a hashing network, one image at a time (numpy/BLAS).
        host_mac_time: Time = 0.688, "ns", "measured 2026-11-28 by benches/cognitive_host_costs.py on this project's reference machine (Intel Xeon VM, 2 logical CPUs, Linux 6.18), one thread, least thread CPU time of 7 runs: numpy 2.4.6 + OpenBLAS 0.3.31 runs the int8 Fashion CNN (im2col + a matrix product per layer, codes equal to the crate executor's) one image at a time in 0.772 ms for 1,121,280 MACs (batched 16: 0.183 ns/MAC; the crate's direct-loop executor 2.86 ms)";
        /// Host CPU time per database code of a brute-force Hamming top-T scan.
        host_hamming_time: Time = 4.3, "ns", "measured 2026-11-28 by benches/cognitive_host_costs.py (machine and method as host_mac_time): top-200 of 10,000 48-bit codes, the fastest of the crate's two-pass Rust scan 4.3 ns, FAISS 1.15 IndexBinaryFlat 10.9 ns and numpy XOR/bitwise_count/argpartition 12.8 ns per code";
        /// Host CPU time per neighbour step of the graph search (visited check, Hamming distance, bucket append),
        /// graph pages in DRAM.
        host_graph_step_time: Time = 25, "ns", "measured 2026-11-28 by benches/cognitive_host_costs.py (machine and method as host_mac_time): the GSE algorithm in Rust on the host over 10,000 codes in the plain layout, T = 50 / 200 / 1000: 32 / 24.5 / 24.9 ns per step";
        /// Page cache the host keeps the graph pages it read from the SSD in (LRU).
        host_page_cache: Bytes = 8, "GiB", "assumed: a quarter of the paper's baseline server's 32 GB DRAM (Sec. 5.2) left to the page cache";
        // --- runtime on the controller cores (firmware extension) ---------------------------------------------------
        /// The declared share of DLG-x's weight-stream reads on the dies they share with ordinary I/O: their flash
        /// class's weight in the dies' work-conserving round robin against the medium-priority host queues' 2
        /// (2: one for one); 0: the weight stream goes first (the urgent level).
        weight_stream_share: Int = 2 in 0..=256, "count", "paper Sec. 3.1.3: the I/O scheduler 'dispatches I/O requests to the basic firmware or the DLG-x' on shared channels, policy not given; assumed: equal turns (the medium host queues' weight), work-conserving, as a controller serving two queues round robin";
        /// How DLG-x reads a weighted layer's bytes from each channel's pages: `column` senses the page and moves
        /// only the ECC codewords holding the layer (ONFI random data out, `nand.t_column_change` before it), as
        /// Eq. 3 counts only weight bytes; `page` moves every page the layer touches whole.
        weight_reads: Choice["column", "page"] = "column", "choice", "paper Sec. 4.2 Eq. 3 counts the layer's weight bytes (S_k/M per channel) against BW^m; a controller moves a byte range of a sensed page with ONFI Change Read Column; `page` kept to measure the whole-page stream (docs/cognitive.md, Table 2)";
        /// How the runtime waits for DLG-x: A blocks the firmware until the task ends, B rings DLG-x's doorbell and
        /// polls its status between ordinary commands.
        method: Choice["A", "B"] = "B", "choice", "paper Sec. 3.2 and Table 2: Method B keeps normal I/O bandwidth, so it is the runtime's choice";
        /// Interval at which the Method B firmware polls DLG-x's status register.
        poll_interval: Time = 10, "us", "assumed: a status poll per pass of the firmware's main loop, about ten 1-us NVMe command handlings";
        /// Controller instructions of one status poll (Method B).
        poll_instructions: Real = 100, "instructions", "assumed: an uncached MMIO read and a branch on the A9";
        /// Controller instructions to decode a DLG command and dispatch it to DLG-x (task scheduler + configurator).
        dispatch_instructions: Real = 2000, "instructions", "assumed: session lookup, instruction-buffer pointer set-up and doorbell, about as long as a read's firmware path";
        /// Task sessions (hash codes of DLG_hashing kept for DLG_index / DLG_analysis), oldest dropped first.
        sessions: Count = 64, "count", "assumed: DLG-x's query-hash registers and the runtime's session table; enough for a queue of 64 queries";
        /// DLG-x power while busy, above idle.
        dlgx_active_power: Power = 3, "W", "paper Table 6: Cognitive SSD 17 W idle, 20 W active";
        // --- DLG library opcodes (Table 1) --------------------------------------------------------------------------
        op_hashing: Count = 0xC0, "count", "paper Table 1: DLG_hashing";
        op_index: Count = 0xC1, "count", "paper Table 1: DLG_index";
        op_analysis: Count = 0xC2, "count", "paper Table 1: DLG_analysis";
        op_config: Count = 0xC3, "count", "paper Table 1: DLG_config";
        op_ssd_read: Count = 0xC4, "count", "paper Table 1: SSD_read";
        op_ssd_write: Count = 0xC5, "count", "paper Table 1: SSD_write";
    }
}

impl CognitiveParams {
    /// BW^m of Eq. 1 in bytes per DLG-x cycle.
    pub fn bytes_per_cycle(&self) -> f64 {
        self.channels * self.channel_bw / self.clock
    }
    /// V_final of Eq. 5.
    pub fn v_final(&self) -> usize {
        let s = self.weight_buffer / (self.d_block * self.id_bits / 8.0) - 1.0;
        s.floor().max(0.0) as usize
    }
    /// Nanoseconds per DLG-x cycle.
    pub fn cycle_ns(&self) -> f64 {
        1e9 / self.clock
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_derived_values() {
        let p = CognitiveParams::default();
        assert_eq!(p.bytes_per_cycle(), 16.0);
        // Eq. 5 with 256 KB, D_block 5000, W_id 32 bits: floor(262144 / 20000 - 1) = 12
        assert_eq!(p.v_final(), 12);
        assert_eq!(p.cycle_ns(), 10.0);
    }
}
