"""Trace replay: every format replayed from a recorded fixture (tests/fixtures/traces, recorded from unmodified
programs through `nearflash serve --log`), the recording's request sequence reproduced exactly, open and closed
loop, address mapping, and hostile input (damaged, missing, overlong traces; wrong options) refused clearly."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

import nearflash
from nearflash.errors import InvalidArgument, NearflashError
from nearflash.flows import DeviceSetup, replay
from nearflash.traces import TraceOptions, convert_trace, detect, read_trace

FIXTURES = Path(__file__).with_name("fixtures") / "traces"
PROVENANCE = json.loads((FIXTURES / "provenance.json").read_text())
#: A small device (2 channels, 1 chip each, 256 MiB): the fixtures were recorded on it.
SMALL = {"channels": 2, "chips_per_channel": 1, "blocks_per_plane": 128, "pages_per_block": 64,
         "over_provisioning": "20%"}


def small(**kw) -> DeviceSetup:
    return DeviceSetup(overrides=dict(SMALL), **kw)


def cli(capsys, *args: str) -> tuple[int, str, str]:
    """`nearflash ARGS` in this process: (exit status, stdout, stderr)."""
    from nearflash.cli import main

    try:
        rc = main(list(args))
    except SystemExit as e:  # argparse's refusals
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("name", sorted(PROVENANCE["recordings"]))
def test_each_format_replays_its_fixture_request_for_request(name):
    rec = PROVENANCE["recordings"][name]
    path = FIXTURES / rec["fixture"]
    assert detect(path) == rec["format"]
    t = read_trace(path).stats
    assert t["requests"] == rec["written"]["written"]
    r = replay(path, small())
    f, rep = r["flow"], r["report"]
    assert f["all"]["requests"] == t["requests"] and f["all"]["errors"] == 0
    for op, n, b in (("read", "reads", "read_bytes"), ("write", "writes", "write_bytes"), ("trim", "trims", None),
                     ("flush", "flushes", None)):
        assert f["ops"].get(op, {}).get("requests", 0) == t[n], op
        if b:
            assert f["ops"].get(op, {}).get("bytes", 0) == t[b], op
    # The device moved the same bytes (requests over MDTS are split into several commands, no byte more or less).
    assert rep.data["ops"].get("read", {}).get("bytes", 0) == t["read_bytes"]
    assert rep.data["ops"].get("write", {}).get("bytes", 0) == t["write_bytes"]
    assert f["mapping"]["widened"] == 0 and f["mapping"]["wrapped"] == 0


def _sequence_of_log(log: Path) -> list[tuple[str, int, int]]:
    """The requests of an nbdkit log, as the log filter wrote them (Zero with trim=1 is a trim, else a write)."""
    out = []
    for line in log.read_text().splitlines():
        words = line.split()
        if len(words) < 4 or words[-1] != "...":
            continue
        ev = words[3]
        f = dict(w.split("=", 1) for w in words[4:] if "=" in w)
        if ev == "Flush":
            out.append(("flush", 0, 0))
        elif ev in ("Read", "Write", "Trim", "Zero"):
            op = {"Read": "read", "Write": "write", "Trim": "trim"}.get(ev) or ("trim" if f["trim"] == "1" else "write")
            out.append((op, int(f["offset"], 16), int(f["count"], 16)))
    return out


def _sequence_replayed(trace: Path, tmp_path: Path) -> list[tuple[str, int, int]]:
    lat = tmp_path / "lat.csv"
    replay(trace, small(), mode="closed", iodepth=1, latencies=lat)
    with lat.open() as f:
        rows = sorted(csv.DictReader(f), key=lambda r: int(r["request"]))
    return [(r["op"], int(r["offset"]), int(r["bytes"])) for r in rows]


def test_replaying_a_recording_reproduces_its_request_sequence_exactly(tmp_path):
    log = FIXTURES / PROVENANCE["recordings"]["qemu-img"]["log"]
    recorded = _sequence_of_log(log)
    assert len(recorded) == 49 and {op for op, _, _ in recorded} >= {"write", "trim", "flush"}
    assert _sequence_replayed(log, tmp_path) == recorded
    assert _sequence_replayed(FIXTURES / "qemu-img.iolog", tmp_path) == recorded
    # And through every format that holds reads and writes only: the same sequence, flushes and trims left out.
    for fmt in ("mqsim", "msr", "blkparse"):
        out = tmp_path / f"back.{fmt}"
        w = convert_trace(log, out, fmt)["written"]
        kept = [x for x in recorded if fmt == "blkparse" or x[0] in ("read", "write")]
        assert w["written"] == len(kept)
        assert _sequence_replayed(out, tmp_path) == kept, fmt


def test_open_loop_keeps_times_and_closed_loop_keeps_depth():
    path = FIXTURES / "fio.csv"
    opened = replay(path, small())["flow"]
    trace = read_trace(path).stats
    assert opened["elapsed_ns"] >= trace["duration_ns"], "open loop: the run lasts at least as long as the recording"
    slow = replay(path, small(), time_scale=20)["flow"]
    assert slow["elapsed_ns"] >= 20 * trace["duration_ns"] > opened["elapsed_ns"]
    assert slow["all"]["end_to_end_delay"]["mean_us"] < opened["all"]["end_to_end_delay"]["mean_us"], \
        "spread out, the requests queue less"
    closed = replay(path, small(), mode="closed", iodepth=16)["flow"]
    assert closed["timing"] == "closed" and closed["max_queue_depth"] >= 16
    assert closed["mean_queue_depth"] > 8
    # The device cannot keep up with the recording's rate (open loop queues in the device); 16 at a time queue less.
    assert closed["all"]["device_response_time"]["mean_us"] < opened["all"]["device_response_time"]["mean_us"] / 2


def test_addresses_past_the_device_are_an_error_or_an_explicit_wrap(tmp_path):
    t = tmp_path / "far.trace"
    t.write_text("0 0 0 8 1\n1000 0 4000000000 8 1\n")  # the second request is at 1.9 TB
    with pytest.raises(InvalidArgument, match=r"far\.trace:2: a read of 4096 bytes at byte 2048000000000 ends past"):
        replay(t, small())
    r = replay(t, small(), wrap=True)["flow"]
    assert r["all"]["requests"] == 2 and r["mapping"]["wrapped"] == 1
    r = replay(t, small(), options=TraceOptions(limit=1))["flow"]
    assert r["all"]["requests"] == 1
    shifted = replay(tmp_path / "far.trace", small(), options=TraceOptions(limit=1), offset="1m")
    assert shifted["flow"]["all"]["requests"] == 1


def test_damaged_traces_name_file_and_line(tmp_path):
    cases = {
        "bad-type.trace": ("0 0 0 8 1\n5 0 8 8 7\n", r"bad-type\.trace:2: type \"7\""),
        "short.trace": ("0 0 0 8 1\n5 0 8\n", r"short\.trace:2: expected 5 fields"),
        "binary.trace": (b"0 0 0 8 1\n\x00\xff\xfe garbage\n", r"binary\.trace:2: not UTF-8"),
        "huge.csv": ("1,h,0,Read,99999999999999999999999,4096,1\n", r"huge\.csv:1: Offset"),
        "noheader.iolog": ("/dev/x read 0 4096\n", r"noheader\.iolog:1: not a fio iolog"),
        "overlong.trace": ("0 0 0 8 1\n" + "7" * 70_000 + "\n", r"overlong\.trace:2: line longer than 65536 bytes"),
    }
    fmt = {"huge.csv": "msr", "noheader.iolog": "fio"}
    for name, (text, msg) in cases.items():
        p = tmp_path / name
        p.write_bytes(text if isinstance(text, bytes) else text.encode())
        with pytest.raises(InvalidArgument, match=msg):
            replay(p, small(), options=TraceOptions(format=fmt.get(name, "mqsim")))
    # Skipped and counted when asked.
    r = replay(tmp_path / "bad-type.trace", small(), options=TraceOptions(format="mqsim", skip_bad=True))
    assert r["trace"]["skipped"] == 1 and r["flow"]["all"]["requests"] == 1
    assert "line 2" in r["trace"]["first_skipped"]
    for what, msg in [(tmp_path / "missing.trace", "no such file"), (tmp_path, "is a directory")]:
        with pytest.raises(InvalidArgument, match=msg):
            replay(what, small(), options=TraceOptions(format="mqsim"))
    (tmp_path / "empty").write_text("")
    with pytest.raises(InvalidArgument, match="no requests"):
        replay(tmp_path / "empty", small())


@pytest.mark.parametrize("fmt, text, msg", [
    ("msr", "128166372003061629,h,0,Read,0\n", r":1: expected 7 comma-separated fields"),
    ("msr", "128166372003061629,h,0,Erase,0,4096,1\n", r":1: Type \"Erase\" is neither Read nor Write"),
    ("msr", "128166372003061629,h,0,Read,0,0,1\n", r":1: a request of 0 bytes"),
    ("msr", "128166372003061629,h,0,Read,-4096,4096,1\n", r":1: Offset \"-4096\""),
    ("msr", "128166372003061629,h,0,Write,0,4096.5,1\n", r":1: Size \"4096.5\""),
    ("fio", "fio version 2 iolog\n/dev/x add\n/dev/x explode 0 4096\n", r":3: unknown action \"explode\""),
    ("fio", "fio version 2 iolog\n/dev/x read 0\n", r":2: expected filename action \[offset length\]"),
    ("fio", "fio version 2 iolog\n/dev/x read 0 0\n", r":2: a read of 0 bytes"),
    ("fio", "fio version 3 iolog\nabc /dev/x read 0 4096\n", r":2: timestamp \(microseconds\) \"abc\""),
    ("fio", "fio version 9 iolog\n/dev/x read 0 4096\n", r":1: fio iolog version 9 is not supported"),
    ("blkparse", "  8,0  1  1  0.000000000  1  D   R x + 8 [fio]\n", r":1: sector \"x\""),
    ("blkparse", "  8,0  1  1  0.000000000  1  D   R 99999999999999999999 + 8 [fio]\n", r":1: sector"),
    ("blkparse", "  8,0  1  1  -1.000000000  1  D   R 0 + 8 [fio]\n", r":1: time \(seconds\) \"-1\""),
    ("nbdkit-log", "2026-11-28 18:25:09.722852 connection=1 Read id=1 offset=0x0 count=\n", r":1: a Read request line"),
    ("nbdkit-log", "2026-11-28 18:25:09.722852 connection=1 Read id=1 offset=0xZZ count=0x1000 ...\n", r":1: "),
    ("mqsim", "0.5 0 0 8 1\n", r":1: arrival time \"0.5\""),
    ("mqsim", "0 0 -8 8 1\n", r":1: start sector \"-8\""),
])
def test_damaged_lines_of_every_format_are_refused_with_file_and_line(tmp_path, fmt, text, msg):
    p = tmp_path / "damaged.trace"
    p.write_text(text)
    for reader in (lambda: read_trace(p, TraceOptions(format=fmt)),
                   lambda: replay(p, small(), options=TraceOptions(format=fmt))):
        with pytest.raises(InvalidArgument, match=r"damaged\.trace" + msg):
            reader()


def test_a_trace_that_yields_no_requests_is_refused_not_reported_empty(tmp_path):
    p = tmp_path / "t.trace"
    p.write_text("0 0 0 8 1\n1000 0 8 8 0\n")
    with pytest.raises(InvalidArgument, match=r"t\.trace: the trace holds no requests \(2 lines.*trace device \"7\""):
        replay(p, small(), options=TraceOptions(device="7"))
    (tmp_path / "notes.trace").write_text("# nothing here\n\n")
    with pytest.raises(InvalidArgument, match="holds no requests"):
        replay(tmp_path / "notes.trace", small(), options=TraceOptions(format="mqsim"))


def test_a_byte_order_mark_is_read_past(tmp_path):
    p = tmp_path / "bom.csv"
    p.write_text("\ufeffTimestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n"
                 "128166372003061629,h,0,Read,4096,4096,10\n", encoding="utf-8")
    assert detect(p) == "msr" and replay(p, small())["flow"]["all"]["requests"] == 1


def test_wrong_types_and_ranges_name_the_argument(tmp_path):
    good = tmp_path / "good.trace"
    good.write_text("0 0 0 8 1\n1000 0 8 8 0\n")
    for call, msg in [
        (lambda: read_trace(42), "trace must be a path"),
        (lambda: read_trace(None), "trace must be a path"),
        (lambda: read_trace(good, "mqsim"), "options must be a nearflash.traces.TraceOptions"),
        (lambda: detect(None), "trace must be a path"),
        (lambda: detect(tmp_path), "is a directory"),
        (lambda: convert_trace(good, None, "fio"), "dst must be a path"),
        (lambda: convert_trace(good, tmp_path / "o", 3), "to must be one of"),
        (lambda: convert_trace(good, tmp_path / "o", "fio", sector_size=2**64), "sector_size must be a positive"),
        (lambda: convert_trace(good, tmp_path, "fio"), "cannot write it"),
        (lambda: replay(None, small()), "trace must be a path"),
        (lambda: replay(good, "cosmos-plus"), "device must be a nearflash.DeviceSetup"),
        (lambda: replay(good, small(), options={"format": "mqsim"}), "options must be a nearflash.traces.TraceOptions"),
        (lambda: replay(good, small(), latencies=42), "latencies must be a path"),
        (lambda: replay(good, small(), latencies=tmp_path), "cannot write it"),
        (lambda: replay(good, small(), offset=2**70), "below 2\\^64"),
        (lambda: replay(good, small(), mode="closed", iodepth=2**40), "at most 4294967295"),
        (lambda: replay(good, small(), options=TraceOptions(repeat=2**32)), "repeat must be a positive integer"),
        (lambda: replay(good, small(), options=TraceOptions(limit=True)), "limit must be a positive integer"),
        (lambda: replay(good, small(), options=TraceOptions(sector_size=2**64)), "sector_size must be a positive"),
        (lambda: replay(good, DeviceSetup(preset=3)), "preset must be a preset's name"),
        (lambda: replay(good, small(seed=-1)), "seed must be an integer >= 0"),
        (lambda: replay(good, small(path=7)), "path must be a path"),
    ]:
        with pytest.raises(InvalidArgument, match=msg):
            call()
    # Arrival times scaled past the simulated clock are an error naming the line, never clamped into it.
    with pytest.raises(InvalidArgument, match=r"flow .replay.: line 2: arrival at 1000 ns x time scale 1e300 is past"):
        replay(good, small(), time_scale=1e300)


@pytest.mark.parametrize("kw, msg", [
    ({"mode": "sideways"}, "mode must be 'open'"),
    ({"time_scale": 0}, "time_scale must be a positive number"),
    ({"time_scale": float("nan")}, "time_scale must be a positive number"),
    ({"mode": "closed", "iodepth": 0}, "iodepth must be an integer >= 1"),
    # found by the audit: the option of the other mode was silently ignored
    ({"mode": "closed", "time_scale": 0.5}, "time_scale and rate apply to open-loop flows"),
    ({"iodepth": 8}, "iodepth applies to closed-loop flows"),
    ({"offset": -4096}, "offset must be a number of bytes"),
    ({"offset": "lots"}, "not a size"),
    ({"wrap": "yes"}, "wrap must be true or false"),
    ({"queue_depth": 0}, "queue_depth must be an integer >= 1"),
    ({"queue_depth": 100_000}, "queue depth 100000 exceeds the device's maximum of 1023"),
    ({"options": TraceOptions(format="csv")}, "format must be one of"),
    ({"options": TraceOptions(sector_size=0)}, "sector_size must be a positive integer"),
    ({"options": TraceOptions(time_unit="ms")}, "time_unit must be one of"),
    ({"options": TraceOptions(blk_event="C")}, "blk_event must be"),
    ({"options": TraceOptions(repeat=0)}, "repeat must be a positive integer"),
    ({"options": TraceOptions(device=3)}, "device must be a string"),
])
def test_wrong_replay_options_are_refused(kw, msg):
    with pytest.raises(NearflashError, match=msg):
        replay(FIXTURES / "sqlite.trace", small(fill="none"), **kw)


def test_wrong_device_setups_are_refused():
    for setup, msg in [(small(fill="half"), "fill must be one of"), (small(fill_size=1.5), r"share of the capacity"),
                       (small(fill_size="lots"), "not a size"), (small(data="yes"), "data must be true or false")]:
        with pytest.raises(InvalidArgument, match=msg):
            replay(FIXTURES / "sqlite.trace", setup)


def test_replay_cli_prints_bench_like_figures_and_writes_latencies(tmp_path, capsys):
    lat = tmp_path / "lat.csv"
    args = [str(FIXTURES / "mke2fs.blktrace.txt"), *[a for k, v in SMALL.items() for a in ("--set", f"{k}={v}")]]
    rc, out, err = cli(capsys, "replay", *args, "--latencies", str(lat))
    assert rc == 0, err
    assert "blkparse, 1,465 requests" in out and "lat us p50" in out and "simulated requests per second" in out
    assert len(lat.read_text().splitlines()) == 1466
    rc, out, err = cli(capsys, "replay", *args, "--json", "--mode", "closed", "--iodepth", "4")
    j = json.loads(out)
    assert j["flow"]["all"]["requests"] == 1465 and j["report"]["ops"]["read"]["count"] > 0
    for bad, msg in [(["--mode", "open", "--iodepth", "0"], "must be at least 1"),
                     (["--time-scale", "-1"], "time_scale must be a positive number"),
                     (["--format", "xml"], "invalid choice"),
                     (["--mode", "closed", "--time-scale", "2"], "time_scale and rate apply to open-loop flows"),
                     # found by the audit: --iodepth without --mode closed was silently ignored
                     (["--iodepth", "4"], "iodepth applies to closed-loop flows")]:
        rc, out, err = cli(capsys, "replay", *args, *bad)
        assert rc == 2 and msg in err and "Traceback" not in err, (bad, err)


def test_replay_trace_and_flows_cli_refuse_damaged_input_without_a_traceback(tmp_path, capsys):
    bad, toml = tmp_path / "bad.trace", tmp_path / "bad.toml"
    bad.write_text("0 0 0 8 7\n")
    toml.write_text("[[flow]\n")
    for args, msg in [(["replay", str(tmp_path / "none.trace")], "no such file"),
                      (["replay", str(bad)], "bad.trace:1: type"),
                      (["replay", str(tmp_path)], "is a directory"),
                      (["replay", str(bad), "--skip-bad"], "holds no requests"),
                      (["replay", str(bad), "--offset", "99999999999999999999999"], "below 2^64"),
                      (["trace", "info", str(bad)], "bad.trace:1: type"),
                      (["trace", "convert", str(bad), str(tmp_path / "out.iolog"), "--to", "fio"], "bad.trace:1"),
                      (["flows", str(toml)], "not valid TOML"),
                      (["flows", str(tmp_path / "none.toml")], "no scenario file")]:
        rc, out, err = cli(capsys, *args)
        assert rc == 2 and msg in err and "Traceback" not in err, (args, err)
    assert not (tmp_path / "out.iolog").exists(), "a refused conversion writes nothing"


def test_trace_info_and_convert_cli(tmp_path, capsys):
    rc, out, err = cli(capsys, "trace", "info", str(FIXTURES / "sqlite.trace"))
    assert rc == 0 and "mqsim" in out and "requests" in out, err
    q = tmp_path / "q.trace"
    rc, out, err = cli(capsys, "trace", "convert", str(FIXTURES / "qemu-img.iolog"), str(q), "--to", "mqsim")
    assert rc == 0 and "flushes left out" in out and "trims left out" in out, out
    assert detect(q) == "mqsim"
    for args, msg in [([str(q), str(q), "--to", "fio"], "is the input trace"),
                      ([str(q), str(tmp_path / "x"), "--to", "nbdkit-log"], "invalid choice"),
                      ([str(q), str(tmp_path / "nodir" / "x"), "--to", "fio"], "cannot write it")]:
        rc, out, err = cli(capsys, "trace", "convert", *args)
        assert rc == 2 and msg in err, (args, err)
    # MSR from an nbdkit log: the recording's wall-clock date and each request's response time.
    msr = tmp_path / "q.csv"
    convert_trace(FIXTURES / "qemu-img.nbdkit.log", msr, "msr")
    first = msr.read_text().splitlines()[0].split(",")
    assert int(first[0]) > 133_000_000_000_000_000 and int(first[6]) > 0  # a 2022+ filetime; a response time


def test_python_api_is_exported():
    assert nearflash.replay is replay
    assert callable(nearflash.run_flows) and callable(nearflash.read_trace) and callable(nearflash.convert_trace)


def test_a_failed_replay_leaves_the_latencies_file_as_it_was(tmp_path):
    """Found by the audit: a replay that stopped at a bad line truncated an existing --latencies file to its header
    (or left the rows of the requests before the bad line): the file is now written under a temporary name and put
    in place only when the run succeeds."""
    lat = tmp_path / "lat.csv"
    lat.write_text("an earlier run's results\n")
    bad = tmp_path / "past.trace"
    bad.write_text("0 0 0 8 1\n5 0 8 8 0\n7 0 999999999999 8 1\n")  # line 3 ends past the device
    for fill in ("none", "sequential"):
        with pytest.raises(InvalidArgument, match="past.trace:3"):
            replay(bad, small(fill=fill), latencies=lat)
        assert lat.read_text() == "an earlier run's results\n", fill
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lat.csv", "past.trace"], "no temporary file is left"
    good = tmp_path / "good.trace"
    good.write_text("0 0 0 8 1\n5 0 8 8 0\n")
    replay(good, small(), latencies=lat)
    assert len(lat.read_text().splitlines()) == 3 and sorted(p.name for p in tmp_path.iterdir()) == [
        "good.trace", "lat.csv", "past.trace"]


def test_a_refused_replay_leaves_the_image_as_it_was(tmp_path):
    """Found by the audit: a replay on an image whose trace held a request past the device on line 3 wrote lines 1
    and 2 into the image before it stopped; every request is now checked before the run."""
    from nearflash import Device

    img = tmp_path / "img"
    with Device(img, overrides=SMALL, materialise=True) as dev:
        dev.write(0, bytes([0x5A]) * 8192)
        end = dev.capacity_bytes
    trace = tmp_path / "t.trace"
    trace.write_text(f"0 0 0 16 0\n5 0 16 8 0\n7 0 {end // 512} 8 1\n")  # writes over LBAs 0-2, then past the end
    with pytest.raises(InvalidArgument, match="t.trace:3"):
        replay(trace, DeviceSetup(path=str(img), fill="none", data=True))
    with Device(img, materialise=True) as dev:
        assert bytes(dev.read(0, 2)) == bytes([0x5A]) * 8192 and dev.report().ftl["host_sectors_written"] == 0
