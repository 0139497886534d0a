//! Parameters of the iSSD analytic model, each with unit and source: Table 1 (workload characterisation on a
//! Nehalem host), Table 2 (evaluation parameters), the energy table of Fig. 10, and the free parameters the paper
//! does not give (marked "assumed", with the reason). SI units throughout: bytes, seconds, B/s, Hz, J, W.

use crate::error::{invalid, Result};
use serde::{Deserialize, Serialize};

/// 1 MB/s in B/s (the paper's MB are decimal: 8 x 3.2 GHz / 31.5 CPB = 813 MB/s).
pub const MB_PER_S: f64 = 1e6;
/// 1 GB/s in B/s.
pub const GB_PER_S: f64 = 1e9;
pub const MHZ: f64 = 1e6;
pub const GHZ: f64 = 1e9;

// ---- Table 2: hardware ----

/// Effective data rate of one flash channel, B/s (Table 2, r_nand = 400 MB/s; fixed in §5.1).
pub const R_NAND: f64 = 400.0 * MB_PER_S;
/// Controller DRAM bandwidth, B/s (Table 2, 3.2 GB/s @ 800 MHz, 32-bit bus).
pub const R_DRAM: f64 = 3.2 * GB_PER_S;
/// Flash channel counts swept (Table 2: 8-64 in steps of 8).
pub const N_CH_SWEEP: [u32; 8] = [8, 16, 24, 32, 40, 48, 56, 64];
/// FMC processor clocks, Hz (Table 2: 400 MHz or 800 MHz).
pub const F_FMC_400: f64 = 400.0 * MHZ;
pub const F_FMC_800: f64 = 800.0 * MHZ;
/// Clock of the stream-processor FMCs of iSSD-XL, Hz. Assumed: not given; Table 2's base FMC clock. With scan's
/// accelerated CPB of 1.0 this makes an FMC consume exactly r_nand, matching Fig. 9's 12.8 GB/s at 32 channels.
pub const F_FMC_XL: f64 = F_FMC_400;
/// Embedded SSD CPUs (Table 2: 4 at 400 MHz).
pub const N_SSD_CPU: f64 = 4.0;
pub const F_SSD_CPU: f64 = 400.0 * MHZ;
/// Host link rates, B/s (Table 2: 600 MB/s SATA, 4 or 8 GB/s PCIe).
pub const R_HOST_SATA: f64 = 600.0 * MB_PER_S;
pub const R_HOST_4G: f64 = 4.0 * GB_PER_S;
pub const R_HOST_8G: f64 = 8.0 * GB_PER_S;
/// Host CPU counts (Table 2: 4, 8, 16) and clock (3.2 GHz); Fig. 7 uses 8 CPUs (§5.2).
pub const N_HOST_CPU_SWEEP: [u32; 3] = [4, 8, 16];
pub const N_HOST_CPU_FIG7: f64 = 8.0;
pub const F_HOST_CPU: f64 = 3.2 * GHZ;
/// Pipelinable fraction of the execution (Table 2: p = 1).
pub const P_PIPELINABLE: f64 = 1.0;
/// CPI of the FMC processor and of the embedded SSD CPUs. Assumed: single-issue in-order cores without caches
/// (§3.1; §5.2 counts an FMC as "400 MHz x 1 instruction/cycle"), so IPB = CPB on them.
pub const CPI_EMBEDDED: f64 = 1.0;

// ---- Table 1: workload characterisation (Nehalem host, icc -O3, VTune) ----

/// One row of Table 1.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Table1Row {
    pub name: &'static str,
    /// Input size, MB.
    pub input_mb: f64,
    /// Cycles per byte on the host.
    pub cpb: f64,
    /// Instructions per byte on the host.
    pub ipb: f64,
    /// Cycles per instruction on the host.
    pub cpi: f64,
}

const fn row(name: &'static str, input_mb: f64, cpb: f64, ipb: f64, cpi: f64) -> Table1Row {
    Table1Row { name, input_mb, cpb, ipb, cpi }
}

