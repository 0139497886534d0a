//! The paper's studies on top of the model: Fig. 7 (bandwidth vs FMC count for the six configurations), Fig. 8
//! (iso-performance FMC counts), Fig. 9 (partitioning between iSSD and host) and Fig. 10 (energy breakdown).
//!
//! Partitioning (§4.2): `D = D_issd + D_host`, `T = max(D_issd / B_issd, D_host / B_host)`, minimal when both
//! finish together: `D_issd = D B_issd / (B_issd + B_host)`, `T = D / (B_issd + B_host)`;
//! `E_dyn = D_issd EPB_issd + D_host EPB_host_cpu + D_host EPB_ssd2host`, EPB_issd from the pipelined model at
//! beta = 0. Two bounds the paper states in words (§5.2) are made explicit: the host's share crosses the link
//! (B_host = min(n f / CPB, r_host)), and both shares come out of the same flash (T >= D / (n_ch r_nand)).

use super::configs::{fig7, system, Fig7Config};
use super::energy::{energy, epb_terms, Energy};
use super::params::*;
use super::pipeline::{bandwidth, evaluate, Mode, SystemConfig};
use crate::error::{invalid, Result};
use serde::Serialize;

/// One point of Fig. 7.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fig7Point {
    pub config: &'static str,
    pub n_ch: u32,
    /// B/s.
    pub bandwidth: f64,
    pub bottleneck: &'static str,
}

/// Fig. 7 for one kernel: every configuration at every channel count of Table 2.
pub fn fig7_sweep(k: &KernelProfile) -> Result<Vec<Fig7Point>> {
    let mut out = Vec::new();
    for c in Fig7Config::ALL {
        for n in N_CH_SWEEP {
            let ev = evaluate(&fig7(c, f64::from(n)), k, 1e9)?;
            out.push(Fig7Point { config: c.name(), n_ch: n, bandwidth: ev.bandwidth, bottleneck: ev.bottleneck });
        }
    }
    Ok(out)
}

/// Channels of the conventional system's SSD in Fig. 8. Assumed: the paper does not say; the host gets Table 2's
/// largest SSD, so it is limited by its CPUs, link or DRAM and never by flash.
pub const FIG8_HOST_CHANNELS: f64 = 64.0;

/// Fewest FMCs (a real number) for which the iSSD `issd` (its n_ch ignored) matches the bandwidth of `host`;
/// `None` if no count up to 10 000 does (a wall below the host's bandwidth).
pub fn iso_channels(issd: &SystemConfig, host: &SystemConfig, k: &KernelProfile) -> Result<Option<f64>> {
    let target = bandwidth(host, k)?;
    let meets = |n: f64| -> Result<bool> { Ok(bandwidth(&issd.with_channels(n), k)? >= target * (1.0 - 1e-12)) };
    let (mut lo, mut hi) = (1e-6, 1e4);
    if !meets(hi)? {
        return Ok(None);
    }
    // the iSSD bandwidth does not fall as channels are added, so the predicate is monotone
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if meets(mid)? {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(Some(hi))
}

/// One point of Fig. 8.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IsoPoint {
    pub n_host_cpu: u32,
    pub accelerated: bool,
    /// FMCs (400 MHz) needed to match the host; `None` if unreachable.
    pub channels: Option<f64>,
}

/// Fig. 8 for one kernel and link rate: iSSD FMCs at 400 MHz (with or without stream processors) matching hosts
/// of 4, 8 and 16 CPUs on the same link.
pub fn fig8_iso(k: &KernelProfile, r_host: f64) -> Result<Vec<IsoPoint>> {
    let mut out = Vec::new();
    for n in N_HOST_CPU_SWEEP {
        let host = system("host", Mode::Conventional, FIG8_HOST_CHANNELS, F_FMC_400, r_host, f64::from(n));
        for accelerated in [false, true] {
            let mode = if accelerated { Mode::IssdAccelerated } else { Mode::Issd };
            let issd = system("issd", mode, 1.0, F_FMC_400, r_host, f64::from(n));
            out.push(IsoPoint { n_host_cpu: n, accelerated, channels: iso_channels(&issd, &host, k)? });
        }
    }
    Ok(out)
}

