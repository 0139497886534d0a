"""Records the block traces of tests/fixtures/traces from unmodified programs run against `nearflash serve --log`.

Each program sees a fresh 256 MiB device (cosmos-plus, 2 channels) exported over NBD on a Unix socket; nbdkit's log
filter, placed behind the blocksize filter, writes every request the device is given (`<name>.nbdkit.log`), and
`nearflash trace convert` writes the same requests in the fixture's format. Programs that need a file rather than
an NBD URI reach the export through nbdfuse (a FUSE file backed by NBD); SQLite reaches an ext4 file system on it
through fuse2fs (user-space ext4): no kernel block device or kernel mount is involved.

    .venv/bin/python scripts/record_traces.py [--out tests/fixtures/traces] [--only mke2fs fio ...]

Needs nbdkit, nbdfuse and a usable /dev/fuse, mke2fs, fio, qemu-img, fuse2fs and sqlite3 (Debian: nbdkit
libnbd-bin e2fsprogs fio qemu-utils fuse2fs sqlite3). The recordings differ run to run in their times (they are wall
clock) and, for the programs that run concurrent requests, in their order: the committed fixtures are one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
DEVICE = ["--set", "channels=2", "--set", "chips_per_channel=1", "--set", "blocks_per_plane=128",
          "--set", "pages_per_block=64", "--set", "over_provisioning=20%"]


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


def version(cmd: list[str]) -> str:
    p = subprocess.run(cmd, capture_output=True, text=True)
    return (p.stdout or p.stderr).strip().splitlines()[0] if (p.stdout or p.stderr).strip() else "?"


class Served:
    """`nearflash serve IMG --unix SOCK --log LOG` for one recording."""

    def __init__(self, work: Path, log: Path):
        self.img, self.sock = work / "img", work / "s.sock"
        run([PY, "-m", "nearflash.cli", "create", str(self.img), *DEVICE])
        self.proc = subprocess.Popen([PY, "-m", "nearflash.cli", "serve", str(self.img), "--unix", str(self.sock),
                                      "--log", str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        pid = self.img / "serve.pid"
        deadline = time.monotonic() + 60
        while not (pid.exists() and pid.read_text().strip() == str(self.proc.pid)):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"nearflash serve did not start: {self.proc.stderr.read()}")
            time.sleep(0.05)
        self.uri = f"nbd+unix:///?socket={self.sock}"

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)


class Fused:
    """The export as a file (nbdfuse), unmounted at the end."""

    def __init__(self, uri: str, where: Path):
        where.mkdir()
        self.dir, self.file = where, where / "disk"
        self.proc = subprocess.Popen(["nbdfuse", str(self.file), uri], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while not self.file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"nbdfuse did not start (is /dev/fuse usable?): {self.proc.stderr.read()}")
            time.sleep(0.05)

    def close(self) -> None:
        run(["umount", str(self.dir)])
        self.proc.wait(timeout=60)


def tree(where: Path) -> Path:
    """The directory tree mke2fs copies: this repository's docs and presets (real files, about 0.4 MiB)."""
    t = where / "tree"
    shutil.copytree(ROOT / "docs", t / "docs")
    shutil.copytree(ROOT / "presets", t / "presets")
    return t


def mke2fs(s: Served, work: Path) -> str:
    f = Fused(s.uri, work / "fuse")
    try:
        run(["mke2fs", "-q", "-F", "-t", "ext4", "-d", str(tree(work)), str(f.file), "64M"])
    finally:
        f.close()
    return "mke2fs -t ext4 -d TREE (this repository's docs/ and presets/) on a 64 MiB file system, through nbdfuse"


def fio(s: Served, work: Path) -> str:
    run(["fio", "--name=mixed", "--ioengine=nbd", f"--uri={s.uri}", "--rw=randrw", "--rwmixread=70", "--bsrange=4k-64k",
         "--size=128m", "--number_ios=1500", "--iodepth=8", "--randseed=7"])
    return "fio --ioengine=nbd --rw=randrw --rwmixread=70 --bsrange=4k-64k --size=128m --number_ios=1500 --iodepth=8"


