//! Physical units for preset parameters.
//!
//! Every preset value is written as `{ value = .., unit = "..", source = ".." }`. This module knows which unit
//! strings exist, which dimension each belongs to and how to convert it to the canonical unit the model computes
//! in (ns, bytes, bytes/s, Hz, pJ, mW, pJ/B). Typed wrappers deserialize only from a unit of their own dimension,
//! so "t_read = 50 MB/s" is a load-time error instead of a silent mis-scaling.

use serde::de::{self, Deserializer};
use serde::Deserialize;
use std::fmt;

/// What a unit measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dimension {
    Time,
    Bytes,
    Rate,
    TransferRate,
    Frequency,
    Energy,
    Power,
    EnergyPerByte,
    Count,
    Real,
    Bool,
    Text,
    /// A vendor-specific NVMe opcode (an extension's parameter; `ext_params!` checks its range).
    Opcode,
}

impl fmt::Display for Dimension {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Dimension::Time => "time (ns, us, ms, s)",
            Dimension::Bytes => "size (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)",
            Dimension::Rate => "bandwidth (B/s, KB/s, MB/s, GB/s, KiB/s, MiB/s, GiB/s)",
            Dimension::TransferRate => "transfer rate (MT/s)",
            Dimension::Frequency => "frequency (Hz, kHz, MHz, GHz)",
            Dimension::Energy => "energy (pJ, nJ, uJ, mJ, J)",
            Dimension::Power => "power (uW, mW, W)",
            Dimension::EnergyPerByte => "energy per byte (pJ/B, nJ/B)",
            Dimension::Count => "count",
            Dimension::Real => "dimensionless (ratio, fraction, %, cycles/B, instructions, ...)",
            Dimension::Bool => "bool",
            Dimension::Text => "enum/text",
            Dimension::Opcode => "vendor opcode (opcode)",
        };
        f.write_str(s)
    }
}

/// (unit string, dimension, factor to canonical unit).
const UNITS: &[(&str, Dimension, f64)] = &[
    ("ns", Dimension::Time, 1.0),
    ("us", Dimension::Time, 1e3),
    ("ms", Dimension::Time, 1e6),
    ("s", Dimension::Time, 1e9),
    ("B", Dimension::Bytes, 1.0),
    ("KiB", Dimension::Bytes, 1024.0),
    ("MiB", Dimension::Bytes, 1048576.0),
    ("GiB", Dimension::Bytes, 1073741824.0),
    ("TiB", Dimension::Bytes, 1099511627776.0),
    ("KB", Dimension::Bytes, 1e3),
    ("MB", Dimension::Bytes, 1e6),
    ("GB", Dimension::Bytes, 1e9),
    ("TB", Dimension::Bytes, 1e12),
    ("B/s", Dimension::Rate, 1.0),
    ("KB/s", Dimension::Rate, 1e3),
    ("MB/s", Dimension::Rate, 1e6),
    ("GB/s", Dimension::Rate, 1e9),
    ("KiB/s", Dimension::Rate, 1024.0),
    ("MiB/s", Dimension::Rate, 1048576.0),
    ("GiB/s", Dimension::Rate, 1073741824.0),
    ("MT/s", Dimension::TransferRate, 1e6),
    ("GT/s", Dimension::TransferRate, 1e9),
    ("Hz", Dimension::Frequency, 1.0),
    ("kHz", Dimension::Frequency, 1e3),
    ("MHz", Dimension::Frequency, 1e6),
    ("GHz", Dimension::Frequency, 1e9),
    ("pJ", Dimension::Energy, 1.0),
    ("nJ", Dimension::Energy, 1e3),
    ("uJ", Dimension::Energy, 1e6),
    ("mJ", Dimension::Energy, 1e9),
    ("J", Dimension::Energy, 1e12),
    ("uW", Dimension::Power, 1e-3),
    ("mW", Dimension::Power, 1.0),
    ("W", Dimension::Power, 1e3),
    ("pJ/B", Dimension::EnergyPerByte, 1.0),
    ("nJ/B", Dimension::EnergyPerByte, 1e3),
    ("count", Dimension::Count, 1.0),
    ("ratio", Dimension::Real, 1.0),
    ("fraction", Dimension::Real, 1.0),
    ("%", Dimension::Real, 0.01),
    ("cycles", Dimension::Real, 1.0),
    ("cycles/B", Dimension::Real, 1.0),
    ("cycles/instruction", Dimension::Real, 1.0),
    ("instructions", Dimension::Real, 1.0),
    ("instructions/B", Dimension::Real, 1.0),
    ("ops/cycle", Dimension::Real, 1.0),
    ("bits", Dimension::Count, 1.0),
    ("bool", Dimension::Bool, 1.0),
    ("enum", Dimension::Text, 1.0),
    ("text", Dimension::Text, 1.0),
    // The units of extension parameters only (`ext_params!`), so that a preset's [ext.*] section may hold them.
    ("choice", Dimension::Text, 1.0),
    ("opcode", Dimension::Opcode, 1.0),
];

