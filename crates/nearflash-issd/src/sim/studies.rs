//! Execution-driven counterparts of Fig. 8 (iso-performance), Fig. 9 (partitioning) and the prototype scan (§4.3).
//! Each run is a [`SimPoint`] with Eq. 1 beside it; the callers (the Python experiments) compare with the paper.

use super::{build_device, fig7_dataset, issd_setup, place, prefix_job, prototype_scan, prototype_setup, run_on, SimPoint, Sizing, PAGE};
use crate::error::{invalid, Result};
use crate::initiator::Strategy;
use crate::model::params::{F_FMC_400, F_FMC_XL, R_HOST_SATA};
use crate::model::studies::{FIG8_HOST_CHANNELS, FIG9_CHANNELS};
use crate::model::{self, EnergyParams, Mode};
use serde::Serialize;

/// One bar group of Fig. 9, executed: the host alone, the iSSD alone, and both with a static and a dynamic split.
#[derive(Debug, Clone, Serialize)]
pub struct Fig9Sim {
    pub kernel: String,
    pub n_host_cpu: u32,
    /// Share of the input the model's static split gives the iSSD (both finish together).
    pub static_fraction: f64,
    pub dynamic_chunk_pages: u32,
    pub host_only: SimPoint,
    pub issd_only: SimPoint,
    pub static_split: SimPoint,
    pub dynamic_split: SimPoint,
    /// Eq. 1 / §4.2 bandwidths of the same system: host, iSSD, partitioned.
    pub model_host: f64,
    pub model_issd: f64,
    pub model_partitioned: f64,
}

/// Fig. 9 executed: 32 channels, stream-processor FMCs at 400 MHz, a 600 MB/s link, `n_host_cpu` host CPUs.
/// The dynamic split hands out chunks of `chunks`-th of the input.
pub fn fig9_sim(kernel: &'static str, n_host_cpu: u32, sizing: Sizing, chunks: u32, seed: u64) -> Result<Fig9Sim> {
    if chunks == 0 {
        return Err(invalid("the dynamic split needs at least one chunk"));
    }
    let n_ch = FIG9_CHANNELS as u32;
    let s = issd_setup("iSSD-XL/SATA", Mode::IssdAccelerated, n_ch, F_FMC_XL, R_HOST_SATA, n_host_cpu);
    let profile = model::profile(kernel)?;
    let part = model::partition(&s.model, &profile, &EnergyParams::default(), 1e9)?;
    let host_model = s.model.conventional();
    let pages = sizing.pages_for(part.bandwidth, n_ch);
    let mut dev = build_device(&s, seed)?;
    let job = place(&mut dev, &[fig7_dataset(kernel, pages, seed)?], s.accelerate)?.remove(0);
    // each strategy processes about the same time's worth of data: the slower ones a prefix of it
    let lba = dev.lba_bytes();
    let sized = |b: f64| prefix_job(&job, sizing.pages_for(b, n_ch).min(pages), lba);
    let host_only = run_on(&mut dev, &s, &host_model, &sized(part.b_host), Strategy::Conventional)?;
    let issd_only = run_on(&mut dev, &s, &s.model, &sized(part.b_issd), Strategy::InStorage)?;
    let static_split = run_on(&mut dev, &s, &s.model, &job, Strategy::Static { fraction: part.fraction_issd })?;
    let chunk_pages = (pages as u32).div_ceil(chunks).max(1);
    let dynamic_split = run_on(&mut dev, &s, &s.model, &job, Strategy::Dynamic { chunk_pages })?;
    Ok(Fig9Sim {
        kernel: kernel.into(),
        n_host_cpu,
        static_fraction: part.fraction_issd,
        dynamic_chunk_pages: chunk_pages,
        host_only,
        issd_only,
        static_split,
        dynamic_split,
        model_host: model::bandwidth(&host_model, &profile)?,
        model_issd: part.b_issd,
        model_partitioned: part.bandwidth,
    })
}

/// One Fig. 8 case executed: the host's bandwidth, and the iSSD's at the two channel counts around the model's
/// iso-performance point, from which the executed iso point is interpolated.
#[derive(Debug, Clone, Serialize)]
pub struct IsoSim {
    pub kernel: String,
    pub r_host: f64,
    pub n_host_cpu: u32,
    pub accelerated: bool,
    /// The model's FMCs to match the host (None: unreachable).
    pub model_channels: Option<f64>,
    pub host: SimPoint,
    /// Runs at floor and ceil of the model's point (one run when it is an integer).
    pub issd: Vec<SimPoint>,
    /// FMCs at which the executed iSSD matches the executed host (linear between the two runs).
    pub sim_channels: Option<f64>,
}

