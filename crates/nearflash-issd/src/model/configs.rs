//! The six system configurations of Fig. 7 as presets of the model. Every one has 8 host CPUs at 3.2 GHz (§5.2)
//! and an SSD of `n_ch` channels ("equally fast SSDs"); they differ in where Map runs, the FMC clock and the link:
//!
//! | name      | Map on                   | f_fmc   | r_host   |
//! |-----------|--------------------------|---------|----------|
//! | HOST-SATA | host CPUs                | -       | 600 MB/s |
//! | HOST-4G   | host CPUs                | -       | 4 GB/s   |
//! | HOST-8G   | host CPUs                | -       | 8 GB/s   |
//! | iSSD-400  | FMC processors           | 400 MHz | 600 MB/s |
//! | iSSD-800  | FMC processors           | 800 MHz | 4 GB/s   |
//! | iSSD-XL   | FMC stream processors    | 400 MHz (assumed) | 8 GB/s |

use super::params::*;
use super::pipeline::{Mode, SystemConfig};
use crate::error::{invalid, Result};
use serde::{Deserialize, Serialize};

/// A configuration of Fig. 7.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Fig7Config {
    #[serde(rename = "HOST-SATA")]
    HostSata,
    #[serde(rename = "HOST-4G")]
    Host4G,
    #[serde(rename = "HOST-8G")]
    Host8G,
    #[serde(rename = "iSSD-400")]
    Issd400,
    #[serde(rename = "iSSD-800")]
    Issd800,
    #[serde(rename = "iSSD-XL")]
    IssdXl,
}

impl Fig7Config {
    pub const ALL: [Fig7Config; 6] = [
        Fig7Config::HostSata,
        Fig7Config::Host4G,
        Fig7Config::Host8G,
        Fig7Config::Issd400,
        Fig7Config::Issd800,
        Fig7Config::IssdXl,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fig7Config::HostSata => "HOST-SATA",
            Fig7Config::Host4G => "HOST-4G",
            Fig7Config::Host8G => "HOST-8G",
            Fig7Config::Issd400 => "iSSD-400",
            Fig7Config::Issd800 => "iSSD-800",
            Fig7Config::IssdXl => "iSSD-XL",
        }
    }

    pub fn from_name(name: &str) -> Result<Self> {
        Self::ALL.into_iter().find(|c| c.name().eq_ignore_ascii_case(name)).ok_or_else(|| {
            invalid(format!("unknown configuration {name:?}; known: {:?}", Self::ALL.map(Fig7Config::name)))
        })
    }

    /// (mode, f_fmc, r_host) of the configuration.
    fn shape(self) -> (Mode, f64, f64) {
        match self {
            Fig7Config::HostSata => (Mode::Conventional, F_FMC_400, R_HOST_SATA),
            Fig7Config::Host4G => (Mode::Conventional, F_FMC_400, R_HOST_4G),
            Fig7Config::Host8G => (Mode::Conventional, F_FMC_400, R_HOST_8G),
            Fig7Config::Issd400 => (Mode::Issd, F_FMC_400, R_HOST_SATA),
            Fig7Config::Issd800 => (Mode::Issd, F_FMC_800, R_HOST_4G),
            Fig7Config::IssdXl => (Mode::IssdAccelerated, F_FMC_XL, R_HOST_8G),
        }
    }
}

/// Table 2's system with the given Map placement, FMC clock, link and CPU count.
pub fn system(name: &str, mode: Mode, n_ch: f64, f_fmc: f64, r_host: f64, n_host_cpu: f64) -> SystemConfig {
    SystemConfig {
        name: name.to_string(),
        mode,
        n_ch,
        r_nand: R_NAND,
        r_dram: R_DRAM,
        f_fmc,
        n_ssd_cpu: N_SSD_CPU,
        f_ssd_cpu: F_SSD_CPU,
        r_host,
        n_host_cpu,
        f_host_cpu: F_HOST_CPU,
        p: P_PIPELINABLE,
    }
}

/// A Fig. 7 configuration with `n_ch` channels.
pub fn fig7(c: Fig7Config, n_ch: f64) -> SystemConfig {
    let (mode, f_fmc, r_host) = c.shape();
    system(c.name(), mode, n_ch, f_fmc, r_host, N_HOST_CPU_FIG7)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::pipeline::bandwidth;

    #[test]
    fn names_round_trip() {
        for c in Fig7Config::ALL {
            assert_eq!(Fig7Config::from_name(c.name()).unwrap(), c);
            fig7(c, 8.0).validate().unwrap();
        }
        assert!(Fig7Config::from_name("iSSD-9000").is_err());
    }

    #[test]
    fn host_bandwidths_are_the_derived_figures() {
        // [derived] 8 CPUs x 3.2 GHz / CPB: 813, 552, 219, 8258 MB/s; compute-bound once the SSD keeps up
        let expect = [(LINEAR_REGRESSION, 813.0), (STRING_MATCH, 552.0), (KMEANS, 219.0), (SCAN, 8258.0)];
        for (k, mbps) in expect {
            let b = N_HOST_CPU_FIG7 * F_HOST_CPU / k.cpb_host / MB_PER_S;
            assert!((b - mbps).abs() / mbps < 0.01, "{}: {b}", k.name);
        }
        // through the model: k-means and string_match are compute-bound on every link (Fig. 7)
        for c in [Fig7Config::HostSata, Fig7Config::Host4G, Fig7Config::Host8G] {
            for (k, mbps) in [(STRING_MATCH, 552.0), (KMEANS, 219.0)] {
                let b = bandwidth(&fig7(c, 64.0), &k).unwrap() / MB_PER_S;
                assert!((b - mbps).abs() / mbps < 0.01, "{} {}: {b}", c.name(), k.name);
            }
        }
    }

    #[test]
    fn issd_scales_with_fmcs_and_xl_scan_saturates_above_48() {
        let at = |c, k: &KernelProfile, n| bandwidth(&fig7(c, n), k).unwrap();
        for k in [LINEAR_REGRESSION, STRING_MATCH, KMEANS] {
            for c in [Fig7Config::Issd400, Fig7Config::Issd800, Fig7Config::IssdXl] {
                assert!(at(c, &k, 64.0) > 1.99 * at(c, &k, 32.0), "{} {}", c.name(), k.name);
            }
        }
        let xl = |n| at(Fig7Config::IssdXl, &SCAN, n);
        assert!(xl(40.0) < xl(48.0));
        assert!((xl(64.0) - xl(48.0)).abs() / xl(48.0) < 1e-9);
        assert!((xl(48.0) - 48.0 * R_NAND).abs() / xl(48.0) < 1e-9);
        // with stream processors k-means beats the best host from 24 FMCs, string_match from 40 (Fig. 7)
        let best_host = |k: &KernelProfile| at(Fig7Config::Host8G, k, 64.0);
        assert!(at(Fig7Config::IssdXl, &KMEANS, 24.0) > best_host(&KMEANS));
        assert!(at(Fig7Config::IssdXl, &KMEANS, 16.0) < best_host(&KMEANS));
        assert!(at(Fig7Config::IssdXl, &STRING_MATCH, 40.0) > best_host(&STRING_MATCH));
        assert!(at(Fig7Config::IssdXl, &STRING_MATCH, 32.0) < best_host(&STRING_MATCH));
    }
}
