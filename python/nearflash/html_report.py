"""`nearflash report OUT`: one HTML page of every experiment found under an output directory - per system and
experiment our numbers beside the paper's with the deviation, fitted (calibrated) values marked, the tables, the
choices made, and the figures - readable in a browser with no network (styles inline, images by relative path).

It reads the JSON each experiment writes (`nearflash.experiment.Experiment.write`) and the PNGs beside it.
"""

from __future__ import annotations

import html
import json
import math
import os
from pathlib import Path
from typing import Any, Optional

#: Deviations beyond this fraction of the paper's value are flagged.
FLAG_DEVIATION = 0.25

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; line-height: 1.4 }
h1 { border-bottom: 2px solid #444 } h2 { margin-top: 2em; border-bottom: 1px solid #aaa } h3 { margin-top: 1.5em }
table { border-collapse: collapse; margin: .5em 0 1em; font-size: 90% }
th, td { border: 1px solid #ccc; padding: .25em .5em; text-align: left; vertical-align: top }
th { background: #f0f0f0 } td.num { text-align: right; font-variant-numeric: tabular-nums }
tr.fitted td { background: #fff7d6 } .far { color: #b00; font-weight: bold }
.tag { font-size: 80%; background: #e8c547; border-radius: 3px; padding: 0 .3em }
img { max-width: 100%; border: 1px solid #ddd; margin: .5em 0 } .meta { color: #666; font-size: 90% }
nav li { display: inline; margin-right: 1em }
"""


def _fmt(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        if v == 0 or 1e-3 <= abs(v) < 1e6:
            return f"{v:.4g}"
        return f"{v:.3e}"
    return str(v)


def deviation(ours: Optional[float], paper: Optional[float]) -> Optional[float]:
    """(ours - paper) / paper, or None when either is missing or the paper's value is 0."""
    if ours is None or paper is None or paper == 0:
        return None
    return (ours - paper) / abs(paper)


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
        if isinstance(d, dict) and {"system", "experiment", "comparisons"} <= d.keys():
            found.append((p, d))
    return found


def _figures(path: Path, d: dict[str, Any]) -> list[Path]:
    names = d.get("figures")
    if isinstance(names, list):
        return [path.parent / f"{n}.png" for n in names if (path.parent / f"{n}.png").exists()]
    stem = d["experiment"]
    return sorted(p for p in path.parent.glob("*.png") if p.stem == stem or p.stem.startswith(f"{stem}_"))


def _comparisons(rows: list[dict[str, Any]]) -> list[str]:
    out = ["<table class='comparisons'><tr><th>metric</th><th>ours</th><th>paper</th><th>deviation</th>"
           "<th>unit</th><th>note</th></tr>"]
    for c in rows:
        ours, paper = c.get("ours"), c.get("paper")
        dev = deviation(ours, paper)
        dev_s = "-" if dev is None else f"{dev:+.1%}"
        cls = " class='far'" if dev is not None and abs(dev) > FLAG_DEVIATION else ""
        fitted = bool(c.get("fitted"))
        tag = " <span class='tag'>fitted</span>" if fitted else ""
        out.append(f"<tr{' class=fitted' if fitted else ''}><td>{html.escape(str(c.get('metric', '')))}{tag}</td>"
                   f"<td class='num'>{_fmt(ours)}</td><td class='num'>{_fmt(paper)}</td>"
                   f"<td class='num'><span{cls}>{dev_s}</span></td><td>{html.escape(str(c.get('unit', '')))}</td>"
                   f"<td>{html.escape(str(c.get('note', '')))}</td></tr>")
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


def _summary(results: list[tuple[Path, dict[str, Any]]]) -> list[str]:
    """One row per experiment: its comparisons, how many were fitted, and the largest deviation of the others."""
    out = ["<table class='summary'><tr><th>system</th><th>experiment</th><th>comparisons</th><th>fitted</th>"
           "<th>largest deviation (not fitted)</th></tr>"]
    for _, d in results:
        cs = d["comparisons"]
        devs = [(abs(v), v, c.get("metric", "")) for c in cs if not c.get("fitted")
                for v in [deviation(c.get("ours"), c.get("paper"))] if v is not None]
        worst = max(devs, default=None)
        worst_s = "-" if worst is None else f"{worst[1]:+.1%} ({html.escape(str(worst[2]))})"
        anchor = html.escape(f"{d['system']}-{d['experiment']}")
        out.append(f"<tr><td>{html.escape(str(d['system']))}</td><td><a href='#{anchor}'>"
                   f"{html.escape(str(d['experiment']))}</a></td><td class='num'>{len(cs)}</td>"
                   f"<td class='num'>{sum(bool(c.get('fitted')) for c in cs)}</td><td>{worst_s}</td></tr>")
    out.append("</table>")
    return out


def render(out: Path | str, dest: Path | str | None = None) -> str:
    """The page's HTML for the results under `out`; image paths relative to `dest`'s folder (default `out`)."""
    out = Path(out)
    base = Path(dest).parent if dest is not None else out
    unreadable: list[Path] = []
    results = find_results(out, unreadable)
    systems: dict[str, list[tuple[Path, dict[str, Any]]]] = {}
    for p, d in results:
        systems.setdefault(str(d["system"]), []).append((p, d))
    n_cmp = sum(len(d["comparisons"]) for _, d in results)
    n_fit = sum(bool(c.get("fitted")) for _, d in results for c in d["comparisons"])
    body = [f"<h1>nearflash: results in {html.escape(str(out))}</h1>",
            f"<p class='meta'>{len(results)} experiments, {n_cmp} comparisons with the papers, {n_fit} of them "
            f"fitted (calibrated: agreement there is by construction, <span class='tag'>fitted</span>). Deviation = "
            f"(ours - paper) / paper; beyond {FLAG_DEVIATION:.0%} in <span class='far'>red</span>.</p>"]
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
        for p, d in items:
            anchor = html.escape(f"{system}-{d['experiment']}")
            body.append(f"<h3 id='{anchor}'>{html.escape(str(d['experiment']))}: {html.escape(str(d.get('title', '')))}</h3>")
            wall = d.get("wall_s")
            body.append(f"<p class='meta'>{html.escape(str(p.relative_to(out)))}"
                        + (f", {wall:.1f} s wall" if isinstance(wall, (int, float)) else "") + "</p>")
            if d["comparisons"]:
                body += _comparisons(d["comparisons"])
            for t in d.get("tables", []):
                body += _table(t)
            if d.get("notes"):
                body.append("<details><summary>Choices and inconsistencies</summary><ul>"
                            + "".join(f"<li>{html.escape(str(n))}</li>" for n in d["notes"]) + "</ul></details>")
            for img in _figures(p, d):
                rel = os.path.relpath(img, base)
                body.append(f"<figure><img src='{html.escape(rel)}' alt='{html.escape(img.stem)}'>"
                            f"<figcaption>{html.escape(img.stem)}</figcaption></figure>")
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>nearflash results</title>"
            f"<style>{_STYLE}</style></head><body>" + "\n".join(body) + "</body></html>\n")


def write(out: Path | str, dest: Path | str | None = None) -> Path:
    """Writes the page (default `OUT/report.html`) and returns its path."""
    out = Path(out)
    if not out.is_dir():
        raise FileNotFoundError(f"no such output directory: {out}")
    dest = Path(dest) if dest is not None else out / "report.html"
    dest.write_text(render(out, dest), encoding="utf-8")
    return dest
