//! The pipelining performance model of §4.1: six stages (a) NAND->FMC, (b) FMC compute, (c) FMC->DRAM,
//! (d) SSD-CPU compute, (e) SSD->host, (f) host compute; Eq. 1 `T_total = (1-p) t_conv + max(t_a..t_f)`,
//! `B = D / T_total`. The conventional scheme is the same with alpha = beta = 1 and t_fmc = t_ssd_cpu = 0.

use super::params::{overrides, KernelProfile, CPI_EMBEDDED};
use crate::error::{invalid, Result};
use serde::{Deserialize, Serialize};

/// Where the Map stage runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Everything on the host CPUs (alpha = beta = 1, no in-SSD compute).
    Conventional,
    /// Map on the FMC processors.
    Issd,
    /// Map on the FMCs' stream processors (Table 2's accelerated CPB).
    IssdAccelerated,
}

/// A system: the SSD (channels, FMCs, controller) and the host (link, CPUs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SystemConfig {
    pub name: String,
    pub mode: Mode,
    /// Flash channels = FMCs (a real number, so iso-performance points can fall between integers).
    pub n_ch: f64,
    /// Per-channel flash rate, B/s.
    pub r_nand: f64,
    /// Controller DRAM bandwidth, B/s.
    pub r_dram: f64,
    /// FMC clock, Hz.
    pub f_fmc: f64,
    pub n_ssd_cpu: f64,
    /// SSD CPU clock, Hz.
    pub f_ssd_cpu: f64,
    /// Host link rate, B/s.
    pub r_host: f64,
    pub n_host_cpu: f64,
    /// Host CPU clock, Hz.
    pub f_host_cpu: f64,
    /// Pipelinable fraction of the execution.
    pub p: f64,
}

impl SystemConfig {
    pub fn validate(&self) -> Result<()> {
        let positive = [
            ("n_ch", self.n_ch),
            ("r_nand", self.r_nand),
            ("r_dram", self.r_dram),
            ("f_fmc", self.f_fmc),
            ("n_ssd_cpu", self.n_ssd_cpu),
            ("f_ssd_cpu", self.f_ssd_cpu),
            ("r_host", self.r_host),
            ("n_host_cpu", self.n_host_cpu),
            ("f_host_cpu", self.f_host_cpu),
        ];
        for (name, v) in positive {
            if !(v.is_finite() && v > 0.0) {
                return Err(invalid(format!("{}: {name} must be positive, got {v}", self.name)));
            }
        }
        if !(0.0..=1.0).contains(&self.p) {
            return Err(invalid(format!("{}: p must be in [0, 1], got {}", self.name, self.p)));
        }
        Ok(())
    }

    /// The same system with the Map stage on the host (for t_conv and comparisons).
    pub fn conventional(&self) -> SystemConfig {
        SystemConfig { mode: Mode::Conventional, ..self.clone() }
    }

    pub fn with_channels(&self, n_ch: f64) -> SystemConfig {
        SystemConfig { n_ch, ..self.clone() }
    }
}

overrides!(SystemConfig, "system", [n_ch, r_nand, r_dram, f_fmc, n_ssd_cpu, f_ssd_cpu, r_host, n_host_cpu, f_host_cpu, p]);

/// Validates a kernel profile's free parameters.
pub fn validate_profile(k: &KernelProfile) -> Result<()> {
    let ok = |v: f64| v.is_finite() && v >= 0.0;
    if ![k.cpb_fmc, k.cpb_fmc_accel, k.cpb_host, k.ipb_host, k.cpb_ssd_cpu].into_iter().all(ok)
        || !(0.0..=1.0).contains(&k.alpha)
        || !(0.0..=1.0).contains(&k.beta)
    {
        return Err(invalid(format!("kernel profile {} has a negative CPB or alpha/beta outside [0, 1]", k.name)));
    }
    Ok(())
}

/// The six stage times of §4.1, seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stages {
    pub nand2fmc: f64,
    pub fmc: f64,
    pub fmc2dram: f64,
    pub ssd_cpu: f64,
    pub ssd2host: f64,
    pub host_cpu: f64,
}

