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

    #[test]
    fn channel_arbitration_values_are_checked() {
        let with = |pairs: &[(&str, &str)]| {
            let mut tree = load_preset("cosmos-plus").unwrap();
            for (k, v) in pairs {
                tree.set(k, v).unwrap();
            }
            DeviceConfig::from_tree(&tree).map(|_| ()).map_err(|e| e.to_string())
        };
        for ok in ["interleave", "data_first"] {
            with(&[("nand.channel_arbitration", ok)]).unwrap();
        }
        with(&[("nand.channel_arbitration", "mqsim_tsu"), ("nand.cache_read", "false")]).unwrap();
        let e = with(&[("nand.channel_arbitration", "mqsim_tsu")]).unwrap_err();
        assert!(e.contains("nand.cache_read = false"), "{e}");
        let e = with(&[("nand.channel_arbitration", "mqsim_tsu"), ("nand.cache_read", "false"), ("nand.dies_per_chip", "2")])
            .unwrap_err();
        assert!(e.contains("nand.dies_per_chip must be 1 (is 2"), "{e}");
        let e = with(&[("nand.channel_arbitration", "round_robin")]).unwrap_err();
        assert!(e.contains("\"round_robin\"") && e.contains("interleave, data_first or mqsim_tsu"), "{e}");
    }

    #[test]
    fn submission_queue_arbitration_values_are_checked() {
        let with = |k: &str, v: &str| {
            let mut tree = load_preset("cosmos-plus").unwrap();
            tree.set(k, v).unwrap();
            DeviceConfig::from_tree(&tree).map(|_| ()).map_err(|e| e.to_string())
        };
        with("nvme.arbitration", "round_robin").unwrap();
        with("nvme.arbitration", "weighted").unwrap();
        let e = with("nvme.arbitration", "wrr").unwrap_err();
        assert!(e.contains("\"wrr\"") && e.contains("round_robin or weighted"), "{e}");
        for bad in ["0", "3", "256"] {
            let e = with("nvme.arbitration_burst", bad).unwrap_err();
            assert!(e.contains("a power of two from 1 to 128"), "{bad}: {e}");
        }
        for (k, bad) in [("nvme.weight_high", "0"), ("nvme.weight_low", "257")] {
            let e = with(k, bad).unwrap_err();
            assert!(e.contains("from 1 to 256"), "{k}={bad}: {e}");
        }
    }

    /// Each of `good` loads (as `get` reads it back), each of `bad` fails naming `key` and `expected`, and every
    /// preset has `default`.
    fn check_choice<T: PartialEq + std::fmt::Debug>(
        key: &str,
        get: fn(&DeviceConfig) -> T,
        good: &[(&str, T)],
        bad: &[&str],
        expected: &str,
        default: T,
    ) {
        let with = |v: &str| {
            let mut tree = load_preset("cosmos-plus").unwrap();
            tree.set(key, v).unwrap();
            DeviceConfig::from_tree(&tree).map(|c| get(&c)).map_err(|e| e.to_string())
        };
        for (v, want) in good {
            assert_eq!(&with(v).unwrap(), want, "{key} = {v}");
        }
        for v in bad {
            let e = with(v).unwrap_err();
            assert!(e.contains(key) && e.contains(expected), "{key} = {v:?}: {e}");
        }
        for name in preset_names() {
            let cfg = DeviceConfig::from_tree(&load_preset(name).unwrap()).unwrap();
            assert_eq!(get(&cfg), default, "{name}: the default {key}");
        }
    }

    #[test]
    fn gc_free_values_are_checked() {
        use crate::config::GcFree;
        let good = [("issued", GcFree::Issued), ("erased", GcFree::Erased)];
        let bad = ["erase", "", "Erased", "none"];
        check_choice("ftl.gc_free", DeviceConfig::gc_free, &good, &bad, "expected issued or erased", GcFree::Issued);
    }

    #[test]
    fn unmapped_read_values_are_checked() {
        use crate::config::UnmappedRead;
        let good = [("zeroes", UnmappedRead::Zeroes), ("allocate", UnmappedRead::Allocate)];
        let bad = ["map", "", "Allocate"];
        let expected = "expected zeroes or allocate";
        check_choice("ftl.unmapped_read", DeviceConfig::unmapped_read, &good, &bad, expected, UnmappedRead::Zeroes);
    }
}
