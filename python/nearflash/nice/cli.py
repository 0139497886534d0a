"""``nearflash nice ...``: train NICE-C's LeNet-5 weights."""

from __future__ import annotations

import argparse


def cmd_train(a: argparse.Namespace) -> int:
    from nearflash.nice.train import train

    print(train(a.out, epochs=a.epochs, seed=a.seed, limit=a.limit, batch=a.batch, lr=a.lr))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("nice", help="NICE: train NICE-C's LeNet-5")
    ns = p.add_subparsers(dest="nice_command", required=True)
    t = ns.add_parser("train", help="train LeNet-5 on Fashion-MNIST (candle, CPU; seeded) into NICE's weights file")
    t.add_argument("--out", default="lenet5_fashion.f32")
    t.add_argument("--epochs", type=int, default=6)
    t.add_argument("--seed", type=int, default=1)
    t.add_argument("--batch", type=int, default=64)
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--limit", type=int, help="train (and test) on the first N images only")
    t.set_defaults(fn=cmd_train)
