"""The native module's stub (`python/nearflash/_native.pyi`) is in step with the built module: every per-system
submodule's functions and classes, with their signatures, as `scripts/gen_stubs.py` writes them."""

import ast
import importlib.util
from pathlib import Path

from nearflash import _native

ROOT = Path(__file__).resolve().parents[1]


def test_submodule_stubs_match_the_built_module():
    spec = importlib.util.spec_from_file_location("gen_stubs", ROOT / "scripts" / "gen_stubs.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    current = gen.STUB.read_text()
    assert gen.render(_native, current) == current, "the stub is stale: run .venv/bin/python scripts/gen_stubs.py"
    ast.parse(current)  # valid Python syntax


def test_core_stub_names_every_core_function_and_class():
    tree = ast.parse((ROOT / "python" / "nearflash" / "_native.pyi").read_text())
    declared = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    declared |= {t.id for n in tree.body if isinstance(n, ast.AnnAssign) for t in [n.target] if isinstance(t, ast.Name)}
    public = {n for n in dir(_native) if not n.startswith("_")}
    missing = sorted(public - declared)
    assert not missing, f"not in _native.pyi: {missing}"
