//! A flow as data (JSON from the Python front end, checked here): where its requests come from, how they arrive,
//! where they land, and its queue. `build` turns it into a [`Flow`] for a device.

use super::{Flow, Mapping, Priority, Requests, Synthetic, SyntheticSpec, Timing, TraceFile, InMemory};
use crate::trace::{Format, Op, ParseOptions, Request, TimeUnit};
use nearflash_core::bench::Pattern;
use nearflash_core::error::{Result, SimError};
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    pub name: String,
    pub source: SourceSpec,
    pub timing: TimingSpec,
    #[serde(default)]
    pub mapping: MappingSpec,
    #[serde(default)]
    pub priority: Option<String>,
    #[serde(default)]
    pub queue_depth: Option<u32>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum SourceSpec {
    Trace(TraceSpec),
    Synthetic(SyntheticJson),
    /// Requests given inline: `[time_ns, op, offset, length]` each.
    Requests(Vec<(u64, String, u64, u64)>),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceSpec {
    pub path: String,
    #[serde(default)]
    pub format: Option<String>,
    #[serde(default = "default_sector")]
    pub sector_size: u64,
    #[serde(default)]
    pub time_unit: Option<String>,
    #[serde(default)]
    pub blk_event: Option<String>,
    #[serde(default)]
    pub device: Option<String>,
    #[serde(default)]
    pub skip_bad: bool,
    #[serde(default = "one")]
    pub repeat: u32,
    #[serde(default)]
    pub limit: Option<u64>,
}

fn default_sector() -> u64 {
    512
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyntheticJson {
    pub rw: String,
    pub bs: u64,
    pub ios: u64,
    /// LBAs `[first, first + count)`.
    pub span: (u64, u64),
    #[serde(default = "seed")]
    pub seed: u64,
    #[serde(default = "half")]
    pub rwmixread: f64,
    #[serde(default)]
    pub rate_iops: Option<f64>,
}

fn seed() -> u64 {
    1
}

fn half() -> f64 {
    0.5
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum TimingSpec {
    Open { time_scale: f64 },
    Closed { iodepth: u32 },
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MappingSpec {
    #[serde(default)]
    pub offset: u64,
    #[serde(default)]
    pub wrap: bool,
    #[serde(default)]
    pub span: Option<(u64, u64)>,
}

impl TraceSpec {
    /// How the trace is read.
    pub fn parse_options(&self) -> Result<ParseOptions> {
        let config = |e: String| SimError::Config(e);
        Ok(ParseOptions {
            format: self.format.as_deref().map(str::parse::<Format>).transpose().map_err(config)?,
            sector_size: match self.sector_size {
                0 => return Err(config("sector size must be positive".into())),
                s => s,
            },
            time_unit: self.time_unit.as_deref().map(str::parse::<TimeUnit>).transpose().map_err(config)?.unwrap_or(TimeUnit::Nanosecond),
            blk_event: match self.blk_event.as_deref() {
                None | Some("D") => 'D',
                Some("Q") => 'Q',
                Some(other) => return Err(config(format!("blkparse event {other:?}: D (issued) or Q (queued)"))),
            },
            device: self.device.clone(),
            skip_bad: self.skip_bad,
        })
    }
}

fn op(name: &str) -> Result<Op> {
    match name {
        "read" => Ok(Op::Read),
        "write" => Ok(Op::Write),
        "flush" => Ok(Op::Flush),
        "trim" => Ok(Op::Trim),
        _ => Err(SimError::Config(format!("request operation {name:?}: read, write, flush or trim"))),
    }
}

impl FlowSpec {
    /// The flow, for a device of `lba_bytes`-byte LBAs.
    pub fn build(&self, lba_bytes: u64) -> Result<Flow> {
        if self.name.is_empty() || self.name.chars().any(|c| c.is_control() || c == ',') {
            return Err(SimError::Config(format!("flow name {:?}: a non-empty name without commas or control characters", self.name)));
        }
        let within = |e: SimError| SimError::Config(format!("flow {:?}: {}", self.name, e.to_string().trim_start_matches("configuration error: ")));
        let (source, kind, origin): (Box<dyn Requests>, _, _) = match &self.source {
            SourceSpec::Trace(t) => {
                let opts = t.parse_options().map_err(within)?;
                if t.repeat == 0 {
                    return Err(within(SimError::Config("repeat must be at least 1".into())));
                }
                let f = TraceFile::open(&t.path, &opts, t.repeat, t.limit).map_err(|e| SimError::InvalidArgument(e.to_string()))?;
                (Box::new(f), "trace", t.path.clone())
            }
            SourceSpec::Synthetic(s) => {
                let mut pattern: Pattern = s.rw.parse().map_err(within)?;
                if let Pattern::RandRw(_) = pattern {
                    pattern = Pattern::RandRw(s.rwmixread);
                }
                let spec = SyntheticSpec { pattern, block_size: s.bs, ios: s.ios, span: s.span, seed: s.seed, rate_iops: s.rate_iops };
                let syn = Synthetic::new(&self.name, &spec, lba_bytes).map_err(|e| within(SimError::Config(e)))?;
                (Box::new(syn), "synthetic", "synthetic".to_string())
            }
            SourceSpec::Requests(list) => {
                let reqs = list
                    .iter()
                    .enumerate()
                    .map(|(i, (t, o, off, len))| {
                        Ok(Request { time_ns: *t, op: op(o)?, offset: *off, len: *len, line: i as u64 + 1, recorded_ns: None })
                    })
                    .collect::<Result<Vec<_>>>()
                    .map_err(within)?;
                (Box::new(InMemory::new(reqs)), "trace", "requests".to_string())
            }
        };
        let timing = match self.timing {
            TimingSpec::Open { time_scale } => Timing::Open { time_scale },
            TimingSpec::Closed { iodepth } => Timing::Closed { iodepth },
        };
        let priority = match &self.priority {
            None => Priority::default(),
            Some(p) => p.parse().map_err(within)?,
        };
        let m = &self.mapping;
        Ok(Flow {
            name: self.name.clone(),
            source,
            kind,
            origin,
            timing,
            mapping: Mapping { offset: m.offset, wrap: m.wrap, span: m.span },
            priority,
            queue_depth: self.queue_depth,
        })
    }
}

/// Flows from their JSON list.
pub fn build_all(json: &str, lba_bytes: u64) -> Result<Vec<Flow>> {
    let specs: Vec<FlowSpec> = serde_json::from_str(json).map_err(|e| SimError::Config(format!("flows: {e}")))?;
    specs.iter().map(|s| s.build(lba_bytes)).collect()
}
