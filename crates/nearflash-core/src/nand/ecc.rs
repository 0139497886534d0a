//! Error correction: raw bit errors per codeword, hard decode, read retry, soft decode, or an uncorrectable error.
//!
//! Raw errors come from two places: errors injected on a sector (tests and fault experiments) and, when
//! `ecc.rber > 0`, a sampled count per codeword growing with the block's wear. The outcome decides the extra
//! flash work (each retry is another tR + transfer + decode, then a soft decode) and whether the data may be
//! returned at all: past the soft limit the read completes with an Unrecovered Read Error, never with data.

use crate::config::DeviceConfig;
use crate::engine::Rng;
use rand::Rng as _;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EccOutcome {
    /// Hard decode corrected everything (possibly zero errors).
    Corrected,
    /// Corrected after `n` read retries.
    Retried(u32),
    /// All retries failed; soft-decision decoding corrected it after `n` retries.
    SoftDecoded(u32),
    /// Beyond every decoder: the data must not be returned.
    Uncorrectable(u32),
}

impl EccOutcome {
    /// Read retries performed.
    pub fn retries(self) -> u32 {
        match self {
            EccOutcome::Corrected => 0,
            EccOutcome::Retried(n) | EccOutcome::SoftDecoded(n) | EccOutcome::Uncorrectable(n) => n,
        }
    }

    pub fn soft_decoded(self) -> bool {
        matches!(self, EccOutcome::SoftDecoded(_) | EccOutcome::Uncorrectable(_))
    }

    pub fn is_ok(self) -> bool {
        !matches!(self, EccOutcome::Uncorrectable(_))
    }
}

#[derive(Debug, Clone)]
pub struct EccModel {
    pub codeword_bytes: u32,
    correctable: u32,
    soft_correctable: u32,
    rber: f64,
    wear_factor: f64,
    endurance: f64,
    max_retries: u32,
    retry_factor: f64,
}

impl EccModel {
    pub fn from_config(cfg: &DeviceConfig) -> Self {
        let e = &cfg.ecc;
        EccModel {
            codeword_bytes: e.codeword_size.0 as u32,
            correctable: e.correctable_bits.0 as u32,
            soft_correctable: e.soft_correctable_bits.0 as u32,
            rber: e.rber.0,
            wear_factor: e.rber_wear_factor.0,
            endurance: cfg.nand.endurance.0.max(1) as f64,
            max_retries: e.read_retry_max.0 as u32,
            retry_factor: e.retry_error_factor.0,
        }
    }

    /// Whether random errors are modelled at all (skips sampling on the hot path when not).
    pub fn samples_errors(&self) -> bool {
        self.rber > 0.0
    }

    /// Codewords covering `bytes`.
    pub fn codewords(&self, bytes: u64) -> u64 {
        bytes.div_ceil(u64::from(self.codeword_bytes.max(1)))
    }

    /// Samples the worst codeword's raw error count over `codewords` codewords of a block with `pe` cycles.
    pub fn sample_worst(&self, rng: &mut Rng, codewords: u64, pe: u32) -> u32 {
        if self.rber <= 0.0 {
            return 0;
        }
        let rate = self.rber * (1.0 + self.wear_factor * f64::from(pe) / self.endurance);
        let lambda = rate * f64::from(self.codeword_bytes) * 8.0;
        (0..codewords).map(|_| poisson(rng, lambda)).max().unwrap_or(0)
    }

    /// Decides the outcome for a worst-codeword raw error count.
    pub fn decode(&self, raw_errors: u32) -> EccOutcome {
        if raw_errors <= self.correctable {
            return EccOutcome::Corrected;
        }
        let mut e = f64::from(raw_errors);
        for n in 1..=self.max_retries {
            e *= self.retry_factor;
            if e.floor() as u32 <= self.correctable {
                return EccOutcome::Retried(n);
            }
        }
        if (e.floor() as u32) <= self.soft_correctable {
            EccOutcome::SoftDecoded(self.max_retries)
        } else {
            EccOutcome::Uncorrectable(self.max_retries)
        }
    }
}

/// Poisson sample (inversion for small means, normal approximation for large ones).
fn poisson(rng: &mut Rng, lambda: f64) -> u32 {
    if lambda <= 0.0 {
        return 0;
    }
    if lambda < 30.0 {
        let l = (-lambda).exp();
        let (mut k, mut p) = (0u32, 1.0f64);
        loop {
            p *= rng.gen::<f64>();
            if p <= l {
                return k;
            }
            k += 1;
        }
    }
    // Box-Muller normal approximation.
    let u1: f64 = rng.gen::<f64>().max(f64::MIN_POSITIVE);
    let u2: f64 = rng.gen();
    let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
    (lambda + z * lambda.sqrt()).round().max(0.0) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::rng_stream;

    fn model() -> EccModel {
        EccModel {
            codeword_bytes: 1024,
            correctable: 40,
            soft_correctable: 60,
            rber: 0.0,
            wear_factor: 10.0,
            endurance: 3000.0,
            max_retries: 4,
            retry_factor: 0.5,
        }
    }

    #[test]
    fn outcomes_follow_the_limits() {
        let m = model();
        assert_eq!(m.decode(0), EccOutcome::Corrected);
        assert_eq!(m.decode(40), EccOutcome::Corrected);
        assert_eq!(m.decode(80), EccOutcome::Retried(1));
        assert_eq!(m.decode(300), EccOutcome::Retried(3));
        // 900 -> 56.25 after four retries: beyond hard, within soft.
        assert_eq!(m.decode(900), EccOutcome::SoftDecoded(4));
        assert_eq!(m.decode(1000), EccOutcome::Uncorrectable(4));
        assert_eq!(m.decode(5000), EccOutcome::Uncorrectable(4));
        assert!(!m.decode(5000).is_ok());
    }

    #[test]
    fn sampled_errors_have_the_configured_mean_and_grow_with_wear() {
        let mut m = model();
        m.rber = 1e-3; // lambda = 8.192 per codeword
        let mut rng = rng_stream(1, "ecc");
        let n = 20_000;
        let mean = (0..n).map(|_| f64::from(m.sample_worst(&mut rng, 1, 0))).sum::<f64>() / f64::from(n);
        assert!((mean - 8.192).abs() < 0.2, "mean {mean}");
        let worn = (0..n).map(|_| f64::from(m.sample_worst(&mut rng, 1, 3000))).sum::<f64>() / f64::from(n);
        assert!((worn / mean - 11.0).abs() < 0.5, "wear ratio {}", worn / mean);
    }
}
