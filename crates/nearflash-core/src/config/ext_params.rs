//! Firmware extensions' parameters: declared once, with unit and source, and overridden from a preset's
//! `[ext.<name>]` section (`{ value, unit, source }` per key, unit-checked like every preset value) and from JSON
//! at attach time (plain numbers in the declared unit, booleans for switches).
//!
//! ```ignore
//! nearflash_core::ext_params! {
//!     /// My accelerator.
//!     pub struct MyParams {
//!         /// Unit clock.
//!         clock: Frequency = 400, "MHz", "paper Table 2";
//!         enabled: Bool = true, "bool", "assumed: on by default";
//!     }
//! }
//! ```
//! Typed kinds besides the unit-checked physical quantities (held as `f64` in canonical units: ns, bytes, B/s, Hz,
//! pJ, mW, pJ/B, counts):
//! - `Bool` (unit "bool"): a switch, held as `bool`;
//! - `Int` (unit "count"): a whole non-negative number, held as `u64` (fractions are refused, not truncated);
//! - `Opcode` (unit "opcode"): a vendor-specific I/O opcode 0x80-0xFF, held as `u8`;
//! - `Choice["a", "b"]` (unit "choice"): one of the listed words, held as `String`.
//!
//! An optional `in lo..=hi` after a numeric or `Int` default bounds the value (in canonical units).
//!
//! ```ignore
//! nearflash_core::ext_params! {
//!     pub struct Demo {
//!         slots: Int = 8 in 1..=64, "count", "assumed: a few concurrent jobs";
//!         opcode: Opcode = 0xC1, "opcode", "assumed: vendor I/O opcode";
//!         mode: Choice["static", "dynamic"] = "dynamic", "choice", "paper Sec. 4";
//!     }
//! }
//! ```

use super::units::{self, Dimension};

/// A parameter that cannot be set.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParamError {
    #[error("unknown parameter {0:?}")]
    Unknown(String),
    #[error("parameter {name}: {why}")]
    Invalid { name: String, why: String },
}

impl From<ParamError> for crate::error::SimError {
    fn from(e: ParamError) -> Self {
        crate::error::SimError::Config(e.to_string())
    }
}

/// Parses a numeric value given in `unit` into the canonical unit of dimension `want`.
pub fn parse_number(name: &str, value: &toml::Value, unit: &str, want: Dimension) -> Result<f64, ParamError> {
    let invalid = |why: String| ParamError::Invalid { name: name.to_string(), why };
    let (dim, factor) = units::lookup(unit).ok_or_else(|| invalid(format!("unknown unit {unit:?}")))?;
    if dim != want {
        return Err(invalid(format!("unit {unit:?} is {dim}, expected {want}")));
    }
    let v = match value {
        toml::Value::Integer(i) => *i as f64,
        toml::Value::Float(f) => *f,
        other => return Err(invalid(format!("expected a number, got {other}"))),
    };
    if !v.is_finite() || v < 0.0 {
        return Err(invalid(format!("value {v} must be finite and non-negative")));
    }
    Ok(v * factor)
}

/// Parses a whole number given in a count-like `unit` (fractions, negatives and non-numbers are refused).
pub fn parse_int(name: &str, value: &toml::Value, unit: &str) -> Result<u64, ParamError> {
    let invalid = |why: String| ParamError::Invalid { name: name.to_string(), why };
    let v = parse_number(name, value, unit, Dimension::Count)?;
    if v.fract() != 0.0 || v > 2f64.powi(53) {
        return Err(invalid(format!("value {v} must be a whole number")));
    }
    Ok(v as u64)
}

/// Parses a vendor-specific I/O opcode (unit "opcode", 0x80-0xFF).
pub fn parse_opcode(name: &str, value: &toml::Value, unit: &str) -> Result<u8, ParamError> {
    let invalid = |why: String| ParamError::Invalid { name: name.to_string(), why };
    if unit != "opcode" {
        return Err(invalid(format!("unit {unit:?} given for an opcode; use \"opcode\"")));
    }
    let v = match value {
        toml::Value::Integer(i) => *i as f64,
        toml::Value::Float(f) => *f,
        other => return Err(invalid(format!("expected an opcode number, got {other}"))),
    };
    if v.fract() != 0.0 || !(128.0..=255.0).contains(&v) {
        return Err(invalid(format!("opcode {v} must be a vendor-specific I/O opcode, 0x80-0xFF")));
    }
    Ok(v as u8)
}

