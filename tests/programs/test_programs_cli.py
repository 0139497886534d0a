"""``nearflash programs``: compile, examples, identify and run (with the host path beside it)."""

from __future__ import annotations

import json

import pytest

from nearflash import programs
from nearflash.cli import main
from programs_fixtures import objects  # noqa: F401  (fixture)


def test_run_grep_with_host_comparison(tmp_path, capsys):
    if not programs.have_clang():
        pytest.skip("clang is not installed (apt-get install clang)")
    data = tmp_path / "in.txt"
    data.write_bytes(b"one needle, two needles, and hay " * 500)
    assert main(["programs", "run", "grep", "--input", str(data), "--param-str", "needle", "--compare-host", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["value"] == out["host"]["value"] == 1000
    assert out["instructions"] > 0 and out["time_ratio_host_over_storage"] > 0


def test_compile_examples_identify(tmp_path, capsys):
    assert main(["programs", "examples"]) == 0
    assert "lineitem_filter" in capsys.readouterr().out
    assert main(["programs", "identify", "--preset", "samsung-970pro"]) == 0
    assert json.loads(capsys.readouterr().out)["slm_bytes"] > 0
    if programs.have_clang():
        src = tmp_path / "p.c"
        src.write_text('#include "nearflash_program.h"\nu64 f(const struct nf_ctx *c) { return c->cparam1 * 3; }\n')
        assert main(["programs", "compile", str(src), "-o", str(tmp_path / "p.o")]) == 0
        assert (tmp_path / "p.o").read_bytes()[:4] == b"\x7fELF"


def test_errors_are_reported_not_raised(tmp_path, capsys):
    assert main(["programs", "run", str(tmp_path / "missing.o"), "--input", str(tmp_path / "x")]) == 2
    assert "error" in capsys.readouterr().err


def test_docs_list_every_parameter_and_status():
    from pathlib import Path

    from nearflash._native import programs as native

    doc = (Path(__file__).resolve().parents[2] / "docs" / "programs.md").read_text()
    for name, default, unit, source in native.parameters():
        assert f"`{name}`" in doc, f"docs/programs.md does not list parameter {name}"
    for sct, sc, name in native.status_names():
        assert f"{sc:02X}h | {name}" in doc, f"docs/programs.md does not list status {sc:#x} {name}"


def test_quick_experiments_write_their_outputs(tmp_path):
    if not programs.have_clang():
        pytest.skip("clang is not installed (apt-get install clang)")
    assert main(["experiment", "programs", "all", "--quick", "--out", str(tmp_path)]) == 0
    for name in ("compare", "scaling"):
        for ext in ("json", "md", "png"):
            assert (tmp_path / "programs" / f"{name}.{ext}").exists()
    scaling = json.loads((tmp_path / "programs" / "scaling.json").read_text())
    for f in scaling["data"]["fits"].values():
        assert f["ns_per_instruction"] == pytest.approx(f["expected"], rel=0.01)
    # the "paper" column is the preset's CPI / clock: the model's own promise, never shown as a paper validation
    assert all(c["reference"] == "model" and not c["prediction"] for c in scaling["comparisons"])
