"""What a served device must survive: a client killed mid-request, clients writing at once, and `kill -9` of the
server itself; none may lose data that was flushed (or written with FUA)."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import numpy as np

from nbd_helpers import CLIENT_TIMEOUT_S, need, qemu_io, run
from nbd_helpers import image, serve  # noqa: F401  (fixtures)

MIB = 1 << 20


def test_client_killed_mid_request_loses_nothing_flushed(image, serve, tmp_path):
    need("qemu-io")
    s = serve(image)
    qemu_io(s.uri, "write -P 0x5a 0 1M", "flush")
    # Many 4 MiB writes (each one NBD request); kill the client while they stream.
    cmds = []
    for _ in range(300):
        cmds += ["-c", "write -P 0x77 8M 4M"]
    client = subprocess.Popen(["qemu-io", "-f", "raw", *cmds, s.uri], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    s.wait_status(lambda st: st["requests"]["write"] >= 3)
    client.send_signal(signal.SIGKILL)
    client.wait(timeout=CLIENT_TIMEOUT_S)
    assert s.proc.poll() is None, "the server outlives its client"
    st = s.wait_status(lambda st: st["requests"]["open_connections"] == 0)
    assert st["requests"]["write"] < 301, "the client was killed while it was writing"
    qemu_io(s.uri, "read -P 0x5a 0 1M")
    # Every block of the interrupted range holds the whole new pattern or what it held before (zeroes).
    out = tmp_path / "back"
    run(["nbdcopy", s.uri, str(out)])
    blocks = np.frombuffer(out.read_bytes()[8 * MIB : 12 * MIB], np.uint8).reshape(-1, 4096)
    assert np.all((blocks == 0x77).all(axis=1) | (blocks == 0).all(axis=1))


def test_concurrent_clients_each_keep_their_data(image, serve):
    need("qemu-io", "fio")
    s = serve(image)
    writers = []
    for i in range(4):
        cmds = []
        for k in range(16):  # 4 MiB per client in 256 KiB requests, interleaved with the others
            cmds += ["-c", f"write -P {0x11 * (i + 1)} {i * 4 * MIB + k * 256 * 1024} 256k"]
        cmds += ["-c", "flush"]
        writers.append(subprocess.Popen(["qemu-io", "-f", "raw", *cmds, s.uri], stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True))
    reader = subprocess.Popen(["fio", "--name=r", "--ioengine=nbd", f"--uri={s.uri}", "--rw=randread", "--bs=4k",
                               "--size=16m", "--offset=32m", "--number_ios=300", "--iodepth=4",
                               "--output-format=json"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for w in writers:
        out, _ = w.communicate(timeout=CLIENT_TIMEOUT_S)
        assert w.returncode == 0 and "failed" not in out, out
    out, _ = reader.communicate(timeout=CLIENT_TIMEOUT_S)
    assert reader.returncode == 0, out
    st = s.wait_status(lambda st: st["requests"]["open_connections"] == 0)
    assert st["requests"]["connections"] >= 5 and st["requests"]["errors"] == 0
    for i in range(4):
        qemu_io(s.uri, f"read -P {0x11 * (i + 1)} {i * 4}M 4M")


def test_kill_9_of_the_server_loses_nothing_flushed(image, serve):
    need("qemu-io")
    s = serve(image)
    qemu_io(s.uri, "write -P 0xa1 0 2M", "flush")          # flushed
    qemu_io(s.uri, "write -f -P 0xb2 4M 256k")             # written with FUA
    qemu_io(s.uri, "write -P 0xc3 8M 256k")                # neither: may be lost, but must not be garbage
    s.kill9()
    assert json.loads((image / "state.json").read_text())["clean"] is False, "the kill left the image unclean"
    p = run(["nbdinfo", "--size", s.uri], check=False)
    assert p.returncode != 0, "nothing serves the socket any more"
    s = serve(image)  # recovers the image, ignoring the dead server's status and pid files
    assert s.status()["recovery"] is not None
    qemu_io(s.uri, "read -P 0xa1 0 2M", "read -P 0xb2 4M 256k")
    p = qemu_io(s.uri, "read -P 0xc3 8M 256k", check=False)
    if "verification failed" in p.stdout:
        qemu_io(s.uri, "read -P 0 8M 256k")
    s.stop()
    # Stopped cleanly this time.
    time.sleep(0.05)
    assert json.loads((image / "state.json").read_text())["clean"] is True
