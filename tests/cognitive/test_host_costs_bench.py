"""`benches/cognitive_host_costs.py`, the script that measured the `host_*` costs, refuses bad arguments before it
loads anything (the measurement itself is a benchmark, not run here)."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benches" / "cognitive_host_costs.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("cognitive_host_costs", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("argv, match", [
    (["--db", "999"], "--db: 999: at least 1000"), (["--db", "ten"], "not an integer"),
    (["--queries", "0"], "--queries: 0: at least 1"), (["--repeats", "-2"], "at least 1"),
    (["--db", "60001"], "60000 train"), (["--queries", "10001"], "10000 test"), (["--bogus"], "unrecognized"),
])
def test_bad_arguments_are_refused_naming_them(bench, capsys, argv, match):
    with pytest.raises(SystemExit) as e:
        bench.main(argv)
    assert e.value.code == 2 and match in capsys.readouterr().err
