//! RecSSD's modelled costs and sizes: the firmware extension's (pending-request buffer, page buffer, SSD cache,
//! FTL instruction counts and uncached-DRAM stalls) and the host library's (per-lookup CPU work, DRAM gather rate,
//! MLP throughput, worker pool, caches).
//!
//! Every value is read from the preset's `[ext.recssd]` section (`{ value, unit, source }`, as everywhere in
//! nearflash) when present there, else from the defaults below; attach-time overrides (`set`) come last. The
//! table below is the single list of parameters: name, dimension, default, unit and source.

pub use nearflash_core::config::ParamError;
use nearflash_core::config::ExtParams;

nearflash_core::ext_params! {
    /// All RecSSD parameters in canonical units (ns for times, bytes, B/s, counts; switches as `bool`).
    pub struct RecssdParams {
        // --- pending-SLS-request buffer and pairing ------------------------------------------------------------------
        /// Entries of the pending-SLS-request buffer (concurrent NDP requests).
        pending_entries: Int = 8 in 1..=4096, "count", "RecSSD artifact trans_buffer.h TRANS_BUF_ENTRY_NUM = 8; digest 'Config buffer 1 MB; 8 in-flight entries'";
        /// Controller core running the FTL polling loop (config processing and Translation are synchronous on it).
        ftl_core: Int = 0 in 0..=255, "count", "paper 6.1: Translation is 'synchronously tightly-coupled with the IO scheduling' of the FTL loop; GreedyFTL runs that loop on one A9 core";
        /// SLBA modulus separating table start and request id.
        request_modulus: Int = 1000 in 1..=1000000000, "count", "RecSSD artifact nvme_io_cmd.c: tableSLBA = curSect / 1000 * 1000, requestID = curSect % 1000";
        /// Vendor I/O opcode of the table-registration command (the firmware's table directory).
        register_opcode: Opcode = 0xE1, "opcode", "assumed: a vendor-specific I/O opcode (0x80-0xFF); the artifact hard-codes its table geometry instead";
        // --- GreedyFTL data buffer -------------------------------------------------------------------------------------
        /// LRU data-buffer entries (16 KiB flash pages) per die.
        page_buffer_pages_per_die: Int = 10 in 0..=1000000, "count", "Cosmos+ GreedyFTL lru_buffer.h (RecSSD artifact): BUF_ENTRY_NUM_PER_DIE = 10";
        /// Serve ordinary host Reads through the same whole-page LRU buffer, as GreedyFTL's LRUBufRead does.
        serve_host_reads: Bool = true, "bool", "RecSSD artifact nvme_io_cmd.c: plain reads go to LRUBufRead, which reads whole 16 KB pages into the LRU buffer (paper 6.1: 'the SSD page cache will hold pages')";
        // --- flash scheduling ----------------------------------------------------------------------------------------
        /// Level of the NDP page reads' flash class (`recssd.ndp`): `background` lets host reads go first on every die.
        ndp_class_level: Choice["urgent", "normal", "background"] = "normal", "choice", "assumed: the artifact's FTL loop feeds NDP page reads and host reads to the same die queues (low_level_scheduler.c), so NDP shares the dies with host I/O; background models a firmware that serves host reads first";
        /// Weight of that class among the normal level's (the host's medium-priority queues weigh 2).
        ndp_class_weight: Int = 2 in 1..=256, "count", "assumed: an equal share with the host's medium-priority queues (weight 2, MQSim's PRIORITY_OUT_OF_ORDER 4:2:1)";
        // --- SSD-side embedding cache ----------------------------------------------------------------------------------
        /// Direct-mapped embedding cache in controller DRAM on/off.
        ssd_cache: Bool = true, "bool", "paper 4.2 'SSD-side DRAM Caching'";
        /// log2 of the cache's entries.
        cache_index_bits: Int = 20 in 1..=32, "count", "RecSSD artifact trans_buffer.c: cache_index = fullindex & ((1 << 20) - 1)";
        /// Tag bits per entry (footprint).
        cache_tag_bits: Int = 12 in 0..=32, "count", "RecSSD artifact trans_buffer.c: tag = (fullindex >> 20) & 0xFFF";
        /// Low key bits holding the table id.
        cache_table_bits: Int = 5 in 0..=16, "count", "RecSSD artifact trans_buffer.c: fullindex = embeddingID << 5 | tableID";
        /// Row payload per entry.
        cache_payload: Bytes = 128, "B", "RecSSD artifact trans_buffer.h: embedding_bytes of one dim-32 fp32 row";
        // --- FTL CPU (ARM A9) costs --------------------------------------------------------------------------------------
        /// One load from the uncached DRAM region holding GreedyFTL's buffers.
        uncached_load: Time = 60, "ns", "fitted (docs/recssd.md Calibration): Fig. 8 SEQ slightly slower than the baseline needs ~20 us of Translation per dim-64 row; held at the low end of the physical 60-120 ns (Xilinx XAPP1206: 60-80 cycles of a 667 MHz A9 per random DDR3 line fill; strongly-ordered accesses skip the caches and stream through open DRAM rows). The artifact maps 16-422 MB strongly-ordered (main.c Xil_SetTlbAttributes 0xC12): config, page and result buffers, most of the embedding cache";
        /// One store to that region.
        uncached_store: Time = 40, "ns", "assumed: a strongly-ordered store completes only when the DDR controller accepts it (Zynq-7000 TRM UG585 3.2.4), about the request half of a load's round trip";
        /// FTL-core instructions per flash page read, beyond the platform's per-transaction path (`fw_page_instructions`).
        page_sched_instructions: Real = 1500, "instructions", "assumed: GreedyFTL's per-page bookkeeping in the artifact: buffer-entry allocation and LRU links (lru_buffer.c), page-map lookup, request-queue entry, the die state machine and its list moves (low_level_scheduler.c)";
        /// Accesses to the flash controllers' registers and completion tables per flash page read.
        page_sched_register_accesses: Count = 48, "count", "fitted (docs/recssd.md Calibration) to Fig. 8 (STR ~4x, Translation ~half of the FTL's time), Fig. 9 (RM1 up to 7x) and Fig. 10 (1.5x cache only, 2x partition); physical range 30-70: ~20 direct accesses per page in the artifact (fmc_driver.c trigger, status check, transfer, completion and error info) plus the loop's status and completion polls while the die reads";
        /// One such access.
        device_register_access: Time = 200, "ns", "assumed: an FTL-core load or store over Zynq's M_AXI_GP port to the flash controllers in the programmable logic (AXI-Lite at 100-250 MHz; artifact memory_map.h puts the completion and error tables at 0x80000000)";
        /// Config processing: fixed part (entry allocation, DMA setup, header, timestamps).
        config_base_instructions: Real = 2000, "instructions", "assumed: AllocateTransBufEntry + ConfigureTransBufEntry prologue (artifact trans_buffer.c)";
        /// Config processing per (result, input) pair: page and sector divides, cache index and tag, branches.
        config_pair_instructions: Real = 30, "instructions", "assumed: body of the ConfigureTransBufEntry loop (artifact trans_buffer.c)";
        /// Uncached loads per pair (the pair, the cache entry's valid/tag word, the sector counter).
        config_pair_loads: Count = 3, "count", "RecSSD artifact ConfigureTransBufEntry: reads embeddingIDList[i], cacheEntry valid/tag, perResultSectorInputEmbeddings";
        /// Uncached stores per pair (the sector counter).
        config_pair_stores: Count = 1, "count", "RecSSD artifact ConfigureTransBufEntry: perResultSectorInputEmbeddings += 1";
        /// Uncached stores per flash page of the request (its SLBA, start index, input count).
        config_page_stores: Count = 3, "count", "RecSSD artifact ConfigureTransBufEntry: perPageSLBAs, perPageStartingIndex, perPageInputLength";
        /// Instructions per fp32 element summed from the SSD cache during config processing.
        cache_hit_element_instructions: Real = 4, "instructions", "assumed: load/add/store loop body";
        /// Uncached loads per element summed from the cache (cache entry, result slot).
        cache_hit_element_loads: Count = 2, "count", "RecSSD artifact ConfigureTransBufEntry fast path: *toAtr += *fromAtr";
        /// Uncached stores per element summed from the cache (result slot).
        cache_hit_element_stores: Count = 1, "count", "RecSSD artifact ConfigureTransBufEntry fast path";
        /// Translation: fixed part per flash page (timestamps, base id, loop setup, completion handling).
        translate_page_instructions: Real = 400, "instructions", "assumed: translatePage prologue/epilogue and the low-level completion that calls it (artifact trans_buffer.c)";
        /// Translation per row extracted (index math, cache index/tag, counters).
        translate_row_instructions: Real = 40, "instructions", "assumed: per-embedding part of translatePage (artifact trans_buffer.c)";
        /// Uncached loads per row (its pair in the config buffer, the sector counter).
        translate_row_loads: Count = 2, "count", "RecSSD artifact translatePage: embeddingIDList[pair_index], perResultSectorCompletedEmbeddings";
        /// Uncached stores per row (cache valid and tag, the sector counter).
        translate_row_stores: Count = 3, "count", "RecSSD artifact translatePage: cacheEntry valid/tag, perResultSectorCompletedEmbeddings++";
        /// Instructions per fp32 element translated (copy into the cache, add into the result).
        translate_element_instructions: Real = 30, "instructions", "assumed: translatePage copies each element into the cache by assigning a variable-length struct (a memcpy call per element) and sums it in a second loop";
        /// Uncached loads per element (page twice, result once).
        translate_element_loads: Count = 3, "count", "RecSSD artifact translatePage: page -> cache copy, page -> sum, result read";
        /// Uncached stores per element (cache, result).
        translate_element_stores: Count = 2, "count", "RecSSD artifact translatePage: cache entry and result slot writes";
        /// Instructions per stored fp16 / int8 element translated, converting it to fp32 before the add.
        dequant_element_instructions: Real = 2, "instructions", "assumed: one VCVT on the A9's VFPv3 with the half-precision extension (fp16), or a convert and a multiply by the table's scale (int8); the artifact sums fp32 only";
        /// Stores per fp32 element of the result scratchpad zeroed at config time.
        zero_element_stores: Count = 1, "count", "RecSSD artifact ConfigureTransBufEntry: 'Zero out results pages'";
        /// Firmware per result sector returned (DMA descriptor, counters).
        result_sector_instructions: Real = 300, "instructions", "assumed: readTranslatedPagesNonBlocking per sector (set_auto_tx_dma, timestamps)";
        /// Firmware per table registration.
        register_instructions: Real = 1000, "instructions", "assumed: parse and store a table descriptor";
        // --- host library ------------------------------------------------------------------------------------------------
        /// Host cycles per embedding lookup handled on the host (LRU or partition probe and update, bookkeeping).
        host_lookup_cycles: Real = 150, "cycles", "assumed: hash-map probe plus LRU list update on a Skylake core";
        /// fp32 additions per host cycle when summing rows already in cache (rows read from the SSD, partial sums).
        host_sum_floats_per_cycle: Real = 8, "ops/cycle", "assumed: one 8-wide AVX2 add per cycle on Skylake";
        /// Host cycles per (result, input) pair to build, sort and encode an NDP config.
        host_config_pair_cycles: Real = 40, "cycles", "assumed: sort of the pairs by input id (n log n compare-swaps) and packing";
        /// Effective bandwidth of gathering and summing rows held in host DRAM (the DRAM path's tables, the baseline's
        /// LRU hits, the static partition).
        host_dram_sls_bandwidth: Rate = 1, "GB/s", "paper 3.2: '1GB/s on DRAM' for the SLS operator's random reads";
        /// Dense (MLP, interaction, GRU) FLOPs per host cycle per core.
        host_mlp_flops_per_cycle: Real = 8, "ops/cycle", "assumed: a quarter of Skylake's AVX2 FMA peak (32 FLOP/cycle), typical of Caffe2 FC at batch <= 64";
        /// Host cores running the dense part of one batch.
        host_mlp_cores: Int = 1 in 1..=1024, "count", "RecSSD artifact dlrm_s_caffe2.py: one run instance, inter_op_workers 1";
        /// Rows per table in the baseline's fully associative host LRU.
        host_lru_rows: Int = 2000 in 0..=1000000000, "count", "paper 5: 'host-side DRAM caches store up to 2K entries per embedding table'; artifact LRU(2000)";
        /// Rows per table in RecSSD's static partition.
        host_partition_rows: Int = 2000 in 0..=1000000000, "count", "paper 5 and 6.3: up to 2K entries per table; artifact keeps the 2,000 most frequent ids";
        /// SLS workers (= I/O queue pairs) of the pipelined runs.
        sls_workers: Int = 8 in 1..=1024, "count", "paper 4.2: SLS workers matched to the driver's I/O queues; artifact load_instances = 8, qcount = 8";
        /// Reads a baseline worker keeps in flight.
        baseline_queue_depth: Int = 1 in 1..=65536, "count", "RecSSD artifact unvme_read_embedding: one synchronous unvme_read per missing embedding";
    }
}

