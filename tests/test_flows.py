"""Flows: a scenario of concurrent flows (a read-heavy recorded trace beside a random-write flow), each on its own
queue, with MQSim's per-flow figures; `--alone` gives slowdown and fairness as MQSim's FAST'18 study computes them;
wrong scenarios are refused before anything runs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from nearflash.errors import InvalidArgument, NearflashError
from nearflash.flows import DeviceSetup, load_scenario, parse_scenario, run_flows, slowdown_and_fairness

FIXTURES = Path(__file__).with_name("fixtures") / "traces"
SMALL = {"channels": 2, "chips_per_channel": 1, "blocks_per_plane": 128, "pages_per_block": 64,
         "over_provisioning": "20%"}

SCENARIO = f"""
name = "reads beside random writes"
[device]
preset = "cosmos-plus"
overrides = {json.dumps(SMALL).replace('": ', '" = ').replace('{"', '{ "')}

[[flow]]
name = "reads"                   # a read-heavy recorded trace (fio randrw 70/30), its arrival times kept
trace = "{FIXTURES / 'fio.csv'}"

[[flow]]
name = "writer"                  # a synthetic closed-loop random-write flow
rw = "randwrite"
bs = "16k"
iodepth = 8
ios = 3000
start = "128m"
size = "64m"
"""


def setup() -> DeviceSetup:
    return DeviceSetup(overrides=dict(SMALL))


def trace_flow(**kw):
    return {"name": "reads", "trace": str(FIXTURES / "fio.csv"), **kw}


def writer(**kw):
    return {"name": "writer", "rw": "randwrite", "bs": "16k", "iodepth": 8, "ios": 3000, "start": "128m",
            "size": "64m", **kw}


def test_two_flows_run_on_their_own_queues_with_mqsims_figures():
    r = run_flows([trace_flow(), writer()], setup())
    a, b = r["flows"]
    assert (a["qid"], b["qid"], a["source"], b["source"]) == (1, 2, "trace", "synthetic")
    assert a["all"]["requests"] == 1500 and b["ops"]["write"]["requests"] == 3000
    for f in (a, b):
        for key in ("requests", "iops", "bytes", "bandwidth_mb_s"):
            assert key in f["all"]
        for lat in (f["all"]["device_response_time"], f["all"]["end_to_end_delay"]):
            assert lat["min_us"] <= lat["p50_us"] <= lat["p99_us"] <= lat["max_us"] and lat["mean_us"] > 0
    assert r["report"].data["ops"]["write"]["count"] >= 3000 + a["ops"]["write"]["requests"]
    assert b["max_queue_depth"] == 8 and b["mean_queue_depth"] > 6


def test_alone_runs_give_slowdown_and_fairness():
    r = run_flows([trace_flow(), writer()], setup(), alone=True)
    s, f = r["slowdown"], r["fairness"]
    together = {x["name"]: x["all"]["device_response_time"]["mean_us"] for x in r["flows"]}
    alone = {x["name"]: x["all"]["device_response_time"]["mean_us"] for x in r["alone"]}
    for name in ("reads", "writer"):
        assert s[name] == pytest.approx(together[name] / alone[name])
    assert s["reads"] > 1.05, "random writes beside them slow the trace's reads down"
    assert f == pytest.approx(min(s.values()) / max(s.values())) and 0 < f <= 1
    # Alone, each flow issued the same requests as together.
    for x, y in zip(r["flows"], r["alone"]):
        assert (x["all"]["requests"], x["all"]["bytes"]) == (y["all"]["requests"], y["all"]["bytes"])


def test_slowdown_and_fairness_by_hand():
    def flow(name, mean):
        return {"name": name, "all": {"device_response_time": {"mean_us": mean}}}

    s, f = slowdown_and_fairness([flow("a", 300.0), flow("b", 150.0)], [flow("a", 100.0), flow("b", 100.0)])
    assert s == {"a": 3.0, "b": 1.5} and f == 0.5


def test_a_scenario_file_runs_from_the_cli(tmp_path, capsys):
    from nearflash.cli import main

    spec = tmp_path / "s.toml"
    spec.write_text(SCENARIO)
    sc = load_scenario(spec)
    assert [f["name"] for f in sc.flows] == ["reads", "writer"] and sc.device.overrides["channels"] == 2
    assert main(["flows", str(spec), "--alone"]) == 0
    out = capsys.readouterr().out
    assert "dev. resp. us mean/p99/max" in out and "slowdown" in out and "fairness" in out
    assert main(["flows", str(spec), "--json"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert [f["name"] for f in j["flows"]] == ["reads", "writer"] and "slowdown" not in j


def test_priorities_are_validated_and_carried_to_the_flows_queues():
    for prio in ("urgent", "high", "medium", "low"):
        r = run_flows([writer(priority=prio, ios=50)], setup())
        assert r["flows"][0]["priority"] == prio and r["flows"][0]["all"]["requests"] == 50
    with pytest.raises(InvalidArgument, match="priority must be one of urgent, high, medium, low"):
        run_flows([writer(priority="highest")], setup())


@pytest.mark.parametrize("flows, msg", [
    ([], "non-empty list"),
    ("reads", "non-empty list"),
    ([{"name": "x"}], "give either trace"),
    ([{"name": "x", "trace": "t", "rw": "randread"}], "not both"),
    ([{"trace": "t"}], "every flow needs a name"),
    ([{"name": "a,b", "rw": "randread"}], "every flow needs a name"),
    ([writer(), writer()], "two flows are named 'writer'"),
    ([writer(colour="red")], r"unknown key\(s\) colour"),
    ([writer(rate=5, mode="closed")], "time_scale and rate apply to open-loop flows"),
    ([{"name": "w", "rw": "randwrite", "mode": "open"}], "needs a rate"),
    ([trace_flow(iodepth=4)], "iodepth applies to closed-loop flows"),
    ([trace_flow(mode="closed", time_scale=0.5)], "apply to open-loop flows"),
    ([writer(rw="randomwrite")], "rw must be one of"),
    ([writer(bs="6000")], "not a positive multiple of the 4096 B LBA"),
    ([writer(bs=0)], "not a positive multiple"),
    ([writer(ios=0)], "ios must be an integer >= 1"),
    ([writer(iodepth=True)], "iodepth must be an integer >= 1"),
    ([writer(rwmixread=2)], "rwmixread must be a number in"),
    ([writer(rwmixread=0.3)], "rwmixread applies to rw = 'randrw'"),  # found by the audit: ignored before
    ([{"name": "w", "rw": "randwrite", "rate": -5}], "rate must be a positive number"),
    ([writer(start="1000")], "not a multiple of the 4096 B LBA"),
    ([writer(start="2g")], "past the device's"),
    ([writer(size="150%")], "share of the capacity"),
    ([writer(size=0)], "holds no"),
    ([trace_flow(trace=str(FIXTURES / "nope.trace"))], "no such file"),
    ([trace_flow(trace=42)], "trace must be a path"),
    ([trace_flow(repeat=0)], "repeat must be a positive integer"),
    ([trace_flow(skip_bad="no")], "skip_bad must be true or false"),
    ([trace_flow(start="300m")], "ends past"),
    ([writer(queue_depth=-1)], "queue_depth must be an integer >= 1"),
    ([writer(queue_depth=2**40)], "at most 4294967295"),
    ([writer(iodepth=2**40)], "at most 4294967295"),
    ([writer(ios=2**70)], "ios must be an integer >= 1"),
    ([writer(seed=2**70)], "seed must be an integer >= 0"),
    ([writer(start=2**70)], "below 2\\^64"),
    ([{"name": "w", "rw": "randwrite", "ios": 1000, "rate": 1e-12}], "past the simulated clock"),
    ([writer(priority=3)], "priority must be one of"),
    ([["name", "w"]], "a flow is a dict"),
    ([trace_flow(trace=None)], "trace must be a path"),
])
def test_wrong_flows_are_refused_naming_what(flows, msg):
    with pytest.raises(NearflashError, match=msg):
        run_flows(flows, setup())


def test_wrong_run_arguments_are_refused():
    for kw, msg in [({"alone": "yes"}, "alone must be true or false"), ({"device": "cosmos-plus"}, "device must be"),
                    ({"base_dir": 3}, "base_dir must be a path"), ({"latencies": 3}, "latencies must be a path")]:
        with pytest.raises(InvalidArgument, match=msg):
            run_flows([writer(ios=10)], **{"device": setup(), **kw})
    with pytest.raises(InvalidArgument, match="path must be a path"):
        load_scenario(None)


def test_seventeen_flows_need_seventeen_queues():
    many = [writer(name=f"w{i}", ios=10) for i in range(17)]
    with pytest.raises(NearflashError, match="17 flows, but the device has 16 I/O queues"):
        run_flows(many, setup())


@pytest.mark.parametrize("text, msg", [
    ("[device]\npreset = 3\n[[flow]]\nname='a'\nrw='read'\n", "preset must be a name"),
    ("[device]\nspeed = 3\n[[flow]]\nname='a'\nrw='read'\n", r"\[device\]: unknown key\(s\) speed"),
    ("color = 1\n[[flow]]\nname='a'\nrw='read'\n", r"unknown key\(s\) color"),
    ("name = ''\n[[flow]]\nname='a'\nrw='read'\n", "name must be a non-empty string"),
    ("[device]\nseed = -1\n[[flow]]\nname='a'\nrw='read'\n", "seed must be an integer >= 0"),
    ("[device]\nfill_size = '200%'\n[[flow]]\nname='a'\nrw='read'\n", "share of the capacity"),
    # found by the audit: 0 bytes was taken as no fill at all (the CLI's --fill-size 0 is refused)
    ("[device]\nfill_size = 0\n[[flow]]\nname='a'\nrw='read'\n", "fill_size must be positive"),
    ("flow = 3\n", r"needs \[\[flow\]\] tables"),
    ("", r"needs \[\[flow\]\] tables"),
    ("[[flow]\n", "not valid TOML"),
])
def test_wrong_scenario_files_are_refused(tmp_path, text, msg):
    p = tmp_path / "s.toml"
    p.write_text(text)
    with pytest.raises(InvalidArgument, match=msg):
        load_scenario(p)


def test_scenario_trace_paths_are_relative_to_the_file(tmp_path):
    (tmp_path / "t.trace").write_text("0 0 0 8 1\n1000 0 8 8 0\n")
    sc = parse_scenario({"flow": [{"name": "t", "trace": "t.trace"}], "device": {"overrides": SMALL}}, tmp_path)
    r = run_flows(sc.flows, sc.device, base_dir=sc.base_dir)
    assert r["flows"][0]["all"]["requests"] == 2
    assert not math.isnan(r["flows"][0]["all"]["device_response_time"]["mean_us"])
    with pytest.raises(InvalidArgument, match="alone runs start each flow on a fresh device"):
        run_flows(sc.flows, DeviceSetup(path=str(tmp_path / "img")), alone=True)


def test_a_scenario_seed_takes_the_range_of_the_api_and_cli(tmp_path):
    """Found by the audit: `[device] seed = 5000000000` was refused ("at most 4294967295") while DeviceSetup(seed=...)
    and `nearflash flows --seed` take any seed below 2^64."""
    p = tmp_path / "s.toml"
    p.write_text(f"[device]\nseed = {2**63 - 1}\n[[flow]]\nname='a'\nrw='read'\n")
    assert load_scenario(p).device.seed == 2**63 - 1


def test_a_span_or_fill_past_the_device_is_refused_not_cut():
    """A flow's `size` past the device's end, or a `fill_size` above its capacity, was cut to the device silently;
    only the default span (16 GiB, as bench's) is cut. Nothing runs: the refusal comes before any request."""
    cap = setup().open()
    capacity = cap.capacity_bytes
    cap.close()
    with pytest.raises(InvalidArgument, match=r"writer': size .* runs past the device's"):
        run_flows([writer(start="128m", size=capacity)], setup())
    with pytest.raises(InvalidArgument, match="fill_size .* is more than the device's"):
        run_flows([writer(ios=10)], DeviceSetup(overrides=dict(SMALL), fill="random", fill_size=capacity + 4096))
    r = run_flows([writer(ios=10, start=0, size=capacity)], setup())
    assert r["flows"][0]["all"]["requests"] == 10
