"""The `--set` keys each experiment reads, with their defaults, found by reading the experiment's code.

Experiments declare no option list: they read `opts.extra` through a helper `option(opts, "key", quick, full)` or
directly (`opts.extra.get("key", default)`, `opts.extra["key"]`, `"key" in opts.extra`). This module parses the
source of an experiment's run function and of every function of the same system it calls (transitively), so that
`nearflash experiment SYSTEM --help` can list the keys and an unknown key is refused before a long run starts -
for every system registered the usual way (`nearflash.<system>.experiments.EXPERIMENTS`), with nothing to declare.

An experiment that hands all of `opts.extra` on (`opts.extra.items()`, `dict(opts.extra)`, iterating it) accepts
any key; it is reported as such and its keys are not checked.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import math
import pkgutil
import textwrap
import types
from dataclasses import dataclass
from typing import Any, Callable, Optional

#: Methods of `opts.extra` that read one key; any other use of the whole mapping hands every key on.
_ONE_KEY = ("get", "pop", "setdefault", "__getitem__", "__contains__")


@dataclass(frozen=True)
class OptionDefault:
    """A `--set` key and its defaults as written in the code (`quick` under `--quick`; equal when not different)."""

    key: str
    full: str
    quick: str

    def describe(self) -> str:
        if self.quick == self.full:
            return f"{self.key}={self.full}"
        return f"{self.key}={self.full} (--quick: {self.quick})"


@dataclass(frozen=True)
class ExperimentOptions:
    """The keys one experiment reads; `any_key` when it passes the whole mapping on."""

    options: dict[str, OptionDefault]
    any_key: bool = False


_LITERAL = (int, float, str, bool, list, tuple)


def _value(node: ast.expr, scope: dict[str, Any]) -> Any:
    """The value of a literal, of a module constant (`FULL_PAGES`) or of `list(CONSTANT)`; raises if not one."""
    if isinstance(node, ast.Name) and isinstance(scope.get(node.id), _LITERAL):
        return scope[node.id]
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("list", "tuple")
            and len(node.args) == 1 and not node.keywords):
        return list(_value(node.args[0], scope))
    return ast.literal_eval(node)


def _show(node: Optional[ast.expr], scope: Optional[dict[str, Any]] = None) -> str:
    """A default as a user types it: lists comma-joined, numbers and strings bare, other code as written."""
    if node is None:
        return "(none)"
    try:
        v = _value(node, scope or {})
    except (ValueError, SyntaxError, TypeError):
        return ast.unparse(node)
    if isinstance(v, (list, tuple)):
        return ",".join(_show_value(x) for x in v)
    return _show_value(v)


def _show_value(v: Any) -> str:
    if isinstance(v, float):
        return repr(v)  # "2.0", not "2": the value check reads a float default's kind from how it is shown
    if isinstance(v, int) and abs(v) >= 10_000:
        return f"{v:_}"
    return str(v)


def _quick_full(node: Optional[ast.expr], scope: dict[str, Any]) -> tuple[str, str]:
    """(quick, full) of a default written `A if opts.quick else B`, else the same value twice."""
    if isinstance(node, ast.IfExp) and isinstance(node.test, ast.Attribute) and node.test.attr == "quick":
        return _show(node.body, scope), _show(node.orelse, scope)
    return _show(node, scope), _show(node, scope)


def _is_extra(node: ast.AST) -> bool:
    """`<something>.extra` (the options' mapping)."""
    return isinstance(node, ast.Attribute) and node.attr == "extra"


def _const_str(node: ast.AST) -> Optional[str]:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


class _Reader(ast.NodeVisitor):
    """Collects the keys one function's body reads and the names it calls."""

    def __init__(self, scope: dict[str, Any]) -> None:
        self.scope = scope
        self.options: dict[str, OptionDefault] = {}
        self.any_key = False
        self.calls: list[ast.expr] = []
        self._consumed: set[int] = set()  # `.extra` nodes accounted for as one-key reads
        self.helpers: set[int] = set()  # calls of an `option(opts, key, quick, full)` helper, read above

    def _add(self, key: str, quick: str, full: str) -> None:
        self.options.setdefault(key, OptionDefault(key, full, quick))

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
        key = _const_str(node.args[1]) if len(node.args) >= 2 else None
        if name == "option" and key is not None and len(node.args) >= 4:
            self._add(key, _show(node.args[2], self.scope), _show(node.args[3], self.scope))
            self.helpers.add(id(f))
        elif isinstance(f, ast.Attribute) and _is_extra(f.value):
            first = _const_str(node.args[0]) if node.args else None
            if f.attr in _ONE_KEY and first is not None:
                quick, full = _quick_full(node.args[1] if len(node.args) > 1 else None, self.scope)
                self._add(first, quick, full)
                self._consumed.add(id(f.value))
            elif f.attr in _ONE_KEY:
                self.any_key = True  # a computed key: cannot tell which
                self._consumed.add(id(f.value))
        self.calls.append(f)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if _is_extra(node.value):
            key = _const_str(node.slice)
            if key is None:
                self.any_key = True
            else:
                self._add(key, "(required)", "(required)")
            self._consumed.add(id(node.value))
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        if len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)) and _is_extra(node.comparators[0]):
            key = _const_str(node.left)
            if key is not None:
                self._add(key, "(none)", "(none)")
                self._consumed.add(id(node.comparators[0]))
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr == "extra" and id(node) not in self._consumed:
            # Any other use of the mapping (.items(), iteration, passing it on) may read every key.
            self.any_key = True
        self.generic_visit(node)