/// Table 1 of the paper, in its order.
pub const TABLE1: [Table1Row; 10] = [
    row("word_count", 105.0, 90.0, 87.1, 1.0),
    row("linear_regression", 542.0, 31.5, 40.2, 0.8),
    row("histogram", 1406.0, 62.4, 37.4, 1.7),
    row("string_match", 542.0, 46.4, 54.0, 0.9),
    row("scalparc", 1161.0, 83.1, 133.7, 0.6),
    row("kmeans", 240.0, 117.0, 117.1, 1.0),
    row("hop", 60.0, 48.6, 41.2, 1.2),
    row("naive_bayes", 126.0, 49.3, 83.6, 0.6),
    row("grep", 1500.0, 5.7, 4.6, 1.2),
    row("scan", 1280.0, 3.1, 3.9, 0.8),
];

pub fn table1(name: &str) -> Result<Table1Row> {
    TABLE1.iter().copied().find(|r| r.name == name).ok_or_else(|| invalid(format!("{name:?} is not in Table 1")))
}

// ---- Energy parameters (Fig. 10, right) ----

/// Energy parameters of the host and the (i)SSD.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EnergyParams {
    /// Host CPU energy per instruction, J (Fig. 10: 0.82 nJ/inst [35], 22 nm).
    pub e_host_cpu_inst: f64,
    /// Host main-memory power, W (Fig. 10: 420 mW [38]).
    pub p_host_dram: f64,
    /// Host chipset power, W (Fig. 10: 5.49 W [34]).
    pub p_chipset: f64,
    /// Host I/O bus power, W (Fig. 10: 9.61 W [34]).
    pub p_io: f64,
    /// Energy of one 8 kB NAND page read, J (Fig. 10: 3.31 uJ).
    pub e_nand_read_8k: f64,
    /// Energy of one 8 kB NAND page program, J (Fig. 10: 64.94 uJ; unused by read-only kernels).
    pub e_nand_write_8k: f64,
    /// SSD controller DRAM power, W (Fig. 10: 154 mW [38]).
    pub p_ssd_dram: f64,
    /// SSD host-interface energy, J/B (Fig. 10: 1.05 nJ/B [40]).
    pub e_host_if: f64,
    /// FMC / embedded processor energy per instruction, J (Fig. 10: 192 pJ/inst [36], 45 nm).
    pub e_proc_inst: f64,
    /// Stream-processor ALU op, multiply, register access, SRAM read, J (Fig. 10: 2.11, 67.6, 4.23, 21.1 pJ [27][37]).
    pub e_stream_alu: f64,
    pub e_stream_mul: f64,
    pub e_stream_reg: f64,
    pub e_stream_sram: f64,
    /// Processor scratchpad SRAM read, J (Fig. 10: 89.3 pJ/read [37]).
    pub e_proc_sram: f64,
    /// Static power, W. Assumed 0: the paper gives none, and Fig. 10 and the prototype's 5.2x compare dynamic
    /// energy; set it to add E_static = P_static x T_total.
    pub p_static: f64,
}

/// Bytes of the NAND page the read/write energies refer to.
pub const NAND_ENERGY_PAGE_BYTES: f64 = 8192.0;
/// Scratchpad/stream SRAM reads per input byte. Assumed: input words of 32 bits are read once each.
pub const SRAM_READS_PER_BYTE: f64 = 0.25;

impl Default for EnergyParams {
    fn default() -> Self {
        Self {
            e_host_cpu_inst: 0.82e-9,
            p_host_dram: 0.420,
            p_chipset: 5.49,
            p_io: 9.61,
            e_nand_read_8k: 3.31e-6,
            e_nand_write_8k: 64.94e-6,
            p_ssd_dram: 0.154,
            e_host_if: 1.05e-9,
            e_proc_inst: 192e-12,
            e_stream_alu: 2.11e-12,
            e_stream_mul: 67.6e-12,
            e_stream_reg: 4.23e-12,
            e_stream_sram: 21.1e-12,
            e_proc_sram: 89.3e-12,
            p_static: 0.0,
        }
    }
}

// ---- Kernel profiles (Table 2 and the assumed free parameters) ----

/// Stream-processor operations per input byte. Assumed: the paper gives per-op energies but no op counts; the
/// counts follow each kernel's dataflow (Fig. 4) as noted on each profile.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StreamOps {
    pub alu: f64,
    pub mul: f64,
    pub reg: f64,
    pub sram: f64,
}

