"""The Agent on a device: every kernel's in-storage answer equals its host-path answer, the partitioned answers and
an independent reference (numpy, Python, DuckDB when installed); malformed commands complete with NVMe errors."""

import collections
import json
import re
import struct

import numpy as np
import pytest

import nearflash
from nearflash import InvalidArgument
from nearflash.issd import agent, data, kernels, lineitem

PAGE = 8192
STRATEGIES = [("in_storage", {}), ("conventional", {}), ("static", {"fraction": 0.6}), ("dynamic", {"chunk_pages": 5})]


@pytest.fixture(scope="module")
def dev():
    d, setup = agent.device("iSSD-XL", n_ch=4, n_host_cpu=4)
    assert setup["agent"]["ftl_lookups"] is False
    yield d
    d.close()


@pytest.fixture(scope="module")
def placed(dev):
    """Inputs of every kernel, written one after another."""
    rows = lineitem.generate(rows=30_000, page_size=PAGE, comment_pool="compact")
    text = data.text(400_000, seed=3)
    pts = data.regression_points(200_000, seed=4)
    clusters = data.cluster_points(60_000, 3, 4, seed=5)
    pixels = data.pixels(400, 300, seed=6)
    inputs = {
        "lineitem": rows,
        "text": data.pack_lines(text, PAGE),
        "points": data.pack_records(pts, 2, PAGE),
        "clusters": data.pack_records(clusters, 12, PAGE),
        "pixels": data.pack_records(pixels, 3, PAGE),
    }
    slba, extents = 0, {}
    for name, pages in inputs.items():
        extents[name] = agent.write_input(dev, slba, pages, PAGE)
        slba += len(pages) // dev.lba_bytes
    return {"pages": inputs, "extents": extents, "text": text, "points": pts, "clusters": clusters, "pixels": pixels,
            "rows": lineitem.decode(rows, PAGE)}


def run_all(dev, spec, extents):
    """The job with every strategy (and on the stream processors); all answers must agree."""
    outs = [agent.run(dev, spec, extents, PAGE, s, **kw) for s, kw in STRATEGIES]
    outs.append(agent.run(dev, spec, extents, PAGE, accelerate=True))
    first = outs[0]
    for o in outs[1:]:
        assert o["encoded"] == first["encoded"]
    assert outs[0]["device_bytes"] == outs[0]["input_bytes"] and outs[1]["device_bytes"] == 0
    assert 0 < outs[2]["device_bytes"] < outs[2]["input_bytes"]
    return first


def test_scan_matches_numpy(dev, placed):
    r = placed["rows"]
    out = run_all(dev, kernels.spec("scan"), placed["extents"]["lineitem"])
    assert out["data"] == r["l_quantity"][r["l_partkey"] <= 2000].astype("<i4").tobytes()
    assert out["scanned"] == len(r)


def test_q6_matches_numpy(dev, placed):
    r = placed["rows"]
    out = run_all(dev, kernels.spec("filter_sum"), placed["extents"]["lineitem"])
    m = (r["l_shipdate"] >= 8766) & (r["l_shipdate"] < 9131) & (abs(r["l_discount"] - 6) <= 1) & (r["l_quantity"] < 2400)
    assert out["matched"] == m.sum() > 0
    assert out["sum"] == int((r["l_extendedprice"][m].astype(np.int64) * r["l_discount"][m]).sum())


def test_scan_and_q6_match_duckdb(dev, placed):
    duckdb = pytest.importorskip("duckdb")
    r = placed["rows"]
    con = duckdb.connect()
    cols = {n: r[n] for n in ("l_partkey", "l_quantity", "l_shipdate", "l_discount", "l_extendedprice", "row_id")}
    con.register("lineitem", cols)
    scan = run_all(dev, kernels.spec("scan"), placed["extents"]["lineitem"])
    expect = con.execute("SELECT l_quantity FROM lineitem WHERE l_partkey <= 2000 ORDER BY row_id").fetchnumpy()["l_quantity"]
    assert scan["data"] == expect.astype("<i4").tobytes()
    q6 = run_all(dev, kernels.spec("filter_sum"), placed["extents"]["lineitem"])
    s, n = con.execute(
        "SELECT sum(l_extendedprice::HUGEINT * l_discount), count(*) FROM lineitem WHERE l_shipdate >= 8766 AND "
        "l_shipdate < 9131 AND l_discount BETWEEN 5 AND 7 AND l_quantity < 2400"
    ).fetchone()
    assert (q6["sum"], q6["matched"]) == (int(s), n)


