//! Host-path throughput of the lineitem kernels on TPC-H data (run in release):
//! `cargo run --release -p nearflash-issd --example scan_throughput -- [scale_factor] [page_size] [pages_per_chunk]`.
//! Generates lineitem at the scale factor (default 1: about 6 M rows, 910 MB of 8 KiB pages), then times the
//! default scan (1% selectivity, 4-byte projection) and TPC-H Q6 on the rayon pool, and checks Q6 at SF 1
//! against the TPC-H validation answer.

use nearflash_issd::kernel::scan::{FilterSumKernel, FilterSumParams, ScanKernel, ScanParams};
use nearflash_issd::kernel::{run_parallel, Kernel, Output};
use nearflash_issd::lineitem::{generate_pages, LineitemSpec};
use nearflash_issd::PageLayout;
use std::time::Instant;

fn time(kernel: &dyn Kernel, pages: &[u8], per_chunk: usize) -> Result<(Output, f64, f64), Box<dyn std::error::Error>> {
    let mut best = f64::INFINITY;
    let mut last = None;
    for _ in 0..3 {
        let t = Instant::now();
        let r = run_parallel(kernel, pages, per_chunk)?;
        best = best.min(t.elapsed().as_secs_f64());
        last = Some(r);
    }
    let r = last.ok_or("no run")?;
    Ok((r.output.clone(), pages.len() as f64 / best / 1e9, r.alpha()))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let sf: f64 = args.get(1).map_or(Ok(1.0), |s| s.parse())?;
    let page: usize = args.get(2).map_or(Ok(8192), |s| s.parse())?;
    let per_chunk: usize = args.get(3).map_or(Ok(64), |s| s.parse())?;
    let layout = PageLayout::new(page)?;
    let spec = LineitemSpec::scale_factor(sf);
    let t = Instant::now();
    let pages = generate_pages(&spec, layout)?;
    let gen_s = t.elapsed().as_secs_f64();
    println!(
        "lineitem SF {sf}: {} MB in {} B pages, generated in {gen_s:.2} s on {} threads",
        pages.len() / 1_000_000,
        page,
        rayon::current_num_threads()
    );
    let scan = ScanKernel::new(&ScanParams::with_selectivity(0.01, spec.partkey_max())?, layout)?;
    let (out, gbps, alpha) = time(&scan, &pages, per_chunk)?;
    if let Output::Selection(s) = out {
        println!(
            "scan 1%: {:.2} GB/s, {} of {} rows ({:.3}%), {} B projected, measured alpha {:.5}",
            gbps,
            s.items,
            s.scanned,
            100.0 * s.items as f64 / s.scanned as f64,
            s.bytes.len(),
            alpha
        );
    }
    let q6 = FilterSumKernel::new(&FilterSumParams::default(), layout)?;
    let (out, gbps, _) = time(&q6, &pages, per_chunk)?;
    if let Output::Aggregate(a) = out {
        let revenue = a.sum as f64 / 1e4;
        println!("q6: {gbps:.2} GB/s, {} rows match, revenue {revenue:.4}", a.matched);
        if sf == 1.0 {
            // TPC-H Q6 validation answer at SF 1: 123141078.2283
            assert_eq!(a.sum, 1_231_410_782_283, "Q6 at SF 1 must equal the TPC-H answer");
            println!("q6 equals the TPC-H SF 1 answer 123141078.2283");
        }
    }
    Ok(())
}
