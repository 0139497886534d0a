"""`nearflash report OUT`: renders every experiment under an output directory into one self-contained HTML page;
checked by parsing the page: one section per experiment, predictions apart from fitted / paper-input / derived /
not-comparable rows with their marks, the deviation (not flagged on the better side of a paper's value, summarised
over predictions only), the tables and the figures (embedded), and damaged or foreign JSON files skipped."""

import base64
import json
from html.parser import HTMLParser
from pathlib import Path

from nearflash import cli
from nearflash.experiment import Experiment
from nearflash.html_report import deviation, render


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.h3, self.imgs, self.tables, self.rows, self.hrefs = [], [], [], [], []
        self._tag, self._row, self._cell, self._table = None, None, None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.imgs.append(a["src"])
        elif tag == "a":
            self.hrefs.append(a.get("href", ""))
        elif tag == "table":
            self._table = []
            self.tables.append((a.get("class"), self._table))
        elif tag == "tr":
            self._row = {"class": a.get("class"), "cells": []}
            self._table.append(self._row)
        elif tag in ("td", "th"):
            self._cell = ""
        self._tag = tag

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._row is not None:
            self._row["cells"].append(self._cell.strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data
        elif self._tag == "h3":
            self.h3.append(data)


def _experiment(out: Path, system: str, name: str) -> None:
    exp = Experiment(system, name, f"{name} title", out / system)
    exp.compare("speed-up", 3.0, 4.0, "x", "paper: up to 4x", fitted=True)
    exp.compare("hit rate", 0.3, 0.28, "fraction")
    exp.compare("no paper value", 1.5, None, "x")
    exp.compare("error", 1.0, 5.1, "%", better="lower")  # -80%, but better than the paper's: no deviation
    exp.compare("ratio from the paper's power", 9.0, 2.0, "x", paper_input=True)
    exp.compare("tiny run", 0.1, 37.0, "x", comparable=False, why_not_comparable="600 items")
    exp.table("points", ["batch", "speed-up"], [[1, 2.5], [8, 3.0]])
    exp.note("a choice <with> markup")
    fig, ax = exp.figure(f"{name}_plot")
    ax.plot([1, 2], [3, 4])
    exp.write()


def test_report_renders_every_experiment_with_predictions_apart_from_marked_rows(tmp_path, capsys):
    _experiment(tmp_path, "recssd", "fig8")
    _experiment(tmp_path, "issd", "fig7")
    (tmp_path / "issd" / "broken.json").write_text("{not json")
    (tmp_path / "other.json").write_text('{"a": 1}')
    assert cli.main(["report", str(tmp_path)]) == 0
    assert "2 experiments" in capsys.readouterr().out
    text = (tmp_path / "report.html").read_text()
    page = _Page()
    page.feed(text)
    assert [h for h in page.h3 if "title" in h] == ["fig7: fig7 title", "fig8: fig8 title"]
    preds = [rows for cls, rows in page.tables if cls == "comparisons predictions"]
    marked = [rows for cls, rows in page.tables if cls == "comparisons marked"]
    assert len(preds) == len(marked) == 2
    header, hit, none, error = preds[0]
    assert header["cells"][:4] == ["metric", "ours", "paper", "deviation"]
    assert hit["cells"][:4] == ["hit rate", "0.3", "0.28", "+7.1%"]
    assert none["cells"][2:4] == ["-", "-"]
    assert error["cells"][3] == "-80.4% (better)"  # on the better side: shown, not flagged
    assert [r["cells"][0] for r in marked[0][1:]] == [
        "speed-upfitted", "ratio from the paper's powerpaper input", "tiny runnot comparable at this size: 600 items"]
    assert marked[0][3]["class"] == "not-comparable"
    (summary,) = [rows for cls, rows in page.tables if cls == "summary"]
    assert summary[0]["cells"][2:8] == ["comparisons", "predictions", "fitted", "paper input",
                                        "paper column not a paper number", "not comparable"]
    assert [r["cells"][:8] for r in summary[1:]] == [["issd", "fig7", "6", "3", "1", "1", "0", "1"],
                                                     ["recssd", "fig8", "6", "3", "1", "1", "0", "1"]]
    # over predictions only: not the fitted -25%, the paper input's +350%, the tiny run's -99.7%, nor the better -80%
    assert summary[1]["cells"][8] == "+7.1% (hit rate)"
    assert "12 comparisons with the papers: <b>6 predictions</b>" in text and "<b>6 others</b>" in text
    assert text.count("<span class='far'>") == 1  # only the legend: no prediction deviates beyond 25%
    data_tables = [rows for cls, rows in page.tables if cls is None]
    assert data_tables[0][1]["cells"] == ["1", "2.5"]
    assert "&lt;with&gt;" in text


def test_report_is_one_self_contained_file(tmp_path):
    """Figures are embedded (the page moved elsewhere still shows them); nothing links outside the page."""
    _experiment(tmp_path, "issd", "fig7")
    html_path = cli_report(tmp_path)
    moved = tmp_path.parent / "moved.html"
    moved.write_bytes(html_path.read_bytes())
    page = _Page()
    page.feed(moved.read_text())
    assert len(page.imgs) == 1 and page.imgs[0].startswith("data:image/png;base64,")
    png = base64.b64decode(page.imgs[0].split(",", 1)[1])
    assert png == (tmp_path / "issd" / "fig7_plot.png").read_bytes()
    assert all(h.startswith("#") for h in page.hrefs), page.hrefs
    assert "<link" not in moved.read_text() and "<script" not in moved.read_text()


def test_a_prediction_beyond_the_flag_is_red_and_a_better_one_is_not():
    from nearflash.experiment import Comparison
    from nearflash.html_report import flagged

    assert flagged(Comparison("m", 2.0, 1.0))
    assert not flagged(Comparison("m", 2.0, 1.0, better="higher"))  # above a floor
    assert flagged(Comparison("m", 0.5, 1.0, better="higher"))  # below a floor: a deviation
    assert not flagged(Comparison("m", 0.5, 1.0, better="lower")) and flagged(Comparison("m", 1.5, 1.0, better="lower"))
    assert not flagged(Comparison("m", 2.0, 1.0, fitted=True))  # only predictions are flagged
    assert not flagged(Comparison("m", 1.2, 1.0))


def test_rows_with_damaged_marks_are_kept_as_not_comparable(tmp_path):
    d = {"system": "s", "experiment": "e", "title": "t", "comparisons": [
        {"metric": "bad reference", "ours": 1.0, "paper": 2.0, "reference": "hearsay"},
        {"metric": "text numbers", "ours": "fast", "paper": [1], "unit": 7, "note": None},
        "not even a dict",
        {"metric": "old row", "ours": 1.0, "paper": 1.1},  # written before the marks existed: a prediction
    ]}
    (tmp_path / "e.json").write_text(json.dumps(d))
    text = render(tmp_path)
    assert "marks are unreadable" in text and "ours and paper not a number" in text and "old row" in text
    assert "not a comparison" in text and "4 comparisons with the papers: <b>1 predictions</b>" in text


def cli_report(out: Path) -> Path:
    assert cli.main(["report", str(out)]) == 0
    return out / "report.html"


def test_report_of_an_empty_or_missing_directory(tmp_path, capsys):
    assert "No experiment results found" in render(tmp_path)
    assert cli.main(["report", str(tmp_path / "nope")]) == 2
    assert "no such output directory" in capsys.readouterr().err


def test_report_writes_nothing_into_a_directory_without_results(tmp_path, capsys):
    (tmp_path / "cat.jpg").write_bytes(b"meow")
    assert cli.main(["report", str(tmp_path)]) == 2
    assert "no experiment results" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cat.jpg"]


def test_report_names_damaged_result_files_and_unwritable_destinations(tmp_path, capsys):
    _experiment(tmp_path, "issd", "fig7")
    (tmp_path / "issd" / "fig9.json").write_text('{"system": "issd", "experiment": "fig9", "compar')  # cut short
    assert cli.main(["report", str(tmp_path)]) == 0
    assert "skipped" in capsys.readouterr().err and "fig9.json" in (tmp_path / "report.html").read_text()
    assert cli.main(["report", str(tmp_path), "--html", str(tmp_path / "no" / "such" / "r.html")]) == 2
    err = capsys.readouterr().err
    assert "--html" in err and "Traceback" not in err


def test_deviation():
    assert deviation(3.0, 4.0) == -0.25 and deviation(1.0, None) is None and deviation(None, 2.0) is None
    assert deviation(1.0, 0.0) is None
