//! Generates the systems' binding modules list from this crate's dependencies: each `nearflash-<system>` dependency
//! (other than the core) has its binding module `src/<system>.rs`, registered as `nearflash._native.<system>`. So
//! exposing a system to Python is one edit here, its dependency line in `Cargo.toml`, beside its binding module.

use std::path::Path;

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let manifest = Path::new(&dir).join("Cargo.toml");
    println!("cargo:rerun-if-changed={}", manifest.display());
    let text = std::fs::read_to_string(&manifest).expect("Cargo.toml is readable");
    let systems = system_dependencies(&text);
    let src = Path::new(&dir).join("src");
    for s in &systems {
        let module = src.join(format!("{s}.rs"));
        println!("cargo:rerun-if-changed={}", module.display());
        assert!(module.is_file(), "nearflash-py depends on nearflash-{s} but has no binding module {}", module.display());
    }
    let mods: String = systems.iter().map(|s| format!("    pub mod {s};\n")).collect();
    let calls: String = systems.iter().map(|s| format!("    systems::{s}::register(m)?;\n")).collect();
    let code = format!(
        "#[path = {src:?}]\nmod systems {{\n{mods}}}\n\n/// Registers every system's binding module.\nfn register_systems(m: &Bound<'_, PyModule>) -> PyResult<()> {{\n{calls}    Ok(())\n}}\n",
        src = src.display().to_string(),
    );
    let out = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("systems.rs");
    std::fs::write(out, code).expect("OUT_DIR is writable");
}

/// Module names (`-` as `_`) of the `nearflash-*` dependencies in `[dependencies]`, the core excepted, sorted.
fn system_dependencies(manifest: &str) -> Vec<String> {
    let mut section = "";
    let mut out = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
        } else if section == "[dependencies]" {
            let key = line.split(['=', '.']).next().unwrap_or("").trim();
            if let Some(system) = key.strip_prefix("nearflash-").filter(|s| *s != "core") {
                out.push(system.replace('-', "_"));
            }
        }
    }
    out.sort();
    out
}