impl RecssdParams {
    /// Defaults overridden by a preset section (`{ value, unit, source }` per key).
    pub fn from_section(section: Option<&toml::Table>) -> Result<Self, ParamError> {
        let p = <Self as ExtParams>::from_section(section)?;
        p.validate()?;
        Ok(p)
    }

    /// Overrides one parameter with a plain value in the parameter's declared unit (e.g. `"uncached_load"`, 90.0
    /// means 90 ns; switches take booleans).
    pub fn set(&mut self, name: &str, value: &serde_json::Value) -> Result<(), ParamError> {
        self.set_json(name, value)?;
        self.validate()
    }

    /// Applies every key of a JSON object through [`set`](Self::set).
    pub fn apply_json(&mut self, obj: &serde_json::Value) -> Result<(), ParamError> {
        self.apply_json_object(obj, &[])?;
        self.validate()
    }

    fn validate(&self) -> Result<(), ParamError> {
        let bad = |name: &str, why: &str| Err(ParamError::Invalid { name: name.into(), why: why.into() });
        if self.host_sum_floats_per_cycle <= 0.0 || self.host_mlp_flops_per_cycle <= 0.0 || self.host_dram_sls_bandwidth <= 0.0 {
            return bad("host_mlp_flops_per_cycle", "rates must be positive");
        }
        Ok(())
    }

