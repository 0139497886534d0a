"""Unmodified Debian NBD clients against `nearflash serve`: nbdinfo, nbdcopy with a real ext4 image, qemu-img and
qemu-io, fio's nbd engine. Every request must reach the device as its NVMe commands (counted in the device's report)."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from nbd_helpers import nearflash_cli, need, qemu_io, run
from nbd_helpers import image, serve  # noqa: F401  (fixtures)
from nearflash import Device

MIB = 1 << 20


def test_nbdinfo_sees_the_advertised_size_and_features(image, serve):
    need("nbdinfo")
    s = serve(image)
    info = json.loads(run(["nbdinfo", "--json", s.uri]).stdout)
    exp = info["exports"][0]
    st = s.status()
    assert exp["export-size"] == st["lbas"] * st["lba_bytes"] == 13104 * 4096
    for flag in ("can_flush", "can_fua", "can_trim", "can_zero", "can_fast_zero", "can_multi_conn"):
        assert exp[flag] is True, flag
    assert exp["is_read_only"] is False and exp["is_rotational"] is False


def test_tcp_port_on_the_loopback(image, serve):
    """`--port` on 127.0.0.1. nbdkit 1.32 cannot be told port 0 and name the one it took, so the test picks a port
    free a moment ago; another process may take it meanwhile (the server then refuses to start: "Address already in
    use"), and the test picks again, a few times at most."""
    need("nbdinfo", "qemu-io")
    for attempt in range(5):
        with socket.socket() as probe:  # a port free a moment ago
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        try:
            s = serve(image, port=port)
            break
        except AssertionError as e:
            if "Address already in use" not in str(e) or attempt == 4:
                raise
    assert run(["nbdinfo", "--size", s.uri]).stdout.strip() == str(13104 * 4096)
    qemu_io(s.uri, "write -P 0x7e 1M 128k", "read -P 0x7e 1M 128k")
    assert s.status()["address"] == f"nbd://127.0.0.1:{port}"


def _ext4_image(tmp_path: Path) -> bytes:
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    rng = np.random.default_rng(7)
    for i in range(20):
        (tree / "sub" / f"blob{i}.bin").write_bytes(rng.bytes(int(rng.integers(1, 400_000))))
    (tree / "README").write_text("a real ext4 file system, copied through an emulated SSD\n" * 100)
    img = tmp_path / "ext4.img"
    run(["mke2fs", "-q", "-F", "-t", "ext4", "-d", str(tree), str(img), "16M"])
    return img.read_bytes()


def test_nbdcopy_ext4_image_in_and_back_bit_identical_across_restart(image, serve, tmp_path):
    need("nbdcopy", "mke2fs", "e2fsck")
    src = _ext4_image(tmp_path)
    (tmp_path / "in.img").write_bytes(src)
    s = serve(image)
    run(["nbdcopy", "--flush", str(tmp_path / "in.img"), s.uri])
    # Closed: the loop has run on to its requests' completions, which the report counts (pace none replies at
    # submission, so a Flush counted in the requests may still be ahead of the loop).
    st = s.wait_status(lambda st: st["requests"]["flush"] >= 1 and st["requests"]["open_connections"] == 0)
    assert st["requests"]["bytes_written"] >= len(src) // 2  # zero runs may go as Write Zeroes
    assert st["report"]["ops"]["write"]["count"] >= st["requests"]["write"] > 0
    s.stop()  # the data must outlive the server
    s = serve(image)
    out = tmp_path / "out.img"
    run(["nbdcopy", s.uri, str(out)])
    back = out.read_bytes()
    assert len(back) == 13104 * 4096
    assert back[: len(src)] == src, "ext4 image differs after the round trip"
    assert not any(back[len(src):]), "the rest of a fresh device reads as zeroes"
    out.write_bytes(back[: len(src)])
    run(["e2fsck", "-f", "-n", str(out)])


def test_qemu_io_writes_unaligned_fua_zeroes_and_discards(image, serve):
    need("qemu-io", "qemu-img")
    s = serve(image)
    qemu_io(s.uri,
            "write -P 0xab 0 64k", "write -f -P 0x5c 64k 16k",         # plain and FUA writes
            "write -P 0xcd 512 1024",                                    # inside one 4 KiB block: read-modify-write
            "read -P 0xab 0 512", "read -P 0xcd 512 1024", "read -P 0xab 1536 64000", "read -P 0x5c 64k 16k",
            "write -P 0xee 128k 64k", "write -z 128k 32k", "write -z -u 160k 32k",   # Write Zeroes, may deallocate
            "read -P 0 128k 64k", "discard 0 4k", "read -P 0 0 4k", "read -P 0xab 4k 4k", "flush")
    st = s.wait_status(lambda st: st["requests"]["flush"] >= 1 and st["requests"]["zero"] >= 2
                       and st["requests"]["open_connections"] == 0)  # closed: the report has the Flush (above)
    r = st["requests"]
    assert r["fua_writes"] >= 1 and r["trim"] >= 1 and r["errors"] == 0
    assert st["report"]["ops"]["flush"]["count"] >= 1
    info = json.loads(run(["qemu-img", "info", "--output=json", s.uri]).stdout)
    assert info["virtual-size"] == 13104 * 4096


def test_qemu_img_convert_and_compare(image, serve, tmp_path):
    need("qemu-img")
    src = tmp_path / "rand.raw"
    src.write_bytes(np.random.default_rng(3).bytes(3 << 20))
    s = serve(image)
    run(["qemu-img", "convert", "-n", "-f", "raw", "-O", "raw", str(src), s.uri])
    # Identical content; the longer export must read as zeroes past the file's end.
    run(["qemu-img", "compare", "-f", "raw", "-F", "raw", str(src), s.uri])
    (tmp_path / "other.raw").write_bytes(b"\x01" + src.read_bytes()[1:])
    p = run(["qemu-img", "compare", "-f", "raw", "-F", "raw", str(tmp_path / "other.raw"), s.uri], check=False)
    assert p.returncode == 1, "a one-byte difference must be seen"


def test_fio_nbd_random_reads_match_the_device_report(image, serve, tmp_path):
    need("fio")
    s = serve(image)
    before = s.status()["report"]["ops"].get("read", {}).get("count", 0)
    out = tmp_path / "fio.json"
    run(["fio", "--name=randread", "--ioengine=nbd", f"--uri={s.uri}", "--rw=randread", "--bs=4k", "--size=16m",
         "--number_ios=400", "--iodepth=8", "--output-format=json", f"--output={out}"])
    ios = json.loads(out.read_text())["jobs"][0]["read"]["total_ios"]
    assert ios == 400
    st = s.wait_status(lambda st: st["requests"]["open_connections"] == 0 and st["requests"]["read"] >= ios)
    assert st["requests"]["read"] == ios
    assert st["report"]["ops"]["read"]["count"] - before == ios
    assert st["report"]["ops"]["read"]["bytes"] >= ios * 4096


def test_read_only_export_refuses_writes_and_keeps_data(image, serve, tmp_path):
    need("qemu-io", "nbdinfo", "nbdcopy")
    s = serve(image)
    qemu_io(s.uri, "write -P 0x42 0 8k", "flush")
    s.stop()
    s = serve(image, "--read-only")
    assert json.loads(run(["nbdinfo", "--json", s.uri]).stdout)["exports"][0]["is_read_only"] is True
    p = qemu_io(s.uri, "write -P 0x99 0 4k", check=False)
    assert p.returncode != 0 and "Permission denied" in p.stderr  # qemu will not open it for writing
    (tmp_path / "x").write_bytes(b"\x99" * 8192)
    p = run(["nbdcopy", str(tmp_path / "x"), s.uri], check=False)
    assert p.returncode != 0
    qemu_io(s.uri, "read -P 0x42 0 8k", readonly=True)
    assert s.status()["requests"]["write"] == 0


def test_info_on_a_served_device(image, serve):
    need("qemu-io")
    s = serve(image)
    qemu_io(s.uri, "write -P 0x11 0 32k")
    # Identify before serving, and the I/O queue's creation at the first request. Closed: the next client reuses the
    # queue (one connecting while the first is still open on the server gets a queue of its own, two more commands).
    admin = s.wait_status(lambda st: st["requests"]["write"] >= 1 and st["requests"]["open_connections"] == 0)
    admin = admin["report"]["ops"]["admin"]["count"]
    qemu_io(s.uri, "read -P 0x11 0 32k", "flush")
    s.wait_status(lambda st: st["requests"]["flush"] >= 1)
    time.sleep(0.5)  # several status rewrites: none may issue a command (it would move the virtual clock)
    assert s.status()["report"]["ops"]["admin"]["count"] == admin

    p = nearflash_cli("info", str(image))
    assert p.returncode == 0, p.stderr
    assert f"served by pid {s.proc.pid}" in p.stdout and "NBD requests" in p.stdout and "read" in p.stdout
    st = json.loads(nearflash_cli("info", str(image), "--json").stdout)
    assert st["state"] == "serving" and st["requests"]["write"] >= 1 and st["now_ns"] > 0
    p = nearflash_cli("serve", str(image), "--unix", str(s.sock) + "-2")  # a second server on the same image
    assert p.returncode == 2 and f"is open in another process (served by pid {s.proc.pid} at {s.uri})" in p.stderr
    s.stop()
    assert not (image / "serve.json").exists() and not (image / "serve.pid").exists()
    p = nearflash_cli("info", str(image), "--json")
    assert p.returncode == 0 and "identify" in json.loads(p.stdout), "a stopped device opens as usual"
    assert os.path.getsize(image / "data.bin") > 0


def test_attached_extension_sees_the_clients_commands(image, serve, tmp_path):
    """RecSSD (serve_host_reads) takes every Read into its page buffer: NBD reads must reach it as NVMe Reads, and
    data written over NBD must not be served stale from its buffer."""
    need("fio", "qemu-io")
    s = serve(image, "--ext", "recssd")
    assert s.status()["extensions"] == ["recssd"]
    qemu_io(s.uri, "write -P 0x31 0 64k", "read -P 0x31 0 64k", "write -P 0x32 0 64k", "read -P 0x32 0 64k")
    out = tmp_path / "fio.json"
    run(["fio", "--name=r", "--ioengine=nbd", f"--uri={s.uri}", "--rw=randread", "--bs=4k", "--size=8m",
         "--number_ios=200", "--iodepth=4", "--output-format=json", f"--output={out}"])
    st = s.wait_status(lambda st: st["requests"]["open_connections"] == 0 and st["requests"]["read"] >= 202)
    reads = st["requests"]["read"]
    assert st["report"]["extensions"]["recssd"]["stats"]["host_reads"] == reads == st["report"]["ops"]["read"]["count"]
    assert st["report"]["extensions"]["recssd"]["page_buffer"]["hits"] > 0


@pytest.mark.parametrize("seed", [1, 2])
def test_random_writes_zeroes_and_discards_match_a_model(image, serve, tmp_path, seed):
    """A seeded mix of byte-granular writes and Write Zeroes and block-aligned discards, checked byte for byte
    against a model of the disk (partial blocks go through nbdkit's read-modify-write)."""
    need("qemu-io", "nbdcopy")
    rng = random.Random(seed)
    region = 2 * MIB
    model = bytearray(region)
    cmds = []
    for _ in range(120):
        kind = rng.random()
        if kind < 0.6:
            off, n, pat = rng.randrange(region - 1), rng.randint(1, 96 << 10), rng.randint(1, 255)
            n = min(n, region - off)
            cmds.append(f"write -P {pat} {off} {n}")
            model[off : off + n] = bytes([pat]) * n
        elif kind < 0.8:
            off = rng.randrange(region - 1)
            n = min(rng.randint(1, 64 << 10), region - off)
            unmap = "-u " if off % 4096 == 0 and n % 4096 == 0 else ""
            cmds.append(f"write -z {unmap}{off} {n}")
            model[off : off + n] = bytes(n)
        else:
            off, n = rng.randrange(region // 4096) * 4096, rng.randint(1, 16) * 4096
            n = min(n, region - off)
            cmds.append(f"discard {off} {n}")
            model[off : off + n] = bytes(n)  # deallocated blocks read as zeroes (Identify DLFEAT)
    s = serve(image)
    qemu_io(s.uri, *cmds, "flush")
    out = tmp_path / "back"
    run(["nbdcopy", s.uri, str(out)])
    back = out.read_bytes()[:region]
    if back != bytes(model):
        first = next(i for i in range(region) if back[i] != model[i])
        raise AssertionError(f"byte {first} differs: device {back[first]}, model {model[first]}")
    st = s.status()["requests"]
    assert st["errors"] == 0 and st["zero"] > 0 and st["trim"] > 0


def test_info_ignores_a_damaged_or_foreign_status_file(image, serve):
    """A status file that is damaged, left by a dead server, or names a process that is not this image's server does
    not pass for a served device: `nearflash info` says the image is in use, without a traceback."""
    from nearflash import Device

    s = serve(image)
    good = s.status()
    s.stop()
    damaged = ["{not json", "[1, 2]", '{"pid": 1}', json.dumps({**good, "requests": {"read": "many"}}),
               json.dumps({**good, "pid": 2 ** 22 + 7}),  # no such process
               json.dumps({**good, "pid": os.getpid()})]  # alive, but not the server
    with Device(image):  # the image held by another process (this one), as the server held it
        for text in damaged:
            (image / "serve.json").write_text(text)
            p = nearflash_cli("info", str(image))
            assert p.returncode == 2 and "is open in another process" in p.stderr, (text[:40], p.stderr)
            assert "Traceback" not in p.stderr and "served by" not in p.stdout


def test_the_device_sees_the_clients_queue_depth(image, serve, tmp_path):
    """Thread model parallel, pace none (the default: replies at submission, the client's reactions paired with its
    completions): fio's requests in flight are in the device together in virtual time, at its depth (the
    time-weighted mean of its commands in the device: 15.8 of 16 measured; the bound was 12 while each completion
    waited for a round trip), none submitted in the event loop's past.

    The plugin takes fio's first 16 requests for one burst (its depth) if they arrive within the burst window of each
    other (10 ms: a wall-clock gap, which a loaded machine outlasted in 5 of 20 runs, fio then seen at depth 3-15);
    with one worker thread per request fio keeps in flight, the burst is complete when every thread holds one, and a
    1 s window only covers the scheduling gaps (0 of 20 runs split)."""
    need("fio")
    s = serve(image, plugin=({"threads": 16}, ["burst_us=1000000"]))
    out = tmp_path / "fio.json"
    run(["fio", "--name=r", "--ioengine=nbd", f"--uri={s.uri}", "--rw=randread", "--bs=4k", "--size=16m",
         "--number_ios=600", "--iodepth=16", "--output-format=json", f"--output={out}"])
    st = s.wait_status(lambda st: st["requests"]["open_connections"] == 0 and st["requests"]["read"] >= 600)
    p = st["pacing"]
    assert st["report"]["ops"]["read"]["count"] == 600 and p["max_in_flight_at_submission"] == 16, p
    assert p["pace"] == "none" and p["mean_queue_depth"] > 0.95 * 16 and p["late_submissions"] == 0, p
    assert p["late_submissions"] == st["report"]["sched"]["late_submissions"]
    assert abs(p["last_connection"]["mean_queue_depth"] - p["mean_queue_depth"]) < 1.0, p
    info = nearflash_cli("info", str(image)).stdout
    assert "pace none: the device saw queue depth" in info and "in virtual time" in info, info


def _thread_policies(pid: int) -> list[int]:
    """The scheduling policy of each of a process's threads (0: normal, 3: batch)."""
    out = []
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            text = (t / "sched").read_text()
        except OSError:  # the thread ended meanwhile
            continue
        out += [int(line.split(":")[1]) for line in text.splitlines() if line.startswith("policy")]
    return out


@pytest.mark.parametrize("pace,batch", [("none", True), ("realtime", False)])
def test_worker_threads_inherit_batch_scheduling_under_pace_none(image, serve, tmp_path, pace, batch):
    """Pace none marks a connection's thread as batch work when the connection opens, before nbdkit starts its worker
    threads, which inherit the policy (no per-request check): while fio's connection is open, its 8 workers and the
    connection's thread are SCHED_BATCH; under realtime none are. nbdkit's main thread and the status thread never."""
    need("fio")
    if not Path("/proc/self/sched").exists():
        pytest.skip("no /proc/PID/sched here")
    s = serve(image, "--pace", pace, "--threads", "8")
    fio = subprocess.Popen(["fio", "--name=r", "--ioengine=nbd", f"--uri={s.uri}", "--rw=randread", "--bs=4k",
                            "--size=16m", "--iodepth=4", "--time_based", "--runtime=3", "--output-format=json",
                            f"--output={tmp_path / 'fio.json'}"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # The threads are looked at while fio's connection is open, straight from /proc, until they are all there (the
    # connection's thread and its 8 workers beside nbdkit's main and status threads), and under pace none until
    # the 9 are batch; a wrong policy is then seen as the last sample when fio ends. Before, the test read them once
    # after the status file showed a read, and that file is rewritten a few times a second: it lagged up to 0.4 s
    # behind fio's 3 s run under load. The deadline only guards against a hang.
    policies: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while fio.poll() is None and time.monotonic() < deadline:
            policies = _thread_policies(s.proc.pid)
            if len(policies) >= 8 + 3 and policies.count(3) == (8 + 1 if batch else 0):
                break
            time.sleep(0.01)
    finally:
        _, err = fio.communicate(timeout=120)
    assert fio.returncode == 0, err
    assert len(policies) >= 8 + 3, f"fio's connection's threads never seen: {policies}"
    assert policies.count(3) == (8 + 1 if batch else 0), policies
    assert policies.count(0) == len(policies) - policies.count(3), policies


def test_realtime_pace_holds_replies_for_the_modelled_latency(tmp_path, serve):
    """A 5 ms read takes at least 5 ms of the client's wall time; the status counts replies and late ones."""
    need("qemu-io")
    from nbd_helpers import NBD_DEVICE

    img = tmp_path / "slow"
    Device(img, overrides={**NBD_DEVICE, "t_read": "5ms"}).close()
    s = serve(img, "--pace", "realtime")
    qemu_io(s.uri, "write -P 0x21 0 64k", "flush")
    t = time.monotonic()
    qemu_io(s.uri, *[f"read -P 0x21 {i * 4}k 4k" for i in range(8)])
    assert time.monotonic() - t >= 8 * 0.005, "eight 5 ms reads, one at a time"
    st = s.wait_status(lambda st: st["requests"]["read"] >= 8 and st["requests"]["open_connections"] == 0)
    p = st["pacing"]
    assert p["pace"] == "realtime" and p["replies"] >= 10 and 0 <= p["late"] <= p["replies"]
    assert st["report"]["ops"]["read"]["latency"]["min_us"] >= 5000


def test_a_logged_session_replays_as_recorded(image, serve, tmp_path):
    """--log records what the device was given (nbdkit's log filter); replaying the log issues the same requests."""
    need("qemu-io")
    import csv

    from nearflash.flows import DeviceSetup, replay

    log = tmp_path / "session.log"
    s = serve(image, "--log", str(log))
    qemu_io(s.uri, "write -P 0x5 0 96k", "write -z 128k 16k", "discard 64k 8k", "read 0 96k", "flush")
    s.stop()
    lat = tmp_path / "lat.csv"
    r = replay(log, DeviceSetup(overrides={"channels": 1, "chips_per_channel": 1, "blocks_per_plane": 64,
                                           "pages_per_block": 32, "over_provisioning": "20%"}),
               mode="closed", iodepth=1, latencies=lat)
    assert r["trace"]["format"] == "nbdkit-log" and r["flow"]["all"]["errors"] == 0
    with lat.open() as f:
        got = [(row["op"], int(row["offset"]), int(row["bytes"])) for row in csv.DictReader(f)]
    assert ("write", 0, 96 << 10) in got and ("trim", 64 << 10, 8 << 10) in got and ("read", 0, 96 << 10) in got
    assert got[-1] == ("flush", 0, 0) and len(got) == r["trace"]["requests"]
