"""The resumable large run (``nearflash.ndsearch.large``): a shard built in steps, stopped and resumed from its
checkpoint is byte for byte the graph one uninterrupted build makes (so the sharded search loads the same graph
whichever session built it); the plan reports what is built and the time to go; the driver builds what is missing,
searches the shards built so far as a partial array, and then the whole array."""

import json

import numpy as np
import pytest

import nearflash
from nearflash.errors import InvalidArgument
from nearflash.ndsearch import Index, large, sharded

GRAPH = sharded.Graph(R=8, ef_construction=24)
SMALL = ["--set", "channels=2", "--set", "chips_per_channel=2", "--set", "blocks_per_plane=32", "--set",
         "pages_per_block=16", "--set", "page_size=4KiB", "--set", "over_provisioning=40", "--set",
         "write_buffer=256KiB", "--set", "ext_reserved_blocks=2"]


class Stop(Exception):
    pass


def one_shot(base, first, rows, tmp_path):
    ix = Index(base.dim, base.metric, R=GRAPH.R, ef_construction=GRAPH.ef_construction, dtype=base.dtype)
    ix.add(base.rows(first, rows), threads=1)
    ix.save(tmp_path / "whole.nfidx")
    return (tmp_path / "whole.nfidx").read_bytes()


def test_a_stopped_and_resumed_shard_is_the_uninterrupted_graph(tmp_path):
    base = sharded.Synthetic("sift-like", 5000, seed=2)
    cache = tmp_path / "cache"

    def stop_after_two(done, rows, rec):
        if rec["session"]["rows"] >= 1000:
            raise Stop

    with pytest.raises(Stop):
        large.build_shard(base, 1200, 2500, GRAPH, str(cache), step=500, checkpoint_s=0, progress=stop_after_two)
    path = sharded.shard_path(str(cache), base, 1200, 2500, GRAPH)
    part, part_rec = large.partial_paths(path)
    assert not path.exists() and json.loads(part_rec.read_text())["rows_done"] == 1000
    seen = []
    rec = large.build_shard(base, 1200, 2500, GRAPH, str(cache), step=500, checkpoint_s=0,
                            progress=lambda d, r, rec: seen.append(d))
    assert seen == [1500, 2000, 2500] and rec["sessions"] == 2 and rec["rows_done"] == 2500
    assert not part.exists() and not part_rec.exists()
    assert path.read_bytes() == one_shot(base, 1200, 2500, tmp_path)
    # The sharded search loads it as built.
    ix, built = sharded.shard_graph(base, 1200, 2500, GRAPH, str(cache))
    assert built["loaded"] and ix.ntotal == 2500
    # A finished shard is not built again.
    assert large.build_shard(base, 1200, 2500, GRAPH, str(cache), progress=lambda *a: pytest.fail("rebuilt")) == rec


def test_plan_status_and_the_driver_search_partial_then_whole(tmp_path, capsys):
    cache, log = tmp_path / "cache", tmp_path / "log"
    common = ["--n", "1200", "--devices", "3", "--R", "8", "--ef-construction", "24", "--cache", str(cache),
              "--queries", "16", "--truth-queries", "16", "--ef", "32", "--step", "200", *SMALL]
    plan = large.Plan(sharded.Synthetic("sift-like", 1200), 3, GRAPH, str(cache))
    assert plan.status()["built"] == 0 and plan.remaining_rows() == 1200 and plan.built_prefix() == 0
    assert large.main([*common, "--search", "partial"]) == 1  # nothing built: nothing to search
    large.build_shard(plan.base, 0, 400, GRAPH, str(cache))
    st = plan.status()
    assert st["built"] == 1 and st["rows_remaining"] == 800 and st["predicted_remaining_cpu_s"] > 0
    out = tmp_path / "partial.json"
    assert large.main([*common, "--search", "partial", "--out", str(out)]) == 0
    got = json.loads(out.read_text())
    assert (got["devices"], got["split"], got["vectors_searched"]) == (1, 3, 400)
    assert got["recall@10"] >= 0.9 and got["shards"][0]["loaded"]
    assert large.main([*common, "--search", "never", "--log", str(log)]) == 0
    assert plan.missing() == [] and "shard 2: 400/400 rows" in log.read_text()
    whole = tmp_path / "whole.json"
    assert large.main([*common, "--out", str(whole)]) == 0
    got = json.loads(whole.read_text())
    assert got["vectors_searched"] == 1200 and all(s["loaded"] for s in got["shards"]) and got["recall@10"] >= 0.9


