//! Execution-driven counterparts of the paper's studies: real kernels on real data through the device model
//! (Agent and Initiator on a nearflash device), with Eq. 1 evaluated beside each run on the same system and the
//! alpha and beta the run measured.
//!
//! * [`setup`]: the paper's systems as devices (Fig. 7's configurations, the prototype) and their model twins.
//! * [`datasets`]: the seeded inputs of the Table 2 kernels.
//! * [`run_on`] / [`fig7_points`]: one job per (configuration, kernel, n_ch), timed and metered; the error of
//!   Eq. 1 against it is what the paper's §4.3 validation reports (mean 5.1%, max 17.9%).
//! * [`energy_by_component`]: a run's energy in Fig. 10's components, from the device's ledger.

pub mod datasets;
pub mod setup;
pub mod studies;

pub use datasets::{fig7_dataset, prototype_scan, Dataset, PAGE};
pub use setup::{build_device, fig7_setup, issd_setup, link_partner, model_overrides, prototype_setup, SystemSetup};
pub use studies::{fig8_sim, fig9_sim, prototype_sim, Fig9Sim, IsoSim, PrototypeSim};

use crate::agent::JobStats;
use crate::error::{invalid, Result};
use crate::initiator::{Initiator, Job, JobRun, Opcodes, Strategy};
use crate::kernel::Output;
use crate::model::{self, Component, Fig7Config, Mode};
use nearflash_core::{Device, Report};
use serde::Serialize;

/// One execution-driven run beside the model.
#[derive(Debug, Clone, Serialize)]
pub struct SimPoint {
    pub config: String,
    pub kernel: String,
    pub n_ch: u32,
    pub strategy: String,
    pub input_bytes: u64,
    pub seconds: f64,
    /// Measured input bytes per second.
    pub bandwidth: f64,
    /// Eq. 1 on the same system with the measured alpha and beta.
    pub model_bandwidth: f64,
    pub model_bottleneck: &'static str,
    /// Measured reductions (partials / input, result / partials); 1 and 1 on the conventional path.
    pub alpha: f64,
    pub beta: f64,
    /// Input bytes the device processed (all of them in storage, none conventionally).
    pub device_bytes: u64,
    /// Energy by Fig. 10 component, J (dynamic, with the model's static-power-while-busy terms).
    pub energy: Vec<(Component, f64)>,
    /// The job's answer, encoded (equal across strategies).
    #[serde(skip)]
    pub output: Option<Output>,
}

impl SimPoint {
    /// Relative error of the model against the execution-driven run.
    pub fn model_error(&self) -> f64 {
        (self.model_bandwidth - self.bandwidth).abs() / self.bandwidth.max(1e-12)
    }

    /// Dynamic energy per input byte, J/B.
    pub fn energy_per_byte(&self) -> f64 {
        self.energy.iter().map(|e| e.1).sum::<f64>() / self.input_bytes.max(1) as f64
    }
}

/// Mean and maximum absolute relative error of the model over points.
pub fn error_summary(points: &[SimPoint]) -> (f64, f64) {
    let e: Vec<f64> = points.iter().map(SimPoint::model_error).collect();
    let mean = e.iter().sum::<f64>() / e.len().max(1) as f64;
    (mean, e.iter().copied().fold(0.0, f64::max))
}

/// A run's energy in Fig. 10's components. Dynamic accounts map one to one (NAND = sensing + bus + ECC); the
/// components the model charges as power while data moves (§4.1, Fig. 10: host memory, chipset and I/O bus per
/// byte over the link, SSD DRAM per byte through DRAM) are their static power times the link's (DRAM's) busy time.
pub fn energy_by_component(dev: &Device, report: &Report) -> Vec<(Component, f64)> {
    let dynamic = |names: &[&str]| names.iter().map(|n| report.energy.dynamic_j.get(*n).copied().unwrap_or(0.0)).sum::<f64>();
    let busy_s = |names: &[&str]| {
        report
            .utilisation
            .iter()
            .filter(|u| names.contains(&u.name.as_str()))
            .map(|u| u.mean * f64::from(u.members) * report.elapsed_ns as f64 * 1e-9)
            .sum::<f64>()
    };
    let e = &dev.config().energy;
    let link = busy_s(&["link_up", "link_down"]);
    let mw = 1e-3;
    vec![
        (Component::HostCpu, dynamic(&["host_cpu"])),
        (Component::HostMemory, e.host_dram_static.0 * mw * link + dynamic(&["host_dram"])),
        (Component::Chipset, e.host_chipset_static.0 * mw * link),
        (Component::IoBus, e.host_io_static.0 * mw * link),
        (Component::HostInterface, dynamic(&["host_link"])),
        (Component::SsdDram, e.ssd_static.0 * mw * busy_s(&["dram"]) + dynamic(&["ssd_dram"])),
        (Component::Nand, dynamic(&["nand_read", "nand_program", "nand_erase", "flash_bus", "ecc"])),
        (Component::FmcProcessor, dynamic(&[crate::agent::UNIT_FMC])),
        (Component::StreamProcessor, dynamic(&[crate::agent::UNIT_SP])),
        (Component::SsdCpu, dynamic(&["controller_core"])),
    ]
}

