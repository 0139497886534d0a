"""Progress display for long CLI runs (preconditioning, benches, experiments, sweeps), drawn with rich on stderr.

Shown only to a person watching: stderr is a terminal, the output is not `--json`, and the run is not in CI (`CI` set
to anything but "" / "0" / "false", as CI services do) nor disabled with NEARFLASH_NO_PROGRESS=1. Everywhere else
these helpers cost nothing and print nothing, so piped and machine-read output stays clean.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Optional, TypeVar

T = TypeVar("T")

Callback = Callable[[int, int], None]


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def enabled(json_output: bool = False) -> bool:
    """Whether a progress display may be drawn now."""
    if json_output or _env_true("CI") or _env_true("NEARFLASH_NO_PROGRESS"):
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


def _progress(*columns: Any) -> Any:
    from rich.console import Console
    from rich.progress import Progress

    # stdout is left alone: results printed meanwhile must reach it (a file, a pipe), not the terminal of stderr.
    return Progress(*columns, console=Console(stderr=True), transient=True, redirect_stdout=False,
                    redirect_stderr=False)


@contextmanager
def bar(label: str, total: int, json_output: bool = False) -> Iterator[Optional[Callback]]:
    """A bar fed by a `(done, total)` callback (the simulator's bench progress hook); yields None when disabled, so
    the caller passes no callback at all."""
    if not enabled(json_output):
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn

    with _progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn()) as p:
        task = p.add_task(label, total=total)
        yield lambda done, total: p.update(task, completed=done, total=total)


@contextmanager
def spinner(label: str, json_output: bool = False) -> Iterator[None]:
    """A spinner with the elapsed time, for a step that reports no progress of its own (preconditioning)."""
    if not enabled(json_output):
        yield
        return
    from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

    with _progress(SpinnerColumn(), TextColumn(label), TimeElapsedColumn()) as p:
        p.add_task(label, total=None)
        yield


def track(items: Iterable[T], label: str, total: int, json_output: bool = False) -> Iterator[T]:
    """Iterates `items`, advancing a bar after each one."""
    if not enabled(json_output):
        yield from items
        return
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    with _progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()) as p:
        task = p.add_task(label, total=total)
        for item in items:
            yield item
            p.advance(task)
