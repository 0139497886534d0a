//! The core's layers import each other one way only, bottom up, as `docs/architecture.md`'s layer table lists them:
//! a module may use `crate::<m>` only for layers below its own. `error` is shared by all layers; test code
//! (`tests.rs` files and `#[cfg(test)]` modules) may use anything.

use std::path::{Path, PathBuf};

/// Bottom up. `ext_params` is the configuration layer's macro.
const LAYERS: &[&[&str]] = &[
    &["error"],
    &["config", "ext_params"],
    &["engine"],
    &["nand"],
    &["store"],
    &["ftl"],
    &["image"],
    &["ctrl"],
    &["nvme"],
    &["host"],
    &["device"],
    &["bench"],
];

fn rank(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The `crate::<module>` paths a source file uses outside its test code.
fn imports(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break; // test modules close the file by convention
        }
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            let after = &rest[i + "crate::".len()..];
            let name: String = after.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if !name.is_empty() {
                found.push((n + 1, name));
            }
            rest = after;
        }
    }
    found
}

#[test]
fn no_layer_imports_a_layer_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut upward = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        let module = rel.iter().next().unwrap().to_string_lossy().trim_end_matches(".rs").to_string();
        if matches!(module.as_str(), "lib" | "main") || rel.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let me = rank(&module).unwrap_or_else(|| panic!("{}: module {module} is not in the layer table", rel.display()));
        for (line, used) in imports(&std::fs::read_to_string(f).unwrap()) {
            if used == module {
                continue;
            }
            let Some(theirs) = rank(&used) else { panic!("{}:{line}: crate::{used} is not in the layer table", rel.display()) };
            if theirs > me {
                upward.push(format!("{}:{line}: {module} uses crate::{used}, a layer above it", rel.display()));
            }
        }
    }
    assert!(upward.is_empty(), "upward imports:\n{}", upward.join("\n"));
}

#[test]
fn the_lint_sees_an_upward_import() {
    let text = "use crate::device::Device;\n// crate::bench in a comment\n#[cfg(test)]\nmod tests { use crate::bench; }\n";
    assert_eq!(imports(text), vec![(1, "device".to_string())]);
}

#[test]
fn the_architecture_table_lists_the_layers_in_this_order() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/architecture.md")).unwrap();
    let table = &doc[doc.find("## Layers (bottom up)").expect("layer table")..];
    let table = &table[..table.find("\n## ").unwrap_or(table.len())];
    let order: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with('|'))
        .filter_map(|l| l.split('`').nth(1))
        .filter_map(|m| m.strip_prefix("core::"))
        .collect();
    let expected: Vec<&str> = LAYERS.iter().skip(1).map(|l| l[0]).collect();
    assert_eq!(order, expected, "docs/architecture.md's layer table and this test's LAYERS must agree");
}

/// What an extension crate may name in the core: the extension interface and the modules and items the core
/// offers every user (its root re-exports), never a layer's own module path.
const PUBLIC_API: &[&str] = &[
    "ext", "ext_params", "nvme", "config", "error", "Device", "DeviceOptions", "Done", "Report", "FillPattern", "Result",
    "SimError",
];

/// The first path segment of every `nearflash_core::` path a source file names outside its test code, with
/// `nearflash_core::{a, b::{c, d}}` groups split into their members (`a`, `b`), and the line each is on.
fn core_paths(text: &str) -> Vec<(usize, String)> {
    let code: String = text
        .lines()
        .take_while(|l| !l.trim_start().starts_with("#[cfg(test)]"))
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let ident = |s: &str| -> String { s.trim_start().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect() };
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let mut found = Vec::new();
    for (i, _) in code.match_indices("nearflash_core::") {
        let at = i + "nearflash_core::".len();
        let after = &code[at..];
        if !after.starts_with('{') {
            found.push((line_of(at), ident(after)));
            continue;
        }
        // A group: its members at depth 1, each starting after the `{` or a `,`.
        let mut depth = 0;
        let mut member_start = true;
        for (j, c) in after.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 1 => member_start = true,
                c if c.is_whitespace() => {}
                _ if member_start && depth == 1 => {
                    found.push((line_of(at + j), ident(&after[j..])));
                    member_start = false;
                }
                _ => {}
            }
            if c == '{' && depth == 1 {
                member_start = true;
            }
            if depth == 0 {
                break;
            }
        }
    }
    found.retain(|(_, m)| !m.is_empty());
    found
}

#[test]
fn extension_crates_use_only_the_cores_public_api() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut checked = 0;
    let mut private = Vec::new();
    for entry in std::fs::read_dir(&crates).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        // The core itself, the Python bindings (conversion code for every module) and the host-side front ends
        // (trace replay and flows, the NBD plugin: hosts that drive the device with `bench`'s address streams) are
        // not extensions.
        let host_side = ["nearflash-core", "nearflash-py", "nearflash-workloads", "nearflash-nbd"];
        if !name.starts_with("nearflash-") || host_side.contains(&name.as_str()) {
            continue;
        }
        let mut files = Vec::new();
        rust_files(&dir.join("src"), &mut files);
        for f in &files {
            if f.file_name().is_some_and(|n| n == "tests.rs") {
                continue;
            }
            for (line, used) in core_paths(&std::fs::read_to_string(f).unwrap()) {
                checked += 1;
                if !PUBLIC_API.contains(&used.as_str()) {
                    private.push(format!("{}:{line}: nearflash_core::{used}", f.strip_prefix(&crates).unwrap().display()));
                }
            }
        }
    }
    assert!(checked > 50, "the extension crates were found ({checked} core paths)");
    assert!(private.is_empty(), "extension crates reach past the core's public API (use nearflash_core::ext):\n{}", private.join("\n"));
}

#[test]
fn the_extension_lint_sees_grouped_and_nested_paths() {
    let text = "use nearflash_core::{ext::{self, Sqe}, engine::Time,\n    Device};\nlet t: nearflash_core::nand::Geometry;\n#[cfg(test)]\nmod tests { use nearflash_core::ftl; }\n";
    let got: Vec<String> = core_paths(text).into_iter().map(|(_, m)| m).collect();
    assert_eq!(got, ["ext", "engine", "Device", "nand"]);
}