def test_linear_regression_matches_numpy(dev, placed):
    out = run_all(dev, kernels.spec("linear_regression"), placed["extents"]["points"])
    x, y = placed["points"][:, 0].astype(np.float64), placed["points"][:, 1].astype(np.float64)
    slope, intercept = np.polyfit(x, y, 1)
    assert out["n"] == len(x) and out["sxy"] == int((x * y).sum())
    assert out["slope"] == pytest.approx(slope, rel=1e-9) and out["intercept"] == pytest.approx(intercept, rel=1e-9)


def test_kmeans_iteration_matches_numpy(dev, placed):
    pts = placed["clusters"].astype(np.int64)
    cent = pts[:4]
    out = run_all(dev, kernels.spec("kmeans", dim=3, centroids=cent.tolist()), placed["extents"]["clusters"])
    d = ((pts[:, None, :] - cent[None, :, :]) ** 2).sum(-1)
    lab = d.argmin(1)
    counts = np.bincount(lab, minlength=4)
    sums = np.stack([pts[lab == j].sum(0) for j in range(4)])
    expect = np.where(counts[:, None] > 0, np.floor_divide(sums, np.maximum(counts, 1)[:, None]), cent)
    assert np.array_equal(out["counts"], counts)
    assert np.array_equal(out["centroids"], expect)
    assert out["sse"] == int(d.min(1).sum())


def test_string_match_grep_and_word_count_match_python(dev, placed):
    text = placed["text"]
    keys = ["furiously", "pending", "zzz"]
    sm = run_all(dev, kernels.spec("string_match", keys=keys, locate=False), placed["extents"]["text"])
    assert [k["count"] for k in sm["keys"]] == [text.count(k.encode()) for k in keys]
    grep = run_all(dev, kernels.spec("grep", pattern="ironic"), placed["extents"]["text"])
    assert grep["data"] == b"".join(l + b"\n" for l in text.split(b"\n") if b"ironic" in l)
    wc = run_all(dev, kernels.spec("word_count", top=10), placed["extents"]["text"])
    counts = collections.Counter(re.findall(rb"[A-Za-z]+", text.lower()))
    assert wc["total"] == sum(counts.values())
    assert [w for w, _ in wc["words"]][:3] == [w.decode() for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:3]]


def test_histogram_matches_numpy(dev, placed):
    out = run_all(dev, kernels.spec("histogram"), placed["extents"]["pixels"])
    px = placed["pixels"]
    expect = np.stack([np.bincount(px[:, c], minlength=256) for c in range(3)])
    assert np.array_equal(out["counts"], expect)


def test_in_storage_scan_beats_the_sata_host_by_about_the_bandwidth_ratio(placed):
    """iSSD-400 with 16 channels over SATA: the FMCs scan 16 x 100 MB/s, the host reads at most 600 MB/s."""
    d, setup = agent.device("iSSD-400", n_ch=16, n_host_cpu=8)
    with d:
        ext = agent.write_input(d, 0, placed["pages"]["lineitem"], PAGE)
        issd = agent.run(d, kernels.spec("scan"), ext, PAGE)
        host = agent.run(d, kernels.spec("scan"), ext, PAGE, "conventional")
        assert issd["encoded"] == host["encoded"]
        assert 1.5 < issd["bandwidth"] / host["bandwidth"] < 1600 / 600
        assert issd["result_bytes"] < host["input_bytes"] / 100
        stats = d.report().extensions["issd"]
        assert stats["runs"] == 1 and stats["total"]["fmc_pages"] == len(placed["pages"]["lineitem"]) // PAGE


# ---- malformed commands ----

LOAD, RUN, FETCH = 0xB1, 0xB2, 0xB6


def sqe(opcode, cdw10=0, cdw11=0, cdw12=0):
    b = bytearray(64)
    b[0] = opcode
    struct.pack_into("<I", b, 4, 1)
    struct.pack_into("<IIII", b, 40, cdw10, cdw11, cdw12, 0)
    return bytes(b)


def raw(dev, opcode, data=None, to_device=False, **dw):
    """Submits one raw command on queue 1 and returns its (sct, sc, dw0)."""
    n = dev.native
    n.submit_raw(1, sqe(opcode, **dw), data, to_device)
    cid, sct, sc, dw0, _ = n.wait(1)
    return sct, sc, dw0


