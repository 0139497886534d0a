//! The FTL polling loop's share of SLS work (paper §4.1, Fig. 7 steps 3-5), timed: feeding flash page reads of
//! the configured entries to the flash array round-robin, serving pages already in the page buffer without a
//! read (3b), and Translation of each page on the FTL core as its data arrives (4-5), which sets when each result
//! sector is complete.
//!
//! Scheduling happens when an entry's results are first asked for, together with every other configured entry
//! not yet scheduled: their page reads are issued in round-robin order (one page of each entry in turn, the
//! loop's rotating pointer), each no earlier than its entry's config processing, so concurrent requests share
//! dies and channels fairly. Each page read from flash also costs the FTL core GreedyFTL's per-page handling
//! (buffer entry, page map, the low-level scheduler's trigger / status / transfer / completion steps), booked from
//! its issue on, while the die works; a page's Translation starts once its data is in DRAM and that handling is
//! done. Being on one core, handling and Translations serialise with each other and with config processing, as
//! the artifact's synchronous loop does. Issue times are never earlier than the command that triggers
//! scheduling, so nothing is booked in the past.
//!
//! Functionally, each page is translated as it is issued (the sums do not depend on the order; the SSD cache is
//! filled in issue order).

use crate::entries::RequestKey;
use crate::fw_costs::FirmwareCosts;
use crate::ndp_command::NdpFault;
use crate::ndp_exec::SlsRequest;
use crate::page_buffer::PageBuffer;
use crate::ssd_cache::SsdEmbeddingCache;
use crate::table_dir::{RowData, TableDescriptor};
use nearflash_core::ext::Time;
use nearflash_core::nvme::Status;

/// What the loop needs from the device.
pub trait FlashPort {
    /// Reads `nlb` blocks from `lba` into `out` (empty: timing only) from `ready`; returns when they are in DRAM.
    fn read(&mut self, lba: u64, nlb: u32, ready: Time, out: &mut [u8]) -> Result<Time, Status>;
    /// Physical sector addresses of `nlb` blocks from `lba`, if all are on flash.
    fn physical(&self, lba: u64, nlb: u32) -> Option<Vec<u64>>;
    /// Runs `instructions` on the FTL core from `ready`; returns when done.
    fn ftl_core(&mut self, ready: Time, instructions: f64) -> Time;
}

/// A configured request held in a pending-buffer entry.
#[derive(Debug)]
pub struct PendingRequest {
    pub key: RequestKey,
    pub entry: usize,
    pub table: TableDescriptor,
    pub req: SlsRequest,
    /// When the config command reached the firmware.
    pub arrived: Time,
    /// When the entry was ours (later than `arrived` if every entry was busy).
    pub entry_start: Time,
    /// When the config was in controller DRAM.
    pub config_in_dram: Time,
    /// When config processing ended on the FTL core.
    pub processed: Time,
    /// Set once scheduled.
    pub plan: Option<Plan>,
    /// First result sector not yet returned.
    pub next_sector: usize,
    /// Whether the table's rows go through the SSD cache (its id and row size fit the cache's key and payload).
    pub cached: bool,
}

/// The timed outcome of an entry's flash work.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// When each result sector holds all its inputs.
    pub sector_ready: Vec<Time>,
    /// A page could not be read: the request fails.
    pub fault: Option<NdpFault>,
    /// FTL-core time spent translating this entry's pages.
    pub translation_ns: u64,
    /// End of the entry's last translation (its config processing if it read no page).
    pub data_done: Time,
    pub pages_from_flash: u64,
    pub pages_from_buffer: u64,
    /// Sum over pages of (translation start - issue), the artifact's per-page "flash read latency".
    pub page_wait_sum_ns: u64,
}