def qemu_img(s: Served, work: Path) -> str:
    src = work / "src.qcow2"
    run(["qemu-img", "create", "-q", "-f", "qcow2", str(src), "96M"])
    cmds = [c for i in range(24) for c in ("-c", f"write -P {i + 1} {i * 4}M 1M")]
    run(["qemu-io", "-f", "qcow2", *cmds, str(src)])
    run(["qemu-img", "convert", "-n", "-f", "qcow2", "-O", "raw", str(src), s.uri])
    return "qemu-img convert -n -f qcow2 -O raw SRC (96 MiB, 24 MiB written in 1 MiB extents by qemu-io) to the export"


def sqlite(s: Served, work: Path) -> str:
    f = Fused(s.uri, work / "fuse")
    mnt = work / "mnt"
    mnt.mkdir()
    try:
        run(["mke2fs", "-q", "-F", "-t", "ext4", str(f.file), "64M"])
        fs = subprocess.Popen(["fuse2fs", "-f", str(f.file), str(mnt), "-o", "fakeroot"], stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while not os.path.ismount(mnt):
            if fs.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"fuse2fs did not mount: {fs.stderr.read()}")
            time.sleep(0.05)
        sql = ("PRAGMA journal_mode=WAL; CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, v TEXT); "
               "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 20000) "
               "INSERT INTO t SELECT i, (i * 7919) % 1000, printf('%040d', i) FROM c; CREATE INDEX tk ON t(k); "
               "SELECT count(*), sum(length(v)) FROM t WHERE k < 100; PRAGMA wal_checkpoint(TRUNCATE);")
        run(["sqlite3", str(mnt / "test.db"), sql])
        run(["umount", str(mnt)])
        fs.wait(timeout=60)
    finally:
        f.close()
    return ("mke2fs -t ext4 (64 MiB) through nbdfuse, then fuse2fs mounts it and sqlite3 builds a 20,000-row table "
            "with an index, queries it and checkpoints its WAL")


#: name -> (program, fixture format)
RECORDINGS = {"mke2fs": (mke2fs, "blkparse"), "fio": (fio, "msr"), "qemu-img": (qemu_img, "fio"),
              "sqlite": (sqlite, "mqsim")}
SUFFIX = {"blkparse": "blktrace.txt", "fio": "iolog", "msr": "csv", "mqsim": "trace"}
#: Recordings whose raw nbdkit log is kept beside the fixture (the small one: the converter's and replay's
#: exactness tests read it); the others are reproduced by running this script.
KEEP_LOGS = {"qemu-img"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures" / "traces")
    ap.add_argument("--only", nargs="*", choices=list(RECORDINGS))
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    provenance = {}
    tools = {t: version(c) for t, c in {"nbdkit": ["nbdkit", "--version"], "fio": ["fio", "--version"],
                                        "qemu-img": ["qemu-img", "--version"], "sqlite3": ["sqlite3", "--version"],
                                        "mke2fs": ["mke2fs", "-V"], "nbdfuse": ["nbdfuse", "--version"]}.items()}
    for name in a.only or RECORDINGS:
        program, fmt = RECORDINGS[name]
        with tempfile.TemporaryDirectory(prefix="nf-rec-", dir="/tmp") as w:
            work = Path(w)
            log = a.out / f"{name}.nbdkit.log"
            log.unlink(missing_ok=True)
            s = Served(work, log)
            try:
                what = program(s, work)
            finally:
                s.stop()
        fixture = a.out / f"{name}.{SUFFIX[fmt]}"
        r = json.loads(run([PY, "-m", "nearflash.cli", "trace", "convert", str(log), str(fixture), "--to", fmt,
                            "--json"]).stdout)
        provenance[name] = {"program": what, "format": fmt, "log": log.name if name in KEEP_LOGS else None,
                            "fixture": fixture.name,
                            "requests": r["read"]["requests"], "written": r["written"], "recorded": time.strftime("%Y-%m-%d")}
        print(f"{name}: {r['read']['requests']} requests -> {fixture.name} ({r['written']})")
        if name not in KEEP_LOGS:
            log.unlink()
    prov = a.out / "provenance.json"
    old = json.loads(prov.read_text()) if prov.exists() else {}
    old.update({"tools": tools, "device": " ".join(DEVICE), "recordings": {**old.get("recordings", {}), **provenance}})
    prov.write_text(json.dumps(old, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