impl Stages {
    pub const NAMES: [&'static str; 6] = ["nand2fmc", "fmc", "fmc2dram", "ssd_cpu", "ssd2host", "host_cpu"];

    pub fn as_array(&self) -> [f64; 6] {
        [self.nand2fmc, self.fmc, self.fmc2dram, self.ssd_cpu, self.ssd2host, self.host_cpu]
    }

    /// max(t_*) and the name of the stage that sets it (first of equals).
    pub fn bottleneck(&self) -> (f64, &'static str) {
        let mut best = (f64::NEG_INFINITY, Self::NAMES[0]);
        for (t, n) in self.as_array().into_iter().zip(Self::NAMES) {
            if t > best.0 {
                best = (t, n);
            }
        }
        best
    }
}

/// Result of Eq. 1 for one configuration and kernel.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Evaluation {
    pub stages: Stages,
    /// Total time for D bytes, s.
    pub t_total: f64,
    /// Data processing bandwidth D / T_total, B/s.
    pub bandwidth: f64,
    pub bottleneck: &'static str,
    /// The alpha and beta the stages used (1 and 1 when conventional).
    pub alpha: f64,
    pub beta: f64,
}

/// FMC cycles per byte of a kernel in a mode (0 when the FMCs do not compute).
pub fn cpb_fmc(k: &KernelProfile, mode: Mode) -> f64 {
    match mode {
        Mode::Conventional => 0.0,
        Mode::Issd => k.cpb_fmc,
        Mode::IssdAccelerated => k.cpb_fmc_accel,
    }
}

/// The rate at which the conventional path's bytes pass the controller's DRAM: at least the link's. Sec. 5.2
/// reads the hosts as link-bound on scan ("all conventional machine configurations suffered the host interface
/// bandwidth limitation, making scan the only truly storage bandwidth bound workload"), which Eq. 1 taken
/// literally (alpha = 1 through r_dram = 3.2 GB/s) contradicts for the 4 and 8 GB/s links: it would cap HOST-4G and
/// HOST-8G at 3.2 GB/s, the same. An SSD built for an r_host link streams host reads through its DRAM at r_host.
pub fn host_dram_rate(cfg: &SystemConfig) -> f64 {
    cfg.r_dram.max(cfg.r_host)
}

/// Stage times for `d` bytes (§4.1 (a)-(f)).
pub fn stages(cfg: &SystemConfig, k: &KernelProfile, d: f64) -> Stages {
    let conv = cfg.mode == Mode::Conventional;
    let (alpha, beta) = if conv { (1.0, 1.0) } else { (k.alpha, k.beta) };
    Stages {
        nand2fmc: d / (cfg.n_ch * cfg.r_nand),
        // Eq. 2: D CPB_fmc / (n_ch f_fmc) = D IPB_fmc CPI_fmc / (n_ch f_fmc)
        fmc: d * cpb_fmc(k, cfg.mode) / (cfg.n_ch * cfg.f_fmc),
        // The hosts are link-bound (the paper's reading, see [`host_dram_rate`]); the iSSD's residue crosses DRAM
        // at r_dram (stage (c)).
        fmc2dram: if conv { d / host_dram_rate(cfg) } else { alpha * d / cfg.r_dram },
        ssd_cpu: if conv { 0.0 } else { alpha * d * k.cpb_ssd_cpu * CPI_EMBEDDED / (cfg.n_ssd_cpu * cfg.f_ssd_cpu) },
        ssd2host: alpha * beta * d / cfg.r_host,
        host_cpu: alpha * beta * d * k.cpb_host / (cfg.n_host_cpu * cfg.f_host_cpu),
    }
}

