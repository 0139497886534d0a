//! Device configuration: presets (TOML, every value with unit and source), overrides and the typed schema.

mod presets;
mod schema;
mod tree;
pub mod units;

pub use presets::{load_preset, preset_names, preset_text};
pub use schema::*;
pub use tree::{ConfigTree, ParamDoc};