/// A partitioned run (§4.2).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Partition {
    /// Share of the input given to the iSSD.
    pub fraction_issd: f64,
    /// B/s of the iSSD alone, of the host's share, and combined.
    pub b_issd: f64,
    pub b_host: f64,
    pub bandwidth: f64,
    pub t_total: f64,
    /// "balanced" when both finish together, "flash" when the shared flash bandwidth bounds the run.
    pub bound: &'static str,
    pub e_dyn: f64,
    pub e_total: f64,
}

/// Splits `d` bytes between the iSSD of `issd` and its host's CPUs so both finish together.
pub fn partition(issd: &SystemConfig, k: &KernelProfile, e: &EnergyParams, d: f64) -> Result<Partition> {
    if issd.mode == Mode::Conventional {
        return Err(invalid("partitioning needs an iSSD configuration"));
    }
    let b_issd = evaluate(issd, k, d)?.bandwidth;
    let b_host = (issd.n_host_cpu * issd.f_host_cpu / k.cpb_host).min(issd.r_host);
    let fraction_issd = b_issd / (b_issd + b_host);
    let (d_issd, d_host) = (d * fraction_issd, d * (1.0 - fraction_issd));
    let balanced = (d_issd / b_issd).max(d_host / b_host);
    let flash = d / (issd.n_ch * issd.r_nand);
    let (t_total, bound) = if flash > balanced { (flash, "flash") } else { (balanced, "balanced") };
    let t = epb_terms(issd, k, e);
    let epb_issd = energy(issd, &KernelProfile { beta: 0.0, ..*k }, e, d)?.epb_dyn();
    let e_dyn = d_issd * epb_issd + d_host * t.host_cpu + d_host * t.ssd2host();
    Ok(Partition {
        fraction_issd,
        b_issd,
        b_host,
        bandwidth: d / t_total,
        t_total,
        bound,
        e_dyn,
        e_total: e_dyn + e.p_static * t_total,
    })
}

/// Channels of Fig. 9 (§5.2: n_ch = 32).
pub const FIG9_CHANNELS: f64 = 32.0;

/// One bar group of Fig. 9.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fig9Point {
    pub n_host_cpu: u32,
    /// B/s of the conventional system, the iSSD alone, and both with partitioning.
    pub host_only: f64,
    pub issd_only: f64,
    pub combined: f64,
}

/// Fig. 9 for one kernel: 32 channels, stream-processor FMCs at 400 MHz, 600 MB/s link (the setting of the
/// paper's "nearly 1,700 MB/s over a 600 MB/s link"), hosts of 4, 8 and 16 CPUs.
pub fn fig9_sweep(k: &KernelProfile) -> Result<Vec<Fig9Point>> {
    let e = EnergyParams::default();
    N_HOST_CPU_SWEEP
        .iter()
        .map(|&n| {
            let issd =
                system("iSSD-XL/SATA", Mode::IssdAccelerated, FIG9_CHANNELS, F_FMC_XL, R_HOST_SATA, f64::from(n));
            Ok(Fig9Point {
                n_host_cpu: n,
                host_only: bandwidth(&issd.conventional(), k)?,
                issd_only: bandwidth(&issd, k)?,
                combined: partition(&issd, k, &e, 1e9)?.bandwidth,
            })
        })
        .collect()
}

/// Channels of Fig. 10 (§5.2: n_ch = 8).
pub const FIG10_CHANNELS: f64 = 8.0;

