"""`nearflash serve`: checks everything it can before starting, then replaces itself with nbdkit running our plugin.

The plugin is a Rust library (crates/nearflash-nbd, `libnearflash_nbd.so`) that nbdkit loads directly: thread model
parallel, so that requests in flight reach the device concurrently. It is found in NEARFLASH_NBD_PLUGIN, the source
tree's target/release (scripts/env.sh builds it), or built with cargo from a source checkout. The process is
replaced (exec) rather than supervised, so signals reach nbdkit directly: SIGINT/SIGTERM close the image cleanly,
and a `kill -9` of the server is a kill of nbdkit itself.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from nearflash import _native
from nearflash.errors import InvalidArgument
from nearflash.nbd.stats import image_locked, read_status

PLUGIN_LIB = "libnearflash_nbd.so"
#: Pace none: how long the event loop waits for a client's reaction to a reply (us; ServeConfig::reaction_window);
#: `--serial` sets none (each request runs the loop to its own completion at once).
REACTION_WINDOW_US = 100_000
#: Pace none: completions that may await their clients' reactions before the loop holds (ServeConfig::reaction_lag).
MAX_REACTION_LAG = 1024
PLUGIN_CRATE = "nearflash-nbd"
REPO = Path(__file__).resolve().parents[3]
DEFAULT_PORT = 10809  # IANA's NBD port
PACES = ("none", "realtime")
#: nbdkit worker threads per connection: the deepest client queue the device can see.
DEFAULT_THREADS = 64
UNIX_PATH_MAX = 107  # sun_path holds 108 bytes with the terminating NUL


@dataclass
class ServeOptions:
    image: str
    port: Optional[int] = None
    unix: Optional[str] = None
    bind: str = "127.0.0.1"
    read_only: bool = False
    ext: list[str] = field(default_factory=list)
    seed: int = 1
    pace: str = "none"
    #: Pace none: serve requests in flight one after the other in virtual time, without holding the event loop for
    #: the clients' reactions (the plugin's reaction_us=0): the fastest wall-clock rate, the depth not kept.
    serial: bool = False
    #: Pace none: completions that may await their reactions before the loop holds (None: the plugin's default).
    reaction_lag: Optional[int] = None
    threads: int = DEFAULT_THREADS
    log: Optional[str] = None


def find_nbdkit() -> str:
    exe = shutil.which("nbdkit")
    if exe is None:
        raise InvalidArgument("nbdkit is not installed (Debian: apt-get install nbdkit)")
    return exe


def find_plugin() -> str:
    """The plugin library: NEARFLASH_NBD_PLUGIN, the source tree's build, or built now from a source checkout."""
    env = os.environ.get("NEARFLASH_NBD_PLUGIN")
    if env:
        if not Path(env).is_file():
            raise InvalidArgument(f"NEARFLASH_NBD_PLUGIN={env}: no such file")
        return env
    built = REPO / "target" / "release" / PLUGIN_LIB
    if built.is_file():
        return str(built)
    if (REPO / "crates" / PLUGIN_CRATE / "Cargo.toml").exists() and shutil.which("cargo"):
        p = subprocess.run(["cargo", "build", "--quiet", "--release", "--manifest-path", str(REPO / "Cargo.toml"), "-p",
                            PLUGIN_CRATE], capture_output=True, text=True)
        if p.returncode == 0 and built.is_file():
            return str(built)
        why = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit status {p.returncode}"
        raise InvalidArgument(f"building the NBD plugin failed ({why})")
    raise InvalidArgument(f"the NBD plugin {PLUGIN_LIB} is not built: cargo build --release -p {PLUGIN_CRATE} "
                          f"(or set NEARFLASH_NBD_PLUGIN)")


def check_plugin(nbdkit: str, plugin: str) -> None:
    """nbdkit can load the plugin (`--dump-plugin`); a library built for another nbdkit is refused here."""
    p = subprocess.run([nbdkit, plugin, "--dump-plugin"], capture_output=True, text=True, timeout=30)
    if p.returncode != 0 or "name=nearflash" not in p.stdout:
        why = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit status {p.returncode}"
        raise InvalidArgument(f"nbdkit cannot load the NBD plugin {plugin}: {why}")


