"""Comparison marks: fitted, paper-input, what the paper column holds, not comparable at this size."""

import json

import pytest

from nearflash.experiment import REFERENCES, Experiment


def test_marks_reach_json_markdown_and_console(tmp_path):
    e = Experiment("sys", "fig", "title", tmp_path)
    e.compare("plain", 2.0, 2.0)
    e.compare("calibrated", 1.0, 1.0, fitted=True)
    e.compare("uses the paper's ratio", 3.0, 2.0, paper_input=True)
    e.compare("against the preset", 1.0, 1.0, reference="model")
    e.compare("tiny run", 0.1, 37.0, comparable=False, why_not_comparable="600 items")
    e.write()
    d = json.loads((tmp_path / "fig.json").read_text())
    rows = {c["metric"]: c for c in d["comparisons"]}
    assert rows["plain"]["prediction"] is True
    assert [rows[m]["prediction"] for m in ("calibrated", "uses the paper's ratio", "against the preset", "tiny run")] \
        == [False] * 4
    assert rows["against the preset"]["reference"] == "model"
    assert rows["tiny run"]["why_not_comparable"] == "600 items"
    md = (tmp_path / "fig.md").read_text()
    for mark in ("(fitted)", "(paper input)", "(reference: model)", "(not comparable at this size: 600 items)"):
        assert mark in md
    assert "| plain |" in md
    assert "[paper input]" in e.console()


@pytest.mark.parametrize("kw", [{"reference": "guess"}, {"better": "bigger"}])
def test_unknown_marks_are_refused(tmp_path, kw):
    with pytest.raises(ValueError, match="must be"):
        Experiment("s", "f", "t", tmp_path).compare("m", 1, 1, **kw)


def test_every_reference_is_described():
    assert set(REFERENCES) == {"paper", "paper-derived", "model", "fit", "check"}
    assert all(isinstance(v, str) and v for v in REFERENCES.values())
