"""`nearflash report OUT`: one self-contained HTML page of every experiment found under an output directory - per
system and experiment our numbers beside the paper's with the deviation, the tables, the choices made, and the
figures (embedded as data URIs: the page is one file, readable in a browser with no network and no folder beside it).

Predictions (nothing fitted to them, no paper number in them, the paper's own value in the paper column) are kept
apart from the other rows: fitted (calibrated) values, values computed from a paper's number, rows whose paper column
holds a derived, model, fit or check value, and rows a run this small cannot compare (the marks of
`nearflash.experiment.Comparison`). Only predictions count toward the largest deviations, and a result on the better
side of a paper's value (`better`) is not a deviation.

It reads the JSON each experiment writes (`nearflash.experiment.Experiment.write`) and the PNGs beside it.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import json
import math
from pathlib import Path
from typing import Any, Optional

from nearflash.experiment import Comparison

#: Deviations of predictions beyond this fraction of the paper's value are flagged.
FLAG_DEVIATION = 0.25

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; line-height: 1.4 }
h1 { border-bottom: 2px solid #444 } h2 { margin-top: 2em; border-bottom: 1px solid #aaa } h3 { margin-top: 1.5em }
h4 { margin: 1em 0 .2em }
table { border-collapse: collapse; margin: .5em 0 1em; font-size: 90% }
th, td { border: 1px solid #ccc; padding: .25em .5em; text-align: left; vertical-align: top }
th { background: #f0f0f0 } td.num { text-align: right; font-variant-numeric: tabular-nums }
table.marked td { background: #fbf8ee } tr.not-comparable td { color: #777 }
.far { color: #b00; font-weight: bold } .better { color: #070 }
.tag { font-size: 80%; background: #e8c547; border-radius: 3px; padding: 0 .3em; margin-left: .3em }
img { max-width: 100%; border: 1px solid #ddd; margin: .5em 0 } .meta { color: #666; font-size: 90% }
nav li { display: inline; margin-right: 1em }
"""

_FIELDS = {f.name for f in dataclasses.fields(Comparison)}


