"""The 10M-vector path at small size: streamed ground truth equals the in-memory one (across a generator chunk
boundary), a streamed build is cached with its build record and loaded back unchanged, bad arguments are refused,
and the `scale` experiment measures time and memory and checks the model against the host search."""

from __future__ import annotations

import json

import numpy as np
import pytest

from nearflash import InvalidArgument
from nearflash.experiment import Experiment, Options
from nearflash.ndsearch import ground_truth, synthetic
from nearflash.ndsearch.datasets import CHUNK, cached_synthetic_ground_truth, synthetic_ground_truth
from nearflash.ndsearch.experiments import EXPERIMENTS
from nearflash.ndsearch.scale import build_record_path, index_path, load_or_build


def test_streamed_ground_truth_equals_in_memory_across_a_chunk_boundary(tmp_path):
    n = CHUNK + 3000
    q = synthetic("sift-like", 12, seed=5, queries=True)
    want_d, want_i = ground_truth(synthetic("sift-like", n, seed=5), q, 10, "l2")
    d, i = synthetic_ground_truth("sift-like", n, q, 10, seed=5)
    assert np.array_equal(i, want_i) and np.allclose(d, want_d)
    assert (i >= CHUNK).any(), "some true neighbours lie in the second chunk"
    d2, i2 = cached_synthetic_ground_truth("sift-like", n, q, 10, 5, tmp_path)
    assert np.array_equal(i2, i) and len(list(tmp_path.glob("gt-sift-like-*.npz"))) == 1
    with pytest.raises(InvalidArgument, match="name"):
        synthetic_ground_truth("deep-1b", 10, q)
    with pytest.raises(InvalidArgument, match="columns"):
        synthetic_ground_truth("sift-like", 10, q[:, :7])


def test_streamed_build_is_cached_and_loaded_unchanged(tmp_path):
    ix, built = load_or_build("sift-like", 2500, seed=3, R=8, ef_construction=32, cache_dir=tmp_path)
    path = index_path("sift-like", 2500, 3, 8, 32, tmp_path)
    assert not built["loaded"] and path.exists() and ix.ntotal == 2500
    assert json.loads(build_record_path(path).read_text())["build_cpu_s"] > 0
    again, rec = load_or_build("sift-like", 2500, seed=3, R=8, ef_construction=32, cache_dir=tmp_path)
    assert rec["loaded"] and rec["build_wall_s"] == built["build_wall_s"]
    q = synthetic("sift-like", 20, seed=3, queries=True)
    assert all(np.array_equal(a, b) for a, b in zip(ix.search(q, 5, ef=32), again.search(q, 5, ef=32)))
    assert np.array_equal(again.layer0_csr()[1], ix.layer0_csr()[1])
    with pytest.raises(InvalidArgument, match="name"):
        load_or_build("mnist", 10, cache_dir=tmp_path)
    with pytest.raises(InvalidArgument, match="n must be"):
        load_or_build("sift-like", 0, cache_dir=tmp_path)


def test_scale_experiment_measures_the_batch(tmp_path):
    title, run = EXPERIMENTS["scale"]
    exp = Experiment("ndsearch", "scale", title, tmp_path)
    run(exp, Options(quick=True, seed=4, extra={"n": "3000", "queries": "64", "truth_queries": "16"}))
    exp.write()
    r = json.loads((tmp_path / "scale.json").read_text())["data"]["run"]
    assert r["n"] == 3000 and r["batch_wall_s"] > 0 and r["batch_cpu_s"] > 0
    assert 0 < r["peak_rss_gib_after_batch"] <= r["peak_rss_gib_end"]
    assert 0 < r["recall@10"] <= 1
    dyn, stat, as_built, dscp = r["reports"]
    assert dyn["page_access_ratio"] < stat["page_access_ratio"]  # dynamic allocating shares pages
    assert dyn["qps"] > dscp["qps"] and dscp["design"] == "ds-cp"
    with pytest.raises(ValueError, match="dataset"):
        run(Experiment("ndsearch", "scale", title, tmp_path), Options(quick=True, extra={"dataset": "fashion-mnist"}))


def test_checkpoints_are_the_indexes_of_their_prefixes(tmp_path, monkeypatch):
    from nearflash.ndsearch import scale

    monkeypatch.setattr(scale, "BUILD_STEP", 700)
    ix, rec = scale.build_index("sift-like", 3000, seed=2, R=8, ef_construction=16, threads=1, checkpoints=True,
                                cache_dir=tmp_path)
    saved = sorted(int(p.name.split("-")[2]) for p in tmp_path.glob("*.nfidx"))
    assert saved == [700, 1400, 2800, 3000] and rec["n"] == 3000
    # one thread: the build is deterministic, so the 1400-row checkpoint is what a 1400-row build makes
    part, _ = load_or_build("sift-like", 1400, seed=2, R=8, ef_construction=16, cache_dir=tmp_path)
    fresh, _ = scale.build_index("sift-like", 1400, seed=2, R=8, ef_construction=16, threads=1,
                                 path=tmp_path / "fresh.nfidx")
    assert all(np.array_equal(a, b) for a, b in zip(part.layer0_csr(), fresh.layer0_csr()))


def test_largest_size_at_a_recall_target(tmp_path):
    """Issue 22: the scale run reports the largest size that reaches recall@10 >= 0.9, not a fast low-recall one."""
    from nearflash.ndsearch.scale import EFS, largest_at_recall

    recs = largest_at_recall("sift-like", 0, 8, 32, 0.9, 2048, budget_s=1e9, cache_dir=tmp_path, max_n=4096)
    assert recs[0]["n"] == 2048 and len(recs) <= 2 and all(b["n"] == 2 * a["n"] for a, b in zip(recs, recs[1:]))
    for r in recs:
        assert r["met"] == (r["recall@10"] >= 0.9) and (r["ef"] in EFS if r["met"] else r["ef"] is None)
        assert r["recall_by_ef"] and r["build_cpu_s"] >= 0
    # a target nothing reaches stops at the first size; a generous budget of zero builds one size
    assert len(largest_at_recall("sift-like", 0, 8, 32, 1.01, 2048, budget_s=1e9, cache_dir=tmp_path)) == 1
    assert len(largest_at_recall("sift-like", 0, 8, 32, 0.5, 2048, budget_s=0.0, cache_dir=tmp_path)) == 0
