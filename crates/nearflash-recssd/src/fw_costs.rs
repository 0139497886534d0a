//! What the SLS engine's steps and GreedyFTL's per-page flash handling cost the FTL core, in instruction slots of
//! the controller's core model.
//!
//! The artifact's firmware keeps its config, page and result buffers and the embedding cache in DRAM mapped
//! strongly-ordered (uncached), and drives the flash controllers through registers in the programmable logic, so
//! its loops are dominated by memory and device stalls rather than instructions. A step's cost is therefore
//! `instructions + (uncached loads x load latency + uncached stores x store latency + register accesses x
//! register latency) / ns per instruction`: the stalls are charged as instruction slots of the in-order core (they
//! occupy it the same way; their energy is charged at the per-instruction rate, an over-estimate of a stalled
//! core's power).
//!
//! Per dim-64 row, Translation costs about 20 us (3 loads and 2 stores per element); per flash page, the
//! scheduler's handling about 12 us. Both are calibrated to the paper's Figs. 8-10 (see `params`).

use crate::params::RecssdParams;

/// Converts the parameters' per-step counts into instruction slots.
#[derive(Debug, Clone)]
pub struct FirmwareCosts {
    p: RecssdParams,
    ns_per_instruction: f64,
}

impl FirmwareCosts {
    /// Costs for a core that takes `ns_per_instruction` per instruction (CPI / clock).
    pub fn new(params: &RecssdParams, ns_per_instruction: f64) -> Self {
        Self { p: params.clone(), ns_per_instruction: ns_per_instruction.max(1e-6) }
    }

    /// Instruction slots of `loads` uncached loads and `stores` uncached stores.
    pub fn stalls(&self, loads: f64, stores: f64) -> f64 {
        (loads * self.p.uncached_load + stores * self.p.uncached_store) / self.ns_per_instruction
    }

    /// GreedyFTL's handling of one flash page read on the FTL core (buffer entry, page map, queue, the low-level
    /// scheduler's trigger / status / transfer / completion steps and their register accesses), beyond the
    /// platform's per-transaction path length.
    pub fn page_sched(&self) -> f64 {
        let p = &self.p;
        p.page_sched_instructions + p.page_sched_register_accesses * p.device_register_access / self.ns_per_instruction
    }

    /// Nanoseconds of `slots` instruction slots.
    pub fn ns(&self, slots: f64) -> f64 {
        slots * self.ns_per_instruction
    }

    /// Config processing: `pairs` pairs over `pages` flash pages, `hits` rows summed from the SSD cache, a
    /// scratchpad of `result_elements` fp32 values zeroed, `dim` elements per row.
    pub fn config(&self, pairs: u64, pages: u64, hits: u64, dim: u32, result_elements: u64) -> f64 {
        let p = &self.p;
        let (pairs, pages, hits, dim) = (pairs as f64, pages as f64, hits as f64, f64::from(dim));
        p.config_base_instructions
            + pairs * (p.config_pair_instructions + self.stalls(p.config_pair_loads, p.config_pair_stores))
            + pages * self.stalls(0.0, p.config_page_stores)
            + hits
                * dim
                * (p.cache_hit_element_instructions + self.stalls(p.cache_hit_element_loads, p.cache_hit_element_stores))
            + result_elements as f64 * self.stalls(0.0, p.zero_element_stores)
    }

    /// Translation of one flash page: extract `rows` rows of `dim` fp32 elements, copy each into the cache, add
    /// each into its result slot.
    pub fn translate(&self, rows: usize, dim: u32) -> f64 {
        self.translate_as(rows, dim, 4)
    }

    /// [`translate`](Self::translate) for elements stored with `attribute_bytes` (4 fp32, 2 fp16, 1 int8): the two
    /// page-side loads per element read `attribute_bytes / 4` of a word each (the firmware loads whole words and
    /// unpacks them), the result's load and the two stores stay fp32, and each narrow element costs
    /// `dequant_element_instructions` to convert.
    pub fn translate_as(&self, rows: usize, dim: u32, attribute_bytes: u32) -> f64 {
        let p = &self.p;
        let (rows, dim) = (rows as f64, f64::from(dim));
        let narrow = 1.0 - f64::from(attribute_bytes.clamp(1, 4)) / 4.0;
        let loads = (p.translate_element_loads - 2.0 * narrow).max(0.0);
        let convert = if attribute_bytes < 4 { p.dequant_element_instructions } else { 0.0 };
        p.translate_page_instructions
            + rows * (p.translate_row_instructions + self.stalls(p.translate_row_loads, p.translate_row_stores))
            + rows
                * dim
                * (p.translate_element_instructions + convert + self.stalls(loads, p.translate_element_stores))
    }

    /// Returning one result sector (DMA set-up and bookkeeping).
    pub fn result_sector(&self) -> f64 {
        self.p.result_sector_instructions
    }

    /// Registering a table.
    pub fn register(&self) -> f64 {
        self.p.register_instructions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stalls_dominate_translation_of_wide_rows() {
        let p = RecssdParams::default();
        let c = FirmwareCosts::new(&p, 1.5); // 1 GHz A9 at CPI 1.5
        // Per element: 30 instructions + (3 loads + 2 stores) of stall.
        let per_row_64 = c.translate(1, 64) - c.translate(0, 64);
        let element = 30.0 + (3.0 * p.uncached_load + 2.0 * p.uncached_store) / 1.5;
        let want = 40.0 + (2.0 * p.uncached_load + 3.0 * p.uncached_store) / 1.5 + 64.0 * element;
        assert!((per_row_64 - want).abs() < 1e-9, "{per_row_64} vs {want}");
        // About 20 us per dim-64 row on the A9, mostly memory stalls; a dim-32 row half of it.
        assert!((17_000.0..23_000.0).contains(&c.ns(per_row_64)), "{}", c.ns(per_row_64));
        assert!(c.stalls(3.0, 2.0) > 30.0);
        // A page's scheduler handling is comparable to one dim-64 row's Translation (the paper's ~half split).
        let page = c.ns(c.page_sched());
        assert!((0.3..1.0).contains(&(page / c.ns(per_row_64))), "{page}");
        assert!(c.config(100, 10, 0, 32, 32 * 8) > c.config(10, 10, 0, 32, 32 * 8));
        // narrower stored elements read fewer words from the page: int8 < fp16 < fp32, each still > 0
        let (f32_, f16_, i8_) = (c.translate_as(1, 64, 4), c.translate_as(1, 64, 2), c.translate_as(1, 64, 1));
        assert_eq!(f32_, c.translate(1, 64));
        assert!(i8_ < f16_ && f16_ < f32_ && i8_ > 0.5 * f32_, "{i8_} {f16_} {f32_}");
        assert!(c.config(10, 1, 5, 32, 0) > c.config(10, 1, 0, 32, 0));
    }
}
