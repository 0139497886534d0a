"""A crate whose integration tests are modules of one binary (`autotests = false`, tests/main.rs) declares every
tests/*.rs file there: cargo no longer finds them itself, so a file left out would silently never run."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_integration_test_file_is_a_module_of_the_test_binary():
    merged = [c for c in sorted((ROOT / "crates").iterdir()) if (c / "Cargo.toml").exists()
              and re.search(r"^autotests\s*=\s*false", (c / "Cargo.toml").read_text(), re.M)]
    assert len(merged) >= 5, "the crates with one integration-test binary were found"
    for crate in merged:
        main = crate / "tests" / "main.rs"
        declared = set(re.findall(r"^mod (\w+);", main.read_text(), re.M))
        files = {p.stem for p in (crate / "tests").glob("*.rs") if p.name != "main.rs"}
        assert files <= declared, f"{crate.name}: tests/{sorted(files - declared)}.rs not declared in tests/main.rs"
        assert 'path = "tests/main.rs"' in (crate / "Cargo.toml").read_text(), crate.name


def test_a_crate_without_doctests_has_no_documentation_example_to_run():
    """`doctest = false` spares `cargo test` a rustdoc pass over a crate with nothing to run; a runnable example
    added to such a crate's docs (a fenced block that is not `text` or `ignore`) would silently never run."""
    off = [c for c in sorted((ROOT / "crates").iterdir()) if (c / "Cargo.toml").exists()
           and re.search(r"^doctest\s*=\s*false", (c / "Cargo.toml").read_text(), re.M)]
    assert len(off) >= 10, "the crates without doctests were found"
    fence = re.compile(r"^\s*//[/!]\s*```(\w*)", re.M)
    for crate in off:
        for src in sorted((crate / "src").rglob("*.rs")):
            opening = fence.findall(src.read_text())[::2]  # every other fence opens a block
            runnable = [lang for lang in opening if lang not in ("text", "ignore")]
            assert not runnable, f"{src.relative_to(ROOT)}: a doc example (```{runnable[0]}) in a crate with doctest = false"
