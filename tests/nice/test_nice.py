"""NICE through Python: the learner and reader on a real mke2fs image against debugfs, NICE-K against a numpy
brute force, and hostile arguments."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from nearflash import nice
from nearflash._native import ImageError, InvalidArgument


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    root = tmp_path_factory.mktemp("root")
    (root / "d1" / "d2").mkdir(parents=True)
    rng = np.random.default_rng(3)
    emb = rng.integers(-1000, 1000, size=(500, 16), dtype=np.int16)
    (root / "d1" / "d2" / "emb.bin").write_bytes(emb.tobytes())
    (root / "note.txt").write_text("hello\n")
    img = tmp_path_factory.mktemp("img") / "fs.img"
    subprocess.run(["mke2fs", "-q", "-F", "-t", "ext4", "-b", "4096", "-d", str(root), str(img), "4M"], check=True)
    return img, emb


def debugfs(img, cmd):
    return subprocess.run(["debugfs", "-R", cmd, str(img)], check=True, capture_output=True, text=True).stdout


def test_learner_and_reader_match_debugfs(image):
    img, _ = image
    ino, levels, lbas = nice.lookup(img, "/d1/d2/emb.bin")
    assert levels == 3
    assert f"Inode: {ino}" in debugfs(img, "stat /d1/d2/emb.bin")
    assert lbas == [int(b) for b in debugfs(img, "blocks /d1/d2/emb.bin").split()]
    for order in ("forward", "backward"):
        learnt = nice.learn_image(img, order=order)
        assert learnt["errors"] == []
        assert learnt["partitions"] == [[0, img.stat().st_size // 4096]]
        f = next(f for f in learnt["files"] if f["inode"] == ino)
        assert f["lbas"] == lbas and f["complete"] and f["size"] == 500 * 16 * 2


def test_knn_equals_numpy_brute_force(image):
    _, emb = image
    rng = np.random.default_rng(5)
    for dtype, dim in ((np.int16, 4), (np.int32, 32), (np.int16, 64)):
        e = rng.integers(-50, 50, size=(700, dim)).astype(dtype)
        q = rng.integers(-50, 50, size=dim)
        d = ((e.astype(np.int64) - q) ** 2).sum(axis=1)
        ref = np.lexsort((np.arange(len(d)), d))[:128]
        np.testing.assert_array_equal(nice.knn(e, q, 128), ref)
    t = nice.knn_timing(1 << 20, 64, 16, 128)
    assert t["stream_cycles"] > t["distance_cycles"], "D = 64 is AXI bound"
    assert 290e6 < nice.mobilenet_v2_timing(1)["macs"] < 310e6


def test_hostile_arguments(image, tmp_path):
    img, emb = image
    with pytest.raises(FileNotFoundError):
        nice.lookup(img, "/d1/none")
    with pytest.raises(InvalidArgument):
        nice.lookup(img, "relative")
    with pytest.raises(InvalidArgument):
        nice.learn_image(img, order="sideways")
    bad = tmp_path / "bad.img"
    raw = bytearray(img.read_bytes())
    raw[1024 + 0x38] = 0
    bad.write_bytes(bytes(raw))
    with pytest.raises(ImageError):
        nice.lookup(bad, "/note.txt")
    assert nice.learn_image(bad)["files"] == []
    with pytest.raises(OSError):
        nice.learn_image(tmp_path / "missing.img")
    odd = tmp_path / "odd.img"
    odd.write_bytes(b"x" * 5000)
    with pytest.raises(InvalidArgument):
        nice.learn_image(odd)
    with pytest.raises(TypeError):
        nice.knn(emb.astype(np.float32), np.zeros(16), 4)
    with pytest.raises(ValueError):
        nice.knn(emb, np.zeros(3, dtype=np.int64), 4)
    with pytest.raises(InvalidArgument):
        nice.knn(emb, np.zeros(16, dtype=np.int64), 0)
    with pytest.raises(InvalidArgument):
        nice.knn(emb, np.zeros(16, dtype=np.int64), 4, params={"lanes": "many"})
    with pytest.raises(TypeError):
        nice.knn(emb, np.zeros(16, dtype=np.int64), 4, params=[1])
    with pytest.raises(InvalidArgument):
        nice.mobilenet_v2_timing(0)