/// Looks up a unit string; `None` if unknown.
pub fn lookup(unit: &str) -> Option<(Dimension, f64)> {
    UNITS.iter().find(|(u, _, _)| *u == unit).map(|&(_, d, f)| (d, f))
}

/// All known unit strings of a dimension, for error messages.
pub fn units_of(dim: Dimension) -> Vec<&'static str> {
    UNITS.iter().filter(|(_, d, _)| *d == dim).map(|(u, _, _)| *u).collect()
}

/// The `{ value, unit, source }` table as it appears in TOML.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawParam {
    value: toml::Value,
    unit: String,
    #[allow(dead_code)]
    source: String,
}

fn numeric<E: de::Error>(raw: &RawParam, want: Dimension) -> Result<f64, E> {
    let (dim, factor) = lookup(&raw.unit)
        .ok_or_else(|| E::custom(format!("unknown unit {:?}; expected {}", raw.unit, want)))?;
    if dim != want {
        return Err(E::custom(format!("unit {:?} is {}, expected {}", raw.unit, dim, want)));
    }
    let v = match &raw.value {
        toml::Value::Integer(i) => *i as f64,
        toml::Value::Float(f) => *f,
        other => return Err(E::custom(format!("expected a number, got {other}"))),
    };
    if !v.is_finite() || v < 0.0 {
        return Err(E::custom(format!("value {v} must be finite and non-negative")));
    }
    // Counts size arrays and loops (channels, blocks, queue depths): whole numbers a u32 holds, never rounded.
    if want == Dimension::Count && ((v * factor).fract() != 0.0 || v * factor > f64::from(u32::MAX)) {
        return Err(E::custom(format!("value {v} must be a whole number from 0 to {}", u32::MAX)));
    }
    let canonical = v * factor;
    if let Some(&(_, max, name)) = LARGEST.iter().find(|(d, _, _)| *d == want) {
        if canonical > max {
            return Err(E::custom(format!("value {v:?} {} is above {name}, the largest this parameter may be", raw.unit)));
        }
    }
    if let Some(&(_, name)) = SLOWEST.iter().find(|(d, _)| *d == want) {
        if canonical > 0.0 && canonical < 1.0 {
            return Err(E::custom(format!("value {v:?} {} is below {name}: give 0 or at least that", raw.unit)));
        }
    }
    Ok(canonical)
}

/// The largest duration (ns) and size (B) a parameter may have. The model adds durations and sizes in u64
/// nanoseconds and bytes, so a value near u64's range would wrap in a sum (or saturate in the conversion) and give
/// wrong timings silently; a day per operation and 8 PiB are far beyond any device's figure and leave the clock
/// (2^63 ns, 292 years) room for 10^5 such operations one after another.
const LARGEST: &[(Dimension, f64, &str)] =
    &[(Dimension::Time, 86_400e9, "1 day (86400 s)"), (Dimension::Bytes, 9_007_199_254_740_992.0, "8 PiB (2^53 B)")];