def _callee(expr: ast.expr, scope: dict[str, Any]) -> Any:
    """The object a call's function expression names in `scope` (a name, or `module.name`), if it can be known."""
    if isinstance(expr, ast.Name):
        return scope.get(expr.id)
    if isinstance(expr, ast.Attribute):
        base = _callee(expr.value, scope)
        if isinstance(base, types.ModuleType):
            return getattr(base, expr.attr, None)
    return None


def scan(run: Callable[..., Any], package: str) -> ExperimentOptions:
    """The keys `run` reads, following its calls into functions defined under `package` (e.g. `nearflash.recssd`)."""
    options: dict[str, OptionDefault] = {}
    any_key = False
    seen: set[int] = set()
    todo: list[Callable[..., Any]] = [run]
    while todo:
        fn = inspect.unwrap(todo.pop())
        if id(fn) in seen or not inspect.isfunction(fn):
            continue
        seen.add(id(fn))
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        except (OSError, TypeError, SyntaxError):
            continue
        reader = _Reader(fn.__globals__)
        reader.visit(tree)
        for k, v in reader.options.items():
            options.setdefault(k, v)
        any_key = any_key or reader.any_key
        for expr in reader.calls:
            if id(expr) in reader.helpers:
                continue  # the helper reads the key it is given: accounted for at the call
            target = _callee(expr, fn.__globals__)
            if inspect.isfunction(target) and (target.__module__ or "").startswith(package):
                todo.append(target)
    return ExperimentOptions(dict(sorted(options.items())), any_key)


def system_options(system: str, experiments: dict[str, tuple[str, Callable[..., Any]]]) -> dict[str, ExperimentOptions]:
    """`{experiment: its options}` for a system's `EXPERIMENTS`."""
    return {name: scan(run, f"nearflash.{system}") for name, (_, run) in experiments.items()}


def systems_with_experiments() -> list[str]:
    """Every `nearflash.<system>` package that has an `experiments` module."""
    import nearflash

    out = []
    for m in pkgutil.iter_modules(nearflash.__path__):
        if m.ispkg and importlib.util.find_spec(f"nearflash.{m.name}.experiments") is not None:
            out.append(m.name)
    return sorted(out)


def unknown_keys(given: list[str], scanned: list[ExperimentOptions]) -> tuple[list[str], list[str]]:
    """(keys none of the experiments reads, the keys they do read); nothing is unknown if one takes any key."""
    if any(s.any_key for s in scanned):
        return [], sorted({k for s in scanned for k in s.options})
    allowed = sorted({k for s in scanned for k in s.options})
    return [k for k in given if k not in allowed], allowed