/// Eq. 1 for `d` bytes. For the conventional scheme T_total = t_conv = max(t_*) (nothing is offloaded, so p
/// plays no part); for the iSSD, T_total = (1-p) t_conv + max(t_*) with t_conv from the same system run
/// conventionally.
pub fn evaluate(cfg: &SystemConfig, k: &KernelProfile, d: f64) -> Result<Evaluation> {
    cfg.validate()?;
    validate_profile(k)?;
    if !(d.is_finite() && d > 0.0) {
        return Err(invalid(format!("data size must be positive, got {d}")));
    }
    let s = stages(cfg, k, d);
    let (t_max, bottleneck) = s.bottleneck();
    let t_total = if cfg.mode == Mode::Conventional {
        t_max
    } else {
        let t_conv = stages(&cfg.conventional(), k, d).bottleneck().0;
        (1.0 - cfg.p) * t_conv + t_max
    };
    let conv = cfg.mode == Mode::Conventional;
    Ok(Evaluation {
        stages: s,
        t_total,
        bandwidth: d / t_total,
        bottleneck,
        alpha: if conv { 1.0 } else { k.alpha },
        beta: if conv { 1.0 } else { k.beta },
    })
}

/// Steady-state bandwidth (independent of D in this model), B/s.
pub fn bandwidth(cfg: &SystemConfig, k: &KernelProfile) -> Result<f64> {
    Ok(evaluate(cfg, k, 1e9)?.bandwidth)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::configs::{fig7, Fig7Config};
    use crate::model::params::*;

    #[test]
    fn stages_follow_the_written_formulas() {
        let cfg = fig7(Fig7Config::Issd400, 16.0);
        let k = LINEAR_REGRESSION;
        let d = 1e9;
        let s = stages(&cfg, &k, d);
        assert_eq!(s.nand2fmc, d / (16.0 * R_NAND));
        assert_eq!(s.fmc, d * 33.6 / (16.0 * F_FMC_400));
        assert_eq!(s.fmc2dram, 0.01 * d / R_DRAM);
        assert_eq!(s.ssd_cpu, 0.01 * d * CPB_SSD_CPU / (N_SSD_CPU * F_SSD_CPU));
        assert_eq!(s.ssd2host, 0.01 * 0.1 * d / R_HOST_SATA);
        assert_eq!(s.host_cpu, 0.01 * 0.1 * d * 31.5 / (8.0 * F_HOST_CPU));
        let e = evaluate(&cfg, &k, d).unwrap();
        assert_eq!((e.bottleneck, e.t_total), ("fmc", s.fmc));
        let conv = stages(&cfg.conventional(), &k, d);
        assert_eq!((conv.fmc, conv.ssd_cpu), (0.0, 0.0));
        assert_eq!(conv.fmc2dram, d / R_DRAM);
        // link-bound hosts: HOST-8G's DRAM stage passes 8 GB/s, so its scan is not capped at r_dram
        let host8 = stages(&fig7(Fig7Config::Host8G, 64.0), &SCAN, d);
        assert_eq!(host8.fmc2dram, d / R_HOST_8G);
        let (b4, b8) = (bandwidth(&fig7(Fig7Config::Host4G, 64.0), &SCAN).unwrap(), bandwidth(&fig7(Fig7Config::Host8G, 64.0), &SCAN).unwrap());
        assert!(b8 > b4 * 1.5 && b4 > R_DRAM, "HOST-4G {b4}, HOST-8G {b8}");
    }

    #[test]
    fn non_pipelinable_work_adds_the_conventional_time() {
        let mut cfg = fig7(Fig7Config::Issd400, 16.0);
        let k = SCAN;
        let full = evaluate(&cfg, &k, 1e9).unwrap();
        cfg.p = 0.5;
        let half = evaluate(&cfg, &k, 1e9).unwrap();
        let t_conv = evaluate(&cfg.conventional(), &k, 1e9).unwrap().t_total;
        assert!((half.t_total - (full.t_total + 0.5 * t_conv)).abs() < 1e-12);
    }

    #[test]
    fn bad_inputs_are_errors() {
        let cfg = fig7(Fig7Config::HostSata, 8.0);
        assert!(evaluate(&cfg.with_channels(0.0), &SCAN, 1.0).is_err());
        assert!(evaluate(&cfg, &SCAN, -1.0).is_err());
        assert!(evaluate(&SystemConfig { p: 2.0, ..cfg.clone() }, &SCAN, 1.0).is_err());
        assert!(evaluate(&cfg, &KernelProfile { alpha: 1.5, ..SCAN }, 1.0).is_err());
    }
}