/// Fig. 10 for one kernel: per-byte energy of conventional host processing (HOST-SATA), the iSSD without
/// acceleration (iSSD-400) and with it (iSSD-XL), all with 8 channels and 8 host CPUs.
pub fn fig10_breakdown(k: &KernelProfile, e: &EnergyParams) -> Result<Vec<(&'static str, Energy)>> {
    [Fig7Config::HostSata, Fig7Config::Issd400, Fig7Config::IssdXl]
        .into_iter()
        .map(|c| Ok((c.name(), energy(&fig7(c, FIG10_CHANNELS), k, e, 1e9)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(a: f64, b: f64) -> f64 {
        (a - b).abs() / b.abs()
    }

    #[test]
    fn iso_performance_reproduces_the_derived_fmc_counts() {
        // [derived] linear_regression at 600 MB/s: 11.9 MB/s per FMC (39.6 accelerated) -> 50.4 / 15.2 FMCs
        let pts = fig8_iso(&LINEAR_REGRESSION, R_HOST_SATA).unwrap();
        let at =
            |cpus, acc| pts.iter().find(|p| p.n_host_cpu == cpus && p.accelerated == acc).unwrap().channels.unwrap();
        assert!(rel(at(16, false), 50.4) < 0.01, "{}", at(16, false));
        assert!(rel(at(16, true), 15.2) < 0.01, "{}", at(16, true));
        // with 8 GB/s, fewer than 41 accelerated FMCs match 16 CPUs on scan, k-means, linear_regression (Fig. 8)
        for k in [SCAN, KMEANS, LINEAR_REGRESSION] {
            let p = fig8_iso(&k, R_HOST_8G).unwrap();
            let n = p.iter().find(|p| p.n_host_cpu == 16 && p.accelerated).unwrap().channels.unwrap();
            assert!(n < 41.1, "{}: {n}", k.name);
        }
    }

    #[test]
    fn an_unreachable_host_has_no_iso_point() {
        let host = system("host", Mode::Conventional, 64.0, F_FMC_400, R_HOST_8G, 16.0);
        let issd = system("issd", Mode::Issd, 1.0, F_FMC_400, R_HOST_8G, 16.0);
        let tiny_dram = SystemConfig { r_dram: 1e3, ..issd };
        assert_eq!(iso_channels(&tiny_dram, &host, &SCAN).unwrap(), None);
    }

    #[test]
    fn partitioning_adds_host_and_issd_except_for_scan() {
        // scan: the iSSD alone reaches raw flash bandwidth at 32 channels, 12.8 GB/s; partitioning adds nothing
        let scan = fig9_sweep(&SCAN).unwrap();
        for p in &scan {
            assert!(rel(p.issd_only, 12.8e9) < 1e-9 && rel(p.combined, 12.8e9) < 1e-9);
        }
        // linear_regression over SATA: 4 CPUs (406 MB/s) + 32 x 39.6 MB/s = "nearly 1,700 MB/s"
        let lr = fig9_sweep(&LINEAR_REGRESSION).unwrap();
        let four = lr.iter().find(|p| p.n_host_cpu == 4).unwrap();
        assert!(rel(four.combined, 4.0 * 3.2e9 / 31.5 + 32.0 * 400e6 / 10.1) < 1e-9);
        assert!((1.6e9..1.7e9).contains(&four.combined));
        for p in lr {
            assert!(p.combined > p.issd_only && p.combined > p.host_only);
        }
    }

    #[test]
    fn partition_balances_finish_times_and_energy_follows_the_split() {
        let issd = system("x", Mode::IssdAccelerated, 32.0, F_FMC_XL, R_HOST_SATA, 4.0);
        let e = EnergyParams::default();
        let p = partition(&issd, &KMEANS, &e, 1e9).unwrap();
        assert_eq!(p.bound, "balanced");
        let t_issd = p.fraction_issd * 1e9 / p.b_issd;
        let t_host = (1.0 - p.fraction_issd) * 1e9 / p.b_host;
        assert!(rel(t_issd, t_host) < 1e-9 && rel(p.t_total, t_issd) < 1e-9);
        assert!(p.e_dyn > 0.0 && p.e_total == p.e_dyn);
        assert!(partition(&issd.conventional(), &KMEANS, &e, 1e9).is_err());
    }

    #[test]
    fn fig10_issd_saves_energy_on_every_kernel() {
        let e = EnergyParams::default();
        for k in PROFILES {
            let b = fig10_breakdown(&k, &e).unwrap();
            let (host, plain, xl) = (b[0].1.epb_dyn(), b[1].1.epb_dyn(), b[2].1.epb_dyn());
            assert!(host > 3.0 * plain && plain > xl, "{}: {host} {plain} {xl}", k.name);
        }
        let sweep = fig7_sweep(&SCAN).unwrap();
        assert_eq!(sweep.len(), 6 * 8);
    }
}
