use nearflash_issd::sim::*;
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sizing = Sizing { min_pages_per_channel: 32, target_seconds: 5e-3, max_pages: 1 << 16 };
    for k in ["linear_regression", "string_match", "kmeans", "scan"] {
        for n in [4, 8, 16] {
            let t = std::time::Instant::now();
            let f = fig9_sim(k, n, sizing, 256, 1)?;
            println!("{k:18} cpus {n:2} frac {:.3} host {:8.1} ({:8.1}) issd {:8.1} ({:8.1}) static {:8.1} dyn {:8.1} model part {:8.1}  [{:.2}s]",
              f.static_fraction, f.host_only.bandwidth/1e6, f.model_host/1e6, f.issd_only.bandwidth/1e6, f.model_issd/1e6,
              f.static_split.bandwidth/1e6, f.dynamic_split.bandwidth/1e6, f.model_partitioned/1e6, t.elapsed().as_secs_f64());
        }
    }
    let t = std::time::Instant::now();
    let p = prototype_sim(16 * 512, 1)?;
    println!("prototype speedup {:.3} bound {:.3} model {:.3} conv {:.1} issd {:.1} [{:.2}s]", p.speedup, p.bound, p.model_speedup, p.conventional.bandwidth/1e6, p.in_storage.bandwidth/1e6, t.elapsed().as_secs_f64());
    let e = |pt: &SimPoint| pt.energy.iter().map(|x| x.1).sum::<f64>();
    println!("energy ratio {:.2}", e(&p.conventional)/e(&p.in_storage));
    for (c, v) in &p.conventional.energy { println!("  conv {:?} {:.3} nJ/B", c, v/p.conventional.input_bytes as f64*1e9); }
    for (c, v) in &p.in_storage.energy { println!("  issd {:?} {:.3} nJ/B", c, v/p.in_storage.input_bytes as f64*1e9); }
    for (k, acc) in [("linear_regression", false), ("linear_regression", true), ("scan", true), ("kmeans", true)] {
        let r = fig8_sim(k, if k == "linear_regression" {600e6} else {8e9}, 16, acc, sizing, 1)?;
        println!("fig8 {k} acc {acc} model {:?} sim {:?}", r.model_channels, r.sim_channels);
    }
    Ok(())
}