/// What the model needs to know about a kernel.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct KernelProfile {
    pub name: &'static str,
    /// FMC processor cycles per byte (Table 2).
    pub cpb_fmc: f64,
    /// FMC cycles per byte with the stream processor (Table 2).
    pub cpb_fmc_accel: f64,
    /// Host cycles and instructions per byte (Tables 1-2).
    pub cpb_host: f64,
    pub ipb_host: f64,
    /// Fraction of the input the FMCs pass to DRAM (Table 2: 0.05 for scan, "< 0.05" for the others).
    pub alpha: f64,
    /// Fraction of the SSD CPUs' input sent to the host (assumed, see [`BETA`]).
    pub beta: f64,
    /// SSD CPU cycles per byte of FMC output (assumed, see [`CPB_SSD_CPU`]).
    pub cpb_ssd_cpu: f64,
    pub stream: StreamOps,
}

/// Sets numeric fields by name (e.g. `("alpha", 0.02)`); unknown names are errors.
macro_rules! overrides {
    ($ty:ty, $what:literal, [$($field:ident),*]) => {
        impl $ty {
            pub fn with_overrides(mut self, kv: &[(String, f64)]) -> Result<Self> {
                for (k, v) in kv {
                    match k.as_str() {
                        $(stringify!($field) => self.$field = *v,)*
                        _ => return Err(invalid(format!(
                            concat!("unknown ", $what, " parameter {:?}; known: {:?}"), k, [$(stringify!($field)),*]
                        ))),
                    }
                }
                Ok(self)
            }
        }
    };
}
pub(crate) use overrides;

overrides!(KernelProfile, "kernel profile", [cpb_fmc, cpb_fmc_accel, cpb_host, ipb_host, alpha, beta, cpb_ssd_cpu]);
overrides!(EnergyParams, "energy", [
    e_host_cpu_inst, p_host_dram, p_chipset, p_io, e_nand_read_8k, e_nand_write_8k, p_ssd_dram, e_host_if,
    e_proc_inst, e_stream_alu, e_stream_mul, e_stream_reg, e_stream_sram, e_proc_sram, p_static
]);

/// alpha of scan (Table 2).
pub const ALPHA_SCAN: f64 = 0.05;
/// alpha of the other kernels. Assumed: Table 2 says only "< 0.05"; 0.01 is the order of what their Map stages
/// emit per 8 kB page (a few sums or counts), and any value below 0.05 leaves stages (c)-(f) off the critical
/// path for n_ch <= 64.
pub const ALPHA_OTHERS: f64 = 0.01;
/// beta. Assumed: not given; the Reduce on the SSD CPUs keeps a tenth of its input for the host. Any beta below
/// 0.9 keeps the 600 MB/s link off scan's critical path up to 32 channels (Fig. 9's 12.8 GB/s).
pub const BETA: f64 = 0.1;
/// Channel count at which iSSD-XL's scan saturates (Fig. 7: "when the number of FMCs exceeded 48").
pub const SCAN_XL_WALL_CHANNELS: f64 = 48.0;
/// SSD CPU cycles per byte of FMC output. Assumed, calibrated: the paper gives no value and attributes scan's
/// wall at 48 FMCs to the internal DRAM, which r_dram / alpha = 64 GB/s cannot produce; the SSD CPU stage
/// produces it when n_ssd_cpu f_ssd_cpu / (alpha_scan CPB) = 48 r_nand, i.e. CPB = 5/3 cycles per byte.
pub const CPB_SSD_CPU: f64 = N_SSD_CPU * F_SSD_CPU / (ALPHA_SCAN * SCAN_XL_WALL_CHANNELS * R_NAND);

/// linear_regression (Table 2: 33.6 / 10.1 / 31.5). Stream ops: per 2-byte point 3 multiplies (x², y², xy),
/// 5 accumulating adds and 5 accumulator register writes.
pub const LINEAR_REGRESSION: KernelProfile = KernelProfile {
    name: "linear_regression",
    cpb_fmc: 33.6,
    cpb_fmc_accel: 10.1,
    cpb_host: 31.5,
    ipb_host: 40.2,
    alpha: ALPHA_OTHERS,
    beta: BETA,
    cpb_ssd_cpu: CPB_SSD_CPU,
    stream: StreamOps { alu: 2.5, mul: 1.5, reg: 2.5, sram: SRAM_READS_PER_BYTE },
};