def test_bad_descriptors_complete_with_nvme_errors(dev, placed):
    invalid_field = (0, 0x02)
    garbage = np.frombuffer(b"iSSD" + bytes(60), dtype=np.uint8).copy()
    assert raw(dev, LOAD, garbage, True, cdw11=64)[:2] == invalid_field
    rng = np.random.default_rng(1)
    for _ in range(20):
        junk = rng.integers(0, 256, 200, dtype=np.uint8)
        assert raw(dev, LOAD, junk, True, cdw11=200)[:2] == invalid_field
    assert raw(dev, LOAD, garbage, True, cdw10=1000, cdw11=64)[:2] == invalid_field  # no such slot
    assert raw(dev, LOAD, garbage[:10].copy(), True, cdw11=64)[:2] == (0, 0x04)  # buffer shorter than announced
    assert raw(dev, RUN, None, False, cdw10=7)[:2] == (0, 0x0C)  # nothing loaded in slot 7
    assert raw(dev, FETCH, np.zeros(8, np.uint8), False, cdw10=7)[:2] == (0, 0x0C)
    # the Initiator surfaces device errors as NvmeError with their status; a kernel over the wrong data is one
    with pytest.raises(nearflash.NvmeError) as e:
        agent.run(dev, kernels.spec("scan"), placed["extents"]["text"], PAGE)
    assert e.value.sct == 1 and e.value.sc >= 0xC0, "a command-specific status of the Agent"
    # ... and says why: the host library read the reason from the device's error log (Get Log Page 0x01 / 0xC1)
    assert re.search(r"run \(map: .+\)", str(e.value)), str(e.value)
    newest = dev.error_log()[0]
    assert (newest["sct"], newest["sc"]) == (e.value.sct, e.value.sc) and newest["reason"].startswith("map: ")
    assert newest["reason"] in str(e.value) and newest["lba"] is None
    with pytest.raises(ValueError):
        agent.run(dev, kernels.spec("scan"), placed["extents"]["text"], PAGE, "teleport")


def test_error_log_names_the_field_of_a_bad_command(dev):
    assert raw(dev, LOAD, np.zeros(64, np.uint8), True, cdw10=1000, cdw11=64)[:2] == (0, 0x02)
    newest = dev.error_log()[0]
    assert newest["status"] == "Invalid Field in Command"
    assert newest["byte"] == 40 and "slot 1000 (CDW10) does not exist" in newest["reason"]
    before = newest["error_count"]
    lba = dev.lbas + 3  # a raw Read past the end (the SDK's read refuses it before any command)
    assert raw(dev, 0x02, np.zeros(dev.lba_bytes, np.uint8), False, cdw10=lba & 0xFFFFFFFF, cdw11=lba >> 32)[:2] == (0, 0x80)
    newest = dev.error_log()[0]
    assert newest["error_count"] == before + 1 and newest["lba"] == lba and newest["byte"] == 40
    assert f"LBAs {lba} + 1" in newest["reason"], "a standard command's refusal says why too"
    assert dev.error_reason(newest["sqid"], newest["cid"]) == newest["reason"]
    for bad in ({"sqid": "1", "cid": 0}, {"sqid": 1, "cid": -1}, {"sqid": 1 << 16, "cid": 0}, {"sqid": 1, "cid": 1.5}):
        with pytest.raises(InvalidArgument, match="sqid|cid"):
            dev.error_reason(**bad)


def test_agent_parameters_and_attach_errors():
    names = [p[0] for p in agent.parameters()]
    assert {"f_fmc", "fmc_read_ahead", "output_flush", "ftl_lookups"} <= set(names)
    assert all(p[3] for p in agent.parameters())
    import nearflash

    with nearflash.Device(None, preset="issd", channels=8, blocks_per_plane=128) as d:
        with pytest.raises(nearflash.NearflashError):
            d.attach("issd", f_fmc="fast")
        with pytest.raises(nearflash.NearflashError):
            d.attach("issd", opcode_run=0x02)
        d.attach("issd", f_fmc=800, costs={"scan": {"cpb_fmc": 8.0}})
        assert "issd" in json.dumps(d.report().extensions)


def test_docs_list_every_agent_parameter():
    import pathlib

    doc = (pathlib.Path(__file__).parents[2] / "docs" / "issd.md").read_text()
    missing = [p[0] for p in agent.parameters() if f"`{p[0]}`" not in doc]
    assert not missing, f"docs/issd.md does not list {missing}"


def test_fmc_reads_carry_the_agents_flash_class(dev, placed):
    # The FMCs' reads are transactions of the Agent's class (issue 23), not of the RUN command's queue.
    before = dev.report().data["sched"]["classes"].get("issd.fmc", {}).get("transactions", 0)
    agent.run(dev, kernels.spec("scan"), placed["extents"]["lineitem"], PAGE)
    after = dev.report().data["sched"]["classes"]["issd.fmc"]["transactions"]
    assert after > before
    with nearflash.Device(None, preset="issd", channels=8, blocks_per_plane=128) as d:
        with pytest.raises(nearflash.NearflashError, match="fmc_class_level"):
            d.attach("issd", fmc_class_level="idle")
        d.attach("issd", fmc_class_level="background", fmc_class_weight=1)
