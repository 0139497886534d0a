"""Fig. 8's baselines: GIST descriptors, LSH and ITQ codes, and the experiment at a small size (deep hashing above
both on Fashion-MNIST, as the paper claims on its datasets)."""

import json

import numpy as np
import pytest

from nearflash.cli import main
from nearflash.cognitive.gist import Itq, Lsh, gabor_bank, gist, pack

from cognitive_fixtures import DATA


def test_gist_is_512_numbers_per_image_and_sees_orientation():
    bank = gabor_bank()
    assert bank.shape == (32, 32, 32) and bank.max() <= 1 and bank.min() >= 0
    stripes = np.zeros((2, 28, 28), np.uint8)
    stripes[0, :, ::4] = 255  # vertical stripes
    stripes[1, ::4, :] = 255  # horizontal stripes
    g = gist(stripes.reshape(2, -1))
    assert g.shape == (2, 512) and np.isfinite(g).all()
    # the same stripes turned by 90 degrees light other orientations: the descriptors differ, but not in total energy
    assert not np.allclose(g[0], g[1], rtol=0.1) and g[0].sum() == pytest.approx(g[1].sum(), rel=0.05)
    with pytest.raises(ValueError, match="shape"):
        gist(np.zeros((2, 27 * 28), np.uint8))


def test_lsh_and_itq_codes():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((500, 40)) @ rng.standard_normal((40, 40))
    for cls in (Lsh, Itq):
        codes = cls(x, 16, seed=3).codes(x)
        assert codes.dtype == np.uint64 and codes.shape == (500,) and int(codes.max()) < 1 << 16
        assert np.array_equal(codes, cls(x, 16, seed=3).codes(x)), "seeded"
    itq = Itq(x, 16, seed=3)
    assert np.allclose(itq.rotation @ itq.rotation.T, np.eye(16), atol=1e-9)
    # ITQ's rotation quantises the PCA projection with less error than the random rotation it starts from
    v = (x - itq.mean) @ itq.pca
    err = lambda r: np.linalg.norm(np.sign(v @ r) - v @ r)  # noqa: E731
    start, _ = np.linalg.qr(np.random.default_rng(3).standard_normal((16, 16)))
    assert err(itq.rotation) < err(start)
    assert pack(np.array([[1, 0, 1], [0, 0, 0]])).tolist() == [5, 0]
    with pytest.raises(ValueError, match="64"):
        pack(np.zeros((1, 65)))


@pytest.mark.skipif(not DATA.exists(), reason="dataset-fashion-mnist not installed")
def test_fig8_quick(tmp_path):
    argv = ["experiment", "cognitive", "fig8", "--quick", "--out", str(tmp_path), "--set", "db=400",
            "--set", "queries=40", "--set", "ts=10,40", "--set", "bits=16", "--set", "calibration=100"]
    assert main(argv) == 0
    out = json.loads((tmp_path / "cognitive" / "fig8.json").read_text())
    curves = out["data"]["precision"]["curves"]
    assert {"LSH (GIST, 48 bits)", "ITQ (GIST, 48 bits)", "LSH (pixels, 48 bits)", "ITQ (pixels, 48 bits)"} <= set(curves)
    deep = curves["deep hashing (48 bits, int8)"]
    for name in ("LSH (GIST, 48 bits)", "ITQ (GIST, 48 bits)"):
        assert all(d > c for d, c in zip(deep, curves[name])), name
    assert (tmp_path / "cognitive" / "fig8_precision.png").exists()
    # the deep model's own length is always among the code lengths compared, beside those asked for
    assert sorted({row[1] for row in out["data"]["precision"]["by_bits"]}) == [16, 48]
    marks = {c["metric"]: c for c in out["comparisons"]}
    assert all(c["better"] == "higher" and c["ours"] > 0 for c in marks.values()) and len(marks) == 2


@pytest.mark.parametrize("setting, message", [
    ("bits=65", "code lengths 1 to 64"), ("bits=0", "> 0"), ("bits=x", "integers"), ("ts=5000", "no T within"),
    ("ts=0", "> 0"), ("db=-3", "> 0"), ("queries=1.5", "integer"), ("colour=1", "colour"),
])
def test_fig8_refuses_bad_settings(tmp_path, capsys, setting, message):
    if setting.startswith("ts=5000") and not DATA.exists():
        pytest.skip("dataset-fashion-mnist not installed")
    argv = ["experiment", "cognitive", "fig8", "--quick", "--out", str(tmp_path), "--set", "db=400", "--set", setting]
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "cognitive" / "fig8.json").exists()