/// Rates below one unit per second make a single transfer or cycle take longer than the clock can count.
const SLOWEST: &[(Dimension, &str)] =
    &[(Dimension::Rate, "1 B/s"), (Dimension::TransferRate, "1 transfer/s"), (Dimension::Frequency, "1 Hz")];

macro_rules! quantity {
    ($(#[$doc:meta])* $name:ident, $inner:ty, $dim:expr, $conv:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
        pub struct $name(pub $inner);

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let raw = RawParam::deserialize(d)?;
                let v = numeric::<D::Error>(&raw, $dim)?;
                #[allow(clippy::redundant_closure_call)]
                Ok($name(($conv)(v)))
            }
        }
    };
}

quantity!(
    /// A duration in nanoseconds.
    Nanos, u64, Dimension::Time, |v: f64| v.round() as u64
);
quantity!(
    /// A size in bytes.
    Bytes, u64, Dimension::Bytes, |v: f64| v.round() as u64
);
quantity!(
    /// A bandwidth in bytes per second.
    BytesPerSec, f64, Dimension::Rate, |v: f64| v
);
quantity!(
    /// A bus transfer rate in transfers per second.
    TransfersPerSec, f64, Dimension::TransferRate, |v: f64| v
);
quantity!(
    /// A clock frequency in hertz.
    Hertz, f64, Dimension::Frequency, |v: f64| v
);
quantity!(
    /// An energy in picojoules.
    PicoJoules, f64, Dimension::Energy, |v: f64| v
);
quantity!(
    /// A power in milliwatts.
    MilliWatts, f64, Dimension::Power, |v: f64| v
);
quantity!(
    /// An energy per byte in picojoules per byte.
    PjPerByte, f64, Dimension::EnergyPerByte, |v: f64| v
);
quantity!(
    /// A dimensionless count (integer).
    Count, u64, Dimension::Count, |v: f64| v.round() as u64
);
quantity!(
    /// A dimensionless real number (ratios, fractions, cycles per byte, CPI).
    Real, f64, Dimension::Real, |v: f64| v
);

/// A boolean switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flag(pub bool);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = RawParam::deserialize(d)?;
        if raw.unit != "bool" {
            return Err(de::Error::custom(format!("unit {:?} given for a switch; use \"bool\"", raw.unit)));
        }
        match raw.value {
            toml::Value::Boolean(b) => Ok(Flag(b)),
            other => Err(de::Error::custom(format!("expected true or false, got {other}"))),
        }
    }
}

/// A choice among named alternatives; the typed enum parses the string.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Choice(pub String);

impl<'de> Deserialize<'de> for Choice {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = RawParam::deserialize(d)?;
        if raw.unit != "enum" && raw.unit != "text" {
            return Err(de::Error::custom(format!("unit {:?} given for a choice; use \"enum\"", raw.unit)));
        }
        match raw.value {
            toml::Value::String(s) => Ok(Choice(s)),
            other => Err(de::Error::custom(format!("expected a string, got {other}"))),
        }
    }
}

impl Nanos {
    pub fn ns(self) -> u64 {
        self.0
    }
}

impl BytesPerSec {
    /// Nanoseconds to move `bytes` at this rate, rounded up so that no transfer is free.
    pub fn ns_for(self, bytes: u64) -> u64 {
        if bytes == 0 {
            return 0;
        }
        (bytes as f64 * 1e9 / self.0).ceil() as u64
    }
}

