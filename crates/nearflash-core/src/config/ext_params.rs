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
//! Values are held in canonical units (`f64`: ns, bytes, B/s, Hz, pJ, mW, pJ/B, counts; `bool` for switches).

use super::units::{self, Dimension};

/// A parameter that cannot be set.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParamError {
    #[error("unknown parameter {0:?}")]
    Unknown(String),
    #[error("parameter {name}: {why}")]
    Invalid { name: String, why: String },
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

    /// Every parameter's current value in canonical units (switches as 0 or 1).
    fn values(&self) -> Vec<(&'static str, f64)>;

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
            $( $(#[$doc:meta])* $name:ident : $dim:ident = $default:expr, $unit:literal, $source:literal; )*
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
                &[ $( (stringify!($name), stringify!($default), $unit, $source), )* ];

            fn assign(
                &mut self,
                name: &str,
                value: &$crate::config::toml::Value,
                unit: &str,
            ) -> ::core::result::Result<(), $crate::config::ParamError> {
                match name {
                    $( stringify!($name) => {
                        self.$name = $crate::ext_params!(@parse $dim, name, value, unit)?;
                        Ok(())
                    } )*
                    _ => Err($crate::config::ParamError::Unknown(name.to_string())),
                }
            }

            fn values(&self) -> ::std::vec::Vec<(&'static str, f64)> {
                vec![ $( (stringify!($name), $crate::ext_params!(@float $dim, self.$name)), )* ]
            }
        }
    };
    (@ty Bool) => { bool };
    (@ty $other:ident) => { f64 };
    (@float Bool, $v:expr) => { if $v { 1.0 } else { 0.0 } };
    (@float $dim:ident, $v:expr) => { $v };
    (@default Bool, $v:expr, $unit:literal) => { $v };
    (@default $dim:ident, $v:expr, $unit:literal) => {
        f64::from($v) * $crate::config::units::lookup($unit).expect("declared units exist").1
    };
    (@parse Bool, $name:expr, $value:expr, $unit:expr) => { $crate::config::parse_bool($name, $value, $unit) };
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
            opcode: Count = 0xC1, "count", "assumed: test";
        }
        extra {
            /// Not a unit-checked parameter.
            label: String = "x".to_string();
        }
    }

    #[test]
    fn defaults_sections_and_json() {
        let d = Demo::default();
        assert_eq!((d.clock, d.latency, d.on, d.opcode, d.label.as_str()), (400e6, 2000.0, true, 193.0, "x"));
        let sec: toml::Table = toml::from_str(r#"clock = { value = 0.8, unit = "GHz", source = "s" }"#).unwrap();
        let mut p = Demo::from_section(Some(&sec)).unwrap();
        assert_eq!(p.clock, 800e6);
        p.apply_json_object(&serde_json::json!({"latency": 5, "on": false, "skip_me": 1}), &["skip_me"]).unwrap();
        assert_eq!((p.latency, p.on), (5000.0, false));
        assert!(matches!(p.set_json("nope", &serde_json::json!(1)), Err(ParamError::Unknown(_))));
        assert!(p.set_json("clock", &serde_json::json!("fast")).is_err());
        let bad: toml::Table = toml::from_str(r#"clock = { value = 1, unit = "us", source = "s" }"#).unwrap();
        assert!(Demo::from_section(Some(&bad)).unwrap_err().to_string().contains("expected frequency"));
        assert!(Demo::section_toml().contains("opcode = { value = 193, unit = \"count\""));
        assert_eq!(p.values().len(), 4);
    }
}
