"""`nearflash experiment SYSTEM --help` lists every registered system's experiments and the `--set` keys each reads,
with defaults, found by reading the experiments' code; an unknown key is refused before anything runs."""

import pytest

from nearflash import cli
from nearflash.experiment import load_experiments
from nearflash.experiment_options import scan, systems_with_experiments


def _helper(opts):
    return opts.extra.get("depth", 3 if opts.quick else 30)


def option(opts, key, quick, full):  # the shape of the systems' helpers
    return opts.extra[key] if key in opts.extra else (quick if opts.quick else full)


def _run(exp, opts):
    option(opts, "sizes", [1, 2], [1, 2, 4])
    if "flag" in opts.extra:
        pass
    _helper(opts)


def _run_any(exp, opts):
    return dict(opts.extra.items())


def test_scan_finds_keys_and_defaults_through_helpers():
    found = scan(_run, "test_experiment_options")
    assert not found.any_key
    assert {k: (o.full, o.quick) for k, o in found.options.items()} == {
        "sizes": ("1,2,4", "1,2"), "flag": ("(none)", "(none)"), "depth": ("30", "3")}
    assert scan(_run_any, "x").any_key


@pytest.mark.parametrize("system", ["issd", "recssd"])
def test_help_lists_experiments_and_keys_with_defaults(capsys, system):
    assert {"issd", "recssd"} <= set(systems_with_experiments())
    assert cli.main(["experiment", system, "--help"]) == 0
    out = capsys.readouterr().out
    for name in load_experiments(system):
        assert f"\n  {name} " in out
    if system == "recssd":
        assert "--set profile=separate" in out and "--set base=RM3" in out and "--set n=40 (--quick: 5)" in out


def test_every_registered_system_gets_help(capsys):
    for system in systems_with_experiments():
        assert cli.main(["experiment", system, "--help"]) == 0
    assert cli.main(["experiment", "--help"]) == 0
    assert "recssd" in capsys.readouterr().out
    assert cli.main(["experiment", "nosuch", "--help"]) == 2
    assert "no experiments for system 'nosuch'" in capsys.readouterr().err


def test_unknown_key_is_refused_before_running(tmp_path, capsys):
    rc = cli.main(["experiment", "recssd", "fig5", "--quick", "--out", str(tmp_path), "--set", "batchez=1"])
    err = capsys.readouterr().err
    assert rc == 2 and "--set batchez" in err and "batches, n" in err
    assert not (tmp_path / "recssd").exists()  # nothing ran
    rc = cli.main(["experiment", "recssd", "all", "--quick", "--out", str(tmp_path), "--set", "zzz=1"])
    assert rc == 2 and "profile" in capsys.readouterr().err  # 'all': the union of every experiment's keys


def test_missing_experiment_name_prints_the_list(capsys):
    assert cli.main(["experiment", "recssd"]) == 2
    assert "fig10" in capsys.readouterr().err


def test_steps_feed_the_progress_hook():
    from nearflash.experiment import Experiment

    exp = Experiment("x", "y", "t", "/tmp")
    assert list(exp.steps([1, 2])) == [1, 2]  # no display: nothing to call
    seen = []
    exp.on_progress = lambda done, total: seen.append((done, total))
    assert list(exp.steps(["a", "b", "c"])) == ["a", "b", "c"]
    assert seen == [(1, 3), (2, 3), (3, 3)]


def _run_numbers(exp, opts):  # reads every key itself (the scan follows calls only within the system's package)
    option(opts, "sizes", [1, 2], [1, 2, 4])
    opts.extra.get("depth", 3 if opts.quick else 30)
    opts.extra.get("rate", 2.5)
    opts.extra.get("scale", 2.0)  # a float default of integral value is still a float
    option(opts, "uplink", 4.0, 0.0)
    opts.extra.get("offset", 0)
    opts.extra.get("name", "fig")


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("depth=abc", "--set depth=abc: expected an integer > 0 (default 30)"),
        ("depth=-5", "expected an integer > 0"),
        ("depth=0", "expected an integer > 0"),
        ("depth=1e30", "expected an integer"),
        ("sizes=1,x", "--set sizes=1,x: expected integers > 0"),
        ("sizes=", "expected integers"),
        ("rate=nan", "expected a finite number > 0"),
        ("rate=inf", "expected a finite number > 0"),
        ("offset=zero", "expected an integer (default 0)"),
        ("scale=x", "--set scale=x: expected a finite number > 0 (default 2.0)"),
    ],
)
def test_values_that_do_not_fit_the_default_are_refused_before_running(monkeypatch, capsys, tmp_path, setting, message):
    import nearflash.experiment as experiment

    ran = []
    monkeypatch.setattr(experiment, "load_experiments",
                        lambda system: {"fake": ("fake", _run_numbers)})
    monkeypatch.setattr(experiment.Experiment, "write", lambda self: ran.append(1) or {})
    assert cli.main(["experiment", "demo", "fake", "--out", str(tmp_path), "--set", setting]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err
    assert not ran


def test_values_that_fit_the_default_run(monkeypatch, tmp_path):
    import nearflash.experiment as experiment

    monkeypatch.setattr(experiment, "load_experiments",
                        lambda system: {"fake": ("fake", _run_numbers)})
    for setting in ("depth=7", "sizes=3,5", "rate=0.5", "scale=0.5", "uplink=0.5", "offset=-3", "name=anything"):
        assert cli.main(["experiment", "demo", "fake", "--out", str(tmp_path), "--set", setting]) == 0, setting