    /// The SSD cache geometry these parameters describe.
    pub fn cache_config(&self) -> crate::ssd_cache::SsdCacheConfig {
        crate::ssd_cache::SsdCacheConfig {
            index_bits: self.cache_index_bits as u32,
            tag_bits: self.cache_tag_bits as u32,
            table_bits: self.cache_table_bits as u32,
            payload_bytes: self.cache_payload as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_in_canonical_units() {
        let p = RecssdParams::default();
        assert_eq!(p.pending_entries, 8);
        assert_eq!(p.uncached_load, 60.0); // ns
        assert_eq!(p.device_register_access, 200.0);
        assert_eq!(p.host_dram_sls_bandwidth, 1e9); // B/s
        assert_eq!(p.cache_payload, 128.0);
        assert!(p.serve_host_reads && p.ssd_cache);
        assert_eq!(p.register_opcode, 0xE1);
        assert_eq!(p.cache_config(), crate::ssd_cache::SsdCacheConfig::default());
    }

    #[test]
    fn section_and_overrides() {
        let sec: toml::Table = toml::from_str(
            "uncached_load = { value = 0.09, unit = \"us\", source = \"x\" }\nssd_cache = { value = false, unit = \"bool\", source = \"x\" }",
        )
        .unwrap();
        let mut p = RecssdParams::from_section(Some(&sec)).unwrap();
        assert!((p.uncached_load - 90.0).abs() < 1e-9);
        assert!(!p.ssd_cache);
        p.apply_json(&serde_json::json!({"pending_entries": 4, "ssd_cache": true})).unwrap();
        assert_eq!(p.pending_entries, 4);
        assert!(p.ssd_cache);
        assert!(matches!(p.set("nope", &serde_json::json!(1)), Err(ParamError::Unknown(_))));
        assert!(p.set("pending_entries", &serde_json::json!(0)).is_err());
        let bad: toml::Table = toml::from_str("uncached_load = { value = 1, unit = \"B\", source = \"x\" }").unwrap();
        assert!(RecssdParams::from_section(Some(&bad)).is_err());
        let unknown: toml::Table = toml::from_str("foo = { value = 1, unit = \"count\", source = \"x\" }").unwrap();
        assert!(matches!(RecssdParams::from_section(Some(&unknown)), Err(ParamError::Unknown(_))));
    }

    #[test]
    fn the_generated_section_parses_back_to_the_defaults() {
        let sec: toml::Table = toml::from_str(&RecssdParams::section_toml()).unwrap();
        assert_eq!(RecssdParams::from_section(Some(&sec)).unwrap(), RecssdParams::default());
    }
}
