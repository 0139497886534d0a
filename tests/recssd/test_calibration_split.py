"""The held-out check of the calibration: each split picks the grid point best for its training figures only, and
reports that point's predictions for the other figures as comparisons that are not marked fitted."""

from nearflash.experiment import Experiment
from nearflash.recssd.experiments import calibrate


def test_each_split_fits_on_its_own_targets_and_predicts_the_others():
    # Point "a" meets Fig. 8 exactly and misses Figs. 9-10; point "b" the reverse.
    fig8 = {"STR": 4.0, "share": 0.5, "SEQ": 0.85}
    rest = {"RM1": 7.0, "partition": 2.0, "cache": 1.5}
    data = {"a": {**fig8, **{k: v * 2 for k, v in rest.items()}}, "b": {**{k: v * 2 for k, v in fig8.items()}, **rest}}
    exp = Experiment("recssd", "calibrate", "t", "/tmp")
    calibrate.held_out(exp, data)
    got = {c.metric: c for c in exp.comparisons}
    rm1 = got["held out (fit on Fig. 8, predict Figs. 9-10): Fig. 9 RM1 speed-up"]
    assert rm1.ours == 14.0 and rm1.paper == 7.0 and not rm1.fitted
    str_ = got["held out (fit on Figs. 9-10, predict Fig. 8): Fig. 8 STR speed-up"]
    assert str_.ours == 8.0 and not str_.fitted
    assert calibrate.score(data["a"], ("STR", "share", "SEQ")) == 0.0 and calibrate.score(data["a"]) > 0
