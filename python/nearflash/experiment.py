"""Experiment output shared by every paper reproduction: our figure beside the paper's, the choices made where the
paper is silent or inconsistent, tables, plots; written as JSON + Markdown + PNG.

A system's experiments live in `nearflash.<system>.experiments` as `EXPERIMENTS = {"fig7": run_fig7, ...}`, each
`run(exp: Experiment, opts: Options)`; `nearflash experiment <system> <name>` runs them.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@dataclass
class Options:
    """Run options common to experiments. `quick` shrinks data for tests and smoke runs."""

    quick: bool = False
    seed: int = 1
    extra: dict[str, Any] = field(default_factory=dict)


#: What the "paper" column of a comparison holds.
REFERENCES = {
    "paper": "a number printed in the paper (text, table, or read off a figure)",
    "paper-derived": "computed by us from the paper's numbers (the note says how)",
    "model": "our own model's prediction from preset parameters, not a paper number",
    "fit": "the value a calibration fitted, not a paper number",
    "check": "a consistency check of the simulator against itself (expected value), not a paper comparison",
}


@dataclass
class Comparison:
    metric: str
    ours: Optional[float]
    paper: Optional[float]
    unit: str = ""
    note: str = ""
    fitted: bool = False
    """Our value follows from a parameter fitted to this very figure: agreement is by construction."""
    paper_input: bool = False
    """Our value is computed from a number taken from the paper (e.g. the paper's power ratio): not a prediction."""
    reference: str = "paper"
    """What the `paper` value is: one of `REFERENCES`."""
    comparable: bool = True
    """False where this run cannot be compared with the paper (a `--quick` size too small for the effect)."""
    why_not_comparable: str = ""
    better: Optional[str] = None
    """"higher" or "lower" where one direction is plainly better (an error, a latency): a result better than the
    paper's is then not a deviation."""

    def __post_init__(self) -> None:
        if self.reference not in REFERENCES:
            raise ValueError(f"reference must be one of {sorted(REFERENCES)}, got {self.reference!r}")
        if self.better not in (None, "higher", "lower"):
            raise ValueError(f"better must be None, 'higher' or 'lower', got {self.better!r}")

    @property
    def ratio(self) -> Optional[float]:
        if self.ours is None or self.paper in (None, 0):
            return None
        return self.ours / self.paper

    @property
    def deviation(self) -> Optional[float]:
        """(ours - paper) / |paper|, or None when either is missing or the paper's value is 0."""
        if self.ours is None or self.paper is None or self.paper == 0:
            return None
        return (self.ours - self.paper) / abs(self.paper)

    @property
    def better_than_paper(self) -> bool:
        """Ours lies on the better side of the paper's value (`better`): its distance from it is no deviation."""
        if self.ours is None or self.paper is None or self.better is None:
            return False
        return self.ours >= self.paper if self.better == "higher" else self.ours <= self.paper

    @property
    def is_prediction(self) -> bool:
        """A validation against the paper: nothing fitted to it, no paper number in it, the paper's own value."""
        return self.comparable and not self.fitted and not self.paper_input and self.reference == "paper"

    def tags(self) -> list[str]:
        """Short marks shown beside the metric wherever the row is printed."""
        t = []
        if self.fitted:
            t.append("fitted")
        if self.paper_input:
            t.append("paper input")
        if self.reference != "paper":
            t.append(f"reference: {self.reference}")
        if not self.comparable:
            t.append("not comparable at this size" + (f": {self.why_not_comparable}" if self.why_not_comparable else ""))
        return t


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if v == 0 or (1e-3 <= abs(v) < 1e6):
            return f"{v:.4g}"
        return f"{v:.3e}"
    return str(v)


class Experiment:
    """Collects one experiment's results and writes them."""

    def __init__(self, system: str, name: str, title: str, out_dir: Path | str):
        self.system, self.name, self.title = system, name, title
        self.out_dir = Path(out_dir)
        self.comparisons: list[Comparison] = []
        self.notes: list[str] = []
        self.tables: list[tuple[str, list[str], list[list[Any]]]] = []
        self.figures: list[tuple[str, Any]] = []
        self.data: dict[str, Any] = {}
        self.started = time.time()
        #: `(done, total)` hook of a progress display (set by the CLI on a terminal), fed by `steps`.
        self.on_progress: Optional[Callable[[int, int], None]] = None

    def steps(self, items: list[Any]) -> Iterator[Any]:
        """Iterates an experiment's points, advancing the progress display (if any) after each."""
        for i, item in enumerate(items):
            yield item
            if self.on_progress is not None:
                self.on_progress(i + 1, len(items))

    def compare(self, metric: str, ours: Optional[float], paper: Optional[float], unit: str = "", note: str = "",
                fitted: bool = False, *, paper_input: bool = False, reference: str = "paper", comparable: bool = True,
                why_not_comparable: str = "", better: Optional[str] = None) -> Comparison:
        """Records our figure beside the paper's. `fitted`: a calibrated parameter was fitted to this figure;
        `paper_input`: our figure is computed from a paper number; `reference`: what the `paper` value is (see
        `REFERENCES`); `comparable=False` (with a reason): this run's size cannot show the paper's effect."""
        c = Comparison(metric, None if ours is None else float(ours), None if paper is None else float(paper), unit, note,
                       fitted, paper_input, reference, comparable, why_not_comparable, better)
        self.comparisons.append(c)
        return c

    def note(self, text: str) -> None:
        """A choice we made (free parameter, inconsistency resolved) and why."""
        self.notes.append(text)

    def table(self, name: str, columns: list[str], rows: list[list[Any]]) -> None:
        self.tables.append((name, columns, rows))

    def figure(self, name: str, width: float = 7.0, height: float = 4.5, ncols: int = 1, nrows: int = 1) -> tuple[Any, Any]:
        """A new matplotlib figure saved as `<name>.png` on write."""
        fig, ax = plt.subplots(nrows, ncols, figsize=(width, height), squeeze=True)
        self.figures.append((name, fig))
        return fig, ax

    def record(self, key: str, value: Any) -> None:
        """Raw data kept in the JSON."""
        self.data[key] = value

    def to_dict(self) -> dict[str, Any]:
        return {
            "system": self.system,
            "experiment": self.name,
            "title": self.title,
            "wall_s": round(time.time() - self.started, 3),
            "comparisons": [
                {**c.__dict__, "ratio": c.ratio, "prediction": c.is_prediction} for c in self.comparisons
            ],
            "notes": self.notes,
            "tables": [{"name": n, "columns": cols, "rows": rows} for n, cols, rows in self.tables],
            "data": self.data,
            "figures": [name for name, _ in self.figures],
        }

    def markdown(self) -> str:
        lines = [f"# {self.system}: {self.title}", ""]
        if self.comparisons:
            lines += ["| metric | ours | paper | ours/paper | unit | note |", "|---|---|---|---|---|---|"]
            for c in self.comparisons:
                metric = c.metric + "".join(f" ({t})" for t in c.tags())
                lines.append(
                    f"| {metric} | {_fmt(c.ours)} | {_fmt(c.paper)} | {_fmt(c.ratio)} | {c.unit} | {c.note} |"
                )
            lines.append("")
        for name, cols, rows in self.tables:
            lines += [f"## {name}", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
            lines += ["| " + " | ".join(_fmt(v) for v in r) + " |" for r in rows]
            lines.append("")
        if self.notes:
            lines += ["## Choices and inconsistencies", ""] + [f"- {n}" for n in self.notes] + [""]
        for name, _ in self.figures:
            lines.append(f"![{name}]({name}.png)")
        return "\n".join(lines) + "\n"

    def write(self) -> dict[str, Path]:
        """Writes `<out>/<name>.json`, `<name>.md` and the PNGs; returns their paths."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        paths = {}
        j = self.out_dir / f"{self.name}.json"
        j.write_text(json.dumps(self.to_dict(), indent=2, default=_json_default))
        paths["json"] = j
        m = self.out_dir / f"{self.name}.md"
        m.write_text(self.markdown())
        paths["markdown"] = m
        for name, fig in self.figures:
            p = self.out_dir / f"{name}.png"
            fig.tight_layout()
            fig.savefig(p, dpi=110)
            plt.close(fig)
            paths[name] = p
        return paths

    def console(self) -> str:
        """Our figures beside the paper's, for the terminal."""
        out = [f"{self.system} {self.name}: {self.title}"]
        w = max([len(c.metric) for c in self.comparisons] + [10])
        for c in self.comparisons:
            r = ("" if c.ratio is None else f"  (x{c.ratio:.2f})") + "".join(f"  [{t}]" for t in c.tags())
            out.append(f"  {c.metric:<{w}}  ours {_fmt(c.ours):>10}  paper {_fmt(c.paper):>10} {c.unit}{r}")
        return "\n".join(out)


def _json_default(o: Any) -> Any:
    if hasattr(o, "tolist"):
        return o.tolist()
    if isinstance(o, float) and math.isnan(o):
        return None
    raise TypeError(f"not JSON serializable: {type(o)}")


Runner = Callable[[Experiment, Options], None]


def load_experiments(system: str) -> dict[str, tuple[str, Runner]]:
    """`{name: (title, run)}` of a system's experiments."""
    import importlib

    try:
        mod = importlib.import_module(f"nearflash.{system}.experiments")
    except ModuleNotFoundError as e:
        raise KeyError(f"no experiments for system {system!r}") from e
    return mod.EXPERIMENTS
