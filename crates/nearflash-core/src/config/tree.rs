//! The untyped parameter tree of a preset: loading, inheritance, overrides and documentation.
//!
//! A preset is a TOML document whose leaves are `{ value, unit, source }` tables. Before it is turned into typed
//! structs we keep it as a tree so that overrides can be applied by dotted path ("nand.t_read=60us"), every value
//! can be listed with its unit and source, and the resolved tree can be stored beside a device image.

use super::units;
use crate::error::{Result, SimError};
use std::collections::BTreeMap;

/// A preset's parameters, before typing.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigTree {
    pub(crate) root: toml::Table,
}

/// One documented parameter, as listed by `nearflash presets --show`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ParamDoc {
    pub path: String,
    pub value: String,
    pub unit: String,
    pub source: String,
}

fn is_param(t: &toml::Table) -> bool {
    t.contains_key("value") && t.contains_key("unit")
}

impl ConfigTree {
    /// Parses a preset document. `resolve` maps an `inherit = "name"` key to the parent document's text.
    pub fn parse(text: &str, resolve: &dyn Fn(&str) -> Result<String>) -> Result<Self> {
        Self::parse_depth(text, resolve, 0)
    }

    fn parse_depth(text: &str, resolve: &dyn Fn(&str) -> Result<String>, depth: usize) -> Result<Self> {
        if depth > 8 {
            return Err(SimError::Config("preset inheritance is nested more than 8 levels deep".into()));
        }
        let mut root: toml::Table =
            toml::from_str(text).map_err(|e| SimError::Config(format!("preset is not valid TOML: {e}")))?;
        if let Some(parent) = root.remove("inherit") {
            let name = parent
                .as_str()
                .ok_or_else(|| SimError::Config("`inherit` must name a preset".into()))?
                .to_string();
            let mut base = Self::parse_depth(&resolve(&name)?, resolve, depth + 1)?;
            merge(&mut base.root, root);
            root = base.root;
        }
        let tree = ConfigTree { root };
        tree.check_leaves()?;
        Ok(tree)
    }

