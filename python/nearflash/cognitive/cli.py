"""``nearflash cognitive ...``: train the hashing model, show a model."""

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
