"""``nearflash cognitive ...``: train the hashing model, show a model, serve retrieval over HTTP."""

from __future__ import annotations

import argparse
import json
import signal
from pathlib import Path


def cmd_train(a: argparse.Namespace) -> int:
    from nearflash.cognitive.train import train

    print(train(a.out, bits=a.bits, epochs=a.epochs, seed=a.seed, limit=a.limit, batch=a.batch, lr=a.lr))
    return 0


def cmd_info(a: argparse.Namespace) -> int:
    from nearflash.cognitive.data import load_model

    m = load_model(a.model)
    print(json.dumps({"bits": m.bits, "metadata": {k: v for k, v in m.metadata.items() if k != "network"},
                      "layers": m.layers()}, indent=2))
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def catalogue_path(device: str, given: str | None) -> Path:
    """Where the host keeps what it knows of the device's deployment: `given`, or beside the image directory."""
    if given:
        return Path(given)
    d = Path(device).resolve()
    return d.with_name(d.name + ".cognitive.npz")


def cmd_serve(a: argparse.Namespace) -> int:
    import numpy as np

    from nearflash import Device
    from nearflash.cognitive.catalogue import Catalogue
    from nearflash.cognitive.data import fashion_mnist, load_model, shipped_model_path
    from nearflash.cognitive.serve import make_server
    from nearflash.cognitive.ssd import CognitiveSSD
    from nearflash.errors import InvalidArgument

    if not 0 <= a.port <= 65535:
        raise InvalidArgument(f"--port: {a.port}; 0 (any free port) to 65535")
    if not 1 <= a.backlog <= 65535:
        raise InvalidArgument(f"--backlog: {a.backlog}; connects from 1 to 65535")
    labels = None
    if a.database is not None:
        try:
            db = np.load(a.database, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise InvalidArgument(f"--database: {a.database}: not a readable .npy file ({e})") from None
    else:
        if a.db < 1:
            raise InvalidArgument(f"--db: {a.db}; at least 1 image")
        db, labels = fashion_mnist("train", a.db)
    model_path = Path(a.model) if a.model else shipped_model_path()
    model = load_model(model_path)
    dev = Device(a.device, create=False)
    try:
        ssd = CognitiveSSD(dev, method=a.method)
        setup = {"layout": a.layout, "calibration": min(1000, len(db)), "seed": a.seed}
        where = catalogue_path(a.device, a.catalogue)
        kept = None if a.redeploy else Catalogue.load(where)
        if kept is not None and kept.matches(model_path.read_bytes(), db, setup) and kept.digest == ssd.deployment:
            ssd.resume(model, db, kept.codes, kept.digest, **setup)
            what = f"resumed the deployment of {len(db)} images ({a.layout}) the device holds ({kept.digest})"
        else:
            t = ssd.deploy(model, db, **setup)
            Catalogue.of(ssd, model_path.read_bytes(), db, setup).save(where)
            what = f"deployed {len(db)} images ({a.layout}) in {t / 1e6:.1f} ms of device time"
        server = make_server(ssd, a.host, a.port, verbose=a.verbose, backlog=a.backlog, labels=labels)
        host, port = server.server_address[:2]
        print(f"{what}; serving http://{host}:{port}/search?t=T (POST a 28x28 image) and /stats", flush=True)
        # SIGTERM (kill, systemd, docker stop) stops like Ctrl-C: the device closes and keeps its deployment
        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            signal.signal(signal.SIGTERM, previous)
            server.server_close()
    finally:
        dev.close()
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cognitive", help="Cognitive SSD: train and inspect the hashing model")
    cs = p.add_subparsers(dest="cognitive_command", required=True)
    t = cs.add_parser("train", help="train the Fashion-MNIST hashing CNN (candle, CPU; seeded)")
    t.add_argument("--out", default="fashion_hash48.safetensors")
    t.add_argument("--bits", type=int, default=48)
    t.add_argument("--epochs", type=int, default=3)
    t.add_argument("--seed", type=int, default=1)
    t.add_argument("--batch", type=int, default=64)
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--limit", type=int, help="train on the first N images only")
    t.set_defaults(fn=cmd_train)
    i = cs.add_parser("info", help="layers and training record of a model (default: the shipped one)")
    i.add_argument("model", nargs="?")
    i.set_defaults(fn=cmd_info)
    s = cs.add_parser("serve", help="HTTP retrieval endpoint over a device image (POST /search?t=T, GET /stats)")
    s.add_argument("device", help="image directory with reserved blocks for DLG-x (nearflash create PATH "
                                  "--set ext_reserved_blocks=R)")
    s.add_argument("--port", type=int, default=8080, help="TCP port (default 8080; 0: any free port)")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    s.add_argument("--db", type=int, default=10000, help="index the first N Fashion-MNIST training images "
                                                         "(default 10000)")
    s.add_argument("--database", metavar="NPY", help="index these images instead (uint8, (n, 784) or (n, 28, 28))")
    s.add_argument("--model", help="hashing model (default: the shipped one)")
    s.add_argument("--layout", default="two_hop", choices=["two_hop", "plain"])
    s.add_argument("--method", default="B", choices=["A", "B"])
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--backlog", type=int, default=128, help="listen backlog: connects queued before they are "
                                                            "accepted (default 128)")
    s.add_argument("--catalogue", metavar="NPZ", help="the host's record of the deployment (default: "
                                                      "DEVICE.cognitive.npz beside the image); a matching one on a "
                                                      "device that still holds it is resumed without DLG_config")
    s.add_argument("--redeploy", action="store_true", help="deploy even if the device holds this deployment")
    s.add_argument("--verbose", action="store_true", help="log each request")
    s.set_defaults(fn=cmd_serve)