/// Fig. 8 executed for one case: host of `n_host_cpu` CPUs with Fig. 8's 64-channel SSD, iSSD FMCs at 400 MHz.
pub fn fig8_sim(kernel: &'static str, r_host: f64, n_host_cpu: u32, accelerated: bool, sizing: Sizing, seed: u64) -> Result<IsoSim> {
    let profile = model::profile(kernel)?;
    let mode = if accelerated { Mode::IssdAccelerated } else { Mode::Issd };
    let host_ch = FIG8_HOST_CHANNELS as u32;
    let host_setup = issd_setup("host", Mode::Conventional, host_ch, F_FMC_400, r_host, n_host_cpu);
    let issd_1 = issd_setup("issd", mode, 1, F_FMC_400, r_host, n_host_cpu);
    let model_channels = model::iso_channels(&issd_1.model, &host_setup.model, &profile)?;
    let b_host = model::bandwidth(&host_setup.model, &profile)?;
    let mut dev = build_device(&host_setup, seed)?;
    let pages = sizing.pages_for(b_host, host_ch);
    let job = place(&mut dev, &[fig7_dataset(kernel, pages, seed)?], false)?.remove(0);
    let host = run_on(&mut dev, &host_setup, &host_setup.model, &job, Strategy::Conventional)?;
    let mut issd = Vec::new();
    if let Some(m) = model_channels.filter(|m| *m <= 256.0) {
        let lo = (m.floor() as u32).max(1);
        let hi = (m.ceil() as u32).max(1);
        for n in if lo == hi { vec![lo] } else { vec![lo, hi] } {
            let s = issd_setup("issd", mode, n, F_FMC_400, r_host, n_host_cpu);
            let b = model::bandwidth(&s.model, &profile)?;
            let pages = sizing.pages_for(b, n);
            let mut dev = build_device(&s, seed)?;
            let job = place(&mut dev, &[fig7_dataset(kernel, pages, seed)?], s.accelerate)?.remove(0);
            issd.push(run_on(&mut dev, &s, &s.model, &job, Strategy::InStorage)?);
        }
    }
    let sim_channels = interpolate(&issd, host.bandwidth);
    Ok(IsoSim { kernel: kernel.into(), r_host, n_host_cpu, accelerated, model_channels, host, issd, sim_channels })
}

/// Channels at which bandwidth reaches `target`, linear through the runs (through the origin with one run).
fn interpolate(runs: &[SimPoint], target: f64) -> Option<f64> {
    match runs {
        [a] => Some(f64::from(a.n_ch) * target / a.bandwidth),
        [a, b] if b.bandwidth > a.bandwidth => {
            let (na, nb) = (f64::from(a.n_ch), f64::from(b.n_ch));
            Some(na + (target - a.bandwidth) * (nb - na) / (b.bandwidth - a.bandwidth))
        }
        _ => None,
    }
}

/// The prototype scan executed: conventional and in storage over the same lineitem pages.
#[derive(Debug, Clone, Serialize)]
pub struct PrototypeSim {
    pub input_bytes: u64,
    pub conventional: SimPoint,
    pub in_storage: SimPoint,
    /// Executed speed-up, the bound (internal / link bandwidth) and Eq. 1's.
    pub speedup: f64,
    pub bound: f64,
    pub model_speedup: f64,
}

/// The §4.3 prototype: `pages` pages of lineitem (1 GB: 122,071 pages of 8 KiB), 1% selectivity, 4-byte projection.
pub fn prototype_sim(pages: usize, seed: u64) -> Result<PrototypeSim> {
    let s = prototype_setup();
    let mut dev = build_device(&s, seed)?;
    let job = place(&mut dev, &[prototype_scan(pages)?], false)?.remove(0);
    let conventional = run_on(&mut dev, &s, &s.model.conventional(), &job, Strategy::Conventional)?;
    let in_storage = run_on(&mut dev, &s, &s.model, &job, Strategy::InStorage)?;
    let cfg = dev.config();
    let bound = cfg.channel_bandwidth().0 * cfg.nand.channels.0 as f64 / cfg.link_bandwidth().0;
    Ok(PrototypeSim {
        input_bytes: (pages * PAGE) as u64,
        speedup: in_storage.bandwidth / conventional.bandwidth,
        model_speedup: in_storage.model_bandwidth / conventional.model_bandwidth,
        bound,
        conventional,
        in_storage,
    })
}