def _fmt(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        if v == 0 or 1e-3 <= abs(v) < 1e6:
            return f"{v:.4g}"
        return f"{v:.3e}"
    return str(v)


def _num(v: Any) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def deviation(ours: Optional[float], paper: Optional[float]) -> Optional[float]:
    """(ours - paper) / |paper|, or None when either is missing or the paper's value is 0."""
    return Comparison("", ours, paper).deviation


def comparison(row: Any) -> Comparison:
    """A comparison of an experiment's JSON, with its marks (rows written before a mark existed take its default).
    A row that is damaged (not a JSON object, a value that is not a number, marks that cannot be read: a damaged or
    foreign file) is kept, marked not comparable, saying why."""
    if not isinstance(row, dict):
        return Comparison(html.unescape(repr(row))[:80], None, None, comparable=False,
                          why_not_comparable="not a comparison (the JSON row is not an object)")
    fields = {k: v for k, v in row.items() if k in _FIELDS}
    fields["metric"] = str(row.get("metric", ""))
    for text in ("unit", "note", "why_not_comparable"):
        fields[text] = "" if row.get(text) is None else str(row[text])
    fields["ours"], fields["paper"] = _num(row.get("ours")), _num(row.get("paper"))
    bad = [k for k in ("ours", "paper") if row.get(k) is not None and fields[k] is None]
    if bad:
        fields.update(comparable=False, why_not_comparable=f"{' and '.join(bad)} not a number in the JSON")
    try:
        return Comparison(**fields)
    except (TypeError, ValueError) as e:
        return Comparison(fields["metric"], fields["ours"], fields["paper"], fields["unit"], fields["note"],
                          comparable=False, why_not_comparable=f"its marks are unreadable ({e})")


def flagged(c: Comparison) -> bool:
    """A prediction that deviates from the paper beyond `FLAG_DEVIATION` (not merely on the better side of it)."""
    dev = c.deviation
    return c.is_prediction and dev is not None and abs(dev) > FLAG_DEVIATION and not c.better_than_paper


def find_results(out: Path, unreadable: Optional[list[Path]] = None) -> list[tuple[Path, dict[str, Any]]]:
    """Every experiment JSON under `out` (files with 'system', 'experiment' and 'comparisons'), sorted. JSON files
    that cannot be read or parsed (a run killed while writing) are skipped and appended to `unreadable`."""
    found = []
    for p in sorted(out.rglob("*.json")):
        try:
            d = json.loads(p.read_text())
        except (OSError, ValueError, UnicodeDecodeError):
            if unreadable is not None:
                unreadable.append(p)
            continue
        if (isinstance(d, dict) and {"system", "experiment", "comparisons"} <= d.keys()
                and isinstance(d["comparisons"], list)):
            found.append((p, d))
    return found


def _figures(path: Path, d: dict[str, Any]) -> list[Path]:
    names = d.get("figures")
    if isinstance(names, list):
        return [path.parent / f"{n}.png" for n in names if (path.parent / f"{n}.png").is_file()]
    stem = d["experiment"]
    return sorted(p for p in path.parent.glob("*.png") if p.stem == stem or p.stem.startswith(f"{stem}_"))


def _data_uri(png: Path) -> Optional[str]:
    try:
        return "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode("ascii")
    except OSError:
        return None


def _deviation_cell(c: Comparison) -> str:
    dev = c.deviation
    if dev is None:
        return "<td class='num'>-</td>"
    text = f"{dev:+.1%}"
    if c.better_than_paper:
        return f"<td class='num'><span class='better' title='better than the paper ({c.better} is better)'>{text} " \
               "(better)</span></td>"
    cls = " class='far'" if flagged(c) else ""
    return f"<td class='num'><span{cls}>{text}</span></td>"


def _cells(c: Comparison) -> str:
    tags = "".join(f"<span class='tag'>{html.escape(t)}</span>" for t in c.tags())
    return (f"<td>{html.escape(c.metric)}{tags}</td><td class='num'>{_fmt(c.ours)}</td>"
            f"<td class='num'>{_fmt(c.paper)}</td>{_deviation_cell(c)}<td>{html.escape(c.unit)}</td>"
            f"<td>{html.escape(c.note)}</td>")


def _comparisons(rows: list[Comparison]) -> list[str]:
    """Predictions in one table, every other row (with its marks) in another."""
    head = "<tr><th>metric</th><th>ours</th><th>paper</th><th>deviation</th><th>unit</th><th>note</th></tr>"
    preds = [c for c in rows if c.is_prediction]
    rest = [c for c in rows if not c.is_prediction]
    out = []
    if preds:
        out += [f"<h4>Predictions ({len(preds)})</h4><table class='comparisons predictions'>{head}"]
        out += [f"<tr>{_cells(c)}</tr>" for c in preds] + ["</table>"]
    if rest:
        out += [f"<h4>Not predictions ({len(rest)}): fitted, paper inputs, paper columns that are not the paper's "
                f"number, not comparable at this size</h4><table class='comparisons marked'>{head}"]
        out += [f"<tr{'' if c.comparable else ' class=not-comparable'}>{_cells(c)}</tr>" for c in rest]
        out.append("</table>")
    return out


def _table(t: dict[str, Any]) -> list[str]:
    out = [f"<h4>{html.escape(str(t.get('name', '')))}</h4><table><tr>"]
    out += [f"<th>{html.escape(str(c))}</th>" for c in t.get("columns", [])]
    out.append("</tr>")
    for r in t.get("rows", []):
        cells = "".join(f"<td{' class=num' if isinstance(v, (int, float)) else ''}>{html.escape(_fmt(v))}</td>"
                        for v in r)
        out.append(f"<tr>{cells}</tr>")
    out.append("</table>")
    return out


#: Summary columns counting each mark (a row may carry several): (heading, test).
_COUNTS = (
    ("fitted", lambda c: c.fitted),
    ("paper input", lambda c: c.paper_input),
    ("paper column not a paper number", lambda c: c.reference != "paper"),
    ("not comparable", lambda c: not c.comparable),
)


def _largest(rows: list[Comparison]) -> Optional[Comparison]:
    """The prediction farthest from the paper (results on the better side of a paper's value do not count)."""
    devs = [c for c in rows if c.is_prediction and c.deviation is not None and not c.better_than_paper]
    return max(devs, key=lambda c: abs(c.deviation), default=None)  # type: ignore[arg-type]


def _summary(results: list[tuple[Path, dict[str, Any], list[Comparison]]]) -> list[str]:
    """One row per experiment: its comparisons, the predictions among them, how many carry each mark, and the
    largest deviation of a prediction."""
    out = ["<table class='summary'><tr><th>system</th><th>experiment</th><th>comparisons</th><th>predictions</th>"
           + "".join(f"<th>{h}</th>" for h, _ in _COUNTS) + "<th>largest deviation (predictions)</th></tr>"]
    for _, d, cs in results:
        worst = _largest(cs)
        worst_s = "-" if worst is None else f"{worst.deviation:+.1%} ({html.escape(worst.metric)})"
        anchor = html.escape(f"{d['system']}-{d['experiment']}")
        out.append(f"<tr><td>{html.escape(str(d['system']))}</td><td><a href='#{anchor}'>"
                   f"{html.escape(str(d['experiment']))}</a></td><td class='num'>{len(cs)}</td>"
                   f"<td class='num'>{sum(c.is_prediction for c in cs)}</td>"
                   + "".join(f"<td class='num'>{sum(bool(test(c)) for c in cs)}</td>" for _, test in _COUNTS)
                   + f"<td>{worst_s}</td></tr>")
    out.append("</table>")
    return out


def _counts_line(all_rows: list[Comparison]) -> str:
    n, p = len(all_rows), sum(c.is_prediction for c in all_rows)
    marks = ", ".join(f"{sum(bool(test(c)) for c in all_rows)} {h}" for h, test in _COUNTS)
    return (f"{n} comparisons with the papers: <b>{p} predictions</b> (nothing fitted to them, no paper number in "
            f"them, the paper's own value in its column) and <b>{n - p} others</b> ({marks}; a row may carry several "
            "marks <span class='tag'>mark</span>): agreement there is by construction, or the column is not the "
            f"paper's. Deviation = (ours - paper) / |paper|; a prediction beyond {FLAG_DEVIATION:.0%} in "
            "<span class='far'>red</span>, a result on the better side of the paper's value in "
            "<span class='better'>green</span> (not a deviation).")


def render(out: Path | str) -> str:
    """The page's HTML for the results under `out` (figures embedded)."""
    out = Path(out)
    unreadable: list[Path] = []
    results = [(p, d, [comparison(c) for c in d["comparisons"]]) for p, d in find_results(out, unreadable)]
    systems: dict[str, list[tuple[Path, dict[str, Any], list[Comparison]]]] = {}
    for r in results:
        systems.setdefault(str(r[1]["system"]), []).append(r)
    every = [c for *_, cs in results for c in cs]
    body = [f"<h1>nearflash: results in {html.escape(str(out))}</h1>",
            f"<p class='meta'>{len(results)} experiments, {_counts_line(every)}</p>"]
    if unreadable:
        body.append("<p class='far'>Skipped, not readable as JSON (damaged or cut short): "
                    + ", ".join(f"<code>{html.escape(str(p.relative_to(out)))}</code>" for p in unreadable) + "</p>")
    if not results:
        body.append("<p>No experiment results found (run <code>nearflash experiment SYSTEM all</code>).</p>")
    body.append("<nav><ul>" + "".join(f"<li><a href='#{html.escape(s)}'>{html.escape(s)}</a></li>" for s in systems)
                + "</ul></nav>")
    if results:
        body += _summary(results)
    for system, items in systems.items():
        body.append(f"<h2 id='{html.escape(system)}'>{html.escape(system)}</h2>")
        for p, d, cs in items:
            anchor = html.escape(f"{system}-{d['experiment']}")
            body.append(f"<h3 id='{anchor}'>{html.escape(str(d['experiment']))}: {html.escape(str(d.get('title', '')))}</h3>")
            wall = d.get("wall_s")
            body.append(f"<p class='meta'>{html.escape(str(p.relative_to(out)))}"
                        + (f", {wall:.1f} s wall" if isinstance(wall, (int, float)) else "") + "</p>")
            body += _comparisons(cs)
            for t in d.get("tables", []):
                if isinstance(t, dict):
                    body += _table(t)
            if d.get("notes"):
                body.append("<details><summary>Choices and inconsistencies</summary><ul>"
                            + "".join(f"<li>{html.escape(str(n))}</li>" for n in d["notes"]) + "</ul></details>")
            for img in _figures(p, d):
                uri = _data_uri(img)
                if uri is not None:
                    body.append(f"<figure><img src='{uri}' alt='{html.escape(img.stem)}'>"
                                f"<figcaption>{html.escape(img.stem)}</figcaption></figure>")
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>nearflash results</title>"
            f"<style>{_STYLE}</style></head><body>" + "\n".join(body) + "</body></html>\n")


def write(out: Path | str, dest: Path | str | None = None) -> Path:
    """Writes the page (default `OUT/report.html`) and returns its path."""
    out = Path(out)
    if not out.is_dir():
        raise FileNotFoundError(f"no such output directory: {out}")
    dest = Path(dest) if dest is not None else out / "report.html"
    dest.write_text(render(out), encoding="utf-8")
    return dest