impl Hertz {
    /// Nanoseconds for `cycles` clock cycles.
    pub fn ns_for_cycles(self, cycles: f64) -> u64 {
        if cycles <= 0.0 {
            return 0;
        }
        (cycles * 1e9 / self.0).ceil() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse<T: for<'de> Deserialize<'de>>(s: &str) -> Result<T, toml::de::Error> {
        #[derive(Deserialize)]
        struct W<T> {
            p: T,
        }
        toml::from_str::<W<T>>(&format!("p = {s}")).map(|w| w.p)
    }

    #[test]
    fn converts_to_canonical_units() {
        assert_eq!(parse::<Nanos>(r#"{ value = 50, unit = "us", source = "x" }"#).unwrap(), Nanos(50_000));
        assert_eq!(parse::<Bytes>(r#"{ value = 16, unit = "KiB", source = "x" }"#).unwrap(), Bytes(16384));
        assert_eq!(parse::<BytesPerSec>(r#"{ value = 1.5, unit = "GB/s", source = "x" }"#).unwrap().0, 1.5e9);
        assert_eq!(parse::<PicoJoules>(r#"{ value = 3.31, unit = "uJ", source = "x" }"#).unwrap().0, 3.31e6);
        assert_eq!(parse::<MilliWatts>(r#"{ value = 5.49, unit = "W", source = "x" }"#).unwrap().0, 5490.0);
        assert!((parse::<Real>(r#"{ value = 7, unit = "%", source = "x" }"#).unwrap().0 - 0.07).abs() < 1e-12);
    }

    #[test]
    fn rejects_wrong_dimension_and_missing_source() {
        let e = parse::<Nanos>(r#"{ value = 50, unit = "MB/s", source = "x" }"#).unwrap_err();
        assert!(e.to_string().contains("expected time"), "{e}");
        assert!(parse::<Nanos>(r#"{ value = 50, unit = "us" }"#).is_err());
        assert!(parse::<Nanos>("50").is_err());
        assert!(parse::<Nanos>(r#"{ value = -1, unit = "us", source = "x" }"#).is_err());
    }

    /// A duration or size beyond what u64 sums hold is refused, not saturated (1e30 s was taken as u64::MAX ns and
    /// the reads it timed wrapped to 43.7 us); the limits themselves are accepted.
    #[test]
    fn rejects_durations_sizes_and_rates_the_clock_cannot_count() {
        for (kind, text) in [
            ("time", r#"{ value = 1e30, unit = "s", source = "x" }"#),
            ("time", r#"{ value = 86401, unit = "s", source = "x" }"#),
            ("time", r#"{ value = 1e10, unit = "s", source = "x" }"#),
        ] {
            let e = parse::<Nanos>(text).unwrap_err().to_string();
            assert!(e.contains("1 day") && e.contains("largest"), "{kind}: {e}");
        }
        assert_eq!(parse::<Nanos>(r#"{ value = 86400, unit = "s", source = "x" }"#).unwrap(), Nanos(86_400_000_000_000));
        let e = parse::<Bytes>(r#"{ value = 9, unit = "TB", source = "x" }"#).unwrap();
        assert_eq!(e, Bytes(9_000_000_000_000));
        let e = parse::<Bytes>(r#"{ value = 1e20, unit = "B", source = "x" }"#).unwrap_err().to_string();
        assert!(e.contains("8 PiB"), "{e}");
        let e = parse::<BytesPerSec>(r#"{ value = 1e-300, unit = "GB/s", source = "x" }"#).unwrap_err().to_string();
        assert!(e.contains("below 1 B/s"), "{e}");
        assert_eq!(parse::<BytesPerSec>(r#"{ value = 0, unit = "GB/s", source = "x" }"#).unwrap().0, 0.0);
        assert!(parse::<Hertz>(r#"{ value = 0.5, unit = "Hz", source = "x" }"#).is_err());
        assert!(parse::<TransfersPerSec>(r#"{ value = 1e-7, unit = "MT/s", source = "x" }"#).is_err());
    }

    #[test]
    fn transfer_time_rounds_up() {
        assert_eq!(BytesPerSec(1e9).ns_for(4096), 4096);
        assert_eq!(BytesPerSec(3e9).ns_for(1), 1);
        assert_eq!(BytesPerSec(3e9).ns_for(0), 0);
        assert_eq!(Hertz(1e9).ns_for_cycles(2.5), 3);
    }
}