/// Schedules the entries `which` of `pending` (in arrival order) jointly, round-robin, no earlier than
/// `not_before`.
pub fn plan_round_robin<P: FlashPort>(
    pending: &mut [PendingRequest],
    which: &[usize],
    not_before: Time,
    port: &mut P,
    buffer: &mut PageBuffer,
    mut cache: Option<&mut SsdEmbeddingCache>,
    costs: &FirmwareCosts,
) {
    // (data ready, position in `which`, page group, issue time, read from flash)
    let mut arrivals: Vec<(Time, usize, usize, Time, bool)> = Vec::new();
    let mut cursor = vec![0usize; which.len()];
    let mut page = Vec::new();
    for &i in which {
        let r = &mut pending[i];
        let sectors = r.req.result_sectors();
        r.plan = Some(Plan { sector_ready: vec![r.processed; sectors], data_done: r.processed, ..Plan::default() });
    }
    loop {
        let mut issued = false;
        for (k, &i) in which.iter().enumerate() {
            let r = &mut pending[i];
            let g = cursor[k];
            let plan = r.plan.as_mut().expect("initialised above");
            if plan.fault.is_some() || g >= r.req.flash_pages().len() {
                continue;
            }
            cursor[k] += 1;
            issued = true;
            let issue = r.processed.max(not_before);
            let layout = *r.req.layout();
            let spp = layout.lbas_per_page();
            let lba = layout.page_lba(r.req.flash_pages()[g]);
            let stored = r.table.data == RowData::Stored;
            page.resize(layout.page_bytes() as usize, 0);
            let psas = port.physical(lba, spp as u32);
            let hit = psas.as_deref().and_then(|p| buffer.lookup(lba / spp, p, stored)).map(|h| {
                if let Some(d) = h.data {
                    page.copy_from_slice(d);
                }
                h.ready
            });
            let from_flash = hit.is_none();
            let ready = match hit {
                Some(t) => {
                    plan.pages_from_buffer += 1;
                    t.max(issue)
                }
                None => {
                    let out: &mut [u8] = if stored { &mut page } else { &mut [] };
                    match port.read(lba, spp as u32, issue, out) {
                        Ok(done) => {
                            if let Some(p) = psas {
                                buffer.insert(lba / spp, p, done, stored.then_some(&page[..]));
                            }
                            plan.pages_from_flash += 1;
                            done
                        }
                        Err(_) => {
                            plan.fault = Some(NdpFault::MediaError);
                            continue;
                        }
                    }
                }
            };
            let c = if r.cached { cache.as_deref_mut() } else { None };
            let translated = match (stored, r.table.generator()) {
                (true, _) => r.req.translate_page(g, &page, c),
                (false, Some(gen)) => r.req.translate_page_from(g, &gen, c),
                (false, None) => {
                    plan.fault = Some(NdpFault::BadTable);
                    continue;
                }
            };
            if translated.is_err() {
                plan.fault = Some(NdpFault::BadTable);
                continue;
            }
            arrivals.push((ready, k, g, issue, from_flash));
        }
        if !issued {
            break;
        }
    }
    // The FTL core handles and translates pages in the order their data arrives (ties: round-robin issue order).
    arrivals.sort_by_key(|a| a.0);
    for (ready, k, g, issue, from_flash) in arrivals {
        let r = &mut pending[which[k]];
        let handled = if from_flash { port.ftl_core(issue, costs.page_sched()) } else { issue };
        let instructions = costs.translate_as(r.req.rows_on_page(g), r.req.layout().dim(), r.req.layout().attribute_bytes());
        let end = port.ftl_core(ready.max(handled), instructions);
        let dur = costs.ns(instructions).ceil() as u64;
        let plan = r.plan.as_mut().expect("initialised above");
        plan.translation_ns += dur;
        plan.page_wait_sum_ns += end.saturating_sub_ns(dur).saturating_since(issue);
        plan.data_done = plan.data_done.max(end);
        for s in r.req.sectors_of_page(g) {
            plan.sector_ready[s] = plan.sector_ready[s].max(end);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{Placement, TableLayout};
    use crate::ndp_wire::{NdpConfig, WireLimits};
    use crate::params::RecssdParams;
    use crate::sls::{embedding_bag_sum, TableView};
    use nearflash_core::engine::Timeline;

    /// A flash array of `dies` dies with a fixed page latency, dies chosen by page, and one FTL core.
    struct FakePort {
        dies: Vec<Timeline>,
        core: Timeline,
        page_ns: u64,
        table: Vec<f32>,
        layout: TableLayout,
        reads: Vec<(u64, Time)>,
    }

    impl FlashPort for FakePort {
        fn read(&mut self, lba: u64, _nlb: u32, ready: Time, out: &mut [u8]) -> Result<Time, Status> {
            let page = (lba - self.layout.start_lba()) / self.layout.lbas_per_page();
            let n = self.dies.len() as u64;
            let s = self.dies[(page % n) as usize].reserve(ready, self.page_ns);
            if !out.is_empty() {
                let tv = TableView::new(&self.table, self.layout.rows() as usize, self.layout.dim() as usize).unwrap();
                self.layout.render_page(&tv, page, out).unwrap();
            }
            self.reads.push((page, ready));
            Ok(s + self.page_ns)
        }
        fn physical(&self, lba: u64, nlb: u32) -> Option<Vec<u64>> {
            Some((lba..lba + u64::from(nlb)).collect())
        }
        fn ftl_core(&mut self, ready: Time, instructions: f64) -> Time {
            let d = (instructions * 1.5).ceil() as u64;
            self.core.reserve(ready, d) + d
        }
    }

    fn request(layout: &TableLayout, ids: &[u32], offs: &[u32], rid: u64, at: Time) -> PendingRequest {
        let cfg = NdpConfig::from_bags(0, layout.dim(), ids, offs).unwrap();
        let req = SlsRequest::process_config(cfg, layout, &WireLimits::default(), None).unwrap();
        PendingRequest {
            key: RequestKey { table_start: 0, request_id: rid },
            entry: rid as usize,
            table: TableDescriptor { table_id: 0, layout: *layout, data: RowData::Stored },
            req,
            arrived: at,
            entry_start: at,
            config_in_dram: at,
            processed: at,
            plan: None,
            next_sector: 0,
            cached: false,
        }
    }

    #[test]
    fn round_robin_issue_buffer_reuse_and_sector_times() {
        let (rows, dim) = (4096usize, 64usize); // 64 rows per page
        let table: Vec<f32> = (0..rows * dim).map(|i| (i % 13) as f32).collect();
        let layout = TableLayout::fp32(0, rows as u64, dim as u32, Placement::Packed).unwrap();
        let mut port = FakePort {
            dies: vec![Timeline::new(); 2],
            core: Timeline::new(),
            page_ns: 100_000,
            table: table.clone(),
            layout,
            reads: Vec::new(),
        };
        // A: pages 0, 1, 2 (one row each); B: pages 1 (shared with A), 5.
        let a = request(&layout, &[0, 64, 128], &[0], 0, Time::ZERO);
        let b = request(&layout, &[65, 320], &[0, 1], 1, Time::ZERO);
        let mut pending = vec![a, b];
        let costs = FirmwareCosts::new(&RecssdParams::default(), 1.5);
        let mut buffer = PageBuffer::new(2, 10);
        plan_round_robin(&mut pending, &[0, 1], Time::ZERO, &mut port, &mut buffer, None, &costs);
        // Round-robin: A0, B1, A1 (buffered: B read it), B5, A2.
        let order: Vec<u64> = port.reads.iter().map(|r| r.0).collect();
        assert_eq!(order, vec![0, 1, 5, 2]);
        let (pa, pb) = (pending[0].plan.clone().unwrap(), pending[1].plan.clone().unwrap());
        assert_eq!((pa.pages_from_flash, pa.pages_from_buffer, pb.pages_from_flash), (2, 1, 2));
        // Page 1 reaches DRAM at 100 us (die 1); page 5 queues behind it on die 1; pages 0 and 2 share die 0.
        assert!(pb.sector_ready[0] > Time::from_ns(200_000) && pa.sector_ready[0] > Time::from_ns(200_000));
        // Functional sums equal the DRAM reference.
        let tv = TableView::new(&table, rows, dim).unwrap();
        assert_eq!(pending[0].req.result(), &embedding_bag_sum(&tv, &[0u32, 64, 128], &[0u32], None, false).unwrap()[..]);
        assert_eq!(pending[1].req.result(), &embedding_bag_sum(&tv, &[65u32, 320], &[0u32, 1], None, false).unwrap()[..]);
        // Every translation of 1 dim-64 row was charged to the core.
        let per_page = costs.ns(costs.translate(1, 64)).ceil() as u64;
        assert_eq!(pa.translation_ns, 3 * per_page);
        assert!(pa.data_done >= pa.sector_ready[0]);
    }

    #[test]
    fn each_flash_page_costs_the_core_its_handling_and_buffered_pages_do_not() {
        let layout = TableLayout::fp32(0, 4096, 64, Placement::Packed).unwrap(); // 64 rows per page
        let table = vec![0.5f32; 4096 * 64];
        let costs = FirmwareCosts::new(&RecssdParams::default(), 1.5);
        let (sched, row) = (costs.page_sched() * 1.5, costs.translate(1, 64) * 1.5);
        // Eight pages on eight dies arrive together after 10 us: the core is the bottleneck, handling + Translation
        // of every page in turn.
        let ids: Vec<u32> = (0..8).map(|p| p * 64).collect();
        let mut port = FakePort { dies: vec![Timeline::new(); 8], core: Timeline::new(), page_ns: 10_000, table: table.clone(), layout, reads: vec![] };
        let mut pending = vec![request(&layout, &ids, &[0], 0, Time::ZERO)];
        plan_round_robin(&mut pending, &[0], Time::ZERO, &mut port, &mut PageBuffer::new(8, 4), None, &costs);
        let done = pending[0].plan.as_ref().unwrap().data_done.as_ns() as f64;
        assert!((done - 8.0 * (sched + row)).abs() < 16.0, "{done} vs {}", 8.0 * (sched + row));
        // The same pages again, now in the page buffer: Translation only.
        let mut buffer = PageBuffer::new(8, 4);
        let mut port = FakePort { dies: vec![Timeline::new(); 8], core: Timeline::new(), page_ns: 10_000, table, layout, reads: vec![] };
        let mut first = vec![request(&layout, &ids, &[0], 0, Time::ZERO)];
        plan_round_robin(&mut first, &[0], Time::ZERO, &mut port, &mut buffer, None, &costs);
        let t1 = first[0].plan.as_ref().unwrap().data_done;
        let mut again = vec![request(&layout, &ids, &[0], 1, t1)];
        plan_round_robin(&mut again, &[0], t1, &mut port, &mut buffer, None, &costs);
        let plan = again[0].plan.as_ref().unwrap();
        assert_eq!((plan.pages_from_buffer, plan.pages_from_flash), (8, 0));
        assert!(((plan.data_done - t1) as f64 - 8.0 * row).abs() < 16.0);
    }

    #[test]
    fn nothing_is_issued_before_not_before_and_media_errors_fail_the_request() {
        let layout = TableLayout::fp32(0, 256, 64, Placement::Packed).unwrap();
        let table = vec![1.0f32; 256 * 64];
        let mut port =
            FakePort { dies: vec![Timeline::new()], core: Timeline::new(), page_ns: 10, table: table.clone(), layout, reads: vec![] };
        let mut pending = vec![request(&layout, &[0, 100], &[0], 0, Time::from_ns(5))];
        let costs = FirmwareCosts::new(&RecssdParams::default(), 1.5);
        plan_round_robin(&mut pending, &[0], Time::from_ns(1_000), &mut port, &mut PageBuffer::new(1, 0), None, &costs);
        assert!(port.reads.iter().all(|r| r.1 >= Time::from_ns(1_000)));
        struct Broken;
        impl FlashPort for Broken {
            fn read(&mut self, _: u64, _: u32, _: Time, _: &mut [u8]) -> Result<Time, Status> {
                Err(Status::UNRECOVERED_READ_ERROR)
            }
            fn physical(&self, _: u64, _: u32) -> Option<Vec<u64>> {
                None
            }
            fn ftl_core(&mut self, ready: Time, _: f64) -> Time {
                ready
            }
        }
        let mut pending = vec![request(&layout, &[0], &[0], 0, Time::from_ns(5))];
        plan_round_robin(&mut pending, &[0], Time::ZERO, &mut Broken, &mut PageBuffer::new(1, 4), None, &costs);
        assert_eq!(pending[0].plan.as_ref().unwrap().fault, Some(NdpFault::MediaError));
    }
}