def describe(system: str, experiments: dict[str, tuple[str, Callable[..., Any]]]) -> str:
    """The help text listing a system's experiments and the `--set` keys each reads, with defaults."""
    lines = [f"experiments of {system} (run one, or 'all'):"]
    width = max(len(n) for n in experiments) if experiments else 0
    for name, opts in system_options(system, experiments).items():
        lines.append(f"  {name:<{width}}  {experiments[name][0]}")
        for o in opts.options.values():
            lines.append(f"  {'':<{width}}    --set {o.describe()}")
        if opts.any_key:
            lines.append(f"  {'':<{width}}    (also passes any other --set key on)")
    return "\n".join(lines)


def help_text(system: Optional[str], usage: str) -> tuple[str, int]:
    """`nearflash experiment [SYSTEM] --help`: the usage, then the system's experiments and keys (or the systems);
    with the exit status (2 for an unknown system)."""
    from nearflash.experiment import load_experiments

    systems = systems_with_experiments()
    if system is None:
        return f"{usage}\nsystems with experiments: {', '.join(systems)} (nearflash experiment SYSTEM --help)", 0
    try:
        exps = load_experiments(system)
    except KeyError:
        return f"error: no experiments for system {system!r}; systems with experiments: {', '.join(systems)}", 2
    return f"{usage}\n{describe(system, exps)}", 0


def check_keys(system: str, names: list[str], given: list[str],
               experiments: dict[str, tuple[str, Callable[..., Any]]]) -> Optional[str]:
    """An error naming the `--set` keys none of `names` reads and the keys they do read, or None if all are known."""
    scanned = [scan(experiments[n][1], f"nearflash.{system}") for n in names]
    bad, allowed = unknown_keys(given, scanned)
    if not bad:
        return None
    which = names[0] if len(names) == 1 else "all"
    return (f"--set {', '.join(bad)}: not read by {system} {which} (options it reads: {', '.join(allowed) or 'none'}; "
            f"nearflash experiment {system} --help lists their defaults)")


def _numbers(text: str, kind: type) -> Optional[list[float]]:
    """The comma-separated numbers of `text` as `kind` (int or float), or None if one does not parse or is not
    finite."""
    out = []
    for part in text.split(","):
        try:
            v = kind(part.strip())
        except ValueError:
            return None
        if not math.isfinite(v):
            return None
        out.append(v)
    return out


def _kind(default: str) -> Optional[type]:
    """int or float when every element of a shown default is one (`16_384`, `4,8,16`, `22.8`), else None."""
    for kind in (int, float):
        if _numbers(default, kind) is not None:
            return kind
    return None


def check_values(system: str, names: list[str], given: dict[str, Any],
                 experiments: dict[str, tuple[str, Callable[..., Any]]]) -> Optional[str]:
    """An error naming a `--set` value that does not fit its key's default (an integer, a number, a comma list of
    them; positive when the defaults are), or None. Checked before a run so that a typo is not a traceback minutes
    in. Keys whose defaults are not plain numbers (paths, names, code) are left to the experiment."""
    defaults: dict[str, list[str]] = {}
    for n in names:
        for o in scan(experiments[n][1], f"nearflash.{system}").options.values():
            defaults.setdefault(o.key, []).extend([o.full, o.quick])
    for key, raw in given.items():
        shown = defaults.get(key)
        kinds = {_kind(d) for d in shown} if shown else {None}
        if None in kinds:
            continue
        kind = float if float in kinds else int
        values = _numbers(str(raw), kind)
        positive = all(v > 0 for d in shown for v in (_numbers(d, kind) or [0]))
        what = ("integers" if kind is int else "numbers") if any("," in d for d in shown) else \
            ("an integer" if kind is int else "a finite number")
        if values is None or (positive and any(v <= 0 for v in values)):
            return (f"--set {key}={raw}: expected {what}{' > 0' if positive else ''} "
                    f"(default {shown[0]}{', comma-separated' if 'integers' in what or 'numbers' in what else ''})")
    return None
