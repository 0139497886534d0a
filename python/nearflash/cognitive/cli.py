"""``nearflash cognitive ...``: train the hashing model, show a model, serve retrieval over HTTP."""

from __future__ import annotations

import argparse
import json


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


def cmd_serve(a: argparse.Namespace) -> int:
    import numpy as np

    from nearflash import Device
    from nearflash.cognitive.data import fashion_mnist, load_model
    from nearflash.cognitive.serve import make_server
    from nearflash.cognitive.ssd import CognitiveSSD
    from nearflash.errors import InvalidArgument

    if not 0 <= a.port <= 65535:
        raise InvalidArgument(f"--port: {a.port}; 0 (any free port) to 65535")
    if a.database is not None:
        try:
            db = np.load(a.database, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise InvalidArgument(f"--database: {a.database}: not a readable .npy file ({e})") from None
    else:
        if a.db < 1:
            raise InvalidArgument(f"--db: {a.db}; at least 1 image")
        db, _ = fashion_mnist("train", a.db)
    dev = Device(a.device, create=False)
    try:
        ssd = CognitiveSSD(dev, method=a.method)
        t = ssd.deploy(load_model(a.model), db, layout=a.layout, calibration=min(1000, len(db)), seed=a.seed)
        server = make_server(ssd, a.host, a.port, verbose=a.verbose)
        host, port = server.server_address[:2]
        print(f"deployed {len(db)} images ({a.layout}) in {t / 1e6:.1f} ms of device time; "
              f"serving http://{host}:{port}/search?t=T (POST a 28x28 image) and /stats", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
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
    s.add_argument("--verbose", action="store_true", help="log each request")
    s.set_defaults(fn=cmd_serve)
