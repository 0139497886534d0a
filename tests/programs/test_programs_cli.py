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
    (tmp_path / "x").write_bytes(b"data")
    assert main(["programs", "run", str(tmp_path / "missing.o"), "--input", str(tmp_path / "x")]) == 2
    assert "program" in capsys.readouterr().err


@pytest.mark.parametrize("args,says", [
    (["--input", "{tmp}/missing.txt"], "--input '{tmp}/missing.txt' cannot be read: No such file or directory"),
    (["--input", "{tmp}"], "cannot be read: Is a directory"),
    (["--input", "{tmp}/empty.txt"], "is empty"),
])
def test_a_bad_input_file_is_an_error_naming_the_option_not_a_traceback(tmp_path, capsys, args, says):
    (tmp_path / "empty.txt").write_bytes(b"")
    assert main(["programs", "run", "grep", *[a.format(tmp=tmp_path) for a in args]]) == 2
    assert says.format(tmp=tmp_path) in capsys.readouterr().err


@pytest.mark.parametrize("flag,value,says", [("--out-bytes", "-5", "must be 0 or more"),
                                             ("--cparam1", "-1", "must be in [0, 2**64)"),
                                             ("--cparam2", str(2**64), "must be in [0, 2**64)"),
                                             ("--param-i32", str(2**31), "an int32"),
                                             ("--seed", "-3", "a seed")])
def test_out_of_range_options_are_refused_by_name(tmp_path, capsys, flag, value, says):
    (tmp_path / "x").write_bytes(b"data")
    with pytest.raises(SystemExit):
        main(["programs", "run", "grep", "--input", str(tmp_path / "x"), flag, value])
    err = capsys.readouterr().err
    assert f"argument {flag}" in err and says in err


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
    for name in ("compare", "scaling", "sqlite"):
        for ext in ("json", "md", "png"):
            assert (tmp_path / "programs" / f"{name}.{ext}").exists()
    # SQLite lookups: every answer checked against sqlite3 (the run raises otherwise); at depth 3 and more, in
    # storage beats the cold host path by at least the ratio the preset predicts, and a warm host cache wins
    lookups = json.loads((tmp_path / "programs" / "sqlite.json").read_text())["data"]["results"]
    assert sorted({r["depth"] for r in lookups.values()}) == [2, 3, 4]
    for r in lookups.values():
        if r["depth"] >= 3:
            assert r["host_cold_us"] / r["storage_us"] >= r["predicted"]["ratio"] * 0.99, r
        assert r["host_warm_us"] < r["storage_us"], r
    scaling = json.loads((tmp_path / "programs" / "scaling.json").read_text())
    for f in scaling["data"]["fits"].values():
        assert f["ns_per_instruction"] == pytest.approx(f["expected"], rel=0.01)
    # the "paper" column is the preset's CPI / clock: the model's own promise, never shown as a paper validation
    assert all(c["reference"] == "model" and not c["prediction"] for c in scaling["comparisons"])
