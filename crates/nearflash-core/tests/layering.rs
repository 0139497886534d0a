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
            rest = &after[..];
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
