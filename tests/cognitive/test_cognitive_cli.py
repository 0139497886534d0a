"""`nearflash cognitive ...` and `nearflash experiment cognitive ... --quick`."""

import json
from pathlib import Path

import pytest

from nearflash.cli import main

DATA = Path("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")


def test_info_shows_the_shipped_model(capsys):
    assert main(["cognitive", "info"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["bits"] == 48 and out["metadata"]["trainer"].startswith("nearflash-cognitive-train")


def test_info_refuses_a_missing_model(capsys, tmp_path):
    assert main(["cognitive", "info", str(tmp_path / "none.safetensors")]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.skipif(not DATA.exists(), reason="dataset-fashion-mnist not installed")
def test_train_small_is_reproducible(tmp_path, capsys, candle_trainer):
    candle_trainer()
    outs = []
    for i in range(2):
        p = tmp_path / f"m{i}.safetensors"
        assert main(["cognitive", "train", "--out", str(p), "--epochs", "1", "--limit", "300", "--bits", "16"]) == 0
        summary = json.loads(capsys.readouterr().out)
        assert summary["train_images"] == 300 and summary["bits"] == 16
        outs.append(p)
    from nearflash.cognitive import load_model

    a, b = load_model(outs[0]), load_model(outs[1])
    import numpy as np

    imgs = np.random.default_rng(0).integers(0, 256, (20, 784), dtype=np.uint8)
    assert a.bits == 16
    assert (a.forward(imgs) == b.forward(imgs)).all()  # same seed, same weights
    assert main(["cognitive", "train", "--out", str(tmp_path / "x"), "--bits", "65"]) == 2


@pytest.mark.skipif(not DATA.exists(), reason="dataset-fashion-mnist not installed")
@pytest.mark.parametrize("name", ["table3", "table5"])
def test_experiments_quick(tmp_path, capsys, name):
    assert main(["experiment", "cognitive", name, "--quick", "--out", str(tmp_path)]) == 0
    out = json.loads((tmp_path / "cognitive" / f"{name}.json").read_text())
    assert out["comparisons"] and (tmp_path / "cognitive" / f"{name}.md").exists()
    if name == "table3":
        assert out["comparisons"][0]["ours"] >= 99.0  # int8 vs float bits equal
        marks = {c["metric"]: c for c in out["comparisons"]}
        # 600 images: the plain graph's 10 pages sit in the GSE's slots; the paper's 37x cannot show (issue 22)
        assert not marks["flash pages per query, plain / two-hop"]["comparable"]
        assert marks["graph search precision@T over brute force's, worst over T and layouts"]["ours"] >= 0.97


@pytest.mark.skipif(not DATA.exists(), reason="dataset-fashion-mnist not installed")
@pytest.mark.xfail(strict=True, reason='moved with the event-driven flash scheduler (issue 23): Method B keeps 1,420 MB/s against 1,210 with whole weight pages (bound 1.2x) and turns no longer matter; Table 2 is re-measured with work-conserving turns when Cognitive SSD is adapted (issue 23)')
def test_table2_methods_order_bandwidth(tmp_path):
    # Method A (the runtime blocked while DLG-x runs) must lose more of the I/O bandwidth than Method B (polling),
    # and both less than or equal to the peak with DLG-x idle.
    argv = ["experiment", "cognitive", "table2", "--quick", "--out", str(tmp_path),
            "--set", "workloads=randread"]
    assert main(argv) == 0
    bw = json.loads((tmp_path / "cognitive" / "table2.json").read_text())["data"]["bandwidth"]["randread"]
    assert 0 < bw["A"] < bw["B"] <= bw["peak"] * 1.001
    # the flash scheduler issues the weight reads and the host's reads as dies and channels free up, so the reads
    # get their share without turns left free in advance (when flash work was booked at submission, the weight
    # stream without turns left the reads gaps too short for a page: 0.46-0.48 of the peak against 0.67-0.68)
    assert bw["B"] >= 0.95 * bw["B_stream_first"]
    # column reads of each layer's weight bytes (the default) against whole weight pages: the issue's "B keeps at
    # least half the peak" (measured 0.67-0.68 against 0.47-0.49, --quick); DLG-x's channel share about 0.15 vs 0.45
    assert bw["B"] >= 0.5 * bw["peak"] and bw["B"] > 1.2 * bw["B_page"]
    col, page = bw["dlgx_load_B"], bw["dlgx_load_B_page"]
    assert 0.05 < col["channel_share"] < 0.3 < page["channel_share"] < 0.6
    assert col["pages_per_image"] == page["pages_per_image"] >= 8  # a read per layer and channel at least
    assert col["bytes_per_image"] * 3 < page["bytes_per_image"] == page["pages_per_image"] * 16384
    assert bw["tasks_A"] >= 1 and bw["tasks_B"] >= 1
    with pytest.raises(ValueError, match="workloads: 'scan'"):
        main(["experiment", "cognitive", "table2", "--quick", "--out", str(tmp_path / "bad"),
              "--set", "workloads=read,scan"])
    assert not (tmp_path / "bad" / "cognitive" / "table2.json").exists()