/// string_match (Table 2: 38.8 / 28.3 / 46.4). Stream ops: each byte compared with the current byte of each of
/// Phoenix's 4 keys (4 ALU ops) and 4 match-state register updates.
pub const STRING_MATCH: KernelProfile = KernelProfile {
    name: "string_match",
    cpb_fmc: 38.8,
    cpb_fmc_accel: 28.3,
    cpb_host: 46.4,
    ipb_host: 54.0,
    alpha: ALPHA_OTHERS,
    beta: BETA,
    cpb_ssd_cpu: CPB_SSD_CPU,
    stream: StreamOps { alu: 4.0, mul: 0.0, reg: 4.0, sram: SRAM_READS_PER_BYTE },
};

/// k-means (Table 2: 157.6 / 32.4 / 117.0). Stream ops: 3-D i32 points (12 B) against 4 centroids (k is not
/// given; assumed 4): per point and centroid 3 subtracts, 3 multiplies, 3 adds, 1 compare, 3 register reads,
/// i.e. per byte 4 x 7 / 12 ALU ops, 4 x 3 / 12 = 1 multiply and 1 register access.
pub const KMEANS: KernelProfile = KernelProfile {
    name: "kmeans",
    cpb_fmc: 157.6,
    cpb_fmc_accel: 32.4,
    cpb_host: 117.0,
    ipb_host: 117.1,
    alpha: ALPHA_OTHERS,
    beta: BETA,
    cpb_ssd_cpu: CPB_SSD_CPU,
    stream: StreamOps { alu: 7.0 / 3.0, mul: 1.0, reg: 1.0, sram: SRAM_READS_PER_BYTE },
};

/// scan (Table 2: 4.0 / 1.0 / 3.1, the FMC values from the prototype, §5.1). Stream ops: one 4-byte key
/// compared per 150-byte record, data streamed through SRAM.
pub const SCAN: KernelProfile = KernelProfile {
    name: "scan",
    cpb_fmc: 4.0,
    cpb_fmc_accel: 1.0,
    cpb_host: 3.1,
    ipb_host: 3.9,
    alpha: ALPHA_SCAN,
    beta: BETA,
    cpb_ssd_cpu: CPB_SSD_CPU,
    stream: StreamOps { alu: 2.0 / 150.0, mul: 0.0, reg: 2.0 / 150.0, sram: SRAM_READS_PER_BYTE },
};

/// The four kernels of Table 2, in its order.
pub const PROFILES: [KernelProfile; 4] = [LINEAR_REGRESSION, STRING_MATCH, KMEANS, SCAN];

/// Profile by kernel name.
pub fn profile(name: &str) -> Result<KernelProfile> {
    PROFILES.iter().copied().find(|p| p.name == name).ok_or_else(|| {
        invalid(format!("no model profile for {name:?} (Table 2 covers linear_regression, string_match, kmeans, scan)"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table1_cpb_is_ipb_times_cpi_within_rounding() {
        for r in TABLE1 {
            let rel = (r.ipb * r.cpi - r.cpb).abs() / r.cpb;
            assert!(rel < 0.05, "{}: {} x {} vs {}", r.name, r.ipb, r.cpi, r.cpb);
        }
    }

    #[test]
    fn profiles_agree_with_table1_and_the_assumed_wall() {
        for p in PROFILES {
            let t = table1(p.name).unwrap();
            assert_eq!((p.cpb_host, p.ipb_host), (t.cpb, t.ipb));
            assert!(p.alpha <= 0.05 && p.beta <= 1.0);
        }
        assert!((CPB_SSD_CPU - 5.0 / 3.0).abs() < 1e-12);
        assert!(profile("sort").is_err());
        let p = SCAN.with_overrides(&[("alpha".into(), 0.2), ("beta".into(), 0.5)]).unwrap();
        assert_eq!((p.alpha, p.beta, p.cpb_fmc), (0.2, 0.5, SCAN.cpb_fmc));
        assert!(SCAN.with_overrides(&[("gamma".into(), 1.0)]).is_err());
        let e = EnergyParams::default().with_overrides(&[("p_static".into(), 3.0)]).unwrap();
        assert_eq!(e.p_static, 3.0);
        assert!(table1("sort").is_err());
    }
}