def test_a_partial_array_runs_the_first_shards_of_the_split():
    base = sharded.Synthetic("sift-like", 900, seed=1)
    q = nearflash.ndsearch.synthetic("sift-like", 4, seed=1, queries=True)
    over = {"channels": 2, "chips_per_channel": 2, "blocks_per_plane": 32, "pages_per_block": 16,
            "page_size": "4KiB", "over_provisioning": 40, "write_buffer": "256KiB", "ext_reserved_blocks": 2}
    res = sharded.search(nearflash.Array(2, "searssd", overrides=over), base, q, k=5, ef=24, graph=GRAPH, split=3)
    assert [(s["first"], s["rows"]) for s in res.shards] == [(0, 300), (300, 300)]
    assert res.ids.max() < 600
    with pytest.raises(InvalidArgument, match="split"):
        sharded.search(nearflash.Array(2, "searssd", overrides=over), base, q, graph=GRAPH, split=1)
    with pytest.raises(InvalidArgument, match="split"):
        sharded.search(nearflash.Array(2, "searssd", overrides=over), base, q, graph=GRAPH, split="3")


def test_a_damaged_checkpoint_record_is_refused(tmp_path):
    base = sharded.Synthetic("sift-like", 600)
    cache = tmp_path / "c"
    with pytest.raises(Stop):
        large.build_shard(base, 0, 600, GRAPH, str(cache), step=200, checkpoint_s=0,
                          progress=lambda d, r, rec: (_ for _ in ()).throw(Stop) if d >= 200 else None)
    part, part_rec = large.partial_paths(sharded.shard_path(str(cache), base, 0, 600, GRAPH))
    rec = json.loads(part_rec.read_text())
    part_rec.write_text(json.dumps({**rec, "rows_done": 400}))
    with pytest.raises(InvalidArgument, match="checkpoint"):
        large.build_shard(base, 0, 600, GRAPH, str(cache))
    with pytest.raises(InvalidArgument, match="cache"):
        large.build_shard(base, 0, 600, GRAPH, None)


def test_one_driver_per_cache(tmp_path, capsys):
    held = large._lock(tmp_path)
    assert held is not None and large._lock(tmp_path) is None
    assert large.main(["--n", "100", "--devices", "1", "--cache", str(tmp_path)]) == 2
    assert "another run" in capsys.readouterr().err
    # A partial search only reads what is built, so it runs beside the driver (here: nothing built yet).
    assert large.main(["--n", "100", "--devices", "1", "--cache", str(tmp_path), "--search", "partial"]) == 1
    held.close()
    again = large._lock(tmp_path)
    assert again is not None
    again.close()


def test_two_workers_build_shards_side_by_side_into_the_same_graphs(tmp_path):
    cache, log = tmp_path / "cache", tmp_path / "log"
    base = sharded.Synthetic("sift-like", 1500, seed=3)
    args = ["--n", "1500", "--devices", "3", "--seed", "3", "--R", "8", "--ef-construction", "24", "--cache",
            str(cache), "--step", "250", "--search", "never", "--log", str(log), "--workers", "2", "--nice", "19"]
    assert large.main(args) == 0
    plan = large.Plan(base, 3, sharded.Graph(R=8, ef_construction=24, seed=3), str(cache))
    assert plan.missing() == []
    for i, (first, rows) in enumerate(plan.shards):
        ix = Index(base.dim, base.metric, R=8, ef_construction=24, dtype=base.dtype, seed=3)
        ix.add(base.rows(first, rows), threads=1)
        ix.save(tmp_path / f"one-{i}.nfidx")
        assert plan.path(i).read_bytes() == (tmp_path / f"one-{i}.nfidx").read_bytes()
    text = log.read_text()
    assert all(f"shard {i}: 500/500 rows" in text for i in range(3)) and "x 2 workers" in text
    assert sorted(json.loads(line)["shard"] for line in text.splitlines() if line.startswith('{"shard"')) == [0, 1, 2]


def test_the_build_workers_niceness_and_bad_driver_options(tmp_path, capsys):
    import concurrent.futures
    import multiprocessing

    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        assert pool.submit(large.set_nice, 19).result() == 19
    for bad in (["--workers", "0"], ["--nice", "20"], ["--nice", "-21"]):
        with pytest.raises(SystemExit):
            large.main(["--n", "100", "--devices", "1", "--cache", str(tmp_path), *bad])
        assert bad[0] in capsys.readouterr().err


def test_a_build_worker_ends_with_its_killed_driver(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    if not sys.platform.startswith("linux"):
        pytest.skip("the parent-death signal is Linux's")
    pid_file, script = tmp_path / "worker.pid", tmp_path / "driver.py"
    script.write_text(f"""
import concurrent.futures, multiprocessing, os, time
from nearflash.ndsearch import large

def work(path):
    assert large.exit_with_parent()
    open(path, "w").write(str(os.getpid()))
    time.sleep(60)

if __name__ == "__main__":
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        pool.submit(work, {str(pid_file)!r}).result()
""")
    driver = subprocess.Popen([sys.executable, str(script)])
    try:
        deadline = time.monotonic() + 30
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline and driver.poll() is None, "the worker never started"
            time.sleep(0.05)
        worker = int(pid_file.read_text())
        driver.send_signal(signal.SIGKILL)  # as `kill -9 <driver>`: no clean-up of its pool
        driver.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(worker, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        os.kill(worker, signal.SIGKILL)
        pytest.fail("the worker outlived its driver")
    finally:
        driver.kill()