def _check_unix(path: str) -> str:
    p = Path(path).absolute()
    if len(os.fsencode(str(p))) > UNIX_PATH_MAX:
        raise InvalidArgument(f"--unix: the socket path is {len(os.fsencode(str(p)))} bytes; at most {UNIX_PATH_MAX}")
    if not p.parent.is_dir():
        raise InvalidArgument(f"--unix: directory {p.parent} does not exist")
    if not os.access(p.parent, os.W_OK):
        raise InvalidArgument(f"--unix: cannot create a socket in {p.parent} (no write permission)")
    if p.exists() or p.is_symlink():
        mode = p.lstat().st_mode
        kind = "a socket" if stat.S_ISSOCK(mode) else "a directory" if stat.S_ISDIR(mode) else "a file"
        raise InvalidArgument(f"--unix: {p} already exists ({kind}); remove it or choose another path")
    return str(p)


def _check_tcp(bind: str, port: int) -> None:
    if not 1 <= port <= 65535:
        raise InvalidArgument(f"--port must be in 1..65535, got {port}")
    try:
        addr = ipaddress.ip_address(bind)
    except ValueError:
        raise InvalidArgument(f"--bind must be an IP address, got {bind!r}") from None
    family = socket.AF_INET6 if addr.version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((bind, port))
        except OSError as e:
            raise InvalidArgument(f"--port {port} on {bind}: {e.strerror}") from None


def _check_ext(spec: str) -> None:
    name, _, params = spec.partition(":")
    if name not in _native.extensions():
        raise InvalidArgument(f"--ext: unknown extension {name!r}; available: {', '.join(_native.extensions())}")
    if params:
        try:
            value = json.loads(params)
        except ValueError as e:
            raise InvalidArgument(f"--ext {name}: parameters must be a JSON object ({e})") from None
        if not isinstance(value, dict):
            raise InvalidArgument(f"--ext {name}: parameters must be a JSON object, got {params!r}")


def _check_ext_attach(image: str, ext: list[str]) -> None:
    """Attaches the extensions to a timing-only twin of the image (its configuration, in memory) so that bad
    parameters or conflicting extensions are refused before the image is opened (and its files touched)."""
    from nearflash.device import Device

    if not ext:
        return
    config = Path(image) / "nearflash.toml"
    if not config.is_file():
        raise InvalidArgument(f"{image} is not a device image (no nearflash.toml)")
    with Device(None, preset=str(config), materialise=False) as twin:
        for spec in ext:
            name, _, params = spec.partition(":")
            twin.attach(name, **(json.loads(params) if params else {}))


def _check_image(image: str, ext: list[str], seed: int) -> tuple[int, Optional[dict[str, Any]], dict[str, Any]]:
    """(lba_bytes, what crash recovery did, Identify) of the image, opened once with its extensions attached (an
    image left unclean by a killed server is recovered here, and extension state saved in it is restored)."""
    from nearflash.device import Device

    with Device(image, seed=seed, create=False) as dev:
        for spec in ext:
            name, _, params = spec.partition(":")
            dev.attach(name, **(json.loads(params) if params else {}))
        return dev.lba_bytes, dev.recovery, dev.identify()


def _check_log(path: str) -> str:
    p = Path(path).absolute()
    if not p.parent.is_dir():
        raise InvalidArgument(f"--log: directory {p.parent} does not exist")
    if p.is_dir():
        raise InvalidArgument(f"--log: {p} is a directory")
    if p.exists() and not os.access(p, os.W_OK) or not os.access(p.parent, os.W_OK):
        raise InvalidArgument(f"--log: cannot write {p}")
    return str(p)


