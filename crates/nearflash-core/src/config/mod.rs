//! Device configuration: presets (TOML, every value with unit and source), overrides and the typed schema.

mod ext_params;
mod presets;
mod schema;
mod tree;
pub mod units;

pub use ext_params::{check_range, parse_bool, parse_choice, parse_int, parse_number, parse_opcode, ExtParams, ParamError};
pub use presets::{load_preset, preset_names, preset_text};
pub use schema::*;
pub use tree::{ConfigTree, ParamDoc};

/// Re-exported for `ext_params!` expansions in extension crates.
pub use toml;
