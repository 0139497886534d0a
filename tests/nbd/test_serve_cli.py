"""`nearflash serve` with wrong values, as a hostile user would type them: a clear message, exit status 2, no
traceback, and nothing created or changed (no socket, no image, no pid or status file, the image's files as before)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from nbd_helpers import nearflash_cli, need, snapshot
from nbd_helpers import image  # noqa: F401  (fixtures)
from nearflash import Device
from nearflash.errors import InvalidArgument
from nearflash.nbd import ServeOptions, command, launch


def refused(args: list[str], image: Path, msg: str, watch: Path) -> None:
    before_img, before_dir = snapshot(image), snapshot(watch)
    p = nearflash_cli("serve", *args)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert msg in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert snapshot(image) == before_img, "a refused serve changed the image"
    assert snapshot(watch) == before_dir, "a refused serve created something"


@pytest.mark.parametrize("extra, msg", [
    (["--port", "0"], "--port must be in 1..65535"),
    (["--port", "70000"], "--port must be in 1..65535"),
    (["--port", "-1"], "--port must be in 1..65535"),
    (["--port", "abc"], "invalid int value"),
    (["--port", "10809", "--unix", "SOCK"], "not allowed with argument"),
    (["--unix", "NODIR/s.sock"], "does not exist"),
    (["--unix", "SOCK" + "x" * 120], "at most 107"),
    (["--bind", "localhost:80"], "--bind must be an IP address"),
    (["--bind", "999.1.1.1"], "--bind must be an IP address"),
    (["--ext", "nope"], "unknown extension 'nope'"),
    (["--ext", "issd:[1, 2]"], "must be a JSON object"),
    (["--ext", "issd:{bad"], "must be a JSON object"),
    (["--seed", "x"], "invalid int value"),
    (["--ext", 'recssd:{"ftl_core": 99}'], "ftl_core 99 but the controller has"),
    (["--ext", 'recssd:{"no_such_param": 1}'], "no_such_param"),
    (["--ext", "recssd", "--ext", "recssd"], "already attached"),
    (["--pace", "fast"], "invalid choice: 'fast'"),
    (["--threads", "0"], "--threads must be in 1..1024"),
    (["--threads", "5000"], "--threads must be in 1..1024"),
    (["--threads", "x"], "invalid int value"),
    (["--reaction-lag", "0"], "--reaction-lag must be in 1..1024"),
    (["--serial", "--reaction-lag", "2"], "--reaction-lag applies to --pace none without --serial"),
    (["--serial", "--overlap"], "not allowed with argument"),
    (["--log", "NODIR/log.txt"], "--log: directory"),
])
def test_wrong_flag_values_are_refused_before_anything_happens(image, tmp_path, extra, msg):
    watch = tmp_path / "w"
    watch.mkdir()
    extra = [a.replace("NODIR", str(watch / "missing")).replace("SOCK", str(watch / "s")) for a in extra]
    refused([str(image), *extra], image, msg, watch)


def test_existing_file_at_the_socket_path_is_not_replaced(image, tmp_path):
    victim = tmp_path / "precious"
    victim.write_text("keep me")
    refused([str(image), "--unix", str(victim)], image, "already exists (a file)", tmp_path)
    assert victim.read_text() == "keep me"
    # found by the audit: a directory there was called "a file"
    refused([str(image), "--unix", str(tmp_path)], image, "already exists (a directory)", tmp_path)


def test_port_in_use_is_refused(image, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        refused([str(image), "--port", str(port)], image, f"--port {port} on 127.0.0.1: Address already in use",
                tmp_path)


def test_missing_image_is_not_created(tmp_path):
    target = tmp_path / "nothing-here"
    refused([str(target), "--unix", str(tmp_path / "s")], tmp_path, "is not a device image", tmp_path)
    assert not target.exists()


def test_directory_without_an_image_is_left_alone(tmp_path):
    d = tmp_path / "empty"
    d.mkdir()
    (d / "notes.txt").write_text("x")
    refused([str(d), "--unix", str(tmp_path / "s")], d, "is not a device image", tmp_path)


def test_image_in_use_is_refused(image, tmp_path):
    with Device(image):
        p = nearflash_cli("serve", str(image), "--unix", str(tmp_path / "s"))
    assert p.returncode == 2 and "is open in another process" in p.stderr, p.stderr
    assert not (tmp_path / "s").exists() and not (image / "serve.pid").exists()


def test_a_missing_or_foreign_plugin_library_is_explained(image, tmp_path, monkeypatch):
    need("nbdkit")
    before = snapshot(image)
    monkeypatch.setenv("NEARFLASH_NBD_PLUGIN", str(tmp_path / "nope.so"))
    with pytest.raises(InvalidArgument, match=r"NEARFLASH_NBD_PLUGIN=.*nope\.so: no such file"):
        command(ServeOptions(str(image), unix=str(tmp_path / "s")))
    (tmp_path / "fake.so").write_bytes(b"\x7fELF not really")
    monkeypatch.setenv("NEARFLASH_NBD_PLUGIN", str(tmp_path / "fake.so"))
    with pytest.raises(InvalidArgument, match="nbdkit cannot load the NBD plugin"):
        command(ServeOptions(str(image), unix=str(tmp_path / "s")))
    assert snapshot(image) == before and not (tmp_path / "s").exists()


def test_wrong_pace_threads_and_log_from_python(image, tmp_path):
    for kw, msg in [({"pace": "turbo"}, "--pace must be one of none, realtime"), ({"threads": True}, "--threads"),
                    ({"serial": "yes"}, "--serial must be True or False"), ({"serial": 1}, "--serial must be"),
                    ({"serial": True, "pace": "realtime"}, "--serial applies to --pace none only"),
                    ({"reaction_lag": 0}, r"--reaction-lag must be in 1\.\.1024, got 0"),
                    ({"reaction_lag": 1025}, "--reaction-lag must be in"), ({"reaction_lag": 2.0}, "--reaction-lag must"),
                    ({"reaction_lag": True}, "--reaction-lag must be in"), ({"reaction_lag": "4"}, "--reaction-lag must"),
                    ({"reaction_lag": 4, "serial": True}, "--reaction-lag applies to --pace none without --serial"),
                    ({"reaction_lag": 4, "pace": "realtime"}, "--reaction-lag applies to --pace none"),
                    ({"threads": 0}, "--threads must be in 1..1024"), ({"log": str(tmp_path)}, "is a directory")]:
        with pytest.raises(InvalidArgument, match=msg):
            command(ServeOptions(str(image), unix=str(tmp_path / "s"), **kw))


def test_missing_nbdkit_is_explained(image, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(InvalidArgument, match="nbdkit is not installed"):
        command(ServeOptions(str(image), unix=str(tmp_path / "s")))


def test_command_loads_the_plugin_in_parallel_behind_the_blocksize_filter(image, tmp_path):
    need("nbdkit")
    argv, env, uri = command(ServeOptions(str(image), unix=str(tmp_path / "s"), read_only=True, pace="realtime",
                                          threads=16, log=str(tmp_path / "log")))
    assert uri == f"nbd+unix:///?socket={tmp_path / 's'}"
    assert "--readonly" in argv and "--filter=blocksize" in argv and "minblock=4096" in argv
    assert argv.index("--filter=blocksize") < argv.index("--filter=log"), "the log records what the device is given"
    assert argv[argv.index("--threads") + 1] == "16" and "threads=16" in argv and "pace=realtime" in argv
    assert f"logfile={tmp_path / 'log'}" in argv and not any(a.startswith("reaction_") for a in argv)
    argv, _, _ = command(ServeOptions(str(image), unix=str(tmp_path / "s")))
    assert "reaction_us=100000" in argv, "pace none holds the loop for reactions by default"
    assert not any(a.startswith("reaction_lag=") for a in argv), "the plugin's default lag"
    argv, _, _ = command(ServeOptions(str(image), unix=str(tmp_path / "s"), serial=True))
    assert "reaction_us=0" in argv, "--serial: each request runs the loop to its own completion"
    argv, _, _ = command(ServeOptions(str(image), unix=str(tmp_path / "s"), reaction_lag=4))
    assert "reaction_us=100000" in argv and "reaction_lag=4" in argv
    plugin = next(a for a in argv if a.endswith("libnearflash_nbd.so"))
    assert Path(plugin).is_file()
    ident = json.loads(next(a for a in argv if a.startswith("identify="))[9:])
    assert ident["lba_bytes"] == 4096 and ident["namespace_lbas"] == 13104


@pytest.mark.parametrize("param, msg", [
    ("reaction_lag=0", "reaction_lag=0: a positive integer"),
    ("reaction_lag=-1", "reaction_lag=-1: a positive integer"),
    ("reaction_lag=two", "reaction_lag=two: a positive integer"),
    ("reaction_us=1.5", "reaction_us=1.5: microseconds"),
    ("reaction_us=", "reaction_us=: microseconds"),
    ("reaction_window=1", "unknown parameter \"reaction_window\""),
])
def test_the_plugins_pacing_parameters_refuse_bad_values(image, tmp_path, param, msg):
    """Pace none's reaction parameters (given to nbdkit directly; `nearflash serve` keeps the defaults) are checked
    when nbdkit configures the plugin: it stops with the parameter named, before serving anything."""
    import subprocess

    need("nbdkit")
    argv, _, _ = command(ServeOptions(str(image), unix=str(tmp_path / "s")))
    p = subprocess.run([*argv, param, "--run", "true"], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and msg in p.stderr, p.stderr
    assert not (tmp_path / "s").exists() and not (image / "serve.json").exists()