/// Parses one of `allowed` (unit "choice").
pub fn parse_choice(name: &str, value: &toml::Value, unit: &str, allowed: &[&str]) -> Result<String, ParamError> {
    let invalid = |why: String| ParamError::Invalid { name: name.to_string(), why };
    if unit != "choice" {
        return Err(invalid(format!("unit {unit:?} given for a choice; use \"choice\"")));
    }
    match value.as_str() {
        Some(v) if allowed.contains(&v) => Ok(v.to_string()),
        _ => Err(invalid(format!("expected one of {allowed:?}, got {value}"))),
    }
}

/// Checks a value against its declared range.
pub fn check_range(name: &str, v: f64, lo: f64, hi: f64) -> Result<(), ParamError> {
    if v < lo || v > hi {
        return Err(ParamError::Invalid { name: name.to_string(), why: format!("value {v} is outside {lo}..={hi}") });
    }
    Ok(())
}

/// Parses a switch (unit "bool").
pub fn parse_bool(name: &str, value: &toml::Value, unit: &str) -> Result<bool, ParamError> {
    let invalid = |why: String| ParamError::Invalid { name: name.to_string(), why };
    if unit != "bool" {
        return Err(invalid(format!("unit {unit:?} given for a switch; use \"bool\"")));
    }
    value.as_bool().ok_or_else(|| invalid(format!("expected true or false, got {value}")))
}

/// What `ext_params!` generates, plus the override paths every extension shares.
pub trait ExtParams: Default {
    /// (name, default as written, unit, source) of every parameter, in declaration order.
    const DOCS: &'static [(&'static str, &'static str, &'static str, &'static str)];

    /// Sets `name` from `value` given in `unit`.
    fn assign(&mut self, name: &str, value: &toml::Value, unit: &str) -> Result<(), ParamError>;