def command(opts: ServeOptions) -> tuple[list[str], dict[str, str], str]:
    """Validates `opts` and returns (argv, environment, URI) of the nbdkit that serves the image."""
    if opts.port is not None and opts.unix is not None:
        raise InvalidArgument("give --port or --unix, not both")
    if opts.unix is not None:
        sock = _check_unix(opts.unix)
        where, uri = ["-U", sock], f"nbd+unix:///?socket={sock}"
    else:
        port = DEFAULT_PORT if opts.port is None else opts.port
        _check_tcp(opts.bind, port)
        host = f"[{opts.bind}]" if ":" in opts.bind else opts.bind
        where, uri = ["-i", opts.bind, "-p", str(port)], f"nbd://{host}:{port}"
    for spec in opts.ext:
        _check_ext(spec)
    if opts.pace not in PACES:
        raise InvalidArgument(f"--pace must be one of {', '.join(PACES)}, got {opts.pace!r}")
    if not isinstance(opts.serial, bool):
        raise InvalidArgument(f"--serial must be True or False, got {opts.serial!r}")
    if opts.serial and opts.pace != "none":
        raise InvalidArgument("--serial applies to --pace none only (realtime requests overlap as they arrive)")
    lag = opts.reaction_lag
    if lag is not None:
        if isinstance(lag, bool) or not isinstance(lag, int) or not 1 <= lag <= MAX_REACTION_LAG:
            raise InvalidArgument(f"--reaction-lag must be in 1..{MAX_REACTION_LAG}, got {lag!r}")
        if opts.pace != "none" or opts.serial:
            raise InvalidArgument("--reaction-lag applies to --pace none without --serial (the loop held for reactions)")
    if isinstance(opts.threads, bool) or not isinstance(opts.threads, int) or not 1 <= opts.threads <= 1024:
        raise InvalidArgument(f"--threads must be in 1..1024, got {opts.threads!r}")
    log = _check_log(opts.log) if opts.log is not None else None
    nbdkit = find_nbdkit()
    plugin = find_plugin()
    check_plugin(nbdkit, plugin)
    image = str(Path(opts.image).absolute())
    d = Path(image)
    if not d.is_dir() or not (d / "state.json").is_file():
        raise InvalidArgument(f"{opts.image} is not a device image (create one with `nearflash create {opts.image}`)")
    if image_locked(d):
        served = read_status(d)
        who = f" (served by pid {served['pid']} at {served['address']})" if served else ""
        raise InvalidArgument(f"{opts.image} is open in another process{who}")
    _check_ext_attach(image, opts.ext)
    lba_bytes, recovery, identify = _check_image(image, opts.ext, opts.seed)
    pidfile = Path(image) / "serve.pid"
    pidfile.unlink(missing_ok=True)  # left by a server that was killed (the image was not locked)
    # The log filter sits behind blocksize: it records the requests the device is given (whole blocks, at most
    # maxdata each), so that replaying the log issues exactly what the recording did.
    filters = ["--filter=blocksize", *(["--filter=log"] if log else [])]
    argv = [nbdkit, "--foreground", *where, "-P", str(pidfile), "--threads", str(opts.threads),
            *(["--readonly"] if opts.read_only else []), *filters, plugin, f"image={image}", f"seed={opts.seed}",
            f"address={uri}", f"readonly={'true' if opts.read_only else 'false'}", f"pace={opts.pace}",
            f"threads={opts.threads}",
            *([f"reaction_us={0 if opts.serial else REACTION_WINDOW_US}"] if opts.pace == "none" else []),
            *([f"reaction_lag={lag}"] if lag is not None else []),
            f"identify={json.dumps(identify)}", f"minblock={lba_bytes}", "maxdata=4M",
            *([f"logfile={log}", "logappend=true"] if log else []),
            *[f"ext={e}" for e in opts.ext], *([f"recovery={json.dumps(recovery)}"] if recovery else [])]
    return argv, dict(os.environ), uri


def serve(opts: ServeOptions) -> None:
    """Replaces this process with the nbdkit that serves the image (returns only by raising)."""
    argv, env, uri = command(opts)
    recovered = [a for a in argv if a.startswith("recovery=")]
    if recovered:
        print(f"nearflash serve: the image was not closed cleanly; recovered: {recovered[0][9:]}", file=sys.stderr)
    mode = "read-only" if opts.read_only else "read-write"
    print(f"nearflash serve: {opts.image} ({mode}, pace {opts.pace}) at {uri}; `nearflash info {opts.image}` shows "
          f"its figures, Ctrl-C stops it", file=sys.stderr, flush=True)
    os.execve(argv[0], argv, env)


def status(image: str) -> Optional[dict[str, Any]]:
    """The served device's status (see `nearflash.nbd.stats`), or None if it is not being served."""
    return read_status(image)
