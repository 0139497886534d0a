//! The presets shipped with nearflash, embedded at build time so that no file lookup is needed at run time.

use super::ConfigTree;
use crate::error::{Result, SimError};

const PRESETS: &[(&str, &str)] = &[
    ("cosmos-plus", include_str!("../../../../presets/cosmos-plus.toml")),
    ("nice-zu7eg", include_str!("../../../../presets/nice-zu7eg.toml")),
    ("searssd", include_str!("../../../../presets/searssd.toml")),
    ("issd", include_str!("../../../../presets/issd.toml")),
    ("issd-prototype", include_str!("../../../../presets/issd-prototype.toml")),
    ("samsung-970pro", include_str!("../../../../presets/samsung-970pro.toml")),
];

/// Names of the embedded presets.
pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|(n, _)| *n).collect()
}

/// The TOML text of an embedded preset.
pub fn preset_text(name: &str) -> Result<String> {
    PRESETS.iter().find(|(n, _)| *n == name).map(|(_, t)| t.to_string()).ok_or_else(|| {
        SimError::Config(format!("unknown preset {name:?}; available: {}", preset_names().join(", ")))
    })
}

/// Loads a preset by name, or from a path if `name` ends in `.toml`.
pub fn load_preset(name: &str) -> Result<ConfigTree> {
    let text = if name.ends_with(".toml") {
        std::fs::read_to_string(name).map_err(|e| SimError::Config(format!("cannot read preset file {name}: {e}")))?
    } else {
        preset_text(name)?
    };
    ConfigTree::parse(&text, &preset_text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DeviceConfig;

    #[test]
    fn every_embedded_preset_loads_and_validates() {
        for name in preset_names() {
            let tree = load_preset(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            let cfg = DeviceConfig::from_tree(&tree).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(cfg.logical_bytes() > 0, "{name}");
            assert_eq!(tree.meta("name"), Some(name), "{name}: meta.name must match the preset name");
        }
    }
}
