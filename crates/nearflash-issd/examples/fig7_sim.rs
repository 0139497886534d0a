//! Fig. 7 execution-driven points beside Eq. 1 (run in release):
//! `cargo run --release -p nearflash-issd --example fig7_sim -- [pages_per_channel] [n_ch...]`.

use nearflash_issd::model::Fig7Config;
use nearflash_issd::sim::{error_summary, fig7_points, Sizing};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let ms: f64 = args.get(1).map_or(Ok(5.0), |s| s.parse())?;
    let sizing = Sizing { min_pages_per_channel: 32, target_seconds: ms * 1e-3, max_pages: 1 << 16 };
    let chans: Vec<u32> = if args.len() > 2 { args[2..].iter().map(|s| s.parse()).collect::<Result<_, _>>()? } else { vec![8, 32, 64] };
    let kall = ["linear_regression", "string_match", "kmeans", "scan"];
    let only = std::env::var("K").ok();
    let kernels: Vec<&str> = kall.iter().copied().filter(|k| only.as_deref().is_none_or(|o| o == *k)).collect();
    let cfgs: Vec<Fig7Config> = match std::env::var("C") { Ok(c) => vec![Fig7Config::from_name(&c)?], Err(_) => Fig7Config::ALL.to_vec() };
    let mut all = Vec::new();
    for n in chans {
        let t = Instant::now();
        let pts = fig7_points(&cfgs, &kernels, n, sizing, 1, &serde_json::Value::Null)?;
        for p in &pts {
            println!(
                "{:>3} {:<10} {:<18} {:>6.1} MB sim {:>9.1} MB/s  model {:>9.1} MB/s ({:<9}) err {:>5.1}%  alpha {:.4} beta {:.3}",
                p.n_ch, p.config, p.kernel, p.input_bytes as f64 / 1e6, p.bandwidth / 1e6, p.model_bandwidth / 1e6, p.model_bottleneck,
                100.0 * p.model_error(), p.alpha, p.beta
            );
        }
        eprintln!("n_ch {n}: {:.2} s", t.elapsed().as_secs_f64());
        all.extend(pts);
    }
    let (mean, max) = error_summary(&all);
    println!("mean {:.2}%  max {:.2}%", 100.0 * mean, 100.0 * max);
    Ok(())
}