    /// Every numeric parameter's current value in canonical units (switches as 0 or 1, opcodes as numbers;
    /// choices are in `choices`).
    fn values(&self) -> Vec<(&'static str, f64)>;

    /// Every choice parameter's current value.
    fn choices(&self) -> Vec<(&'static str, String)>;

    /// The unit a parameter is declared (and given in JSON) in.
    fn unit_of(name: &str) -> Option<&'static str> {
        Self::DOCS.iter().find(|d| d.0 == name).map(|d| d.2)
    }

    /// Defaults overridden by a preset section (`{ value, unit, source }` per key).
    fn from_section(section: Option<&toml::Table>) -> Result<Self, ParamError> {
        let mut p = Self::default();
        for (k, v) in section.into_iter().flatten() {
            let t = v.as_table();
            let value = t.and_then(|t| t.get("value"));
            let unit = t.and_then(|t| t.get("unit")).and_then(|u| u.as_str());
            let (Some(value), Some(unit)) = (value, unit) else {
                return Err(ParamError::Invalid { name: k.clone(), why: "expected { value, unit, source }".into() });
            };
            p.assign(k, value, unit)?;
        }
        Ok(p)
    }

    /// Sets one parameter from JSON: a number in its declared unit, or a boolean for a switch.
    fn set_json(&mut self, name: &str, value: &serde_json::Value) -> Result<(), ParamError> {
        let unit = Self::unit_of(name).ok_or_else(|| ParamError::Unknown(name.to_string()))?;
        let v = match value {
            serde_json::Value::Bool(b) => toml::Value::Boolean(*b),
            serde_json::Value::Number(n) => toml::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
            serde_json::Value::String(s) if unit == "choice" => toml::Value::String(s.clone()),
            other => {
                return Err(ParamError::Invalid { name: name.to_string(), why: format!("expected a number or bool, got {other}") })
            }
        };
        self.assign(name, &v, unit)
    }

    /// Applies every key of a JSON object (null: nothing) except those in `skip`, which the caller handles.
    fn apply_json_object(&mut self, obj: &serde_json::Value, skip: &[&str]) -> Result<(), ParamError> {
        match obj {
            serde_json::Value::Null => Ok(()),
            serde_json::Value::Object(m) => {
                m.iter().filter(|(k, _)| !skip.contains(&k.as_str())).try_for_each(|(k, v)| self.set_json(k, v))
            }
            other => Err(ParamError::Invalid { name: "<parameters>".into(), why: format!("expected an object, got {other}") }),
        }
    }

    /// The defaults as a TOML `[ext.<name>]` section body, for presets and docs.
    fn section_toml() -> String {
        Self::DOCS
            .iter()
            .map(|(n, v, u, s)| {
                let v = v.split(" in ").next().unwrap_or(v).trim();
                let value = v
                    .strip_prefix("0x")
                    .and_then(|h| u64::from_str_radix(h, 16).ok())
                    .map_or_else(|| v.to_string(), |x| x.to_string());
                format!("{n} = {{ value = {value}, unit = \"{u}\", source = \"{s}\" }}\n")
            })
            .collect()
    }
}

/// Declares an extension's parameter struct; see the module documentation. An optional `extra { .. }` block adds
/// fields that are not unit-checked parameters (with their defaults).
#[macro_export]
macro_rules! ext_params {
    (
        $(#[$smeta:meta])*
        pub struct $S:ident {
            $( $(#[$doc:meta])* $name:ident : $dim:ident $([ $($allowed:literal),+ ])?
               = $default:literal $(in $lo:literal ..= $hi:literal)?, $unit:literal, $source:literal; )*
        }
        $( extra { $( $(#[$xdoc:meta])* $xname:ident : $xty:ty = $xdefault:expr; )* } )?
    ) => {
        $(#[$smeta])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $S {
            $( $(#[$doc])* pub $name: $crate::ext_params!(@ty $dim), )*
            $( $( $(#[$xdoc])* pub $xname: $xty, )* )?
        }

        impl Default for $S {
            fn default() -> Self {
                Self {
                    $( $name: $crate::ext_params!(@default $dim, $default, $unit), )*
                    $( $( $xname: $xdefault, )* )?
                }
            }
        }

        impl $crate::config::ExtParams for $S {
            const DOCS: &'static [(&'static str, &'static str, &'static str, &'static str)] =
                &[ $( (stringify!($name), stringify!($default $(in $lo..=$hi)?), $unit, $source), )* ];

            fn assign(
                &mut self,
                name: &str,
                value: &$crate::config::toml::Value,
                unit: &str,
            ) -> ::core::result::Result<(), $crate::config::ParamError> {
                match name {
                    $( stringify!($name) => {
                        let v = $crate::ext_params!(@parse $dim $([ $($allowed),+ ])?, name, value, unit)?;
                        $( $crate::config::check_range(
                            name,
                            $crate::ext_params!(@float $dim, v.clone()),
                            $crate::ext_params!(@float $dim, $crate::ext_params!(@default $dim, $lo, $unit)),
                            $crate::ext_params!(@float $dim, $crate::ext_params!(@default $dim, $hi, $unit)),
                        )?; )?
                        self.$name = v;
                        Ok(())
                    } )*
                    _ => Err($crate::config::ParamError::Unknown(name.to_string())),
                }
            }

            fn values(&self) -> ::std::vec::Vec<(&'static str, f64)> {
                let mut v = ::std::vec::Vec::new();
                $( $crate::ext_params!(@value v, $dim, stringify!($name), self.$name.clone()); )*
                v
            }

            fn choices(&self) -> ::std::vec::Vec<(&'static str, ::std::string::String)> {
                let mut v = ::std::vec::Vec::new();
                $( $crate::ext_params!(@choice v, $dim, stringify!($name), self.$name.clone()); )*
                v
            }
        }
    };
    (@ty Bool) => { bool };
    (@ty Int) => { u64 };
    (@ty Opcode) => { u8 };
    (@ty Choice) => { ::std::string::String };
    (@ty $other:ident) => { f64 };
    (@float Bool, $v:expr) => { if $v { 1.0 } else { 0.0 } };
    (@float Int, $v:expr) => { $v as f64 };
    (@float Opcode, $v:expr) => { f64::from($v) };
    (@float $dim:ident, $v:expr) => { $v };
    (@value $out:ident, Choice, $n:expr, $v:expr) => { let _ = $v; };
    (@value $out:ident, $dim:ident, $n:expr, $v:expr) => { $out.push(($n, $crate::ext_params!(@float $dim, $v))); };
    (@choice $out:ident, Choice, $n:expr, $v:expr) => { $out.push(($n, $v)); };
    (@choice $out:ident, $dim:ident, $n:expr, $v:expr) => { let _ = $v; };
    (@default Bool, $v:expr, $unit:literal) => { $v };
    (@default Int, $v:expr, $unit:literal) => { $v as u64 };
    (@default Opcode, $v:expr, $unit:literal) => { $v as u8 };
    (@default Choice, $v:expr, $unit:literal) => { ::std::string::String::from($v) };
    (@default $dim:ident, $v:expr, $unit:literal) => {
        f64::from($v) * $crate::config::units::lookup($unit).expect("declared units exist").1
    };
    (@parse Bool, $name:expr, $value:expr, $unit:expr) => { $crate::config::parse_bool($name, $value, $unit) };
    (@parse Int, $name:expr, $value:expr, $unit:expr) => { $crate::config::parse_int($name, $value, $unit) };
    (@parse Opcode, $name:expr, $value:expr, $unit:expr) => { $crate::config::parse_opcode($name, $value, $unit) };
    (@parse Choice [ $($allowed:literal),+ ], $name:expr, $value:expr, $unit:expr) => {
        $crate::config::parse_choice($name, $value, $unit, &[ $($allowed),+ ])
    };
    (@parse $dim:ident, $name:expr, $value:expr, $unit:expr) => {
        $crate::config::parse_number($name, $value, $unit, $crate::config::units::Dimension::$dim)
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::ext_params! {
        /// A test extension.
        pub struct Demo {
            /// A clock.
            clock: Frequency = 400, "MHz", "paper";
            latency: Time = 2, "us", "assumed: test";
            on: Bool = true, "bool", "assumed: test";
            opcode: Opcode = 0xC1, "opcode", "assumed: test";
            slots: Int = 8 in 1..=64, "count", "assumed: test";
            mode: Choice["static", "dynamic"] = "dynamic", "choice", "assumed: test";
            ratio: Real = 0.5 in 0..=1, "ratio", "assumed: test";
        }
        extra {
            /// Not a unit-checked parameter.
            label: String = "x".to_string();
        }
    }

    #[test]
    fn defaults_sections_and_json() {
        let d = Demo::default();
        assert_eq!((d.clock, d.latency, d.on, d.opcode, d.label.as_str()), (400e6, 2000.0, true, 0xC1, "x"));
        assert_eq!((d.slots, d.mode.as_str(), d.ratio), (8, "dynamic", 0.5));
        let sec: toml::Table = toml::from_str(r#"clock = { value = 0.8, unit = "GHz", source = "s" }"#).unwrap();
        let mut p = Demo::from_section(Some(&sec)).unwrap();
        assert_eq!(p.clock, 800e6);
        p.apply_json_object(&serde_json::json!({"latency": 5, "on": false, "skip_me": 1}), &["skip_me"]).unwrap();
        assert_eq!((p.latency, p.on), (5000.0, false));
        assert!(matches!(p.set_json("nope", &serde_json::json!(1)), Err(ParamError::Unknown(_))));
        assert!(p.set_json("clock", &serde_json::json!("fast")).is_err());
        let bad: toml::Table = toml::from_str(r#"clock = { value = 1, unit = "us", source = "s" }"#).unwrap();
        assert!(Demo::from_section(Some(&bad)).unwrap_err().to_string().contains("expected frequency"));
        assert!(Demo::section_toml().contains("opcode = { value = 193, unit = \"opcode\""));
        assert!(Demo::section_toml().contains("slots = { value = 8, unit = \"count\""), "{}", Demo::section_toml());
        assert_eq!(p.values().len(), 6);
        assert_eq!(p.choices(), vec![("mode", "dynamic".to_string())]);
    }

    #[test]
    fn typed_kinds_refuse_what_they_cannot_hold() {
        let mut p = Demo::default();
        p.apply_json_object(&serde_json::json!({"slots": 12, "opcode": 0xE0, "mode": "static", "ratio": 1}), &[]).unwrap();
        assert_eq!((p.slots, p.opcode, p.mode.as_str(), p.ratio), (12, 0xE0, "static", 1.0));
        for (k, v, why) in [
            ("slots", serde_json::json!(2.5), "whole number"),
            ("slots", serde_json::json!(0), "outside 1..=64"),
            ("slots", serde_json::json!(65), "outside"),
            ("slots", serde_json::json!(-1), "non-negative"),
            ("opcode", serde_json::json!(0x10), "0x80-0xFF"),
            ("opcode", serde_json::json!(256), "0x80-0xFF"),
            ("opcode", serde_json::json!(200.5), "0x80-0xFF"),
            ("mode", serde_json::json!("fast"), "one of"),
            ("mode", serde_json::json!(1), "one of"),
            ("ratio", serde_json::json!(1.5), "outside"),
        ] {
            let before = p.clone();
            let e = p.set_json(k, &v).unwrap_err().to_string();
            assert!(e.contains(k) && e.contains(why), "{k}={v}: {e}");
            assert_eq!(p, before, "a refused value changes nothing");
        }
        let sec: toml::Table = toml::from_str(r#"opcode = { value = 0xC5, unit = "count", source = "s" }"#).unwrap();
        assert!(Demo::from_section(Some(&sec)).unwrap_err().to_string().contains("use \"opcode\""));
    }
}