/// The Agent's statistics of the last job run, from a report.
fn last_job(report: &Report) -> Option<JobStats> {
    let v = report.extensions.get(crate::agent::NAME)?.get("last")?;
    let n = |k: &str| v.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
    Some(JobStats {
        input_bytes: n("input_bytes"),
        fmc_pages: n("fmc_pages"),
        cpu_pages: n("cpu_pages"),
        flash_reads: n("flash_reads"),
        partial_bytes: n("partial_bytes"),
        result_bytes: n("result_bytes"),
    })
}

fn strategy_name(s: Strategy) -> String {
    match s {
        Strategy::InStorage => "in_storage".into(),
        Strategy::Conventional => "conventional".into(),
        Strategy::Static { fraction } => format!("static({fraction:.3})"),
        Strategy::Dynamic { chunk_pages } => format!("dynamic({chunk_pages})"),
    }
}

/// Runs `job` with `strategy` on a device built from `setup` (its Initiator on queue 1), starting from an idle
/// device, and evaluates Eq. 1 on `model_system` with the alpha and beta the run measured.
pub fn run_on(
    dev: &mut Device,
    setup: &SystemSetup,
    model_system: &model::SystemConfig,
    job: &Job,
    strategy: Strategy,
) -> Result<SimPoint> {
    let params = setup::agent_params(setup)?;
    let horizon = dev.horizon();
    dev.advance_to(horizon);
    dev.reset_stats();
    let run: JobRun = Initiator::new(dev, 1, Opcodes::of(&params), params.costs.clone())?.run(job, strategy)?;
    let report = dev.report();
    let kernel = job.spec.name();
    let (alpha, beta) = match (strategy, last_job(&report)) {
        (Strategy::Conventional, _) | (_, None) => (1.0, 1.0),
        (_, Some(s)) => (s.alpha(), s.beta()),
    };
    let mut profile = model_profile(job.spec.name(), &params.costs)?;
    if model_system.mode != Mode::Conventional {
        profile.alpha = alpha.clamp(0.0, 1.0);
        profile.beta = beta.clamp(0.0, 1.0);
    }
    let ev = model::evaluate(model_system, &profile, run.input_bytes as f64)?;
    Ok(SimPoint {
        config: setup.name.clone(),
        kernel: kernel.to_string(),
        n_ch: model_system.n_ch as u32,
        strategy: strategy_name(strategy),
        input_bytes: run.input_bytes,
        seconds: run.seconds(),
        bandwidth: run.bandwidth(),
        model_bandwidth: ev.bandwidth,
        model_bottleneck: ev.bottleneck,
        alpha,
        beta,
        device_bytes: run.device_bytes,
        energy: energy_by_component(dev, &report),
        output: Some(run.output),
    })
}

/// The model's profile of a kernel: Table 2's for its four kernels, else one made from the cost table (alpha and
/// beta are the measured ones anyway).
pub fn model_profile(kernel: &'static str, costs: &crate::costs::CostTable) -> Result<model::KernelProfile> {
    if let Ok(p) = model::profile(kernel) {
        return Ok(p);
    }
    let c = costs.get(kernel)?;
    let base = model::params::SCAN;
    Ok(model::KernelProfile {
        name: kernel,
        cpb_fmc: c.cpb_fmc,
        cpb_fmc_accel: c.cpb_fmc_accel,
        cpb_host: c.cpb_host,
        ipb_host: c.ipb_host,
        cpb_ssd_cpu: c.cpb_ssd_cpu,
        stream: c.stream,
        ..base
    })
}

/// Writes datasets one after another from LBA 0; returns the jobs over them.
pub fn place(dev: &mut Device, datasets: &[Dataset], accelerate: bool) -> Result<Vec<Job>> {
    let mut ini = Initiator::new(dev, 1, Opcodes::default(), Default::default())?;
    let mut slba = 0u64;
    let mut jobs = Vec::with_capacity(datasets.len());
    for d in datasets {
        let input = ini.write_input(slba, &d.pages, d.page_size)?;
        slba += input.extents[0].nlb as u64;
        jobs.push(Job { spec: d.spec.clone(), input, accelerate });
    }
    Ok(jobs)
}

/// How much data an execution-driven point processes: at least `min_pages_per_channel` pages per channel (so
/// every FMC has a pipeline's worth of pages), and enough for `target_seconds` at the model's bandwidth (so the
/// fill and drain of the pipeline, a few hundred microseconds, stay small against the run), at most `max_pages`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Sizing {
    pub min_pages_per_channel: u32,
    pub target_seconds: f64,
    pub max_pages: u64,
}

