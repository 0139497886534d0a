"""`nearflash report OUT`: renders every experiment under an output directory into one HTML page; checked by parsing
the page: one section per experiment, our numbers beside the paper's with the deviation, fitted values marked, the
tables and the figures (which exist on disk), and damaged or foreign JSON files skipped."""

from html.parser import HTMLParser
from pathlib import Path

from nearflash import cli
from nearflash.experiment import Experiment
from nearflash.html_report import deviation, render


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.h3, self.imgs, self.tables, self.rows = [], [], [], []
        self._tag, self._row, self._cell, self._table = None, None, None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.imgs.append(a["src"])
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
    exp.table("points", ["batch", "speed-up"], [[1, 2.5], [8, 3.0]])
    exp.note("a choice <with> markup")
    fig, ax = exp.figure(f"{name}_plot")
    ax.plot([1, 2], [3, 4])
    exp.write()


def test_report_renders_every_experiment_with_deviation_and_fitted_marks(tmp_path, capsys):
    _experiment(tmp_path, "recssd", "fig8")
    _experiment(tmp_path, "issd", "fig7")
    (tmp_path / "issd" / "broken.json").write_text("{not json")
    (tmp_path / "other.json").write_text('{"a": 1}')
    assert cli.main(["report", str(tmp_path)]) == 0
    assert "2 experiments" in capsys.readouterr().out
    page = _Page()
    page.feed((tmp_path / "report.html").read_text())
    assert [h for h in page.h3 if "title" in h] == ["fig7: fig7 title", "fig8: fig8 title"]
    assert sorted(page.imgs) == ["issd/fig7_plot.png", "recssd/fig8_plot.png"]
    assert all((tmp_path / src).exists() for src in page.imgs)
    comparisons = [rows for cls, rows in page.tables if cls == "comparisons"]
    assert len(comparisons) == 2
    header, fitted, plain, none = comparisons[0]
    assert header["cells"][:4] == ["metric", "ours", "paper", "deviation"]
    assert fitted["class"] == "fitted" and "fitted" in fitted["cells"][0] and fitted["cells"][3] == "-25.0%"
    assert plain["class"] is None and plain["cells"][3] == "+7.1%"
    assert none["cells"][2:4] == ["-", "-"]
    (summary,) = [rows for cls, rows in page.tables if cls == "summary"]
    assert [r["cells"][:4] for r in summary[1:]] == [["issd", "fig7", "3", "1"], ["recssd", "fig8", "3", "1"]]
    assert summary[1]["cells"][4] == "+7.1% (hit rate)"  # the fitted -25% is not the largest unfitted deviation
    data_tables = [rows for cls, rows in page.tables if cls is None]
    assert data_tables[0][1]["cells"] == ["1", "2.5"]
    assert "&lt;with&gt;" in (tmp_path / "report.html").read_text()


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