    /// Every leaf must be a `{value, unit, source}` table with a known unit and a non-empty source.
    fn check_leaves(&self) -> Result<()> {
        fn walk(t: &toml::Table, path: &str, out: &mut Vec<String>) {
            for (k, v) in t {
                let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                match v {
                    toml::Value::Table(sub) if is_param(sub) => {
                        let unit = sub.get("unit").and_then(|u| u.as_str()).unwrap_or("");
                        if units::lookup(unit).is_none() {
                            out.push(format!("{p}: unknown unit {unit:?}"));
                        }
                        match sub.get("source").and_then(|s| s.as_str()) {
                            Some(s) if !s.trim().is_empty() => {}
                            _ => out.push(format!("{p}: missing `source` (paper, datasheet or \"assumed: why\")")),
                        }
                    }
                    toml::Value::Table(sub) => walk(sub, &p, out),
                    _ if path == "meta" || (path.is_empty() && k == "meta") => {}
                    _ => out.push(format!("{p}: must be {{ value, unit, source }}")),
                }
            }
        }
        let mut problems = Vec::new();
        walk(&self.root, "", &mut problems);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(SimError::Config(format!("preset parameters are incomplete:\n  {}", problems.join("\n  "))))
        }
    }

    /// The full dotted paths of every parameter.
    pub fn param_paths(&self) -> Vec<String> {
        self.docs().into_iter().map(|d| d.path).collect()
    }

    /// Resolves a possibly short key (a unique leaf name such as `t_read`, or a `section__leaf` spelling) to
    /// its full dotted path.
    pub fn resolve_key(&self, key: &str) -> Result<String> {
        let key = key.replace("__", ".");
        let paths = self.param_paths();
        if paths.contains(&key) {
            return Ok(key);
        }
        let suffix = format!(".{key}");
        let hits: Vec<&String> = paths.iter().filter(|p| p.ends_with(&suffix)).collect();
        match hits.len() {
            1 => Ok(hits[0].clone()),
            0 => {
                let close: Vec<&String> =
                    paths.iter().filter(|p| p.contains(key.rsplit('.').next().unwrap_or(&key))).take(5).collect();
                Err(SimError::Config(format!(
                    "unknown parameter {key:?}{}",
                    if close.is_empty() { String::new() } else { format!("; did you mean one of {close:?}?") }
                )))
            }
            _ => Err(SimError::Config(format!("parameter {key:?} is ambiguous: {hits:?}; give the full path"))),
        }
    }

    /// Sets a parameter from text such as `60us`, `16`, `true` or `pcie`. Without a unit the preset's unit is
    /// kept. The source becomes "override".
    pub fn set(&mut self, key: &str, text: &str) -> Result<()> {
        let path = self.resolve_key(key)?;
        let param = self.param_mut(&path)?;
        let old_unit = param.get("unit").and_then(|u| u.as_str()).unwrap_or("").to_string();
        let (value, unit) = parse_override(text, &old_unit)
            .map_err(|e| SimError::Config(format!("override {path}={text:?}: {e}")))?;
        let (old_dim, _) = units::lookup(&old_unit).expect("checked at load");
        let (new_dim, _) = units::lookup(&unit)
            .ok_or_else(|| SimError::Config(format!("override {path}: unknown unit {unit:?}")))?;
        if old_dim != new_dim {
            return Err(SimError::Config(format!(
                "override {path}: unit {unit:?} is {new_dim}, the parameter is {old_dim}"
            )));
        }
        param.insert("value".into(), value);
        param.insert("unit".into(), toml::Value::String(unit));
        param.insert("source".into(), toml::Value::String("override".into()));
        Ok(())
    }

    /// Sets a parameter from a TOML value (used by the Python layer, which passes typed values).
    pub fn set_value(&mut self, key: &str, value: toml::Value) -> Result<()> {
        match value {
            toml::Value::String(s) => self.set(key, &s),
            toml::Value::Integer(i) => self.set(key, &i.to_string()),
            toml::Value::Float(f) => self.set(key, &format!("{f:?}")),
            toml::Value::Boolean(b) => self.set(key, &b.to_string()),
            other => Err(SimError::Config(format!("override {key}: unsupported value {other}"))),
        }
    }

    fn param_mut(&mut self, path: &str) -> Result<&mut toml::Table> {
        let mut cur = &mut self.root;
        for part in path.split('.') {
            cur = cur
                .get_mut(part)
                .and_then(|v| v.as_table_mut())
                .ok_or_else(|| SimError::Config(format!("unknown parameter {path:?}")))?;
        }
        Ok(cur)
    }

    /// A sub-table (e.g. `ext.issd`) for extensions to deserialize with their own schema.
    pub fn section(&self, path: &str) -> Option<&toml::Table> {
        let mut cur = &self.root;
        for part in path.split('.') {
            cur = cur.get(part)?.as_table()?;
        }
        Some(cur)
    }

    /// Adds a section if the preset lacks it (extensions bring defaults for their parameters).
    pub fn insert_default_section(&mut self, path: &str, defaults: toml::Table) -> Result<()> {
        let mut cur = &mut self.root;
        let parts: Vec<&str> = path.split('.').collect();
        for part in &parts {
            let entry = cur.entry(part.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
            cur = entry
                .as_table_mut()
                .ok_or_else(|| SimError::Config(format!("{path} is not a table in the preset")))?;
        }
        let mut d = defaults;
        merge(&mut d, std::mem::take(cur));
        *cur = d;
        self.check_leaves()
    }

    /// Every parameter with its value, unit and source, in path order.
    pub fn docs(&self) -> Vec<ParamDoc> {
        fn walk(t: &toml::Table, path: &str, out: &mut Vec<ParamDoc>) {
            for (k, v) in t {
                let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                if let toml::Value::Table(sub) = v {
                    if is_param(sub) {
                        let s = |key: &str| match sub.get(key) {
                            Some(toml::Value::String(s)) => s.clone(),
                            Some(other) => other.to_string(),
                            None => String::new(),
                        };
                        out.push(ParamDoc { path: p, value: s("value"), unit: s("unit"), source: s("source") });
                    } else if k != "meta" || !path.is_empty() {
                        walk(sub, &p, out);
                    }
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.root, "", &mut out);
        out
    }

    /// Free-text metadata from the `[meta]` table.
    pub fn meta(&self, key: &str) -> Option<&str> {
        self.root.get("meta")?.get(key)?.as_str()
    }

    pub fn set_meta(&mut self, key: &str, value: &str) {
        let meta = self.root.entry("meta").or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if let Some(t) = meta.as_table_mut() {
            t.insert(key.into(), toml::Value::String(value.into()));
        }
    }

    pub fn to_toml_string(&self) -> String {
        toml::to_string(&self.root).expect("a parsed TOML table serializes")
    }

    /// The values only, as a nested map (for JSON reports).
    pub fn values(&self) -> BTreeMap<String, String> {
        self.docs().into_iter().map(|d| (d.path, format!("{} {}", d.value, d.unit))).collect()
    }
}

/// Recursively overlays `top` onto `base`; a parameter table replaces the base's parameter whole.
fn merge(base: &mut toml::Table, top: toml::Table) {
    for (k, v) in top {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(t)) if !is_param(b) && !is_param(&t) => merge(b, t),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

/// Splits "60us" into (60, "us"); a bare number keeps `default_unit`.
fn parse_override(text: &str, default_unit: &str) -> std::result::Result<(toml::Value, String), String> {
    let t = text.trim();
    match default_unit {
        "bool" => {
            return match t {
                "true" | "1" | "yes" | "on" => Ok((toml::Value::Boolean(true), "bool".into())),
                "false" | "0" | "no" | "off" => Ok((toml::Value::Boolean(false), "bool".into())),
                _ => Err(format!("expected true or false, got {t:?}")),
            }
        }
        "enum" | "text" => return Ok((toml::Value::String(t.to_string()), default_unit.to_string())),
        _ => {}
    }
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E'));
    // "e" inside a unit such as "enum" never reaches here; numbers like 1e-3 are accepted.
    let (num, unit) = match split {
        Some(i) => (&t[..i], t[i..].trim()),
        None => (t, ""),
    };
    let unit = if unit.is_empty() { default_unit } else { unit };
    let value = if let Ok(i) = num.parse::<i64>() {
        toml::Value::Integer(i)
    } else if let Ok(f) = num.parse::<f64>() {
        toml::Value::Float(f)
    } else {
        return Err(format!("{t:?} is not a number with an optional unit"));
    };
    Ok((value, unit.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
        [meta]
        name = "base"
        [nand]
        t_read = { value = 50, unit = "us", source = "datasheet" }
        channels = { value = 8, unit = "count", source = "paper" }
        cache_read = { value = true, unit = "bool", source = "assumed: common" }
    "#;

    fn no_parent(_: &str) -> Result<String> {
        Err(SimError::Config("no parent".into()))
    }

    #[test]
    fn overrides_keep_unit_and_mark_source() {
        let mut t = ConfigTree::parse(BASE, &no_parent).unwrap();
        t.set("t_read", "60").unwrap();
        t.set("nand.channels", "16").unwrap();
        t.set("nand__cache_read", "false").unwrap();
        let d = t.docs();
        let tr = d.iter().find(|p| p.path == "nand.t_read").unwrap();
        assert_eq!((tr.value.as_str(), tr.unit.as_str(), tr.source.as_str()), ("60", "us", "override"));
        t.set("t_read", "0.07ms").unwrap();
        assert!(t.set("t_read", "5MB/s").unwrap_err().to_string().contains("time"));
        assert!(t.set("t_raed", "5").is_err());
    }

    #[test]
    fn inheritance_overlays_the_parent() {
        let child = "inherit = \"base\"\n[nand]\nchannels = { value = 32, unit = \"count\", source = \"paper\" }";
        let t = ConfigTree::parse(child, &|_| Ok(BASE.to_string())).unwrap();
        let d = t.docs();
        assert!(d.iter().any(|p| p.path == "nand.channels" && p.value == "32"));
        assert!(d.iter().any(|p| p.path == "nand.t_read" && p.value == "50"));
    }

    #[test]
    fn leaves_without_source_are_rejected() {
        let bad = "[nand]\nt_read = { value = 50, unit = \"us\" }\nx = 5";
        let e = ConfigTree::parse(bad, &no_parent).unwrap_err().to_string();
        assert!(e.contains("nand.t_read: missing `source`") && e.contains("nand.x"), "{e}");
    }
}