impl Sizing {
    /// Pages for a run expected at `bandwidth` B/s on `n_ch` channels.
    pub fn pages_for(&self, bandwidth: f64, n_ch: u32) -> usize {
        let by_time = (bandwidth * self.target_seconds / PAGE as f64).ceil() as u64;
        by_time.max(u64::from(self.min_pages_per_channel) * u64::from(n_ch)).min(self.max_pages).max(1) as usize
    }

    /// Pages for a Fig. 7 configuration and kernel at `n_ch` channels.
    pub fn pages(&self, c: Fig7Config, kernel: &str, n_ch: u32) -> Result<usize> {
        let setup = fig7_setup(c, n_ch, model::params::N_HOST_CPU_FIG7 as u32);
        let b = model::bandwidth(&setup.model, &model::profile(kernel)?)?;
        Ok(self.pages_for(b, n_ch))
    }
}

/// Fig. 7 execution-driven: for each requested configuration and kernel, a job over a prefix (sized by `sizing`)
/// of the kernel's dataset, on the configuration's device, run in storage (iSSD-*) or conventionally (HOST-*),
/// beside Eq. 1. Configurations sharing a link share one device (and its data). `agent` (a JSON object, or null)
/// overrides the Agent's parameters of every device (e.g. `{"ftl_lookups": true}`).
pub fn fig7_points(
    configs: &[Fig7Config],
    kernels: &[&str],
    n_ch: u32,
    sizing: Sizing,
    seed: u64,
    agent: &serde_json::Value,
) -> Result<Vec<SimPoint>> {
    if n_ch == 0 || sizing.min_pages_per_channel == 0 {
        return Err(invalid("need at least one channel and one page per channel"));
    }
    let mut datasets = Vec::with_capacity(kernels.len());
    for k in kernels {
        let most = configs.iter().map(|&c| sizing.pages(c, k, n_ch)).collect::<Result<Vec<_>>>()?;
        datasets.push(fig7_dataset(k, most.into_iter().max().unwrap_or(1), seed)?);
    }
    let mut out = Vec::new();
    // configurations whose devices are set up alike share one (and its data): HOST-SATA with iSSD-400; HOST-4G and
    // HOST-8G have a faster DRAM path than their iSSD partners (link-bound hosts) and get their own
    let order = [Fig7Config::Issd400, Fig7Config::HostSata, Fig7Config::Issd800, Fig7Config::Host4G, Fig7Config::IssdXl, Fig7Config::Host8G];
    let mut current: Option<(Vec<setup::Override>, SystemSetup, Device, Vec<Job>)> = None;
    for c in order.into_iter().filter(|c| configs.contains(c)) {
        let s = fig7_setup(c, n_ch, model::params::N_HOST_CPU_FIG7 as u32);
        if current.as_ref().is_none_or(|cur| cur.0 != s.overrides) {
            // the device is the iSSD's of this link (its Agent's clock and stream processors)
            let mut dev_setup = fig7_setup(link_partner_issd(c), n_ch, model::params::N_HOST_CPU_FIG7 as u32);
            dev_setup.overrides = s.overrides.clone();
            if let (Some(base), Some(extra)) = (dev_setup.agent.as_object_mut(), agent.as_object()) {
                base.extend(extra.clone());
            }
            let mut dev = build_device(&dev_setup, seed)?;
            let jobs = place(&mut dev, &datasets, dev_setup.accelerate)?;
            current = Some((s.overrides.clone(), dev_setup, dev, jobs));
        }
        let (_, dev_setup, dev, jobs) = current.as_mut().expect("device set up");
        for (job, kernel) in jobs.iter().zip(kernels) {
            let strategy = if s.model.mode == Mode::Conventional { Strategy::Conventional } else { Strategy::InStorage };
            let prefix = prefix_job(job, sizing.pages(c, kernel, n_ch)?, dev.lba_bytes());
            let mut p = run_on(dev, dev_setup, &s.model, &prefix, strategy)?;
            p.config = s.name.clone();
            out.push(p);
        }
    }
    Ok(out)
}

/// The iSSD configuration of `c`'s link (itself for an iSSD).
fn link_partner_issd(c: Fig7Config) -> Fig7Config {
    match c {
        Fig7Config::HostSata | Fig7Config::Host4G | Fig7Config::Host8G => link_partner(c),
        issd => issd,
    }
}

/// The job over the first `pages` kernel pages of a single-extent job.
pub fn prefix_job(job: &Job, pages: usize, lba_bytes: u64) -> Job {
    let per = u64::from(job.input.page_size) / lba_bytes;
    let mut j = job.clone();
    if let Some(e) = j.input.extents.first_mut() {
        e.nlb = e.nlb.min((pages as u64 * per) as u32);
    }
    j.input.extents.truncate(1);
    j
}

#[cfg(test)]
mod tests;
